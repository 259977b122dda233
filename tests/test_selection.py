"""Safe test selection (_gate/change/scopes.py, _gate/runs/reach.py): which of the base's
functions the patch changed, read from both sides' source; which of them each test file of a
real pytest run calls on the parent's build (the reach tracer); and the test files a perturbed
rerun of the crossrun runs, judged end to end on the example with every perturbation."""

from __future__ import annotations

import datetime
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _gate.change.scopes import changed_functions
from _gate.core.context import ChangedFile, ChangedFunctions
from _gate.runs.pytest_run import PytestOptions, run_pytest
from _gate.runs.reach import Reached, everything, select
from _gate.runs.traced import Trace

from tests.helpers import edits
from tools.bakery import Verdict, branch, git, judge

pytestmark = pytest.mark.perturbed  # the `shop` bake runs every perturbation

MODULE = """\
import os

LIMIT = 3


def first(x):
    '''Add one.'''
    return x + 1


@staticmethod
def decorated(y=LIMIT):
    return y


class Shape:
    SIDES = 4

    def area(self, side):
        return side * side

    def walk(self):
        yield self.SIDES


def outer():
    def inner(q=2):
        return q

    return inner


def reads_os():
    return os.sep
"""


def changed(old: str, new: str, path: str = "pkg/mod.py") -> ChangedFunctions:
    return changed_functions({}, {path: old}, {path: new})


# One change each, and the base functions it reaches by their first lines (written out from
# MODULE above), or a part of the reason every test can reach it.
SPELLINGS: dict[str, tuple[tuple[str, str], tuple[str, ...] | str]] = {
    "a body line": (("return x + 1", "return 1 + x"), ("pkg/mod.py:6",)),
    "a method's body": (("return side * side", "return side**2"), ("pkg/mod.py:19",)),
    "a nested function's body": (("        return q", "        return q * 1"), ("pkg/mod.py:27",)),
    "a nested function's default": (("inner(q=2)", "inner(q=3)"), ("pkg/mod.py:26",)),
    "a trailing comment": (("return x + 1", "return x + 1  # one more"), ("pkg/mod.py:6",)),
    "a comment line": (("LIMIT = 3\n", "LIMIT = 3\n# a limit\n"), ()),
    "an import read by one function": (("import os", "import os.path as os"), ("pkg/mod.py:33",)),
    "a constant": (("LIMIT = 3", "LIMIT = 4"), "pkg/mod.py:3 runs in the module's own code"),
    "a default at the top": (("y=LIMIT", "y=None"), "pkg/mod.py:12 runs in the module's own"),
    "a decorator": (("@staticmethod", "@classmethod"), "pkg/mod.py:11 runs in the module's own"),
    "a class attribute": (("SIDES = 4", "SIDES = 5"), "pkg/mod.py:17 runs in the module's own"),
    "a docstring": (("'''Add one.'''", "'''Add 1.'''"), "pkg/mod.py:7 runs in the module's own"),
    "a generator no more": (("yield self.SIDES", "return self.SIDES"), "from a generator to a def"),
    "a new method": (
        ("    def walk(self):", "    def run(self):\n        return 0\n\n    def walk(self):"),
        "runs in the module's own code",
    ),
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_each_change_reaches_its_functions_or_every_test(spelling: str) -> None:
    (before, after), expected = SPELLINGS[spelling]
    assert MODULE.count(before) == 1, spelling
    found = changed(MODULE, MODULE.replace(before, after))
    if isinstance(expected, tuple):
        assert (found.functions, found.everything) == (expected, "")
    else:
        assert (found.functions, expected in found.everything) == ((), True), found.everything


def test_a_deleted_line_reaches_the_base_function_it_was_in() -> None:
    new = MODULE.replace("    def inner(q=2):\n        return q\n\n", "")
    # outer, where inner was made, and inner's own code
    assert changed(MODULE, new).functions == ("pkg/mod.py:26", "pkg/mod.py:27")


@pytest.mark.parametrize(
    ("name", "old", "new", "everything"),
    [
        ("pkg/data.json", "digest-a", "digest-b", "pkg/data.json: a file of the build"),
        ("pkg/new.py", None, "x = 1\n", "pkg/new.py: a module added"),
        ("pkg/gone.py", "x = 1\n", None, "pkg/gone.py: a module deleted"),
        ("pkg-1.dist-info/entry_points.txt", "a", "b", "entry_points.txt"),
        (
            "pkg-1.dist-info/METADATA",
            "Version: 1\nRequires-Dist: a\n",
            "Version: 1\nRequires-Dist: b\n",
            "METADATA",
        ),
        ("pkg-1.dist-info/METADATA", "Version: 1\n\nold readme\n", "Version: 2\n\nnew\n", ""),
    ],
)
def test_a_file_that_is_no_function_reaches_every_test(
    name: str, old: str | None, new: str | None, everything: str
) -> None:
    """Other files of the build, the dependencies and entry points reach every test; the
    wheel's version and README none."""
    found = changed_functions(
        {}, {name: old} if old is not None else {}, {name: new} if new is not None else {}
    )
    assert found.functions == ()
    assert (everything in found.everything, bool(found.everything)) == (True, bool(everything))


# A package, and a test file per way of reaching it: by a call, by a fixture every file
# shares, through a process, and not at all. The conftest puts the package on sys.path.
PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/mod.py": "def called():\n    return 1\n\n\ndef shared():\n    return 2\n",
}
TESTS = {
    "conftest.py": """\
        import sys

        import pytest

        sys.path.insert(0, {site!r})


        @pytest.fixture(scope="session")
        def every_file():
            from pkg.mod import shared

            return shared()
    """,
    "tests/test_a_calls.py": """\
        from pkg.mod import called


        def test_calls():
            assert called() == 1
    """,
    "tests/test_b_nothing.py": """\
        def test_nothing():
            assert 1 + 1 == 2
    """,
    "tests/test_c_shared.py": """\
        def test_shared(every_file):
            assert every_file == 2
    """,
    "tests/test_d_process.py": """\
        import subprocess


        def test_process():
            assert subprocess.run(["true"], check=False).returncode == 0
    """,
}


