"""Branch patches judged for real: a baked repo, a branch per patch.

Each patch is committed on its own branch. The tests marked e2e judge it from the checkout of
the base branch (`nox -s judge -- --head`), the way the README tells users to run the judge on
an untrusted branch; the others run the steps that decide it, each through its script's
`main(argv)` with the arguments `judge.py` passes, on worktrees (and builds) of the base and the
branch, and read each step's report the way the judge records it (`Judge.finish`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from _gate.core.config import load_config
from _gate.core.context import Judgment
from _gate.core.steps import JUDGE_STEPS
from _gate.runs.git import changes
from _gate.steps import tests as tests_step

from tests.helpers import Built, Step, decided, inventory_step, static_steps
from tests.helpers import verdict_of as worst
from tools.bakery import Verdict, branch, edit, git, judge, judge_script
from tools.demo import clean_refactor

MARKER = "PATCHED-CODE-RAN"


def judged(repo: Path, name: str, change: Callable[[Path], object]) -> Verdict:
    return judge(repo, "--head", branch(repo, name, change))


# --- steps as the judge runs and records them ------------------------------------------------


def made(name: str, status: str, **evidence: object) -> Step:
    return {"name": name, "status": status, "summary": "", "evidence": evidence, "seconds": 0.0}


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (["pass", "needs-review", "block", "advisory"], (2, "needs-review")),
        (["pass", "needs-review:.github/workflows/ci.yml", "block"], (1, "block")),
        (["needs-review:conftest.py", "block", "needs-review:noxfile.py"], (1, "block")),
        (
            ["needs-review:.github/x.yml", "block", "needs-review:oracle/cases.yaml"],
            (2, "needs-review"),
        ),
        (["needs-review:fixtures.lock", "block"], (2, "needs-review")),
        (["needs-review", "error"], (2, "error")),
        (["error", "pass", "needs-review"], (2, "error")),
        (["pass", "block", "advisory"], (1, "block")),
        (["pass", "advisory"], (0, "merge")),
        ([], (2, "error")),
    ],
)
def test_exit_2_needs_review_only_when_a_review_is_all_it_waits_for(
    statuses: list[str], expected: tuple[int, str]
) -> None:
    """A block beside a protected path is block, unless the path is evidence a review lets the
    judge read from the patch (`status:path`: the write-set step, needs-review, lists the path;
    without a path its list was too long to keep)."""
    steps = []
    for i, status in enumerate(statuses):
        word, _, path = status.partition(":")
        evidence = {"protected": [{"path": path, "rule": "r"}]} if path else {}
        steps.append(made("write-set" if word == "needs-review" else f"step-{i}", word, **evidence))
    assert worst(steps) == expected


def test_a_deferred_step_nothing_decides_is_an_error_beside_a_review() -> None:
    steps = [made("write-set", "needs-review"), made("oracle", "deferred", deferred_to="later")]
    assert worst(steps) == (2, "error")


# --- the whole judge -------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_fresh_repo_merges_a_clean_refactor(shop: Path) -> None:
    """The bake's first judgment (its cassette recorded on the way): a refactor that also moves
    a test file merges, every step reported in the order of the decision table."""

    def refactor(repo: Path) -> None:
        clean_refactor(repo)
        git(repo, "mv", "tests/test_orders.py", "tests/test_order_store.py")

    verdict = judged(shop, "refactor", refactor)
    assert verdict.returncode == 0, verdict.output
    assert verdict.report["verdict"] == "merge"
    names = [s["name"] for s in verdict.report["steps"]]
    assert names == list(JUDGE_STEPS)  # every step, in the order of the decision table
    assert "recorded" in verdict.step("record")["summary"]
    assert verdict.step("assert-inventory")["status"] == "pass"
    summary = (shop / "reports" / "judge-summary.md").read_text()
    assert summary.startswith("## Oracle judge: **merge**")
    seconds = {s["name"]: s["seconds"] for s in verdict.report["steps"]}
    assert all(isinstance(v, float) and v >= 0 for v in seconds.values()), seconds
    assert seconds["build"] > 0, seconds
    assert seconds["oracle"] > 0, seconds
    assert "| Step | Status | Seconds | Evidence |" in summary
    # A test file moved: the patch's own tests run on their own (advisory).
    tests = verdict.step("tests")
    assert tests["summary"].startswith("patch tests: ")
    assert "crossrun" not in tests["summary"]
    assert verdict.report["steps_inline"] is True  # the base's scripts are the checkout's
    # Every report of the judgment says which version of its fields it holds.
    reports = judged_reports(shop / "reports", verdict)
    assert len(reports) == len(names) - 1  # all but the build, which the judge runs itself
    for path in [shop / "reports/judge-report.json", *reports]:
        assert json.loads(path.read_text("utf-8"))["schema_version"] == 2, path.name


@pytest.mark.parametrize(
    ("change", "unchanged"),
    [
        ("src/shop/__init__.py", True),
        ("tests/test_orders.py", False),
        ("tests/conftest.py", False),
        ("conftest.py", False),
        ("pyproject.toml", False),
    ],
)
def test_the_advisory_tests_are_the_crossruns_only_while_tests_and_config_are_the_bases(
    shop: Path, change: str, unchanged: bool
) -> None:
    def touch(repo: Path) -> None:
        with (repo / change).open("a", encoding="utf-8") as out:
            out.write("\n# touched\n")

    head = branch(shop, f"touch/{change}", touch)
    base, patch = git(shop, "rev-parse", "main").strip(), git(shop, "rev-parse", head).strip()
    config = load_config(shop / "oracle/judge.yaml")
    j = Judgment(shop, shop, base, patch, shop, shop, config, False, changes(shop, base, patch))
    assert tests_step.reuses(j) is unchanged


@pytest.mark.parametrize(
    ("base", "inline", "wording"),
    [("HEAD~1", False, "for the judge"), ("HEAD", True, "before judging")],
)
def test_the_steps_that_run_are_the_bases_inline_or_not(
    shop: Path, tmp_path: Path, base: str, inline: bool, wording: str
) -> None:
    """The checkout words a precondition anew; judged against the commit before, the base's
    own step script runs (a process), against the checkout itself the same code runs inline."""
    repo = tmp_path / "clone"
    git(shop, "clone", "-q", str(shop), str(repo))
    edit(
        repo / "scripts/_gate/steps/preconditions.py",
        "unset it for the judge",
        "unset it before judging",
    )
    git(repo, "commit", "-q", "-am", "the checkout's judge words it anew")
    verdict = judge_script(repo, "--base", base, "--head", "HEAD", env={"MODEL_ENDPOINT": "x"})
    assert verdict.returncode == 2
    assert verdict.report["steps_inline"] is inline
    assert (
        f"model endpoint variable MODEL_ENDPOINT is set; unset it {wording}"
        in verdict.step("preconditions")["summary"]
    )


@pytest.mark.e2e
def test_a_step_process_runs_the_bases_scripts_never_the_patchs(shop: Path, tmp_path: Path) -> None:
    """Where the base's scripts are not the judge's own, each step is the base's script started
    as a process (judge/runner.run_step, the one unconfined start of a step): none of the
    patch's files is on its path, so a patch that plants code in the gate's scripts, or modules
    that would shadow them, runs none of it there; its write to the scripts is for review."""
    repo = tmp_path / "clone"
    git(shop, "clone", "-q", str(shop), str(repo))
    base = git(repo, "rev-parse", "HEAD").strip()
    marker = tmp_path / "imported"
    plant = f"\nopen({str(marker)!r}, 'a').write(__name__ + '\\n')\n"

    def forge(tree: Path) -> None:
        for rel in ("scripts/_gate/core/protocol.py", "scripts/oracle.py"):
            with (tree / rel).open("a", encoding="utf-8") as out:
                out.write(plant)
        for rel in ("sitecustomize.py", "_gate/__init__.py", "_gate/core/__init__.py"):
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(plant, "utf-8")

    head = branch(repo, "forge-the-scripts", forge)
    git(repo, "checkout", "-q", "main")
    edit(repo / "scripts/_gate/steps/preconditions.py", "unset it for the judge", "unset it, judge")
    git(repo, "commit", "-q", "-am", "the checkout's judge is not the base's")
    verdict = judge_script(repo, "--base", base, "--head", head)
    assert verdict.report["steps_inline"] is False
    assert verdict.statuses["write-set"] == "needs-review", verdict.output
    assert verdict.statuses["oracle"] == "pass", verdict.output
    assert verdict.statuses["crossrun"] == "pass", verdict.output
    assert not marker.exists(), marker.read_text("utf-8")


def test_editing_cases_needs_review(shop: Path, tmp_path: Path) -> None:
    """A protected path is no error: the write-set names it and its rule for a code owner, and
    how to judge again once they approved it; the exit is still 2."""

    def drop_case(repo: Path) -> None:
        edit(
            repo / "oracle/cases.yaml",
            "  - id: empty-cart-rejects\n",
            "  - id: empty-cart-renamed\n",
        )

    steps = static_steps(shop, branch(shop, "edit-cases", drop_case), tmp_path)
    assert decided(list(steps.values())) == "needs-review"
    write_set = steps["write-set"]
    assert (write_set["exit_code"], write_set["status"]) == (2, "needs-review")
    assert "oracle/cases.yaml (rule /oracle/)" in write_set["summary"]
    assert "a code owner must review" in write_set["summary"]
    assert "judge again with ORACLE_REVIEW=1" in write_set["summary"]


@pytest.mark.e2e
def test_changed_output_blocks_whole_and_in_two_shards(shop: Path, tmp_path: Path) -> None:
    def copy_change(repo: Path) -> None:
        edit(repo / "src/shop/orders.py", '"cart has no items"', '"cart is empty"')

    verdict = judged(shop, "copy-change", copy_change)
    assert verdict.returncode == 1, verdict.output
    assert verdict.statuses["replay"] == "block"
    mismatch = verdict.step("replay")["evidence"]["mismatches"][0]
    assert mismatch["id"] == "empty-cart-rejects"
    assert mismatch["patch"]["error"]["message"] == "cart is empty"
    summary = (shop / "reports/judge-summary.md").read_text()
    replay_row = next(line for line in summary.splitlines() if line.startswith("| Output changed"))
    assert "**block**: 2 compared fields changed" in replay_row
    assert '+    "message": "cart is empty"' in summary
    # The same patch judged by two runners and merged (issue 10): same verdict, same findings.
    folders = [tmp_path / f"shard-{i}" for i in (1, 2)]
    for index, folder in enumerate(folders, 1):
        shard = ["--head", "copy-change", "--shard", f"{index}/2", "--reports", str(folder)]
        one = subprocess.run(["nox", "-s", "judge", "--", *shard], cwd=shop, capture_output=True)
        assert one.returncode in (0, 1), one.stdout[-2000:]
    merged = tmp_path / "merged"
    cmd = ["nox", "-s", "merge", "--", *map(str, folders), "--out", str(merged)]
    ran = subprocess.run(cmd, cwd=shop, capture_output=True, text=True)
    report = json.loads((merged / "judge-report.json").read_text("utf-8"))
    assert (ran.returncode, report["verdict"]) == (1, "block"), ran.stdout
    assert [s["name"] for s in report["steps"]] == [s["name"] for s in verdict.report["steps"]]
    for name in ("replay", "oracle", "crossrun"):
        assert findings(merged, name) == findings(shop / "reports", name), name
    assert "empty-cart-rejects" in {case for case, _ in findings(merged, "replay")}
    assert {s["name"]: s["status"] for s in report["steps"]} == verdict.statuses
    assert list((shop / ".oracle/cassettes").glob("*/cassettes-shard-2-of-2.json"))


def findings(folder: Path, step: str) -> list[tuple[str, str]]:
    """What a step found: the (id, field or outcome) of each mismatch or lost result."""
    name = "replay-report.json" if step == "replay" else f"{step}.json"
    evidence = json.loads((folder / name).read_text("utf-8"))["evidence"]
    rows = evidence.get("mismatches", []) + evidence.get("failures", [])
    return sorted((row["id"], row.get("field") or row.get("outcome")) for row in rows)


def test_deleted_test_file_blocks(shop: Path, envs: Built, tmp_path: Path) -> None:
    head = branch(shop, "delete-tests", lambda repo: git(repo, "rm", "-q", "tests/test_orders.py"))
    inventory = inventory_step(shop, envs, head, tmp_path)
    steps = [*static_steps(shop, head, tmp_path / "static").values(), inventory]
    assert decided(steps) == "block", [step["summary"] for step in steps]
    assert (inventory["exit_code"], inventory["status"]) == (1, "block")
    assert inventory["evidence"]["deleted_files"] == ["tests/test_orders.py"]


def test_fixture_edit_without_lock_blocks(shop: Path, tmp_path: Path) -> None:
    def touch_fixture(repo: Path) -> None:
        with (repo / "fixtures/carts.jsonl").open("a") as handle:
            handle.write(
                '{"id": "cart-999", "subtotal_cents": 1, "coupons": [], "expected_cents": 1}\n'
            )

    steps = static_steps(shop, branch(shop, "fixture-only", touch_fixture), tmp_path)
    assert decided(list(steps.values())) == "block", [step["summary"] for step in steps.values()]
    lock = steps["fixtures-lock"]
    assert (lock["exit_code"], lock["status"]) == (1, "block")
    assert lock["evidence"]["changed"] == ["fixtures/carts.jsonl"]


def test_fixture_and_lock_together_need_review(shop: Path, tmp_path: Path) -> None:
    def relock(repo: Path) -> None:
        edit(repo / "fixtures/carts.md", "cart-017", "cart-017 (regenerated)")
        # Not --report /dev/null: a report is written whole (a temporary file, renamed over
        # it), which as root would replace the device.
        report = tmp_path / "lock-report.json"
        lock = [sys.executable, "scripts/fixtures_lock.py", "--write", "--report", str(report)]
        subprocess.run(lock, cwd=repo, check=True, capture_output=True)

    steps = static_steps(shop, branch(shop, "fixture-and-lock", relock), tmp_path)
    assert decided(list(steps.values())) == "needs-review"  # the lock's block waits behind it
    protected = [row["path"] for row in steps["write-set"]["evidence"]["protected"]]
    assert protected == ["fixtures.lock"]
    assert steps["fixtures-lock"]["status"] == "block"


@pytest.mark.e2e
def test_a_patched_judge_and_noxfile_are_not_what_runs(shop: Path) -> None:
    fake_judge = (
        "import json, pathlib\n"
        f"pathlib.Path('{MARKER}').write_text('judge')\n"
        "pathlib.Path('reports').mkdir(exist_ok=True)\n"
        "pathlib.Path('reports/judge-report.json').write_text(json.dumps("
        "{'verdict': 'merge', 'exit_code': 0, 'steps': []}))\n"
    )
    fake_noxfile = (
        "import nox, pathlib\n"
        "@nox.session(python=False)\n"
        f"def judge(session):\n    pathlib.Path('{MARKER}').write_text('noxfile')\n"
    )

    def own_gate(repo: Path) -> None:
        (repo / "scripts/judge.py").write_text(fake_judge)
        (repo / "noxfile.py").write_text(fake_noxfile)

    verdict = judged(shop, "own-gate", own_gate)
    assert verdict.returncode == 2
    assert verdict.report["verdict"] == "needs-review"
    assert not (shop / MARKER).exists(), (shop / MARKER).read_text()
    assert verdict.report["scripts_from"] == verdict.report["base"]
    protected = [r["path"] for r in verdict.step("write-set")["evidence"]["protected"]]
    assert sorted(protected) == ["noxfile.py", "scripts/judge.py"]
    # What a code owner looks at, and what runs once they approved it: in the report, the
    # summary, the judge's last line and nox's.
    review = verdict.report["review"]
    rules = {row["path"]: row["rule"] for row in review["protected"]}
    assert rules == {"noxfile.py": "/noxfile.py", "scripts/judge.py": "/scripts/"}
    base, head = verdict.report["base"], verdict.report["head"]
    assert review["rerun"] == f"ORACLE_REVIEW=1 nox -s judge -- --base {base} --head {head}"
    summary = (shop / "reports/judge-summary.md").read_text("utf-8")
    assert "### Needs review" in summary
    assert "- `scripts/judge.py` (rule `/scripts/`)" in summary
    lines = verdict.output.splitlines()
    said = next(line for line in lines if line.startswith("judge: verdict "))
    assert said.startswith("judge: verdict needs-review (exit 2): a code owner reviews protected")
    assert review["rerun"] in said
    assert "nox > judge: needs-review (exit 2)" in lines


FORCE_PASS = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


@pytest.mark.e2e
def test_root_conftest_cannot_rescue_a_broken_property(shop: Path) -> None:
    def cheat(repo: Path) -> None:
        (repo / "conftest.py").write_text(FORCE_PASS)
        edit(repo / "src/shop/discounts.py", "    return amount\n", "    return amount + 1\n")

    verdict = judged(shop, "force-pass", cheat)
    assert verdict.returncode == 1
    # Parent-passing oracles that fail are left to flake control, which cannot excuse them.
    assert verdict.statuses["oracle"] == "deferred"
    assert verdict.statuses["flake-budget"] == "block"
    failing = {row["id"] for row in verdict.step("oracle")["evidence"]["failures"]}
    assert any("round_trip" in node or "invert" in node for node in failing), failing
    assert verdict.statuses["write-set"] == "needs-review"
    # A review of conftest.py would not lift the block: block, and the review is named too.
    assert verdict.report["verdict"] == "block"
    assert [row["path"] for row in verdict.report["review"]["protected"]] == ["conftest.py"]
    said = next(line for line in verdict.output.splitlines() if "judge: verdict " in line)
    assert "it also touches protected path conftest.py (rule /conftest.py)" in said, said
    # Failures name the files they happened in by tree, never by the judge's temporary folders.
    messages = [row["message"] for row in verdict.step("crossrun")["evidence"]["failures"]]
    assert any("\nbase:tests/test_discounts.py:" in message for message in messages), messages
    tail = json.loads((shop / "reports/oracle.json").read_text("utf-8"))["evidence"]["output_tail"]
    assert "base:oracle/test_properties.py" in tail
    reports = shop / "reports"
    for path in [reports / "judge-report.json", *judged_reports(reports, verdict)]:
        text = path.read_text("utf-8")
        for folder in (tempfile.gettempdir(), str(shop), "oracle-judge-", "crossrun-"):
            assert folder not in text, (path.name, text[text.find(folder) - 200 :][:400])


def judged_reports(reports: Path, verdict: Verdict) -> list[Path]:
    """The report of every step script of the judgment, as its judge report names them."""
    names = [step["evidence"].get("report") for step in verdict.report["steps"]]
    return [reports / name for name in names if name]
