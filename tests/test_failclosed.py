"""Bad input fails closed: one clear line naming the file and the fix, exit 2, no traceback.

Each judgment stops before anything is built, so the base checkout's scripts/judge.py runs as
nox runs it, without nox (tests/test_exit_codes.py covers the session's exit), or, for a base
that has no gate yet, its main(argv) in this process."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import judge as judge_module
import pytest
from _gate.runs.kept_envs import LIMIT_ENV
from _gate.runs.reuse import RUNS_ENV

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
    """The single line the judge prints for the step that failed closed with an error."""
    assert "Traceback" not in verdict.output
    lines = [line for line in verdict.output.splitlines() if ": error: " in line]
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
    assert verdict.statuses == {"preconditions": "error"}


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


# --- a base without the gate: a project adopting it --------------------------------------------


def adopting(shop: Path, tmp_path: Path) -> tuple[Path, str]:
    """A project adopting the gate: its upstream branch (origin/main) has no gate yet, and the
    checkout (main) is the branch that adds it. Returns the repository and the upstream."""
    repo = clone(shop, tmp_path)
    git(repo, "checkout", "-q", "--orphan", "upstream")
    git(repo, "rm", "-rqf", ".")
    (repo / "UPSTREAM.md").write_text("the project before the gate\n")
    git(repo, "add", "UPSTREAM.md")
    git(repo, "commit", "-q", "--no-verify", "-m", "upstream")
    upstream = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--allow-unrelated-histories", "-m", "adopt the gate", "upstream")
    git(repo, "update-ref", "refs/remotes/origin/main", upstream)
    return repo, upstream


def judged_in_process(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, dict[str, Any], str]:
    """scripts/judge.py's main(argv) on `repo`: its exit code, its report and its output."""
    reports = tmp_path / "reports"
    code = judge_module.main(["--repo", str(repo), "--reports", str(reports), *argv])
    report = json.loads((reports / "judge-report.json").read_text("utf-8"))
    return code, report, capsys.readouterr().out


FIX = "merge the branch that adds it into main first, or pass --base REF of a commit that has it"


@pytest.mark.parametrize("where", ["origin/main", "main"])
def test_a_base_branch_without_the_gate_says_so_and_how_to_fix_it(
    shop: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    repo, upstream = adopting(shop, tmp_path)
    if where == "main":  # no remote: the local branch is the base
        git(repo, "checkout", "-q", "-b", "adopt-the-gate")
        git(repo, "branch", "-f", "main", upstream)
        git(repo, "update-ref", "-d", "refs/remotes/origin/main")
    code, report, out = judged_in_process(repo, tmp_path, capsys)
    why = (
        f"base {where} ({upstream[:12]}) has no oracle gate yet (oracle/judge.yaml and scripts/ "
        f"missing): {FIX}"
    )
    assert (code, report["verdict"]) == (2, "error")
    assert [(s["name"], s["status"], s["summary"]) for s in report["steps"]] == [
        ("setup", "error", why)
    ]
    assert f"judge: setup: error: {why}" in out.splitlines()
    assert "file is missing" not in out


def test_a_merge_base_older_than_the_gate_names_the_branch_that_has_it(
    shop: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, upstream = adopting(shop, tmp_path)
    git(repo, "update-ref", "refs/remotes/origin/main", "main")  # the gate is merged upstream
    git(repo, "checkout", "-q", "-b", "agent", upstream)  # a branch forked before it was
    (repo / "AGENT.md").write_text("the agent's work\n")
    git(repo, "add", "AGENT.md")
    git(repo, "commit", "-q", "--no-verify", "-m", "agent work")
    git(repo, "checkout", "-q", "main")
    code, report, _ = judged_in_process(repo, tmp_path, capsys, "--head", "agent")
    assert code == 2
    assert report["steps"][0]["summary"] == (
        f"base {upstream[:12]} (the merge base of agent and origin/main) has no oracle gate yet "
        "(oracle/judge.yaml and scripts/ missing): origin/main has it: merge origin/main into "
        "agent, or pass --base REF of a commit that has it"
    )


def test_a_base_missing_a_step_script_names_it(
    shop: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = clone(shop, tmp_path)
    git(repo, "rm", "-q", "scripts/crossrun.py")
    git(repo, "commit", "-q", "--no-verify", "-m", "an older gate, before the crossrun")
    older = git(repo, "rev-parse", "HEAD")
    code, report, _ = judged_in_process(repo, tmp_path, capsys, "--base", "HEAD")
    assert code == 2
    assert report["steps"][0]["summary"] == (
        f"base HEAD ({older[:12]}) has no oracle gate yet (scripts/crossrun.py missing): pass "
        "--base REF of a commit that has it"
    )


@pytest.mark.parametrize("variable", ["TMPDIR", "ORACLE_CACHE"])
def test_a_folder_the_confined_jobs_would_not_see_fails_closed_before_any_build(
    shop: Path, variable: str
) -> None:
    """Each job in namespaces gets an empty /dev/shm of its own: a temporary folder or cache
    there would make the patch's build fail as if the patch did not build (a block)."""
    with tempfile.TemporaryDirectory(dir="/dev/shm") as hidden:
        verdict = judge(shop, env={variable: hidden})
    assert verdict.report.get("confinement") == "namespaces", verdict.output
    assert verdict.returncode == 2, verdict.output
    assert verdict.report["verdict"] == "error"
    build = [step for step in verdict.report["steps"] if step["name"] == "build"]
    assert build[0]["summary"].startswith(f"${variable}: {hidden} is under /dev/shm"), build


@pytest.mark.parametrize("variable", [LIMIT_ENV, RUNS_ENV])
def test_a_cache_limit_that_is_no_whole_number_fails_closed_before_any_build(
    shop: Path, variable: str
) -> None:
    verdict = judge(shop, env={variable: "lots"})
    assert verdict.returncode == 2, verdict.output
    assert verdict.report["verdict"] == "error"
    assert "build" not in [step["name"] for step in verdict.report["steps"]]
    said = verdict.report["steps"][-1]["summary"]
    assert said.startswith(f"${variable}='lots': not a whole number; set it to how many"), said
