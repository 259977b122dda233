"""The exit of `nox -s judge` is the judge's own: 0 merge, 1 block, 2 fail closed.

Never read back from a report on disk: a report left by an earlier run must not decide, whether
the new run writes elsewhere (--reports), stops in argparse, or only prints --help. A wheelhouse
that cannot be filled fails closed with 2, not nox's 1. `make judge` (make exits 2 for every
failing recipe) names the verdict and the judge's code in its last line, for exit 2 the verdict
the judge wrote: needs-review or error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tools.bakery import branch, edit

pytestmark = pytest.mark.e2e  # every test here runs the judge's nox session


def copy_change(repo: Path) -> None:
    edit(repo / "src/shop/orders.py", '"cart has no items"', '"cart is empty"')


@pytest.fixture(scope="module")
def blocked(shop: Path) -> str:
    """A branch whose changed error message the parent cassettes block."""
    return branch(shop, "exit-codes-copy-change", copy_change)


def stale_report(repo: Path, verdict: str, code: int) -> Path:
    """A report as an earlier run leaves it in the default place."""
    path = repo / "reports" / "judge-report.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"verdict": verdict, "exit_code": code, "steps": []}))
    return path


def run(
    repo: Path, *cmd: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Both streams in one, in the order a terminal shows them."""
    return subprocess.run(
        cmd,
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(env if env is not None else os.environ),
        check=False,
    )


def lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def test_stale_merge_report_does_not_decide_when_reports_move(
    shop: Path, blocked: str, tmp_path: Path
) -> None:
    stale = stale_report(shop, "merge", 0)
    before = stale.read_bytes()
    elsewhere = tmp_path / "elsewhere"
    proc = run(shop, "nox", "-s", "judge", "--", "--head", blocked, "--reports", str(elsewhere))
    assert proc.returncode == 1, proc.stdout
    report = json.loads((elsewhere / "judge-report.json").read_text("utf-8"))
    assert (report["verdict"], report["exit_code"]) == ("block", 1)
    assert stale.read_bytes() == before
    assert lines(proc.stdout)[-1] == "nox > judge: block (exit 1)"


def test_unknown_option_fails_closed(shop: Path) -> None:
    stale_report(shop, "merge", 0)
    proc = run(shop, "nox", "-s", "judge", "--", "--haed", "x")
    assert proc.returncode == 2, proc.stdout
    assert "judge.py: error: unrecognized arguments: --haed x" in proc.stdout
    assert lines(proc.stdout)[-1] == "nox > judge: error (exit 2)"


def test_help_exits_0_and_claims_no_verdict(shop: Path) -> None:
    stale_report(shop, "block", 1)
    proc = run(shop, "nox", "-s", "judge", "--", "--help")
    assert proc.returncode == 0, proc.stdout
    assert "exit codes: 0 merge, 1 block, 2 fail closed" in proc.stdout
    assert "nox > judge: help printed, nothing judged (exit 0)" in lines(proc.stdout)
    assert "judge: merge" not in proc.stdout


@contextmanager
def refusing_index() -> Iterator[str]:
    """An index URL on a port that is bound but never listens: every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/simple"


def test_empty_wheelhouse_without_index_fails_closed(shop: Path, tmp_path: Path) -> None:
    empty = tmp_path / "wheelhouse"
    empty.mkdir()
    # Nothing from the caller's pip or uv configuration may point at a reachable index.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    with refusing_index() as url:
        env |= {
            "ORACLE_WHEELHOUSE": str(empty),
            "PIP_INDEX_URL": url,
            "PIP_RETRIES": "0",
            "PIP_CONFIG_FILE": os.devnull,
            "UV_INDEX_URL": url,
        }
        proc = run(shop, "nox", "-s", "judge", env=env)
    assert proc.returncode == 2, proc.stdout
    last = lines(proc.stdout)[-1]
    assert last.startswith("nox > judge: error (exit 2): wheelhouse: pip download failed")
    assert last.endswith("the wheelhouse needs the package index (`nox -s wheelhouse` fills it)")
    assert "judge: preconditions" not in proc.stdout  # the judge itself never started
    assert list(empty.iterdir()) == []


def bump_ci(repo: Path) -> None:
    """A CI matrix bump: a protected path, the rest of the patch judged as usual."""
    workflow = repo / ".github/workflows/oracle.yml"
    workflow.write_text(workflow.read_text("utf-8").replace('"3.12"', '"3.13"'), "utf-8")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_judge_names_the_verdict_and_the_judges_code(shop: Path) -> None:
    proc = run(shop, "make", "judge", f"ARGS=--head {branch(shop, 'bump-ci', bump_ci)}")
    assert proc.returncode == 2, proc.stdout  # make's own status for any failing recipe
    ours, makes = lines(proc.stdout)[-2:]
    # Exit 2 alone cannot say which; the recipe names the verdict the judge wrote.
    assert ours == "make judge: needs-review (exit 2)"
    # make's own closing line, which the recipe cannot suppress, carries the same code.
    assert re.fullmatch(r"make: \*\*\* \[Makefile:\d+: judge\] Error 2", makes), makes
    assert "judge: write-set: needs-review: " in proc.stdout
    assert "nox > judge: needs-review (exit 2)" in proc.stdout
