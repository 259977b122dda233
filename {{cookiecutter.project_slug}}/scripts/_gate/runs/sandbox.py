"""The launcher's client: `run_confined`, the one way to run the patch's code.

A command that may execute code of a tree under judgment or of its build (an install, a case,
a pytest run in a build's environment, a probe of it) runs confined by the launcher
`confine.py`: no survivor, no write outside its scratch, no network. Jobs go to the
launcher's server (one per judge process and level cap), or, where it cannot run, to a
launcher of their own; either is watched like any group (process.py).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, NamedTuple

from _gate.core.owned import owned_folder
from _gate.core.protocol import FailClosed
from _gate.plugin import confine
from _gate.plugin.confine import NOWHERE, Reach
from _gate.runs import process
from _gate.runs.process import OUTPUT_CAP, Completed, Spawned, run_group, watched

STATUS_PREFIX = "oracle-confine-"  # a launcher's status folder (status_file)


class Server:
    """The launcher as a server (confine.py --serve), one per cap per judge process, started
    on the first job: a job then costs a fork in it, not a Python start and a network
    namespace. None where it cannot run (no pidfd, no fd passing: not Linux)."""

    lock = threading.Lock()
    sockets: ClassVar[dict[str, socket.socket | None]] = {}
    # Their processes, held for as long as this one runs: a server outlives no judge.
    processes: ClassVar[list[subprocess.Popen[bytes]]] = []

    @classmethod
    def spawn(cls, request: dict[str, object]) -> Spawned | None:
        with cls.lock:
            sock = cls.connected()
            if sock is None:
                return None
            ours = [os.pipe() for _ in range(3)]
            theirs = [ours[0][0], ours[1][1], ours[2][1]]  # its stdin's reading end, ...
            try:
                socket.send_fds(sock, [json.dumps(request).encode()], theirs)
                _, fds, _, _ = socket.recv_fds(sock, 64, 1)
            finally:
                for fd in theirs:
                    os.close(fd)
            if not fds:
                raise FailClosed("the launcher's server ended; see its stderr above")
            return Spawned(fds[0], (ours[0][1], ours[1][0], ours[2][0]))

    @classmethod
    def connected(cls) -> socket.socket | None:
        cap = confine.level_cap()
        if cap not in cls.sockets:
            cls.sockets[cap] = (
                cls.start()
                if hasattr(socket, "send_fds") and sys.platform.startswith("linux")
                else None
            )
        return cls.sockets[cap]

    @classmethod
    def forget(cls) -> None:
        """In a forked child (mutmut forks one per mutant): the parent's connection stays the
        parent's, since two processes on one socket read each other's replies; the child
        starts a server of its own on its first job."""
        for sock in cls.sockets.values():
            if sock is not None:
                sock.close()
        cls.lock = threading.Lock()
        cls.sockets = {}
        cls.processes = []

    @classmethod
    def start(cls) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The launcher itself (this folder's confine.py): it confines each job it forks, and
        # runs no code of the patch's before doing so.
        server = subprocess.Popen(
            confine.server_command(theirs.fileno()),
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={},  # each job brings its own (_gate/plugin/patch_env.py); none is the judge's
        )
        cls.processes.append(server)
        theirs.close()  # the server ends when this process does: its socket then reads EOF
        return ours


os.register_at_fork(after_in_child=Server.forget)


class Sandbox:
    """judge.yaml `sandbox`: `required` (the default) refuses to run the patch's code where
    this machine cannot confine it; `best-effort` runs it unconfined and says so. `inside`:
    this process is itself a job the launcher confined at the namespaces level (strength's
    cassette tests, in its mutmut run), so the jobs it starts are in that job's mounts, with
    the machine's services hidden, whatever level their own launcher reaches."""

    required = True
    inside = False


def require_sandbox(required: bool) -> None:
    Sandbox.required = required


