"""The gate's YAML files, read strictly (duplicate and unknown keys are errors), and
oracle/judge.yaml as the `Config` every step uses: each default is written here once.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from _gate.core.protocol import FailClosed
from _gate.plugin.worker import CALL_TIMEOUT

# The worlds a perturbed run is judged in (runs/perturb.py), in the order judge.yaml lists them.
PERTURBATIONS = ("env", "clock", "terminal", "files")
# What package code may reach for (change/capabilities.py reads them from its source), and
# whether one new to its module needs a code owner's review (judge.yaml `capabilities:`).
CAPABILITIES: dict[str, bool] = {
    "env": False,
    "clock": False,
    "filesystem": False,
    "network": True,
    "process": True,
    "terminal": False,
    "ioctl": True,
    "introspection": False,
    "dynamic": True,
    "native": True,
}
MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
MODEL_ENV_DEFAULT = ("MODEL_ENDPOINT", "MODEL_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


class _DuplicateKey(Exception):
    def __init__(self, key: object, line: int, first: int) -> None:
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


def _unique_key_loader() -> type:
    """A SafeLoader that refuses a repeated key: YAML keeps the last one silently, so a second
    `protected:` would drop every default protection. Keys brought in by `<<` merges may be
    overridden, as YAML intends."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: dict[object, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                    continue
                key = self.construct_object(key_node, deep=False)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _DuplicateKey(key, line, seen[key])
                seen[key] = line
            return dict(super().construct_mapping(node, deep=deep))

    return UniqueKeyLoader


def load_yaml(path: Path, data: bytes | None = None) -> Any:
    """Parse a YAML file (or `data`, its bytes read elsewhere, such as from a commit), turning
    every parse problem into one line with the file and line."""
    import yaml  # local import: --help works before PyYAML is installed

    try:
        text = (path.read_bytes() if data is None else data).decode("utf-8")
    except FileNotFoundError:
        raise FailClosed(f"{path}: file is missing; restore it from the base branch") from None
    except UnicodeDecodeError as exc:
        raise FailClosed(f"{path}: not UTF-8 at byte {exc.start}; save it as UTF-8") from None
    try:
        return yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader subclass
    except _DuplicateKey as dup:
        raise FailClosed(
            f"{path}: line {dup.line}: duplicate key {dup.key!r} (first on line {dup.first}); "
            "keep one: YAML would silently use only the last"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FailClosed(f"{path}: {line}malformed YAML ({problem}); fix the syntax") from None


def require_mapping(value: Any, where: str, known: Sequence[str]) -> dict[str, Any]:
    """A mapping with string keys, every key known: unknown keys are typos that would be ignored."""
    if not isinstance(value, dict):
        raise FailClosed(f"{where}: expected a mapping, got {type(value).__name__}")
    problems = unknown_keys(value, where, known)
    if problems:
        raise FailClosed("; ".join(problems))
    return value


def unknown_keys(value: dict[Any, Any], where: str, known: Sequence[str]) -> list[str]:
    """One problem per unknown key, with the known key it is closest to (a typo's fix)."""
    names = ", ".join(known)
    problems = []
    for key in sorted(str(key) for key in value if key not in known):
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known fields are {names}"
        problems.append(f"{where}: unknown field {key!r}; {hint}")
    return problems


def expected(kind: type | tuple[type, ...]) -> str:
    """A type as a YAML author reads it."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds:
        return "a number"
    words = {str: "a string", list: "a list of strings", int: "a whole number", dict: "a mapping"}
    return words.get(kinds[0], kinds[0].__name__)


def load_rows(path: Path, key: str, fields: Sequence[str]) -> list[dict[str, Any]]:
    """`key:` a list of rows, each with exactly `fields`, none empty (allowlist, quarantine)."""
    raw = require_mapping(load_yaml(path) or {key: []}, str(path), (key,))
    rows = raw.get(key) or []
    if not isinstance(rows, list):
        raise FailClosed(f"{path}: field {key!r} must be a list of rows")
    for index, row in enumerate(rows):
        where = f"{path}: {key} row #{index + 1}"
        data = require_mapping(row, where, fields)
        for name in fields:
            if data.get(name) is None or not str(data[name]).strip():
                raise FailClosed(f"{where}: field {name!r} is required; a reviewed row names it")
    return rows


@dataclass(frozen=True)
class Config:
    """oracle/judge.yaml: the judge's settings, read from the base revision."""

    command: str
    base_branch: str
    oracle_ref: str
    protected: tuple[str, ...]
    tests: tuple[str, ...] = ("tests",)  # files or folders, relative to the tree's root
    model_env: tuple[str, ...] = ()
    assert_helpers: tuple[str, ...] = ()
    flake_max_retry: int = 1
    variance_runs: int = 5
    variance_machines: int = 2
    duration_cv_max: float = 0.35
    ledger_ttl_days: int = 14
    case_timeout: float = 10.0
    advisory_timeout: float = 300.0
    call_timeout: float = CALL_TIMEOUT
    crossrun: str = "block"
    crossrun_timeout: float = 900.0
    test_extra: str = ""
    strength_paths: tuple[str, ...] = ("src",)  # the code `nox -s strength` mutates
    strength_min: float = 0.0  # a base whose oracle kills a smaller share fails closed; 0: off
    jobs: int = 0  # steps run at once after the builds; 0: the number of CPUs
    sandbox: str = "required"  # or best-effort: judge unconfined where the kernel cannot confine
    # The environments replay runs cases in besides its own (docs/perturbation.md).
    perturb: tuple[str, ...] = PERTURBATIONS
    perturb_required: tuple[str, ...] = ()  # of those, the ones a machine lacking fails closed
    # Reviewed capabilities new to a module that need no review again, as `module:capability`.
    capabilities: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.jobs <= 0:
            object.__setattr__(self, "jobs", os.cpu_count() or 1)

    @property
    def model_variables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*MODEL_ENV_DEFAULT, *self.model_env)))


