"""Test layouts as pytest sees them: `tests:` of judge.yaml names files or folders.

The bake is turned into a project like python-slugify: its tests are unittest classes in one
root `test.py`, a name pytest's default `python_files` does not match (pytest collects a file
named on its command line whatever its name), and there is no `tests/` folder. Every step that
reads `tests:` runs through its script's `main(argv)` with the judgment judge.py gives it, on
worktrees and builds of the base and of each patch; the project's own `nox -s tests` runs too.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import advisory_tests
import crossrun
import pytest
from _gate.core.config import load_config
from _gate.core.context import Builds, Judgment
from _gate.core.protocol import FailClosed, read_report
from _gate.core.seal import seal
from _gate.runs.git import changes
from _gate.steps import tests as tests_step

from tests.helpers import (
    Built,
    Step,
    builder,
    inventory_step,
    judged_step,
    report_file,
    sha,
    static_steps,
)
from tools.bakery import bake, branch, edit, git

ROOT_TESTS = '''\
"""The project's tests: one root module of unittest classes."""

import unittest

from shop.discounts import Coupon, stack_discounts

TEN_PERCENT, FIVE_OFF = Coupon("percent", 1000), Coupon("fixed", 500)


class TestStacking(unittest.TestCase):
    def test_order_matters(self):
        self.assertEqual(stack_discounts(10_000, [TEN_PERCENT, FIVE_OFF]), 8500)
        self.assertEqual(stack_discounts(10_000, [FIVE_OFF, TEN_PERCENT]), 8550)

    def test_no_coupons(self):
        self.assertEqual(stack_discounts(2500, []), 2500)


class TestFixed(unittest.TestCase):
    def test_never_below_zero(self):
        self.assertEqual(stack_discounts(1200, [Coupon("fixed", 5000)]), 0)


if __name__ == "__main__":
    unittest.main()
