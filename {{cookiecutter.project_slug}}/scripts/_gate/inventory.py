"""What a test file asserts, read from its AST: tests, assertions, skips, vacuous checks.

Pure and cacheable: `analyze(source bytes, path, helper patterns)` returns plain JSON data, so
count_asserts.py can cache it by git blob id and compare parent and patch file by file.
"""

from __future__ import annotations

import ast
import hashlib
import operator
import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, TypeAlias

PYTEST_CHECKS = frozenset({"raises", "warns", "fail", "deprecated_call"})
UNITTEST_CONTEXTS = frozenset({"assertRaises", "assertRaisesRegex", "assertWarns", "assertLogs"})
SKIP_MARKS = frozenset({"skip", "skipif", "xfail"})
UNITTEST_SKIPS = frozenset({"skip", "skipIf", "skipUnless", "expectedFailure"})
SKIP_CALLS = frozenset({"skip", "importorskip", "xfail", "skipTest"})
# Exceptions that unittest and pytest report as a skip wherever they are raised.
SKIP_RAISES = frozenset({"SkipTest", "Skipped"})
# Methods run around every test of their class (unittest, pytest xunit, nose): a skip raised in
# one, under a condition or not, skips each test of the class and of its subclasses.
CLASS_RUNNERS = frozenset(
    {
        "setUp",
        "asyncSetUp",
        "tearDown",
        "asyncTearDown",
        "setUpClass",
        "setup_class",
        "setup_method",
        "teardown_method",
        "setup",
    }
)
# Module functions run around every test of the module, or around each module-level function.
MODULE_RUNNERS = frozenset({"setUpModule", "setup_module", "setup"})
FUNCTION_RUNNERS = frozenset({"setup_function", "teardown_function"})
MARKERS = frozenset({"applymarker", "add_marker"})
# unittest.TestCase's own checks (every Python from 3.10): any other `self.assert*` is the
# project's, and counts the checks its body runs (a call that cannot be resolved counts one).
UNITTEST_ASSERTS = frozenset(
    {"assertEqual", "assertNotEqual", "assertTrue", "assertFalse", "assertIs", "assertIsNot"}
    | {"assertIsNone", "assertIsNotNone", "assertIn", "assertNotIn", "assertIsInstance"}
    | {"assertNotIsInstance", "assertRaises", "assertRaisesRegex", "assertWarns", "assertLogs"}
    | {"assertWarnsRegex", "assertNoLogs", "assertAlmostEqual", "assertNotAlmostEqual"}
    | {"assertGreater", "assertGreaterEqual", "assertLess", "assertLessEqual", "assertRegex"}
    | {"assertNotRegex", "assertCountEqual", "assertMultiLineEqual", "assertSequenceEqual"}
    | {"assertListEqual", "assertTupleEqual", "assertSetEqual", "assertDictEqual"}
    | {"assertEquals", "assertNotEquals", "assertAlmostEquals", "assertNotAlmostEquals"}
    | {"assert_", "assertRegexpMatches", "assertNotRegexpMatches", "assertRaisesRegexp"}
    | {"assertDictContainsSubset"}
)
# Iterating a parameter through these runs the loop body once per item of the argument.
ITERATE_METHODS = frozenset({"items", "keys", "values"})
ITERATE_CALLS = frozenset({"sorted", "enumerate", "list", "tuple", "reversed", "iter"})
# `raise` of these is a failed check, as `assert` is.
FAILURES = frozenset({"AssertionError", "failureException"})
BROAD = frozenset({"Exception", "BaseException"})
SWALLOWS = frozenset({"AssertionError", "Exception", "BaseException"})
# Hooks a conftest.py can use to rewrite outcomes, deselect tests or fake the exit status.
OUTCOME_HOOKS = frozenset(
    {
        "pytest_runtest_makereport",
        "pytest_report_teststatus",
        "pytest_runtest_call",
        "pytest_runtest_setup",
        "pytest_runtest_teardown",
        "pytest_itemcollected",
        "pytest_runtest_protocol",
        "pytest_pyfunc_call",
        "pytest_collection_modifyitems",
        "pytest_sessionfinish",
        "pytest_deselected",
        "pytest_ignore_collect",
    }
)
# Modules whose functions are never the project's own assertion helpers.
STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) - {"test"}


