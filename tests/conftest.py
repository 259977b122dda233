"""Fixtures shared by the template's tests: one wheelhouse, real bakes, real repositories."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tools.bakery import TEMPLATE, bake, git

SCRIPTS = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"
Built = Callable[[str, str], dict[str, Path]]  # (ref, side) -> {"tree": ..., "python": ...}


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first: pytest-xdist gives each worker whole modules in this order, and a module
    of whole judges started last would finish alone. `e2e(heavy=True)` goes first of all."""

    def weight(item: pytest.Item) -> int:
        mark = item.get_closest_marker("e2e")
        return 0 if mark is None else 2 if mark.kwargs.get("heavy") else 1

    items.sort(key=weight, reverse=True)


@pytest.fixture(scope="session", autouse=True)
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fill the judges' shared wheelhouse once (the only download); every judge is offline."""
    path = Path(os.environ.get("ORACLE_WHEELHOUSE") or TEMPLATE / ".cache" / "wheelhouse")
    os.environ["ORACLE_WHEELHOUSE"] = str(path)
    report = tmp_path_factory.mktemp("wheelhouse") / "report.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # pytest-xdist workers share the wheelhouse: one fills it, the others then find it full.
    with open(path.parent / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # The judge's set, and the strength session's (the judge's and mutmut's, one set).
        for names in (["judge"], ["judge", "strength"]):
            cmd = [sys.executable, str(SCRIPTS / "wheelhouse.py"), "--dest", str(path)]
            for name in names:
                cmd += ["--requirements", str(SCRIPTS / f"requirements-{name}.txt")]
            proc = subprocess.run([*cmd, "--report", str(report)], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr
    return path


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default bake, shared by a module whose tests each judge their own branch."""
    return bake(tmp_path_factory.mktemp("bake"))


def compiled(python: Path) -> Path:
    """`python`'s environment with its bytecode compiled, for a fixture whose environment runs
    many pytest processes: the judge's fresh builds go without, and bytecode changes nothing
    a run finds, only what each start costs (a third of a short run)."""
    lib = python.parent.parent / "lib"
    subprocess.run([str(python), "-m", "compileall", "-q", "-j", "0", str(lib)], check=True)
    return python


def builder(repo: Path, root: Path, wheelhouse: Path) -> Built:
    """Worktree and build of a commit, as the judge makes them, each built once: a step's
    script then runs on them (`main(argv)`) without a whole judge. `side` names the
    environment's folder (parent or patch), which some tests read back."""
    done: dict[tuple[str, str], dict[str, Path]] = {}
    sys.path.insert(0, str(SCRIPTS))
    from _gate.envs import build_env

    def built(ref: str, side: str) -> dict[str, Path]:
        sha = git(repo, "rev-parse", ref).strip()
        if (sha, side) not in done:
            tree = root / sha[:12] / "tree"
            if not tree.exists():
                git(repo, "worktree", "add", "-q", "--detach", str(tree), sha)
            requirements = tree / "scripts/requirements-judge.txt"
            python = build_env(tree, root / sha[:12] / side, wheelhouse, requirements)
            done[sha, side] = {"tree": tree, "python": python}
        return done[sha, side]

    return built
