"""The gate's pytest plugin: what ran, as pytest names it, written by code from the base tree.

Loaded explicitly (`-p oracle_gate_evidence`, a copy of this file) into every pytest run the
gate starts. It records the collected node ids (and which are hypothesis properties), each
test's outcome, duration and message, and how many assertions passed in it (pytest's
`pytest_assertion_pass` hook, enabled with `enable_assertion_pass_hook`), and writes them as
JSON when the session ends. Ids are
`report.nodeid` verbatim, never rebuilt from JUnit class names. With `--oracle-sources ROOT`
it also records the modules the run imported from files under ROOT, so the gate can tell a run
that tested a tree's own sources from one that tested the installed build. With
`--oracle-shard I/N` it deselects every test another shard owns (scripts/_gate/plugin/shard.py) and
records how many it deselected. With `--oracle-canaries FILE` (the crossrun) it reads and
removes FILE as pytest starts, before any conftest.py or test module: the node ids of canary
tests planted in the run, each with the outcome it must have, and where to write what they did.
Their outcomes are kept apart: they are never collected ids, outcomes, hits or sources, and
no shard deselects them. At the end of the session the canary report also lists what changed
in pytest's machinery since this plugin loaded (scripts/_gate/plugin/tamper.py).

While it runs, `FILE.progress` gets a line as each test starts and ends, so that a run killed
at its timeout still tells which tests finished and which one it was in.

Each test's checks that ran and passed are recorded too (`checks`, in the order they ran): every
`assert` that passed (the pass hook), every call of a unittest `assert*` method that returned
(the outermost: `assertEqual` calling `assertDictEqual` is one check), and every call of
`pytest.raises`, `pytest.warns` and `pytest.deprecated_call`. Each is written as a short digest
of what it compared (the values `assert` shows, the arguments of a call, addresses left out),
so the inventory can tell a test that still runs its checks from one that stopped, and find a
deleted test's checks, with their values, in a test of the patch (_gate/inventory/run_checks.py).
A check that compared an object with itself (`self.assertEqual(r, r)`, `assert r == r`) whose
type has its own `__eq__` from outside the run's root (the build's code, not a class the tests
define) is listed by its file and line (`reflexive`): it tests that `__eq__`, and the inventory
does not call it a check that cannot fail.

A run that dies before the session ends leaves no file: the gate reads that as truncated.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import threading
import unittest
import warnings
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from inspect import CO_OPTIMIZED
from pathlib import Path
from types import FrameType, FunctionType
from typing import Any

import pytest

from _gate.plugin.change_trace import SHARED, SHARED_SCOPES, Tracer, load
from _gate.plugin.shard import parse_shard
from _gate.plugin.tamper import (
    Seen,
    digest,
    hook_changes,
    machinery_changes,
    plugin_roots,
    relay,
    snapshot,
)

# An outcome never improves: a failed call stays failed when its teardown passes.
RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
MESSAGE_LIMIT = 500
CHECKS_LIMIT = 10_000  # checks listed per test: a loop of a million asserts is cut here
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
PYTEST_CHECKS = ("raises", "warns", "deprecated_call")


class Running:
    """The test that runs now, and how deep the checks that call checks are."""

    nodeid: str | None = None
    local = threading.local()
    # Bound methods of the run's Evidence (the machinery check allows code of this file).
    record: Callable[[str, str], None] | None = None
    reflexive: Callable[[str, FrameType, object], None] | None = None


# The run's temporary folder (the gate sets TMPDIR; tmp_path is under it): a path there differs
# from run to run and from test to test, so a check's values name it `<tmp>`.
TEMPORARY = re.compile(re.escape(os.environ.get("TMPDIR") or "/nonexistent") + r"[^\s'\"]*")


def value_digest(text: str) -> str:
    """What a check compared, as a short digest: the same values give the same digest."""
    stable = TEMPORARY.sub("<tmp>", ADDRESS.sub("", text))
    return hashlib.sha256(stable.encode("utf-8", "replace")).hexdigest()[:12]


def note_check(text: str) -> None:
    if Running.nodeid is not None and Running.record is not None:
        Running.record(Running.nodeid, value_digest(text))


# unittest's checks that compare with `==`: another (`assertIs(r, r)`) cannot fail on itself.
EQUALITY_CHECKS = frozenset({"assertEqual", "assertEquals"})


def note_reflexive(frame: FrameType | None, value: object) -> None:
    if frame is not None and Running.nodeid is not None and Running.reflexive is not None:
        Running.reflexive(Running.nodeid, frame, value)


def compared(values: list[str]) -> str:
    """The values a check compared, in one text whatever their order or the check's spelling:
    `assert a == b` and `self.assertEqual(b, a)` compare the same."""
    return "\x00".join(sorted(values))


def shown(args: tuple[Any, ...]) -> str:
    """The arguments of a check call (its first two: the values it compares), each shown as
    pytest shows a value in an assertion's explanation."""
    from _pytest.assertion.rewrite import _saferepr  # what `assert` shows: one spelling

    return compared([_saferepr(arg) for arg in args[:2]])


