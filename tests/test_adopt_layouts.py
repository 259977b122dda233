"""Adopting projects of other layouts than python-slugify's: a version from git tags, a build
that cannot work here, tests with dependencies of their own, and adopt's check of its work (a
no-op patch judged on the adopted branch). Each is a real repository made here, adopted with
tools/adopt.py as `dev.py adopt` runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import PYPROJECT, TALLY, committed, flit_project
from tools import adopt, adopted_history
from tools.bakery import git

pytestmark = [pytest.mark.adopted, pytest.mark.usefixtures("identity")]


HATCH_VCS = """\
[build-system]
requires = ["hatchling", "hatch-vcs"]
build-backend = "hatchling.build"

[project]
name = "tagged"
dynamic = ["version"]
description = "Versioned by its git tags."

[project.scripts]
tagged = "tagged:main"

[tool.hatch.version]
source = "vcs"
"""


@pytest.mark.e2e
def test_a_project_versioned_by_git_tags_is_adopted(tmp_path: Path, wheelhouse: Path) -> None:
    """hatch-vcs reads the version from the repository's tags: adopt builds from a clone that
    has them (a `git archive` copy has none), and sets no variable for it."""
    module = '"""Tagged."""\n\n\ndef main() -> int:\n    print("tagged")\n    return 0\n'
    repo = committed(
        tmp_path / "tagged", {"pyproject.toml": HATCH_VCS, "src/tagged/__init__.py": module}
    )
    git(repo, "tag", "v1.4.0")
    argv = [str(repo), "--wheelhouse", str(wheelhouse), "--owners", "@org/gate", "--tests", "src"]
    assert adopt.main([*argv, "--no-check"]) == 0  # it has no tests to judge with
    assert 'command: "tagged"' in git(repo, "show", f"{adopt.BRANCH}:oracle/judge.yaml")
    pins = git(repo, "show", f"{adopt.BRANCH}:scripts/requirements-judge.txt")
    assert "hatch-vcs==" in pins
    assert "SETUPTOOLS_SCM_PRETEND_VERSION" not in pins


SETUP_PY_NEEDS_A_TOOLCHAIN = """\
import shutil
from setuptools import setup

if shutil.which("cargo-that-is-not-here") is None:
    raise RuntimeError("cargo-that-is-not-here not found: install the Rust toolchain")
setup(name="needs-rust", version="1.0", entry_points={"console_scripts": ["nr = nr:main"]})
"""


@pytest.mark.e2e
def test_a_build_that_cannot_work_here_names_what_is_missing(
    tmp_path: Path, wheelhouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = committed(tmp_path / "needs-rust", {"setup.py": SETUP_PY_NEEDS_A_TOOLCHAIN})
    assert adopt.main([str(repo), "--wheelhouse", str(wheelhouse), "--owners", "@org/gate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "adopt: building a wheel failed: RuntimeError: cargo-that-is-not-here not found: "
        "install the Rust toolchain"
    ]


COUNTED = (
    PYPROJECT.replace('name = "tally"', 'name = "counted"')
    .replace(
        "dependencies = []",
        'dependencies = []\n\n[project.optional-dependencies]\ntest = ["pytest-mock>=3"]',
    )
    .replace('tally = "tally:main"', 'counted = "counted:main"')
)
MOCKED = """import counted


def test_main_prints_the_count(mocker, capsys):
    mocker.patch.object(counted.sys, "argv", ["counted", "a", "b"])
    assert counted.main() == 0
    assert capsys.readouterr().out == "2\\n"
