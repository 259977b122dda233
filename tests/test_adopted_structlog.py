"""structlog adopted (issue 50): hatchling with hatch-vcs and hatch-fancy-pypi-readme, a src
layout, no console script (`--command python`), about 850 pytest tests, and a `dev` extra that
names the project's own `structlog[tests,typing]`, which hatchling writes out row by row into
the wheel's metadata.

tests/data/structlog-slice.bundle (tools/slices.py) is adopted at its root with the one
command. Its last commit is judged, after the one that moves the tests' requirements from the
`tests` extra to a dependency group (it lands unjudged here); all fifteen, by hand, are in the
README's table.
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.helpers import slice_rows
from tools.adopt import BRANCH
from tools.bakery import git
from tools.slices import STRUCTLOG

pytestmark = [pytest.mark.adopted, pytest.mark.usefixtures("identity")]
# A reviewer's verdict: a change of the JSON form of tracebacks (two new keys) that edits the
# parent tests pinning the old form, so it merges only through a reviewed crossrun row.
VERDICTS = [("tracebacks: Handle ExceptionGroup (#720)", "block")]


@pytest.mark.e2e(heavy=True)  # an adoption and whole judges: started first
def test_structlog_is_adopted_and_its_commits_judged(tmp_path: Path, wheelhouse: Path) -> None:
    rows = slice_rows(STRUCTLOG, tmp_path, wheelhouse, "--commit=main")
    assert [(row["subject"], row["verdict"]) for row in rows] == VERDICTS, rows
    assert "tests/test_tracebacks.py::test_json_traceback" in rows[0]["why"]
    assert not rows[0]["same_build"]  # hatch-vcs: a version per commit
    repo = tmp_path / "repo"
    # The provenance check took the wheel's written-out rows for the declared self-reference.
    declared = git(repo, "show", f"{BRANCH}:pyproject.toml")
    assert 'dev = ["structlog[tests,typing]"]' in declared
    # The adopted commit's wheel, built by its backend in the judge's environment: hatchling
    # writes the self-reference out (the kept environments are pruned, so they are not read).
    tree = tmp_path / "adopted"
    git(repo, "worktree", "add", "-q", "--detach", str(tree), BRANCH)
    build = "import hatchling.build as b, sys; print(b.build_wheel(sys.argv[1]))"
    python = repo / ".nox/judge/bin/python"
    wheel = subprocess.run(
        [str(python), "-c", build, str(tmp_path / "wheel")],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[-1]
    with zipfile.ZipFile(tmp_path / "wheel" / wheel) as built:
        metadata = next(n for n in built.namelist() if n.endswith(".dist-info/METADATA"))
        assert "Requires-Dist: freezegun>=0.2.8; extra == 'dev'" in built.read(metadata).decode()
    # The tests' requirements are the `tests` extra's, not the `dev` extra's typing tools.
    pins = git(repo, "show", f"{BRANCH}:scripts/requirements-judge.txt")
    assert "freezegun==" in pins, pins
    assert "pretend==" in pins, pins
    assert "mypy==" not in pins, pins
