"""The step protocol: what a step concludes (`Outcome`) and reports (`Report`), the exit codes
and their words, and `concluded`, which turns every failure of a step's body into an outcome
(a step's entry, `Contract.main` in entry.py, writes it as a report and one line).

Exit codes used by every script: 0 pass, 1 block, 2 fail closed (bad input, broken precondition,
or an internal error; the message names the file, the field and the fix). A report's status
tells the two causes of exit 2 apart: `needs-review` (a protected path a code owner must look
at first) and `error` (the gate could not judge).
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from _gate.core.reports import Names


class ExitCode(enum.IntEnum):
    """Every script's exit codes, and the judge's verdict word for each (exit 2 has two: see
    NEEDS_REVIEW; the verdict tells which)."""

    PASS = 0
    BLOCK = 1
    FAIL_CLOSED = 2

    @property
    def verdict(self) -> str:
        return ("merge", "block", ERROR)[self]


PASS, BLOCK, FAIL_CLOSED = ExitCode.PASS, ExitCode.BLOCK, ExitCode.FAIL_CLOSED
# Exit 2 has two causes: a protected path that waits for a code owner (ORACLE_REVIEW=1 once
# reviewed), and an error: bad input, a build that fails, a crash, a timeout, missing evidence.
NEEDS_REVIEW, ERROR = "needs-review", "error"
ADVISORY = "advisory"  # the status of a step that never decides (steps.Step.decides)
STATUS: dict[int, str] = {PASS: "pass", BLOCK: "block", FAIL_CLOSED: ERROR}
# A step whose failures a later step of the table decides (Outcome.deferred_to).
DEFERRED = "deferred"
# Each status a report may hold, and the exit code it stands for.
CODE: dict[str, int] = {
    "pass": PASS,
    ADVISORY: PASS,
    DEFERRED: PASS,
    "block": BLOCK,
    NEEDS_REVIEW: FAIL_CLOSED,
    ERROR: FAIL_CLOSED,
}
# The statuses from least to most severe, as the verdict orders them (_gate/verdict/verdict.py): a
# proof blocks whatever else could not judge; an error outranks a review, since evidence
# that was never produced cannot be reviewed. A step's status over its shards is the worst.
SEVERITY: dict[str, int] = {
    "pass": 0,
    ADVISORY: 0,
    DEFERRED: 1,
    NEEDS_REVIEW: 2,
    ERROR: 3,
    "block": 4,
}


class FailClosed(Exception):
    """Input the gate cannot judge: reported as one line, exit 2."""


class Tampered(Exception):
    """Evidence that the patch's code acted against the run that judges it (a canary with the
    wrong outcome, pytest's machinery replaced, an evidence file rewritten): the step blocks,
    naming what it did, in every mode. Raised with the side and run it concerns."""


TAMPERED = "tampered"  # the evidence key of a step that blocks for a Tampered run


class NotInWheelhouse(FailClosed):
    """A build needs a dependency the hash-pinned wheelhouse does not provide."""


@dataclass
class Outcome:
    """What a step concluded: exit code, one-line summary, and its evidence."""

    code: int
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    # NEEDS_REVIEW: exit code 2 that a code owner's review resolves, not an error.
    status: str | None = None
    # The later step of the table that decides this step's failures (flake-budget): the status
    # is then DEFERRED, its exit code 1 alone; "" when the step decides them itself.
    deferred_to: str = ""

    @property
    def decided(self) -> str:
        """The status the report holds: the one place it is told from the outcome."""
        return self.status or (DEFERRED if self.deferred_to else STATUS[self.code])

    def noted(self, note: str, **evidence: Any) -> Outcome:
        """The same conclusion, its summary followed by `note`, with more evidence."""
        return replace(self, summary=self.summary + note, evidence={**self.evidence, **evidence})


Listener = Callable[[str, bool], None]


# Where this thread's step lines go, when not to stdout and stderr: the judge's listener while
# it decides a step in one of its own threads (judge/runner.py, `inline`).
_step = threading.local()


def say(text: str, error: bool = False) -> None:
    """One line of a step: progress and failures to stderr (`error`), the rest to stdout."""
    listener: Listener | None = getattr(_step, "listener", None)
    if listener is not None:
        listener(text, error)
    else:
        line_to(sys.stderr if error else sys.stdout, text)


def line_to(stream: TextIO, text: str) -> None:
    """Write `text` and its newline in one write, then flush: steps run in threads, and
    print's two writes (the text, then the newline) let another thread's line in between."""
    stream.write(f"{text}\n")
    stream.flush()


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


# What the judge forwards from a step's stderr: progress, and a kept run not used (reuse.kept).
PROGRESS_LINE = r"^(?:[a-z-]+: \d+/\d+ |kept: )"


def add_report_arg(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(
        "--report",
        type=Path,
        default=Path("reports") / f"{name}.json",
        help=f"JSON report to write (default: reports/{name}.json)",
    )


EXIT_CODES_HELP = "exit codes: 0 pass, 1 block, 2 fail closed (bad input or internal error)"


@dataclass(frozen=True)
class Report:
    """A step's report: what its process wrote, or what its `run` returned inline, as the
    judge keeps it in memory (one reader, `read_report`, for every step's file)."""

    step: str
    status: str
    exit_code: int
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    deferred_to: str = ""  # Outcome.deferred_to

    @property
    def code(self) -> int:
        return CODE[self.status]

    def payload(self) -> dict[str, Any]:
        """The report as JSON holds it: a deferral is its evidence's `deferred_to`."""
        deferral = {"deferred_to": self.deferred_to} if self.deferred_to else {}
        return {
            "step": self.step,
            "status": self.status,
            "exit_code": self.exit_code,
            "summary": self.summary,
            "evidence": {**self.evidence, **deferral},
        }

    def renamed(self, names: Names) -> Report:
        """The report with the judgment's folders written by their names (`Names`)."""
        return replace(self, summary=names(self.summary), evidence=names(self.evidence))

    def advisory(self) -> Report:
        """The report of a step whose findings leave the verdict alone (the step table's
        `decides`, or the step's own inputs: `Contract.advisory`), whatever it found. Not a
        run the patch's code forged: that blocks in every mode. A step that could not run
        still exits 2 (a person running it by hand learns so), its status advisory all
        the same."""
        if self.evidence.get(TAMPERED):
            return self
        found = "" if self.status == STATUS[PASS] else f"{self.status}, "
        summary = f"{self.summary} ({found}advisory: never part of the verdict)"
        code = FAIL_CLOSED if self.status == ERROR else PASS
        return replace(self, status=ADVISORY, exit_code=code, summary=summary, deferred_to="")

    @classmethod
    def from_payload(cls, data: dict[str, Any], step: str = "") -> Report:
        """A report from its JSON (`payload`). Its status decides: a report without its step's
        name or exit code reads as `step` and the status's code."""
        status, evidence = str(data["status"]), dict(data.get("evidence") or {})
        if status not in CODE:
            raise ValueError(f"status {status!r}")
        deferred_to = str(evidence.pop("deferred_to", "") or "")
        name = str(data.get("step") or step)
        code = int(data.get("exit_code", CODE[status]))
        return cls(name, status, code, str(data.get("summary", "")), evidence, deferred_to)


def read_report(path: Path) -> Report:
    """A step's report file, read once; one line naming the file when it is not one. Its
    status decides: a report without its step's name or exit code reads as the file's step
    and the status's code."""
    try:
        data = json.loads(path.read_bytes())
        if not isinstance(data.get("evidence") or {}, dict):
            raise ValueError("evidence is not a mapping")
        return Report.from_payload(data, path.stem.removesuffix("-report"))
    except FileNotFoundError:
        raise FailClosed(f"{path}: the step left no report") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FailClosed(f"{path}: not a step report ({exc}); run the step again") from None


def concluded(name: str, body: Callable[[], Outcome]) -> Report:
    """Run a step's body; every failure becomes an outcome, never a traceback."""
    try:
        outcome = body()
    except FailClosed as exc:
        outcome = Outcome(FAIL_CLOSED, str(exc))
    except Tampered as exc:
        outcome = Outcome(BLOCK, str(exc), {TAMPERED: True})
    except Exception as exc:  # the contract is one line and exit 2, whatever broke
        where = traceback.extract_tb(exc.__traceback__)[-1]
        outcome = Outcome(
            FAIL_CLOSED,
            f"internal error {type(exc).__name__}: {exc} "
            f"({Path(where.filename).name}:{where.lineno})",
            {"traceback": traceback.format_exc()},
        )
    return Report(
        name, outcome.decided, outcome.code, outcome.summary, outcome.evidence, outcome.deferred_to
    )
