"""What pytest collects in a tree, and which pytest plugins the tree's configuration loads.

Used by the assert inventory (steps/assert_inventory.py). Collection runs the tree's own pytest
(`--collect-only`) in a build's environment, in its own process group, with plugin autoloading off:
an installed plugin (a `pytest11` entry point) is loaded only when the tree names it (`-p` in
`addopts`, `pytest_plugins`, `required_plugins`), so the ids do not depend on what else the
environment holds, and hypothesis' plugin does not cost seconds at import. Ids come from a plugin
object passed to `pytest.main` (`session.items` after deselection), not from the console, whose
format changes with `-q`/`-v` in `addopts`.
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import json
import re
import shlex
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from _gate.core.protocol import FailClosed
from _gate.core.pyproject import PYPROJECT, read, table
from _gate.plugin.patch_env import gate_env
from _gate.runs.envs import dist_infos
from _gate.runs.git import git
from _gate.runs.sandbox import at_home, run_confined

COLLECTION_KEYS = ("python_files", "python_classes", "python_functions", "testpaths")
INI_FILES = (("pytest.ini", "pytest"), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"))
# Variables that make pytest load a plugin without any file of the tree naming it.
PLUGIN_VARIABLES = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")
# Files that set variables for the processes a project starts (sessions, envs, recipes).
ENV_SETTING_FILES = ("noxfile.py", "tox.ini", "setup.cfg", "pyproject.toml", "Makefile", ".env")
COLLECT_TIMEOUT = 600.0

# Runs in the judged environment. `required_plugins` names distributions; with autoloading off
# pytest would reject them as missing, so their `pytest11` entry points are loaded by name.
BOOT = """\
import importlib.metadata as md, json, re, sys
out, required, args = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
def norm(name): return re.sub(r"[-_.]+", "-", name).lower()
want = {norm(re.match(r"[A-Za-z0-9._-]*", r).group()) for r in required}
for ep in (md.entry_points(group="pytest11") if want else ()):
    if ep.dist is not None and norm(ep.dist.name) in want:
        args = ["-p", ep.name, *args]
import pytest, warnings
class Ids:
    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector):  # as _gate/plugin/pytest_evidence.py's
        warnings.filterwarnings("default", category=pytest.PytestCollectionWarning)
        return (yield)
    def pytest_collection_finish(self, session):
        with open(out, "w", encoding="utf-8") as f:
            json.dump([item.nodeid for item in session.items], f)
sys.exit(pytest.main(args, plugins=[Ids()]))
"""


@dataclass(frozen=True)
class Named:
    """A plugin a tree names, and where."""

    name: str
    path: str
    line: int
    how: str


def _line_of(text: str, pattern: str) -> int:
    match = re.search(pattern, text, re.M)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def _strings(value: object) -> list[str]:
    """A TOML value as pytest reads a setting: a string, or a list of them."""
    if isinstance(value, list):
        return [str(v) for v in value]
    return [] if value is None else [str(value).lower() if isinstance(value, bool) else str(value)]


def read_text(path: Path) -> str:
    try:
        return path.read_text("utf-8", "replace") if path.is_file() else ""
    except OSError:
        return ""


class PytestConfig:
    """The pytest settings of one tree, from every file pytest reads them from."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.values: dict[str, dict[str, list[str]]] = {}  # file -> key -> values
        self.text: dict[str, str] = {}
        self.unreadable: list[str] = []
        for name, section in INI_FILES:
            text = read_text(root / name)
            if not text:
                continue
            self.text[name] = text
            parser = configparser.ConfigParser(interpolation=None)
            try:
                parser.read_string(text, source=name)
            except configparser.Error:
                self.unreadable.append(name)
                continue
            if parser.has_section(section):
                self.values[name] = {
                    key: (split_args(value) if key == "addopts" else value.split())
                    for key, value in parser[section].items()
                }
        text = read_text(root / PYPROJECT)
        self.text[PYPROJECT] = text
        data = read(root)
        if data is None:
            self.unreadable.append(PYPROJECT)
            return
        for header in ("tool.pytest.ini_options", "tool.pytest"):
            found = table(data, header)
            settings = found if isinstance(found, dict) else {}
            values = {
                key: _strings(value)
                for key, value in settings.items()
                if not isinstance(value, dict)  # [tool.pytest.ini_options] inside [tool.pytest]
            }
            if "addopts" in values and isinstance(settings.get("addopts"), str):
                values["addopts"] = split_args(values["addopts"][0])
            if values:
                self.values.setdefault(PYPROJECT, {}).update(values)

    def get(self, key: str) -> list[str]:
        """The value pytest uses: the first file that sets the key (pytest reads one file)."""
        for name in ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
            if key in self.values.get(name, {}):
                return self.values[name][key]
        return []

    def collection_settings(self) -> dict[str, str]:
        found = {f"{name}:unreadable": "1" for name in self.unreadable}
        for name, values in self.values.items():
            found.update(
                {f"{name}:{k}": " ".join(values[k]) for k in COLLECTION_KEYS if k in values}
            )
        return found

    def testpaths(self) -> list[str]:
        paths: list[str] = []
        for pattern in self.get("testpaths"):
            matches = sorted(self.root.glob(pattern)) if any(c in pattern for c in "*?[") else []
            paths += [m.relative_to(self.root).as_posix() for m in matches] or [pattern]
        return [p for p in paths if (self.root / p).exists()]

    def plugins(self) -> list[Named]:
        """Plugins loaded through `-p` in `addopts` (not `-p no:NAME`, which disables one)."""
        found = []
        for name, values in self.values.items():
            line = _line_of(self.text.get(name, ""), r"^\s*addopts\s*=")
            for plugin in _dash_p(values.get("addopts", [])):
                found.append(Named(plugin, name, line, f"addopts -p {plugin}"))
        return found


