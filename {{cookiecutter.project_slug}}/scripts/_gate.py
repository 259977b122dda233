"""Shared helpers for the gate's scripts: outcomes and reports, config, git, environments.

Every script in this folder is standalone (stdlib plus PyYAML) and imports only this module
from its neighbours, so the folder can be vendored as a whole.

Exit codes used by every script: 0 pass, 1 block, 2 fail closed (bad input, broken precondition,
or an internal error; the message names the file, the field and the fix). A report's status
tells the two causes of exit 2 apart: `needs-review` (a protected path a code owner must look
at first) and `error` (the gate could not judge).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from _process import Completed, run_group

PASS, BLOCK, FAIL_CLOSED = 0, 1, 2
# Exit 2 has two causes: a protected path that waits for a code owner (ORACLE_REVIEW=1 once
# reviewed), and an error: bad input, a build that fails, a crash, a timeout, missing evidence.
NEEDS_REVIEW, ERROR = "needs-review", "error"
STATUS = {PASS: "pass", BLOCK: "block", FAIL_CLOSED: ERROR}
SCHEMA_VERSION = 1  # of every JSON report: raised when a field changes meaning or goes away
# JSON {absolute path: name}, set by the judge: reports write its worktrees as `base:PATH` and
# `head:PATH`, never as the temporary folders they are (see `named`).
PATH_NAMES = "ORACLE_PATH_NAMES"
# Merge-time evidence must not depend on what the author's shell exported.
WHEELHOUSE = Path(os.environ.get("ORACLE_WHEELHOUSE", ".oracle/wheelhouse"))
MODEL_ENV_DEFAULT = ("MODEL_ENDPOINT", "MODEL_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


class FailClosed(Exception):
    """Input the gate cannot judge: reported as one line, exit 2."""


class NotInWheelhouse(FailClosed):
    """A build needs a dependency the hash-pinned wheelhouse does not provide."""


@dataclass
class Outcome:
    """What a step concluded: exit code, one-line summary, and its evidence."""

    code: int
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    # "deferred": a later step named in the evidence decides (see judge.py), exit code 1 alone;
    # NEEDS_REVIEW: exit code 2 that a code owner's review resolves, not an error.
    status: str | None = None


Listener = Callable[[str, bool], None]
# Where this thread's step lines go, when not to stdout and stderr: the judge's listener while
# it runs the step's main() in one of its own threads (judge.py, `inline`).
_step = threading.local()


def say(text: str, error: bool = False) -> None:
    """One line of a step: progress and failures to stderr (`error`), the rest to stdout."""
    listener: Listener | None = getattr(_step, "listener", None)
    if listener is not None:
        listener(text, error)
    else:
        print(text, file=sys.stderr if error else sys.stdout, flush=True)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """The lines this thread says meanwhile go to `listener`."""
    _step.listener = listener
    try:
        yield
    finally:
        _step.listener = None


class Progress:
    """`label: done/total unit, N s` on stderr for a long run: first after `every` seconds, then
    at most every `every` seconds. The judge passes these lines through as they come."""

    def __init__(self, label: str, total: int, unit: str, every: float = 5.0) -> None:
        self.label, self.total, self.unit, self.every = label, total, unit, every
        self.done = 0
        self.start = self.shown = time.monotonic()

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if now - self.shown >= self.every:
            self.shown = now
            line = f"{self.label}: {self.done}/{self.total} {self.unit}, {now - self.start:.0f} s"
            say(line, error=True)


PROGRESS_LINE = r"^[a-z-]+: \d+/\d+ "  # what the judge forwards from a step's stderr


def add_report_arg(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(
        "--report",
        type=Path,
        default=Path("reports") / f"{name}.json",
        help=f"JSON report to write (default: reports/{name}.json)",
    )


EXIT_CODES_HELP = "exit codes: 0 pass, 1 block, 2 fail closed (bad input or internal error)"


def write_json(path: Path, payload: object) -> None:
    """Write atomically so a killed run never leaves half a report behind.

    Indented for people when small; a large report (an inventory of thousands of tests) stays
    compact, since indenting disables the C encoder and costs seconds.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, sort_keys=True, default=str)
    if len(text) < 1 << 20:
        text = json.dumps(payload, indent=2, sort_keys=True, default=str)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n", "utf-8")
    tmp.replace(path)


