"""The assert inventory on skips that reach every test of a class or module (rule skip-added).

Python-Markdown's e02ed39066 added `def setUp(self): self.skipTest(...)`, under a condition, to
two TestCase classes and moved 13 tests into a new class with the same setUp: 48 tests skipped,
and the inventory merged it. A setup hook, an autouse fixture, `__unittest_skip__` or a base
class of the same file that skips is a skip of each test it runs around, compared per test.

The bake of test_inventory.py, whose base also gains a file with a setUp skip already there;
each patch is a real branch judged by the inventory step with `pytest --collect-only`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import C, Change, D, U, collected_by, edits, inventory
from tools.bakery import branch, git

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

H = "tests/test_highlight.py"
# A setUp skip already on the parent, shared through a base class, and a setUp that only
# builds what its tests use.
HIGHLIGHT = """\
import os
import unittest

from shop.discounts import apply_discount

REQUIRED = os.environ.get("PYGMENTS_VERSION", "")


class HighlightBase(unittest.TestCase):
    def setUp(self) -> None:
        if REQUIRED and REQUIRED != "2.19":
            self.skipTest(f"Pygments=={REQUIRED} is required")


class TestPinned(HighlightBase):
    def test_full_rate(self) -> None:
        self.assertEqual(apply_discount(1000, 10_000), 0)


class TestAmounts(unittest.TestCase):
    def setUp(self) -> None:
        self.amount = 1000

    def test_half(self) -> None:
        self.assertEqual(apply_discount(self.amount, 5000), 500)
"""
UNITTEST_CLASS = "class ApplyDiscountTest(unittest.TestCase):\n"
HALF_OFF = "class TestHalfOff:\n"
NO_COUPONS = "def test_no_coupons_keeps_subtotal() -> None:\n"
ZERO_RATE = (
    "    def test_zero_rate(self) -> None:\n"
    "        result = apply_discount(999, 0)\n"
    "        self.assertEqual(result, 999)\n"
)
SETUP_BUILDS = "    def setUp(self) -> None:\n        self.amount = 1000\n"

TEN = f"{U}::ApplyDiscountTest::test_ten_percent"
ZERO = f"{U}::ApplyDiscountTest::test_zero_rate"
EVEN = f"{C}::TestHalfOff::test_even_amount"
PLAIN = f"{D}::test_no_coupons_keeps_subtotal"
AMOUNTS = f"{H}::TestAmounts::test_half"


def move_into_skipping_class(repo: Path) -> None:
    """Markdown's move: a test leaves its class, unchanged, for a new class that skips."""
    edits((U, "\n" + ZERO_RATE, ""))(repo)
    with (repo / U).open("a", encoding="utf-8") as out:
        out.write(
            "\n\nclass SlowDiscountTest(unittest.TestCase):\n"
            "    def setUp(self) -> None:\n"
            "        if apply_discount(1, 0) == 1:\n"
            "            self.skipTest('slow')\n\n" + ZERO_RATE
        )