def dotted(node: ast.AST) -> str:
    """`pytest.mark.skip` for an attribute chain of names, else ''."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def call_name(node: ast.Call) -> str:
    return dotted(node.func)


class Source:
    """The file's bytes by line: expressions are compared by their source text, which is far
    cheaper than dumping or unparsing their trees (AST offsets are UTF-8 byte offsets)."""

    def __init__(self, data: bytes) -> None:
        self.lines = data.splitlines()

    def text(self, node: ast.expr) -> str:
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        start, end = node.col_offset, node.end_col_offset
        if first == last:
            chunk = self.lines[first][start:end]
        else:
            chunk = b" ".join(
                [self.lines[first][start:], *self.lines[first + 1 : last], self.lines[last][:end]]
            )
        return b" ".join(chunk.split()).decode("utf-8", "replace")

    def chunk(self, node: ast.stmt) -> bytes:
        return b"\n".join(self.lines[node.lineno - 1 : node.end_lineno or node.lineno])

    def digest(self, body: Sequence[ast.stmt]) -> str:
        first, last = body[0].lineno - 1, body[-1].end_lineno or body[-1].lineno
        return hashlib.sha1(b"\n".join(line.strip() for line in self.lines[first:last])).hexdigest()


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


# Nodes without a call below them: the walk in `calls_in` stops there.
LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.cmpop, ast.unaryop)


def calls_in(node: ast.AST) -> list[ast.Call]:
    """Every call in a tree, breadth first as `ast.walk` finds them, at a fraction of its cost
    (this walk is most of a cold inventory of a large suite)."""
    found = []
    todo = deque([node])
    while todo:
        here = todo.popleft()
        if isinstance(here, ast.Call):
            found.append(here)
        for name in here._fields:
            value = getattr(here, name, None)
            if isinstance(value, list):
                todo.extend(
                    v for v in value if isinstance(v, ast.AST) and not isinstance(v, LEAVES)
                )
            elif isinstance(value, ast.AST) and not isinstance(value, LEAVES):
                todo.append(value)
    return found


def own_assert(name: str, last: str) -> bool:
    """Whether an `assert*` call is unittest's own (on `self`) or a library's: counted as one
    check where it stands. Any other may be the project's helper."""
    if name.startswith(("self.", "cls.")):
        return last in UNITTEST_ASSERTS or name.count(".") > 1
    return name.count(".") > 1  # `np.testing.assert_allclose`, `mock.obj.assert_called`


def all_args(args: ast.arguments) -> list[ast.arg]:
    return [*args.posonlyargs, *args.args, *args.kwonlyargs]


def parameters(node: Func) -> tuple[list[str], dict[str, int]]:
    """A function's positional parameters (a method's first left out: calls through `self`
    do not pass it) and the size of each literal default (None is empty)."""
    args = node.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    static = any(dotted(d).endswith("staticmethod") for d in node.decorator_list)
    if positional and positional[0] in ("self", "cls") and not static:
        positional = positional[1:]
    # Defaults belong to the last positional parameters; a keyword-only one may have none.
    pairs = [*zip(reversed(args.posonlyargs + args.args), reversed(args.defaults), strict=False)]
    defaults = [*pairs, *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    empty = {a.arg: n for a, d in defaults if d is not None and (n := size(d)) is not None}
    return positional, empty


def size(node: ast.AST) -> int | None:
    """How many items a literal argument holds, if it is one (None: zero)."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        starred = any(isinstance(e, ast.Starred) for e in node.elts)
        return None if starred else len(node.elts)
    if isinstance(node, ast.Dict):
        return None if None in node.keys else len(node.keys)
    if isinstance(node, ast.Constant) and node.value is None:
        return 0
    return None


def sizes(node: ast.Call, known: dict[str, Any]) -> dict[str, Any]:
    """Per argument (position or keyword): its literal size (or that of the module constant it
    names), or the caller's parameter it passes on. Positions after a `*args` are unknown."""
    out: dict[str, Any] = {}
    pairs = []
    for index, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred):
            break
        pairs.append((str(index), arg))
    pairs += [(k.arg, k.value) for k in node.keywords if k.arg]
    for key, arg in pairs:
        n = size(arg)
        if n is not None:
            out[key] = n
        elif isinstance(arg, ast.Name) and arg.id in known:
            out[key] = known[arg.id]
    return out