def explained(expl: str) -> str:
    """The values a passing `assert` compared, from pytest's explanation of it: `a == b`
    gives both sides, anything else its first line."""
    line = expl.split("\n", 1)[0]
    sides = line.split(" == ")
    return compared(sides if len(sides) == 2 else [line])


def counted(check: Callable[..., Any], method: bool) -> Callable[..., Any]:
    """`check`, noting each call that returns as one check of the running test; a check that
    calls another (`assertEqual` calls `assertMultiLineEqual`) is one."""

    @functools.wraps(check)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        depth = getattr(Running.local, "depth", 0)
        Running.local.depth = depth + 1
        try:
            result = check(*args, **kwargs)
        finally:
            Running.local.depth = depth
        if depth == 0:
            note_check(shown(args[1:] if method else args))
            same = method and len(args) > 2 and args[1] is args[2]
            if same and check.__name__ in EQUALITY_CHECKS:
                note_reflexive(sys._getframe(1), args[1])
        return result

    return wrapper


def count_checks() -> None:
    """Wrap unittest's `assert*` methods and pytest's raises, warns and deprecated_call, as
    this plugin loads: before any test module takes a name of them, and before the snapshot
    of the machinery (tamper.py), which then watches the wrappers too."""
    for name, value in list(vars(unittest.TestCase).items()):
        if name.startswith("assert") and callable(value):
            setattr(unittest.TestCase, name, counted(value, method=True))
    for name in PYTEST_CHECKS:
        setattr(pytest, name, counted(getattr(pytest, name), method=False))


count_checks()


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    parser.addoption("--oracle-evidence", help="JSON file the gate reads the run's results from")
    parser.addoption("--oracle-sources", help="record the modules imported from under this root")
    parser.addoption("--oracle-shard", help="run only the tests of shard I/N")
    parser.addoption("--oracle-canaries", help="planted tests (read and removed at start)")
    parser.addoption("--oracle-trace", help="change coverage's spec (read and removed at start)")
    HOOKS.update(relay(pluginmanager))  # as pytest loads this plugin: before any conftest.py


@dataclass
class Canaries:
    """Tests the gate planted in the run, kept out of its outcomes."""

    expected: dict[str, str]  # node id -> the outcome it must have
    files: frozenset[str]  # their modules, relative to the root
    report: Path  # where the canaries' outcomes and the machinery's changes go
    args: list[str]  # canary modules no target of the run holds: collected as if named
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)

    def owns(self, nodeid: str) -> bool:
        return nodeid in self.expected or nodeid.split("::", 1)[0] in self.files