# Patch -> a parent test that must be reported `skip-added`.
ATTACKS: dict[str, tuple[Change, str]] = {
    # setUp that skips: unittest's skipTest under a condition, pytest's setup_method.
    "setup-skiptest-conditional": (
        edits(
            (U, "import unittest\n", "import os\nimport unittest\n"),
            (
                U,
                UNITTEST_CLASS,
                UNITTEST_CLASS + "    def setUp(self) -> None:\n"
                "        if os.environ.get('PYGMENTS_VERSION') != '2.19':\n"
                "            self.skipTest('Pygments==2.19 is required')\n\n",
            ),
        ),
        TEN,
    ),
    "setup-method-pytest-skip": (
        edits(
            (C, "from shop", "import pytest\n\nfrom shop"),
            (
                C,
                HALF_OFF,
                HALF_OFF + "    def setup_method(self) -> None:\n        pytest.skip('later')\n\n",
            ),
        ),
        EVEN,
    ),
    "move-into-a-class-whose-setup-skips": (move_into_skipping_class, ZERO),
    # setUpClass/setup_class that raises unittest's SkipTest.
    "setupclass-raise-skiptest": (
        edits(
            (
                U,
                UNITTEST_CLASS,
                UNITTEST_CLASS + "    @classmethod\n"
                "    def setUpClass(cls) -> None:\n"
                "        raise unittest.SkipTest('nightly only')\n\n",
            )
        ),
        ZERO,
    ),
    "setup-class-raise-imported-skiptest": (
        edits(
            (C, "from shop", "from unittest import SkipTest\n\nfrom shop"),
            (
                C,
                HALF_OFF,
                HALF_OFF + "    @classmethod\n"
                "    def setup_class(cls) -> None:\n"
                "        if apply_discount(1, 0):\n"
                "            raise SkipTest\n\n",
            ),
        ),
        EVEN,
    ),
    # Module hooks: unittest's setUpModule, pytest's setup_module.
    "setupmodule-raise-skiptest": (
        edits(
            (
                U,
                UNITTEST_CLASS,
                "def setUpModule() -> None:\n"
                "    raise unittest.SkipTest('needs a database')\n\n\n" + UNITTEST_CLASS,
            )
        ),
        TEN,
    ),
    "setup-module-pytest-skip": (
        edits(
            (
                D,
                "TEN_PERCENT = ",
                "def setup_module() -> None:\n"
                "    if Coupon('fixed', 1).kind == 'fixed':\n"
                "        pytest.skip('offline')\n\n\nTEN_PERCENT = ",
            )
        ),
        PLAIN,
    ),
    # Autouse fixtures: one of the module that skips, one of a class that marks its test skip.
    "autouse-module-fixture": (
        edits(
            (
                D,
                "TEN_PERCENT = ",
                "@pytest.fixture(autouse=True)\n"
                "def _offline() -> None:\n"
                "    pytest.skip('offline')\n\n\nTEN_PERCENT = ",
            )
        ),
        PLAIN,
    ),
    "autouse-class-fixture-add-marker": (
        edits(
            (C, "from shop", "import pytest\n\nfrom shop"),
            (
                C,
                HALF_OFF,
                HALF_OFF + "    @pytest.fixture(autouse=True)\n"
                "    def _later(self, request: pytest.FixtureRequest) -> None:\n"
                "        request.node.add_marker(pytest.mark.skip(reason='later'))\n\n",
            ),
        ),
        EVEN,
    ),
    # A base of the same file that skips: its setUp reached through super(), its autouse
    # fixture inherited by a plain pytest class.
    "inherit-setup-skip-through-super": (
        edits(
            (H, "class TestAmounts(unittest.TestCase):", "class TestAmounts(HighlightBase):"),
            (
                H,
                "        self.amount = 1000\n",
                "        super().setUp()\n        self.amount = 1000\n",
            ),
        ),
        AMOUNTS,
    ),
    "inherit-autouse-fixture": (
        edits(
            (C, "from shop", "import pytest\n\nfrom shop"),
            (
                C,
                HALF_OFF,
                "class Offline:\n"
                "    @pytest.fixture(autouse=True)\n"
                "    def _offline(self) -> None:\n"
                "        pytest.skip('offline')\n\n\n" + HALF_OFF.replace(":", "(Offline):"),
            ),
        ),
        EVEN,
    ),
    "unittest-skip-attribute": (
        edits((U, UNITTEST_CLASS, UNITTEST_CLASS + "    __unittest_skip__ = True\n\n")),
        TEN,
    ),
}
BENIGN: dict[str, Change] = {
    "setup-builds-fixtures": edits(
        (U, UNITTEST_CLASS, UNITTEST_CLASS + SETUP_BUILDS + "\n"),
        (U, "apply_discount(1000, 1000)", "apply_discount(self.amount, 1000)"),
    ),
    "tests-added-under-an-existing-setup-skip": edits(
        (
            H,
            "        self.assertEqual(apply_discount(1000, 10_000), 0)\n",
            "        self.assertEqual(apply_discount(1000, 10_000), 0)\n\n"
            "    def test_quarter(self) -> None:\n"
            "        self.assertEqual(apply_discount(1000, 2500), 750)\n",
        )
    ),
    "setup-skip-removed": edits(
        (
            H,
            '        if REQUIRED and REQUIRED != "2.19":\n'
            '            self.skipTest(f"Pygments=={REQUIRED} is required")\n',
            "        self.required = REQUIRED\n",
        )
    ),
    "autouse-fixture-without-skip": edits(
        (
            D,
            "TEN_PERCENT = ",
            "@pytest.fixture(autouse=True)\n"
            "def _utc(monkeypatch: pytest.MonkeyPatch) -> None:\n"
            "    monkeypatch.setenv('TZ', 'UTC')\n\n\nTEN_PERCENT = ",
        )
    ),
}


