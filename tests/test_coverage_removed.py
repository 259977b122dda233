"""A deleted or weakened test whose parent version still passes on the patch build is
coverage removed, for a reviewer: `needs-review`, not `block` (issue 50).

Python-Markdown's a18765c25c deleted a unittest-style test whose checks exist nowhere else in
the patch while the behaviour stays: its maintainers merged it, and the inventory blocked it.
The crossrun runs the parent's version of every test on the patch build: where that version
passes, the patch removed a check, not the behaviour. Where it fails, the deletion hides a
break and blocks. One bake; each patch is a real branch judged whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.bakery import branch, edit, judge

D = "tests/test_discounts.py"
SRC = "src/shop/discounts.py"
CAP_TEST = "tests/test_discounts.py::test_cap_limits_percent_cut"
CAP_BODY = (
    "def test_cap_limits_percent_cut() -> None:\n"
    "    # 20 % of 10000 is 2000, capped to 500 -> 9500\n"
    '    assert stack_discounts(10_000, [Coupon("percent", 2000, cap_cents=500)]) == 9500\n'
    "    # 20 % of 2000 is 400, under the cap -> 1600\n"
    '    assert stack_discounts(2000, [Coupon("percent", 2000, cap_cents=500)]) == 1600\n'
)
SECOND = '    assert stack_discounts(2000, [Coupon("percent", 2000, cap_cents=500)]) == 1600\n'


def deleted(tree: Path) -> None:
    edit(tree / D, CAP_BODY, "")


def weakened(tree: Path) -> None:
    edit(tree / D, SECOND, SECOND.replace("== 1600", ">= 0"))


def fewer(tree: Path) -> None:
    edit(tree / D, SECOND, "")


HARMLESS = {"deleted": deleted, "weakened": weakened, "fewer-asserts": fewer}


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_coverage_removed_with_the_behaviour_kept_needs_review_naming_it(
    repo: Path, name: str
) -> None:
    head = branch(repo, f"coverage/{name}", HARMLESS[name])
    verdict = judge(repo, "--head", head)
    assert verdict.report["verdict"] == "needs-review", verdict.output
    inventory = verdict.step("assert-inventory")
    assert inventory["status"] == "needs-review", inventory["summary"]
    assert f"coverage removed: {CAP_TEST}" in inventory["summary"], inventory["summary"]
    summary = (repo / "reports/judge-summary.md").read_text("utf-8")
    assert "### Needs review: coverage removed" in summary
    assert CAP_TEST in summary
    reviewed = judge(repo, "--head", head, env={"ORACLE_REVIEW": "1"})
    assert reviewed.report["verdict"] == "merge", reviewed.output


def hidden_break(tree: Path) -> None:
    """The cap no longer limits, and the test that would say so is gone."""
    deleted(tree)
    edit(tree / SRC, "cut = min(cut, coupon.cap_cents)", "cut = cut")


@pytest.mark.e2e
def test_a_deleted_test_whose_parent_version_fails_on_the_patch_still_blocks(repo: Path) -> None:
    head = branch(repo, "coverage/hidden-break", hidden_break)
    verdict = judge(repo, "--head", head)
    assert verdict.report["verdict"] == "block", verdict.output
    assert verdict.statuses["assert-inventory"] == "block", verdict.output
