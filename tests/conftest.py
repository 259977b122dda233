"""Fixtures shared by the template's tests: one wheelhouse, real bakes, real repositories."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.bakery import TEMPLATE, bake

SCRIPTS = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"


def alive(pid: int, grace: float = 5.0) -> bool:
    """Whether the process still runs `grace` seconds on: SIGKILL to a group is delivered at
    once but acted on when each process is next scheduled, later on a loaded machine."""
    deadline = time.monotonic() + grace
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split()[2] == "Z":
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


@pytest.fixture(scope="session", autouse=True)
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fill the judges' shared wheelhouse once (the only download); every judge is offline."""
    path = Path(os.environ.get("ORACLE_WHEELHOUSE") or TEMPLATE / ".cache" / "wheelhouse")
    os.environ["ORACLE_WHEELHOUSE"] = str(path)
    report = tmp_path_factory.mktemp("wheelhouse") / "report.json"
    cmd = [sys.executable, str(SCRIPTS / "wheelhouse.py"), "--dest", str(path)]
    cmd += ["--requirements", str(SCRIPTS / "requirements-judge.txt"), "--report", str(report)]
    path.parent.mkdir(parents=True, exist_ok=True)
    # pytest-xdist workers share the wheelhouse: one fills it, the others then find it full.
    with open(path.parent / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return path


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default bake, shared by a module whose tests each judge their own branch."""
    return bake(tmp_path_factory.mktemp("bake"))
