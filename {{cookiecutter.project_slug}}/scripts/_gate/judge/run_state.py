"""This judgment as its reports and folders know it (docs/faults.md).

`begin` removes whatever an earlier judgment left in the reports folder and writes a
judge-report.json saying this one has not finished (verdict `error`), so the folder never shows
another run's verdict: the finished report replaces it atomically, naming the same run. The
judgment's temporary folder (`judgment_folder`) holds its owner's pid and start time;
`remove_leftovers` removes the folders, and the git worktrees in them, of judgments whose
process is gone (killed, or past the interrupt's bound), which `git worktree prune` keeps
while their folders exist.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from _gate.core.protocol import ERROR, FAIL_CLOSED
from _gate.core.reports import write_report
from _gate.core.steps import STEPS, report_file
from _gate.runs.git import git

PREFIX = "oracle-judge-"
OWNER = "owner.json"
# What the judge writes into its reports folder (besides each step's report).
OWN_REPORTS = ("judge-report.json", "judge-summary.md", "judge.sarif")


@dataclass(frozen=True)
class Run:
    """One judgment: every report it writes names it."""

    id: str
    started: str  # UTC, ISO 8601
    pid: int


def begin(reports: Path) -> Run:
    """Clear `reports` of every report an earlier judgment wrote there, then say this one has
    not finished."""
    run = Run(uuid.uuid4().hex, now(), os.getpid())
    for name in (*OWN_REPORTS, *(report_file(step.name) for step in STEPS)):
        (reports / name).unlink(missing_ok=True)
    summary = (
        f"the judgment started {run.started} (pid {run.pid}) has not finished: it is running, "
        "or it was killed before it wrote its verdict"
    )
    unfinished = {"verdict": ERROR, "exit_code": int(FAIL_CLOSED), "finished": False}
    write_report(
        reports / OWN_REPORTS[0], {**unfinished, "judgment": asdict(run), "summary": summary}
    )
    return run


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


@contextmanager
def judgment_folder() -> Iterator[Path]:
    """The judgment's temporary folder (resolved: pytest writes resolved paths), marked with
    its owner, and removed on every way out."""
    folder = Path(tempfile.mkdtemp(prefix=PREFIX)).resolve()
    try:
        owner = {"pid": os.getpid(), "start": process_start(os.getpid())}
        (folder / OWNER).write_text(json.dumps(owner), "utf-8")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def process_start(pid: int) -> str:
    """When process `pid` started, in clock ticks since boot ("" where /proc cannot tell):
    a pid reused by another process has another start."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text("utf-8")
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[19]


def running(folder: Path) -> bool:
    """Whether the judgment that owns `folder` still runs: a folder without an owner (one
    being made, or an older judge's) counts as running."""
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


def remove_leftovers(repo: Path) -> list[Path]:
    """Remove the judgment folders of this machine's temporary folder whose judgment no longer
    runs, with the worktrees `repo` registered in them; the folders removed."""
    gone = [
        path
        for path in Path(tempfile.gettempdir()).glob(f"{PREFIX}*")
        if path.is_dir() and not running(path)
    ]
    for folder in gone:
        shutil.rmtree(folder, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)  # registrations whose folder is now gone
    return gone
