"""The assert inventory on renamed tests (issue 8): a test whose name left its file and whose
body is nowhere unchanged is paired with the most similar new test of the patch, then compared
like any pair. A rename that keeps every check merges; a deletion dressed as a rename, or a
rename that drops, weakens or skips a check, still blocks.

One bake whose base gains unittest-style tests; each patch is a real branch judged by the
inventory step (base and head worktrees, git rename detection), as in test_inventory.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import UNITTEST_STYLE, Change, D, U, bake_with, edits, inventory, rule_ids
from tools.bakery import branch

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

NO_COUPONS = (
    "def test_no_coupons_keeps_subtotal() -> None:\n    assert stack_discounts(2500, []) == 2500\n"
)
ORDER = "def test_stack_order_matters() -> None:\n"
FIXED = "def test_fixed_never_goes_below_zero() -> None:\n"
FIXED_ZERO = '    assert stack_discounts(1200, [Coupon("fixed", 5000)]) == 0\n'
CAP = "def test_cap_limits_percent_cut() -> None:\n"
FLOORS = """\
def test_apply_discount_floors_the_cut() -> None:
    # 999 * 3333 = 3_329_667; // 10000 = 332 -> 999 - 332 = 667
    assert apply_discount(999, 3333) == 667
    # 1 * 5000 // 10000 = 0: half of one cent is not given away
    assert apply_discount(1, 5000) == 1
    assert apply_discount(4321, 10_000) == 0
"""
INVERT_START = "def test_invert_discount_returns_smallest_preimage() -> None:\n"
INVERT_END = "    assert invert_discount(0, 10_000) == 0\n"
INVERSION = "tests/test_inversion.py"
TWINS = "tests/test_twins.py"
# Two tests with one body: deleting either is a deletion, not a move onto the other.
TWINS_TEXT = """\
from shop.discounts import apply_discount


class TestCents:
    def test_full_rate(self) -> None:
        assert apply_discount(1000, 10_000) == 0


class TestEuros:
    def test_full_rate(self) -> None:
        assert apply_discount(1000, 10_000) == 0
"""
EUROS = "class TestEuros:\n    def test_full_rate(self) -> None:\n"


def invert_test(repo: Path) -> str:
    """The parent's test_invert_discount_returns_smallest_preimage, as written."""
    text = (repo / D).read_text("utf-8")
    start = text.index(INVERT_START)
    return text[start : text.index(INVERT_END, start) + len(INVERT_END)]


def add_test(path: str, text: str) -> Change:
    def change(repo: Path) -> None:
        with (repo / path).open("a", encoding="utf-8") as out:
            out.write("\n\n" + text)

    return change


def both(*changes: Change) -> Change:
    def change(repo: Path) -> None:
        for one in changes:
            one(repo)

    return change


def move_and_edit(repo: Path) -> None:
    """The inversion test moves to a new file under a new name, one input changed."""
    body = invert_test(repo)
    edit_out = edits((D, body, ""))
    edit_out(repo)
    moved = body.replace(INVERT_START, "def test_invert_returns_the_smallest_preimage() -> None:\n")
    moved = moved.replace("invert_discount(0, 2500) == 0", "invert_discount(0, 5000) == 0")
    (repo / INVERSION).write_text(
        "from shop.discounts import apply_discount, invert_discount\n\n\n" + moved, "utf-8"
    )