CONFIG_TYPES: dict[str, type | tuple[type, ...]] = {
    "command": str,
    "base_branch": str,
    "oracle_ref": str,
    "protected": list,
    "tests": list,
    "model_env": list,
    "assert_helpers": list,
    "flake_max_retry": int,
    "variance_runs": int,
    "variance_machines": int,
    "duration_cv_max": (int, float),
    "ledger_ttl_days": int,
    "case_timeout": (int, float),
    "advisory_timeout": (int, float),
    "call_timeout": (int, float),
    "crossrun": str,
    "crossrun_timeout": (int, float),
    "test_extra": str,
    "strength_paths": list,
    "strength_min": (int, float),
    "jobs": int,
    "sandbox": str,
    "perturb": list,
    "perturb_required": list,
    "capabilities": dict,
}


CONFIG_CHOICES = {"crossrun": ("block", "advisory", "off"), "sandbox": ("required", "best-effort")}


# Counts below which a setting would make its step do nothing without saying so.
CONFIG_MINIMUM: dict[str, int] = {
    "flake_max_retry": 0,
    "variance_runs": 2,
    "variance_machines": 1,
    "ledger_ttl_days": 1,
    "jobs": 0,
}


CONFIG_FILE = "oracle/judge.yaml"
CONFIG_REQUIRED = ("command", "base_branch", "oracle_ref", "protected")


def load_config(path: Path, data: bytes | None = None) -> Config:
    """oracle/judge.yaml as a Config; every problem of the file at once, in one line."""
    raw = load_yaml(path, data)
    if not isinstance(raw, dict):
        raise FailClosed(f"{path}: expected a mapping of settings, got {type(raw).__name__}")
    problems = unknown_keys(raw, str(path), list(CONFIG_TYPES))
    problems += [
        f"{path}: field {key!r} is required; add it" for key in CONFIG_REQUIRED if key not in raw
    ]
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in CONFIG_TYPES:
            try:
                values[key] = setting(path, key, value)
            except FailClosed as exc:
                problems.append(str(exc))
    if problems:
        raise FailClosed("; ".join(problems))
    return Config(**values)


