"""Flask adopted (issue 50): a click CLI with setup.py beside setup.cfg, about 480 pytest tests
(fixtures, CliRunner tests, `filterwarnings = error`), its tests' requirements compiled by
pip-tools into requirements/tests.txt from requirements/tests.in.

tests/data/flask-slice.bundle (tools/slices.py) is adopted at its root with the one command,
its requirements as they were that day (`--as-of-start`: Werkzeug 3 and pytest 8 break Flask
2.2). Two of its thirteen commits are judged; all thirteen, by hand, are in the README's
table. Tried first, adoption failed four ways (the .txt's transitive pins broke the build's
setuptools, a marker-only requirement was required, `.gitignore`'s `env*` hid a file of the
gate, today's Werkzeug), then two commits blocked falsely: the routes case imports ./hello.py
and Python's bytecode cache of it differs from run to run, and a flake8 ignore in setup.cfg
needed a review. One parent test failed only under the gate (tests/test_evidence_plugin.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import slice_rows
from tools.adopt import BRANCH
from tools.bakery import git
from tools.slices import FLASK

pytestmark = [pytest.mark.adopted, pytest.mark.usefixtures("identity")]
# A reviewer's verdicts: a feature with its tests, the switch to pyproject.toml (its
# [build-system] and a workflow: a code owner's review). The flake8 ignore in setup.cfg that
# needed a review before (main~9) merges by hand; tests/test_writeset.py holds that rule.
VERDICTS = [
    ("Merge pull request #4935 from pgjones/subdomain", "merge"),
    ("Merge pull request #4947 from pallets/pyproject", "needs-review"),
]


@pytest.mark.e2e(heavy=True)  # an adoption and whole judges: started first
def test_flask_is_adopted_and_its_commits_judged_right(tmp_path: Path, wheelhouse: Path) -> None:
    picked = ("--commit=main~4", "--commit=main~1")
    rows = slice_rows(FLASK, tmp_path, wheelhouse, *picked)
    assert [(row["subject"], row["verdict"]) for row in rows] == VERDICTS, rows
    assert "pyproject.toml (rule build configuration [build-system])" in rows[1]["why"]
    repo = tmp_path / "repo"
    judge_yaml = git(repo, "show", f"{BRANCH}:oracle/judge.yaml")
    assert 'test_extra: "requirements/tests.in"' in judge_yaml, judge_yaml
    pins = git(repo, "show", f"{BRANCH}:scripts/requirements-judge.txt")
    assert "werkzeug==2.2." in pins.lower()
    assert "pytest==7." in pins
    # Every test that passes in Flask's own run passes under the gate, on the parent build.
    crossrun = json.loads((repo / "reports/crossrun.json").read_text("utf-8"))["evidence"]
    failing = sorted(node for node, outcome in crossrun["parent"].items() if outcome == "failed")
    assert failing == [], failing