CANARIES = pytest.StashKey[Canaries]()
TRACER = pytest.StashKey[Tracer]()
HOOKS: dict[str, Any] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Read and remove the canary file and the tracer's spec, and start the tracer, before any
    conftest.py, and so any code of the tree under test, is imported: the paths stay on the
    command line, what they held does not."""
    known = early_config.known_args_namespace
    spec = getattr(known, "oracle_trace", None)
    if spec:
        tracer = early_config.stash[TRACER] = load(spec)
        tracer.start()
    name = getattr(known, "oracle_canaries", None)
    if not name:
        return
    path = Path(name)
    data = json.loads(path.read_text("utf-8"))
    path.unlink()
    early_config.stash[CANARIES] = Canaries(
        {str(k): str(v) for k, v in data["expected"].items()},
        frozenset(data["files"]),
        Path(data["report"]),
        [str(a) for a in data["args"]],
    )


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """pytest's own note that a class is no test (one with an `__init__`, an imported
    unittest `TestSuite`) stays the warning pytest shows, whatever filter a module imported
    earlier set: a unittest-style suite may call `warnings.simplefilter("error")` at import,
    and its own runner never makes such notes. The inventory's collection does the same
    (_gate/runs/collect.py BOOT)."""
    warnings.filterwarnings("default", category=pytest.PytestCollectionWarning)
    return (yield)


class Evidence:
    def __init__(self, config: pytest.Config, path: Path, sources: str | None) -> None:
        self.config = config
        self.path = path
        self.sources = Path(sources).resolve() if sources else None
        self.canaries = config.stash.get(CANARIES, None)
        self.collected: list[str] = []
        self.properties: list[str] = []
        self.deselected = 0
        self.tests: dict[str, dict[str, Any]] = {}
        # Each test as it starts and ends, a line at a time: what a run killed at its timeout
        # finished, and which test it was in (_gate/runs/pytest_run.progress).
        self.progress = open(f"{path}.progress", "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def row(self, nodeid: str) -> dict[str, Any]:
        canary = self.canaries is not None and self.canaries.owns(nodeid)
        table = self.canaries.rows if canary and self.canaries else self.tests
        return table.setdefault(
            nodeid, {"outcome": "passed", "seconds": 0.0, "message": "", "hits": 0, "checks": []}
        )

    def record(self, nodeid: str, value: str) -> None:
        checks = self.row(nodeid)["checks"]
        if len(checks) < CHECKS_LIMIT:
            checks.append(value)

    def reflexive(self, nodeid: str, frame: FrameType, value: object) -> None:
        """List the check at `frame`'s line when `value` (both sides of it) has its own
        `__eq__`, from outside the run's root: the build's, not a class the tests define."""
        equality = getattr(type(value), "__eq__", None)
        module = sys.modules.get(getattr(equality, "__module__", None) or "")
        home = getattr(module, "__file__", None)
        root = self.config.rootpath
        if not isinstance(equality, FunctionType) or not home or Path(home).is_relative_to(root):
            return  # object's, a builtin's, or the tests' own
        where = Path(frame.f_code.co_filename)
        if where.is_relative_to(root):
            line = f"{where.relative_to(root).as_posix()}:{frame.f_lineno}"
            lines = self.row(nodeid).setdefault("reflexive", [])
            if line not in lines:
                lines.append(line)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        Running.nodeid, Running.record, Running.reflexive = item.nodeid, self.record, self.reflexive
        planted = self.planted(item)
        tracer = self.config.stash.get(TRACER, None)
        if not planted:
            self.progress.write(f"start\t{item.nodeid}\n")
        if tracer is not None:
            tracer.restore()  # unset while collecting or between tests: named as no test's
            tracer.name("" if planted else item.nodeid)
        try:
            return (yield)
        finally:
            Running.nodeid = None
            if tracer is not None:
                tracer.restore()
                tracer.name("")
            if not planted:
                self.progress.write(f"end\t{item.nodeid}\t{self.row(item.nodeid)['outcome']}\n")

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Iterator[Any]:
        """In reach mode, a fixture the tests of other files share (its scope `package` or
        `session`) is named as such: what it calls can reach every test that uses it."""
        tracer = self.config.stash.get(TRACER, None)
        if tracer is None or not tracer.reach or fixturedef.scope not in SHARED_SCOPES:
            return (yield)
        before = tracer.evidence
        tracer.evidence = f"{before} {SHARED}"
        try:
            return (yield)
        finally:
            tracer.evidence = before

    def planted(self, item: pytest.Item) -> bool:
        return self.canaries is not None and self.canaries.owns(item.nodeid)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        items = [item for item in session.items if not self.planted(item)]
        self.collected = [item.nodeid for item in items]
        # Hypothesis marks the function its @given wraps; every other test is an example.
        self.properties = [
            item.nodeid
            for item in items
            if getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        ]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = self.row(report.nodeid)
        row["seconds"] += report.duration
        if report.passed:
            return
        outcome = "skipped" if report.skipped else "failed"
        if report.failed and report.when != "call":
            outcome = "error"
        self.worsen(row, outcome, report.longreprtext)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A module that fails to import has no test ids: its own id carries the error.
        if report.failed:
            self.worsen(self.row(report.nodeid), "error", report.longreprtext)

    @staticmethod
    def worsen(row: dict[str, Any], outcome: str, message: str) -> None:
        if RANK[outcome] > RANK[row["outcome"]]:
            row["outcome"] = outcome
            row["message"] = message[-MESSAGE_LIMIT:]

    def pytest_assertion_pass(self, item: pytest.Item, lineno: int, orig: str, expl: str) -> None:
        self.row(item.nodeid)["hits"] += 1
        self.record(item.nodeid, value_digest(explained(expl)))
        same = SAME_NAME.fullmatch(orig)
        # Each passing assert runs this: the frame is looked for only where it is wanted.
        frame = asserting_frame(lineno) if same or SNAPSHOT_LOCALS else None
        if frame is None:
            return
        if same:
            spaces = (frame.f_locals, frame.f_globals)
            found = next((space for space in spaces if same[1] in space), None)
            if found is not None:
                note_reflexive(frame, found[same[1]])
        if SNAPSHOT_LOCALS and frame.f_code.co_flags & CO_OPTIMIZED:
            drop_snapshot(frame)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.canaries is not None:
            exitstatus = self.without_canaries(session, exitstatus)
        payload = {
            "collected": self.collected,
            "properties": self.properties,
            "deselected": self.deselected,
            "tests": self.tests,
            "exitstatus": int(exitstatus),
        }
        if self.sources is not None:
            planted = self.canaries.files if self.canaries else frozenset()
            found = imported_from(self.sources)
            payload["sources"] = {k: v for k, v in found.items() if v not in planted}
        if self.canaries is not None:
            report = self.canary_report(self.canaries)
            payload.update(report)
            write_json(self.canaries.report, {**report, "digest": self.digest()})
        write_json(self.path, payload)
        self.progress.close()
        tracer = self.config.stash.get(TRACER, None)
        if tracer is not None:
            tracer.finish()

    def without_canaries(self, session: pytest.Session, exitstatus: int) -> int:
        """The run's exit status as if no canary ran: the failing one fails the session, and
        the gate reads the exit status of a rerun (flake-budget)."""
        lost = any(row["outcome"] in ("failed", "error") for row in self.tests.values())
        if exitstatus == pytest.ExitCode.TESTS_FAILED and not lost:
            session.exitstatus = exitstatus = pytest.ExitCode.OK
        return int(exitstatus)

    def canary_report(self, canaries: Canaries) -> dict[str, Any]:
        """What the canaries did, and what changed in pytest's machinery meanwhile."""
        roots = plugin_roots(self.config)
        changed = machinery_changes(LOADED, roots) + hook_changes(self.config, HOOKS, roots)
        outcomes = {node: row["outcome"] for node, row in canaries.rows.items()}
        return {"canaries": outcomes, "tampered": changed}

    def digest(self) -> str:
        return digest({node: row["outcome"] for node, row in self.tests.items()})


