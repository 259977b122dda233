"""The assert inventory, assertion site by assertion site, on real patches.

One bake whose base gains a test file with tolerances, exception checks, a local helper and a
helper module; each patch is a real branch judged by the inventory step (base and head
worktrees, git rename detection), as in test_inventory.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import Change, bake_with, edits, inventory
from tools.bakery import branch, git

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

S = "tests/test_sites.py"
H = "tests/helpers.py"
DEEPER = "tests/deep.py"
SITES = '''\
"""Checks the inventory compares site by site."""

import math
import unittest

import pytest

from helpers import check_stack
from shop.discounts import Coupon, apply_discount, stack_discounts

TEN = Coupon("percent", 1000)


def expect_rate(total: int, want: int) -> None:
    assert total == want


def test_rate() -> None:
    total = apply_discount(1000, 1000)
    assert total == 900
    assert apply_discount(999, 0) == 999


def test_rate_through_local_helper() -> None:
    expect_rate(apply_discount(2000, 1000), 1800)


def test_rounding() -> None:
    assert apply_discount(1001, 1000) == pytest.approx(901, abs=1)
    assert math.isclose(apply_discount(3, 5000), 2, rel_tol=1e-9)


def test_rejects() -> None:
    with pytest.raises(ValueError, match="bps"):
        apply_discount(100, 10_001)


def test_stack_through_helper() -> None:
    check_stack(stack_discounts(10_000, [TEN]), 9000)


def test_no_coupons_through_helper() -> None:
    check_stack(stack_discounts(500, []), 500)


def test_full_rate() -> None:
    assert apply_discount(1000, 10_000) == 0


class RateTest(unittest.TestCase):
    def test_label(self) -> None:
        label = str(apply_discount(1000, 1000))
        self.assertEqual(label, "900")
        self.assertAlmostEqual(apply_discount(1000, 1000) / 7, 128.571, places=3)
        self.assertEqual(label, "900")

    def test_missing_key(self) -> None:
        with self.assertRaises(KeyError):
            {}["x"]
'''
HELPERS = '''\
"""Shared checks of the tests."""

from deep import same


def check_stack(total: int, expected: int) -> None:
    same(total, expected)
    assert total >= 0
'''
DEEP = """\
def same(actual: int, expected: int) -> None:
    assert actual == expected