def pytest_tree(tmp: Path, extra: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """The package (where a confined run may read it) and its tests, with `extra` files; the
    package's modules, as the reach tracer names them."""
    root = tmp / "tree"
    site = root / "site"
    for rel, text in PACKAGE.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text, "utf-8")
    for rel, text in {**TESTS, **extra}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).format(site=str(site)), "utf-8")
    return root, {os.path.realpath(site / rel): rel for rel in PACKAGE}


def reach_run(tmp: Path, extra: dict[str, str] | None = None) -> tuple[Reached, list[str]]:
    root, modules = pytest_tree(tmp, extra or {})
    how = PytestOptions(timeout=120, own_config=True, reach=ChangedFunctions(modules, ()))
    run = run_pytest(Path(sys.executable), root, ["tests"], how)
    assert run.reached is not None, run
    failed = {node: out for node, out in (run.outcomes or {}).items() if out != "passed"}
    assert failed == {}, run.output_tail
    order = list(dict.fromkeys(node.split("::")[0] for node in run.outcomes or {}))
    return Reached.from_dict({**run.reached, "order": order}), order


def test_the_reach_tracer_names_what_each_test_file_called(tmp_path: Path) -> None:
    reached, order = reach_run(tmp_path)
    assert reached.broken == ""
    names = ("a_calls", "b_nothing", "c_shared", "d_process")
    assert order == [f"tests/test_{name}.py" for name in names]
    assert reached.files["tests/test_a_calls.py"] == {"pkg/mod.py:1"}
    assert "tests/test_b_nothing.py" not in reached.files
    assert "process" in reached.files["tests/test_d_process.py"]
    # The session fixture's call is set up for test_c's test, and shared by every file.
    assert "pkg/mod.py:5" in reached.outside
    assert "pkg/mod.py:5" not in reached.files.get("tests/test_c_shared.py", set())
    functions = {"tests/test_a_calls.py": ChangedFunctions({}, ("pkg/mod.py:1",))}
    chosen = select(functions["tests/test_a_calls.py"], reached, order)
    assert chosen.files == tuple(order)  # from the first that called it, to the last
    later = select(ChangedFunctions({}, ("pkg/mod.py:9",)), reached, order)
    assert later.files == ("tests/test_d_process.py",)  # only the process may reach it
    shared = select(ChangedFunctions({}, ("pkg/mod.py:5",)), reached, order)
    assert shared.files is None
    assert "shared across files" in shared.why


