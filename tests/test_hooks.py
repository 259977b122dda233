"""The hooks as plain Python: the validation rules without a bake."""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType
from typing import Any

import pytest

from tools.bakery import TEMPLATE


def load_hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, TEMPLATE / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    "variance_runs": "5",
    "duration_cv_max": "0.35",
    "flake_max_retry": "1",
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
        ("variance_runs", "x"),
        ("judge_shards", "0"),
        ("judge_shards", "17"),
    ],
)
def test_each_broken_answer_is_one_line_naming_it(name: str, value: str) -> None:
    errors = PRE.validate({**GOOD, name: value})
    assert len(errors) == 1
    assert errors[0].startswith(f"answer {name}=")


@pytest.mark.parametrize("ref", ["main", "release/2026.11", "oracle/main", "feature_x-1"])
def test_legal_ref_names_pass(ref: str) -> None:
    assert PRE.ref_problem(ref) is None
