"""Bad input fails closed: one clear line naming the file and the fix, exit 2, no traceback.

Each judgment stops before anything is built, so the base checkout's scripts/judge.py runs as
nox runs it, without nox (tests/test_exit_codes.py covers the session's exit)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tools.bakery import Verdict, git
from tools.bakery import judge_script as judge


def clone(shop: Path, tmp_path: Path) -> Path:
    """A clone of the bake, so a broken base does not leak into other tests."""
    target = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(shop), str(target)], check=True)
    return target


def commit_on_base(repo: Path, message: str) -> None:
    """Commit and publish as origin/main, so the change is part of the base, not a patch."""
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "--no-verify", "-m", message)
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")


def fail_line(verdict: Verdict) -> str:
    """The single line the judge prints for the step that failed closed."""
    assert "Traceback" not in verdict.output
    lines = [line for line in verdict.output.splitlines() if ": fail-closed: " in line]
    assert lines, verdict.output
    return lines[0]


def test_malformed_cases_yaml(shop: Path, tmp_path: Path) -> None:
    repo = clone(shop, tmp_path)
    (repo / "oracle/cases.yaml").write_text("cases:\n  - id: [unclosed\n")
    commit_on_base(repo, "break cases")
    verdict = judge(repo)
    assert verdict.returncode == 2
    line = fail_line(verdict)
    assert "base:oracle/cases.yaml: line 3: malformed YAML" in line


def test_missing_matrix(shop: Path, tmp_path: Path) -> None:
    repo = clone(shop, tmp_path)
    git(repo, "rm", "-q", "oracles/MATRIX.md")
    commit_on_base(repo, "drop the table")
    verdict = judge(repo)
    assert verdict.returncode == 2
    assert "oracles/MATRIX.md is missing" in fail_line(verdict)
    assert verdict.statuses == {"preconditions": "fail-closed"}


def test_not_a_git_repository(shop: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(
        shop, plain, ignore=shutil.ignore_patterns(".git", ".nox", ".oracle", "reports")
    )
    verdict = judge(plain)
    assert verdict.returncode == 2
    assert "is not a git repository" in fail_line(verdict)


def test_unknown_base_ref(shop: Path) -> None:
    verdict = judge(shop, "--base", "no-such-ref")
    assert verdict.returncode == 2
    assert "--base 'no-such-ref' is not a commit" in fail_line(verdict)


@pytest.mark.parametrize("variable", ["MODEL_ENDPOINT", "ANTHROPIC_API_KEY"])
def test_model_endpoint_variable(shop: Path, variable: str) -> None:
    verdict = judge(shop, env={variable: "https://model.invalid"})
    assert verdict.returncode == 2
    assert variable in fail_line(verdict)


def test_shallow_clone_without_merge_base(shop: Path, tmp_path: Path) -> None:
    source = clone(shop, tmp_path)
    (source / "NOTES.md").write_text("a second commit on main\n")
    commit_on_base(source, "second")
    git(source, "checkout", "-q", "-b", "agent", "HEAD~1")
    (source / "AGENT.md").write_text("the agent's work\n")
    git(source, "add", "--all")
    git(source, "commit", "-q", "--no-verify", "-m", "agent work")
    shallow = tmp_path / "shallow"
    url = f"file://{source}"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", "--no-single-branch", url, str(shallow)], check=True
    )
    verdict = judge(shallow, "--head", "origin/agent")
    assert verdict.returncode == 2
    assert "no merge base" in fail_line(verdict)
