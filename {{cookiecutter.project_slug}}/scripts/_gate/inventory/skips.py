"""Skips as written: raised, decorated, marked on the module or class, or a test switched off."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from _gate.inventory.syntax import (
    SKIP_CALLS,
    SKIP_MARKS,
    SKIP_RAISES,
    UNITTEST_SKIPS,
    call_name,
    dotted,
)
from _gate.inventory.truth import constant_false, truth


def raised(stmt: ast.Raise) -> str:
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return dotted(exc) if exc is not None else ""


def raises_skip(stmt: ast.Raise) -> bool:
    """`raise unittest.SkipTest(...)`, `raise SkipTest`, `raise pytest.skip.Exception(...)`."""
    name = raised(stmt)
    return name.rsplit(".", 1)[-1] in SKIP_RAISES or name.endswith("skip.Exception")


def decorator_skips(decorators: Iterable[ast.expr]) -> list[list[Any]]:
    found = []
    for deco in decorators:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = dotted(target)
        last = name.rsplit(".", 1)[-1]
        # `from unittest import skip` leaves a bare name: a decorator called skip skips.
        if ("mark." in name and last in SKIP_MARKS) or (
            (name.startswith("unittest.") or name == last) and last in UNITTEST_SKIPS
        ):
            found.append([deco.lineno, last])
    return found


def test_false(body: Iterable[ast.stmt]) -> bool:
    """`__test__ = False` in a module or class body: pytest then collects nothing there."""
    return any(
        isinstance(s, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__test__" for t in s.targets)
        and constant_false(s.value)
        for s in body
    )


def marked_false(body: Iterable[ast.stmt]) -> set[str]:
    """Functions switched off with `name.__test__ = False`."""
    return {
        t.value.id
        for s in body
        if isinstance(s, ast.Assign) and constant_false(s.value)
        for t in s.targets
        if isinstance(t, ast.Attribute) and t.attr == "__test__" and isinstance(t.value, ast.Name)
    }


def pytestmark_skips(stmt: ast.stmt) -> list[list[Any]]:
    """Skip marks of a `pytestmark = ...` assignment (module or class body)."""
    if not isinstance(stmt, ast.Assign) or not any(
        isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets
    ):
        return []
    values = stmt.value.elts if isinstance(stmt.value, (ast.List, ast.Tuple)) else [stmt.value]
    return decorator_skips(values)


def module_skips(body: Iterable[ast.stmt]) -> list[list[Any]]:
    """Module-level skips: a skip at import time skips the whole file, so one under an `if` or a
    `try` (a version check) counts too."""
    skips = []
    for stmt in body:
        skips += pytestmark_skips(stmt)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            last = call_name(stmt.value).rsplit(".", 1)[-1]
            if last in SKIP_CALLS:
                skips.append([stmt.lineno, f"{last}-call"])
        elif isinstance(stmt, ast.Raise) and raises_skip(stmt):
            skips.append([stmt.lineno, "raise-SkipTest"])
        elif isinstance(stmt, ast.If):
            skips += module_skips([*stmt.body, *stmt.orelse])
        elif isinstance(stmt, ast.Try):
            skips += module_skips([*stmt.body, *stmt.orelse, *stmt.finalbody])
            skips += module_skips(s for h in stmt.handlers for s in h.body)
    return skips


def class_marks(node: ast.ClassDef) -> list[list[Any]]:
    """A class's own skips: decorators, `pytestmark` and `__unittest_skip__` in its body."""
    skips = decorator_skips(node.decorator_list)
    for stmt in node.body:
        skips += pytestmark_skips(stmt)
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__unittest_skip__" for t in stmt.targets)
            and truth(stmt.value) is not False
        ):
            skips.append([stmt.lineno, "__unittest_skip__"])
    return skips
