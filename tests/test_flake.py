"""Flake control, last: quarantine and ledger on the oracle ref, retries only for old tests."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tools.bakery import bake, git, judge

# Fails the first time it judges the patch build, passes on every other run: a deterministic
# stand-in for a test that fails 1 in N on the wall clock. The build it judges is the
# environment of the subject worker (parent or patch), named by the gate's own option.
FLAKY = """from __future__ import annotations

import os
from pathlib import Path

import pytest


def test_flaky_on_first_patch_run(request: pytest.FixtureRequest) -> None:
    side = Path(request.config.option.subject_python).parent.parent.name
    seen = Path(os.environ["FLAKY_DIR"]) / (side + ".seen")
    first = not seen.exists()
    seen.touch()
    assert not (first and side == "patch")
"""


def on_oracle_ref(repo: Path, name: str, content: str) -> None:
    """Commit one file to the oracle ref, as a maintainer would."""
    tree = repo.parent / "oracle-ref"
    git(repo, "worktree", "add", "-q", str(tree), "oracle/main")
    (tree / name).write_text(content)
    git(tree, "commit", "-q", "-am", f"maintainer edits {name}")
    git(repo, "worktree", "remove", str(tree))


def row(test_id: str, until: dt.date) -> str:
    rows = [{"id": test_id, "until": until.isoformat(), "reason": "clock skew", "owner": "ops"}]
    return yaml.safe_dump({"quarantine": rows})


@pytest.fixture
def flaky_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = bake(tmp_path / "bake")
    (repo / "oracle/test_flaky.py").write_text(FLAKY)
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "an oracle test that flakes once")
    monkeypatch.setenv("FLAKY_DIR", str(tmp_path))
    return repo


@pytest.mark.e2e
def test_expired_quarantine_row_blocks(shop: Path) -> None:
    yesterday = dt.date.today() - dt.timedelta(days=1)
    on_oracle_ref(shop, "quarantine.yaml", row("tests/test_cli.py::test_help_exits_0", yesterday))
    try:
        verdict = judge(shop)
        assert verdict.returncode == 1, verdict.output
        assert verdict.statuses["quarantine"] == "block"
        assert "expired" in verdict.step("quarantine")["summary"]
    finally:
        on_oracle_ref(shop, "quarantine.yaml", "quarantine: []\n")


@pytest.mark.e2e
def test_quarantine_row_naming_no_test_blocks(shop: Path) -> None:
    tomorrow = dt.date.today() + dt.timedelta(days=1)
    on_oracle_ref(shop, "quarantine.yaml", row("tests/test_cli.py::test_renamed_away", tomorrow))
    try:
        verdict = judge(shop)
        assert verdict.returncode == 1, verdict.output
        assert verdict.step("quarantine")["evidence"]["unknown"] == [
            "tests/test_cli.py::test_renamed_away"
        ]
    finally:
        on_oracle_ref(shop, "quarantine.yaml", "quarantine: []\n")


@pytest.mark.e2e
def test_pre_existing_flaky_oracle_passes_within_budget(flaky_repo: Path) -> None:
    verdict = judge(flaky_repo)
    assert verdict.returncode == 0, verdict.output
    flake = verdict.step("flake-budget")["evidence"]
    assert flake["flaky"] == [
        {
            "id": "oracle/test_flaky.py::test_flaky_on_first_patch_run",
            "step": "oracle",
            "passed_on_retry": 1,
        }
    ]
    assert verdict.statuses["oracle"] == "deferred"
    assert "flake-budget decides" in verdict.step("oracle")["summary"]
    assert verdict.statuses["flake-budget"] == "pass"


@pytest.mark.e2e
def test_zero_retry_budget_blocks_the_same_flake(flaky_repo: Path) -> None:
    judge_yaml = flaky_repo / "oracle/judge.yaml"
    judge_yaml.write_text(
        judge_yaml.read_text().replace("flake_max_retry: 1", "flake_max_retry: 0")
    )
    git(flaky_repo, "commit", "-q", "-am", "no retries")
    verdict = judge(flaky_repo)
    assert verdict.returncode == 1, verdict.output
    assert verdict.statuses["oracle"] == "deferred"
    assert verdict.statuses["flake-budget"] == "block"


@pytest.mark.e2e
def test_live_quarantine_row_excludes_a_failing_oracle(flaky_repo: Path) -> None:
    judge_yaml = flaky_repo / "oracle/judge.yaml"
    judge_yaml.write_text(
        judge_yaml.read_text().replace("flake_max_retry: 1", "flake_max_retry: 0")
    )
    git(flaky_repo, "commit", "-q", "-am", "no retries")
    test_id = "oracle/test_flaky.py::test_flaky_on_first_patch_run"
    on_oracle_ref(flaky_repo, "quarantine.yaml", row(test_id, dt.date.today()))
    verdict = judge(flaky_repo)
    assert verdict.returncode == 0, verdict.output
    assert verdict.step("flake-budget")["evidence"]["excluded"] == [test_id]


SECOND_RUN_FAILS = """from __future__ import annotations

import os
from pathlib import Path


def test_fails_on_the_second_run() -> None:
    runs = Path(os.environ["FLAKY_DIR"]) / "runs"
    runs.mkdir(exist_ok=True)
    count = len(list(runs.iterdir()))
    (runs / str(count)).touch()
    assert count != 1
"""


@pytest.mark.e2e
def test_variance_freezes_an_unstable_oracle_with_an_expiry(flaky_repo: Path) -> None:
    (flaky_repo / "oracle/test_flaky.py").write_text(SECOND_RUN_FAILS)
    git(flaky_repo, "commit", "-q", "-am", "an oracle test that fails on its second run")
    before = git(flaky_repo, "show", "oracle/main:quarantine.yaml")
    nox = ["nox", "-s", "variance"]
    proc = subprocess.run(nox, cwd=flaky_repo, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((flaky_repo / "reports/inventory.variance.json").read_text())
    test_id = "oracle/test_flaky.py::test_fails_on_the_second_run"
    assert report["k"] == 5
    assert report["tests"][test_id]["pass_count"] == 4
    assert (
        report["tests"]["oracle/test_replay_corpus.py::test_corpus_is_present_and_ids_are_unique"][
            "freeze"
        ]
        is False
    )
    ledger = json.loads(git(flaky_repo, "show", "oracle/main:variance-ledger.json"))
    expires = (dt.date.today() + dt.timedelta(days=14)).isoformat()
    assert ledger[test_id]["reason"] == "boolean_unstable"
    assert ledger[test_id]["expires"] == expires
    assert git(flaky_repo, "show", "oracle/main:quarantine.yaml") == before