def config_file(root: Path) -> Path | None:
    """The file pytest reads its configuration from in `root`, by pytest's own precedence:
    pytest.ini whatever it holds, then the first of pyproject.toml, tox.ini and setup.cfg with
    a pytest section."""
    if (root / "pytest.ini").is_file():
        return root / "pytest.ini"
    found = PytestConfig(root).values
    return next((root / n for n in ("pyproject.toml", "tox.ini", "setup.cfg") if n in found), None)


def split_args(value: str) -> list[str]:
    """Arguments as pytest splits `addopts`; unbalanced quotes fall back to whitespace."""
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def _dash_p(args: Sequence[str]) -> list[str]:
    found = []
    for i, arg in enumerate(args):
        value = args[i + 1] if arg == "-p" and i + 1 < len(args) else ""
        if arg.startswith("-p") and arg != "-p":
            value = arg[2:].lstrip("=")
        if value and not value.startswith("no:"):
            found.append(value)
    return found


def pytest_plugins_of(path: str, source: bytes) -> list[Named]:
    """`pytest_plugins = ...` at module level of a conftest or test module."""
    if b"pytest_plugins" not in source:
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = []
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets = [stmt.target]
        if not any(isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in targets):
            continue
        value = getattr(stmt, "value", None)
        for node in ast.walk(value) if value is not None else ():
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in node.value.replace(",", " ").split():
                    found.append(Named(name, path, stmt.lineno, f"pytest_plugins = {name!r}"))
    return found


