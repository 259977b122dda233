"""Baking: the default project, its git state, re-bakes, the answers and their validation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from noxfile import LINTS, VARIANTS
from tools.bakery import TEMPLATE, bake, git, judge, judge_script

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest depends on tomli on 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]


def text_files(root: Path) -> list[Path]:
    files = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts]
    return [p for p in files if b"\0" not in p.read_bytes()[:4096]]


def test_default_bake_leaves_no_template_syntax(shop: Path) -> None:
    # `${{ ... }}` is GitHub Actions expression syntax, not a Jinja leftover.
    leftovers = [
        str(p.relative_to(shop))
        for p in text_files(shop)
        if re.search(r"(?<!\$)\{\{|\{%|cookiecutter\.", p.read_text("utf-8", "replace"))
    ]
    assert leftovers == []
    assert (shop / "src" / "shop" / "cli.py").is_file()


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for every variant: they share scripts/, and mypy's incremental cache
    checks each file's content again, so what a variant changes is still type-checked."""
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_variant_bakes_lint_clean(tmp_path: Path, variant: str, mypy_cache: Path) -> None:
    """What the root noxfile's lint_bake runs, with this suite's own ruff and mypy."""
    repo = bake(tmp_path, **VARIANTS[variant])
    for lint in LINTS:
        cmd = [*lint, "--cache-dir", str(mypy_cache)] if lint[0] == "mypy" else list(lint)
        proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{variant}: {cmd}: {proc.stdout}{proc.stderr}"


def test_bake_commits_the_tree_and_makes_the_oracle_ref(shop: Path) -> None:
    assert git(shop, "status", "--porcelain") == ""
    assert git(shop, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(shop, "rev-list", "--count", "main") == "1"
    assert git(shop, "ls-tree", "--name-only", "oracle/main").splitlines() == [
        "quarantine.yaml",
        "variance-ledger.json",
    ]
    assert yaml.safe_load(git(shop, "show", "oracle/main:quarantine.yaml")) == {"quarantine": []}
    ledger = json.loads(git(shop, "show", "oracle/main:variance-ledger.json"))
    assert ledger == {"frozen": {}, "history": []}
    orphan = subprocess.run(["git", "merge-base", "main", "oracle/main"], cwd=shop, check=False)
    assert orphan.returncode == 1  # the oracle ref shares no history with the code
    lock = json.loads((shop / "fixtures.lock").read_text())
    assert sorted(lock) == sorted(git(shop, "ls-files", "fixtures").splitlines())


def test_rebake_over_the_repo_is_idempotent(tmp_path: Path) -> None:
    first = bake(tmp_path)
    head, ref = git(first, "rev-parse", "HEAD"), git(first, "rev-parse", "oracle/main")
    (first / "NOTES.md").write_text("the user's own work\n")
    from cookiecutter.main import cookiecutter

    again = cookiecutter(
        str(TEMPLATE), no_input=True, output_dir=str(tmp_path), overwrite_if_exists=True
    )
    assert Path(again) == first
    assert git(first, "rev-parse", "HEAD") == head
    assert git(first, "rev-parse", "oracle/main") == ref
    assert (first / "NOTES.md").read_text() == "the user's own work\n"


@pytest.mark.e2e
def test_bake_without_example_fails_closed_until_it_has_a_case(tmp_path: Path) -> None:
    repo = bake(tmp_path, include_example="no", project_name="Bare", cli_command="bare-cli")
    assert yaml.safe_load((repo / "oracle/cases.yaml").read_text()) == {"cases": []}
    assert yaml.safe_load((repo / "oracle/allowlist.yaml").read_text()) == {"allow": []}
    assert not list((repo / "oracle").glob("test_*.py"))
    assert not (repo / "src/bare/discounts.py").exists()
    bare = judge_script(repo)  # stops in preconditions, before any build: no nox needed
    assert bare.returncode == 2, bare.output
    assert bare.statuses == {"preconditions": "error"}
    lines = [line for line in bare.output.splitlines() if ": error: " in line]
    assert len(lines) == 1, bare.output
    assert "no oracle evidence in the base" in lines[0], bare.output
    assert "add a case to oracle/cases.yaml" in lines[0]
    # The fix the line names, made on the base branch: one case, and the bare bake merges.
    case = {"id": "no-args-usage", "argv": [], "compare": ["exit_code", "stdout.raw"]}
    (repo / "oracle/cases.yaml").write_text(yaml.safe_dump({"cases": [case]}))
    git(repo, "commit", "-q", "--no-verify", "-am", "first case")
    verdict = judge(repo)
    assert verdict.returncode == 0, verdict.output
    assert verdict.report["verdict"] == "merge"
    assert verdict.step("replay")["status"] == "pass"


def test_ci_answer_selects_the_workflow(tmp_path: Path) -> None:
    github = bake(tmp_path / "gh", _variance_runs=3)
    workflow = yaml.safe_load((github / ".github/workflows/oracle.yml").read_text())
    assert workflow["jobs"]["variance-ledger"]["needs"] == ["variance-run", "strength"]
    assert yaml.safe_load((github / "oracle/judge.yaml").read_text())["variance_runs"] == 3
    assert "--head origin/pr-head" in json.dumps(workflow["jobs"]["judge"])
    none = bake(tmp_path / "none", ci="none")
    assert not (none / ".github").exists()


def test_awkward_project_name_bakes_safely(tmp_path: Path) -> None:
    name = 'Bob\'s "Shop" \\ back\nsecond line """ \'\'\''
    repo = bake(tmp_path, project_name=name)
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    assert project["description"].endswith(name)
    assert project["name"] == repo.name
    assert (repo / "README.md").read_text().startswith('# Bob\'s "Shop"')
    proc = subprocess.run(
        ["ruff", "check", "."], cwd=repo, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout


def run_bake(
    tmp_path: Path, *answers: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "cookiecutter",
        "--no-input",
        "-o",
        str(tmp_path),
        str(TEMPLATE),
        *answers,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        ("project_slug=Bad Slug", "lowercase letters and digits"),
        ("package_name=class", "Python identifier"),
        ("package_name=9lives", "Python identifier"),
        ("cli_command=-x", "letters, digits"),
        ("owners=maintainers", "CODEOWNERS handles"),
        ("base_branch=main..x", "'..'"),
        ("base_branch=feature.lock", ".lock"),
        ("base_branch=HEAD", "not HEAD"),
        ("oracle_ref=@{-1}", "'@{'"),
        ("oracle_ref=oracle main", "no spaces"),
        ("oracle_ref=main/flakes", "nest inside it"),
        ("_variance_runs=1", "from 2 to 50"),
        ("_duration_cv_max=0", "greater than 0"),
        ("_flake_max_retry=9", "from 0 to 5"),
    ],
)
def test_invalid_answer_fails_the_bake_with_its_rule(
    tmp_path: Path, answer: str, rule: str
) -> None:
    proc = run_bake(tmp_path, answer)
    assert proc.returncode != 0
    name = answer.split("=", 1)[0]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("oracle-template: ")]
    # A derived default (package_name from project_slug) may fail too; the answer's own line leads.
    assert lines, proc.stderr
    assert f"answer {name}=" in lines[0], proc.stderr
    assert rule in lines[0], proc.stderr
    assert not (tmp_path / "shop").exists()


