"""Time and progress (issue 10): long steps say how far they are, the report says how long."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _gate.core.protocol import Progress
from _gate.judge import runner
from _gate.judge.lanes import Judge

from tests.helpers import SCRIPTS, finish

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

# A step module, as runner.inline imports it by its script's name.
INLINE_STEP = """
import time
from _gate.core.protocol import Progress, say

def main(argv):
    if argv == ["--slow"]:
        time.sleep(0.5)
        return 0
    if argv == ["--bad-option"]:
        raise SystemExit(2)  # what argparse does
    Progress("replay", 2, "invocations", every=0).advance()
    say("::error file=tests/test_x.py,line=3::an assertion went away")
    say("replay: block: the step's own summary", error=True)
    return 1
"""


@pytest.fixture
def inline_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "inline_step.py").write_text(INLINE_STEP)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "inline_step.py"


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
    ran = runner.run_step("replay", [sys.executable, "-c", CHATTY], tmp_path)
    err = capfd.readouterr().err
    assert "judge: replay: 1/2 invocations, 0 s" in err.splitlines()
    assert ran.stderr == ["a warning of the step itself"]
    assert ran.stdout == b"out\n"
    assert ran.returncode == 0
    assert ran.seconds >= 0.3


def test_a_quiet_step_is_said_to_be_running(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "HEARTBEAT", 0.1)
    runner.run_step("oracle", [sys.executable, "-c", "import time; time.sleep(0.5)"], tmp_path)
    assert "judge: oracle: running, 0 s" in capfd.readouterr().err.splitlines()


def test_an_inline_step_passes_progress_and_annotations_through(
    inline_step: str, capfd: pytest.CaptureFixture[str]
) -> None:
    ran = runner.run_inline(
        "replay", lambda: importlib.import_module(inline_step.removesuffix(".py")).main([])
    )
    out, err = capfd.readouterr()
    assert err.splitlines() == ["judge: replay: 1/2 invocations, 0 s"]
    assert out.splitlines() == ["::error file=tests/test_x.py,line=3::an assertion went away"]
    assert (ran.returncode, ran.stdout, ran.stderr) == (1, b"", [])


def test_a_quiet_inline_step_is_said_to_be_running(
    inline_step: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "HEARTBEAT", 0.1)
    ran = runner.run_inline(
        "oracle", lambda: importlib.import_module(inline_step.removesuffix(".py")).main(["--slow"])
    )
    assert "judge: oracle: running, 0 s" in capfd.readouterr().err.splitlines()
    assert ran.returncode == 0
    assert ran.seconds >= 0.5


def test_an_inline_step_that_exits_leaves_no_report_and_fails_closed(
    inline_step: str, tmp_path: Path
) -> None:
    ran = runner.run_inline(
        "replay",
        lambda: importlib.import_module(inline_step.removesuffix(".py")).main(["--bad-option"]),
    )
    assert (ran.returncode, ran.stderr) == (2, ["SystemExit: 2"])
    step = finish(Judge(repo=tmp_path, reports=tmp_path), "replay", ran)
    assert (step["status"], step["summary"]) == (
        "error",
        "step left no report (SystemExit: 2)",
    )


# Eight threads saying lines at once, as the judge's lanes and a build's two sides do: half
# through say(), half as the judge passes a step's progress through (runner.Quiet).
AT_ONCE = """
import sys
import threading
from _gate.core.protocol import say
from _gate.judge.runner import Quiet

def work(n):
    quiet = Quiet("build")
    for i in range(300):
        if n % 2:
            say(f"kept: thread {n} line {i}", error=True)
        else:
            quiet.passed(f"kept: thread {n} line {i}")

threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def test_lines_said_by_threads_at_once_stay_whole(tmp_path: Path) -> None:
    """print() writes a line and its newline apart: another thread's line came in between,
    and a reader of `kept: ` lines lost one (tests/test_faults.py, once under load)."""
    done = subprocess.run(
        [sys.executable, "-c", AT_ONCE], cwd=SCRIPTS, capture_output=True, text=True, check=True
    )
    lines = done.stderr.splitlines()
    whole = [line for line in lines if re.fullmatch(r"(judge: )?kept: thread \d line \d+", line)]
    assert len(lines) == len(whole) == 8 * 300, [line for line in lines if line not in whole][:5]
