"""One test body's walk: its assertions (with helpers and loops), skips and vacuous checks."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from _gate.inventory.skips import decorator_skips, raised, raises_skip
from _gate.inventory.syntax import (
    BROAD,
    FAILURES,
    MARKERS,
    PYTEST_CHECKS,
    SKIP_CALLS,
    SWALLOWS,
    UNITTEST_CONTEXTS,
    Func,
    Source,
    all_args,
    call_name,
    calls_in,
    dotted,
    iterated,
    own_assert,
    parameters,
)
from _gate.inventory.truth import cannot_raise, empty_iterable, stops, truth


@dataclass
class Found:
    """What one test's (or helper's) body holds."""

    asserts: int = 0
    vacuous: list[list[Any]] = field(default_factory=list)  # [line, kind]
    skips: list[list[Any]] = field(default_factory=list)  # [line, kind]
    first_assert: int = 0
    returns: list[int] = field(default_factory=list)
    sites: list[list[Any]] = field(default_factory=list)  # [line, normalized text]
    # [line, called name, the ast.Call, text]: maybe a helper; the text (an `assert*` call's)
    # is the one site the call counts when it cannot be resolved.
    calls: list[list[Any]] = field(default_factory=list)
    known: dict[str, Any] = field(default_factory=dict)  # names an argument can be sized by
    params: list[str] = field(default_factory=list)  # positional, `self` left out
    empty: dict[str, int] = field(default_factory=dict)  # parameter -> its default's size

    @property
    def signature(self) -> dict[str, Any]:
        return {"params": self.params, "empty": self.empty}

    def add_assert(self, line: int, vacuous: str = "", text: str = "", over: str = "") -> None:
        self.asserts += 1
        self.first_assert = self.first_assert or line
        if vacuous:
            self.vacuous.append([line, vacuous])
        else:
            # A site in a loop over a parameter runs once per item of the argument: `over`
            # names the parameter (see `bind`).
            self.sites.append([line, text, over] if over else [line, text])


class Scanner:
    """Walk one test's statements with the context that makes an assertion hollow or dead."""

    def __init__(
        self,
        source: Source,
        helpers: Sequence[str],
        node: Func | None = None,
        constants: dict[str, int] | None = None,
    ) -> None:
        self.source, self.helpers = source, helpers
        self.found = Found()
        self.names: frozenset[str] = frozenset()
        self.over = ""  # the parameter the innermost loop iterates, if any
        if node is not None:
            self.names = frozenset(a.arg for a in all_args(node.args))
            self.found.params, self.found.empty = parameters(node)
        # What a call argument named so holds: a parameter passed on, or a module constant's size.
        self.found.known = {**(constants or {}), **{n: n for n in self.names}}

    def statements(self, body: Iterable[ast.stmt], hollow: str = "") -> None:
        dead = ""
        for stmt in body:
            self.statement(stmt, hollow or dead)
            if stops(stmt):
                dead = "after-stop"

    def statement(self, stmt: ast.stmt, hollow: str) -> None:
        if isinstance(stmt, ast.Assert):
            self.assertion(stmt, hollow)
            self.expressions(stmt.msg, hollow)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Compare):
            self.found.vacuous.append([stmt.lineno, "bare-comparison"])
        elif isinstance(stmt, (ast.If, ast.While)):
            self.branch(stmt, hollow)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self.trial(stmt, hollow)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.expressions(item.context_expr, hollow)
            self.statements(stmt.body, hollow)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.loop(stmt, hollow)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.statements(stmt.body, hollow)
        else:
            self.simple(stmt, hollow)

    def loop(self, stmt: ast.For | ast.AsyncFor, hollow: str) -> None:
        self.expressions(stmt.iter, hollow)
        outer, self.over = self.over, self.over or iterated(stmt.iter, self.names)
        self.statements(stmt.body, hollow or ("empty-loop" if empty_iterable(stmt.iter) else ""))
        self.over = outer
        self.statements(stmt.orelse, hollow)

    def simple(self, stmt: ast.stmt, hollow: str) -> None:
        """A statement without a body: a return, a raise (a skip, or a failure that counts as
        an assertion), or one that only holds expressions."""
        if isinstance(stmt, ast.Return) and not hollow:
            self.found.returns.append(stmt.lineno)
        if isinstance(stmt, ast.Raise) and raises_skip(stmt):
            self.found.skips.append([stmt.lineno, "raise-SkipTest"])
        elif isinstance(stmt, ast.Raise) and raised(stmt).rsplit(".", 1)[-1] in FAILURES:
            text = "raise " + self.source.text(stmt.exc) if stmt.exc else "raise"
            self.found.add_assert(stmt.lineno, hollow, text, self.over)
        self.expressions(stmt, hollow)

    def branch(self, stmt: ast.If | ast.While, hollow: str) -> None:
        self.expressions(stmt.test, hollow)
        known = truth(stmt.test, self.source.text)
        self.statements(stmt.body, hollow or ("dead-branch" if known is False else ""))
        dead_else = known is True and isinstance(stmt, ast.If)
        self.statements(stmt.orelse, hollow or ("dead-branch" if dead_else else ""))

    def trial(self, stmt: Any, hollow: str) -> None:
        caught = set()
        for handler in stmt.handlers:
            kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught |= {dotted(k).rsplit(".", 1)[-1] if k is not None else "" for k in kinds}
        swallowed = "swallowed" if caught & (SWALLOWS | {""}) else ""
        self.statements(stmt.body, hollow or swallowed)
        dead = "dead-except" if cannot_raise(stmt.body) else ""
        for handler in stmt.handlers:
            self.statements(handler.body, hollow or dead)
        self.statements(stmt.orelse, hollow)
        self.statements(stmt.finalbody, hollow)

    def expressions(self, node: ast.AST | None, hollow: str) -> None:
        if node is not None:
            for call in calls_in(node):
                self.call(call, hollow)

    def call(self, node: ast.Call, hollow: str) -> None:
        name = call_name(node)
        last = name.rsplit(".", 1)[-1]
        if (name.startswith("pytest.") and last in PYTEST_CHECKS) or last in UNITTEST_CONTEXTS:
            # Any exception at all, message unchecked: only a call that returns fails it.
            broad = (
                last in ("raises", "assertRaises")
                and any(dotted(a).rsplit(".", 1)[-1] in BROAD for a in node.args[:1])
                and not any(k.arg == "match" for k in node.keywords)
            )
            vacuous = hollow or ("broad-raises" if broad else "")
            self.found.add_assert(node.lineno, vacuous, self.source.text(node), self.over)
        elif last.startswith("assert") and (hollow or own_assert(name, last)):
            vacuous = hollow or self.unittest_vacuous(last, node)
            self.found.add_assert(node.lineno, vacuous, self.source.text(node), self.over)
        elif last.startswith("assert"):
            # The project's own: resolved to its body's checks by FileScan.resolve.
            self.found.first_assert = self.found.first_assert or node.lineno
            self.found.calls.append([node.lineno, name, node, self.source.text(node)])
        elif name in ("self.fail", "cls.fail") or (
            last and any(fnmatchcase(last, pattern) for pattern in self.helpers)
        ):
            self.found.add_assert(node.lineno, hollow, self.source.text(node), self.over)
        elif last in SKIP_CALLS and (name.startswith(("pytest.", "self.", "cls.")) or name == last):
            self.found.skips.append([node.lineno, f"{last}-call"])
        elif last in MARKERS and decorator_skips(node.args):
            self.found.skips.append([node.lineno, f"{last}-skip"])
        elif name and not hollow:
            self.found.calls.append([node.lineno, name, node, ""])

    def assertion(self, stmt: ast.Assert, hollow: str) -> None:
        test = stmt.test
        vacuous = hollow or ("always-true" if truth(test, self.source.text) else "")
        self.found.add_assert(stmt.lineno, vacuous, "assert " + self.source.text(test), self.over)

    def unittest_vacuous(self, name: str, node: ast.Call) -> str:
        args = node.args
        known = truth(args[0], self.source.text) if args else None
        if (name in ("assertTrue", "assert_") and known) or (
            name == "assertFalse" and known is False
        ):
            return "always-true"
        pairs = ("assertEqual", "assertEquals", "assertIs", "assertLessEqual", "assertGreaterEqual")
        if (
            name in pairs
            and len(args) >= 2
            and self.source.text(args[0]) == self.source.text(args[1])
        ):
            return "self-comparison"
        return ""
