"""The gate's own configuration never fails open and is never blamed on the patch (issue 49).

One bake. Each base is a branch of main whose `oracle/judge.yaml` or pytest configuration is
wrong in one spelling; each patch changes behaviour that only a unit test pins (the message
of a rejected cap) and edits that test to match, the cheat a mistyped `tests:` let merge.
Before issue 49 the mistyped, moved and empty entries merged it, and the configuration
faults were blamed on the patch ("forged", "tampered").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tools.bakery import Verdict, branch, edit, git, judge

SRC, TEST = "src/shop/discounts.py", "tests/test_discounts.py"
CONFIG = "oracle/judge.yaml"
OLD, NEW = "cap_cents must be >= 0", "the cap must not be negative"


def cheat(tree: Path) -> None:
    """Change the message, and the unit test that pins it (wherever the base keeps it)."""
    edit(tree / SRC, OLD, NEW)
    test = next(tree.glob("*/test_discounts.py"))
    edit(test, '"cap_cents"', '"the cap"')


def honest(tree: Path) -> None:
    """A new test of behaviour that stays: no evidence step may call this a forgery."""
    (tree / "tests/test_more.py").write_text(
        "from shop.discounts import stack_discounts\n\n\n"
        "def test_no_coupons_is_the_subtotal() -> None:\n"
        "    assert stack_discounts(1234, []) == 1234\n"
    )


def with_tests(spelling: str) -> Callable[[Path], None]:
    def change(tree: Path) -> None:
        edit(tree / CONFIG, "tests: [tests]\n", f"tests: {spelling}\n")

    return change


def moved(tree: Path) -> None:
    """The base moves its tests and leaves judge.yaml as it was."""
    git(tree, "mv", "tests", "checks")


BASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "typo": (with_tests("[test]"), "field 'tests' entry 'test' is not in the base tree"),
    "subfolder": (
        with_tests("[tests/unit]"),
        "field 'tests' entry 'tests/unit' is not in the base tree",
    ),
    "moved": (moved, "field 'tests' entry 'tests' is not in the base tree"),
    # A folder that is there but holds no test pytest collects.
    "collects-nothing": (
        with_tests("[tests, docs]"),
        "field 'tests' entry 'docs' holds no test pytest collects on the base",
    ),
}


def assert_never_merged(verdict: Verdict, why: str) -> None:
    assert verdict.returncode == 2, verdict.output
    assert verdict.report["verdict"] == "error", verdict.output
    said = [s["summary"] for s in verdict.report["steps"] if s["status"] == "error"]
    assert any(why in line for line in said), said
    assert not any(word in verdict.output for word in ("forged", "tampered")), verdict.output


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(BASES))
def test_a_mistyped_or_moved_tests_entry_never_merges_a_unit_only_change(
    repo: Path, name: str
) -> None:
    change, why = BASES[name]
    base = branch(repo, f"config-base/{name}", change)
    head = branch(repo, f"config/{name}", cheat, base=base)
    assert_never_merged(judge(repo, "--base", base, "--head", head), why)


@pytest.mark.e2e
def test_a_patch_that_removes_the_tests_folder_is_not_judged_on_nothing(repo: Path) -> None:
    """The head tree lacks the base's `tests:` entry: the inventory would run nothing."""
    head = branch(repo, "config/remove-tests", moved)
    verdict = judge(repo, "--base", "main", "--head", head)
    assert verdict.report["verdict"] != "merge", verdict.output
    assert "entry 'tests' is not in the head tree" in verdict.output


PYTEST = "[tool.pytest.ini_options]\n"


def unknown_option(tree: Path) -> None:
    """The project's pytest configuration names an option no plugin the gate loads knows
    (a `--cov` whose plugin is not in test_extra, say): pytest exits 4 on every run."""
    edit(tree / "pyproject.toml", PYTEST, PYTEST + 'addopts = "--no-such-flag"\n')


@pytest.mark.e2e
def test_a_pytest_usage_error_is_the_gates_configuration_never_forgery(repo: Path) -> None:
    """The patch changes a test, so every evidence run of the tests runs once: each fails on
    the base's configuration, and the verdict names it as an error, never as the patch's."""
    base = branch(repo, "config-base/addopts", unknown_option)
    head = branch(repo, "config/addopts", honest, base=base)
    assert_never_merged(judge(repo, "--base", base, "--head", head), "pytest refused its arguments")


NOT_PATHS = {
    "warnings-line": '"  Test: tests"',
    "node-id": '"tests/test_discounts.py::test_a"',
    "trailing-space": '"tests "',
    "tab": '"tests\\tx"',
}


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(NOT_PATHS))
def test_a_tests_entry_that_is_a_line_of_pytests_output_fails_validation(
    repo: Path, name: str
) -> None:
    """What adopt once wrote from a warnings summary: no step may read it as a path."""
    base = branch(repo, f"config-base/entry-{name}", with_tests(f"[{NOT_PATHS[name]}, tests]"))
    verdict = judge(repo, "--base", base, "--head", base)
    assert verdict.returncode == 2, verdict.output
    assert "field 'tests' entry" in verdict.output
    assert "is not a path" in verdict.output
