"""Flake control, last: quarantine and ledger on the oracle ref, retries only for old tests.

One bake whose oracle holds a test that flakes once. check_quarantine.py, oracle.py and
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

import _gate.core.ledger
import _gate.verdict.verdict
import check_quarantine
import flake_budget
import oracle
import pytest
import variance_ledger
import yaml
from _gate.core.config import Config, load_config
from _gate.core.machine import VARIABLES
from _gate.judge.lanes import Judge
from _gate.judge.runner import Ran
from _gate.runs.envs import tools_env
from _gate.runs.git import resolve_oracle_ref

from tests.helpers import Built, builder, compiled, finish
from tools.bakery import bake, edit, git

# The oracle tests below keep what they remember in a folder the test names in a file beside
# them (`state`): the oracle's pytest sees none of the judge's variables
# (_gate/plugin/patch_env.py).
STATE = 'Path(Path(__file__).with_name("state").read_text("utf-8"))'


def remember(oracle: Path, folder: Path) -> None:
    """Name `folder` to the oracle tests of `oracle` as their state folder."""
    (oracle / "state").write_text(str(folder), "utf-8")


# Fails the first time it judges the patch build, passes on every other run: a deterministic
# stand-in for a test that fails 1 in N on the wall clock. The build it judges is the
# environment of the subject worker (parent or patch), named by the gate's own option.
FLAKY = f"""from __future__ import annotations

from pathlib import Path

import pytest


def test_flaky_on_first_patch_run(request: pytest.FixtureRequest) -> None:
    side = Path(request.config.option.subject_python).parent.parent.name
    seen = {STATE} / (side + ".seen")
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
def flaky_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One bake, its oracle holding the flaky test on main: base and head of every judgment."""
    return with_flaky_oracle(bake(tmp_path_factory.mktemp("bake")))


@pytest.fixture(scope="module")
def envs(flaky_repo: Path, tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Built:
    return builder(flaky_repo, tmp_path_factory.mktemp("envs"), wheelhouse)


@pytest.fixture(scope="module")
def tree(flaky_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A worktree of main, parent and patch tree at once (the judge judges main against
    itself): all the quarantine check reads."""
    path = tmp_path_factory.mktemp("worktree") / "main"
    git(flaky_repo, "worktree", "add", "-q", "--detach", str(path), "main")
    return path


@pytest.fixture(scope="module")
def oracle_python(envs: Built, tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """The oracle's own environment: the judge's tools, neither build."""
    requirements = envs("main", "parent")["tree"] / "scripts/requirements-judge.txt"
    env = tmp_path_factory.mktemp("oracle-env") / "oracle"
    return compiled(tools_env(env, wheelhouse, requirements)[0])


@pytest.fixture
def flaky_dir(tmp_path: Path, envs: Built) -> Path:
    """Where the flaky test remembers its runs: fresh per test, so it flakes once in each."""
    remember(envs("main", "parent")["tree"] / "oracle", tmp_path)
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
    oracle_args: tuple[str | Path, ...] = ("--oracle", base / "oracle")
    oracle_args += ("--oracle-python", oracle_python, "--call-timeout", str(settings.call_timeout))
    builds = ("--parent-python", parent["python"], "--patch-python", patch["python"])
    oracle_report = tmp / "oracle.json"
    # No perturbed run: the flake keys on the first run of the patch build, which must be the
    # oracle's own (a perturbed run's flake is retried there: test_perturb.py).
    ran = run(oracle.main, oracle_report, *oracle_args, *builds, "--perturb", "")
    file = tmp / "quarantine.yaml"
    if quarantine_text is None:
        from_oracle_ref(repo, settings, "quarantine.yaml", file)
    else:
        file.write_text(quarantine_text, "utf-8")
    ledger = from_oracle_ref(repo, settings, "variance-ledger.json", tmp / "ledger.json")
    flake: tuple[str | Path, ...] = ("--oracle-report", oracle_report, *oracle_args)
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
    flaky_repo: Path, envs: Built, oracle_python: Path, flaky_dir: Path
) -> None:
    oracle, (code, budget) = oracle_then_budget(flaky_repo, envs, oracle_python, flaky_dir)
    assert_deferred(oracle)
    assert "flake-budget decides" in oracle[1]["summary"]
    assert code == 0, budget["summary"]
    assert budget["status"] == "pass"
    assert budget["evidence"]["flaky"] == [{"id": FLAKY_ID, "step": "oracle", "passed_on_retry": 1}]


