"""Run a process: its own group, capped capture, a hard end.

Every command runs in a new session; on timeout, and again when it exits, the whole group is
killed; pipes are drained with a grace period, so a grandchild that keeps stdout open cannot
stall the judge. The patch's code never runs through here directly: see sandbox.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, ClassVar

from _gate.core.protocol import FailClosed

# Output beyond the cap is hashed, not kept: a cassette holds its SHA-256, size and a head.
OUTPUT_CAP = 1 << 20
CHUNK = 1 << 16
DRAIN_GRACE = 5.0  # seconds to wait for pipes after the group is killed
TERM_GRACE = 2.0  # seconds a launcher has, after SIGTERM, to kill what its command left
POLL = 0.05  # seconds between two looks at the exit where there is no pidfd


class Jobs:
    """The groups this process watches: an interrupt (_gate/judge/interrupt.py) kills every one
    at once, and none starts after it. No lock: a signal handler runs between two bytecodes of
    a thread that may hold one; a set's add, discard and copy are each one step."""

    live: ClassVar[set[Started]] = set()
    stopped: ClassVar[bool] = False

    @classmethod
    def stop(cls) -> None:
        cls.stopped = True  # first: a job added after the copy below finds it set and ends
        for proc in list(cls.live):
            kill_group(proc)

    @classmethod
    def refuse(cls) -> None:
        if cls.stopped:
            raise FailClosed("the judgment was interrupted: no command starts after it")

    @classmethod
    def watch(cls, proc: Started) -> None:
        cls.live.add(proc)
        if cls.stopped:
            kill_group(proc)

    @classmethod
    def forget(cls, proc: Started) -> None:
        cls.live.discard(proc)


# How many commands of run_group run at once in this process, whichever threads start them.
_slots = threading.BoundedSemaphore(os.cpu_count() or 1)


def share_cores(count: int) -> None:
    """Let at most `count` commands run at once: a step alone runs its cases on every core,
    and the judge, which runs several steps in its own threads, shares the cores among them
    (measured on 2 cores, a judgment oversubscribed three times over took 7 % longer)."""
    global _slots
    _slots = threading.BoundedSemaphore(max(1, count))


def slots() -> threading.BoundedSemaphore:
    """The semaphore a command holds while it runs (one per core `share_cores` gave)."""
    return _slots


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
    confinement: str = ""  # the launcher's level (confine.py); "" for a trusted command
    # Where a watched job reached beyond its scratch, and what it typed into a terminal
    # (confine.Watching; sandbox.run_confined's `watch`).
    reached: tuple[str, ...] = ()
    typed: bytes = b""

    def last_line(self) -> str:
        """The last non-empty line of stderr, else of stdout: what a one-line error quotes."""
        for stream in (self.stderr, self.stdout):
            lines = stream.tail().strip().splitlines()
            if lines:
                return lines[-1].strip()
        return f"exit {self.exit_code}"


