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

import fcntl
import os
import struct
import sys
import termios
from collections.abc import Sequence

ROWS, COLUMNS = 24, 80
EOF = b"\x04"  # the terminal's end-of-input character in canonical mode


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


def relay(master: int) -> None:
    """Copy the terminal's output to stdout until the command closes it."""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal has closed it
            return
        if not data:
            return
        os.write(1, data)


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    stdin_tty = bool(args) and args[0] == "--stdin-tty"
    args = args[1:] if stdin_tty else args
    if not args or args[0] != "--" or len(args) < 2:
        print("usage: terminal.py [--stdin-tty] -- COMMAND ARG...", file=sys.stderr)
        return 2
    master, slave = quiet_terminal()
    pid = os.fork()
    if pid == 0:
        child(slave, master, stdin_tty, args[1:])
    os.close(slave)
    if stdin_tty:
        os.write(master, EOF)
    relay(master)
    os.close(master)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