def entry_points(root: Path) -> list[Named]:
    """`pytest11` entry points the tree's own package declares: pytest loads them whenever the
    package is installed, with no file of the tests naming them."""
    found = []
    pyproject = read_text(root / PYPROJECT)
    points = table(read(root) or {}, "project")
    declared = table(points, "entry-points.pytest11") if isinstance(points, dict) else None
    for key, module in declared.items() if isinstance(declared, dict) else []:
        line = _line_of(pyproject, rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        found.append(Named(str(module), PYPROJECT, line, f"pytest11 entry point {key}"))
    setup_cfg = read_text(root / "setup.cfg")
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(setup_cfg)
        value = parser.get("options.entry_points", "pytest11", fallback="")
    except configparser.Error:
        value = ""
    for key, module in re.findall(r"^\s*([\w.-]+)\s*=\s*(\S+)", value, re.M):
        line = _line_of(setup_cfg, rf"^\s*{re.escape(key)}\s*=")
        found.append(Named(module, "setup.cfg", line, f"pytest11 entry point {key}"))
    setup_py = read_text(root / "setup.py")
    for match in re.finditer(r"pytest11[\"']\s*:\s*\[([^\]]*)\]", setup_py):
        line = setup_py.count("\n", 0, match.start()) + 1
        for key, module in re.findall(r"([\w.-]+)\s*=\s*([\w.:]+)", match.group(1)):
            found.append(Named(module, "setup.py", line, f"pytest11 entry point {key}"))
    return found


def variables_set(root: Path) -> list[Named]:
    """`PYTEST_ADDOPTS`/`PYTEST_PLUGINS` set in a file that sets variables for the project's
    sessions, environments or recipes: each plugin they name."""
    found = []
    for name in ENV_SETTING_FILES:
        for number, line in enumerate(read_text(root / name).splitlines(), 1):
            for variable in PLUGIN_VARIABLES:
                at = line.find(variable)
                if at < 0:
                    continue
                value = line[at + len(variable) :]
                plugins = _plugins_in_variable(variable, value)
                for plugin in plugins or [f"{variable} (unparsed)"]:
                    found.append(Named(plugin, name, number, f"{variable} in {name}"))
    return found


def _plugins_in_variable(variable: str, value: str) -> list[str]:
    text = re.sub(r"^[\s\"'\]:=,)]*", "", value)
    if variable == "PYTEST_PLUGINS":
        return re.findall(r"[A-Za-z_][\w.]*", text.split("#", 1)[0])[:8]
    return _dash_p(text.replace('"', " ").replace("'", " ").split())


def environment_plugins(env: Mapping[str, str]) -> list[Named]:
    """Plugins the judged environment itself loads into every pytest it starts."""
    found = []
    for plugin in _dash_p(split_args(env.get("PYTEST_ADDOPTS", ""))):
        found.append(Named(plugin, "PYTEST_ADDOPTS", 0, "PYTEST_ADDOPTS in the environment"))
    for plugin in env.get("PYTEST_PLUGINS", "").replace(",", " ").split():
        found.append(Named(plugin, "PYTEST_PLUGINS", 0, "PYTEST_PLUGINS in the environment"))
    return found


def named_plugins(root: Path, config: PytestConfig, sources: Mapping[str, bytes]) -> list[Named]:
    """Every plugin the tree makes pytest load: configuration, modules, variables, packaging."""
    found = config.plugins() + entry_points(root) + variables_set(root)
    for path, data in sorted(sources.items()):
        found += pytest_plugins_of(path, data)
    return found


def required_plugins(config: PytestConfig) -> list[str]:
    return config.get("required_plugins")


# --- collection -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collection:
    """The ids pytest collected (parameters kept), or why collection failed."""

    ids: tuple[str, ...] | None
    error: str = ""
    cached: bool = False


def tree_id(root: Path) -> str | None:
    """The git tree of a clean worktree's HEAD; None when there is none or it is dirty."""
    try:
        tree = git(root, "rev-parse", "HEAD^{tree}", check=False).strip()
        dirty = git(root, "status", "--porcelain", check=False).strip()
    except FailClosed:  # no git here: no cache, never an error
        return None
    return tree if re.fullmatch(r"[0-9a-f]{40,64}", tree) and not dirty else None


def collection_key(python: Path, root: Path, args: Sequence[str], autoload: bool) -> str | None:
    tree = tree_id(root)
    if tree is None:
        return None
    key = [tree, environment_stamp(python), list(args), autoload, BOOT]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()


def environment_stamp(python: Path) -> list[str]:
    """What an environment is, not where: its pyvenv.cfg and each distribution it holds, by
    name and version. The judge builds fresh environments on every run; the same trees
    installed from the same hash-pinned wheels collect the same ids."""
    env = python.parent.parent
    try:
        config = (env / "pyvenv.cfg").read_text("utf-8", "replace")
    except OSError:
        return [str(python)]  # not a venv: only this interpreter, where it is
    # `command` (python -m venv) names the environment's own path.
    lines = [line for line in config.splitlines() if not line.startswith("command")]
    return [*lines, *sorted(path.name for path in dist_infos(env))]


def collection_env(autoload: bool, home: Path, python: Path) -> dict[str, str]:
    """The gate's environment (_gate/plugin/patch_env.py) for `python`'s collection, pytest's
    plugins autoloaded or not; no variable that loads a plugin by itself (PLUGIN_VARIABLES)
    comes from the judge's."""
    env = gate_env(home, home, python.parent)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def collect(
    python: Path, root: Path, targets: Sequence[str], required: Iterable[str], autoload: bool
) -> Collection:
    """Run `pytest --collect-only` in `root` with `python`; the ids, or why not."""
    with tempfile.TemporaryDirectory(prefix="collect-") as tmp:
        out = Path(tmp) / "ids.json"
        options = ["--collect-only", "-p", "no:cacheprovider", "--rootdir", str(root)]
        cmd = [str(python), "-c", BOOT, str(out), " ".join(required), *options, *targets]
        env = collection_env(autoload, Path(tmp), python)
        home = Path(tmp)
        done = run_confined(
            cmd, writable=[home], cwd=root, env=at_home(env, home), timeout=COLLECT_TIMEOUT
        )
        if done.timed_out:
            return Collection(None, f"timed out after {COLLECT_TIMEOUT:.0f} s")
        if done.exit_code not in (0, 5):
            output = f"{done.stdout.tail()}\n{done.stderr.tail()}"
            return Collection(None, f"exit {done.exit_code}: {_reason(output)}")
        try:
            ids = json.loads(out.read_bytes())
        except (OSError, ValueError):
            return Collection(None, f"exit {done.exit_code} and no ids: {done.last_line()}")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return Collection(None, "the collected ids are not a list of strings")
    return Collection(tuple(ids))


def _reason(output: str) -> str:
    """The first error line of pytest's output, for a one-line summary."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("E ", "ERROR", "error:"))]
    return (errors or lines or ["no output"])[0][:300]


def split_id(node_id: str) -> tuple[str, str, str]:
    """`path::Class::name[param]` as (path, `Class::name`, `[param]`)."""
    path, _, rest = node_id.partition("::")
    name, bracket, param = rest.partition("[")
    return path, name, bracket + param


# --- GitHub annotations -----------------------------------------------------------------------


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(rule: str, path: str, line: int, reason: str) -> str:
    where = f"file={escape_property(path)}"
    where += f",line={line}" if line > 0 else ""
    return f"::error {where},title={escape_property(f'inventory {rule}')}::{escape_data(reason)}"