def write_report(path: Path, payload: dict[str, Any]) -> None:
    """A JSON report, as every script writes one: `schema_version` first."""
    write_json(path, {"schema_version": SCHEMA_VERSION, **payload})


def path_names() -> list[tuple[str, str]]:
    """The names the judge gave its folders ($ORACLE_PATH_NAMES)."""
    try:
        names = json.loads(os.environ.get(PATH_NAMES) or "{}")
    except ValueError:
        return []
    return [(str(k), str(v)) for k, v in names.items()] if isinstance(names, dict) else []


def named(value: Any, names: Sequence[tuple[str, str]] | None = None) -> Any:
    """`value` (strings, and lists and mappings of them) with every path under a named folder
    written from its name: `PATH/x` as `NAME` + `x` (`base:` + `oracle/cases.yaml`), `PATH`
    alone as `NAME` (or `.` for the empty name, the repository's own)."""
    pairs = sorted(path_names() if names is None else names, key=lambda p: -len(p[0]))
    if not pairs:
        return value
    # The longest path first, so a folder's own name wins over its parent's. A path ends at a
    # slash, or where no name continues it (a full stop does when a letter follows it).
    ends = r"(?:/|(?![\w-]|\.\w))"
    pattern = re.compile("|".join(re.escape(path) + ends for path, _ in pairs))
    lookup = dict(pairs)

    def name(match: re.Match[str]) -> str:
        text = match.group()
        label = lookup[text.removesuffix("/")]
        return label if text.endswith("/") else label or "."

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return pattern.sub(name, item) if "/" in item else item
        if isinstance(item, dict):
            return {walk(k): walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(value)


def run_main(
    name: str,
    parser: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace], Outcome],
    argv: Sequence[str] | None,
) -> int:
    """Parse, run, report. Every failure ends as one line and a report, never a traceback."""
    args = parser.parse_args(argv)
    report: Path = args.report
    try:
        outcome = body(args)
    except FailClosed as exc:
        outcome = Outcome(FAIL_CLOSED, str(exc))
    except Exception as exc:  # the contract is one line and exit 2, whatever broke
        where = traceback.extract_tb(exc.__traceback__)[-1]
        outcome = Outcome(
            FAIL_CLOSED,
            f"internal error {type(exc).__name__}: {exc} "
            f"({Path(where.filename).name}:{where.lineno})",
            {"traceback": traceback.format_exc()},
        )
    payload = {
        "step": name,
        "status": outcome.status or STATUS[outcome.code],
        "exit_code": outcome.code,
        "summary": outcome.summary,
        "evidence": outcome.evidence,
    }
    payload = named(payload)  # the folders of a judgment by their names, here at the source
    write_report(report, payload)
    say(f"{name}: {payload['status']}: {payload['summary']}", error=outcome.code != PASS)
    return outcome.code


# --- YAML and config -------------------------------------------------------------------------


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