# Ways a test unsets or replaces the tracer, then calls the package unseen. A recursion past
# Python's limit raised in a trace function unsets it (structlog's tests/test_tracebacks.py).
REMOVALS = {
    "unset": "sys.settrace(None)",
    "replaced": "sys.settrace(lambda *a: None)",
    "threads": "threading.settrace(lambda *a: None)",
    "recursion": (
        "def down(n):\n        return down(n + 1)\n\n"
        "    with pytest.raises(RecursionError):\n        down(0)"
    ),
}
# A file after the one that unsets it, calling what nothing else calls: traced again.
AFTER = "from pkg.mod import shared\n\n\ndef test_after():\n    assert shared() == 2\n"


def unsetting(removal: str) -> str:
    head = "import sys, threading\n\nimport pytest\nfrom pkg.mod import called\n\n\n"
    return head + f"def test_stop():\n    {removal}\n    assert called() == 1\n"


@pytest.mark.parametrize("removal", REMOVALS.values(), ids=REMOVALS)
def test_a_test_that_unsets_the_reach_tracer_reaches_the_change(
    tmp_path: Path, removal: str
) -> None:
    """Its file reaches whatever changed (what it called after is unknown); the tracer is set
    again after it, so the files after it are still told apart; the record is kept usable."""
    extra = {"tests/test_b2_stop.py": unsetting(removal), "tests/test_b3_after.py": AFTER}
    reached, order = reach_run(tmp_path, extra)
    assert reached.broken == ""
    assert "untraced" in reached.files["tests/test_b2_stop.py"], reached.files
    assert reached.files["tests/test_b3_after.py"] == {"pkg/mod.py:5"}  # traced again
    chosen = select(ChangedFunctions({}, ("pkg/mod.py:9",)), reached, order)
    assert chosen.files == tuple(order[order.index("tests/test_b2_stop.py") :]), chosen
    assert chosen.reasons["tests/test_b2_stop.py"] == ["untraced"]


def test_a_tracer_unset_while_collecting_selects_every_test(tmp_path: Path) -> None:
    """Outside any test, what ran untraced may reach any file: the record selects nothing."""
    stop = "import sys\n\nsys.settrace(None)\n\n\ndef test_collected():\n    pass\n"
    reached, order = reach_run(tmp_path, {"tests/test_0_stop.py": stop})
    assert reached.broken == "the reach tracer was unset while collecting or between tests"
    chosen = select(ChangedFunctions({}, ("pkg/mod.py:9",)), reached, order)
    assert (chosen.files, chosen.why) == (None, f"every test: {reached.broken}")


def test_a_test_that_unsets_the_change_tracer_loses_only_its_own_coverage(
    tmp_path: Path,
) -> None:
    """Change coverage in a pytest run (the crossrun): the test that unset it is named as lost,
    and the tests after it are traced again."""
    extra = {"tests/test_b2_stop.py": unsetting(REMOVALS["unset"]), "tests/test_b3_after.py": AFTER}
    root, modules = pytest_tree(tmp_path, extra)
    (installed,) = (path for path, rel in modules.items() if rel == "pkg/mod.py")
    trace = Trace((ChangedFile(installed, "src/pkg/mod.py", (2, 6)),), "crossrun", tests=True)
    how = PytestOptions(timeout=120, own_config=True, trace=trace)
    run = run_pytest(Path(sys.executable), root, ["tests"], how)
    assert run.coverage is not None, run
    stop, after = "crossrun tests/test_b2_stop.py::test_stop", "crossrun tests/test_b3_after.py"
    assert len(run.coverage.lost) == 1, run.coverage.lost
    assert run.coverage.lost[0].startswith(f"{stop}: "), run.coverage.lost
    assert run.coverage.tampered == []
    ran = run.coverage.hits["src/pkg/mod.py"]
    assert stop not in ran[2]  # called after the tracer was unset: not seen
    assert f"{after}::test_after" in ran[6]


