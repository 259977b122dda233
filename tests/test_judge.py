"""Branch patches judged for real: a baked repo, a branch per patch, `nox -s judge -- --head`.

Each patch is committed on its own branch and judged from the checkout of the base branch,
the way the README tells users to run the judge on an untrusted branch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tools.bakery import Verdict, branch, edit, git, judge
from tools.demo import clean_refactor

pytestmark = pytest.mark.e2e  # every test here runs the whole judge

MARKER = "PATCHED-CODE-RAN"


def judged(repo: Path, name: str, change: Callable[[Path], object]) -> Verdict:
    return judge(repo, "--head", branch(repo, name, change))


def test_fresh_repo_merges(shop: Path) -> None:
    verdict = judge(shop)
    assert verdict.returncode == 0, verdict.output
    assert verdict.report["verdict"] == "merge"
    names = [s["name"] for s in verdict.report["steps"]]
    assert names == [
        "preconditions",
        "write-set",
        "fixtures-lock",
        "build",
        "record",
        "replay",
        "assert-inventory",
        "oracle",
        "crossrun",
        "quarantine",
        "flake-budget",
        "tests",
    ]
    summary = (shop / "reports" / "judge-summary.md").read_text()
    assert summary.startswith("## Oracle judge: **merge**")
    seconds = {s["name"]: s["seconds"] for s in verdict.report["steps"]}
    assert all(isinstance(v, float) and v >= 0 for v in seconds.values()), seconds
    assert seconds["build"] > 0 and seconds["oracle"] > 0, seconds
    assert "| Step | Status | Seconds | Evidence |" in summary


def test_clean_refactor_merges(shop: Path) -> None:
    def refactor(repo: Path) -> None:
        clean_refactor(repo)
        git(repo, "mv", "tests/test_orders.py", "tests/test_order_store.py")

    verdict = judged(shop, "refactor", refactor)
    assert verdict.returncode == 0, verdict.output
    assert verdict.report["verdict"] == "merge"
    assert verdict.step("assert-inventory")["status"] == "pass"


def test_editing_cases_fails_closed(shop: Path) -> None:
    def drop_case(repo: Path) -> None:
        edit(
            repo / "oracle/cases.yaml",
            "  - id: empty-cart-rejects\n",
            "  - id: empty-cart-renamed\n",
        )

    verdict = judged(shop, "edit-cases", drop_case)
    assert verdict.returncode == 2
    assert verdict.step("write-set")["status"] == "fail-closed"
    assert "oracle/cases.yaml" in verdict.step("write-set")["summary"]


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
        ran = subprocess.run(["nox", "-s", "judge", "--", *shard], cwd=shop, capture_output=True)
        assert ran.returncode in (0, 1), ran.stdout[-2000:]
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


def test_deleted_test_file_blocks(shop: Path) -> None:
    verdict = judged(
        shop, "delete-tests", lambda repo: git(repo, "rm", "-q", "tests/test_orders.py")
    )
    assert verdict.returncode == 1, verdict.output
    assert verdict.statuses["assert-inventory"] == "block"
    assert verdict.step("assert-inventory")["evidence"]["deleted_files"] == ["tests/test_orders.py"]


def test_fixture_edit_without_lock_blocks(shop: Path) -> None:
    def touch_fixture(repo: Path) -> None:
        with (repo / "fixtures/carts.jsonl").open("a") as handle:
            handle.write(
                '{"id": "cart-999", "subtotal_cents": 1, "coupons": [], "expected_cents": 1}\n'
            )

    verdict = judged(shop, "fixture-only", touch_fixture)
    assert verdict.returncode == 1, verdict.output
    assert verdict.statuses["fixtures-lock"] == "block"
    assert verdict.step("fixtures-lock")["evidence"]["changed"] == ["fixtures/carts.jsonl"]


def test_fixture_and_lock_together_fail_closed(shop: Path) -> None:
    def relock(repo: Path) -> None:
        edit(repo / "fixtures/carts.md", "cart-017", "cart-017 (regenerated)")
        lock = [sys.executable, "scripts/lock_fixtures.py", "--write", "--report", "/dev/null"]
        subprocess.run(lock, cwd=repo, check=True, capture_output=True)

    verdict = judged(shop, "fixture-and-lock", relock)
    assert verdict.returncode == 2
    protected = [row["path"] for row in verdict.step("write-set")["evidence"]["protected"]]
    assert protected == ["fixtures.lock"]
    assert verdict.statuses["fixtures-lock"] == "block"


def test_patched_judge_is_not_what_runs(shop: Path) -> None:
    fake = (
        "import json, pathlib\n"
        f"pathlib.Path('{MARKER}').write_text('x')\n"
        "pathlib.Path('reports').mkdir(exist_ok=True)\n"
        "pathlib.Path('reports/judge-report.json').write_text(json.dumps("
        "{'verdict': 'merge', 'exit_code': 0, 'steps': []}))\n"
    )
    verdict = judged(shop, "own-judge", lambda repo: (repo / "scripts/judge.py").write_text(fake))
    assert verdict.returncode == 2
    assert verdict.report["verdict"] == "fail-closed"
    assert not (shop / MARKER).exists()
    assert verdict.report["scripts_from"] == verdict.report["base"]


def test_patched_noxfile_is_not_what_runs(shop: Path) -> None:
    fake = (
        "import nox, pathlib\n"
        "@nox.session(python=False)\n"
        f"def judge(session):\n    pathlib.Path('{MARKER}').write_text('x')\n"
    )
    verdict = judged(shop, "own-noxfile", lambda repo: (repo / "noxfile.py").write_text(fake))
    assert verdict.returncode == 2
    assert [r["path"] for r in verdict.step("write-set")["evidence"]["protected"]] == ["noxfile.py"]
    assert not (shop / MARKER).exists()


FORCE_PASS = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


def test_root_conftest_cannot_rescue_a_broken_property(shop: Path) -> None:
    def cheat(repo: Path) -> None:
        (repo / "conftest.py").write_text(FORCE_PASS)
        edit(repo / "src/shop/discounts.py", "    return amount\n", "    return amount + 1\n")

    verdict = judged(shop, "force-pass", cheat)
    assert verdict.returncode != 0
    # Parent-passing oracles that fail are left to flake control, which cannot excuse them.
    assert verdict.statuses["oracle"] == "deferred"
    assert verdict.statuses["flake-budget"] == "block"
    failing = {row["id"] for row in verdict.step("oracle")["evidence"]["failures"]}
    assert any("round_trip" in node or "invert" in node for node in failing), failing
    assert verdict.statuses["write-set"] == "fail-closed"
