"""pytest runs read from the gate's own evidence plugin, never from pytest's exit code alone."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from _gate.core.context import ChangedFunctions
from _gate.plugin.confine import level_cap
from _gate.plugin.patch_env import gate_env
from _gate.plugin.worker import CALL_TIMEOUT
from _gate.runs.process import Completed, run_group
from _gate.runs.reach import read_reach, watch_reach
from _gate.runs.sandbox import Sandbox, run_confined
from _gate.runs.traced import Coverage, Trace, read_trace, watch

# The gate's plugin folder (_gate/plugin/), copied as a package `_gate.plugin` of its own into a
# fresh folder on PYTHONPATH for each run, so no module of the tree under test can shadow it and
# no other file of scripts/ lands on sys.path. Its modules import only each other and the
# standard library (tests/test_layering.py); what is in the folder is what is shipped.
GATE = Path(__file__).resolve().parent.parent
PLUGIN_FILES = tuple(sorted(path.name for path in (GATE / "plugin").glob("*.py")))


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
    # node id -> each check that ran and passed in it, as a digest of what it compared
    checks: dict[str, list[str]] = field(default_factory=dict)
    # node id -> `file:line` of each check that compared an object with its own `__eq__`
    reflexive: dict[str, list[str]] = field(default_factory=dict)
    # A run with no report (killed at its timeout): the tests it finished, with their outcomes,
    # and the one it was in when it ended ("" if none), from the plugin's progress lines.
    finished: dict[str, str] = field(default_factory=dict)
    running: str = ""
    coverage: Coverage | None = None  # a traced run's: which test ran each changed line
    reached: dict[str, Any] | None = None  # a reach run's: Reached.as_dict (_gate/runs/reach.py)

    def renamed(self, fix: Callable[[str], str]) -> PytestRun:
        """The run with `fix` applied to the text its tests and pytest wrote."""
        messages = {node: fix(text) for node, text in self.messages.items()}
        return replace(self, messages=messages, output_tail=fix(self.output_tail))

    def as_dict(self) -> dict[str, Any]:
        coverage = None if self.coverage is None else self.coverage.as_dict()
        return {**asdict(self), "properties": sorted(self.properties), "coverage": coverage}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PytestRun:
        coverage = data.get("coverage")
        found = None if coverage is None else Coverage.from_dict(coverage)
        return cls(**{**data, "properties": frozenset(data["properties"]), "coverage": found})


# `../x`: pytest writes a path relative to its working directory when that is shorter.
RELATIVE_UP = re.compile(r"(?<![\w./-])(?:\.\./)+")
# `tests/test_x.py:83: AssertionError`: a file under the working directory, at a line start.
LOCATION = re.compile(r"(?m)^(?=[\w.-][\w./-]*\.py:\d+)")


def absolute_paths(run: PytestRun, cwd: Path) -> PytestRun:
    """The run with every path pytest wrote relative to `cwd` (`../oracle-judge-x/parent/...`
    from a temporary working directory, `tests/test_x.py:83` from a tree's root) written
    absolute, so `named` names it."""

    def absolute(up: re.Match[str]) -> str:
        return os.path.join(os.path.normpath(cwd / up.group()), "")

    def rewrite(text: str) -> str:
        return LOCATION.sub(lambda _: f"{cwd}/", RELATIVE_UP.sub(absolute, text))

    return run.renamed(rewrite)


def read_evidence(path: Path, prefix: str, done: Completed) -> PytestRun:
    tail = (done.stdout.head + done.stderr.head)[-2000:].decode("utf-8", "backslashreplace")
    try:
        data = json.loads(path.read_bytes())
        tests: dict[str, dict[str, Any]] = data["tests"]
    except (OSError, ValueError, KeyError, TypeError):
        finished, running = progress(Path(f"{path}.progress"), prefix)
        return PytestRun(
            done.exit_code,
            done.timed_out,
            None,
            {},
            {},
            {},
            tail,
            finished=finished,
            running=running,
        )
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
        {node: [str(v) for v in row.get("checks") or []] for node, row in rows.items()},
        {
            node: [prefix + str(where) for where in row["reflexive"]]
            for node, row in rows.items()
            if row.get("reflexive")
        },
    )


def progress(path: Path, prefix: str) -> tuple[dict[str, str], str]:
    """The tests a run finished, with their outcomes, and the one it started last and never
    finished, from the evidence plugin's progress lines (`start ID`, `end ID OUTCOME`)."""
    finished: dict[str, str] = {}
    running = ""
    try:
        lines = path.read_text("utf-8", "replace").splitlines()
    except OSError:
        return finished, running
    for line in lines:
        kind, _, rest = line.partition("\t")
        if kind == "start":
            running = prefix + rest
        elif kind == "end" and rest.count("\t") == 1:
            node, outcome = rest.split("\t")
            finished[prefix + node] = outcome
            running = "" if running == prefix + node else running
    return finished, running


@dataclass(frozen=True)
class Subject:
    """The build an oracle calls through `root/adapter.py`, from a confined worker."""

    python: Path  # the build's python
    timeout: float = CALL_TIMEOUT  # seconds one call may take
    scene: Path | None = None  # the worker's scene under a perturbation (worker_scene.py)
    trace: Trace | None = None  # the patch's build: which property ran each changed line

    def options(self, root: Path) -> list[str]:
        """The subject plugin's options."""
        sandbox = "required" if Sandbox.required else "best-effort"
        options = ["-p", "_gate.plugin.subject", f"--subject-python={self.python}"]
        options += [f"--subject-adapter={root / 'adapter.py'}"]
        options += [f"--subject-timeout={self.timeout}", f"--subject-sandbox={sandbox}"]
        options += [f"--subject-cap={level_cap()}"]
        return [*options, f"--subject-scene={self.scene}"] if self.scene else options


@dataclass(frozen=True)
class PytestOptions:
    """How one pytest run runs (`run_pytest`).

    `trusted` runs tests of the base tree: fixed rootdir and ini, no plugin autoloading (a
    patch can register a pytest11 entry point), no cache, cwd outside any tree, and the
    modules imported from under the root recorded. `own_config` reads the ini from the root's
    own pytest configuration and runs from the root (the crossrun, from its private copy)
    instead of an empty one with importlib imports from outside (the oracle). `subject`: the
    build the oracle's tests call. `scene`: the variables of pytest's process under a
    perturbation (perturb.tests_scene), instead of the gate's own.

    `confined` (in a build's environment, the patch's code runs in pytest's own process):
    pytest runs under the launcher and may write its run folder and `writable` only. The
    oracle's pytest (trusted, in the oracle environment) runs unconfined; its subject worker
    is confined by the subject plugin.
    """

    prefix: str = ""  # before every node id (the oracle's `oracle/`)
    timeout: float = 900.0  # seconds
    trusted: bool = True
    own_config: bool = False
    confined: bool = True
    options: tuple[str, ...] = ()  # pytest's own, after the gate's
    writable: tuple[Path, ...] = ()
    scene: Mapping[str, str] | None = None
    subject: Subject | None = None
    trace: Trace | None = None  # a run of the patch's code: which changed lines each test ran
    # A run of the parent's build: which of its functions each test file calls (reach.py).
    reach: ChangedFunctions | None = None


def run_pytest(python: Path, root: Path, targets: Sequence[str], how: PytestOptions) -> PytestRun:
    """Run pytest on `targets` (relative to `root`) as `how` says; outcomes come from the
    evidence plugin."""
    import tempfile

    root = root.resolve()  # trusted runs start from a temporary directory
    with tempfile.TemporaryDirectory(prefix="oracle-pytest-") as name:
        tmp = Path(name)
        evidence = tmp / "evidence.json"
        cmd = [str(python), "-m", "pytest", "-q", "-p", "_gate.plugin.pytest_evidence"]
        cmd += [f"--oracle-evidence={evidence}", "-o", "enable_assertion_pass_hook=true"]
        (tmp / "tmp").mkdir()
        # The gate's scene (_gate/plugin/patch_env.py), tmp_path in the run folder; the gate's
        # plugins importable by name.
        own = gate_env(tmp, tmp / "tmp", python.parent) if how.scene is None else how.scene
        env = {**own, "PYTHONPATH": str(copied_plugins(tmp / "plugins"))}
        if how.trusted:
            cmd += trusted_options(root, tmp, env, how.own_config)
        if how.subject is not None:
            cmd += how.subject.options(root)
        # The patch's code runs in pytest's process, or in the subject's worker.
        trace = how.subject.trace if how.subject is not None else how.trace
        traced = watch(tmp, trace)
        if traced is not None:
            option = "--oracle-trace" if how.subject is None else "--subject-trace"
            cmd.append(f"{option}={traced.spec}")
        reaching = watch_reach(tmp, how.reach.modules) if how.reach is not None else None
        if reaching is not None:
            cmd.append(f"--oracle-trace={reaching.spec}")
        cmd += [*how.options, *(str(root / t) for t in targets)]
        # The crossrun runs where the project's own CI does, at the root of its copy, so that
        # tests that open files by paths relative to the root find them; the oracle runs
        # outside any tree.
        cwd = tmp if how.trusted and not how.own_config else root
        if how.confined:
            folders = [tmp, *how.writable]
            done = run_confined(cmd, writable=folders, timeout=how.timeout, cwd=cwd, env=env)
        else:
            done = run_group(cmd, timeout=how.timeout, cwd=cwd, env=env)
        found = absolute_paths(read_evidence(evidence, how.prefix, done), cwd)
        if traced is not None and trace is not None:
            found.coverage = read_trace(traced, trace)
        if reaching is not None and how.reach is not None:
            found.reached = read_reach(reaching, how.reach.modules).as_dict()
        return found


def copied_plugins(folder: Path) -> Path:
    """The gate's plugin folder, copied as a package `_gate.plugin` of its own into `folder`
    (with the package's __init__.py, which runs nothing)."""
    (folder / "_gate" / "plugin").mkdir(parents=True)
    shutil.copy(GATE / "__init__.py", folder / "_gate")
    for plugin in PLUGIN_FILES:
        shutil.copy(GATE / "plugin" / plugin, folder / "_gate" / "plugin" / plugin)
    return folder


def trusted_options(root: Path, tmp: Path, env: dict[str, str], own_config: bool) -> list[str]:
    """Pin ini, rootdir and confcutdir to the base tree; nothing is autoloaded or cached."""
    from _gate.runs.collect import config_file

    ini = config_file(root) if own_config else root / "pytest.ini"
    if ini is None or not ini.is_file():
        ini = tmp / "pytest.ini"
        ini.write_text("[pytest]\n", "utf-8")
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # Hypothesis caches example constants on disk even with database=None.
    env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(tmp / "hypothesis")
    options = [
        *("-c", str(ini), "--rootdir", str(root), "--confcutdir", str(root)),
        *("-p", "no:cacheprovider", f"--oracle-sources={root}"),
    ]
    # The crossrun imports as the project's own configuration says (and is checked for
    # importing the tree's sources instead of the build); an oracle needs no sys.path entry.
    return options if own_config else [*options, "--import-mode=importlib"]
