"""Fixtures shared by the template's tests: one wheelhouse, real bakes, real repositories."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.bakery import TEMPLATE, bake

SCRIPTS = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"


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