def load_yaml(path: Path) -> Any:
    """Parse a YAML file, turning every parse problem into one line with the file and line."""
    import yaml  # local import: --help works before PyYAML is installed

    try:
        text = path.read_bytes().decode("utf-8")
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
    unknown = sorted(str(key) for key in value if key not in known)
    if unknown:
        raise FailClosed(
            f"{where}: unknown field {unknown[0]!r}; known fields are {', '.join(known)}"
        )
    return value


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
    call_timeout: float = 60.0
    crossrun: str = "block"
    crossrun_timeout: float = 900.0
    test_extra: str = ""
    strength_paths: tuple[str, ...] = ("src",)  # the code `nox -s strength` mutates
    strength_min: float = 0.0  # a base whose oracle kills a smaller share fails closed; 0: off
    jobs: int = 0  # steps run at once after the builds; 0: the number of CPUs

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
}
CONFIG_CHOICES = {"crossrun": ("block", "advisory", "off")}
# Counts below which a setting would make its step do nothing without saying so.
CONFIG_MINIMUM: dict[str, int] = {
    "flake_max_retry": 0,
    "variance_runs": 2,
    "variance_machines": 1,
    "ledger_ttl_days": 1,
    "jobs": 0,
}
CONFIG_REQUIRED = ("command", "base_branch", "oracle_ref", "protected")


def load_config(path: Path) -> Config:
    raw = require_mapping(load_yaml(path), str(path), list(CONFIG_TYPES))
    for key in CONFIG_REQUIRED:
        if key not in raw:
            raise FailClosed(f"{path}: field {key!r} is required; add it")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        choices = CONFIG_CHOICES.get(key)
        if choices:
            value = "off" if value is False else value  # YAML 1.1 reads a bare `off` as false
            if value not in choices:
                raise FailClosed(f"{path}: field {key!r} must be one of {', '.join(choices)}")
        expected = CONFIG_TYPES[key]
        if not isinstance(value, expected) or isinstance(value, bool):
            raise FailClosed(f"{path}: field {key!r} has the wrong type ({type(value).__name__})")
        if isinstance(value, int) and value < CONFIG_MINIMUM.get(key, value):
            raise FailClosed(f"{path}: field {key!r} must be at least {CONFIG_MINIMUM[key]}")
        if key == "strength_min" and isinstance(value, (int, float)) and not 0 <= value <= 1:
            raise FailClosed(f"{path}: field {key!r} is a share of mutants, from 0 to 1 (0.9)")
        if isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                raise FailClosed(f"{path}: field {key!r} must be a list of strings")
            value = tuple(value)
        values[key] = value
    if "tests" in values:
        if not values["tests"]:
            raise FailClosed(
                f"{path}: field 'tests' is empty; name the project's tests, folders or files "
                "(such as tests or test.py)"
            )
        values["tests"] = tuple(tests_entry(path, entry) for entry in values["tests"])
    return Config(**values)


def tests_entry(config: Path, entry: str) -> str:
    """A `tests:` entry as every step uses it: relative to the tree's root, `./x` and `x/`
    read as `x`; a file (a root test.py) or a folder."""
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


# --- the decision table ------------------------------------------------------------------------

# Every step a judgment reports, in the order of the decision table (oracles/MATRIX.md), with
# the script of scripts/ that runs it; the build is the judge's own work.
JUDGE_STEPS: dict[str, str | None] = {
    "preconditions": "check_preconditions.py",
    "write-set": "classify_write_set.py",
    "fixtures-lock": "lock_fixtures.py",
    "build": None,
    "record": "record_cassettes.py",
    "replay": "replay_cassettes.py",
    "assert-inventory": "count_asserts.py",
    "oracle": "run_oracle.py",
    "crossrun": "crossrun.py",
    "quarantine": "check_quarantine.py",
    "flake-budget": "flake_budget.py",
    "tests": "run_tests.py",
}
MATRIX_STEP = re.compile(r"\(`([a-z-]+)`\)")


def decision_rows(matrix: str) -> list[tuple[int, list[str]]]:
    """The body rows of the decision table: (line number, its four cells)."""
    rows = []
    for number, line in enumerate(matrix.splitlines(), 1):
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        header = set(cols[0]) <= set("-: ") or cols[0] == "Failure class"
        if line.startswith("|") and len(cols) == 4 and not header:
            rows.append((number, cols))
    return rows


# --- git ---------------------------------------------------------------------------------------


