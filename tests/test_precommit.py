"""The bake's pre-commit hooks, run by pre-commit itself on staged changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SCRIPTS
from tools.bakery import edit, git

FIRST = "    assert stack_discounts(10_000, [TEN_PERCENT, FIVE_OFF]) == 8500\n"
SECOND = "    assert stack_discounts(10_000, [FIVE_OFF, TEN_PERCENT]) == 8550\n"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pre-commit's own environments, made once for the module, never in the user's home."""
    return tmp_path_factory.mktemp("pre-commit-home")


def pre_commit(repo: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    cmd = ["pre-commit", "run", "--color", "never"]
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, check=False)


def test_a_staged_test_that_loses_an_assert_is_stopped_and_an_honest_one_is_not(
    repo: Path, home: Path
) -> None:
    tests = repo / "tests/test_discounts.py"
    edit(tests, SECOND, "")
    git(repo, "add", str(tests))
    stopped = pre_commit(repo, home)
    assert stopped.returncode == 1, stopped.stdout
    report = json.loads((repo / "reports/assert-inventory-staged.json").read_text())
    rules = {row["rule"] for row in report["evidence"]["findings"]}
    assert "fewer-asserts" in rules
    edit(tests, FIRST, FIRST + SECOND + "    assert stack_discounts(0, []) == 0\n")
    git(repo, "add", str(tests))
    passed = pre_commit(repo, home)
    assert passed.returncode == 0, passed.stdout
    assert "staged tests keep their assertions" in passed.stdout


def test_a_staged_fixture_edit_without_its_lock_is_stopped(repo: Path, home: Path) -> None:
    fixture = repo / "fixtures/carts.jsonl"
    fixture.write_text(fixture.read_text() + "\n")
    git(repo, "add", str(fixture))
    stopped = pre_commit(repo, home)
    assert stopped.returncode == 1, stopped.stdout
    report = json.loads((repo / "reports/fixtures-lock.json").read_text())
    assert "fixtures/carts.jsonl" in report["summary"]


def test_the_staged_inventory_outside_a_repository_fails_closed_in_one_line(
    tmp_path: Path,
) -> None:
    cmd = [sys.executable, str(SCRIPTS / "staged_inventory.py")]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "assert-inventory: error: . is not a git repository; run from a clone of the project"
    ]
