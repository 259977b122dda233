"""Time and progress (issue 10): long steps say how far they are, the report says how long."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import SCRIPTS

sys.path.insert(0, str(SCRIPTS))
import judge
from _gate import Progress

CHATTY = """
import sys, time
print("replay: 1/2 invocations, 0 s", file=sys.stderr, flush=True)
print("a warning of the step itself", file=sys.stderr, flush=True)
time.sleep(0.3)
print("out")
"""


def test_progress_reports_done_total_and_elapsed_at_most_every_period(
    capsys: pytest.CaptureFixture[str],
) -> None:
    quiet = Progress("replay", 3, "invocations", every=3600)
    for _ in range(3):
        quiet.advance()
    assert capsys.readouterr().err == ""
    chatty = Progress("record", 2, "invocations", every=0)
    chatty.advance()
    chatty.advance()
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["record: 1/2 invocations, 0 s", "record: 2/2 invocations, 0 s"]


def test_the_judge_passes_progress_through_and_keeps_the_rest(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ran = judge.run_step("replay", [sys.executable, "-c", CHATTY], tmp_path)
    err = capfd.readouterr().err
    assert "judge: replay: 1/2 invocations, 0 s" in err.splitlines()
    assert ran.stderr == ["a warning of the step itself"]
    assert ran.stdout == b"out\n" and ran.returncode == 0
    assert ran.seconds >= 0.3


def test_a_quiet_step_is_said_to_be_running(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(judge, "HEARTBEAT", 0.1)
    judge.run_step("oracle", [sys.executable, "-c", "import time; time.sleep(0.5)"], tmp_path)
    assert "judge: oracle: running, 0 s" in capfd.readouterr().err.splitlines()