'''
IDS = [
    "test.py::TestFixed::test_never_below_zero",
    "test.py::TestStacking::test_no_coupons",
    "test.py::TestStacking::test_order_matters",
]
SECOND_ORDER = "        self.assertEqual(stack_discounts(10_000, [FIVE_OFF, TEN_PERCENT]), 8550)\n"
FIXED_CUT = "        return min(remaining, coupon.value)\n"


def root_test_file(repo: Path) -> None:
    git(repo, "rm", "-rq", "tests")
    (repo / "test.py").write_text(ROOT_TESTS)
    edit(repo / "pyproject.toml", 'testpaths = ["tests"]\n', "")
    edit(repo / "oracle/judge.yaml", "tests: [tests]\n", "tests: [test.py]\n")


@pytest.fixture(scope="module")
def slug(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bake whose base branch keeps its tests in a root test.py, and no tests/ folder."""
    repo = bake(tmp_path_factory.mktemp("slug"))
    root_test_file(repo)
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "--no-verify", "-m", "tests in a root test.py, as python-slugify")
    return repo


@pytest.fixture(scope="module")
def envs(slug: Path, tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Built:
    return builder(slug, tmp_path_factory.mktemp("envs"), wheelhouse)


def judgment(repo: Path, envs: Built, head: str, reports: Path) -> Judgment:
    """The judge's view of `head` against main: refs, the two worktrees, the base's settings."""
    parent, patch = envs("main", "parent")["tree"], envs(head, "patch")["tree"]
    base, tip = sha(repo, "main"), sha(repo, head)
    config = load_config(parent / "oracle/judge.yaml")
    pythons = envs("main", "parent")["python"], envs(head, "patch")["python"]
    # The crossrun and the advisory tests run no oracle: the patch's env stands in for it.
    oracle_seal = seal(pythons[1].parent.parent, reports.parent / "oracle.digest.json")
    builds = Builds(pythons[0], pythons[1], pythons[1], oracle_seal)
    found = changes(repo, base, tip)
    return Judgment(repo, reports, base, tip, parent, patch, config, False, found, builds=builds)


def judged_run(repo: Path, envs: Built, head: str, tmp: Path) -> dict[str, Step]:
    """crossrun, then the advisory tests (each given the judgment as judge.py gives it; the
    tests run again as the patch changed none: the judge reads them from the crossrun only
    when unchanged)."""
    j = judgment(repo, envs, head, tmp / "reports")
    inventory = inventory_step(repo, envs, head, tmp)
    earlier = {"assert-inventory": read_report(report_file(j.reports, "assert-inventory"))}
    return {
        "assert-inventory": inventory,
        "crossrun": judged_step(j, "crossrun", crossrun.main),
        "tests": judged_step(j, "tests", advisory_tests.main, earlier),
    }


def report(reports: Path, name: str) -> dict[str, Any]:
    return dict(json.loads((reports / f"{name}.json").read_text("utf-8")))


def test_the_base_collects_its_root_test_file(slug: Path, envs: Built, tmp_path: Path) -> None:
    steps = judged_run(slug, envs, "main", tmp_path)
    assert {name: step["status"] for name, step in steps.items()} == {
        "assert-inventory": "pass",
        "crossrun": "pass",
        "tests": "advisory",
    }
    evidence = report(tmp_path / "reports", "assert-inventory")["evidence"]
    assert [row[0] for row in evidence["tests"]] == IDS
    assert evidence["collection"]["parent"] == 3
    assert evidence["collected_patch"] == IDS
    assert sorted(steps["crossrun"]["evidence"]["parent"]) == IDS
    tests = report(tmp_path / "reports", "tests")["evidence"]
    assert sorted(tests["outcomes"]) == IDS
    assert tests["suspicious"] == []


def test_a_weakened_root_test_blocks_and_is_the_patchs_own_test(
    slug: Path, envs: Built, tmp_path: Path
) -> None:
    head = branch(slug, "weaken-root", lambda repo: edit(repo / "test.py", SECOND_ORDER, ""))
    inventory = inventory_step(slug, envs, head, tmp_path / "inventory")
    assert (inventory["exit_code"], inventory["status"]) == (1, "block")
    found = inventory["evidence"]["findings"][0]
    assert (found["rule"], found["id"], found["path"]) == (
        "fewer-asserts",
        "test.py::TestStacking::test_order_matters",
        "test.py",
    )
    write_set = static_steps(slug, head, tmp_path / "static")["write-set"]
    assert [row["path"] for row in write_set["evidence"]["tests"]] == ["test.py"]
    assert write_set["evidence"]["source"] == []
    j = judgment(slug, envs, head, tmp_path / "reports")
    assert tests_step.reuses(j) is False


def test_a_broken_build_fails_the_parents_root_tests_on_the_patch(
    slug: Path, envs: Built, tmp_path: Path
) -> None:
    def break_fixed(repo: Path) -> None:
        edit(repo / "src/shop/discounts.py", FIXED_CUT, FIXED_CUT.replace(")\n", ") - 1\n"))

    head = branch(slug, "break-fixed", break_fixed)
    assert tests_step.reuses(judgment(slug, envs, head, tmp_path)) is True
    steps = judged_run(slug, envs, head, tmp_path)
    cross = steps["crossrun"]
    assert (cross["exit_code"], cross["status"]) == (1, "deferred")
    failed = sorted(row["id"] for row in cross["evidence"]["failures"])
    assert failed == ["test.py::TestFixed::test_never_below_zero", IDS[2]]
    outcomes = report(tmp_path / "reports", "tests")["evidence"]["outcomes"]
    assert sorted(node for node, outcome in outcomes.items() if outcome == "failed") == failed


def test_the_tests_session_runs_the_root_test_file(slug: Path) -> None:
    proc = subprocess.run(
        ["nox", "-s", "tests"], cwd=slug, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout + proc.stderr


SETTINGS = "command: shop\nbase_branch: main\noracle_ref: oracle/main\nprotected: []\n"


def test_tests_entries_are_read_relative_to_the_root(tmp_path: Path) -> None:
    config = tmp_path / "judge.yaml"
    config.write_text(SETTINGS + "tests: [./test.py, tests/, docs/examples]\n")
    assert load_config(config).tests == ("test.py", "tests", "docs/examples")


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ("[]", "field 'tests' is empty; name the project's tests"),
        ("[/srv/tests]", "field 'tests' entry '/srv/tests' is not a file or folder inside"),
        ("[tests, ../shared]", "field 'tests' entry '../shared' is not a file or folder inside"),
        ("[.]", "field 'tests' entry '.' is not a file or folder inside"),
    ],
)
def test_tests_entries_outside_the_project_fail_closed(
    tmp_path: Path, entries: str, why: str
) -> None:
    config = tmp_path / "judge.yaml"
    config.write_text(SETTINGS + f"tests: {entries}\n")
    with pytest.raises(FailClosed, match=re.escape(f"{config}: {why}")):
        load_config(config)
