"""Run a command with its stdout (and, without piped input, its stdin) on a pseudo-terminal, and
copy what it writes there to this process's stdout: the terminal perturbation (perturb.py).

    python -I -S terminal.py [--stdin-tty] -- COMMAND ARG...

Runs inside the confinement as the case's own launcher would run the command: standard library
only, started by path. The terminal is 80 columns by 24 lines and does not echo; stderr stays
the pipe it was given. With --stdin-tty, stdin is the terminal too, at end of input at once (a
user who typed nothing and pressed Ctrl-D). Exits with the command's own code (128 + N for a
signal N).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import select
import struct
import sys
import termios
from collections.abc import Sequence

ROWS, COLUMNS = 24, 80
# prctl(2) options, as confine.py uses them (started by path, in isolated mode, this module
# imports nothing of the gate's).
PR_SET_DUMPABLE, PR_CAPBSET_DROP = 4, 24
EOF = b"\x04"  # the terminal's end-of-input character in canonical mode


def out_of_reach() -> None:
    """The command this relays to runs the patch's code: it must not trace this process, read
    its memory or reopen its fds (the pipe the judge reads among them) to write around the
    terminal. Not dumpable, this process can be traced only with CAP_SYS_PTRACE, and with the
    bounding set empty (as confine.drop_capabilities leaves a job's) the command it execs holds
    no capability, even as root; where this process may not empty it, it holds none to give."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl PR_SET_DUMPABLE")
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            return  # past the last capability this kernel knows, or no right to drop it


def quiet_terminal() -> tuple[int, int]:
    """A pseudo-terminal pair that does not echo input, with a window size."""
    master, slave = os.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO  # lflag: what the judge writes is input, never output
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    return master, slave


def child(slave: int, master: int, stdin_tty: bool, argv: Sequence[str]) -> None:
    os.close(master)
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)  # the controlling terminal, as in a shell
    os.dup2(slave, 1)
    if stdin_tty:
        os.dup2(slave, 0)
    os.close(slave)
    try:
        os.execvp(argv[0], list(argv))
    except OSError as exc:
        print(f"terminal: {argv[0]}: {exc.strerror}", file=sys.stderr)
        os._exit(127)


def relay(master: int, pid: int) -> int:
    """Copy the terminal's output to stdout until the command has ended and its output is
    drained; returns its wait status. This process keeps the terminal's other end open, so
    reading never meets the end-of-file that would race with output still buffered there; the
    command's end is a pidfd becoming readable, so it is seen at once (a poll's timeout cost
    each run up to its length). A select on the terminal after the end sees every byte the
    command wrote: polling a terminal flushes its buffers first (n_tty_poll)."""
    ended = os.pidfd_open(pid)
    while True:
        readable, _, _ = select.select([master, ended], [], [])
        if master in readable:
            data = os.read(master, 65536)
            while data:
                data = data[os.write(1, data) :]
        else:
            return os.waitpid(pid, 0)[1]


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    stdin_tty = bool(args) and args[0] == "--stdin-tty"
    args = args[1:] if stdin_tty else args
    if not args or args[0] != "--" or len(args) < 2:
        print("usage: terminal.py [--stdin-tty] -- COMMAND ARG...", file=sys.stderr)
        return 2
    out_of_reach()
    master, slave = quiet_terminal()
    pid = os.fork()
    if pid == 0:
        child(slave, master, stdin_tty, args[1:])
    if stdin_tty:
        os.write(master, EOF)
    code = os.waitstatus_to_exitcode(relay(master, pid))
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
