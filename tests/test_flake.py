"""Flake control, last: quarantine and ledger on the oracle ref, retries only for old tests.

One bake whose oracle holds a test that flakes once. check_quarantine.py, run_oracle.py and
flake_budget.py run as the judge runs them (`main(argv)`, with the arguments judge.py's
`dynamic_steps` passes) on a worktree of main and real builds of it: the parent build, the
patch build (its environment named `patch`, which the flaky test reads back) and the oracle
environment, which holds neither. The quarantine and the ledger are files the test writes,
where the judge writes what it reads from the oracle ref. The variance session runs through nox.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import SCRIPTS, Built, builder, compiled
from tools.bakery import bake, edit, git

sys.path.insert(0, str(SCRIPTS))
import check_quarantine
import flake_budget
import run_oracle
from _gate import Config, load_config, resolve_oracle_ref, tools_env

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
FLAKY_ID = "oracle/test_flaky.py::test_flaky_on_first_patch_run"
Report = tuple[int, dict[str, Any]]  # a step's exit code and its JSON report


def row(test_id: str, until: dt.date) -> str:
    rows = [{"id": test_id, "until": until.isoformat(), "reason": "clock skew", "owner": "ops"}]
    return yaml.safe_dump({"quarantine": rows})


def with_flaky_oracle(repo: Path) -> Path:
    (repo / "oracle/test_flaky.py").write_text(FLAKY)
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "an oracle test that flakes once")
    return repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One bake, its oracle holding the flaky test on main: base and head of every judgment."""
    return with_flaky_oracle(bake(tmp_path_factory.mktemp("bake")))


