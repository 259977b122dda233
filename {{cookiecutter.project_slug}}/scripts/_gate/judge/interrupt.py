"""Signals end a judgment cleanly (docs/faults.md).

SIGINT, SIGTERM and SIGHUP each raise `Interrupted` in the judge's main thread, after every
job the launcher runs is killed and no new one may start (process.Jobs): the judgment unwinds
through its own cleanup (worktrees, temporary folders, the kept environments' locks) and ends
in a report whose verdict is `error`, naming the signal and the last step that ended, exit 2.
Further signals are ignored meanwhile, and the cleanup is bounded: past CLEANUP_SECONDS the
judge exits 2 at once (its report then still says it did not finish: run_state.begin).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from _gate.core.protocol import FAIL_CLOSED
from _gate.runs.process import Jobs

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Inside a CI runner's cancellation: it sends SIGINT, then SIGTERM 7.5 s later, then SIGKILL.
CLEANUP_SECONDS = 7.0


class Interrupted(BaseException):
    """A signal ended the judgment: a BaseException, as KeyboardInterrupt is, so that no
    step's `except Exception` takes it for a failure of its own."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@contextmanager
def handled_signals() -> Iterator[None]:
    """Within: the signals raise `Interrupted`; after, they are handled as before (a judge
    run in a test's process leaves the test runner's handlers as they were)."""
    before = {number: signal.getsignal(number) for number in SIGNALS}
    for number in SIGNALS:
        signal.signal(number, interrupted)
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def ignore_signals() -> None:
    """While the verdict is written: the judgment has ended, and a signal now would only lose
    its report."""
    for number in SIGNALS:
        signal.signal(number, signal.SIG_IGN)


def interrupted(number: int, frame: FrameType | None) -> None:
    ignore_signals()
    Jobs.stop()
    threading.Thread(target=give_up, daemon=True).start()
    raise Interrupted(signal.Signals(number).name)


def settle() -> None:
    """After an interrupt, before the judgment's folders go: wait for its other threads, whose
    jobs were killed and which start no new one (bounded by `give_up`)."""
    if not Jobs.stopped:
        return
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()


def give_up() -> None:
    time.sleep(CLEANUP_SECONDS)
    print(
        f"judge: error: interrupted, and its cleanup took over {CLEANUP_SECONDS:g} s: exiting; "
        "the next judgment removes what it left",
        file=sys.stderr,
        flush=True,
    )
    os._exit(FAIL_CLOSED)
