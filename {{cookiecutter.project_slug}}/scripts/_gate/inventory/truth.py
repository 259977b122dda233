"""Checks that cannot fail, read statically: an expression whose truth is known, a comparison
of a thing with itself, a loop over nothing, a statement after one that stops."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Sequence
from typing import Any

from _gate.inventory.syntax import call_name, dotted

BOOLEAN_CALLS = frozenset({"bool", "isinstance", "issubclass", "callable", "hasattr"})
# `x != x` is not folded to false: it is how a test spells "x is NaN".
SELF_TRUE = (ast.Eq, ast.Is, ast.LtE, ast.GtE)
OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
# Calls after which nothing in the same block runs.
STOPS = frozenset(
    {"pytest.skip", "pytest.fail", "pytest.exit", "self.skipTest", "self.fail", "sys.exit"}
)
Text = Callable[[ast.expr], str]  # an expression's normalized source
LITERALS = (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp)


def literal(node: ast.AST) -> tuple[bool, Any]:
    """(True, value) for a literal whose value is known without running anything."""
    if not isinstance(node, LITERALS):
        return False, None  # a name or a call: cheaper to say so than to let literal_eval raise
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def truth(node: ast.AST, text: Text | None = None) -> bool | None:
    """The expression's truthiness when it is the same on every run, else None: constant folding
    over literals, boolean operators, conditional expressions and comparisons, so that every
    spelling of an assertion that cannot fail folds to True."""
    fold = FOLDS.get(type(node))
    return None if fold is None else fold(node, text)


def sequence(node: ast.Tuple | ast.List | ast.Set, _text: Text | None) -> bool | None:
    if any(not isinstance(e, ast.Starred) for e in node.elts):
        return True
    return False if not node.elts else None


def mapping(node: ast.Dict, _text: Text | None) -> bool | None:
    return True if any(k is not None for k in node.keys) else (False if not node.keys else None)


def f_string(node: ast.JoinedStr, _text: Text | None) -> bool | None:
    return True if any(isinstance(v, ast.Constant) and v.value for v in node.values) else None


def negation(node: ast.UnaryOp, text: Text | None) -> bool | None:
    inner = truth(node.operand, text) if isinstance(node.op, ast.Not) else None
    return None if inner is None else not inner


def bool_call(node: ast.Call, text: Text | None) -> bool | None:
    """`bool(x)` is as true as `x`."""
    if dotted(node.func) == "bool" and len(node.args) == 1:
        return truth(node.args[0], text)
    return None


def bool_op(node: ast.BoolOp, text: Text | None) -> bool | None:
    values = [truth(v, text) for v in node.values]
    decisive = isinstance(node.op, ast.Or)  # one true operand makes `or` true, one false `and`
    if decisive in values:
        return decisive
    return (not decisive) if all(v is not None for v in values) else None


def if_exp(node: ast.IfExp, text: Text | None) -> bool | None:
    test = truth(node.test, text)
    if test is not None:
        return truth(node.body if test else node.orelse, text)
    body, orelse = truth(node.body, text), truth(node.orelse, text)
    return body if body == orelse else None


# How each kind of expression folds (`truth`); a kind not here is never folded.
FOLDS: dict[type[ast.AST], Callable[[Any, Text | None], bool | None]] = {
    ast.Constant: lambda node, _text: bool(node.value),
    ast.Tuple: sequence,
    ast.List: sequence,
    ast.Set: sequence,
    ast.Dict: mapping,
    ast.JoinedStr: f_string,
    ast.Lambda: lambda _node, _text: True,
    ast.UnaryOp: negation,
    ast.BoolOp: lambda node, text: bool_op(node, text),
    ast.IfExp: lambda node, text: if_exp(node, text),
    ast.NamedExpr: lambda node, text: truth(node.value, text),
    ast.Compare: lambda node, text: comparison(node, text),
    ast.Call: bool_call,
}


def boolean_valued(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        return dotted(node.func) in BOOLEAN_CALLS
    if isinstance(node, ast.BoolOp):
        return all(boolean_valued(v) for v in node.values)
    return isinstance(node, ast.Compare) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    )


def comparison(node: ast.Compare, text: Text | None) -> bool | None:
    if len(node.ops) != 1:
        return None
    op, left, right = node.ops[0], node.left, node.comparators[0]
    if text is not None and isinstance(op, SELF_TRUE) and text(left) == text(right):
        return True
    if isinstance(op, (ast.In, ast.NotIn)) and boolean_valued(left):
        known, values = literal(right)
        if known and isinstance(values, (tuple, list, set, frozenset)):
            both = True in values and False in values
            if both:
                return isinstance(op, ast.In)
    (known_left, a), (known_right, b) = literal(left), literal(right)
    # Two string literals spelled differently test how the source was decoded (PEP 263), which
    # a test file may mean to check: only the same spelling on both sides is vacuous.
    if isinstance(a, (str, bytes)) and isinstance(b, (str, bytes)):
        return None
    if known_left and known_right:
        try:
            return bool(OPERATORS[type(op)](a, b))
        except TypeError:
            return None
    return None


def constant_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and not node.value


def empty_iterable(node: ast.AST) -> bool:
    """A loop over this never runs its body."""
    if isinstance(node, ast.Call) and dotted(node.func) == "range" and not node.keywords:
        known, args = literal(ast.Tuple(elts=node.args, ctx=ast.Load()))
        if known and all(isinstance(a, int) for a in args) and 1 <= len(args) <= 3:
            try:
                return len(range(*args)) == 0
            except ValueError:
                return False
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, bytes)) and not node.value
    return truth(node) is False and isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict))


def cannot_raise(body: Sequence[ast.stmt]) -> bool:
    """A try body of `pass`, constants and literal assignments to names: its handlers are dead."""
    for stmt in body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets = [stmt.target]
        value = getattr(stmt, "value", None)
        if not targets or not all(isinstance(t, ast.Name) for t in targets):
            return False
        if value is None or not literal(value)[0]:
            return False
    return True


DEAD_KINDS = frozenset({"dead-branch", "empty-loop", "after-stop", "dead-except"})


def stops(stmt: ast.stmt) -> bool:
    if isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
        return True
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and call_name(stmt.value) in STOPS
    )