def test_refused_answer_is_our_line_and_cookiecutters_stop(tmp_path: Path) -> None:
    """stderr holds our line alone. cookiecutter's own lines go to stdout: its stop message and,
    between them, the call stack it logs for any failed hook (see the README)."""
    proc = run_bake(tmp_path, "base_branch=HEAD")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "oracle-template: answer base_branch='HEAD' is invalid: must be a branch name git accepts"
        " (`git check-ref-format --branch`: no spaces, control characters, ~ ^ : ? * [ \\, '..',"
        " '@{' or '//'; no leading '-'; no component starting with '.' or ending in '.lock'; no"
        " trailing '/' or '.'), and not HEAD or '@'"
    ]
    lines = proc.stdout.splitlines()
    assert lines[0] == (
        "ERROR: Stopping generation because pre_gen_project hook script didn't exit successfully"
    )
    assert lines[-1] == "Hook script failed (exit status: 1)"
    assert "oracle-template" not in proc.stdout
    assert not (tmp_path / "shop").exists()


@pytest.mark.parametrize("answer", ["include_example=maybe", "ci=gitlab"])
def test_choice_answers_are_refused_by_cookiecutter(tmp_path: Path, answer: str) -> None:
    """Choice answers keep cookiecutter's menu, so cookiecutter itself refuses other values."""
    proc = run_bake(tmp_path, answer)
    name, value = answer.split("=")
    assert proc.returncode != 0
    assert f"{value} provided for choice variable {name}" in proc.stderr
    assert not (tmp_path / "shop").exists()


def test_bake_without_git_fails_clearly(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path / "empty-bin")}
    proc = run_bake(tmp_path, env=env)
    assert proc.returncode != 0
    assert "oracle-template: git is required to bake" in proc.stderr


@pytest.mark.parametrize("answers", [(), ("base_branch=HEAD",)], ids=["baked", "refused"])
def test_a_bake_leaves_no_rendered_hook_in_the_temporary_folder(
    tmp_path: Path, answers: tuple[str, ...]
) -> None:
    """cookiecutter renders each hook into a file of the temporary folder and leaves it there;
    the hooks delete their copies, on a refused bake too."""
    temporary = tmp_path / "temporary"
    temporary.mkdir()
    proc = run_bake(tmp_path / "out", *answers, env={**os.environ, "TMPDIR": str(temporary)})
    assert (proc.returncode == 0) == (not answers), proc.stdout + proc.stderr
    assert (tmp_path / "out/shop/.git").is_dir() == (not answers)
    assert sorted(path.name for path in temporary.rglob("*.py")) == []


def test_only_the_example_ignores_its_order_store(shop: Path, tmp_path: Path) -> None:
    """`/.orders/` is where the example CLI writes its orders: a bake without it (and adopt,
    which bakes without it) has no such rule."""
    bare = bake(tmp_path, include_example="no")
    assert "/.orders/" not in (bare / ".gitignore").read_text().splitlines()
    assert "/.orders/" in (shop / ".gitignore").read_text().splitlines()
    assert "/.oracle/" in (bare / ".gitignore").read_text().splitlines()
