"""The root noxfile: every session documented (nox -l shows it), and nox's version pinned."""

from __future__ import annotations

import ast

from tools.bakery import TEMPLATE

TREE = ast.parse((TEMPLATE / "noxfile.py").read_text("utf-8"))


def test_every_session_has_a_docstring() -> None:
    sessions = [
        node
        for node in TREE.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d).startswith("nox.session") for d in node.decorator_list)
    ]
    assert {s.name for s in sessions} >= {"tests", "lint", "lint_bake", "demo", "bench"}
    assert [s.name for s in sessions if not ast.get_docstring(s)] == []


def test_needs_version_is_the_pinned_nox_or_later() -> None:
    specs = [
        node.value.value
        for node in TREE.body
        if isinstance(node, ast.Assign)
        and ast.unparse(node.targets[0]) == "nox.needs_version"
        and isinstance(node.value, ast.Constant)
    ]
    pins = (TEMPLATE / "requirements-dev.txt").read_text("utf-8").splitlines()
    pinned = next(line.split("==")[1] for line in pins if line.startswith("nox=="))
    assert specs == [f">={pinned}"]