def constants(body: Iterable[ast.stmt]) -> dict[str, int]:
    """Module constants bound once, to a literal: `CASES = {...}` passed to a helper."""
    bound: dict[str, int] = {}
    sized: dict[str, int] = {}
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Name):
            bound[target.id] = bound.get(target.id, 0) + 1
            n = size(value)
            if n is not None:
                sized[target.id] = n
    return {name: n for name, n in sized.items() if bound[name] == 1}


def iterated(node: ast.expr, names: frozenset[str]) -> str:
    """The parameter a loop iterates: `p`, `p.items()`, `sorted(p)`, `(p or {}).keys()`."""
    while isinstance(node, (ast.Call, ast.BoolOp)):
        if isinstance(node, ast.BoolOp):
            if not isinstance(node.op, ast.Or):
                return ""
            node = node.values[0]  # `p or {}`: the default is empty
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ITERATE_METHODS and not node.args:
            node = func.value
        elif isinstance(func, ast.Name) and func.id in ITERATE_CALLS and node.args:
            node = node.args[0]
        else:
            return ""
    return node.id if isinstance(node, ast.Name) and node.id in names else ""


def bind(
    sites: Iterable[list[Any]], function: dict[str, Any], shape: dict[str, Any], line: int
) -> list[list[Any]]:
    """A helper's sites as one call runs them, at the call's line: a site in a loop over a
    parameter once per item of a literal argument (none for an empty default), once for any
    other argument, and still looped when the caller passes its own parameter on."""
    params: list[str] = function.get("params", [])
    out = []
    for site in sites:
        if len(site) < 3:
            out.append([line, site[1]])
            continue
        over = site[2]
        index = str(params.index(over)) if over in params else ""
        value = shape.get(index, shape.get(over, function.get("empty", {}).get(over, 1)))
        if isinstance(value, str):
            out.append([line, site[1], value])
        else:
            out += [[line, site[1]] for _ in range(value)]
    return out


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


Func: TypeAlias = ast.FunctionDef | ast.AsyncFunctionDef


def fixture_of(node: Func) -> tuple[str, bool] | None:
    """(fixture name, autouse) for a function decorated with `pytest.fixture`, else None."""
    for deco in node.decorator_list:
        call = deco if isinstance(deco, ast.Call) else None
        if dotted(call.func if call else deco).rsplit(".", 1)[-1] != "fixture":
            continue
        keywords = {k.arg: k.value for k in call.keywords} if call else {}
        name = keywords.get("name")
        named = name.value if isinstance(name, ast.Constant) else None
        # `autouse=<expression>` may be true: only a literal false keeps the fixture opt-in.
        auto = "autouse" in keywords and truth(keywords["autouse"]) is not False
        return (named if isinstance(named, str) else node.name), auto
    return None


def extends(node: Func, name: str) -> bool:
    """`super().setUp()` or `Base.setUp(self)`: the overridden hook of a base still runs."""
    for sub in ast.walk(node):
        if not (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)):
            continue
        owner = sub.func.value
        if sub.func.attr == name and (
            (isinstance(owner, ast.Call) and dotted(owner.func) == "super")
            or (isinstance(owner, ast.Name) and owner.id not in ("self", "cls"))
        ):
            return True
    return False


@dataclass
class Setup:
    """What runs around the tests of a module or class: skips that reach each of them."""

    marks: list[list[Any]] = field(default_factory=list)  # inherited by subclasses
    runners: dict[str, list[list[Any]]] = field(default_factory=dict)  # hook or autouse fixture
    fixtures: dict[str, list[list[Any]]] = field(default_factory=dict)  # requested by name
    methods: dict[str, Func] = field(default_factory=dict)  # for `self.helper()` in a hook
    case: bool = False  # a unittest.TestCase, maybe through a base of this file

    def skips(self) -> list[list[Any]]:
        return self.marks + [s for skips in self.runners.values() for s in skips]


@dataclass(frozen=True)
class Scope:
    """Where a body of definitions stands: the module, or a test class in it."""

    prefix: str  # of its tests' keys (`Class::`)
    skips: list[list[Any]]  # skips that reach each of its tests
    blocked: str  # why none of its tests is collected ("": they are)
    off: set[str]  # names marked `__test__ = False` in it
    functions: list[list[Any]]  # skips of runners around its functions only (setup_function)
    setup: Setup
    case: bool  # a unittest.TestCase


