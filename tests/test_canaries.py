"""Tamper evidence in the crossrun (issue 22, item 6): canaries and pytest's machinery.

The crossrun imports the patch's package into the pytest process whose outcomes it compares.
Each patch here changes a behaviour only a parent test pins (the cap error message, which
`pytest.raises(match=...)` checks, or a unittest test's `assertRaisesRegex`) and ships an
outcome forger in the package, written the ways an attacker would: a wrapper of pytest's
`call_and_report`, a hook wrapper registered on the plugin manager at import, a patched
`TestReport.from_item_and_call`, a `.pth` file the wheel installs into site-packages, a
patched `unittest.TestCase.run`, a forger that spares every test but the one it needs, and a
rewrite of the evidence file at exit. Each is a real branch of one bake, built from the local
wheelhouse; scripts/crossrun.py runs as the judge runs it (`main(argv)`), once through the
whole judge. Every one fails closed, naming what was wrong; without the canaries and the
machinery check each merged.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from _gate.runs.canaries import plant
from _gate.runs.crossrun_run import Setup, copy_tree
from _gate.runs.crossrun_run import run as crossrun_run

from tests.helpers import Built, Change, crossrun_then_budget, edits, run_crossrun
from tools.bakery import branch, edit, git, judge

SRC = "src/shop/discounts.py"
INIT = "src/shop/__init__.py"
MESSAGE = 'raise ValueError(f"cap_cents must be >= 0, got {coupon.cap_cents}")'
CAP_TEST = "tests/test_discounts.py::test_stack_rejects_invalid_input[negative-cap]"
TAMPERED = "the patch build's pytest run was tampered with: "
# Each forger acts only inside pytest, so the CLI, the cassettes and the worker see the change.
CALL_AND_REPORT = """
import sys as _sys

if "pytest" in _sys.modules:
    import _pytest.runner as _runner

    _real = _runner.call_and_report

    def _passing(item, when, log=True, **kwds):
        report = _real(item, when, log=False, **kwds)
        if FORGE(item):
            report.outcome, report.longrepr = "passed", None
        if log:
            item.ihook.pytest_runtest_logreport(report=report)
        return report

    _runner.call_and_report = _passing
"""
HOOK_WRAPPER = """
import gc as _gc
import sys as _sys

if "pytest" in _sys.modules:
    import pytest as _pytest

    class _Forger:
        @_pytest.hookimpl(wrapper=True)
        def pytest_runtest_makereport(self, item, call):
            report = yield
            report.outcome, report.longrepr = "passed", None
            return report

    for _pm in [o for o in _gc.get_objects() if isinstance(o, _pytest.PytestPluginManager)]:
        _pm.register(_Forger(), "shop-forger")
"""
TEST_REPORT = """
import sys as _sys

if "pytest" in _sys.modules:
    from _pytest.reports import TestReport as _Report

    _made = _Report.from_item_and_call.__func__

    def _passed(cls, item, call):
        report = _made(cls, item, call)
        report.outcome, report.longrepr = "passed", None
        return report

    _Report.from_item_and_call = classmethod(_passed)
"""
# Run from a .pth at interpreter start, before pytest or any plugin is loaded.
AT_START = """
import _pytest.runner as _runner

_real = _runner.call_and_report


def _passing(item, when, log=True, **kwds):
    report = _real(item, when, log=False, **kwds)
    report.outcome, report.longrepr = "passed", None
    if log:
        item.ihook.pytest_runtest_logreport(report=report)
    return report


_runner.call_and_report = _passing
"""
UNITTEST_RUN = """
import sys as _sys

if "pytest" in _sys.modules:
    import unittest as _unittest

    class _Quiet:
        def __init__(self, result):
            self._result = result

        def __getattr__(self, name):
            return getattr(self._result, name)

        def addFailure(self, test, err):
            self._result.addSuccess(test)

        addError = addFailure

    _run = _unittest.TestCase.run

    def _quiet_run(self, result=None):
        return _run(self, _Quiet(result))

    _unittest.TestCase.run = _quiet_run
"""
# Honest on its first run in the patch build's environment, a forger on every later one: the
# crossrun's failure is deferred to flake-budget, whose retry it would pass.
# Confined, a run cannot leave a file for the next: the retry is told apart by its argv (one
# test id, where the crossrun names folders).
# Forges where the world says a retry runs (a retry is the whole run again, as it ran: a
# forger cannot tell it apart; the test changes the base's README in between to stand in).
ON_RETRY = """
import sys as _sys
from pathlib import Path as _Path