def test_a_reach_run_is_confined_by_the_launcher(tmp_path: Path) -> None:
    """The reach run is one more process of a build's code: the launcher starts it, as every
    crossrun run, so its tests (and the code they call) can write nothing outside their
    scratch and cannot see the judge's process; what they started is a `process` call."""
    outside, judge_pid = tmp_path / "escaped", os.getpid()
    escape = (
        "import os, pathlib, subprocess\n\n\n"
        "def test_writes_nothing_outside():\n"
        "    try:\n"
        f"        pathlib.Path({str(outside)!r}).write_text('x')\n"
        "    except OSError:\n"
        "        return\n"
        "    raise AssertionError('wrote outside its scratch')\n\n\n"
        "def test_sees_no_judge():\n"
        "    try:\n"
        f"        os.kill({judge_pid}, 0)\n"
        "    except (ProcessLookupError, PermissionError):\n"
        "        return\n"
        "    raise AssertionError('reached the judge')\n"
    )
    reached, order = reach_run(tmp_path, {"tests/test_e_escape.py": escape})
    assert reached.broken == ""
    assert order[-1] == "tests/test_e_escape.py"
    assert not outside.exists()
    assert "tests/test_e_escape.py" not in reached.files  # it called nothing of the package


def test_nothing_known_selects_every_test() -> None:
    assert select(None, None, ()).files is None
    assert select(ChangedFunctions({}, (), "pkg/a.py:3 runs"), None, ()).files is None
    assert everything("why").why == "every test: why"


# End to end: the example with every perturbation. discounts.py's `invert_discount` is called
# by tests/test_discounts.py alone, which runs after test_cli.py and before test_orders.py.
D = "src/shop/discounts.py"
ANCHOR = "    amount = (discounted_cents - 1) * BPS_FULL // keep + 1\n"
REFACTOR = "    below = (discounted_cents - 1) * BPS_FULL\n    amount = below // keep + 1\n"
# Wrong only under a clock more than a year ahead (the shifted clock's world).
LATER = ANCHOR + (
    "    import datetime\n\n"
    f"    if datetime.date.today().year > {datetime.date.today().year}:\n"
    "        amount += 1\n"
)


# Wrong only under the shifted clock, and never in the calling test's own file: each rewrites
# how orders.py stores an order, which only tests/test_orders.py (a later file) checks.
POISONS = {
    "a function replaced": "shop.orders.canonical_json = lambda order: '{}'",
    "a pattern replaced": "shop.orders._ORDER_ID = __import__('re').compile('no id')",
}


def poisoned(line: str) -> str:
    when = f"    if datetime.date.today().year > {datetime.date.today().year}:\n"
    return ANCHOR + f"    import datetime\n\n{when}        import shop.orders\n\n        {line}\n"


def judged_edit(shop: Path, name: str, old: str, new: str) -> tuple[str, Verdict]:
    """A branch `select/NAME` replacing `old` with `new` in discounts.py, judged on main."""
    head = branch(shop, f"select/{name}", edits((D, old, new)))
    return head, judge(shop, "--base", "main", "--head", head)


