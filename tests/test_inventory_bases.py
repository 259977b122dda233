"""The assert inventory through a test base class that lives in the package (issue 8).

A project's `self.assert*` helper is counted as the checks its body runs, wherever its class
lives: `src/shop/testing.py` here, as `markdown/test_tools.py` in Python-Markdown. A check of
the helper that runs in a loop over one of its parameters runs once per item of the argument
(a literal, or a module constant bound once to a literal). So checks folded into a helper's
argument, or unfolded out of it, keep their count, while dropping an item, emptying the helper
or weakening it blocks every test that calls it, though no test file changed. The skips of the
base class (its marks, a skip in its setUp or setUpClass) are each of its tests' skips.

One bake whose base gains the helper module and a unittest-style test file; each patch is a
real branch judged by the inventory step, as in test_inventory.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import Change, bake_with, edits, inventory, rule_ids
from tools.bakery import branch

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

HELPER = "src/shop/testing.py"
RATES = "tests/test_rates.py"
HELPER_TEXT = """\
\"\"\"Checks shared by the rate tests: a base class of the suite, in the package.\"\"\"

import unittest

from shop.discounts import apply_discount


class RateCase(unittest.TestCase):
    def assertRates(
        self, amount: int, expected: int, rate: int, more: dict[int, int] | None = None
    ) -> None:
        self.assertEqual(apply_discount(amount, rate), expected)
        for other, total in (more or {}).items():
            self.assertEqual(apply_discount(amount, other), total)
"""
RATES_TEXT = """\
from shop.discounts import apply_discount
from shop.testing import RateCase


class TestRates(RateCase):
    def test_ten_percent(self) -> None:
        self.assertRates(1000, 900, 1000)
        self.assertEqual(apply_discount(1000, 2000), 800)

    def test_more_rates(self) -> None:
        self.assertRates(1000, 500, 5000, more={2500: 750, 0: 1000})
"""
TEN = "        self.assertRates(1000, 900, 1000)\n"
SECOND = "        self.assertEqual(apply_discount(1000, 2000), 800)\n"
MORE = "        self.assertRates(1000, 500, 5000, more={2500: 750, 0: 1000})\n"
CHECK = "        self.assertEqual(apply_discount(amount, rate), expected)\n"
LOOP = "        for other, total in (more or {}).items():\n"
TEN_ID = f"{RATES}::TestRates::test_ten_percent"
MORE_ID = f"{RATES}::TestRates::test_more_rates"

SETUP_SKIP = """\
class RateCase(unittest.TestCase):
    def setUp(self) -> None:
        if not hasattr(self, "slow"):
            self.skipTest("needs a slow machine")

"""
SETUP_CLASS_SKIP = """\
class RateCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        raise unittest.SkipTest("later")

"""
# Patch -> (the rule that must block, the test it must name).
ATTACKS: dict[str, tuple[Change, str, str]] = {
    "drop-a-folded-item": (
        edits((RATES, "more={2500: 750, 0: 1000}", "more={2500: 750}")),
        "fewer-asserts",
        MORE_ID,
    ),
    "fold-into-an-empty-dict": (
        edits((RATES, TEN + SECOND, "        self.assertRates(1000, 900, 1000, more={})\n")),
        "fewer-asserts",
        TEN_ID,
    ),
    "helper-returns-first": (
        edits((HELPER, CHECK, "        return\n" + CHECK)),
        "fewer-asserts",
        TEN_ID,
    ),
    "helper-check-weakened": (
        edits((HELPER, CHECK, "        self.assertTrue(apply_discount(amount, rate))\n")),
        "weakened",
        TEN_ID,
    ),
    "helper-loop-cut-short": (
        edits((HELPER, LOOP, "        for other, total in list((more or {}).items())[:1]:\n")),
        "fewer-asserts",
        MORE_ID,
    ),
    "base-setup-skips": (
        edits((HELPER, "class RateCase(unittest.TestCase):\n", SETUP_SKIP)),
        "skip-added",
        TEN_ID,
    ),
    "base-setup-class-raises-skip": (
        edits((HELPER, "class RateCase(unittest.TestCase):\n", SETUP_CLASS_SKIP)),
        "skip-added",
        MORE_ID,
    ),
    "base-marked-skip": (
        edits(
            (
                HELPER,
                "class RateCase(unittest.TestCase):\n",
                '@unittest.skip("flaky")\nclass RateCase(unittest.TestCase):\n',
            )
        ),
        "skip-added",
        TEN_ID,
    ),
}
# Patches that keep every check: they must merge.
BENIGN: dict[str, Change] = {
    "fold-a-check-into-the-helper": edits(
        (RATES, TEN + SECOND, "        self.assertRates(1000, 900, 1000, more={2000: 800})\n")
    ),
    "unfold-the-helper-argument": edits(
        (
            RATES,
            MORE,
            "        self.assertRates(1000, 500, 5000)\n"
            "        self.assertEqual(apply_discount(1000, 2500), 750)\n"
            "        self.assertEqual(apply_discount(1000, 0), 1000)\n",
        )
    ),
    "argument-to-a-module-constant": edits(
        (RATES, "\n\nclass TestRates", "\nMORE = {2500: 750, 0: 1000}\n\n\nclass TestRates"),
        (RATES, "more={2500: 750, 0: 1000}", "more=MORE"),
    ),
    "base-setup-builds-fixtures": edits(
        (
            HELPER,
            "class RateCase(unittest.TestCase):\n",
            "class RateCase(unittest.TestCase):\n"
            "    def setUp(self) -> None:\n"
            "        self.amounts = [0, 1000]\n\n",
        )
    ),
    "helper-loop-rewritten": edits(
        (
            HELPER,
            LOOP + "            self.assertEqual(apply_discount(amount, other), total)\n",
            "        for other in sorted(more or {}):\n"
            "            self.assertEqual(apply_discount(amount, other), (more or {})[other])\n",
        )
    ),
}


@pytest.fixture(scope="module")
def base_class_repo(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    files = {HELPER: HELPER_TEXT, RATES: RATES_TEXT}
    return bake_with(tmp_path_factory.mktemp("bases"), files, "a test base class in the package")


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_check_lost_through_the_base_class_blocks(
    base_class_repo: Path, tmp_path: Path, name: str
) -> None:
    change, rule, test = ATTACKS[name]
    code, report = inventory(
        base_class_repo, branch(base_class_repo, f"bases/attack/{name}", change), tmp_path
    )
    assert code == 1, report["summary"]
    assert (rule, test) in rule_ids(report), rule_ids(report)


@pytest.mark.parametrize("name", sorted(BENIGN))
def test_checks_kept_through_the_base_class_merge(
    base_class_repo: Path, tmp_path: Path, name: str
) -> None:
    code, report = inventory(
        base_class_repo, branch(base_class_repo, f"bases/benign/{name}", BENIGN[name]), tmp_path
    )
    assert rule_ids(report) == []
    assert code == 0, report["summary"]
