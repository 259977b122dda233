"""Assertion probes and run-time check counts (_gate/inventory/probes.py, run_checks.py): a test
that can no longer fail blocks with its site named, whatever its spelling; an honest reshaping
of tests whose checks still run, with the same values, merges.

Each patch is a real branch of the example bake that changes tests only, so one build serves
both sides. The crossrun runs the base's tests on it once (its report carries the checks they
ran), and the inventory step runs as the judge runs it (`count_asserts.main`), given that
report: it runs the patch's tests, compares their checks and probes the changed ones. Each
attack keeps every assertion site the parent had, and no AST rule names it: each blocks on
the runs' findings alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import crossrun
import pytest
from _gate.runs.envs import build_env

from tests.helpers import Change, compiled, edits, run_inventory, worktree
from tools.bakery import branch, git, judge

D = "tests/test_discounts.py"
NO_COUPONS = "    assert stack_discounts(2500, []) == 2500\n"
TEST = f"{D}::test_no_coupons_keeps_subtotal"
HEAD = "from __future__ import annotations\n"


def body(lines: str, preamble: str = "") -> Change:
    """test_no_coupons_keeps_subtotal's assertion put in `lines` (its place: `{check}`, the
    assertion indented by the caller), with `preamble` added after the module's imports."""
    check = NO_COUPONS.strip()
    new = "".join(
        f"    {line}\n" if line else "\n" for line in lines.format(check=check).split("\n")
    )
    changes = [(D, NO_COUPONS, new)]
    if preamble:
        changes.append((D, "TEN_PERCENT = ", f"{preamble}\n\nTEN_PERCENT = "))
    return edits(*changes)


# Eleven ways for the assertion to stay where it was and never fail. None is an AST rule.
ATTACKS: dict[str, Change] = {
    "suppressed": body(
        "with contextlib.suppress(AssertionError):\n    {check}", "import contextlib"
    ),
    "nested-never-called": body("def check() -> None:\n    {check}"),
    "generator-never-run": body(
        "def check():  # type: ignore[no-untyped-def]\n    {check}\n    yield\ncheck()"
    ),
    "destructor": body("class Check:\n    def __del__(self) -> None:\n        {check}\nCheck()"),
    "thread": body(
        "def check() -> None:\n    {check}\nrunner = threading.Thread(target=check)\n"
        "runner.start()\nrunner.join()",
        "import threading",
    ),
    "at-exit": body("def check() -> None:\n    {check}\natexit.register(check)", "import atexit"),
    "return-in-finally": body("try:\n    {check}\nfinally:\n    return  # noqa: B012"),
    "quiet-context": body(
        "with Quiet():\n    {check}",
        "class Quiet:\n    def __enter__(self) -> None:\n        return None\n\n"
        "    def __exit__(self, *exc: object) -> bool:\n        return True",
    ),
    "lenient-decorator": edits(
        (D, "def test_no_coupons_keeps_subtotal", "@lenient\ndef test_no_coupons_keeps_subtotal"),
        (
            D,
            "TEN_PERCENT = ",
            "def lenient(test):  # type: ignore[no-untyped-def]\n"
            "    def run(*args, **kwargs):  # type: ignore[no-untyped-def]\n"
            "        try:\n            test(*args, **kwargs)\n"
            "        except AssertionError:\n            pass\n"
            "    return run\n\n\nTEN_PERCENT = ",
        ),
    ),
    "fixture-suppresses": edits(
        (
            D,
            "def test_no_coupons_keeps_subtotal() -> None:\n" + NO_COUPONS,
            "def test_no_coupons_keeps_subtotal(quiet: contextlib.suppress) -> None:\n"
            "    with quiet:\n    " + NO_COUPONS,
        ),
        (
            D,
            "TEN_PERCENT = ",
            "import contextlib\n\n\n@pytest.fixture\ndef quiet() -> contextlib.suppress:\n"
            "    return contextlib.suppress(AssertionError)\n\n\nTEN_PERCENT = ",
        ),
    ),
    "never-awaited": body("async def check() -> None:\n    {check}\ncheck()"),
}