def test_an_excused_failure_reads_the_same_on_the_console_in_the_report_and_summary(
    flaky_repo: Path,
    envs: Built,
    oracle_python: Path,
    flaky_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (oracle, _), (budget, _) = oracle_then_budget(flaky_repo, envs, oracle_python, flaky_dir)
    # The judge's record of the two steps, from their reports, then its verdict and reports.
    judgment = Judge(repo=flaky_dir, reports=flaky_dir)
    steps = [finish(judgment, "oracle", Ran(oracle, b"", [], 0.0))]
    steps.append(finish(judgment, "flake-budget", Ran(budget, b"", [], 0.0)))
    matrix = (flaky_repo / "oracles/MATRIX.md").read_text("utf-8")
    capsys.readouterr()
    report = {"base": "a" * 40, "head": "b" * 40, "steps": steps}
    outcomes = [judgment.outcomes[step["name"]] for step in steps]
    code = _gate.verdict.verdict.write_reports(
        flaky_dir, report, outcomes, matrix, "judge", repo=flaky_repo
    )
    said = capsys.readouterr().out
    written = json.loads((flaky_dir / "judge-report.json").read_text("utf-8"))
    summary = (flaky_dir / "judge-summary.md").read_text("utf-8")
    assert code == 0
    assert written["verdict"] == "merge"
    row = {"id": FLAKY_ID, "step": "oracle", "by": "passing on retry 1"}
    assert written["excused"] == [row]
    assert said.startswith(
        "judge: verdict merge (exit 0), 1 failure excused by flake control "
        f"(oracle {FLAKY_ID}: passing on retry 1); see "
    )
    assert (
        f"Flake control excused 1 failure (step `flake-budget`):\n- oracle `{FLAKY_ID}`" in summary
    )
    # The decision table's rows: each with the step's evidence, or why this report has none.
    assert "| **deferred**: 1 of " in summary
    assert "| did not run: the judgment stopped before this step |" in summary
    assert (
        "Oracle strength: not measured (`nox -s strength -- --update-ref` on the base)" in summary
    )


def test_zero_retry_budget_blocks_the_same_flake(
    flaky_repo: Path, envs: Built, oracle_python: Path, flaky_dir: Path
) -> None:
    settings = zero_retries(envs("main", "parent")["tree"], flaky_dir)
    oracle, (code, budget) = oracle_then_budget(
        flaky_repo, envs, oracle_python, flaky_dir, settings
    )
    assert_deferred(oracle)
    assert code == 1, budget["summary"]
    assert budget["status"] == "block"
    assert budget["evidence"]["remaining"] == [
        {"id": FLAKY_ID, "step": "oracle", "passed_on_retry": None}
    ]


def test_live_quarantine_row_excludes_a_failing_oracle(
    flaky_repo: Path, envs: Built, oracle_python: Path, flaky_dir: Path
) -> None:
    base = envs("main", "parent")["tree"]
    settings = zero_retries(base, flaky_dir)
    live = row(FLAKY_ID, dt.date.today())
    # The judge checks the row itself first: live, and naming a test of the base's oracle.
    checked, report = quarantine(flaky_dir, base, live)
    assert checked == 0, report["summary"]
    assert report["evidence"]["active"] == [FLAKY_ID]
    oracle, (code, budget) = oracle_then_budget(
        flaky_repo, envs, oracle_python, flaky_dir, settings, live
    )
    assert_deferred(oracle)
    assert code == 0, budget["summary"]
    assert budget["status"] == "pass"
    by = "a live quarantine row"
    assert budget["evidence"]["excluded"] == [{"id": FLAKY_ID, "step": "oracle", "by": by}]


SECOND_RUN_FAILS = f"""from __future__ import annotations

from pathlib import Path


def test_fails_on_the_second_run() -> None:
    runs = {STATE} / "runs"
    runs.mkdir(exist_ok=True)
    count = len(list(runs.iterdir()))
    (runs / str(count)).touch()
    assert count != 1
"""


class Machines:
    """Clones of one bake, each the oracle of one test that fails on the second run overall,
    measured by `variance_ledger.py run` (its `main(argv)`) as a CI runner or a local host
    would run it: the runner is the identity's own variables, set for the run."""

    def __init__(self, repo: Path, python: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch):
        self.repo, self.python, self.tmp, self.monkeypatch = repo, python, tmp, monkeypatch
        self.config = tmp / "judge.yaml"
        shutil.copy(repo / "oracle/judge.yaml", self.config)
        self.runs = 0

    def settings(self, old: str, new: str) -> None:
        edit(self.config, old, new)

    def clone(self, name: str) -> Path:
        clone = self.tmp / name
        if not clone.exists():
            subprocess.run(["git", "clone", "-q", str(self.repo), str(clone)], check=True)
            for other in ("test_properties.py", "test_replay_corpus.py"):
                (clone / "oracle" / other).unlink()
            (clone / "oracle/test_second_run.py").write_text(SECOND_RUN_FAILS)
            remember(clone / "oracle", self.tmp)  # one folder: the second run overall
        return clone

    def run(self, clone: str, runner: str | None, runs: int) -> Path:
        """`runs` oracle runs in `clone`, on CI runner `runner` (None: the local host)."""
        for name in VARIABLES:
            self.monkeypatch.delenv(name, raising=False)
        if runner:
            self.monkeypatch.setenv("GITHUB_ACTIONS", "true")
            self.monkeypatch.setenv("RUNNER_NAME", runner)
        self.runs += 1
        out = self.tmp / f"run-{self.runs}.json"
        argv = ["run", "--runs", str(runs), "--python", str(self.python)]
        argv += ["--oracle", str(self.clone(clone) / "oracle"), "--out", str(out)]
        code, report = self.ledger_step(*argv)
        assert code == 0, report["summary"]
        return out

    def ledger_step(self, *argv: str) -> Report:
        """variance_ledger.py's `main(argv)`: its report is an option of the script, not of
        the mode."""
        report = self.tmp / "variance.json"
        code = variance_ledger.main(["--report", str(report), *argv])
        return code, json.loads(report.read_text("utf-8"))

    def merge(self, files: list[Path], *flags: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
        """`merge` in the bake: its exit code and report, and the variance report it wrote."""
        measured = self.tmp / "inventory.variance.json"
        argv = ["merge", *map(str, files), "--repo", str(self.repo), "--config", str(self.config)]
        argv += ["--variance-report", str(measured), *flags]
        code, report = self.ledger_step(*argv)
        return code, report, json.loads(measured.read_text("utf-8"))

    def ledger(self) -> dict[str, Any]:
        ledger: dict[str, Any] = json.loads(
            git(self.repo, "show", "oracle/main:variance-ledger.json")
        )
        return ledger


@pytest.fixture
def machines(envs: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machines:
    repo = bake(tmp_path / "bake")  # a bake of its own: merges move its oracle ref
    machines = Machines(repo, envs("main", "parent")["python"], tmp_path, monkeypatch)
    machines.settings("variance_runs: 5", "variance_runs: 2")
    return machines


SECOND_RUN = "oracle/test_second_run.py::test_fails_on_the_second_run"


def test_two_machines_freeze_and_a_stable_measurement_clears(machines: Machines) -> None:
    freeze = [machines.run("a", "runner-a", 1), machines.run("b", "runner-b", 1)]
    code, report, measured = machines.merge(freeze, "--update-ref")
    assert code == 0, report["summary"]
    assert measured["measurement"]["counts"] is True
    assert len(measured["measurement"]["machines"]) == 2
    assert measured["tests"][SECOND_RUN]["pass_count"] == 1
    row = machines.ledger()["frozen"][SECOND_RUN]
    assert row["reason"] == "boolean_unstable"
    assert row["expires"] == (dt.date.today() + dt.timedelta(days=14)).isoformat()
    assert "2 runs on 2 machines, 1 frozen" in git(
        machines.repo, "log", "-1", "--format=%s", "oracle/main"
    )
    # The counter has passed the failing run: both machines now see the test pass every time.
    clear = [machines.run("a", "runner-a", 1), machines.run("b", "runner-b", 1)]
    code, report, measured = machines.merge(clear, "--update-ref")
    assert code == 0, report["summary"]
    ledger = machines.ledger()
    assert ledger["frozen"] == {}
    assert [(e["id"], e["event"]) for e in ledger["history"]] == [
        (SECOND_RUN, "frozen"),
        (SECOND_RUN, "cleared"),
    ]
    assert ledger["history"][1]["why"].startswith("stable: passed 2 of 2 runs on 2 machine(s)")
    assert git(machines.repo, "show", "oracle/main:quarantine.yaml") == git(
        machines.repo, "show", "oracle/main~2:quarantine.yaml"
    )


def test_one_machine_does_not_freeze_however_many_runs_or_clones(machines: Machines) -> None:
    before = machines.ledger()
    # Two clones on one runner, and the same clone again: one machine.
    files = [machines.run("a", "runner-a", 2), machines.run("b", "runner-a", 1)]
    code, report, measured = machines.merge(files, "--update-ref")
    assert code == 2, report["summary"]
    assert "1 machine(s), variance_machines needs 2" in report["summary"]
    assert measured["tests"][SECOND_RUN]["stable"] is False
    assert measured["events"] == []
    assert machines.ledger() == before
    code, report, _ = machines.merge(files)
    assert code == 0, report["summary"]
    assert report["summary"].endswith("nothing frozen or cleared")


def test_a_ledger_of_local_runs_needs_a_flag_and_says_so(machines: Machines) -> None:
    machines.settings("variance_machines: 2", "variance_machines: 1")
    files = [machines.run("a", None, 2)]
    code, report, measured = machines.merge(files, "--update-ref")
    assert code == 2, report["summary"]
    assert "every run is local" in report["summary"]
    assert measured["measurement"]["local_only"] is True
    code, report, _ = machines.merge(files, "--update-ref", "--allow-local")
    assert code == 0, report["summary"]
    assert SECOND_RUN in machines.ledger()["frozen"]
    message = git(machines.repo, "log", "-1", "--format=%B", "oracle/main")
    assert "Built from local runs only (--allow-local)" in message


def test_an_expired_row_drops_with_its_reason(machines: Machines) -> None:
    machines.settings("variance_machines: 2", "variance_machines: 1")
    files = [machines.run("a", "runner-a", 2)]
    code, report, _ = machines.merge(files, "--update-ref")
    assert code == 0, report["summary"]
    expires = machines.ledger()["frozen"][SECOND_RUN]["expires"]
    later = dt.date.fromisoformat(expires) + dt.timedelta(days=1)
    code, report, measured = machines.merge(files, "--today", later.isoformat())
    assert code == 0, report["summary"]
    assert measured["events"][0]["event"] == "expired"
    assert (
        measured["events"][0]["why"] == f"expired on {expires} before a measurement found it stable"
    )


def test_local_variance_session_reports_and_leaves_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    repo = bake(tmp_path / "bake")
    (repo / "oracle/test_flaky.py").write_text(SECOND_RUN_FAILS)
    remember(repo / "oracle", tmp_path)
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "an oracle test that fails on its second run")
    before = git(repo, "rev-parse", "oracle/main")
    nox = ["nox", "-s", "variance"]
    proc = subprocess.run(nox, cwd=repo, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((repo / "reports/inventory.variance.json").read_text())
    test_id = "oracle/test_flaky.py::test_fails_on_the_second_run"
    assert report["measurement"]["runs"] == 5
    assert report["measurement"]["counts"] is False
    assert report["tests"][test_id]["pass_count"] == 4
    corpus = "oracle/test_replay_corpus.py::test_corpus_is_present_and_ids_are_unique"
    assert report["tests"][corpus]["stable"] is True
    assert "variance_machines needs 2" in proc.stderr + proc.stdout
    assert git(repo, "rev-parse", "oracle/main") == before


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        '{"frozen": [], "history": []}',
        '{"frozen": {}, "history": {}}',
        '{"frozen": {}, "history": [], "notes": "x"}',
        '{"frozen": {"oracle/test_a.py::t": {"reason": "boolean_unstable"}}, "history": []}',
        '{"oracle/test_a.py::t": {"expires": "next week"}}',
    ],
    ids=[
        "not-json",
        "a-list",
        "rows-a-list",
        "history-a-mapping",
        "unknown-key",
        "no-expiry",
        "flat-row-bad-date",
    ],
)
def test_a_malformed_ledger_fails_the_flake_budget_closed_naming_it(
    tmp_path: Path, text: str
) -> None:
    ledger = tmp_path / "variance-ledger.json"
    ledger.write_text(text, "utf-8")
    (tmp_path / "quarantine.yaml").write_text("quarantine: []\n", "utf-8")
    argv: tuple[str | Path, ...] = ("--oracle-report", tmp_path / "oracle.json")
    argv += (
        "--oracle",
        tmp_path,
        "--oracle-python",
        sys.executable,
        "--patch-python",
        sys.executable,
    )
    argv += ("--quarantine", tmp_path / "quarantine.yaml", "--ledger", ledger)
    code, report = run(flake_budget.main, tmp_path / "flake-budget.json", *argv)
    assert code == 2, report["summary"]
    assert report["summary"].startswith(f"{ledger}: ")
    assert "\n" not in report["summary"]


OLD_ROW = "oracle/test_a.py::t"


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("{}", set()),
        ('{"frozen": {}, "history": []}', set()),
        (f'{{"{OLD_ROW}": {{"expires": "2000-01-01"}}}}', {OLD_ROW}),
    ],
    ids=["baked-before", "baked-now", "rows-of-an-earlier-version"],
)
def test_an_empty_or_earlier_ledger_reads_as_its_rows(
    tmp_path: Path, text: str, rows: set[str]
) -> None:
    ledger = tmp_path / "variance-ledger.json"
    ledger.write_text(text, "utf-8")
    read = _gate.core.ledger.load_ledger(ledger)
    assert _gate.core.ledger.frozen_ids(read, dt.date(1999, 12, 31)) == rows
    assert _gate.core.ledger.frozen_ids(read, dt.date(2000, 1, 2)) == set()


