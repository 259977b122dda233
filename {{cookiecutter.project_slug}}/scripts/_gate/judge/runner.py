"""How the judge runs one step: its contract in a thread of the judge's process, or the base's
script as a process; either way watched (progress passes through, a quiet step is said to be
running) and read once, into a Report."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _gate.core.context import Judgment
from _gate.core.protocol import (
    ERROR,
    FAIL_CLOSED,
    PROGRESS_LINE,
    FailClosed,
    Report,
    line_to,
    listening,
    read_report,
)
from _gate.core.steps import BY_NAME, Step
from _gate.runs.entry import Contract
from _gate.runs.process import Jobs, exits_within

HEARTBEAT = 5.0  # seconds between two "still running" lines of a quiet step


def finished(path: Path, name: str, ran: Ran) -> Report:
    """A step process's outcome as its report tells it, read once; its GitHub annotations
    (`::error file=...`) reach the log only through the judge."""
    forward_workflow_commands(ran.stdout)
    try:
        return read_report(path)
    except FailClosed:
        tail = [line for line in ran.stderr if line.strip()]
        why = tail[-1].strip() if tail else f"exit {ran.returncode}"
        return Report(name, ERROR, FAIL_CLOSED, f"step left no report ({why})")


def has_report(name: str) -> bool:
    """Whether the step is one of a script, which has a report of its own."""
    return name in BY_NAME and BY_NAME[name].script is not None


def run_inline(name: str, body: Callable[[], int]) -> Ran:
    """Run a step's body in a thread of this process, watched as `run_step` watches a step
    process: progress passes through, GitHub annotations too (stdout), the step's own summary
    line does not (the judge prints its own), and a quiet step is said to be running."""
    quiet = Quiet(name)
    ended: list[int | str] = []

    def hear(line: str, error: bool) -> None:
        if error:
            quiet.passed(line)
        elif line.startswith("::error "):
            line_to(sys.stdout, line)

    def watched() -> None:
        try:
            with listening(hear):
                ended.append(body())
        except BaseException as exc:  # argparse's SystemExit too: the step left no outcome
            ended.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=watched, name=f"step {name}", daemon=True)
    thread.start()
    thread.join(HEARTBEAT)
    while thread.is_alive():
        quiet.tick()
        thread.join(HEARTBEAT)
    seconds, code = time.monotonic() - quiet.start, ended[0]
    if isinstance(code, int):
        return Ran(code, b"", [], seconds)
    return Ran(FAIL_CLOSED, b"", [code], seconds)


def inline(step: Step, j: Judgment, earlier: Mapping[str, Report]) -> Report:
    """A step's contract (`STEP` of its module), decided in this process on the judgment: its
    outcome stays in memory."""
    assert step.script is not None
    contract: Contract[Any] = importlib.import_module(step.module).STEP
    kept: list[Report] = []

    def body() -> int:
        kept.append(contract.judged(j, earlier))
        return kept[-1].exit_code

    ran = run_inline(step.name, body)
    if kept:
        return kept[0]
    why = ran.stderr[-1] if ran.stderr else f"exit {ran.returncode}"
    return Report(step.name, ERROR, FAIL_CLOSED, f"step left no report ({why})")


@dataclass(frozen=True)
class Ran:
    """One step's process, as the judge saw it."""

    returncode: int
    stdout: bytes
    stderr: list[str]  # its lines, progress lines left out
    seconds: float


class Quiet:
    """Says every HEARTBEAT seconds that a step which has reported nothing since is running."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.start = self.heard = time.monotonic()

    def passed(self, line: str) -> bool:
        """Pass a progress line through (True); any other line is the caller's."""
        if not re.match(PROGRESS_LINE, line):
            return False
        line_to(sys.stderr, f"judge: {line}")
        self.heard = time.monotonic()
        return True

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.heard >= HEARTBEAT:
            line = f"judge: {self.name}: running, {now - self.start:.0f} s"
            line_to(sys.stderr, line)
            self.heard = now


def run_step(name: str, cmd: list[str], cwd: Path) -> Ran:
    """Run a step, passing its progress lines through as they come, and saying every few
    seconds that a step which reports nothing is still running."""
    quiet = Quiet(name)
    kept: list[str] = []
    out: list[bytes] = []
    # `cmd` is a step script of the base's worktree (Judge.process), the gate's own code at the
    # merge base, never the patch's: each step runs the patch's code through run_confined.
    Jobs.refuse()
    with subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        Jobs.watch(proc)  # an interrupt kills it (_gate/judge/interrupt.py)

        def read_stderr() -> None:
            assert proc.stderr is not None
            for raw in proc.stderr:
                line = raw.decode("utf-8", "backslashreplace").rstrip("\n")
                if not quiet.passed(line):
                    kept.append(line)

        def read_stdout() -> None:
            assert proc.stdout is not None
            out.append(proc.stdout.read())

        readers = [threading.Thread(target=f, daemon=True) for f in (read_stderr, read_stdout)]
        for reader in readers:
            reader.start()
        while not exits_within(proc, HEARTBEAT):
            quiet.tick()
        for reader in readers:
            reader.join()
        Jobs.forget(proc)
    return Ran(proc.returncode, b"".join(out), kept[-50:], time.monotonic() - quiet.start)


def forward_workflow_commands(stdout: bytes) -> None:
    """A step's GitHub annotations (`::error file=...`) reach the log only through the judge."""
    for line in stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("::error "):
            line_to(sys.stdout, line)