_readme = _Path("README.md")
if "pytest" in _sys.modules and _readme.is_file() and "retry now" in _readme.read_text():
    import _pytest.runner as _runner

    _real = _runner.call_and_report

    def _passing(item, when, log=True, **kwds):
        report = _real(item, when, log=False, **kwds)
        report.outcome, report.longrepr = "passed", None
        if log:
            item.ihook.pytest_runtest_logreport(report=report)
        return report

    _runner.call_and_report = _passing
"""
AT_EXIT = """
import atexit as _atexit
import json as _json
import sys as _sys


def _rewrite():
    for arg in _sys.argv:
        if arg.startswith("--oracle-evidence="):
            path = arg.split("=", 1)[1]
            data = _json.load(open(path))
            for row in data["tests"].values():
                row["outcome"] = "passed"
            _json.dump(data, open(path, "w"))


if "pytest" in _sys.modules:
    _atexit.register(_rewrite)
"""
CAP_UNITTEST = """\
import unittest

from shop.discounts import Coupon, stack_discounts


class CapMessageTest(unittest.TestCase):
    def test_the_cap_message_shows_the_value(self) -> None:
        with self.assertRaisesRegex(ValueError, "got -1"):
            stack_discounts(100, [Coupon("percent", 1000, cap_cents=-1)])
"""


def add_file(path: str, text: str) -> Change:
    return lambda tree: (tree / path).write_text(text, "utf-8")


def message_change(tree: Path) -> None:
    """The behaviour only a parent unit test pins: the cap error's wording."""
    edit(tree / SRC, MESSAGE, MESSAGE.replace("cap_cents must be", "the cap must be"))


def forged(forger: str, blanket: bool = True) -> Change:
    """The message change, and `forger` appended to the package's __init__.py."""
    which = "True" if blanket else '"negative-cap" in item.nodeid'

    def change(tree: Path) -> None:
        message_change(tree)
        code = f"\n\ndef FORGE(item):\n    return {which}\n\n{forger}"
        with (tree / INIT).open("a", encoding="utf-8") as out:
            out.write(code)

    return change


def pth_in_the_wheel(tree: Path) -> None:
    """flit's external data lands under the environment's prefix: a `.pth` in site-packages."""
    message_change(tree)
    (tree / "src/shop/_start.py").write_text(AT_START, "utf-8")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    pth = tree / "data/lib" / version / "site-packages/shop_start.pth"
    pth.parent.mkdir(parents=True)
    pth.write_text("import shop._start\n", "utf-8")
    table = '[tool.flit.external-data]\ndirectory = "data"\n\n[tool.pytest.ini_options]'
    edit(tree / "pyproject.toml", "[tool.pytest.ini_options]", table)


BLANKET: dict[str, Change] = {
    "call-and-report": forged(CALL_AND_REPORT),
    "hook-wrapper-registered-at-import": forged(HOOK_WRAPPER),
    "test-report-classmethod": forged(TEST_REPORT),
    "pth-in-the-wheel": pth_in_the_wheel,
}
CANARY_PASSED = re.compile(r"canary tests/\S+\.py::test_\w+ passed but must fail$")


@pytest.mark.parametrize("name", sorted(BLANKET))
def test_a_blanket_outcome_forger_is_blocked_by_its_canary(
    repo: Path, envs: Built, tmp_path: Path, name: str
) -> None:
    head = branch(repo, f"canaries/{name}", BLANKET[name])
    code, report = run_crossrun(envs, head, tmp_path)
    assert code == 1, report["summary"]
    assert report["status"] == "block"
    assert report["summary"].startswith(TAMPERED), report["summary"]
    assert CANARY_PASSED.search(report["summary"]), report["summary"]