@contextmanager
def status_file() -> Iterator[Path]:
    """A fresh path for a launcher's status, in a folder of its own that no confined process
    may write, and which goes with the launch: a process that ends without its exit handlers
    (mutmut's forked workers end with os._exit) leaves no folder behind; one killed outright
    leaves it marked as its own, for the next judgment to remove (_gate/core/owned.py)."""
    folder = owned_folder(STATUS_PREFIX)
    try:
        yield folder / "status"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_confined(
    cmd: Sequence[str | Path],
    *,
    writable: Sequence[Path],
    timeout: float,
    env: Mapping[str, str],
    cwd: Path | None = None,
    stdin: bytes = b"",
    cap: int = OUTPUT_CAP,
    reach: Reach = NOWHERE,
) -> Completed:
    """Run `cmd`, which may execute the patch's code, confined by the launcher: it may write
    only beneath `writable`. `env` is all it sees of variables (_gate/plugin/patch_env.py builds it;
    never the judge's own; `at_home` gives it a HOME and TMPDIR). `cap`: the bytes of its
    output kept, head and tail. Of the folders where a
    machine's services keep their sockets (/tmp, /run: confine.HIDDEN) it sees only what it
    names and what `reach` lets it (confine.Reach: a terminal, paths it sees, binds, a watch
    of where it connects: Completed.reached, .typed). A process it leaves running, or a
    launcher that could not confine it (or hide those, or watch it) where the sandbox is
    required, fails the step closed."""
    parts: list[str] = [str(part) for part in cmd]
    job = Request(parts, [str(folder) for folder in writable], cwd, env, reach)
    with status_file() as status:
        done = launch(job, status, timeout, stdin, cap)
        found = confine.read_status(str(status))
    if found is None:
        if done.timed_out:
            return done
        raise FailClosed(
            f"{shown(parts)}: its launcher ended without a status ({done.last_line()})"
        )
    if found.level == "none" and Sandbox.required:
        raise FailClosed(unconfinable(found.missing))
    if not found.hidden and Sandbox.required and not Sandbox.inside:
        raise FailClosed(unhidden(found))
    if reach.watch and not found.watched and Sandbox.required:
        raise FailClosed(
            f"{shown(parts)}: the launcher could not watch its system calls (seccomp user "
            "notification, Linux 5.9+); set oracle/judge.yaml sandbox: best-effort to judge "
            "without"
        )
    if found.refused:
        raise FailClosed(f"{shown(parts)} could not be confined: {found.refused}")
    if found.survivors:
        left = found.survivors[0].decode("utf-8", "replace")[:200]
        more = f" and {len(found.survivors) - 1} more" if len(found.survivors) > 1 else ""
        raise FailClosed(
            f"{left!r}{more} outlived its command ({shown(parts)}) and was killed; "
            "no process of the patch's code may outlive its step"
        )
    ran = (found.exit, done.timed_out, done.stdout, done.stderr, done.seconds, found.level)
    return Completed(*ran, tuple(found.reached), found.typed)


def at_home(env: Mapping[str, str], home: Path) -> dict[str, str]:
    """`env` with `home` as the job's HOME and TMPDIR (a folder it may write, too)."""
    return {**env, "HOME": str(home), "TMPDIR": str(home)}


class Request(NamedTuple):
    """What the launcher is asked to run: the command, the folders it may write, its folder,
    variables, and what it reaches beyond those folders."""

    argv: list[str]
    writable: list[str]
    cwd: Path | None
    env: Mapping[str, str]
    reach: Reach


def launch(job: Request, status: Path, timeout: float, stdin: bytes, cap: int) -> Completed:
    """Start the job through the launcher's server, or, where there is none, a launcher of
    its own; watch it as run_group does."""
    # Inside a job, a level below namespaces is hidden by the outer one's: the client holds
    # it to `required` (run_confined), not the launcher, which would refuse it.
    require = Sandbox.required and not Sandbox.inside
    request: dict[str, object] = {
        "argv": job.argv,
        "writable": job.writable,
        "status": str(status),
        "require": require,
        "env": dict(job.env),
        "cwd": str(job.cwd) if job.cwd is not None else None,
        "tty": list(job.reach.tty),
        "see": list(job.reach.see),
        "bind": [list(pair) for pair in job.reach.bind],
        "watch": job.reach.watch,
    }
    with process.slots():
        process.Jobs.refuse()
        start = time.perf_counter()
        spawned = Server.spawn(request)
        if spawned is not None:
            return watched(spawned, stdin, cap, timeout, terminate=True, start=start)
    launched = confine.command(job.argv, job.writable, str(status), require, reach=job.reach)
    return run_group(
        launched, timeout=timeout, cwd=job.cwd, env=job.env, stdin=stdin, cap=cap, terminate=True
    )


def confines() -> bool:
    """Whether this machine confines a job (probe_sandbox)."""
    return level(confine.level_cap()) != "none"


def hides() -> bool:
    """Whether a job here has mounts of its own (the namespaces level)."""
    return level(confine.level_cap()) == "namespaces"


@functools.cache
def level(cap: str) -> str:
    """The level the launcher reaches under `cap` ($ORACLE_SANDBOX_LEVEL), probed once."""
    return probe_sandbox().level


def probe_sandbox() -> confine.Status:
    """The level the launcher reaches on this machine, found by launching an empty Python."""
    with status_file() as status:
        launched = confine.command([sys.executable, "-I", "-S", "-c", ""], [], str(status), False)
        run_group(launched, timeout=60.0)
        found = confine.read_status(str(status))
    return found or confine.Status("none", "the launcher confine.py did not run")


def unhidden(found: confine.Status) -> str:
    """Why a confined job could still reach the machine's services, and the fix."""
    if found.level == "namespaces":
        why = "the job's private mounts failed"
    else:
        why = (
            f"at the {found.level} level a job has no mounts of its own, and Landlock cannot "
            f"refuse a unix socket's connect: missing {found.missing or 'user namespaces'}"
        )
    return (
        f"sandbox: this machine cannot hide its services (sockets under /tmp and /run) from "
        f"the patch's code ({why}); enable user namespaces, or set oracle/judge.yaml "
        "sandbox: best-effort to judge without"
    )


def unconfinable(missing: str) -> str:
    return (
        f"sandbox: this machine cannot confine the patch's code (missing: {missing}); "
        "enable it, or set oracle/judge.yaml sandbox: best-effort to judge unconfined"
    )


def shown(parts: list[str]) -> str:
    """A command as a one-line message names it: its program and first arguments."""
    return " ".join(Path(parts[0]).name.split() + parts[1:4])[:160]