# The oracle's strength score (scripts/strength.py) on the oracle ref, beside the ledger.
SCORE_FILE = "strength.json"
# Who commits to the oracle ref when the environment names nobody (a CI job).
REF_IDENTITY = {
    "GIT_AUTHOR_NAME": "oracle gate",
    "GIT_AUTHOR_EMAIL": "oracle-gate@localhost",
    "GIT_COMMITTER_NAME": "oracle gate",
    "GIT_COMMITTER_EMAIL": "oracle-gate@localhost",
}


def commit_file(repo: Path, ref: str, source: str, name: str, text: str, message: str) -> str:
    """Commit `text` as file `name` on top of `source` as refs/heads/<ref>, with plumbing only:
    the work tree is never touched and every other file of the ref is kept."""
    full = f"refs/heads/{ref}"
    parent = git(repo, "rev-parse", "--verify", "--quiet", source, check=False).strip()
    current = git(repo, "rev-parse", "--verify", "--quiet", full, check=False).strip()
    blob = git(repo, "hash-object", "-w", "--stdin", stdin=text.encode()).strip()
    entries = git(repo, "ls-tree", "-z", parent).split("\0") if parent else []
    rows = [e for e in entries if e and not e.endswith(f"\t{name}")]
    rows.append(f"100644 blob {blob}\t{name}")
    tree = git(repo, "mktree", "-z", stdin="\0".join(rows).encode() + b"\0").strip()
    parents = ["-p", parent] if parent else []
    identity = {k: os.environ.get(k, v) for k, v in REF_IDENTITY.items()}
    commit = git(repo, "commit-tree", tree, *parents, "-m", message, env=identity).strip()
    git(repo, "update-ref", full, commit, *([current] if current else []))
    return commit