def test_the_pth_forger_is_installed_where_the_interpreter_runs_it(repo: Path, envs: Built) -> None:
    """The attack above is real: the wheel put the `.pth` into the patch's site-packages, and
    the patch build's interpreter runs it at start."""
    head = branch(repo, "canaries/pth-installed", pth_in_the_wheel)
    python = envs(head, "patch")["python"]
    found = list(python.parent.parent.glob("lib/python*/site-packages/shop_start.pth"))
    assert len(found) == 1
    done = subprocess.run(
        [str(python), "-c", "import _pytest.runner as r; print(r.call_and_report.__module__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "shop._start"


def test_a_unittest_forger_is_caught_by_the_unittest_canary(
    repo: Path, envs: Built, tmp_path: Path
) -> None:
    """A base with a unittest test gets TestCase canaries: a patched TestCase.run passes the
    failing one (and the plain canaries, which it does not touch, behave)."""
    base = branch(repo, "canaries-base/unittest", add_file("tests/test_cap.py", CAP_UNITTEST))
    wording = (MESSAGE, MESSAGE.replace("got {coupon.cap_cents}", "got a negative cap"))

    def change(tree: Path) -> None:
        edit(tree / SRC, *wording)
        with (tree / INIT).open("a", encoding="utf-8") as out:
            out.write(UNITTEST_RUN)

    head = branch(repo, "canaries/unittest-run", change, base=base)
    code, report = run_crossrun(envs, head, tmp_path, base=base)
    assert code == 1, report["summary"]
    unittest_canary = r"canary tests/\S+\.py::\w+Test::test_\w+ passed but must fail$"
    assert re.search(unittest_canary, report["summary"]), report["summary"]


def test_a_forger_that_spares_the_canaries_is_caught_by_the_machinery_check(
    repo: Path, envs: Built, tmp_path: Path
) -> None:
    """It flips only the test it needs: every canary behaves, the wrapped function shows."""
    head = branch(repo, "canaries/targeted", forged(CALL_AND_REPORT, blanket=False))
    code, report = run_crossrun(envs, head, tmp_path)
    assert code == 1, report["summary"]
    machinery = "pytest's machinery changed during the run: _pytest.runner.call_and_report"
    assert report["summary"].startswith(TAMPERED + machinery), report["summary"]


def test_an_evidence_file_rewritten_at_exit_is_caught_by_its_digest(
    repo: Path, envs: Built, tmp_path: Path
) -> None:
    head = branch(repo, "canaries/at-exit", forged(AT_EXIT))
    code, report = run_crossrun(envs, head, tmp_path)
    assert code == 1, report["summary"]
    assert report["summary"] == TAMPERED + "the evidence file changed after the plugin wrote it"


def test_a_forger_that_passes_only_the_retry_fails_flake_budget_closed(
    repo: Path, envs: Built, tmp_path: Path
) -> None:
    head = branch(repo, "canaries/on-retry", forged(ON_RETRY))
    readme = envs("main", "parent")["tree"] / "README.md"
    told = readme.read_text("utf-8")
    try:
        retry_now = edits(("README.md", told, told + "retry now\n"))
        code, report = crossrun_then_budget(envs, head, tmp_path, between=retry_now)
    finally:  # the built tree is the module's
        readme.write_text(told, "utf-8")
    summary = report["summary"]
    assert code == 1, summary
    retry = "the patch build's retry of the crossrun was tampered with: canary tests/"
    assert summary.startswith(retry), summary


def test_canaries_stay_out_of_the_outcomes_and_look_like_the_bases_tests(
    repo: Path, envs: Built, tmp_path: Path
) -> None:
    """An honest run with canaries (they behaved, or the run would raise) leaves the outcomes,
    hits and sources of the same run without them."""
    parent = envs("main", "parent")
    tree, python = parent["tree"], parent["python"]
    result = crossrun_run(python, tree, ["tests"], Setup(120.0, hidden=("shop",), canaries=True))
    plain = crossrun_run(python, tree, ["tests"], Setup(120.0, hidden=("shop",)))
    assert result.outcomes is not None
    assert result.outcomes == plain.outcomes
    assert result.hits == plain.hits
    assert result.sources == plain.sources
    assert "passed" in result.outcomes.values()
    # The failing canary leaves pytest's exit status alone: flake-budget's retries read it.
    assert result.exit_code == plain.exit_code == 0


def test_canaries_beside_a_root_test_file_are_collected_without_being_named(
    repo: Path, envs: Built, tmp_path: Path
) -> None:
    """A base whose tests are one file at the root (`tests: [test.py]`): the canary module
    beside it is no target of the run, yet runs; outcomes hold the file's tests only."""
    text = (repo / "tests/test_discounts.py").read_text("utf-8")
    base = branch(repo, "canaries-base/root-file", add_file("test.py", text))
    code, report = run_crossrun(envs, base, tmp_path, "--tests", "test.py", base=base)
    assert code == 0, report["summary"]
    ids = set(report["evidence"]["parent"])
    assert ids
    assert all(node.startswith("test.py::") for node in ids)


@pytest.mark.e2e
def test_the_judge_does_not_merge_a_forged_crossrun(repo: Path) -> None:
    head = branch(repo, "canaries/judge", forged(CALL_AND_REPORT))
    verdict = judge(repo, "--base", "main", "--head", head)
    # The patch's code forged the run: that is a proof against it, not a fault of the gate.
    assert verdict.returncode == 1, verdict.output
    assert verdict.report["verdict"] == "block"
    assert verdict.statuses["crossrun"] == "block"
    assert verdict.step("crossrun")["summary"].startswith(TAMPERED)
    assert f"crossrun: block: {TAMPERED}" in verdict.output


@pytest.mark.parametrize("unittest_style", [False, True], ids=["plain", "unittest"])
def test_a_canary_module_sits_beside_a_base_test_module_named_like_it(
    repo: Path, tmp_path: Path, unittest_style: bool
) -> None:
    """Planted in the run's copy: in the base's test folder, `test_*.py` like its modules, a
    name no module of the tree has, named from the words of the base's test names, one
    failing and one passing test of each kind the base has, another module each run, and
    the plugin's file outside the copy."""
    if unittest_style:
        test_cap = add_file("tests/test_cap.py", CAP_UNITTEST)
        git(repo, "checkout", "-q", branch(repo, "canaries-base/plant", test_cap))
    base_tests = sorted((repo / "tests").glob("*.py"))
    names = [n for p in base_tests for n in re.findall(r"def test_(\w+)", p.read_text("utf-8"))]
    vocabulary = {w for n in names for w in n.split("_")}
    copies = [copy_tree(repo, tmp_path / f"copy{i}" / "tree", ["shop"]) for i in range(2)]
    planted = [plant(copy, ["tests"], copy.parent) for copy in copies]
    known = {p.name for p in base_tests}
    new = [{p.name for p in (copy / "tests").glob("*.py")} - known for copy in copies]
    assert [len(found) for found in new] == [1, 1]
    assert new[0] != new[1]
    name = next(iter(new[0]))
    assert re.fullmatch(r"test_[a-z]+(_[a-z]+)+\.py", name)
    assert set(name.removesuffix(".py").split("_")[1:]) <= vocabulary
    expected = planted[0].expected
    kinds = 2 if unittest_style else 1
    assert sorted(expected.values()) == ["failed"] * kinds + ["passed"] * kinds
    for node in expected:
        assert node.startswith(f"tests/{name}::")
        test = node.rsplit("::", 1)[1]
        assert test.startswith("test_")
        assert set(test.split("_")[1:]) <= vocabulary
    assert ("TestCase" in (copies[0] / "tests" / name).read_text("utf-8")) is unittest_style
    assert not planted[0].spec.is_relative_to(copies[0])
    assert planted[0].spec.is_file()


def without_property_oracles(tree: Path) -> None:
    for path in sorted((tree / "oracle").glob("test_*.py")):
        git(tree, "rm", "-q", str(path.relative_to(tree)))


@pytest.mark.e2e
def test_a_merge_no_property_oracle_saw_says_it_rests_on_in_process_evidence(repo: Path) -> None:
    """On a base with cassettes and no property oracle, an honest refactor still merges, and
    the summary says what the merge rests on; on the example's base it does not say so."""
    refactor = (MESSAGE, MESSAGE.replace('f"cap_cents', '"cap_cents" + f"'))

    def change(tree: Path) -> None:
        edit(tree / SRC, *refactor)

    base = branch(repo, "canaries-base/no-properties", without_property_oracles)
    said = []
    for name, on in (("bare", base), ("example", "main")):
        head = branch(repo, f"canaries/refactor-on-{name}", change, base=on)
        verdict = judge(repo, "--base", on, "--head", head)
        assert verdict.returncode == 0, verdict.output
        assert verdict.step("crossrun")["status"] == "pass"
        summary = (repo / "reports/judge-summary.md").read_text("utf-8")
        said.append("**In-process evidence only**: no property oracle ran" in summary)
    assert said == [True, False]