@pytest.fixture(scope="module")
def base(inventory_repo: Path) -> Path:
    """The bake with a file whose tests a setUp may skip already, committed on main."""
    (inventory_repo / H).write_text(HIGHLIGHT, "utf-8")
    git(inventory_repo, "add", H)
    git(inventory_repo, "commit", "-q", "-m", "a setUp skip on the base")
    return inventory_repo


def skipped(report: dict[str, Any]) -> dict[str, str]:
    return {
        f["id"]: f["reason"] for f in report["evidence"]["findings"] if f["rule"] == "skip-added"
    }


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_skip_of_the_whole_class_or_module_blocks(
    base: Path, inventory_python: Path, tmp_path: Path, name: str
) -> None:
    change, test = ATTACKS[name]
    head = branch(base, f"attack/{name}", change)
    code, report = inventory(base, head, tmp_path, *collected_by(inventory_python))
    assert code == 1, report["summary"]
    assert test in skipped(report), report["evidence"]["findings"]


@pytest.mark.parametrize("name", sorted(BENIGN))
def test_a_setup_that_adds_no_skip_merges(
    base: Path, inventory_python: Path, tmp_path: Path, name: str
) -> None:
    head = branch(base, f"benign/{name}", BENIGN[name])
    code, report = inventory(base, head, tmp_path, *collected_by(inventory_python))
    assert report["evidence"]["findings"] == []
    assert code == 0, report["summary"]


def test_the_markdown_move_names_each_skipped_test_and_its_hook(base: Path, tmp_path: Path) -> None:
    """Every test of the class that gained a setUp skip is reported, with the hook's name."""
    change = ATTACKS["setup-skiptest-conditional"][0]
    _, report = inventory(base, branch(base, "attack/markdown-again", change), tmp_path)
    reasons = skipped(report)
    assert sorted(reasons) == [TEN, ZERO], reasons
    assert "ApplyDiscountTest.setUp skipTest-call" in reasons[TEN], reasons


def forge(cache: Path, key: str) -> None:
    """Rewrite a cache as an analyzer blind to class-level skips would have left it."""
    stored = json.loads(cache.read_text("utf-8"))
    for record in stored["records"].values():
        detail = json.loads(record["detail"])
        for test in detail["tests"].values():
            test["skips"] = [s for s in test["skips"] if " " not in s[1]]
        record["detail"] = json.dumps(detail)
        record["counts"] = {
            n: [t["asserts"], len(t["vacuous"]), len(t["skips"])]
            for n, t in detail["tests"].items()
        }
    stored["key"] = key
    cache.write_text(json.dumps(stored), "utf-8")


def test_inventories_cached_by_another_analyzer_are_not_reused(base: Path, tmp_path: Path) -> None:
    """The cache key is the analyzer's source: records of an older analyzer are read again."""
    cache = tmp_path / "inventory-cache.json"
    head = branch(base, "attack/cached", ATTACKS["setupclass-raise-skiptest"][0])
    code, report = inventory(base, head, tmp_path / "cold", "--cache", str(cache))
    assert code == 1, report["summary"]
    assert ZERO in skipped(report), report["summary"]
    key = json.loads(cache.read_text("utf-8"))["key"]
    forge(cache, "an older analyzer")
    code, report = inventory(base, head, tmp_path / "stale", "--cache", str(cache))
    assert code == 1, report["summary"]
    assert ZERO in skipped(report), report["summary"]
    # The same forged records under this analyzer's key are trusted: the key alone guards them.
    forge(cache, key)
    code, report = inventory(base, head, tmp_path / "forged", "--cache", str(cache))
    assert ZERO not in skipped(report), report["evidence"]["findings"]
