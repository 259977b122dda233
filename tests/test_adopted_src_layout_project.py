"""The gate adopted on a real src-layout project versioned by git tags through hatch-vcs, whose
tests need dependencies of their own, then judged over two of its next five upstream commits:
a contract change and a feature (issue 24). The others (two workflow edits, a pre-commit
update) land on the base unjudged (a workflow edit's needs-review is judged on the other
projects' histories), and the five pre-commit and README updates after them are left to `python -m
tools.adopted_history` by hand, to keep the suite's time; they judge as the verdicts below say.

tests/data/pyproject-fmt-slice.bundle holds 12 first-parent commits of tox-dev/pyproject-fmt
from before its Rust rewrite, made as tests/test_history.py describes for its slices: a root
commit with the tree of 3793911 (2024-01-03), then every first-parent commit of
3793911..64fb469 (2024-02-19) with its original tree, author, dates and message and an
`Original-commit:` trailer; upstream's tags 1.6.0 and 1.7.0 sit on the commits they named, and
1.5.3, the last tag before the root, on the root. The project: hatchling with hatch-vcs (the
version from those tags, written into `src/pyproject_fmt/_version.py` at build time), a
`pyproject-fmt` console script, about 100 pytest tests under tests/ that need the `test`
extra (covdefaults, pytest-cov, pytest-mock).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import history_rows
from tools import adopt
from tools.bakery import TEMPLATE, git

pytestmark = [pytest.mark.adopted, pytest.mark.usefixtures("identity")]

SLICE = TEMPLATE / "tests" / "data" / "pyproject-fmt-slice.bundle"
MESSY = """\
[project]
version = "1.0"
name = "demo"
dependencies = ["requests>=2", "Click"]
classifiers = ["Programming Language :: Python :: 3 :: Only"]
requires-python = ">=3.8"

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.demo]
x = 1
"""
# A formatter's cases, in a copy of fixtures/project: the file formatted to stdout, the check
# that fails on it (exit 1, on purpose: --yes), and a path that is not there (exit 2).
CASES = [
    "--yes --cwd project -- --stdout pyproject.toml",
    "--yes --cwd project -- --check --indent 4 pyproject.toml",
    "--yes -- --stdout missing/pyproject.toml",
]
# A reviewer's verdicts, from each diff. The first adds the CLI option --max-supported-python:
# `--help` only grows, which its case (adopt's, `stdout.additive`) lets pass, showing the lines
# added; but the missing-path case's stderr is argparse's error under the usage line, which
# the option lengthens, and that case compares stderr by its SHA-256: the CLI's surface
# changed, so it blocks until a reviewed allowlist row lets it (the block's message gives the
# command that writes the row). The two workflow edits wait
# for a code owner; the rest are a feature read from pyproject.toml, the README and
# pre-commit's hook updates. Every commit has a version of its own: no build is its parent's.
VERDICTS = [
    ("Support adding the classifier for the current Python prerelease (#162)", "block"),
    ("Configure pyproject-fmt options from `pyproject.toml` file (#169)", "merge"),
]
# Judged by hand, the others: "Update release.yml" and 'Fix the "Release to PyPI" workflow and
# add check-jsonschema as a pre-commit hook ... (#167)' (.github/workflows) need review;
# "[pre-commit.ci] pre-commit autoupdate (#168)" and "Update README.md" merge.
JUDGED = ("main~9", "main~5")


@pytest.mark.e2e(heavy=True)  # an adoption and whole judges: started first
def test_a_src_layout_project_versioned_by_tags_with_test_dependencies_is_judged_right(
    tmp_path: Path, wheelhouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixtures = tmp_path / "fixtures"
    (fixtures / "project").mkdir(parents=True)
    (fixtures / "project/pyproject.toml").write_text(MESSY, "utf-8")
    options = ("--count", "5", "--fixtures", str(fixtures), *(f"--commit={r}" for r in JUDGED))
    (tmp_path / "work").mkdir()
    rows = history_rows(SLICE, "main~10", tmp_path / "work", wheelhouse, CASES, *options)
    printed = capsys.readouterr().out
    assert "a no-op patch merges on it" in printed  # adopt judged its own work first
    repo = tmp_path / "work/repo"
    judge_yaml = git(repo, "show", f"{adopt.BRANCH}:oracle/judge.yaml")
    assert 'command: "pyproject-fmt"' in judge_yaml
    assert 'tests: ["tests"]' in judge_yaml
    assert 'test_extra: "test"' in judge_yaml  # the tests' own dependencies, pinned
    pins = git(repo, "show", f"{adopt.BRANCH}:scripts/requirements-judge.txt")
    assert "pytest-mock==" in pins
    assert "hatch-vcs==" in pins
    cases = git(repo, "show", "base:oracle/cases.yaml")
    assert cases.count('    cwd: "project"\n') == 2
    assert [(row["subject"], row["verdict"]) for row in rows] == VERDICTS
    assert not any(row["same_build"] for row in rows)  # hatch-vcs: a version per commit
    why = rows[0]["why"]
    assert why.startswith("replay: 1 compared fields changed (first: stdout-missing-pyproject")
    assert "nox -s allow -- --id stdout-missing-pyproject-toml --field stderr.sha256" in why
    # The help grew (--max-supported-python added), and the cases ran perturbed too.
    assert "; 1 additive fields grew; perturbed: env, " in why
    # The builds took their version from the tags: hatch-vcs wrote it into the wheel.
    build = json.loads((repo / "reports/judge-report.json").read_text())["steps"][3]
    assert build["name"] == "build"
    assert build["status"] == "pass"
    generated = json.dumps(build["evidence"])
    assert "pyproject_fmt/_version.py" in generated