"""


@pytest.mark.e2e
def test_the_tests_own_dependencies_are_pinned_and_the_first_judge_merges(
    tmp_path: Path, wheelhouse: Path
) -> None:
    """The tests need pytest-mock (its `mocker` fixture, a plugin pytest loads by name only):
    adopt finds the extra, pins it, names it in test_extra; after one case, a no-op patch
    merges with no hand edit. `--as-of` pins it as it was then (an old commit's history)."""
    repo = committed(
        tmp_path / "counted",
        {
            "pyproject.toml": COUNTED,
            "counted.py": TALLY,
            "tests/test_counted.py": MOCKED,
            ".github/CODEOWNERS": "* @counted/owners\n",
        },
    )
    as_of = ["--as-of", "2023-01-01T00:00:00Z"]  # pytest-mock 3.10.0 then, 3.11.1 in June
    assert adopt.main([str(repo), "--wheelhouse", str(wheelhouse), *as_of]) == 0
    judge_yaml = git(repo, "show", f"{adopt.BRANCH}:oracle/judge.yaml")
    assert 'test_extra: "test"' in judge_yaml
    pins = git(repo, "show", f"{adopt.BRANCH}:scripts/requirements-judge.txt")
    assert "pytest-mock==3.10.0 " in pins
    assert "pytest-mock as they were on 2023-01-01" in pins
    rules = [line.split() for line in (repo / ".github/CODEOWNERS").read_text().splitlines()]
    assert ["/oracle/", "@counted/owners"] in rules
    git(repo, "checkout", "-q", "trunk")
    git(repo, "merge", "-q", "--ff-only", adopt.BRANCH)
    adopted_history.nox(repo, wheelhouse, "-s", "case", "--", "--", "one", "two")
    git(repo, "commit", "-q", "-m", "a case", "oracle/cases.yaml")
    git(repo, "checkout", "-q", "-b", "no-op")
    git(repo, "commit", "-q", "--allow-empty", "-m", "nothing")
    git(repo, "checkout", "-q", "trunk")
    adopted_history.nox(
        repo, wheelhouse, "-s", "judge", "--", "--head", "no-op", "--fresh", check=False
    )
    report = json.loads((repo / "reports/judge-report.json").read_text())
    steps = {step["name"]: step for step in report["steps"]}
    assert report["verdict"] == "merge", [s["summary"] for s in report["steps"]]
    assert steps["crossrun"]["evidence"]["parent_passing"] == 1  # --fresh: it ran


LIBRARY = flit_project("chunks", None)
CHUNKS = """\
\"\"\"Splits lists.\"\"\"


def chunked(items, n):
    return [items[i : i + n] for i in range(0, len(items), n)]
"""
CHUNKS_TEST = """\
from chunks import chunked


def test_chunked():
    assert chunked([1, 2, 3], 2) == [[1, 2], [3]]
"""


@pytest.mark.e2e
def test_a_library_adopted_with_command_python_gets_an_import_case_and_its_check_merges(
    tmp_path: Path, wheelhouse: Path
) -> None:
    """No console script: the cases are Python command lines. Python's own `--help` names the
    interpreter's path, which differs between the parent's environments, so the first case
    imports the library instead; adopt's check (a no-op patch, one touching a test) merges."""
    files = {"pyproject.toml": LIBRARY, "chunks.py": CHUNKS, "tests/test_chunks.py": CHUNKS_TEST}
    # Flask's .gitignore has `env*`, which matches scripts/_gate/runs/envs.py; and a yaml rule.
    files[".gitignore"] = "env*\n*.yaml\n"
    repo = committed(tmp_path / "chunks", files)
    argv = [str(repo), "--wheelhouse", str(wheelhouse), "--owners", "@org/gate"]
    assert adopt.main([*argv, "--command", "python"]) == 0
    cases = git(repo, "show", f"{adopt.BRANCH}:oracle/cases.yaml")
    assert '  - id: "import"\n    argv: ["-c", "import chunks"]\n' in cases, cases
    assert 'command: "python"' in git(repo, "show", f"{adopt.BRANCH}:oracle/judge.yaml")
    tracked = git(repo, "ls-files", "scripts/_gate/runs/envs.py", "oracle/judge.yaml").split()
    assert tracked == ["oracle/judge.yaml", "scripts/_gate/runs/envs.py"]


@pytest.mark.e2e
def test_adopt_names_each_step_a_no_op_patch_does_not_pass(
    tmp_path: Path, wheelhouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its one test fails on the base: the crossrun has no reference, and adopt says so, with
    the step and its line, and keeps the branch for the fix."""
    failing = "import tally\n\n\ndef test_it():\n    assert tally.main() == 1\n"
    files = {"pyproject.toml": PYPROJECT, "tally.py": TALLY, "tests/test_tally.py": failing}
    repo = committed(tmp_path / "tally", {**files, "CODEOWNERS": "* @tally/owners\n"})
    assert adopt.main([str(repo), "--wheelhouse", str(wheelhouse)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("adopt: adopted: "), err
    assert "but a no-op patch does not merge there yet" in err[0]
    assert "crossrun: none of the parent's 1 tests passes on the parent build" in err[0]
    assert git(repo, "branch", "--show-current") == adopt.BRANCH
