"""Parent tests coupled to internals the patch moved (issue 24, item 6): a review, not a block.

The base gains tests that reach into the package's internals in four ways: an import of a
private function, a mock.patch of one by its dotted name, a fixture that looks one up, and an
import of a private module. One patch moves all four and updates the tests that reached them;
scripts/crossrun.py then runs as the judge runs it, the base's tests against real builds of the
base and of the patch. The changes it must still block: the same move with the test left as it
was, with the test's new version failing, and beside a failing assertion on behaviour.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from _gate.core.protocol import Report
from _gate.runs.coupling import moved_name
from _gate.verdict.verdict import review

from tests.helpers import Built, Change, edits, run_crossrun
from tests.helpers import verdict_of as verdict
from tools.bakery import branch, git, judge

DISCOUNTS = "src/shop/discounts.py"
REACHING = {
    "tests/test_reach_import.py": """\
from shop.discounts import Coupon, _cut


def test_a_fixed_cut_stops_at_what_is_left() -> None:
    assert _cut(150, Coupon("fixed", 200)) == 150
""",
    "tests/test_reach_mock.py": """\
from unittest import mock

from shop.discounts import Coupon, stack_discounts


def test_every_coupon_is_checked_before_any_applies() -> None:
    with mock.patch("shop.discounts._check_coupon") as check:
        stack_discounts(100, [Coupon("fixed", 10), Coupon("fixed", 5)])
    assert check.call_count == 2
""",
    "tests/test_reach_fixture.py": """\
import pytest

from shop import discounts


@pytest.fixture
def check_bps():
    return discounts._check_bps


def test_bps_above_the_whole_are_refused(check_bps) -> None:
    with pytest.raises(ValueError):
        check_bps(10_001)
""",
    "tests/test_reach_module.py": """\
from shop._whole import whole


def test_the_whole_is_ten_thousand_bps() -> None:
    assert whole() == 10_000
""",
    "src/shop/_whole.py": "def whole() -> int:\n    return 10_000\n",
}
IMPORT_TEST = "tests/test_reach_import.py::test_a_fixed_cut_stops_at_what_is_left"
CAP_TEST = "tests/test_discounts.py::test_stack_rejects_invalid_input[negative-cap]"


def reaching(tree: Path) -> None:
    for path, text in REACHING.items():
        (tree / path).write_text(text, "utf-8")


def rename(name: str, new: str, test: str = "") -> Change:
    """The package's `name` renamed everywhere it is used, and in `test` where one is named."""

    def change(tree: Path) -> None:
        for path in (DISCOUNTS, test):
            if path:
                source = tree / path
                text = re.sub(rf"\b{re.escape(name)}\b", new, source.read_text("utf-8"))
                source.write_text(text, "utf-8")

    return change


def move_module(tree: Path) -> None:
    git(tree, "mv", "src/shop/_whole.py", "src/shop/whole.py")
    rename("shop._whole", "shop.whole", "tests/test_reach_module.py")(tree)


def both(*changes: Change) -> Change:
    def change(tree: Path) -> None:
        for each in changes:
            each(tree)

    return change


MESSAGE = 'raise ValueError(f"cap_cents must be >= 0, got {coupon.cap_cents}")'
# Each move, with the test the patch updated and the name it failed on in the parent's test.
MOVES: dict[str, tuple[Change, str, str]] = {
    "import": (
        rename("_cut", "_cut_of", "tests/test_reach_import.py"),
        IMPORT_TEST,
        "shop.discounts._cut",
    ),
    "mock-patch": (
        rename("_check_coupon", "_validate", "tests/test_reach_mock.py"),
        "tests/test_reach_mock.py::test_every_coupon_is_checked_before_any_applies",
        "shop.discounts._check_coupon",
    ),
    "fixture-lookup": (
        rename("_check_bps", "_require_bps", "tests/test_reach_fixture.py"),
        "tests/test_reach_fixture.py::test_bps_above_the_whole_are_refused",
        "shop.discounts._check_bps",
    ),
    "module-moved": (
        move_module,
        "tests/test_reach_module.py::test_the_whole_is_ten_thousand_bps",
        "shop._whole",
    ),
}
# The same moves where the gate must still block.
STILL_BLOCKED: dict[str, tuple[Change, str]] = {
    "test-left-as-it-was": (rename("_cut", "_cut_of"), "error"),
    "its-new-version-fails": (
        both(
            rename("_cut", "_cut_of", "tests/test_reach_import.py"),
            edits(("tests/test_reach_import.py", "== 150", "== 151")),
        ),
        "error",
    ),
    "beside-a-behaviour-change": (
        both(
            rename("_check_bps", "_require_bps", "tests/test_reach_fixture.py"),
            edits((DISCOUNTS, MESSAGE, MESSAGE.replace("cap_cents must be", "the cap must be"))),
        ),
        "failed",
    ),
}


@pytest.fixture(scope="module")
def base(shop: Path) -> str:
    return branch(shop, "coupling-base", reaching)