def setting(path: Path, key: str, value: Any) -> Any:
    """One setting of judge.yaml, checked: its type, choices and range, then what the setting
    itself asks (`SHAPED`), which gives its value."""
    choices = CONFIG_CHOICES.get(key)
    if choices:
        value = "off" if value is False else value  # YAML 1.1 reads a bare `off` as false
        if value not in choices:
            raise FailClosed(
                f"{path}: field {key!r} must be one of {', '.join(choices)}, not {value!r}"
            )
    kind = CONFIG_TYPES[key]
    wrong = not isinstance(value, kind) or isinstance(value, bool)
    if wrong or (isinstance(value, list) and not all(isinstance(i, str) for i in value)):
        raise FailClosed(f"{path}: field {key!r} must be {expected(kind)}, not {value!r}")
    if isinstance(value, int) and value < CONFIG_MINIMUM.get(key, value):
        raise FailClosed(f"{path}: field {key!r} must be at least {CONFIG_MINIMUM[key]}")
    shaped = SHAPED.get(key)
    if shaped is not None:
        return shaped(path, key, value)
    return tuple(value) if isinstance(value, list) else value


def share(path: Path, key: str, value: float) -> float:
    if not 0 <= value <= 1:
        raise FailClosed(f"{path}: field {key!r} is a share of mutants, from 0 to 1 (0.9)")
    return value


def perturbations(path: Path, key: str, value: list[str]) -> tuple[str, ...]:
    unknown = [name for name in value if name not in PERTURBATIONS]
    if unknown:
        known = ", ".join(PERTURBATIONS)
        raise FailClosed(
            f"{path}: field {key!r}: unknown perturbation {unknown[0]!r}; known: {known}"
        )
    return tuple(value)


def tests_entries(path: Path, key: str, value: list[str]) -> tuple[str, ...]:
    if not value:
        raise FailClosed(
            f"{path}: field 'tests' is empty; name the project's tests, folders or files "
            "(such as tests or test.py)"
        )
    return tuple(tests_entry(path, entry) for entry in value)


def reviewed_capabilities(path: Path, key: str, value: dict[Any, Any]) -> tuple[str, ...]:
    """`capabilities:` a mapping of module (or package) to the capabilities a code owner
    reviewed for it: `shop.cli: [process]`."""
    fix = "list each module with the capabilities reviewed for it, as `shop.cli: [process]`"
    rows = []
    for module, names in value.items():
        if not isinstance(module, str) or not MODULE_NAME.match(module):
            raise FailClosed(f"{path}: field 'capabilities': {module!r} is no module name; {fix}")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise FailClosed(f"{path}: field 'capabilities' {module}: expected a list; {fix}")
        unknown = [name for name in names if name not in CAPABILITIES]
        if unknown:
            raise FailClosed(
                f"{path}: field 'capabilities' {module}: unknown capability {unknown[0]!r}; "
                f"known: {', '.join(CAPABILITIES)}"
            )
        rows += [f"{module}:{name}" for name in names]
    return tuple(sorted(rows))


# The settings whose value is more than its type says: each checked, and given its value, by
# its own reader after the checks every setting has.
SHAPED: dict[str, Callable[[Path, str, Any], Any]] = {
    "strength_min": share,
    "perturb": perturbations,
    "perturb_required": perturbations,
    "tests": tests_entries,
    "capabilities": reviewed_capabilities,
}


def tests_entry(config: Path, entry: str) -> str:
    """A `tests:` entry as every step uses it: relative to the tree's root, `./x` and `x/`
    read as `x`; a file (a root test.py) or a folder."""
    if entry != entry.strip() or not entry.isprintable() or ":" in entry:
        raise FailClosed(
            f"{config}: field 'tests' entry {entry!r} is not a path: it has spaces at an end, a "
            "control character or a ':' (a node id or a line of pytest's output?); name a "
            "folder or file, such as tests or test.py"
        )
    clean = PurePosixPath(entry)
    if clean.is_absolute() or ".." in clean.parts or clean == PurePosixPath("."):
        raise FailClosed(
            f"{config}: field 'tests' entry {entry!r} is not a file or folder inside the "
            "project; name it relative to the root, such as tests or test.py"
        )
    return clean.as_posix()


def tree_tests(tree: Path) -> tuple[str, ...]:
    """`tests:` of the tree's own oracle/judge.yaml: what a step tests when not told."""
    config = tree / "oracle" / "judge.yaml"
    return load_config(config).tests if config.is_file() else Config.tests
