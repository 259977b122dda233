"""The launcher's watch of a job's system calls (scripts/_gate/plugin/syscall_watch.py, issue 48).

Real jobs through the real launcher (sandbox.run_confined with `watch`), at the namespaces
level: where a job tried to reach (the network its namespace does not have, a machine's
service, an abstract socket) and what it typed into its terminal are recorded, whatever the
call returned; its own sockets, the C library's plumbing and calls without an address are
not; the job's calls return what they return unwatched; the ways around the filter fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _gate.plugin.confine import Reach
from _gate.plugin.patch_env import gate_env
from _gate.runs.process import Completed
from _gate.runs.sandbox import run_confined

from tests.helpers import SCRIPTS

pytestmark = pytest.mark.fast  # real jobs of the launcher: no build, no nox

# What each attempt returned, by name: 0, or the errno's name.
PRELUDE = """
import ctypes, errno, json, os, socket, struct, sys
out = {}
def attempt(name, act):
    try:
        act()
        out[name] = 0
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, exc.errno)
"""
REACHING = (
    PRELUDE
    + """
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
attempt("sendto", lambda: udp.sendto(b"q", ("203.0.113.5", 53)))
attempt("connect", lambda: socket.socket().connect(("198.51.100.7", 443)))
attempt("connect6", lambda: socket.socket(socket.AF_INET6).connect(("2001:db8::1", 80)))
attempt("sendmsg", lambda: udp.sendmsg([b"x"], [], 0, ("192.0.2.1", 123)))
services = {"host": sys.argv[1], "abstract": "\\0a-service", "nscd": "/run/nscd/socket"}
for name, path in services.items():
    attempt(name, lambda: socket.socket(socket.AF_UNIX).connect(path))
own = socket.socket(socket.AF_UNIX)
own.bind(os.path.join(sys.argv[2], "own.sock"))
own.listen()
mine = os.path.join(sys.argv[2], "own.sock")
attempt("own", lambda: socket.socket(socket.AF_UNIX).connect(mine))
a, b = socket.socketpair()
a.send(b"no address: not even notified")
print(json.dumps(out))
"""
)


def watched(code: str, tmp: Path, *args: str, tty: tuple[int, ...] = ()) -> Completed:
    cmd = [sys.executable, "-I", "-c", textwrap.dedent(code), *args]
    env = gate_env(tmp, tmp)
    return run_confined(cmd, writable=[tmp], timeout=60, env=env, reach=Reach(tty, watch=True))


def test_where_a_job_reached_is_recorded_whatever_it_was_told(tmp_path: Path) -> None:
    outside = "/run/oracle-test-engine.sock"  # hidden: no such socket in the job's view
    done = watched(REACHING, tmp_path, outside, str(tmp_path))
    assert done.confinement == "namespaces"
    said = json.loads(done.stdout.head)
    assert said["sendto"] == said["connect"] == "ENETUNREACH"  # no network, as unwatched
    assert said["host"] == "ENOENT"
    assert said["own"] == 0
    assert done.reached == (
        "inet 203.0.113.5:53",
        "inet 198.51.100.7:443",
        "inet6 [2001:db8::1]:80",
        "inet 192.0.2.1:123",
        f"unix {outside}",
        "unix @a-service",
    )
    assert done.typed == b""


def test_a_watched_job_gets_what_an_unwatched_one_gets(tmp_path: Path) -> None:
    code = REACHING.replace("own.sock", "own2.sock")
    with_watch = watched(code, tmp_path, "/run/x.sock", str(tmp_path))
    (tmp_path / "own2.sock").unlink()
    cmd = [sys.executable, "-I", "-c", code, "/run/x.sock", str(tmp_path)]
    plain = run_confined(cmd, writable=[tmp_path], timeout=60, env=gate_env(tmp_path, tmp_path))
    assert json.loads(with_watch.stdout.head) == json.loads(plain.stdout.head)
    assert plain.reached == ()


def test_an_honest_job_reaches_nothing(tmp_path: Path) -> None:
    code = """
    import socket, pwd, os, getpass
    a, b = socket.socketpair()
    for _ in range(50):
        a.send(b"hi")
        assert b.recv(2) == b"hi"
    pwd.getpwuid(os.getuid())  # the user database: the C library's own sockets
    print("ok")
    """
    done = watched(code, tmp_path)
    assert done.stdout.head == b"ok\n"
    assert done.reached == ()
    assert done.typed == b""


@pytest.mark.parametrize("fd", ["0", "1", "/dev/tty"])
def test_what_a_job_types_into_its_terminal_is_recorded(tmp_path: Path, fd: str) -> None:
    """TIOCSTI: input pushed into the terminal runs in a user's shell once the command exits;
    from its stdin, its stdout, or its controlling terminal opened by name."""
    code = f"""
    import fcntl, os, termios
    fd = os.open({fd!r}, os.O_RDONLY) if {fd!r}.startswith("/") else int({fd!r})
    for ch in b"echo pwned\\n":
        fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
    """
    done = watched(code, tmp_path, tty=(0, 1))
    assert done.typed == b"echo pwned\n", done.stderr.head


def test_the_ways_around_the_filter_fail(tmp_path: Path) -> None:
    """io_uring would connect without a system call the filter sees; another ABI's numbers
    (i386 by int 0x80, x32) would name other calls."""
    code = """
    import ctypes, errno
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(425, 8, None)  # io_uring_setup
    print(r, errno.errorcode[ctypes.get_errno()])
    """
    assert watched(code, tmp_path).stdout.head.split() == [b"-1", b"ENOSYS"]


def test_the_watch_loads_without_writing_bytecode_beside_the_gates_scripts(tmp_path: Path) -> None:
    """The launcher loads syscall_watch.py by its path: no __pycache__ lands in a base's
    worktree or in the template a bake copies whole."""
    plugin = tmp_path / "plugin"
    shutil.copytree(
        SCRIPTS / "_gate" / "plugin", plugin, ignore=shutil.ignore_patterns("__pycache__")
    )
    load = "import confine; confine.watch_module()"
    writes = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", load], cwd=plugin, env=writes, check=True)
    cached = sorted(p.name for p in plugin.rglob("*.pyc"))  # bytecode is written here
    assert [name for name in cached if name.startswith("syscall_watch")] == [], cached