def test_parent_tests_coupled_to_moved_internals_need_review_naming_them(
    shop: Path, base: str, envs: Built, tmp_path: Path
) -> None:
    """The four moves in one patch (one build): each test reported with the name it met."""
    moves = both(*(change for change, _, _ in MOVES.values()))
    head = branch(shop, "coupling/all-moves", moves, base=base)
    code, report = run_crossrun(envs, head, tmp_path, base=base, patch_tree=True)
    assert (code, report["status"]) == (2, "needs-review"), report["summary"]
    pairs = sorted((test, moved) for _, test, moved in MOVES.values())
    wanted = [{"id": test, "moved": moved} for test, moved in pairs]
    assert report["evidence"]["coupled"] == wanted
    assert f"(first: {pairs[0][0]}: {pairs[0][1]} and 3 more)" in report["summary"]
    assert "4 depend on internals the patch moved" in report["summary"]
    # A code owner's review (ORACLE_REVIEW=1) accepts them.
    code, report = run_crossrun(envs, head, tmp_path, "--reviewed", base=base, patch_tree=True)
    assert (code, report["status"]) == (0, "pass"), report["summary"]
    assert "accepted under ORACLE_REVIEW=1" in report["summary"]


@pytest.mark.parametrize("name", sorted(STILL_BLOCKED))
def test_a_move_the_patchs_own_test_does_not_pass_or_a_behaviour_change_still_blocks(
    shop: Path, base: str, envs: Built, tmp_path: Path, name: str
) -> None:
    change, outcome = STILL_BLOCKED[name]
    head = branch(shop, f"coupling-blocked/{name}", change, base=base)
    code, report = run_crossrun(envs, head, tmp_path, "--reviewed", base=base, patch_tree=True)
    assert (code, report["status"]) == (1, "deferred"), report["summary"]
    assert "coupled" not in report["evidence"]
    outcomes = {row["id"]: row["outcome"] for row in report["evidence"]["failures"]}
    assert outcome in outcomes.values(), outcomes


@pytest.mark.parametrize(
    ("outcome", "line", "name"),
    [
        ("error", "E   ModuleNotFoundError: No module named 'pkg.old'", "pkg.old"),
        ("failed", "E   ImportError: cannot import name 'f' from 'pkg.m' (/x/m.py)", "pkg.m.f"),
        (
            "failed",
            "E   AttributeError: <class 'pkg.C'> does not have the attribute 'm'",
            "pkg.C.m",
        ),
        ("error", "E   AttributeError: type object 'C' has no attribute 'm'", "C.m"),
        # An attribute missing in a test's body is what the code does, not a lookup.
        ("failed", "E   AttributeError: module 'pkg' has no attribute 'f'", ""),
        ("failed", "E       AttributeError: 'Order' object has no attribute 'total'", ""),
        # An assertion that quotes such a message is an assertion.
        ("failed", "E   assert \"ImportError: cannot import name 'f' from 'p'\" == ''", ""),
        ("failed", "    ModuleNotFoundError: No module named 'x'  (a source line)", ""),
    ],
)
def test_only_a_name_that_is_gone_is_a_move(outcome: str, line: str, name: str) -> None:
    assert moved_name(outcome, f"def test():\n>       f()\n{line}\n") == name


def step_row(name: str, status: str, **evidence: Any) -> dict[str, Any]:
    return {"name": name, "status": status, "summary": "", "evidence": evidence}


def test_a_block_beside_coupled_tests_is_a_block_and_the_review_lists_them() -> None:
    coupled = step_row("crossrun", "needs-review", coupled=[{"id": IMPORT_TEST, "moved": "m._cut"}])
    blocked = step_row("replay", "block")
    assert verdict([coupled, blocked]) == (1, "block")
    assert verdict([coupled, step_row("replay", "pass")]) == (2, "needs-review")
    report = {"base": "b", "head": "h", "steps": [coupled, blocked]}
    found = review(report, [Report.from_payload(row, row["name"]) for row in (coupled, blocked)])
    assert found["coupled"] == [{"id": IMPORT_TEST, "moved": "m._cut"}]
    assert found["protected"] == []


@pytest.mark.e2e
def test_the_judge_says_needs_review_for_coupled_tests_naming_them(shop: Path, base: str) -> None:
    """The step's --patch-tree from the judgment, and the verdict, its report, its summary and
    its last line; the step tests above show what a review (--reviewed) accepts."""
    change, test, moved = MOVES["import"]
    head = branch(shop, "coupling-judge/import", change, base=base)
    judged = judge(shop, "--base", base, "--head", head)
    assert judged.returncode == 2, judged.output
    assert judged.report["verdict"] == "needs-review", judged.output
    assert judged.report["review"]["coupled"] == [{"id": test, "moved": moved}]
    assert f"parent test {test}, coupled to {moved}" in judged.output
    summary = (shop / "reports/judge-summary.md").read_text("utf-8")
    assert f"- `{test}`: `{moved}`" in summary
    assert judged.report["review"]["rerun"].startswith("ORACLE_REVIEW=1 nox -s judge -- ")
