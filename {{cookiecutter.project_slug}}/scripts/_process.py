"""Run a process that may execute the patch's code: its own group, capped capture, a hard end.

Every command the gate starts on a build (cases, pytest runs, installs, the subject worker)
runs in a new session. On timeout, and again when it exits, the whole group is killed, so a
daemonised grandchild never outlives its step; pipes are drained by threads with a grace
period, so a grandchild that keeps stdout open cannot stall the judge.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# Output beyond the cap is hashed, not kept: a cassette holds its SHA-256, size and a head.
OUTPUT_CAP = 1 << 20
CHUNK = 1 << 16
DRAIN_GRACE = 5.0  # seconds to wait for pipes after the group is killed


@dataclass(frozen=True)
class Stream:
    """Captured output: the first `cap` bytes, and the digest and size of all of it."""

    head: bytes
    sha256: str
    size: int

    @property
    def truncated(self) -> bool:
        return self.size > len(self.head)

    def tail(self, chars: int = 2000) -> str:
        return self.head[-chars:].decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class Completed:
    exit_code: int
    timed_out: bool
    stdout: Stream
    stderr: Stream
    seconds: float

    def last_line(self) -> str:
        """The last non-empty line of stderr, else of stdout: what a one-line error quotes."""
        for stream in (self.stderr, self.stdout):
            lines = stream.tail().strip().splitlines()
            if lines:
                return lines[-1].strip()
        return f"exit {self.exit_code}"


class Drain(threading.Thread):
    """Read a pipe to its end, keeping the first `cap` bytes and hashing all of them."""

    def __init__(self, pipe: IO[bytes], cap: int = OUTPUT_CAP) -> None:
        super().__init__(daemon=True)
        self.pipe, self.cap = pipe, cap
        self.sha, self.size, self.chunks = hashlib.sha256(), 0, bytearray()

    def run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.pipe.read1(CHUNK):  # type: ignore[attr-defined]
                self.sha.update(chunk)
                self.size += len(chunk)
                if len(self.chunks) < self.cap:
                    self.chunks += chunk[: self.cap - len(self.chunks)]

    def stream(self) -> Stream:
        self.join(DRAIN_GRACE)  # an escaped grandchild holding the pipe must not hang us
        return Stream(bytes(self.chunks), self.sha.hexdigest(), self.size)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _feed(pipe: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(OSError):  # the command may exit without reading its stdin
        pipe.write(data)
        pipe.close()


def run_group(
    cmd: Sequence[str | Path],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes = b"",
    cap: int = OUTPUT_CAP,
) -> Completed:
    """Run `cmd` in its own process group; kill the group on timeout and when it exits."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(part) for part in cmd],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    assert proc.stdin and proc.stdout and proc.stderr
    drains = [Drain(proc.stdout, cap), Drain(proc.stderr, cap)]
    feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
    for thread in (*drains, feeder):
        thread.start()
    # A timer, not wait(timeout=): subprocess polls with sleeps when given a timeout.
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        kill_group(proc)

    timer = threading.Timer(timeout, expire)
    timer.start()
    code = proc.wait()
    timer.cancel()
    kill_group(proc)  # no daemonised grandchild outlives its command
    seconds = time.perf_counter() - start
    out, err = (d.stream() for d in drains)
    return Completed(code, expired.is_set(), out, err, seconds)