RAN_RULES = {"cannot-fail", "fewer-checks"}  # the findings of the runs, not of the AST


@pytest.fixture(scope="module")
def python(shop: Path, tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """The example built once: these patches change tests only, both sides share the build."""
    requirements = shop / "scripts/requirements-judge.txt"
    return compiled(
        build_env(shop, tmp_path_factory.mktemp("env") / "env", wheelhouse, requirements)
    )


Crossran = Callable[[str], Path]  # a base -> the crossrun's report of it


@pytest.fixture(scope="module")
def crossran(shop: Path, python: Path, tmp_path_factory: pytest.TempPathFactory) -> Crossran:
    """The crossrun's report of a base, made once: the checks its tests ran on the build."""
    made: dict[str, Path] = {}

    def report_of(base: str) -> Path:
        if base not in made:
            tmp = tmp_path_factory.mktemp("crossrun")
            tree = worktree(shop, base, tmp / "tree")
            made[base] = report = tmp / "crossrun.json"
            argv = ["--tree", str(tree), "--same-build", "--perturb", ""]
            argv += ["--parent-python", str(python), "--patch-python", str(python)]
            code = crossrun.main([*argv, "--report", str(report)])
            assert code == 0, report.read_text()
        return made[base]

    return report_of


def judged(
    shop: Path,
    python: Path,
    crossran: Crossran,
    head: str,
    tmp: Path,
    *,
    ran: bool = True,
    base: str = "main",
) -> tuple[int, dict[str, Any]]:
    """The inventory of `head`: with the run-time evidence, or (`ran=False`) the AST alone."""
    extra = ["--parent-python", str(python), "--patch-python", str(python)]
    if ran:
        extra += ["--crossrun-report", str(crossran(base))]
    code, report, _ = run_inventory(shop, base, head, tmp / ("ran" if ran else "ast"), *extra)
    return code, report


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_assertion_that_cannot_fail_blocks_with_its_site_named(
    shop: Path, python: Path, crossran: Crossran, tmp_path: Path, attack: str
) -> None:
    head = branch(shop, f"cannot-fail/{attack}", ATTACKS[attack])
    code, report = judged(shop, python, crossran, head, tmp_path)
    assert code == 1, report["summary"]
    # No AST rule names it, and every assertion site stays: only the runs see it.
    assert {f["rule"] for f in report["evidence"]["findings"]} <= RAN_RULES, report["summary"]
    assert report["evidence"]["parent_total"] == report["evidence"]["patch_total"]
    found = report["evidence"]["findings"]
    assert all(f["id"] == TEST for f in found), found
    cannot = [f["reason"] for f in found if f["rule"] == "cannot-fail"]
    assert cannot, cannot
    assert cannot[0].startswith(f"{TEST}: line "), cannot
    assert cannot[0].endswith("cannot fail (forced failure passed)")


# --- honest reshaping ------------------------------------------------------------------------

FIXED = """def test_fixed_never_goes_below_zero() -> None:
    # 1200 - min(1200, 5000) = 0; a second fixed coupon has nothing left to cut
    assert stack_discounts(1200, [Coupon("fixed", 5000)]) == 0
    assert stack_discounts(1000, [Coupon("fixed", 600), Coupon("fixed", 600)]) == 0


def test_no_coupons_keeps_subtotal() -> None:
    assert stack_discounts(2500, []) == 2500
"""
COLLAPSED = """@pytest.mark.parametrize(
    ("subtotal", "coupons", "total"),
    [
        (1200, [Coupon("fixed", 5000)], 0),
        (1000, [Coupon("fixed", 600), Coupon("fixed", 600)], 0),
        (2500, [], 2500),
    ],
)
def test_totals(subtotal: int, coupons: list[Coupon], total: int) -> None:
    assert stack_discounts(subtotal, coupons) == total
"""
ORDER = """    assert stack_discounts(10_000, [TEN_PERCENT, FIVE_OFF]) == 8500
    assert stack_discounts(10_000, [FIVE_OFF, TEN_PERCENT]) == 8550
"""
HELPER = """def total_of(coupons: list[Coupon], expected: int) -> None:
    assert stack_discounts(10_000, coupons) == expected


TEN_PERCENT = """
PORTED = """import unittest

from shop.discounts import stack_discounts


class TotalsTest(unittest.TestCase):
    def test_no_coupons(self) -> None:
        self.assertEqual(stack_discounts(2500, []), 2500)
"""


def ported(repo: Path) -> None:
    edits((D, "def test_no_coupons_keeps_subtotal() -> None:\n" + NO_COUPONS + "\n\n", ""))(repo)
    (repo / "tests/test_totals.py").write_text(PORTED, "utf-8")


SLOW = (
    "    coupons = [Coupon('fixed', n) for n in range(300_000) if n < 0]\n"
    "    assert stack_discounts(2500, coupons) == 2500\n"
)
HONEST: dict[str, Change] = {
    "parametrize-collapse": edits((D, FIXED, COLLAPSED)),
    "parametrize-expansion": edits(
        (
            D,
            '        (100, Coupon("bogo", 1), "unknown coupon kind"),\n',
            '        (100, Coupon("bogo", 1), "unknown coupon kind"),\n'
            '        (100, Coupon("coupon", 1), "unknown coupon kind"),\n',
        ),
        (D, '        "kind",\n', '        "kind",\n        "other-kind",\n'),
    ),
    "moved-into-a-helper": edits(
        (
            D,
            ORDER,
            "    total_of([TEN_PERCENT, FIVE_OFF], 8500)\n"
            "    total_of([FIVE_OFF, TEN_PERCENT], 8550)\n",
        ),
        (D, "TEN_PERCENT = ", HELPER),
    ),
    "helper-shared-by-more-tests": edits(
        (
            D,
            ORDER,
            "    total_of([TEN_PERCENT, FIVE_OFF], 8500)\n"
            "    total_of([FIVE_OFF, TEN_PERCENT], 8550)\n",
        ),
        (D, NO_COUPONS, NO_COUPONS + "    total_of([], 10_000)\n"),
        (D, "TEN_PERCENT = ", HELPER),
    ),
    "ported-in-a-new-style": ported,
    # On a base whose test builds its coupons slowly (SLOW): the same checks, at once.
    "made-faster": edits((D, SLOW, NO_COUPONS)),
}


@pytest.mark.parametrize("change", list(HONEST))
def test_an_honest_reshaping_whose_checks_still_run_merges(
    shop: Path, python: Path, crossran: Crossran, tmp_path: Path, change: str
) -> None:
    base = "main"
    if change == "made-faster":
        base = branch(shop, "honest/slow-base", edits((D, NO_COUPONS, SLOW)))
    head = branch(shop, f"honest/{change}", HONEST[change], base=base)
    code, report = judged(shop, python, crossran, head, tmp_path, base=base)
    assert code == 0, (report["summary"], report["evidence"]["findings"])
    probed = report["evidence"]["run_time"]["probes"]
    assert probed["cannot_fail"] == [], probed
    assert probed["can_fail"] >= 1, probed


LOOPED = (
    "def test_amounts_pass_through() -> None:\n"
    "    for amount in AMOUNTS:\n"
    "        assert stack_discounts(amount, []) == amount\n\n\n"
)


def test_a_test_whose_checks_that_ran_dropped_is_found_where_the_ast_counts_agree(
    shop: Path, python: Path, crossran: Crossran, tmp_path: Path
) -> None:
    """The same assertion site, run for fewer values: only the checks that ran tell. Its
    parent version passes on the patch build: coverage removed, for a reviewer (issue 50)."""
    grown = edits(
        (D, "TEN_PERCENT = ", "AMOUNTS = [100, 2500, 10_000]\n" + LOOPED + "TEN_PERCENT = ")
    )
    base = branch(shop, "fewer-checks/base", grown)
    head = branch(shop, "fewer-checks/head", edits((D, "[100, 2500, 10_000]", "[100]")), base=base)
    code, report = judged(shop, python, crossran, head, tmp_path, ran=False, base=base)
    assert code == 0, report["summary"]
    code, report = judged(shop, python, crossran, head, tmp_path, base=base)
    assert (code, report["status"]) == (2, "needs-review"), report["summary"]
    found = [(f["rule"], f["id"], f["reason"]) for f in report["evidence"]["findings"]]
    test = f"{D}::test_amounts_pass_through"
    assert f"coverage removed: {test} (fewer-checks)" in report["summary"]
    assert found == [
        ("fewer-checks", test, f"{test} ran 1 of the 3 checks its parent's version ran")
    ]


@pytest.mark.e2e
def test_the_judge_blocks_a_swallowed_assertion_and_merges_a_parametrize_collapse(
    shop: Path,
) -> None:
    """Whole judgments (`nox -s judge`): the inventory runs after the crossrun, on its checks;
    the advisory tests take the inventory's run of the patch's tests."""
    attack = branch(shop, "judged/suppressed", ATTACKS["suppressed"])
    blocked = judge(shop, "--head", attack)
    assert blocked.returncode == 1, blocked.output
    steps = {step["name"]: step for step in blocked.report["steps"]}
    inventory = steps["assert-inventory"]
    assert inventory["status"] == "block"
    assert f"{TEST}: line " in inventory["summary"], inventory["summary"]
    assert "cannot fail (forced failure passed)" in inventory["summary"]
    assert "as the assert inventory ran them on the patch build" in steps["tests"]["summary"]
    honest = branch(shop, "judged/collapse", HONEST["parametrize-collapse"])
    merged = judge(shop, "--head", honest)
    assert merged.returncode == 0, merged.output
    summary = {step["name"]: step["summary"] for step in merged.report["steps"]}
    assert "run-time checks set aside" in summary["assert-inventory"], summary["assert-inventory"]


HANGS = (
    "def test_waits_for_its_worker() -> None:\n"
    "    gate = threading.Event()\n"
    "    worker = threading.Thread(target=gate.wait)\n"
    "    worker.start()\n"
    "    try:\n"
    "        assert stack_discounts(100, []) == 100\n"
    "        gate.set()\n"
    "    finally:\n"
    "        worker.join()\n\n\n"
)


def test_a_test_that_hangs_once_its_check_is_forced_has_a_check_that_can_fail(
    shop: Path, python: Path, crossran: Crossran, tmp_path: Path
) -> None:
    """more-itertools' test_no_result_while_running: forced, its check raises before the gate
    is set, and the worker it joins waits forever. Hanging is not passing: the probe's run
    ends at its own time, not the step's, and the check can fail."""
    anchor = "def test_no_coupons_keeps_subtotal"
    added = edits((D, anchor, HANGS + anchor), (D, HEAD, HEAD + "\nimport threading\n"))
    head = branch(shop, "honest/hangs-when-forced", added)
    config = tmp_path / "judge.yaml"
    text = git(shop, "show", "main:oracle/judge.yaml")
    config.write_text(text.replace("crossrun_timeout: 900", "crossrun_timeout: 20"), "utf-8")
    extra = ["--parent-python", str(python), "--patch-python", str(python)]
    extra += ["--crossrun-report", str(crossran("main"))]
    code, report, _ = run_inventory(shop, "main", head, tmp_path / "ran", *extra, config=config)
    assert code == 0, (report["summary"], report["evidence"]["findings"])
    assert report["evidence"]["run_time"]["probes"]["cannot_fail"] == []
    # A test the hung run never reached runs again without it, and is still probed.
    after = "def test_after_it() -> None:\n" + SUPPRESSED + "\n\n"
    added = edits(
        (D, anchor, HANGS + after + anchor),
        (D, HEAD, HEAD + "\nimport contextlib\nimport threading\n"),
    )
    head = branch(shop, "cannot-fail/after-a-hang", added)
    code, report, _ = run_inventory(shop, "main", head, tmp_path / "after", *extra, config=config)
    assert code == 1, report["summary"]
    cannot = report["evidence"]["run_time"]["probes"]["cannot_fail"]
    assert [site.split(": line")[0] for site in cannot] == [f"{D}::test_after_it"], cannot


SUPPRESSED = (
    "    with contextlib.suppress(AssertionError):\n        assert stack_discounts(1, []) == 1\n"
)


# --- a check of an object with itself -----------------------------------------------------

CASE = """import unittest

from shop.discounts import Coupon, stack_discounts


class CouponTest(unittest.TestCase):
    def test_coupon(self) -> None:
        coupon = Coupon("fixed", 50)
        self.assertEqual(stack_discounts(2500, [coupon]), 2450)
"""
CASE_FILE = "tests/test_coupon_case.py"
CASE_CHECK = "        self.assertEqual(stack_discounts(2500, [coupon]), 2450)\n"


def checked(line: str) -> Change:
    """test_no_coupons_keeps_subtotal gains `line` after its own assertion."""
    return edits((D, NO_COUPONS, f"{NO_COUPONS}    {line}\n"))


def case_checked(line: str) -> Change:
    return edits((CASE_FILE, CASE_CHECK, f"{CASE_CHECK}        {line}\n"))


# more-itertools 8a9dd13: `self.assertEqual(range_1, range_1)` tests numeric_range's own
# `__eq__` (a dataclass's here), in each spelling a test writes it.
REFLEXIVE: dict[str, Change] = {
    "assert-local": checked('coupon = Coupon("fixed", 50)\n    assert coupon == coupon'),
    "assert-global": checked("assert TEN_PERCENT == TEN_PERCENT"),
    "assertEqual": case_checked("self.assertEqual(coupon, coupon)"),
}
# The same spellings where nothing of the build's is tested: each still cannot fail.
SELF_SAME: dict[str, Change] = {
    "an-int": checked("total = stack_discounts(2500, [])\n    assert total == total"),
    "the-tests-own-class": edits(
        (D, NO_COUPONS, f"{NO_COUPONS}    same = Same()\n    assert same == same\n"),
        (
            D,
            "TEN_PERCENT = ",
            "class Same:\n    def __eq__(self, other: object) -> bool:\n        return True\n\n\n"
            "TEN_PERCENT = ",
        ),
    ),
    "assertIs": case_checked("self.assertIs(coupon, coupon)"),
}


@pytest.fixture(scope="module")
def case_base(shop: Path) -> str:
    """A base that holds a unittest-style test."""
    return branch(shop, "reflexive/case-base", lambda tree: (tree / CASE_FILE).write_text(CASE))


def test_a_check_of_an_object_with_its_own_eq_is_a_check(
    shop: Path, python: Path, crossran: Crossran, case_base: str, tmp_path: Path
) -> None:
    """The AST alone calls each spelling vacuous; the run shows the build's `__eq__` ran on
    it. One patch holds all three: any one not set aside blocks it."""

    def every_spelling(tree: Path) -> None:
        for change in REFLEXIVE.values():
            change(tree)

    head = branch(shop, "reflexive/every-spelling", every_spelling, base=case_base)
    code, report = judged(shop, python, crossran, head, tmp_path, ran=False, base=case_base)
    assert code == 1, report["summary"]
    found = [(f["rule"], f["id"]) for f in report["evidence"]["findings"]]
    tests = [f"{CASE_FILE}::CouponTest::test_coupon", TEST]
    assert sorted(found) == [("vacuous", test) for test in tests], found
    code, report = judged(shop, python, crossran, head, tmp_path, base=case_base)
    assert code == 0, (report["summary"], report["evidence"]["findings"])
    set_aside = report["evidence"]["run_time"]["set_aside"]
    assert sorted((f["rule"], f["id"]) for f in set_aside) == found, set_aside
    assert "an object's own `__eq__` compared it with itself" in report["summary"]


@pytest.mark.parametrize("change", list(SELF_SAME))
def test_a_check_of_an_object_with_itself_that_tests_nothing_of_the_build_blocks(
    shop: Path, python: Path, crossran: Crossran, case_base: str, tmp_path: Path, change: str
) -> None:
    base = case_base if change == "assertIs" else "main"
    head = branch(shop, f"self-same/{change}", SELF_SAME[change], base=base)
    code, report = judged(shop, python, crossran, head, tmp_path, base=base)
    assert code == 1, report["summary"]
    rules = [f["rule"] for f in report["evidence"]["findings"]]
    assert rules == ["vacuous"], report["evidence"]["findings"]
