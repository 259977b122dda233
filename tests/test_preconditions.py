"""Preconditions on prepared base trees: a gate with no oracle evidence must not say merge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from preconditions import main

from tests.helpers import SCRIPTS

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

MATRIX = SCRIPTS.parent / "oracles/MATRIX.md"
CASE: dict[str, object] = {"id": "no-args", "argv": [], "compare": ["exit_code", "stdout.raw"]}
PROPERTY = "def test_total_is_never_negative() -> None:\n    assert abs(-1) >= 0\n"


@pytest.fixture(autouse=True)
def judge_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment `nox -s judge` gives the step, whatever the shell running pytest holds."""
    monkeypatch.setenv("JUDGE_OFFLINE", "1")
    for name in ("MODEL_ENDPOINT", "MODEL_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def base_tree(root: Path, cases: list[dict[str, object]], oracles: dict[str, str]) -> Path:
    """A base tree as the judge sees it: judge.yaml, the decision table, cases, oracle files."""
    (root / "oracle").mkdir(parents=True)
    (root / "oracles").mkdir()
    config = {"command": "shop", "base_branch": "main", "oracle_ref": "oracle/main"}
    (root / "oracle/judge.yaml").write_text(yaml.safe_dump({**config, "protected": ["/oracle/"]}))
    (root / "oracles/MATRIX.md").write_text(MATRIX.read_text())
    (root / "CODEOWNERS").write_text("/oracle/ @org/owners\n/fixtures/ @org/owners\n")
    (root / "oracle/cases.yaml").write_text(yaml.safe_dump({"cases": cases}))
    (root / "oracle/pytest.ini").write_text("[pytest]\n")
    (root / "tests").mkdir()  # judge.yaml's default `tests:`
    for rel, text in oracles.items():
        (root / "oracle" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "oracle" / rel).write_text(text)
    return root


def check(tree: Path, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "preconditions.json"
    code = main(["--tree", str(tree), "--report", str(report)])
    return code, json.loads(report.read_text("utf-8"))


def test_no_cases_and_no_property_oracle_fails_closed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A helper module and a conftest under oracle/ are not property oracles.
    tree = base_tree(tmp_path / "base", [], {"conftest.py": "", "helpers.py": PROPERTY})
    code, report = check(tree, tmp_path)
    assert code == 2
    assert report["status"] == "error"
    assert report["evidence"] == {
        "model_variables_checked": [
            "MODEL_ENDPOINT",
            "MODEL_API_KEY",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
        ],
        "set": [],
        "cases": 0,
        "property_oracles": [],
        "strength": None,  # no score given: strength_min is off
        "warnings": [],
    }
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "preconditions: error: no oracle evidence in the base: oracle/cases.yaml has no "
        "case and oracle/ has no test_*.py property oracle; add a case to oracle/cases.yaml "
        "(docs/add-a-case.md) or a property test under oracle/ on the base branch"
    ]


def test_cases_file_with_only_comments_counts_as_no_case(tmp_path: Path) -> None:
    tree = base_tree(tmp_path / "base", [], {})
    (tree / "oracle/cases.yaml").write_text("# Cassette cases: see docs/add-a-case.md.\n")
    code, report = check(tree, tmp_path)
    assert code == 2
    assert "no oracle evidence in the base" in report["summary"]


def test_cases_only_pass(tmp_path: Path) -> None:
    code, report = check(base_tree(tmp_path / "base", [CASE], {}), tmp_path)
    assert code == 0, report["summary"]
    assert report["evidence"]["cases"] == 1
    assert "1 cases and 0 property oracle files" in report["summary"]


@pytest.mark.parametrize("rel", ["test_properties.py", "props/test_totals.py"])
def test_property_oracles_only_pass(tmp_path: Path, rel: str) -> None:
    code, report = check(base_tree(tmp_path / "base", [], {rel: PROPERTY}), tmp_path)
    assert code == 0, report["summary"]
    assert report["evidence"]["property_oracles"] == [f"oracle/{rel}"]


def test_missing_cases_file_fails_closed_with_every_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = base_tree(tmp_path / "base", [CASE], {"test_properties.py": PROPERTY})
    (tree / "oracle/cases.yaml").unlink()
    monkeypatch.setenv("MODEL_ENDPOINT", "https://model.invalid")
    code, report = check(tree, tmp_path)
    assert code == 2
    summary = report["summary"]
    assert "model endpoint variable MODEL_ENDPOINT is set" in summary
    assert "oracle/cases.yaml: file is missing" in summary
    assert "no oracle evidence" not in summary  # unknown, not zero: the missing file is the fix


def matrix_with(old: str, new: str) -> str:
    text = MATRIX.read_text()
    assert text.count(old) == 1
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("matrix", "why"),
    [
        ("# Decision table\n", "oracles/MATRIX.md: the decision table has no rows"),
        (
            matrix_with("(`replay`) | Edit the test", "(`replay-cases`) | Edit the test"),
            "row 'Output changed on a known input' names 'replay-cases', which is not a step",
        ),
        (
            matrix_with("Quarantine (`quarantine`)", "Quarantine"),
            "row 'Quarantine row expired or names no test' names no step;",
        ),
        (
            matrix_with("Flake budget (`flake-budget`)", "Flake budget (`quarantine`)").replace(
                "(`flake-budget`)", "(`quarantine`)"
            ),
            "oracles/MATRIX.md: no row names the judge's step 'flake-budget'; add its row",
        ),
    ],
    ids=["empty", "unknown-step", "row-without-step", "step-without-row"],
)
def test_a_decision_table_that_does_not_name_the_judges_steps_fails_closed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], matrix: str, why: str
) -> None:
    tree = base_tree(tmp_path / "base", [CASE], {})
    (tree / "oracles/MATRIX.md").write_text(matrix)
    code, report = check(tree, tmp_path)
    assert code == 2
    assert why in report["summary"]
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_templates_table_names_every_step_the_judge_reports() -> None:
    from _gate.core.steps import JUDGE_STEPS, STEPS

    assert set(JUDGE_STEPS) == {*(step.name for step in STEPS if step.script), "build"}