"""
TOTAL = "    assert total == 900\n"
ZERO = "    assert apply_discount(999, 0) == 999\n"
FULL = "    assert apply_discount(1000, 10_000) == 0\n"
APPROX = "pytest.approx(901, abs=1)"
RAISES = 'pytest.raises(ValueError, match="bps")'
ISCLOSE = "    assert math.isclose(apply_discount(3, 5000), 2, rel_tol=1e-9)\n"
CLASS = "\n\nclass RateTest"
LABEL = '        self.assertEqual(label, "900")\n        self.assertAlmostEqual'


def guarded(head: str, body: str = TOTAL) -> Change:
    """`body` moved under a block opened by `head`."""
    return edits((S, body, f"    {head}\n    {body}"))


ATTACKS: dict[str, tuple[Change, str]] = {
    # 1. Assertions that cannot fail, whatever the spelling.
    "or-true": (edits((S, TOTAL, "    assert total == 900 or True\n")), "vacuous"),
    "in-both-booleans": (
        edits((S, TOTAL, "    assert (total == 900) in (True, False)\n")),
        "vacuous",
    ),
    "conditional-expression": (
        edits((S, TOTAL, "    assert total == 900 if False else True\n")),
        "vacuous",
    ),
    "and-of-literals": (edits((S, TOTAL, "    assert not (0 and total == 900)\n")), "vacuous"),
    # 2. Assertions that cannot run.
    "folded-false-condition": (guarded("if 1 > 2:"), "dead-assert"),
    "not-true-condition": (guarded("if not 'x':"), "dead-assert"),
    "empty-range": (guarded("for _ in range(0):"), "dead-assert"),
    "empty-tuple": (guarded("for _ in ():"), "dead-assert"),
    "while-zero": (guarded("while 0:"), "dead-assert"),
    "after-skip": (edits((S, TOTAL, "    pytest.skip('later')\n" + TOTAL)), "dead-assert"),
    "except-of-a-safe-try": (
        edits((S, TOTAL, "    try:\n        limit = 3\n    except ValueError:\n    " + TOTAL)),
        "dead-assert",
    ),
    # 3. Tolerance widened, exception check narrowed.
    "approx-abs-widened": (edits((S, APPROX, "pytest.approx(901, abs=1000)")), "weakened"),
    "approx-rel-added": (edits((S, APPROX, "pytest.approx(901, abs=1, rel=0.5)")), "weakened"),
    "isclose-rel-tol": (edits((S, "rel_tol=1e-9", "rel_tol=0.5")), "weakened"),
    "equality-to-approx": (
        edits((S, TOTAL, "    assert total == pytest.approx(900, abs=1e6)\n")),
        "weakened",
    ),
    "almost-equal-places": (edits((S, "places=3", "places=0")), "weakened"),
    "raises-match-dropped": (edits((S, RAISES, "pytest.raises(ValueError)")), "weakened"),
    "raises-broader-class": (
        edits((S, RAISES, 'pytest.raises(Exception, match="bps")')),
        "weakened",
    ),
    "assert-raises-superclass": (
        edits((S, "assertRaises(KeyError)", "assertRaises(LookupError)")),
        "weakened",
    ),
    # 4. Per site: the same subject checked again later does not hide a weakened site.
    "equal-to-true-same-subject-later": (
        edits((S, LABEL, "        self.assertTrue(label)\n        self.assertAlmostEqual")),
        "weakened",
    ),
    "equality-to-isinstance": (
        edits((S, TOTAL, "    assert isinstance(total, int)\n")),
        "weakened",
    ),
    "equality-to-bound": (
        edits((S, ZERO, "    assert apply_discount(999, 0) >= 0\n")),
        "weakened",
    ),
    # 5. Helpers: a weakened helper is a weakened check in every test that calls it, through
    # a helper module that imports it (neither the test file nor that module changes).
    "helper-module-weakened": (
        edits((DEEPER, "    assert actual == expected\n", "    assert actual\n")),
        "weakened",
    ),
    "local-helper-weakened": (
        edits((S, "    assert total == want\n", "    assert total is not None\n")),
        "weakened",
    ),
    "helper-module-emptied": (
        edits((H, "    same(total, expected)\n    assert total >= 0\n", "    pass\n")),
        "fewer-asserts",
    ),
    # 6. Moved, but not equivalent, or into a test that does not run.
    "moved-into-a-skipped-test": (
        edits(
            (S, ZERO, ""),
            (S, CLASS, "\n\n@pytest.mark.skip\ndef test_later() -> None:\n" + ZERO + CLASS),
        ),
        "fewer-asserts",
    ),
    "moved-and-weakened": (
        edits(
            (S, ZERO, ""),
            (S, FULL, FULL + "    assert apply_discount(999, 0)\n"),
        ),
        "fewer-asserts",
    ),
}

BENIGN: dict[str, Change] = {
    # 5. Assertions moved into a helper: of the same module, of a helper module, of conftest.
    "into-a-local-helper": edits(
        (S, TOTAL + ZERO, "    check_both(total)\n"),
        (
            S,
            "\n\ndef test_rate()",
            "\n\ndef check_both(total: int) -> None:\n" + TOTAL + ZERO + "\n\ndef test_rate()",
        ),
    ),
    "into-a-helper-module": edits(
        (S, TOTAL + ZERO, "    check_rate(total)\n"),
        (S, "from helpers import check_stack", "from helpers import check_rate, check_stack"),
        (
            H,
            '"""Shared checks of the tests."""\n',
            '"""Shared checks of the tests."""\n\nfrom shop.discounts import apply_discount\n\n\n'
            "def check_rate(total: int) -> None:\n" + TOTAL + ZERO,
        ),
    ),
    "into-a-conftest-helper": edits(
        (S, TOTAL + ZERO, "    check_in_conftest(total)\n"),
        (
            S,
            "from helpers import check_stack",
            "from conftest import check_in_conftest\nfrom helpers import check_stack",
        ),
    ),
    # 6. Assertions moved to another test, unchanged: a new one, or one that exists.
    "moved-to-a-new-test": edits(
        (S, ZERO, ""),
        (S, ISCLOSE, ""),
        (S, CLASS, "\n\ndef test_rate_edges() -> None:\n" + ZERO + ISCLOSE + CLASS),
    ),
    "moved-to-an-existing-test": edits((S, ZERO, ""), (S, FULL, FULL + ZERO)),
}


def conftest_helper(repo: Path) -> None:
    (repo / "tests/conftest.py").write_text(
        "from shop.discounts import apply_discount\n\n\n"
        "def check_in_conftest(total: int) -> None:\n" + TOTAL + ZERO
    )


@pytest.fixture(scope="module")
def sites_repo(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    files = {S: SITES, H: HELPERS, DEEPER: DEEP}
    return bake_with(tmp_path_factory.mktemp("sites"), files, "sites of every kind, helpers")


def findings(report: dict[str, object]) -> list[dict[str, object]]:
    evidence = report["evidence"]
    assert isinstance(evidence, dict)
    return list(evidence["findings"])


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_site_attack_blocks_with_its_rule(sites_repo: Path, tmp_path: Path, name: str) -> None:
    change, rule = ATTACKS[name]
    code, report = inventory(
        sites_repo, branch(sites_repo, f"sites/attack/{name}", change), tmp_path
    )
    found = [f for f in findings(report) if f["rule"] == rule]
    assert code == 1, report["summary"]
    assert found, findings(report)
    assert isinstance(found[0]["line"], int)
    assert found[0]["line"] > 0


@pytest.mark.parametrize("name", sorted(BENIGN))
def test_site_benign_change_merges(sites_repo: Path, tmp_path: Path, name: str) -> None:
    change = BENIGN[name]
    if name == "into-a-conftest-helper":
        change = both(conftest_helper, change)
    code, report = inventory(
        sites_repo, branch(sites_repo, f"sites/benign/{name}", change), tmp_path
    )
    assert findings(report) == []
    assert code == 0, report["summary"]


def both(first: Change, second: Change) -> Change:
    def change(repo: Path) -> None:
        first(repo)
        second(repo)

    return change


def test_moved_assertions_are_recorded_by_test(sites_repo: Path, tmp_path: Path) -> None:
    head = branch(sites_repo, "sites/moved-again", BENIGN["moved-to-a-new-test"])
    _, report = inventory(sites_repo, head, tmp_path)
    evidence = report["evidence"]
    assert isinstance(evidence, dict)
    assert evidence["moved_asserts"] == {f"{S}::test_rate": 1, f"{S}::test_rounding": 1}


def test_vacuous_finding_names_the_line_of_the_assertion(sites_repo: Path, tmp_path: Path) -> None:
    head = branch(sites_repo, "sites/line/or-true", ATTACKS["or-true"][0])
    _, report = inventory(sites_repo, head, tmp_path)
    text = git(sites_repo, "show", f"{head}:{S}").splitlines()
    line = text.index("    assert total == 900 or True") + 1
    assert [f["line"] for f in findings(report) if f["rule"] == "vacuous"] == [line]


def test_weakened_reason_names_both_lines(sites_repo: Path, tmp_path: Path) -> None:
    head = branch(sites_repo, "sites/line/label", ATTACKS["equal-to-true-same-subject-later"][0])
    _, report = inventory(sites_repo, head, tmp_path)
    weakened = [f for f in findings(report) if f["rule"] == "weakened"]
    parent = SITES.splitlines().index('        self.assertEqual(label, "900")') + 1
    assert len(weakened) == 1
    assert f"parent line {parent}" in str(weakened[0]["reason"])
    assert f"patch line {parent}" in str(weakened[0]["reason"])


def test_helper_weakening_is_reported_by_each_caller(sites_repo: Path, tmp_path: Path) -> None:
    head = branch(sites_repo, "sites/helper-two-callers", ATTACKS["helper-module-weakened"][0])
    _, report = inventory(sites_repo, head, tmp_path)
    ids = sorted(str(f["id"]) for f in findings(report) if f["rule"] == "weakened")
    assert ids == [f"{S}::test_no_coupons_through_helper", f"{S}::test_stack_through_helper"]


def test_a_bases_totals_do_not_depend_on_what_the_patch_touched(
    sites_repo: Path, tmp_path: Path
) -> None:
    """Tests asserting through a helper module count its assertions whichever files the patch
    wrote: one patch touches the test file, one only the package."""
    touching_tests = branch(sites_repo, "sites/totals/tests", edits((S, "TEN = ", "TEN  = ")))
    elsewhere = edits(("src/shop/__init__.py", "Example order CLI", "The example order CLI"))
    touching_source = branch(sites_repo, "sites/totals/source", elsewhere)
    totals = []
    for head in (touching_tests, touching_source):
        _, report = inventory(sites_repo, head, tmp_path / head.replace("/", "-"))
        evidence = report["evidence"]
        assert isinstance(evidence, dict)
        totals.append((evidence["parent_total"], evidence["patch_total"]))
    assert totals[0] == totals[1], totals
    assert totals[0][0] == totals[0][1]
