"""Both noxfiles: every session documented (nox -l shows it), nox's version required, and
every baked session a make target; no baked session runs a program it would echo."""

from __future__ import annotations

import ast
from pathlib import Path

from tools.bakery import TEMPLATE

TREE = ast.parse((TEMPLATE / "noxfile.py").read_text("utf-8"))
BAKED = TEMPLATE / "{{cookiecutter.project_slug}}"
BAKED_TREE = ast.parse((BAKED / "noxfile.py").read_text("utf-8"))


def sessions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d).startswith("nox.session") for d in node.decorator_list)
    ]


def needs_version(tree: ast.Module) -> list[str]:
    return [
        str(node.value.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and ast.unparse(node.targets[0]) == "nox.needs_version"
        and isinstance(node.value, ast.Constant)
    ]


def pinned_nox(requirements: Path) -> str:
    lines = requirements.read_text("utf-8").splitlines()
    return next(line.split("==")[1].split()[0] for line in lines if line.startswith("nox=="))


def test_every_session_has_a_docstring() -> None:
    root, baked = sessions(TREE), sessions(BAKED_TREE)
    assert {s.name for s in root} >= {"tests", "lint", "lint_bake", "demo", "bench", "adopt"}
    assert {s.name for s in baked} >= {"judge", "record", "case", "tests", "allow", "merge"}
    assert [s.name for s in root + baked if not ast.get_docstring(s)] == []


def test_needs_version_is_the_pinned_nox_or_later() -> None:
    assert needs_version(TREE) == [f">={pinned_nox(TEMPLATE / 'requirements-dev.txt')}"]


def test_the_baked_noxfile_needs_a_nox_its_ci_pin_satisfies() -> None:
    [spec] = needs_version(BAKED_TREE)
    assert spec.startswith(">=")
    ci = pinned_nox(BAKED / ".github/requirements-ci.txt")
    assert tuple(map(int, ci.split("."))) >= tuple(map(int, spec[2:].split(".")))


def test_every_baked_session_has_its_make_target() -> None:
    # The Makefile's first line says "every target is a nox session": and every session a target.
    makefile = (BAKED / "Makefile").read_text("utf-8")
    phony = next(line for line in makefile.splitlines() if line.startswith(".PHONY:"))
    assert sorted(phony.split()[1:]) == sorted(s.name for s in sessions(BAKED_TREE))


def test_no_baked_session_runs_a_program_given_as_text() -> None:
    # nox echoes every command it runs: a `python -c PROGRAM` would print the program each run.
    programs = [
        ast.unparse(node)
        for node in ast.walk(BAKED_TREE)
        if isinstance(node, ast.Call)
        and any(isinstance(arg, ast.Constant) and arg.value == "-c" for arg in node.args)
    ]
    assert programs == []
