"""Tests the base generates (a loop of setattr, a metaclass: Python-Markdown's legacy tests) are
the base's layout: pytest collects them, the AST finds no function for them. They are judged by
their ids and by the checks they ran; a patch that makes a file so where the base's is not
still fails closed (test_inventory_collect.py). Real judgments of branches of the bake.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.bakery import branch, edit, judge

G = "tests/test_generated.py"
GENERATED = """\
import unittest

from shop.discounts import stack_discounts

CASES = {"none": (2400, 2400), "zero": (0, 0)}


class TestStacks(unittest.TestCase):
    pass


for _name, (_cents, _want) in CASES.items():

    def _test(self: unittest.TestCase, cents: int = _cents, want: int = _want) -> None:
        self.assertEqual(stack_discounts(cents, []), want)

    setattr(TestStacks, f"test_{_name}", _test)
"""
CHECK = "        self.assertEqual(stack_discounts(cents, []), want)\n"


@pytest.fixture(scope="module")
def base(shop: Path) -> str:
    return branch(shop, "generated/base", lambda t: (t / G).write_text(GENERATED, "utf-8"))


def one_more_case(tree: Path) -> None:
    edit(tree / G, '"zero": (0, 0)}', '"zero": (0, 0), "one": (1, 1)}')


def checks_nothing(tree: Path) -> None:
    edit(tree / G, CHECK, "        stack_discounts(cents, [])\n")


@pytest.mark.e2e
def test_a_base_that_generates_tests_is_judged_and_a_new_case_merges(repo: Path, base: str) -> None:
    head = branch(repo, "generated/one-more", one_more_case, base=base)
    verdict = judge(repo, "--base", base, "--head", head)
    assert verdict.report["verdict"] == "merge", verdict.output
    inventory = verdict.step("assert-inventory")
    assert inventory["evidence"]["collection"]["generated"] == [G]
    assert "1 files generate tests" in inventory["summary"], inventory["summary"]


@pytest.mark.e2e
def test_a_generated_test_that_stops_checking_is_found_by_its_run(repo: Path, base: str) -> None:
    head = branch(repo, "generated/checks-nothing", checks_nothing, base=base)
    verdict = judge(repo, "--base", base, "--head", head)
    assert verdict.report["verdict"] != "merge", verdict.output
    inventory = verdict.step("assert-inventory")
    assert f"{G}::TestStacks::test_none" in inventory["summary"], inventory["summary"]
    assert "fewer-checks" in inventory["summary"], inventory["summary"]
