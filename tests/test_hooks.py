"""The hooks as plain Python: the validation rules without a bake."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tools.bakery import TEMPLATE, git, load_hook

PRE = load_hook("pre_gen_project")
GOOD: dict[str, Any] = {
    "project_name": "Shop",
    "project_slug": "shop",
    "package_name": "shop",
    "cli_command": "shop",
    "owners": "@org/maintainers @alice ops@example.com",
    "base_branch": "main",
    "oracle_ref": "oracle/main",
    "include_example": "yes",
    "ci": "github",
    "_variance_runs": "5",
    "_duration_cv_max": "0.35",
    "_flake_max_retry": "1",
    "judge_shards": "1",
}


def test_defaults_of_cookiecutter_json_are_valid() -> None:
    answers = json.loads((TEMPLATE / "cookiecutter.json").read_text())
    rendered = {**GOOD, **{k: v for k, v in answers.items() if not str(v).startswith("{{")}}
    rendered = {k: v[0] if isinstance(v, list) else v for k, v in rendered.items()}
    assert PRE.validate(rendered) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("project_name", "   "),
        ("package_name", "naïve"),
        ("base_branch", "-main"),
        ("base_branch", "a//b"),
        ("oracle_ref", ".hidden/x"),
        ("owners", ""),
        ("_variance_runs", "x"),
        ("judge_shards", "0"),
        ("judge_shards", "17"),
    ],
)
def test_each_broken_answer_is_one_line_naming_it(name: str, value: str) -> None:
    errors = PRE.validate({**GOOD, name: value})
    assert len(errors) == 1
    assert errors[0].startswith(f"answer {name}=")


@pytest.mark.parametrize(
    "ref", ["main", "release/2026.11", "oracle/main", "feature_x-1", "x/HEAD", "ñame"]
)
def test_legal_ref_names_pass(ref: str) -> None:
    assert PRE.ref_problem(ref) is None


@pytest.mark.parametrize(
    "ref",
    [
        *("HEAD", "@", "@{-1}", "-x", "--help", "", "a b", "main..x", "x@{1}", "main^", "a//b"),
        *("/main", "main/", "main.", ".hidden", "team/.x", "feature.lock", "tab\there", "nul\0x"),
    ],
)
def test_ref_names_git_refuses_are_refused(ref: str) -> None:
    errors = PRE.validate({**GOOD, "base_branch": ref})
    assert errors == [f"answer base_branch={ref!r} is invalid: must be {PRE.REF_RULE}"]


def test_previous_branch_shorthand_is_refused_where_git_expands_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a repository `git check-ref-format --branch @{-1}` succeeds, printing the branch
    checked out before: the hook runs in the user's repository on a re-bake."""
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "first")
    git(tmp_path, "checkout", "-q", "-b", "previous")
    git(tmp_path, "checkout", "-q", "main")
    monkeypatch.chdir(tmp_path)
    expanded = subprocess.run(
        ["git", "check-ref-format", "--branch", "@{-1}"], capture_output=True, text=True
    )
    assert (expanded.returncode, expanded.stdout) == (0, "previous\n")
    assert PRE.ref_problem("@{-1}") == PRE.REF_RULE


def test_template_paths_are_the_bakes_files_named_as_in_the_project() -> None:
    paths = PRE.template_paths({**GOOD, "package_name": "orders_app", "_repo_dir": str(TEMPLATE)})
    assert {"src/orders_app/cli.py", ".github/workflows/oracle.yml", "fixtures.lock"} <= set(paths)
    assert "scripts/judge.py" in paths
    assert [p for p in paths if "{" in p or "cookiecutter" in p] == []


def test_without_the_template_folder_no_path_is_known() -> None:
    """cruft names no template folder: over a repository, every file git sees is saved."""
    assert PRE.template_paths(GOOD) is None
