"""One judgment at a time in a checkout (docs/faults.md).

Two `nox -s judge` in one checkout share nox's environment of the judge (.nox/judge, which nox
makes again on each run) and the reports folder: one would fail while the other makes the
environment, with nox's exit 1, which the gate's exit codes read as `block`. So the noxfile,
as nox loads it and before nox makes any environment, takes this lock when the run may start
the judge; a second judgment says which one is running and exits 2. The lock is the kernel's
(flock): it goes with the process that held it, however that process ended.

Stdlib only: the noxfile imports it before anything is installed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # Windows: judgments there are not kept apart
    fcntl = None  # type: ignore[assignment]

LOCK = Path(".oracle") / "judge.lock"
SESSION_FLAGS = ("-s", "-e", "--session", "--sessions")
# nox options that run no session at all.
NO_SESSION = ("-l", "--list", "--list-sessions", "--json", "-h", "--help", "--version")


def judging(argv: Sequence[str], environ: Mapping[str, str], default: Sequence[str]) -> bool:
    """Whether a nox command line (before `--`) may start the `judge` session: it names it, or
    names no session and so runs `default`, or picks sessions by keyword or tag (-k, -t)."""
    own = list(argv[: argv.index("--")] if "--" in argv else argv)
    if any(arg in NO_SESSION for arg in own):
        return False
    named = sessions_named(own)
    if named is None and environ.get("NOXSESSION"):
        named = environ["NOXSESSION"].split(",")
    if any(arg.startswith(("-k", "-t", "--keywords", "--tags")) for arg in own):
        return True  # `-k jud`, `-kjud`, `-t x`: nox picks by name or tag, which may be the judge
    return "judge" in (default if named is None else named)


def sessions_named(own: Sequence[str]) -> list[str] | None:
    """The sessions -s/-e/--session(s) name (each takes one or more words, or `=a,b`); None
    where none is named."""
    named: list[str] | None = None
    taking = False
    for arg in own:
        flag, eq, value = arg.partition("=")
        if flag in SESSION_FLAGS:
            named, taking = named or [], not eq
            named += value.split(",") if eq else []
        elif arg.startswith(("-s", "-e")) and len(arg) > 2 and not arg.startswith("--"):
            named = (named or []) + arg[2:].split(",")
            taking = False
        elif arg.startswith("-"):
            taking = False
        elif taking and named is not None:
            named += arg.split(",")
    return named


def hold(root: Path, head: str) -> tuple[IO[str] | None, str]:
    """Take the checkout's lock: (the open file that holds it, "") or, when another judgment
    holds it, (None, one line naming it)."""
    path = root / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+", encoding="utf-8")
    try:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = holder_text(handle.read())
        handle.close()
        return None, (
            f"another judgment is running in this checkout ({holder}); wait for it to end, or "
            "judge in another clone"
        )
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "head": head}))
    handle.flush()
    return handle, ""


def holder_text(text: str) -> str:
    try:
        found = json.loads(text)
        return f"pid {int(found['pid'])}, --head {found['head']}"
    except (ValueError, KeyError, TypeError):
        return "its pid not yet written"
