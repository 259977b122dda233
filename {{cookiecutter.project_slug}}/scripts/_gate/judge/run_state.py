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
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from _gate.core.owned import abandoned, owned_folder
from _gate.core.protocol import ERROR, FAIL_CLOSED
from _gate.core.reports import write_report
from _gate.core.steps import STEPS, report_file
from _gate.runs.git import git
from _gate.runs.sandbox import STATUS_PREFIX

PREFIX = "oracle-judge-"
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
    """The judgment's temporary folder, marked with its owner, and removed on every way out."""
    folder = owned_folder(PREFIX)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def remove_leftovers(repo: Path) -> list[Path]:
    """Remove the judgment folders of this machine's temporary folder whose judgment no longer
    runs, with the worktrees `repo` registered in them, and the launchers' status folders of
    processes killed outright; the folders removed."""
    gone = [*abandoned(PREFIX), *abandoned(STATUS_PREFIX)]
    for folder in gone:
        shutil.rmtree(folder, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)  # registrations whose folder is now gone
    return gone
