"""The process environment of the patch's code: every variable it sees, and none of the judge's.

Every run of the patch's code (a build and its checks, a case, the subject worker, the
crossrun, the inventory's and the advisory runs, `pytest --collect-only`, the environment
probe, strength's mutants) gets its variables from this module, never from the judge's own
environment: what a CI runner sets (`CI`, `GITHUB_*`, `RUNNER_*`), its tokens, and the gate's
own settings (`ORACLE_*`, `JUDGE_OFFLINE`, `PIP_*`, `UV_*`, `PYTHONPATH`) stay with the judge,
where code could key its behaviour on them. The docs/confinement.md table lists each variable
a confined job sees; tests/test_patch_env.py fails on one more.

- `PATH`: the build's scripts folder first (where a run has one), then the judge's `PATH`
  without the scripts folders of virtual environments (the nox session's that started the
  judge): the system's tools, as a user's shell finds them.
- `SYSTEMROOT`, on Windows only (Python needs it there).
- The gate's fixed variables (GATE): a terminal width, a locale, UTC, a hash seed, no colour,
  no bytecode written; or, in a perturbed run, a user's (_gate/runs/perturb.py).
- HOME and TMPDIR: folders of the run's own scratch.

The oracle's own pytest process gets them too: its subject worker, which runs the patch's
code, starts from it, and a trusted test reads no more of the judge than the patch's code.

A file of the standard library only: the subject plugin, in a trusted pytest run where no
other module of scripts/ is importable, builds the worker's environment from it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# The gate's own fixed environment: the same on every machine.
GATE = {
    "NO_COLOR": "1",
    "TZ": "UTC",
    "LC_ALL": "C.UTF-8",
    "COLUMNS": "80",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
}
PASS_THROUGH = ("SYSTEMROOT",)  # what the judge's environment gives, as it is


def search_path(*first: Path, judge: Mapping[str, str] = os.environ) -> str:
    """PATH: the folders `first`, then the judge's PATH without virtual environments' scripts
    folders (a folder whose parent holds a pyvenv.cfg)."""
    folders = (judge.get("PATH") or os.defpath).split(os.pathsep)
    kept = [f for f in folders if f and not (os.path.isabs(f) and in_venv(Path(f)))]
    return os.pathsep.join([*map(str, first), *kept])


def in_venv(folder: Path) -> bool:
    return (folder.parent / "pyvenv.cfg").is_file()


def passed(judge: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables of the judge's environment a run keeps as they are."""
    return {key: judge[key] for key in PASS_THROUGH if key in judge}


def gate_env(home: Path, tmp: Path, *first: Path) -> dict[str, str]:
    """The environment of a run in the gate's own scene: HOME and TMPDIR given, PATH with the
    folders `first` before the system's."""
    env = {**passed(), "PATH": search_path(*first), **GATE}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    return env
