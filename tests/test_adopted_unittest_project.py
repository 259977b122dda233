"""The gate adopted on a real project with a unittest-style suite that reads data relative to the
repository root, then judged over two of its last ten upstream commits (issue 24).

tests/data/yamllint-slice.bundle holds 13 first-parent commits of adrienverge/yamllint, made as
tests/test_history.py describes for its slices: a root commit with the tree of 866f805a
(2025-08-03), then every first-parent commit of 866f805a..754ccb9 (2026-06-26) with its original
tree, author, dates and message and an `Original-commit:` trailer. The project: a setuptools
pyproject.toml with a dynamic version, a `yamllint` console script, about 430 tests in
unittest.TestCase classes under tests/ (tests/test_spec_examples.py opens
`tests/yaml-1.2-spec-examples/...` from the working directory), and a `dev` list of lint and
docs tools, not test dependencies. The gate is adopted at the slice's third commit (upstream
e3d54cc, 2025-09-10). Two of the ten commits after it are judged, a docs edit whose build is the
parent's and the block; the others (a docs fix in code, a second README edit, bug fixes with
their tests, two CI edits, a dependency's new minimum, a release) land on the base unjudged, to
keep the suite's time; all ten judge by hand with `python -m tools.adopted_history` (the
verdicts the others got are below).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import slice_rows
from tools import adopt
from tools.bakery import git
from tools.slices import YAMLLINT

pytestmark = [pytest.mark.adopted, pytest.mark.usefixtures("identity")]

# A reviewer's verdicts, from each diff. The non-printable commit turns a crash (ReaderError,
# which a parent test asserts) into a syntax error and edits that test: the behaviour a
# maintainer's test pins changed, which merges through a reviewed `crossrun` allowlist row (the
# block's summary prints the command). The rest are fixes with their tests, docs (two README
# edits build as the parent does: their runs are the parent's), a release and a dependency's
# new minimum.
VERDICTS = [
    ("README: Enhance wording of recursive directory lint", "merge"),
    ("linter: Report non-printable characters as a syntax error", "block"),
]
# Judged by hand, the others: "quoted-strings: Add missing quote-type: consistent docs",
# "README: Add Alpine Linux installation instructions", "indentation: Fix error message for
# check-multi-line-strings", "Require pathspec ≥ 1.0.0 ...", "yamllint version 1.38.0" and
# "truthy: Don't carry %YAML version into the next document" merge; "Drop support for Python
# 3.9" and "build: Use 'dev' dependency group for PEP 735 compliance" edit .github/workflows, a
# code owner's review.
JUDGED = ("main~8", "main~1")


@pytest.mark.e2e(heavy=True)  # an adoption and whole judges: started first
def test_a_unittest_project_reading_root_relative_data_is_judged_right_from_adoption(
    tmp_path: Path, wheelhouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    picked = [f"--commit={rev}" for rev in JUDGED]
    rows = slice_rows(YAMLLINT, tmp_path, wheelhouse, *picked)
    printed = capsys.readouterr().out
    assert "a no-op patch merges on it" in printed  # adopt judged its own work first
    repo = tmp_path / "repo"
    judge_yaml = git(repo, "show", f"{adopt.BRANCH}:oracle/judge.yaml")
    assert 'command: "yamllint"' in judge_yaml
    assert 'tests: ["tests"]' in judge_yaml
    # Its adopted manual is of its own flat layout and console script, not the bake's.
    manual = git(repo, "show", f"{adopt.BRANCH}:oracle/README.md")
    assert "`yamllint = yamllint.cli:run`, in `yamllint/cli.py`" in manual, manual[:2000]
    assert "src/" not in manual
    assert "cookiecutter" not in manual
    # Its `dev` list is lint and docs tools: the tests collect without it, so it is not theirs.
    assert 'test_extra: ""' in judge_yaml
    assert "sphinx" not in git(repo, "show", f"{adopt.BRANCH}:scripts/requirements-judge.txt")
    cases = git(repo, "show", "base:oracle/cases.yaml")
    assert cases.count("  - id: ") == 4  # adopt's --help and the three
    # `--version` prints the build's own version: its stdout is left out of the comparison.
    version = cases[cases.index('argv: ["--version"]') :].splitlines()[1]
    assert version.strip().startswith("compare: ["), version
    assert "stdout" not in version, version
    assert [(row["subject"], row["verdict"]) for row in rows] == VERDICTS
    # The docs commit builds as the parent did (the README is in METADATA, left out of the
    # comparison); the fix does not.
    assert [row["subject"] for row in rows if row["same_build"]] == [
        "README: Enhance wording of recursive directory lint",
    ]
    for row in rows:
        assert f"{row['seconds']:6.1f} s {row['commit'][:12]}" in printed
    pinned = next(row["why"] for row in rows if row["verdict"] == "block")
    assert pinned.startswith("crossrun: ")
    assert "test_quoted_strings.py::" in pinned
    # The crossrun ran the whole suite from the root of its copy: the spec examples read.
    report = json.loads((repo / "reports/crossrun.json").read_text())
    parent = report["evidence"]["parent"]
    spec = [node for node in parent if node.startswith("tests/test_spec_examples.py::")]
    assert spec
    assert all(parent[node] == "passed" for node in spec)
    assert report["evidence"]["parent_passing"] > 400
