"""The gate's pytest plugin (scripts/_gate/plugin/pytest_evidence.py) in a real pytest process: a
test behaves under it as under the project's own run.

The plugin counts each `assert` that passes through pytest's pass hook. With the hook, pytest
builds the explanation of every passing assertion, which calls `locals()`; before Python
3.13 the frame keeps that snapshot, and with it every value the test held then. Flask's
test_app_freed_on_zero_refcount (`del app`, then the app must be gone) failed under the gate
on both builds, and passed in a plain environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "{{cookiecutter.project_slug}}" / "scripts"
FREED = """\
import gc
import weakref


class Box:
    value = 1


def test_freed_once_deleted():
    gc.disable()
    try:
        box = Box()
        assert box.value == 1
        weak = weakref.ref(box)
        assert weak() is not None
        del box
        assert weak() is None
    finally:
        gc.enable()


def test_holds_its_locals():
    total = 2
    names = locals()
    assert total == 2
    assert names["total"] == 2
"""


def run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_freed.py").write_text(FREED, "utf-8")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options]
    env = {"PYTHONPATH": str(SCRIPTS), "PATH": "", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)


def test_a_test_that_frees_what_it_deleted_passes_as_in_its_own_run(tmp_path: Path) -> None:
    assert run(tmp_path).returncode == 0  # the project's own run
    evidence = tmp_path / "evidence.json"
    options = ["-p", "_gate.plugin.pytest_evidence", f"--oracle-evidence={evidence}"]
    done = run(tmp_path, *options, "-o", "enable_assertion_pass_hook=true")
    assert done.returncode == 0, done.stdout[-2000:]
    tests = json.loads(evidence.read_text())["tests"]
    row = tests["test_freed.py::test_freed_once_deleted"]
    assert (row["outcome"], row["hits"]) == ("passed", 3)
    # A test that holds its frame's locals() dict finds it whole after a check.
    assert tests["test_freed.py::test_holds_its_locals"]["outcome"] == "passed"