# Before 3.13 (PEP 667) CPython's frame keeps its `locals()` as a snapshot dict; then it is a
# proxy of the frame's own variables, which clearing would delete.
SNAPSHOT_LOCALS = sys.implementation.name == "cpython" and sys.version_info < (3, 13)


def drop_snapshot(frame: FrameType) -> None:
    """The explanation pytest built for the pass hook called `locals()`, whose snapshot a
    function's frame keeps, with every value the test held then: `del app` would not free it
    (Flask's test_app_freed_on_zero_refcount failed only under the gate). Emptied, the next
    `locals()` takes a fresh one. A test that holds the dict itself (`ns = locals()`) keeps
    it whole; a module's or a class body's f_locals is its namespace, never passed here."""
    namespace = frame.f_locals
    if sys.getrefcount(namespace) <= 3:  # the frame's, this name's, getrefcount's argument
        namespace.clear()


# `assert r == r`: a name compared with itself, read from the test's frame (no code runs).
SAME_NAME = re.compile(r"\s*([A-Za-z_]\w*)\s*==\s*\1\s*")


def asserting_frame(lineno: int) -> FrameType | None:
    """The frame of the `assert` whose pass hook runs now: the first outside pytest's and
    pluggy's machinery, at the assertion's line."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(40):
        if frame is None:
            return None
        if frame.f_lineno == lineno and not machinery(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def machinery(filename: str) -> bool:
    return any(part in filename for part in ("/_pytest/", "/pluggy/", __file__))


def write_json(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload), "utf-8")
    os.replace(tmp, path)


def imported_from(root: Path) -> dict[str, str]:
    """Module name -> its file relative to `root`, for every loaded module under `root`."""
    found = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file:
            continue
        path = Path(file).resolve()
        if path.is_relative_to(root):
            found[name] = path.relative_to(root).as_posix()
    return found


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption("--oracle-evidence")
    if target:
        evidence = Evidence(config, Path(target), config.getoption("--oracle-sources"))
        config.pluginmanager.register(evidence, "oracle-gate-evidence")
    canaries = config.stash.get(CANARIES, None)
    if canaries is not None:
        config.args.extend(canaries.args)
        # A failing canary must not stop the session (`-x` in the base's addopts): every test
        # runs, on both builds.
        config.option.maxfail = 0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    option = config.getoption("--oracle-shard")
    if not option:
        return
    shard = parse_shard(option)
    canaries = config.stash.get(CANARIES, None)
    kept: list[pytest.Item] = []
    other: list[pytest.Item] = []
    for item in items:
        planted = canaries is not None and canaries.owns(item.nodeid)
        (kept if planted or shard.owns(item.nodeid) else other).append(item)
    if other:
        items[:] = kept
        config.hook.pytest_deselected(items=other)


# Last, once this module is whole: the machinery as it was when pytest loaded this plugin.
LOADED: Seen = snapshot()