# Skipped, and failing, on one image: clone `a`, which only runner-a runs (Machines.run); the
# runner's own variables never reach an oracle test.
BY_IMAGE = """from __future__ import annotations

from pathlib import Path

import pytest

ON_A = Path(__file__).parents[1].name == "a"


@pytest.mark.skipif(ON_A, reason="not on this image")
def test_skipped_on_one_image() -> None:
    assert not ON_A


def test_fails_on_one_image() -> None:
    assert not ON_A
"""


def test_a_skip_on_one_image_is_the_image_but_a_failure_on_one_is_unstable(
    machines: Machines,
) -> None:
    for clone in ("a", "b"):
        (machines.clone(clone) / "oracle/test_by_image.py").write_text(BY_IMAGE)
    files = [machines.run("a", "runner-a", 2), machines.run("b", "runner-b", 2)]
    code, report, measured = machines.merge(files, "--update-ref")
    assert code == 0, report["summary"]
    tests = measured["tests"]
    assert tests["oracle/test_by_image.py::test_skipped_on_one_image"]["stable"] is True
    assert tests["oracle/test_by_image.py::test_fails_on_one_image"]["stable"] is False
    frozen = machines.ledger()["frozen"]
    assert "oracle/test_by_image.py::test_fails_on_one_image" in frozen
    assert "oracle/test_by_image.py::test_skipped_on_one_image" not in frozen


def test_a_run_file_merged_twice_counts_once(machines: Machines) -> None:
    machines.settings("variance_machines: 2", "variance_machines: 1")
    once = machines.run("a", "runner-a", 1)
    copy = machines.tmp / "copy.json"
    copy.write_bytes(once.read_bytes())
    code, report, measured = machines.merge([once, once, copy], "--update-ref")
    assert code == 2, report["summary"]
    assert measured["measurement"]["runs"] == 1
    assert "1 runs, variance_runs needs 2" in report["summary"]
