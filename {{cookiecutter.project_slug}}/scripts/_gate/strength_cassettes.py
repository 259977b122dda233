"""The cassettes as pytest tests, for mutmut: one test per recorded case (scripts/strength.py).

Each test replays its case against the console script of this environment, out of process,
with $MUTANT_UNDER_TEST (mutmut sets it in the worker it forks for a mutant) and the mutated
source first on PYTHONPATH, and compares the case's fields with the recording of the unmutated
build (record_cassettes.record: the fields stable over its runs). mutmut learns which functions
each test reaches in a pass of its own, in process, with $MUTANT_UNDER_TEST=stats; calls made
in a subprocess are not seen there, so in that pass the case runs in this process, through the
console script's entry point.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import shutil
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from _gate.cases import Case, Scratch, holds, load_cases, observe, run_case

RECORDING: dict[str, Any] = json.loads(
    Path(os.environ["ORACLE_STRENGTH_RECORDING"]).read_text("utf-8")
)
CASES = {case.id: case for case in load_cases(Path(RECORDING["cases"]))}


def reach(case: Case, tmp: Path) -> None:
    """Run the case in this process, for mutmut's coverage pass: what it reaches, not what
    it answers, so every exit and exception is the case's own business."""
    (script,) = entry_points(group="console_scripts", name=RECORDING["command_name"])
    work = tmp / "work"
    if case.cwd:
        shutil.copytree(Path(RECORDING["fixtures"]) / case.cwd, work)
    else:
        work.mkdir()
    saved = (sys.argv, sys.stdin, os.getcwd())
    sys.argv = [RECORDING["command_name"], *case.argv]
    sys.stdin = io.TextIOWrapper(io.BytesIO(case.stdin), encoding="utf-8")
    out, err = io.TextIOWrapper(io.BytesIO()), io.TextIOWrapper(io.BytesIO())
    try:
        os.chdir(work)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            script.load()()
    except (SystemExit, Exception):  # what it answers is the replay's to judge
        pass
    finally:
        sys.argv, sys.stdin = saved[0], saved[1]
        os.chdir(saved[2])


@pytest.mark.parametrize("case_id", sorted(RECORDING["expected"]))
def test_case_answers_as_recorded(case_id: str, tmp_path: Path) -> None:
    case = CASES[case_id]
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if mutant == "stats":
        reach(case, tmp_path)
        return
    mutated = os.environ["ORACLE_STRENGTH_MUTATED"]
    env = (*case.env, ("MUTANT_UNDER_TEST", mutant), ("PYTHONPATH", mutated))
    replayed = dataclasses.replace(case, env=env)
    run = run_case(
        Path(RECORDING["command"]), replayed, Path(RECORDING["fixtures"]), Scratch(tmp_path)
    )
    expected = RECORDING["expected"][case_id]  # the fields stable when recorded
    seen = json.loads(json.dumps(observe(case, run)))
    # As replay judges a field: a mutant that only adds to an additive field is not caught.
    changed = {f: seen.get(f) for f, value in expected.items() if not holds(f, value, seen.get(f))}
    assert not changed, changed