def crossrun_report(repo: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((repo / "reports/crossrun.json").read_text("utf-8"))
    return report


def crossrun_selection(repo: Path) -> dict[str, object]:
    report = crossrun_report(repo)
    selection = report["evidence"]["selection"]
    assert isinstance(selection, dict), report
    return selection


@pytest.mark.e2e
def test_a_perturbed_rerun_runs_the_files_from_the_first_that_called_the_change(
    shop: Path,
) -> None:
    head, judged = judged_edit(shop, "refactor", ANCHOR, REFACTOR)
    assert (judged.returncode, judged.report["verdict"]) == (0, "merge"), judged.output
    selection = crossrun_selection(shop)
    assert selection["selected"] == ["tests/test_discounts.py", "tests/test_orders.py"]
    assert selection["reasons"] == {"tests/test_discounts.py": ["shop/discounts.py:90"]}
    report = crossrun_report(shop)
    perturbed = {
        evidence
        for ran in report["evidence"]["coverage"]["hits"].values()
        for runs in ran.values()
        for evidence in runs
        if evidence.startswith("crossrun [")
    }
    assert perturbed
    assert all("tests/test_discounts.py::" in e for e in perturbed), perturbed
    # Judged again on the same base: the parent's record is read where it was kept (by this
    # judgment, or an earlier one of this module on the same base), and selects alike.
    again = judge(shop, "--base", "main", "--head", head)
    assert again.report["verdict"] == "merge", again.output
    assert crossrun_selection(shop)["kept"] is True
    assert crossrun_selection(shop)["selected"] == selection["selected"]


@pytest.mark.e2e
def test_a_break_under_the_shifted_clock_is_still_caught_by_the_selected_run(
    shop: Path,
) -> None:
    _, judged = judged_edit(shop, "later", ANCHOR, LATER)
    assert judged.report["verdict"] == "block", judged.output
    report = crossrun_report(shop)
    lost = report["evidence"]["perturbations"]["lost"]
    assert lost, report["summary"]
    assert all(row["perturbation"] == "clock" for row in lost), report["summary"]
    assert crossrun_selection(shop)["selected"] == [
        "tests/test_discounts.py",
        "tests/test_orders.py",
    ]


@pytest.mark.e2e
@pytest.mark.parametrize("poison", sorted(POISONS))
def test_what_the_change_leaves_behind_for_a_later_file_is_caught(shop: Path, poison: str) -> None:
    """The tests after the first that reached the change run too, and a test that fails there
    and passes alone runs again in that order: what changed code left in the process breaks a
    later file's tests. Each merged before (a retry by id passed: flaky)."""
    name = poison.replace(" ", "-")
    _, judged = judged_edit(shop, f"poison-{name}", ANCHOR, poisoned(POISONS[poison]))
    assert judged.report["verdict"] == "block", judged.output
    report = crossrun_report(shop)
    lost = {row["id"].split("::")[0] for row in report["evidence"]["perturbations"]["lost"]}
    assert lost == {"tests/test_orders.py"}, report["summary"]
    assert crossrun_selection(shop)["reasons"] == {
        "tests/test_discounts.py": ["shop/discounts.py:90"]
    }


@pytest.mark.e2e
def test_a_change_outside_any_function_reruns_every_test(shop: Path) -> None:
    _, judged = judged_edit(shop, "constant", "BPS_FULL = 10_000", "BPS_FULL = 10000")
    assert judged.report["verdict"] == "merge", judged.output
    selection = crossrun_selection(shop)
    assert selection["selected"] is None
    assert str(selection["why"]).startswith(f"every test: {D[4:]}:"), selection


@pytest.mark.e2e
def test_selection_turned_off_or_misspelt(shop: Path) -> None:
    head = branch(shop, "select/off", edits((D, ANCHOR, REFACTOR)))
    judged = judge(shop, "--base", "main", "--head", head, env={"ORACLE_SELECT": "off"})
    assert judged.report["verdict"] == "merge", judged.output
    assert crossrun_selection(shop) == {
        "selected": None,
        "why": "every test: $ORACLE_SELECT=off",
        "reasons": {},
        "kept": False,
    }
    wrong = judge(shop, "--base", "main", "--head", head, env={"ORACLE_SELECT": "yes"})
    assert wrong.returncode == 2, wrong.output
    assert "$ORACLE_SELECT='yes': expected `on` or `off`" in wrong.output
    assert "Traceback" not in wrong.output
    git(shop, "status", "--short")


# A refactor of stack_discounts, which every case that prices a cart calls; a help text runs
# none of it.
STACK = "    remaining = subtotal_cents\n"
WORLDS = ("env+terminal+files", "env+files+clock")


@pytest.mark.e2e
def test_a_cases_perturbed_runs_are_left_out_where_it_called_no_changed_function(
    shop: Path,
) -> None:
    _, judged = judged_edit(shop, "cases", STACK, "    remaining = subtotal_cents + 0\n")
    assert judged.report["verdict"] == "merge", judged.output
    report = json.loads((shop / "reports/replay-report.json").read_text("utf-8"))
    left = report["evidence"]["perturbations"]["unselected"]
    for world in WORLDS:
        assert f"help-exits-zero [{world}]" in left, left
        assert f"percent-coupon [{world}]" not in left, left
    assert f"{len(left)} perturbed runs of cases that called no changed function" in str(
        report["summary"]
    )
    # The perturbed runs that did run traced the changed line.
    hits = report["evidence"]["coverage"]["hits"]
    ran = {e for lines in hits.values() for runs in lines.values() for e in runs}
    assert {f"case percent-coupon [{world}]" for world in WORLDS} <= ran, ran