@pytest.fixture(scope="module")
def envs(repo: Path, tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Built:
    return builder(repo, tmp_path_factory.mktemp("envs"), wheelhouse)


@pytest.fixture(scope="module")
def tree(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A worktree of main, parent and patch tree at once (the judge judges main against
    itself): all the quarantine check reads."""
    path = tmp_path_factory.mktemp("worktree") / "main"
    git(repo, "worktree", "add", "-q", "--detach", str(path), "main")
    return path


@pytest.fixture(scope="module")
def oracle_python(envs: Built, tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """The oracle's own environment: the judge's tools, neither build."""
    requirements = envs("main", "parent")["tree"] / "scripts/requirements-judge.txt"
    env = tmp_path_factory.mktemp("oracle-env") / "oracle"
    return compiled(tools_env(env, wheelhouse, requirements)[0])


@pytest.fixture
def flaky_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the flaky test remembers its runs: fresh per test, so it flakes once in each."""
    monkeypatch.setenv("FLAKY_DIR", str(tmp_path))
    return tmp_path


def run(main: Callable[[list[str]], int], report: Path, *argv: str | Path) -> Report:
    code = main([*map(str, argv), "--report", str(report)])
    return code, json.loads(report.read_text("utf-8"))


def from_oracle_ref(repo: Path, settings: Config, name: str, dest: Path) -> Path:
    """The file as the judge writes it for the steps: read from the protected oracle ref."""
    ref = resolve_oracle_ref(repo, settings.oracle_ref)
    dest.write_text(git(repo, "show", f"{ref}:{name}") + "\n", "utf-8")
    return dest


def quarantine(tmp: Path, tree: Path, text: str) -> Report:
    """check_quarantine.py with the judge's arguments: parent and patch tree are both main."""
    file = tmp / "quarantine.yaml"
    file.write_text(text, "utf-8")
    argv = ("--file", file, "--parent", tree, "--patch", tree)
    return run(check_quarantine.main, tmp / "quarantine.json", *argv)


def zero_retries(tree: Path, tmp: Path) -> Config:
    """The base's judge.yaml with `flake_max_retry: 0`, as the judge would read it."""
    config = tmp / "judge.yaml"
    shutil.copy(tree / "oracle/judge.yaml", config)
    edit(config, "flake_max_retry: 1", "flake_max_retry: 0")
    return load_config(config)


def oracle_then_budget(
    repo: Path,
    envs: Built,
    oracle_python: Path,
    tmp: Path,
    settings: Config | None = None,
    quarantine_text: str | None = None,
) -> tuple[Report, Report]:
    """The oracle step, then the flake budget that decides what it deferred, each with the
    arguments the judge passes: `settings` stand for the base's judge.yaml, `quarantine_text`
    for quarantine.yaml on the oracle ref (default: what the ref holds)."""
    parent, patch = envs("main", "parent"), envs("main", "patch")
    base = parent["tree"]
    settings = settings or load_config(base / "oracle/judge.yaml")
    oracle: tuple[str | Path, ...] = ("--oracle", base / "oracle", "--oracle-python", oracle_python)
    oracle += ("--call-timeout", str(settings.call_timeout))
    builds = ("--parent-python", parent["python"], "--patch-python", patch["python"])
    oracle_report = tmp / "oracle.json"
    ran = run(run_oracle.main, oracle_report, *oracle, *builds)
    file = tmp / "quarantine.yaml"
    if quarantine_text is None:
        from_oracle_ref(repo, settings, "quarantine.yaml", file)
    else:
        file.write_text(quarantine_text, "utf-8")
    ledger = from_oracle_ref(repo, settings, "variance-ledger.json", tmp / "ledger.json")
    flake: tuple[str | Path, ...] = ("--oracle-report", oracle_report, *oracle)
    flake += ("--patch-python", patch["python"], "--quarantine", file, "--ledger", ledger)
    flake += ("--max-retry", str(settings.flake_max_retry))
    return ran, run(flake_budget.main, tmp / "flake-budget.json", *flake)


def assert_deferred(oracle: Report) -> None:
    """The flake failed the patch's oracle run: the oracle step left it to flake-budget."""
    code, report = oracle
    assert code == 1, report["summary"]
    assert report["status"] == "deferred", report["summary"]
    assert report["evidence"]["deferred_to"] == "flake-budget"
    assert [failure["id"] for failure in report["evidence"]["failures"]] == [FLAKY_ID]


def test_expired_quarantine_row_blocks(tmp_path: Path, tree: Path) -> None:
    yesterday = dt.date.today() - dt.timedelta(days=1)
    code, report = quarantine(
        tmp_path, tree, row("tests/test_cli.py::test_help_exits_0", yesterday)
    )
    assert code == 1, report["summary"]
    assert report["status"] == "block"
    assert "expired" in report["summary"]


def test_quarantine_row_naming_no_test_blocks(tmp_path: Path, tree: Path) -> None:
    tomorrow = dt.date.today() + dt.timedelta(days=1)
    code, report = quarantine(tmp_path, tree, row("tests/test_cli.py::test_renamed_away", tomorrow))
    assert code == 1, report["summary"]
    assert report["status"] == "block"
    assert report["evidence"]["unknown"] == ["tests/test_cli.py::test_renamed_away"]


def test_pre_existing_flaky_oracle_passes_within_budget(
    repo: Path, envs: Built, oracle_python: Path, flaky_dir: Path
) -> None:
    oracle, (code, budget) = oracle_then_budget(repo, envs, oracle_python, flaky_dir)
    assert_deferred(oracle)
    assert "flake-budget decides" in oracle[1]["summary"]
    assert code == 0, budget["summary"]
    assert budget["status"] == "pass"
    assert budget["evidence"]["flaky"] == [{"id": FLAKY_ID, "step": "oracle", "passed_on_retry": 1}]


def test_zero_retry_budget_blocks_the_same_flake(
    repo: Path, envs: Built, oracle_python: Path, flaky_dir: Path
) -> None:
    settings = zero_retries(envs("main", "parent")["tree"], flaky_dir)
    oracle, (code, budget) = oracle_then_budget(repo, envs, oracle_python, flaky_dir, settings)
    assert_deferred(oracle)
    assert code == 1, budget["summary"]
    assert budget["status"] == "block"
    assert budget["evidence"]["remaining"] == [
        {"id": FLAKY_ID, "step": "oracle", "passed_on_retry": None}
    ]


def test_live_quarantine_row_excludes_a_failing_oracle(
    repo: Path, envs: Built, oracle_python: Path, flaky_dir: Path
) -> None:
    base = envs("main", "parent")["tree"]
    settings = zero_retries(base, flaky_dir)
    live = row(FLAKY_ID, dt.date.today())
    # The judge checks the row itself first: live, and naming a test of the base's oracle.
    checked, report = quarantine(flaky_dir, base, live)
    assert checked == 0, report["summary"]
    assert report["evidence"]["active"] == [FLAKY_ID]
    oracle, (code, budget) = oracle_then_budget(
        repo, envs, oracle_python, flaky_dir, settings, live
    )
    assert_deferred(oracle)
    assert code == 0, budget["summary"]
    assert budget["status"] == "pass"
    assert budget["evidence"]["excluded"] == [FLAKY_ID]


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


@pytest.fixture
def flaky_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bake of its own: the variance session moves its oracle ref."""
    repo = with_flaky_oracle(bake(tmp_path / "bake"))
    monkeypatch.setenv("FLAKY_DIR", str(tmp_path))
    return repo


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
    runs = json.loads((flaky_repo / "reports/variance-runs.json").read_text())
    assert report["schema_version"] == runs["schema_version"] == 1
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