@dataclass(frozen=True)
class Naming:
    """What pytest collects by name: `python_files`, `python_classes` and `python_functions` of
    the parent's configuration (pytest's defaults otherwise). A pattern is a prefix, or a glob
    when it holds one; methods of a `unittest.TestCase` are unittest's: the `test` prefix."""

    files: tuple[str, ...] = ("test_*.py", "*_test.py")
    classes: tuple[str, ...] = ("Test",)
    functions: tuple[str, ...] = ("test",)

    def test_file(self, name: str) -> bool:
        return name.endswith(".py") and any(fnmatchcase(name, p) for p in self.files)

    def test_class(self, node: ast.ClassDef) -> bool:
        bases = {dotted(b).rsplit(".", 1)[-1] for b in node.bases}
        return matches(node.name, self.classes) or any(b.endswith("TestCase") for b in bases)

    def test_function(self, name: str, case: bool) -> bool:
        return name.startswith("test") if case else matches(name, self.functions)


def matches(name: str, patterns: Iterable[str]) -> bool:
    return any(
        fnmatchcase(name, p) if any(c in p for c in "*?[") else name.startswith(p) for p in patterns
    )


def imports_of(tree: ast.Module) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Names imported from modules outside the standard library, where a helper can live:
    {local name: [module, name]} and {module alias: module}."""
    names: dict[str, list[str]] = {}
    modules: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            module = "." * stmt.level + (stmt.module or "")
            if stmt.level or not stdlib(module):
                names.update({a.asname or a.name: [module, a.name] for a in stmt.names})
        elif isinstance(stmt, ast.Import):
            modules.update({a.asname or a.name: a.name for a in stmt.names if not stdlib(a.name)})
    return names, modules


def stdlib(module: str) -> bool:
    top = module.split(".", 1)[0]
    return top in STDLIB or top in ("pytest", "_pytest", "hypothesis", "numpy")


class FileScan:
    """Every test of one module, with what keeps it from being collected or from testing."""

    def __init__(
        self, tree: ast.Module, source: Source, helpers: Sequence[str], naming: Naming = Naming()
    ) -> None:
        self.source, self.helpers, self.naming = source, helpers, naming
        self.tests: dict[str, dict[str, Any]] = {}
        self.others: dict[str, str] = {}  # function name -> body digest, to spot renames away
        self.scanned: dict[str, Found] = {}  # every function by `Class::name`, tests or not
        self.resolved: dict[str, tuple[list[list[Any]], list[list[Any]]]] = {}
        self.names, self.modules = imports_of(tree)
        self.constants = constants(tree.body)
        off = marked_false(tree.body)
        blocked = "module __test__ = False" if test_false(tree.body) else ""
        self.pending: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.body_skips: dict[int, list[list[Any]]] = {}
        self.classes: dict[str, Setup] = {}  # module-level classes by name, as bases
        self.class_nodes: dict[str, ast.ClassDef] = {}
        self.setups: dict[int, Setup] = {}  # by id of the ClassDef
        self.bases: dict[str, list[str]] = {}  # class key (`Outer::Inner`) -> its bases' names
        self.module = self.module_setup(tree.body)
        # setup_function runs around module-level functions only.
        only_functions = [s for name in FUNCTION_RUNNERS for s in self.module.runners.pop(name, [])]
        base_skips = module_skips(tree.body) + self.module.skips()
        here = Scope("", base_skips, blocked, off, only_functions, self.module, case=False)
        self.scope(tree.body, here)
        self.scan_helpers()
        for key, test in self.tests.items():
            self.finish(key, test)

    def scan_helpers(self) -> None:
        """Scan the non-test functions that can assert: those that name an assertion or an
        imported helper, then, round by round, those that name a function scanned already.
        Most of a large suite's helpers do neither, and walking them costs a cold run."""
        names = [n.encode() for n in self.names]
        pattern = re.compile(rb"assert|raises|warns|fail|deprecated_call")
        if names:
            pattern = re.compile(pattern.pattern + b"|" + b"|".join(map(re.escape, names)))
        wanted = [
            k
            for k, node in self.pending.items()
            if self.helpers or pattern.search(self.source.chunk(node))
        ]
        while wanted:
            for key in wanted:
                node = self.pending.pop(key)
                scanner = Scanner(self.source, self.helpers, node, self.constants)
                scanner.statements(node.body)
                self.scanned[key] = scanner.found
            words = b"|".join(re.escape(k.rsplit("::", 1)[-1].encode()) for k in wanted)
            found = re.compile(rb"\b(?:" + words + rb")\b")
            wanted = [
                k for k, node in self.pending.items() if found.search(self.source.chunk(node))
            ]

    @property
    def functions(self) -> dict[str, dict[str, Any]]:
        """Helpers (non-test functions) that assert, directly or through calls: other files'
        tests may call them."""
        out = {}
        for key in self.others:
            if key not in self.scanned:
                continue
            sites, ext = self.resolve(key, frozenset({key}))
            if sites or ext or key.rsplit("::", 1)[-1].startswith("assert"):
                out[key] = {"sites": sites, "ext": ext, **self.scanned[key].signature}
        return out

    def finish(self, key: str, test: dict[str, Any]) -> None:
        found = self.scanned[key]
        sites, ext = self.resolve(key, frozenset({key}))
        # A call into another file's `assert*` helper counts one here, as written: comparisons
        # count what the helper runs (count_asserts.Comparison.count).
        written = sum(1 for call in ext if call[4])
        test["asserts"] = found.asserts + len(sites) - len(found.sites) + written
        # A test's parameters are fixtures and parametrize values: its loops count once.
        test["sites"], test["ext"] = [site[:2] for site in sites], ext
        # Its checks as written, helper calls unexpanded: what a rename keeps.
        calls = [[line, text] for line, _name, _node, text in found.calls if text]
        test["written"] = sorted([*(s[:2] for s in found.sites), *calls], key=lambda s: s[0])
        owner = key.rsplit("::", 1)[0] if "::" in key else ""
        bases = [c for c in self.lineage(owner, set()) if isinstance(c, list)] if owner else []
        if bases:
            test["bases"] = bases  # their skips are the test's: count_asserts reads them

    def resolve(self, key: str, seen: frozenset[str]) -> tuple[list[list[Any]], list[list[Any]]]:
        """A function's assertion sites with the sites of the local helpers it calls (at the
        call's line), and the calls into imported helpers left for count_asserts."""
        if key in self.resolved:
            return self.resolved[key]
        found = self.scanned[key]
        owner = key.rsplit("::", 1)[0] if "::" in key else ""
        sites, ext = list(found.sites), []
        for line, name, node, fallback in found.calls:
            target = self.target(name, owner)
            if isinstance(target, str) and target not in seen:
                inner, far = self.resolve(target, seen | {target})
                shape = sizes(node, found.known)
                sites += bind(inner, self.scanned[target].signature, shape, line)
                ext += [[line, *rest] for _line, *rest in far]
            elif isinstance(target, list):
                ext.append([line, *target, sizes(node, found.known), fallback])
            elif target is None and fallback:
                sites.append([line, fallback])
        sites.sort(key=lambda site: int(site[0]))
        self.resolved[key] = (sites, ext)
        return sites, ext

    def target(self, name: str, owner: str) -> str | list[str] | None:
        """What a call reaches: a function of this file (by key), [module, name] in another
        file (a method of a class imported as a base: `Class::method`), or None."""
        if name.startswith(("self.", "cls.")) and name.count(".") == 1:
            method = name.split(".", 1)[1]
            # The first class of the lineage that has it (the MRO of single inheritance); an
            # imported base is looked into by count_asserts.
            for cls in self.lineage(owner, set()):
                if isinstance(cls, list):
                    return [cls[0], f"{cls[1]}::{method}"]
                if f"{cls}::{method}" in self.scanned:
                    return f"{cls}::{method}"
            return None
        if name in self.scanned:
            return name
        return self.imported(name) or None

    def lineage(self, owner: str, seen: set[str]) -> Iterator[str | list[str]]:
        """The class and its bases, depth first in order: a class of this file by its key,
        one imported from another module as [module, class]."""
        seen.add(owner)
        yield owner
        for base in self.bases.get(owner, []):
            if base in self.bases:
                if base not in seen:
                    yield from self.lineage(base, seen)
            elif self.imported(base):
                yield self.imported(base)

    def imported(self, name: str) -> list[str]:
        if name in self.names:
            return self.names[name]
        module, _, attr = name.rpartition(".")
        return [self.modules[module], attr] if module in self.modules else []

    def scope(self, body: Sequence[ast.stmt], where: Scope) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(
                    node,
                    where.prefix,
                    where.skips + where.functions + self.requested(node, where.setup),
                    where.blocked or ("__test__ = False" if node.name in where.off else ""),
                    where.case,
                )
            elif isinstance(node, ast.ClassDef):
                self.test_class(node, where)

    def test_class(self, node: ast.ClassDef, where: Scope) -> None:
        own = self.setups.get(id(node)) or self.class_setup(node)
        self.bases[where.prefix + node.name] = [dotted(b) for b in node.bases]
        if not (own.case or self.naming.test_class(node)):
            self.helper_class(node, where.prefix)
            return
        inner = Scope(
            prefix=f"{where.prefix}{node.name}::",
            skips=where.skips + own.skips(),
            blocked=where.blocked or self.class_block(node, own.case),
            off=marked_false(node.body),
            functions=[],
            setup=Setup(fixtures={**where.setup.fixtures, **own.fixtures}),
            case=own.case,
        )
        self.scope([*node.body, *self.mixed_in(node, own.case)], inner)

    def mixed_in(
        self, node: ast.ClassDef, case: bool, seen: frozenset[str] = frozenset()
    ) -> list[Func]:
        """The tests a test class inherits from bases of this file that pytest does not collect
        on their own (mixins: `class Tests(CheckMixin, TestCase)`): pytest collects them under
        the subclass, so they are inventoried there, each once, the first base's first."""
        defined = {
            s.name for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        found: dict[str, Func] = {}
        for name in map(dotted, node.bases):
            base = self.class_nodes.get(name)
            if (
                base is None
                or name in seen
                or self.classes[name].case
                or self.naming.test_class(base)
            ):
                continue  # another file's, or collected on its own (its tests are its own)
            own = [s for s in base.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for method in [*own, *self.mixed_in(base, case, seen | {name})]:
                if self.naming.test_function(method.name, case):
                    found.setdefault(method.name, method)
        return [method for name, method in found.items() if name not in defined]

    def helper_class(self, node: ast.ClassDef, prefix: str) -> None:
        """A class pytest does not collect (a base or mixin of test classes): its methods are
        helpers, whatever their names."""
        for method in node.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{prefix}{node.name}::{method.name}"
                self.others[key] = self.source.digest(method.body)
                self.pending[key] = method

    def module_setup(self, body: Sequence[ast.stmt]) -> Setup:
        """The module's hooks and fixtures, and a Setup for every module-level class, in order:
        a base is the class its name meant where the subclass was defined."""
        # Hooks of classes call module functions: those are known before any class is read.
        self.module = setup = Setup()
        setup.methods = {
            n.name: n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        for node in body:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = self.setups[id(node)] = self.class_setup(node)
                self.class_nodes[node.name] = node
        for name, node in setup.methods.items():
            self.hook(node, "", name in MODULE_RUNNERS | FUNCTION_RUNNERS, setup, [])
        return setup

    def class_setup(self, node: ast.ClassDef) -> Setup:
        """A class's skips with those of its bases defined in this file: their marks, and their
        hooks and autouse fixtures unless overridden without a call to the base's."""
        bases = [self.classes[n] for n in map(dotted, node.bases) if n in self.classes]
        setup = Setup(marks=class_marks(node) + [m for base in bases for m in base.marks])
        # pytest collects a TestCase subclass whatever its name, `class Slow(Base)` included.
        setup.case = any(base.case for base in bases) or any(
            dotted(b).rsplit(".", 1)[-1].endswith("TestCase") for b in node.bases
        )
        for base in reversed(bases):  # the first base wins, as in the MRO
            setup.runners.update(base.runners)
            setup.fixtures.update(base.fixtures)
            setup.methods.update(base.methods)
        own = [s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        setup.methods.update({s.name: s for s in own})
        for method in own:
            inherited = setup.runners.pop(method.name, [])
            if inherited and not extends(method, method.name):
                inherited = []
            self.hook(method, f"{node.name}.", method.name in CLASS_RUNNERS, setup, inherited)
        return setup

    def hook(
        self, node: Func, owner: str, runner: bool, setup: Setup, inherited: list[list[Any]]
    ) -> None:
        """File a setup hook or fixture of a module or class by the skips its body raises."""
        fixture = fixture_of(node)
        if not (runner or fixture):
            return
        skips = [
            [line, f"{owner}{node.name} {kind}"] for line, kind in self.skips_of(node, setup, set())
        ] + inherited
        if runner or (fixture and fixture[1]):
            setup.runners[node.name] = skips
        if fixture and not fixture[1]:
            setup.fixtures[fixture[0]] = skips

    def skips_of(self, node: Func, setup: Setup, seen: set[int]) -> list[list[Any]]:
        """Skips a function's body raises, directly or through the module functions and the
        methods it calls (at the call's line)."""
        if id(node) in self.body_skips:
            return self.body_skips[id(node)]
        seen.add(id(node))
        scanner = Scanner(self.source, ())
        scanner.statements(node.body)
        skips = list(scanner.found.skips)
        for line, name, _node, _text in scanner.found.calls:
            method = name.split(".", 1)[1] if name.startswith(("self.", "cls.")) else ""
            target = (setup if method else self.module).methods.get(method or name)
            if target is not None and id(target) not in seen and "." not in method:
                skips += [[line, kind] for _line, kind in self.skips_of(target, setup, seen)]
        self.body_skips[id(node)] = skips
        return skips

    def requested(self, node: Func, setup: Setup) -> list[list[Any]]:
        """Skips of the fixtures a test names (arguments, `usefixtures`) defined in this file."""
        names = [a.arg for a in all_args(node.args)]
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and dotted(deco.func).endswith("usefixtures"):
                names += [str(a.value) for a in deco.args if isinstance(a, ast.Constant)]
        return [s for name in names for s in setup.fixtures.get(name, [])]

    @staticmethod
    def class_block(node: ast.ClassDef, case: bool) -> str:
        if test_false(node.body):
            return f"class {node.name} sets __test__ = False"
        has_init = any(isinstance(s, ast.FunctionDef) and s.name == "__init__" for s in node.body)
        if has_init and not case:
            return f"class {node.name} defines __init__"
        return ""

    def function(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef,
        prefix: str,
        skips: list[list[Any]],
        blocked: str,
        case: bool,
    ) -> None:
        digest = self.source.digest(node.body)
        if not self.naming.test_function(node.name, case):
            self.others[prefix + node.name] = digest
            self.pending[prefix + node.name] = node
            return
        scanner = Scanner(self.source, self.helpers, node, self.constants)
        scanner.statements(node.body)
        found = self.scanned[prefix + node.name] = scanner.found
        early = [line for line in found.returns if found.first_assert and line < found.first_assert]
        self.tests[prefix + node.name] = {
            "line": node.lineno,
            "asserts": found.asserts,
            "vacuous": found.vacuous,
            "skips": skips
            + decorator_skips(node.decorator_list)
            + found.skips
            + [[line, "early-return"] for line in early[:1]],
            "blocked": blocked,
            "body": digest,
        }


def analyze(
    source: bytes, path: str, helpers: Sequence[str] = (), naming: Naming = Naming()
) -> dict[str, Any]:
    """The inventory of one test file; a file that does not parse is an error, not a crash."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 0
        return {
            "error": {"line": line, "message": f"{type(exc).__name__}: {exc}"},
            "tests": {},
            "others": {},
            "functions": {},
            "classes": {},
        }
    scan = FileScan(tree, Source(source), helpers, naming)
    classes = {name: setup.skips() for name, setup in scan.classes.items()}
    return {
        "error": None,
        "tests": scan.tests,
        "others": scan.others,
        "functions": scan.functions,
        # Skips of each module-level class that has some: a test class of another file may
        # inherit them.
        "classes": {name: skips for name, skips in classes.items() if skips},
    }


def fixture_skips(source: bytes) -> dict[str, list[list[Any]]]:
    """The fixtures of a conftest.py whose bodies skip (directly or through the functions they
    call), by name: each skips every test that uses it, and an autouse one every test under its
    folder."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    module = FileScan(tree, Source(source), ()).module
    found = {**module.fixtures, **module.runners}
    return {name: skips for name, skips in found.items() if skips}


def outcome_hooks(source: bytes) -> list[list[Any]]:
    """Hook functions of a conftest.py that can rewrite outcomes or collection."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return [
        [node.lineno, node.name]
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in OUTCOME_HOOKS
    ]