@pytest.mark.parametrize(
    ("where", "codeowners", "why"),
    [
        ("CODEOWNERS", "/oracle/ @org/owners\n", "protected path /fixtures/"),
        ("CODEOWNERS", "/fixtures/ @org/owners\n/oracle/\n", "protected path /oracle/"),
        (".github/CODEOWNERS", "/oracle/ @o\n", "protected path /fixtures/"),
        (None, "", "no CODEOWNERS in the base"),
        # The template's placeholder, alone or twice, as cookiecutter's default bakes it.
        ("CODEOWNERS", "* @org/maintainers\n", "owned by @org/maintainers, the template's"),
        ("CODEOWNERS", "* @a\n/oracle/ @org/maintainers @org/maintainers\n", "placeholder"),
    ],
    ids=[
        "fixtures-unowned",
        "rule-without-owner",
        "github-folder",
        "no-file",
        "placeholder",
        "placeholder-twice",
    ],
)
def test_a_protected_path_without_a_code_owner_fails_closed(
    tmp_path: Path, where: str | None, codeowners: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")  # where CI judges: the placeholder is nobody
    tree = base_tree(tmp_path / "base", [CASE], {})
    (tree / "CODEOWNERS").unlink()
    if where:
        (tree / where).parent.mkdir(exist_ok=True)
        (tree / where).write_text(codeowners)
    code, report = check(tree, tmp_path)
    assert code == 2
    assert why in report["summary"]


@pytest.mark.parametrize(
    "codeowners", ["* @org/maintainers\n", "* @a\n/oracle/ @org/maintainers\n"]
)
def test_the_placeholder_owner_is_a_warning_on_a_users_machine(
    tmp_path: Path, codeowners: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's first block (bake with the defaults, judge) judges at once; the summary
    names the line to change, and CI refuses it (above)."""
    monkeypatch.delenv("CI", raising=False)
    tree = base_tree(tmp_path / "base", [CASE], {})
    (tree / "CODEOWNERS").write_text(codeowners)
    code, report = check(tree, tmp_path)
    assert code == 0, report["summary"]
    assert "warning: CODEOWNERS: protected path" in report["summary"]
    assert "owned by @org/maintainers, the template's placeholder" in report["summary"]


@pytest.mark.parametrize(
    "codeowners",
    ["* @org/all\n", "/oracle/ @a\n/fixtures/ @b\n/x @c\n", "* @org/maintainers @alice\n"],
)
def test_protected_paths_owned_by_any_rule_pass(tmp_path: Path, codeowners: str) -> None:
    tree = base_tree(tmp_path / "base", [CASE], {})
    (tree / "CODEOWNERS").write_text(codeowners)
    code, report = check(tree, tmp_path)
    assert code == 0, report["summary"]


def test_a_tests_entry_missing_from_the_base_or_the_head_fails_closed(tmp_path: Path) -> None:
    """A mistyped `tests:` (or a folder the base moved) would leave the crossrun and the
    inventory nothing to run: the judgment stops before any step, naming entry, tree, fix."""
    tree = base_tree(tmp_path / "base", [CASE], {})
    config = tree / "oracle/judge.yaml"
    config.write_text(config.read_text() + "tests: [test, tests]\n")
    head = base_tree(tmp_path / "head", [CASE], {})
    (head / "tests").rmdir()
    report = tmp_path / "preconditions.json"
    code = main(["--tree", str(tree), "--patch-tree", str(head), "--report", str(report)])
    summary = json.loads(report.read_text("utf-8"))["summary"]
    assert code == 2, summary
    assert "field 'tests' entry 'test' is not in the base tree; name the base's tests" in summary
    assert "entry 'tests' is not in the head tree; the patch removes or moves it" in summary
    assert "entry 'test' is not in the head" in summary


def test_a_project_whose_crossrun_is_off_needs_no_tests_folder(tmp_path: Path) -> None:
    tree = base_tree(tmp_path / "base", [CASE], {})
    (tree / "tests").rmdir()
    config = tree / "oracle/judge.yaml"
    config.write_text(config.read_text() + "crossrun: off\n")
    code, report = check(tree, tmp_path)
    assert code == 0, report["summary"]


def test_a_case_whose_cwd_is_no_fixture_folder_fails_closed(tmp_path: Path) -> None:
    tree = base_tree(tmp_path / "base", [{**CASE, "cwd": "empty-cart"}], {})
    code, report = check(tree, tmp_path)
    assert code == 2
    assert (
        "case 'no-args' field 'cwd': fixtures/empty-cart is not a folder on the base"
        in (report["summary"])
    )
    (tree / "fixtures/empty-cart").mkdir(parents=True)
    assert check(tree, tmp_path)[0] == 0
