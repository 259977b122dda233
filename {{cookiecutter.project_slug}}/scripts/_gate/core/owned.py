"""Temporary folders marked with the process that owns them (docs/faults.md).

A process killed outright (kill -9, an interrupt's SIGKILL to a step's process) runs no cleanup:
its folders stay. Each is made with an `owner.json` naming its pid and that process's start
time, so a later judgment can tell a folder whose owner is gone (`abandoned`) from one in use,
a reused pid included.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path

OWNER = "owner.json"


def owned_folder(prefix: str) -> Path:
    """A new folder of this machine's temporary folder (resolved: pytest writes resolved
    paths), marked as this process's."""
    folder = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    (folder / OWNER).write_text(mark(os.getpid()), "utf-8")
    return folder


@functools.cache
def mark(pid: int) -> str:
    """The owner mark of this process (of `pid`, its own: a forked child asks with its own),
    read from /proc once: every confined job's status folder carries it."""
    return json.dumps({"pid": pid, "start": process_start(pid)})


def abandoned(prefix: str) -> list[Path]:
    """The folders `prefix` names in this machine's temporary folder whose owner has ended."""
    found = Path(tempfile.gettempdir()).glob(f"{prefix}*")
    return [path for path in found if path.is_dir() and not running(path)]


def process_start(pid: int) -> str:
    """When process `pid` started, in clock ticks since boot ("" where /proc cannot tell):
    a pid reused by another process has another start."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text("utf-8")
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[19]


def running(folder: Path) -> bool:
    """Whether the process that owns `folder` still runs: a folder without an owner (one
    being made, or an older gate's) counts as running."""
    try:
        owner = json.loads((folder / OWNER).read_text("utf-8"))
        pid, start = int(owner["pid"]), str(owner["start"])
    except (OSError, ValueError, KeyError, TypeError):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not start or process_start(pid) in ("", start)