def git(
    repo: Path,
    *args: str,
    check: bool = True,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Run git with a fixed environment; a failure becomes one line naming the command."""
    full_env = {**os.environ, **(env or {}), "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), *args],
            input=stdin,
            capture_output=True,
            env=full_env,
            check=False,
        )
    except FileNotFoundError:
        raise FailClosed("git is not installed or not on PATH; install git") from None
    if check and proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "backslashreplace").strip().splitlines()
        raise FailClosed(f"git {' '.join(args)} failed in {repo}: {detail[-1] if detail else ''}")
    return proc.stdout.decode("utf-8", "surrogateescape")


def repo_root(path: Path) -> Path:
    proc = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise FailClosed(f"{path} is not a git repository; run from a clone of the project")
    return Path(proc.stdout.decode().strip())


def rev_exists(repo: Path, ref: str) -> bool:
    return bool(git(repo, "rev-parse", "--verify", "--quiet", ref + "^{commit}", check=False))


def resolve_commit(repo: Path, ref: str, option: str) -> str:
    sha = git(repo, "rev-parse", "--verify", "--quiet", ref + "^{commit}", check=False).strip()
    if not sha:
        raise FailClosed(
            f"{option} {ref!r} is not a commit in {repo}; fetch it or pass an existing ref"
        )
    return sha


def base_ref(repo: Path, base_branch: str) -> str:
    """The base branch as the judge reads it: the remote's copy when there is one."""
    remote = f"origin/{base_branch}"
    target = remote if rev_exists(repo, remote) else base_branch
    if not rev_exists(repo, target):
        raise FailClosed(f"base branch {base_branch!r} does not exist; pass --base REF")
    return target


def default_base(repo: Path, head: str, base_branch: str) -> str:
    """The merge base of head and the base branch, preferring the remote's copy of the branch."""
    target = base_ref(repo, base_branch)
    sha = git(repo, "merge-base", head, target, check=False).strip()
    if not sha:
        raise FailClosed(
            f"no merge base between {head} and {target} (shallow clone?); "
            "run `git fetch --unshallow` or pass --base REF"
        )
    return sha


def parse_name_status(raw: str) -> list[tuple[str, list[str]]]:
    """Parse `--name-status -z` output: a status token, then one path, or two for R and C."""
    tokens = [t for t in raw.split("\0") if t]
    rows: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(tokens):
        status = tokens[i].strip()
        width = 2 if status[:1] in ("R", "C") else 1
        rows.append((status, tokens[i + 1 : i + 1 + width]))
        i += 1 + width
    return rows


def resolve_oracle_ref(repo: Path, ref: str) -> str:
    """The oracle ref to read: the remote's copy first, since the patch author cannot push it."""
    for candidate in (f"refs/remotes/origin/{ref}", f"refs/heads/{ref}"):
        if rev_exists(repo, candidate):
            return candidate
    raise FailClosed(
        f"oracle ref {ref!r} does not exist; create it (README: protect the oracle ref)"
    )


def show_file(repo: Path, ref: str, path: str) -> bytes | None:
    proc = subprocess.run(
        ["git", "-C", str(repo), "show", f"{ref}:{path}"], capture_output=True, check=False
    )
    return proc.stdout if proc.returncode == 0 else None


def add_worktree(repo: Path, sha: str, dest: Path) -> Path:
    git(repo, "worktree", "add", "--detach", "--force", str(dest), sha)
    return dest


def remove_worktree(repo: Path, dest: Path) -> None:
    git(repo, "worktree", "remove", "--force", str(dest), check=False)
    shutil.rmtree(dest, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)


# --- environments --------------------------------------------------------------------------


def bin_dir(env: Path) -> Path:
    return env / ("Scripts" if os.name == "nt" else "bin")


def find_uv() -> str | None:
    """uv beside this interpreter first (installed from the wheelhouse), then PATH."""
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.exists() else shutil.which("uv")


BUILD_TIMEOUT = 900.0  # seconds for one install: a build backend runs the tree's own code


def _run_install(cmd: list[str], what: str) -> Completed:
    env = {
        **os.environ,
        "PIP_NO_INDEX": "1",
        "UV_OFFLINE": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    done = run_group(cmd, timeout=BUILD_TIMEOUT, env=env)
    if done.timed_out:
        raise FailClosed(f"{what} did not finish within {BUILD_TIMEOUT:g} s")
    if done.exit_code != 0:
        raise FailClosed(f"{what} failed: {done.last_line()}")
    return done


def tools_env(dest: Path, wheelhouse: Path, requirements: Path) -> tuple[Path, list[str]]:
    """A fresh venv holding only the hash-checked tools; returns its python and installer."""
    uv = find_uv()
    python = bin_dir(dest) / "python"
    if uv:
        _run_install([uv, "venv", "--quiet", "--python", sys.executable, str(dest)], "uv venv")
        pip = [uv, "pip", "install", "--quiet", "--offline", "--python", str(python)]
    else:
        _run_install([sys.executable, "-m", "venv", str(dest)], "python -m venv")
        pip = [str(python), "-m", "pip", "install", "--quiet"]
    pip += ["--no-index", "--find-links", str(wheelhouse)]
    _run_install([*pip, "--require-hashes", "-r", str(requirements)], "tool install")
    return python, pip


def dist_infos(env: Path) -> set[Path]:
    return set(env.glob("lib/python*/site-packages/*.dist-info"))


def build_env(tree: Path, dest: Path, wheelhouse: Path, requirements: Path) -> Path:
    """A fresh venv holding the hash-checked tools and a non-editable build of `tree`.

    Installs only from the local wheelhouse: the judge never reaches the network. The build is
    not editable so that the tree's own files (conftest.py, pytest settings) never sit on
    sys.path. Runtime dependencies come from the hash-pinned requirements only: the build is
    installed without them, then checked, so a dependency the wheelhouse lacks fails closed
    by name instead of crashing every case.
    """
    python, pip = tools_env(dest, wheelhouse, requirements)
    before = dist_infos(dest)
    _run_install([*pip, "--no-deps", "--no-build-isolation", str(tree)], f"build of {tree}")
    for info in sorted(dist_infos(dest) - before):
        refuse_direct_references(info / "METADATA", tree)
    check_dependencies(python, tree, requirements)
    return python


def refuse_direct_references(metadata: Path, tree: Path) -> None:
    """A dependency named by path or URL would bypass the hashes: refuse it."""
    from email.parser import BytesHeaderParser

    headers = BytesHeaderParser().parse(metadata.open("rb"))
    for requirement in headers.get_all("Requires-Dist") or []:
        if "@" in requirement.split(";", 1)[0]:
            raise NotInWheelhouse(
                f"{tree}: dependency {requirement.strip()!r} is a direct reference; runtime "
                "dependencies come only from the hash-pinned wheelhouse: pin it by version "
                "in scripts/requirements-judge.txt with hashes"
            )


def check_dependencies(python: Path, tree: Path, requirements: Path) -> None:
    uv = find_uv()
    cmd = (
        [uv, "pip", "check", "--python", str(python)] if uv else [str(python), "-m", "pip", "check"]
    )
    done = run_group(cmd, timeout=BUILD_TIMEOUT)
    if done.exit_code == 0:
        return
    problems = [
        line.strip()
        for line in (done.stdout.tail() + done.stderr.tail()).splitlines()
        if "requires" in line or "not installed" in line
    ]
    first = problems[0] if problems else done.last_line()
    raise NotInWheelhouse(
        f"{tree}: a runtime dependency is missing from the hash-pinned wheelhouse ({first}); "
        f"add it to {requirements.name} with hashes (uv pip compile --generate-hashes)"
    )


# --- pytest runs, read from the gate's own plugin --------------------------------------------

# The gate's pytest plugins, copied into a fresh folder on PYTHONPATH for each run, so no module
# of the tree under test can shadow them and no other file of scripts/ lands on sys.path.
PLUGIN_FILES = ("_pytest_evidence.py", "_shard.py", "_subject.py", "_worker.py")


@dataclass
class PytestRun:
    """A pytest run judged by the evidence plugin's report, never by its exit code alone."""

    exit_code: int
    timed_out: bool
    outcomes: dict[str, str] | None  # node id -> passed/failed/error/skipped; None: no report
    messages: dict[str, str]
    durations: dict[str, float]
    hits: dict[str, int]  # node id -> assertions that passed in it
    output_tail: str
    sources: dict[str, str] = field(default_factory=dict)  # module -> file under the root
    deselected: int = 0  # tests left to other shards
    properties: frozenset[str] = frozenset()  # node ids of hypothesis properties (@given)

    def renamed(self, fix: Callable[[str], str]) -> PytestRun:
        """The run with `fix` applied to the text its tests and pytest wrote."""
        messages = {node: fix(text) for node, text in self.messages.items()}
        return replace(self, messages=messages, output_tail=fix(self.output_tail))


# `../x`: pytest writes a path relative to its working directory when that is shorter.
RELATIVE_UP = re.compile(r"(?<![\w./-])(?:\.\./)+")


def absolute_paths(run: PytestRun, cwd: Path) -> PytestRun:
    """The run with every path pytest wrote relative to `cwd` going up (`../oracle-judge-x/
    parent/...`, from a temporary working directory) written absolute, so `named` names it."""

    def absolute(up: re.Match[str]) -> str:
        return os.path.join(os.path.normpath(cwd / up.group()), "")

    return run.renamed(lambda text: RELATIVE_UP.sub(absolute, text))


def read_evidence(path: Path, prefix: str, done: Completed) -> PytestRun:
    tail = (done.stdout.head + done.stderr.head)[-2000:].decode("utf-8", "backslashreplace")
    try:
        data = json.loads(path.read_bytes())
        tests: dict[str, dict[str, Any]] = data["tests"]
    except (OSError, ValueError, KeyError, TypeError):
        return PytestRun(done.exit_code, done.timed_out, None, {}, {}, {}, tail)
    rows = {prefix + node: row for node, row in tests.items()}
    return PytestRun(
        done.exit_code,
        done.timed_out,
        {node: str(row["outcome"]) for node, row in rows.items()},
        {node: str(row["message"]) for node, row in rows.items() if row["message"]},
        {node: float(row["seconds"]) for node, row in rows.items()},
        {node: int(row["hits"]) for node, row in rows.items()},
        tail,
        dict(data.get("sources") or {}),
        int(data.get("deselected") or 0),
        frozenset(prefix + node for node in data.get("properties") or []),
    )


def run_pytest(
    python: Path,
    root: Path,
    targets: Sequence[str],
    *,
    prefix: str,
    timeout: float,
    trusted: bool,
    subject: Path | None = None,
    subject_timeout: float = 60.0,
    options: Sequence[str] = (),
    own_config: bool = False,
) -> PytestRun:
    """Run pytest on `targets` (relative to `root`); outcomes come from the evidence plugin.

    `trusted=True` runs tests of the base tree: fixed rootdir and ini, no plugin autoloading
    (a patch can register a pytest11 entry point), no cache, cwd outside any tree, and the
    modules imported from under `root` recorded. `own_config` reads the ini from the root's own
    pytest configuration (the crossrun) instead of an empty one with importlib imports (the
    oracle). `subject` is the python of the build the oracle calls through `root/adapter.py`.
    """
    import tempfile

    root = root.resolve()  # trusted runs start from a temporary directory
    with tempfile.TemporaryDirectory(prefix="oracle-pytest-") as name:
        tmp = Path(name)
        plugins, evidence = tmp / "plugins", tmp / "evidence.json"
        plugins.mkdir()
        for plugin in PLUGIN_FILES:
            shutil.copy(Path(__file__).with_name(plugin), plugins / plugin)
        cmd = [str(python), "-m", "pytest", "-q", "-p", "_pytest_evidence"]
        cmd += [f"--oracle-evidence={evidence}", "-o", "enable_assertion_pass_hook=true"]
        path = os.pathsep.join(filter(None, [str(plugins), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1", "TZ": "UTC"}
        if trusted:
            cmd += trusted_options(root, tmp, env, own_config)
        if subject is not None:
            cmd += ["-p", "_subject", f"--subject-python={subject}"]
            cmd += [
                f"--subject-adapter={root / 'adapter.py'}",
                f"--subject-timeout={subject_timeout}",
            ]
        cmd += [*options, *(str(root / t) for t in targets)]
        cwd = tmp if trusted else root
        done = run_group(cmd, timeout=timeout, cwd=cwd, env=env)
        return absolute_paths(read_evidence(evidence, prefix, done), cwd)


def trusted_options(root: Path, tmp: Path, env: dict[str, str], own_config: bool) -> list[str]:
    """Pin ini, rootdir and confcutdir to the base tree; nothing is autoloaded or cached."""
    from _collect import config_file  # the crossrun reads it; an oracle run never does

    ini = config_file(root) if own_config else root / "pytest.ini"
    if ini is None or not ini.is_file():
        ini = tmp / "pytest.ini"
        ini.write_text("[pytest]\n", "utf-8")
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # Hypothesis caches example constants on disk even with database=None.
    env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(tmp / "hypothesis")
    env["HOME"] = str(tmp)
    options = [
        *("-c", str(ini), "--rootdir", str(root), "--confcutdir", str(root)),
        *("-p", "no:cacheprovider", f"--oracle-sources={root}"),
    ]
    # The crossrun imports as the project's own configuration says (and is checked for
    # importing the tree's sources instead of the build); an oracle needs no sys.path entry.
    return options if own_config else [*options, "--import-mode=importlib"]
