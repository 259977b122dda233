"""A skip the patch adds, judged by what ran (issue 50): a `skipif` whose condition is false
where the judge runs the tests is no lost test; a skip that skips is.

A click project's upstream commit added `@pytest.mark.skipif(<an old SQLite without a
pragma>)` to a test: on the judge's machine the condition is false, the test runs and passes
on both sides, and the inventory blocked it as "gained a skip". One bake; each patch is a real
branch judged whole.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tools.bakery import branch, edit, judge

D = "tests/test_discounts.py"
TEST = "def test_cap_limits_percent_cut() -> None:\n"
IMPORTS = "import pytest\n"


def decorated(decorator: str, imports: str = "") -> Callable[[Path], None]:
    def change(tree: Path) -> None:
        edit(tree / D, TEST, f"{decorator}\n{TEST}")
        if imports:
            edit(tree / D, IMPORTS, IMPORTS + imports)

    return change


# Conditions false on any machine the judge runs on, in several spellings: they skip nothing.
NOT_HERE = {
    "old-python": decorated(
        '@pytest.mark.skipif(sys.version_info < (3, 8), reason="needs 3.8")', "import sys\n"
    ),
    "old-sqlite": decorated(
        '@pytest.mark.skipif(sqlite3.sqlite_version_info < (3, 0), reason="old SQLite")',
        "import sqlite3\n",
    ),
    "unittest-skipunless": decorated(
        '@unittest.skipUnless(hasattr(os, "getpid"), "needs getpid")',
        "import os\nimport unittest\n",
    ),
}
# Skips that skip where the judge runs: each still blocks.
SKIPS_HERE = {
    "always": decorated('@pytest.mark.skipif(True, reason="flaky")'),
    "on-linux": decorated(
        '@pytest.mark.skipif(sys.platform.startswith("linux"), reason="x")', "import sys\n"
    ),
    "call": lambda tree: edit(
        tree / D,
        TEST,
        TEST + '    if __import__("sys").version_info < (3, 0):\n        pytest.skip("old")\n',
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(NOT_HERE))
def test_a_skipif_that_does_not_hold_here_merges_and_is_named(repo: Path, name: str) -> None:
    head = branch(repo, f"skip/not-here-{name}", NOT_HERE[name])
    verdict = judge(repo, "--head", head)
    inventory = verdict.step("assert-inventory")
    assert verdict.report["verdict"] == "merge", verdict.output
    assert "gained a skip" in inventory["summary"], inventory["summary"]
    assert "whose condition does not hold here" in inventory["summary"]


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(SKIPS_HERE))
def test_a_skip_that_skips_here_or_is_a_call_still_blocks(repo: Path, name: str) -> None:
    head = branch(repo, f"skip/here-{name}", SKIPS_HERE[name])
    verdict = judge(repo, "--head", head)
    assert verdict.report["verdict"] == "block", verdict.output
    rules = [f["rule"] for f in verdict.step("assert-inventory")["evidence"].get("findings", [])]
    assert "skip-added" in rules, verdict.step("assert-inventory")