class Sink:
    """One output pipe: the first `cap` bytes kept, all of them hashed and counted."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.sha, self.size, self.chunks = hashlib.sha256(), 0, bytearray()

    def take(self, chunk: bytes) -> None:
        self.sha.update(chunk)
        self.size += len(chunk)
        if len(self.chunks) < self.cap:
            self.chunks += chunk[: self.cap - len(self.chunks)]

    def stream(self) -> Stream:
        return Stream(bytes(self.chunks), self.sha.hexdigest(), self.size)


class Watch:
    """A running group's pipes and its exit, watched from the calling thread by one selector
    (a case costs a process, not four threads). Where there is no pidfd (not Linux) the exit
    is polled every POLL seconds."""

    def __init__(self, proc: Started, stdin: bytes, cap: int) -> None:
        assert proc.stdin
        assert proc.stdout
        assert proc.stderr
        Jobs.watch(proc)
        self.proc, self.exited = proc, False
        self.selector = selectors.DefaultSelector()
        self.sinks = {pipe.fileno(): Sink(cap) for pipe in (proc.stdout, proc.stderr)}
        self.open = set(self.sinks)  # the pipes not at their end yet
        for fd in self.open:
            self.selector.register(fd, selectors.EVENT_READ)
        self.pending = memoryview(stdin)
        if stdin:
            os.set_blocking(proc.stdin.fileno(), False)
            self.selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        self.pidfd = proc.pidfd() if isinstance(proc, Spawned) else pidfd(proc.pid)
        if self.pidfd is not None:
            self.selector.register(self.pidfd, selectors.EVENT_READ)

    def run(self, timeout: float, terminate: bool) -> bool:
        """Until the command exits (False) or `timeout` passes (True, the group killed); then
        the group is killed and the pipes drained for at most DRAIN_GRACE seconds, since an
        escaped grandchild may hold them open. With `terminate`, a command that timed out is
        sent SIGTERM first and given TERM_GRACE seconds: the launcher then kills what its
        command started outside the group before it goes."""
        deadline = time.monotonic() + timeout
        while not self.exited and self.wait(deadline):
            pass
        timed_out = not self.exited
        if timed_out and terminate:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            grace = time.monotonic() + TERM_GRACE
            while not self.exited and self.wait(grace):
                pass
        kill_group(self.proc)  # no daemonised grandchild outlives its command
        grace = time.monotonic() + DRAIN_GRACE
        while self.open and self.wait(grace):
            pass
        self.close()
        return timed_out

    def wait(self, deadline: float) -> bool:
        """Handle what is ready before `deadline`; False once it has passed."""
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        for key, _ in self.selector.select(left if self.pidfd is not None else min(left, POLL)):
            if key.fd == self.pidfd:
                self.exited = True
                self.selector.unregister(key.fd)
            elif key.fd in self.open:
                self.read(key.fd)
            else:
                self.feed()
        if self.pidfd is None and self.proc.poll() is not None:
            self.exited = True
        return True

    def read(self, fd: int) -> None:
        chunk = os.read(fd, CHUNK)
        if chunk:
            self.sinks[fd].take(chunk)
            return
        self.selector.unregister(fd)
        self.open.discard(fd)

    def feed(self) -> None:
        assert self.proc.stdin is not None
        try:
            written = os.write(self.proc.stdin.fileno(), self.pending[:CHUNK])
        except BlockingIOError:
            return
        except OSError:  # the command exited or closed its stdin without reading it all
            written = len(self.pending)
        self.pending = self.pending[written:]
        if not self.pending:
            self.selector.unregister(self.proc.stdin.fileno())
            self.proc.stdin.close()

    def close(self) -> None:
        Jobs.forget(self.proc)
        self.selector.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
        assert self.proc.stdin
        assert self.proc.stdout
        assert self.proc.stderr
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()


def pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return None


def exits_within(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether `proc` exits within `timeout` seconds (then reaped). Its pidfd tells at once;
    Popen.wait(timeout) polls, and notices an exit up to 50 ms late."""
    ended = ends_within(proc.pid, timeout)
    if ended is None:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    if ended:
        proc.wait()
    return ended


def ends_within(pid: int, timeout: float) -> bool | None:
    """Whether the child `pid` ends within `timeout` seconds, as its pidfd says at once (left
    to be reaped); None where there is no pidfd (not Linux)."""
    fd = pidfd(pid)
    if fd is None:
        return None
    try:
        poller = select.poll()  # not select.select: a busy judge holds fds past FD_SETSIZE
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    finally:
        os.close(fd)


def kill_group(proc: Started) -> None:
    if isinstance(proc, Spawned):  # its launcher takes every process of the job with it
        proc.kill()
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def run_group(
    cmd: Sequence[str | Path],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes = b"",
    cap: int = OUTPUT_CAP,
    terminate: bool = False,
) -> Completed:
    """Run `cmd` in its own process group; kill the group on timeout and when it exits. It
    waits for one of this process's slots first (see `share_cores`); its timeout and seconds
    count from its start. `terminate`: see `Watch.run`."""
    with _slots:
        Jobs.refuse()
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
        return watched(proc, stdin, cap, timeout, terminate=terminate, start=start)


def watched(
    proc: Started, stdin: bytes, cap: int, timeout: float, *, terminate: bool, start: float
) -> Completed:
    assert proc.stdout
    assert proc.stderr
    out, err = (proc.stdout.fileno(), proc.stderr.fileno())
    watch = Watch(proc, stdin, cap)
    timed_out = watch.run(timeout, terminate)
    code = proc.wait()
    seconds = time.perf_counter() - start
    return Completed(code, timed_out, watch.sinks[out].stream(), watch.sinks[err].stream(), seconds)


class Spawned:
    """A job the launcher's server started, as Watch sees a Popen: its pipes, and a pidfd
    of its supervisor (not this process's child: its exit code comes in its status)."""

    def __init__(self, handle: int, pipes: tuple[int, int, int]) -> None:
        self.handle = handle  # signalled through, never by pid: the server reaps it at once
        self.stdin: IO[bytes] | None = os.fdopen(pipes[0], "wb", buffering=0)
        self.stdout: IO[bytes] | None = os.fdopen(pipes[1], "rb", buffering=0)
        self.stderr: IO[bytes] | None = os.fdopen(pipes[2], "rb", buffering=0)

    def pidfd(self) -> int:
        return os.dup(self.handle)

    def poll(self) -> int | None:
        return 0 if select.select([self.handle], [], [], 0)[0] else None

    def wait(self) -> int:
        select.select([self.handle], [], [])
        os.close(self.handle)
        return -signal.SIGKILL  # the exit code is the status file's; without one, it was killed

    def terminate(self) -> None:
        self.signal(signal.SIGTERM)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def signal(self, number: int) -> None:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self.handle, number)  # type: ignore[attr-defined,unused-ignore]


Started = subprocess.Popen[bytes] | Spawned
