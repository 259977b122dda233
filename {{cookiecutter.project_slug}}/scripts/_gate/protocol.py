"""The step protocol: what a step concludes (`Outcome`), the exit codes and their words, and
`run_main`, which turns every failure into one line and a report.

Exit codes used by every script: 0 pass, 1 block, 2 fail closed (bad input, broken precondition,
or an internal error; the message names the file, the field and the fix). A report's status
tells the two causes of exit 2 apart: `needs-review` (a protected path a code owner must look
at first) and `error` (the gate could not judge).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate.reports import named, write_report

PASS, BLOCK, FAIL_CLOSED = 0, 1, 2


# Exit 2 has two causes: a protected path that waits for a code owner (ORACLE_REVIEW=1 once
# reviewed), and an error: bad input, a build that fails, a crash, a timeout, missing evidence.
NEEDS_REVIEW, ERROR = "needs-review", "error"


STATUS = {PASS: "pass", BLOCK: "block", FAIL_CLOSED: ERROR}


class FailClosed(Exception):
    """Input the gate cannot judge: reported as one line, exit 2."""


class NotInWheelhouse(FailClosed):
    """A build needs a dependency the hash-pinned wheelhouse does not provide."""


@dataclass
class Outcome:
    """What a step concluded: exit code, one-line summary, and its evidence."""

    code: int
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    # "deferred": a later step named in the evidence decides (see judge.py), exit code 1 alone;
    # NEEDS_REVIEW: exit code 2 that a code owner's review resolves, not an error.
    status: str | None = None


Listener = Callable[[str, bool], None]


# Where this thread's step lines go, when not to stdout and stderr: the judge's listener while
# it runs the step's main() in one of its own threads (judge.py, `inline`).
_step = threading.local()


def say(text: str, error: bool = False) -> None:
    """One line of a step: progress and failures to stderr (`error`), the rest to stdout."""
    listener: Listener | None = getattr(_step, "listener", None)
    if listener is not None:
        listener(text, error)
    else:
        print(text, file=sys.stderr if error else sys.stdout, flush=True)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """The lines this thread says meanwhile go to `listener`."""
    _step.listener = listener
    try:
        yield
    finally:
        _step.listener = None


class Progress:
    """`label: done/total unit, N s` on stderr for a long run: first after `every` seconds, then
    at most every `every` seconds. The judge passes these lines through as they come."""

    def __init__(self, label: str, total: int, unit: str, every: float = 5.0) -> None:
        self.label, self.total, self.unit, self.every = label, total, unit, every
        self.done = 0
        self.start = self.shown = time.monotonic()

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if now - self.shown >= self.every:
            self.shown = now
            line = f"{self.label}: {self.done}/{self.total} {self.unit}, {now - self.start:.0f} s"
            say(line, error=True)


PROGRESS_LINE = r"^[a-z-]+: \d+/\d+ "  # what the judge forwards from a step's stderr


def add_report_arg(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(
        "--report",
        type=Path,
        default=Path("reports") / f"{name}.json",
        help=f"JSON report to write (default: reports/{name}.json)",
    )


EXIT_CODES_HELP = "exit codes: 0 pass, 1 block, 2 fail closed (bad input or internal error)"


def run_main(
    name: str,
    parser: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace], Outcome],
    argv: Sequence[str] | None,
) -> int:
    """Parse, run, report. Every failure ends as one line and a report, never a traceback."""
    args = parser.parse_args(argv)
    report: Path = args.report
    try:
        outcome = body(args)
    except FailClosed as exc:
        outcome = Outcome(FAIL_CLOSED, str(exc))
    except Exception as exc:  # the contract is one line and exit 2, whatever broke
        where = traceback.extract_tb(exc.__traceback__)[-1]
        outcome = Outcome(
            FAIL_CLOSED,
            f"internal error {type(exc).__name__}: {exc} "
            f"({Path(where.filename).name}:{where.lineno})",
            {"traceback": traceback.format_exc()},
        )
    payload = {
        "step": name,
        "status": outcome.status or STATUS[outcome.code],
        "exit_code": outcome.code,
        "summary": outcome.summary,
        "evidence": outcome.evidence,
    }
    payload = named(payload)  # the folders of a judgment by their names, here at the source
    write_report(report, payload)
    say(f"{name}: {payload['status']}: {payload['summary']}", error=outcome.code != PASS)
    return outcome.code