# Patch -> (the rule that must block, the parent test it must name).
ATTACKS: dict[str, tuple[Change, str, str]] = {
    # A deletion and an unrelated new test with other checks: no rename, the deletion blocks.
    "delete-and-add-unrelated": (
        both(
            edits((D, NO_COUPONS, "")),
            add_test(
                D,
                "def test_percent_coupon_keeps_its_kind() -> None:\n"
                '    coupon = Coupon("percent", 1000, cap_cents=300)\n'
                '    assert coupon.kind == "percent"\n'
                "    assert coupon.cap_cents == 300\n",
            ),
        ),
        "deleted-test",
        f"{D}::test_no_coupons_keeps_subtotal",
    ),
    # The vanished test's name on a new test of another file with other checks: no rename.
    "same-name-other-checks-elsewhere": (
        both(
            edits((D, NO_COUPONS, "")),
            add_test(
                "tests/test_coupons.py",
                "from shop.discounts import Coupon\n\n\n"
                "def test_no_coupons_keeps_subtotal() -> None:\n"
                '    coupon = Coupon("percent", 1000, cap_cents=300)\n'
                '    assert coupon.kind == "percent"\n'
                "    assert coupon.cap_cents == 300\n",
            ),
        ),
        "deleted-test",
        f"{D}::test_no_coupons_keeps_subtotal",
    ),
    "rename-and-drop-an-assert": (
        edits(
            (D, ORDER, "def test_stacking_order_changes_the_total() -> None:\n"),
            (D, "    assert stack_discounts(10_000, [FIVE_OFF, TEN_PERCENT]) == 8550\n", ""),
        ),
        "fewer-asserts",
        f"{D}::test_stack_order_matters",
    ),
    "rename-and-weaken": (
        edits(
            (D, FIXED, "def test_fixed_coupons_stop_at_zero() -> None:\n"),
            (D, FIXED_ZERO, FIXED_ZERO.replace("== 0", ">= 0")),
        ),
        "weakened",
        f"{D}::test_fixed_never_goes_below_zero",
    ),
    "rename-into-skip": (
        edits(
            (
                D,
                CAP,
                "@pytest.mark.skip(reason='later')\n"
                "def test_cap_limits_the_percent_cut() -> None:\n",
            )
        ),
        "skip-added",
        f"{D}::test_cap_limits_percent_cut",
    ),
    "unittest-rename-and-weaken": (
        edits(
            (U, "    def test_zero_rate(self)", "    def test_rate_of_zero(self)"),
            (U, "        self.assertEqual(result, 999)\n", "        self.assertTrue(result)\n"),
        ),
        "weakened",
        f"{U}::ApplyDiscountTest::test_zero_rate",
    ),
    "delete-one-of-two-identical-tests": (
        edits((TWINS, "\n\n" + EUROS + "        assert apply_discount(1000, 10_000) == 0\n", "")),
        "deleted-test",
        f"{TWINS}::TestEuros::test_full_rate",
    ),
}
# Patch -> the renames the report must record (parent test id -> patch test id).
BENIGN: dict[str, tuple[Change, dict[str, str]]] = {
    "rename-and-reformat": (
        edits(
            (
                D,
                FLOORS,
                "def test_apply_discount_rounds_down() -> None:\n"
                '    """The cut is floored: no fraction of a cent is given away."""\n'
                "    assert apply_discount(999, 3333) == 667  # 999 - 3_329_667 // 10000\n"
                "    assert apply_discount(1, 5000) == 1\n"
                "    assert apply_discount(\n"
                "        4321,\n"
                "        10_000,\n"
                "    ) == 0\n",
            )
        ),
        {f"{D}::test_apply_discount_floors_the_cut": (f"{D}::test_apply_discount_rounds_down")},
    ),
    "rename-move-and-small-edit": (
        move_and_edit,
        {
            f"{D}::test_invert_discount_returns_smallest_preimage": (
                f"{INVERSION}::test_invert_returns_the_smallest_preimage"
            )
        },
    ),
    "two-renames-edited-one-to-one": (
        edits(
            (U, "    def test_ten_percent(self)", "    def test_ten_percent_off(self)"),
            (U, "    def test_zero_rate(self)", "    def test_zero_rate_keeps_amount(self)"),
            (U, "apply_discount(1000, 1000), 900)", "apply_discount(2000, 1000), 1800)"),
            (U, "apply_discount(999, 0)", "apply_discount(998, 0)"),
            (U, "assertEqual(result, 999)", "assertEqual(result, 998)"),
        ),
        {
            f"{U}::ApplyDiscountTest::test_ten_percent": (
                f"{U}::ApplyDiscountTest::test_ten_percent_off"
            ),
            f"{U}::ApplyDiscountTest::test_zero_rate": (
                f"{U}::ApplyDiscountTest::test_zero_rate_keeps_amount"
            ),
        },
    ),
}


@pytest.fixture(scope="module")
def rename_repo(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    files = {U: UNITTEST_STYLE, TWINS: TWINS_TEXT}
    return bake_with(tmp_path_factory.mktemp("rename"), files, "unittest-style tests, twins")


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_deletion_or_a_lost_check_under_a_new_name_blocks(
    rename_repo: Path, tmp_path: Path, name: str
) -> None:
    change, rule, test = ATTACKS[name]
    code, report = inventory(rename_repo, branch(rename_repo, f"attack/{name}", change), tmp_path)
    assert code == 1, report["summary"]
    assert (rule, test) in rule_ids(report), rule_ids(report)


def test_an_unrelated_new_test_is_not_taken_for_a_rename(rename_repo: Path, tmp_path: Path) -> None:
    change = ATTACKS["delete-and-add-unrelated"][0]
    _, report = inventory(
        rename_repo, branch(rename_repo, "attack/unrelated-again", change), tmp_path
    )
    assert report["evidence"]["renamed_tests"] == {}


def test_a_renamed_test_still_names_its_parent_id(rename_repo: Path, tmp_path: Path) -> None:
    """The finding of a rename that drops a check points at both sides of the pair."""
    change = ATTACKS["rename-and-drop-an-assert"][0]
    _, report = inventory(rename_repo, branch(rename_repo, "attack/drop-again", change), tmp_path)
    found = next(f for f in report["evidence"]["findings"] if f["rule"] == "fewer-asserts")
    assert found["reason"].endswith("2 assertions on the parent, 1 now"), found
    assert found["id"] == f"{D}::test_stack_order_matters", found
    assert found["parent"], found
    assert found["patch"], found
    assert found["patch"]["path"] == D, found
    assert report["evidence"]["renamed_tests"] == {
        f"{D}::test_stack_order_matters": f"{D}::test_stacking_order_changes_the_total"
    }


@pytest.mark.parametrize("name", sorted(BENIGN))
def test_a_rename_that_keeps_every_check_merges(
    rename_repo: Path, tmp_path: Path, name: str
) -> None:
    change, renamed = BENIGN[name]
    code, report = inventory(rename_repo, branch(rename_repo, f"benign/{name}", change), tmp_path)
    assert report["evidence"]["findings"] == [], rule_ids(report)
    assert code == 0, report["summary"]
    assert report["evidence"]["renamed_tests"] == renamed
