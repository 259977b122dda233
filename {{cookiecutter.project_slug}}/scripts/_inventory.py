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
from collections.abc import Callable, Iterable, Sequence
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
BROAD = frozenset({"Exception", "BaseException"})
SWALLOWS = frozenset({"AssertionError", "Exception", "BaseException"})
# Hooks a conftest.py can use to rewrite outcomes, deselect tests or fake the exit status.
OUTCOME_HOOKS = frozenset(
    {
        "pytest_runtest_makereport",
        "pytest_report_teststatus",
        "pytest_runtest_call",
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
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        if any(not isinstance(e, ast.Starred) for e in node.elts):
            return True
        return False if not node.elts else None
    if isinstance(node, ast.Dict):
        return True if any(k is not None for k in node.keys) else (False if not node.keys else None)
    if isinstance(node, ast.JoinedStr):
        return True if any(isinstance(v, ast.Constant) and v.value for v in node.values) else None
    if isinstance(node, ast.Lambda):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = truth(node.operand, text)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        return bool_op(node, text)
    if isinstance(node, ast.IfExp):
        return if_exp(node, text)
    if isinstance(node, ast.NamedExpr):
        return truth(node.value, text)
    if isinstance(node, ast.Compare):
        return comparison(node, text)
    if isinstance(node, ast.Call) and dotted(node.func) == "bool" and len(node.args) == 1:
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
    calls: list[list[Any]] = field(default_factory=list)  # [line, called name]: maybe a helper

    def add_assert(self, line: int, vacuous: str = "", text: str = "") -> None:
        self.asserts += 1
        self.first_assert = self.first_assert or line
        if vacuous:
            self.vacuous.append([line, vacuous])
        else:
            self.sites.append([line, text])


class Scanner:
    """Walk one test's statements with the context that makes an assertion hollow or dead."""

    def __init__(self, source: Source, helpers: Sequence[str]) -> None:
        self.source, self.helpers = source, helpers
        self.found = Found()

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
            self.expressions(stmt.iter, hollow)
            self.statements(
                stmt.body, hollow or ("empty-loop" if empty_iterable(stmt.iter) else "")
            )
            self.statements(stmt.orelse, hollow)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.statements(stmt.body, hollow)
        else:
            if isinstance(stmt, ast.Return) and not hollow:
                self.found.returns.append(stmt.lineno)
            if isinstance(stmt, ast.Raise) and raises_skip(stmt):
                self.found.skips.append([stmt.lineno, "raise-SkipTest"])
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
        if node is None:
            return
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                self.call(sub, hollow)

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
            self.found.add_assert(node.lineno, vacuous, self.source.text(node))
        elif last.startswith("assert"):
            vacuous = hollow or self.unittest_vacuous(last, node)
            self.found.add_assert(node.lineno, vacuous, self.source.text(node))
        elif last and any(fnmatchcase(last, pattern) for pattern in self.helpers):
            self.found.add_assert(node.lineno, hollow, self.source.text(node))
        elif last in SKIP_CALLS and (name.startswith(("pytest.", "self.", "cls.")) or name == last):
            self.found.skips.append([node.lineno, f"{last}-call"])
        elif last in MARKERS and decorator_skips(node.args):
            self.found.skips.append([node.lineno, f"{last}-skip"])
        elif name and not hollow:
            self.found.calls.append([node.lineno, name])

    def assertion(self, stmt: ast.Assert, hollow: str) -> None:
        test = stmt.test
        vacuous = hollow or ("always-true" if truth(test, self.source.text) else "")
        self.found.add_assert(stmt.lineno, vacuous, "assert " + self.source.text(test))

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


def raises_skip(stmt: ast.Raise) -> bool:
    """`raise unittest.SkipTest(...)`, `raise SkipTest`, `raise pytest.skip.Exception(...)`."""
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    name = dotted(exc) if exc is not None else ""
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


def is_test_class(node: ast.ClassDef) -> bool:
    bases = {dotted(b).rsplit(".", 1)[-1] for b in node.bases}
    return node.name.startswith("Test") or any(b.endswith("TestCase") for b in bases)


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

    def __init__(self, tree: ast.Module, source: Source, helpers: Sequence[str]) -> None:
        self.source, self.helpers = source, helpers
        self.tests: dict[str, dict[str, Any]] = {}
        self.others: dict[str, str] = {}  # function name -> body digest, to spot renames away
        self.scanned: dict[str, Found] = {}  # every function by `Class::name`, tests or not
        self.resolved: dict[str, tuple[list[list[Any]], list[list[Any]]]] = {}
        self.names, self.modules = imports_of(tree)
        off = marked_false(tree.body)
        blocked = "module __test__ = False" if test_false(tree.body) else ""
        self.pending: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.body_skips: dict[int, list[list[Any]]] = {}
        self.classes: dict[str, Setup] = {}  # module-level classes by name, as bases
        self.setups: dict[int, Setup] = {}  # by id of the ClassDef
        self.module = self.module_setup(tree.body)
        # setup_function runs around module-level functions only.
        only_functions = [s for name in FUNCTION_RUNNERS for s in self.module.runners.pop(name, [])]
        base_skips = module_skips(tree.body) + self.module.skips()
        self.scope(tree.body, "", base_skips, blocked, off, only_functions, self.module)
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
                scanner = Scanner(self.source, self.helpers)
                scanner.statements(self.pending.pop(key).body)
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
            if sites or ext:
                out[key] = {"sites": sites, "ext": ext}
        return out

    def finish(self, key: str, test: dict[str, Any]) -> None:
        found = self.scanned[key]
        sites, ext = self.resolve(key, frozenset({key}))
        test["asserts"] = found.asserts + len(sites) - len(found.sites)
        test["sites"], test["ext"] = sites, ext

    def resolve(self, key: str, seen: frozenset[str]) -> tuple[list[list[Any]], list[list[Any]]]:
        """A function's assertion sites with the sites of the local helpers it calls (at the
        call's line), and the calls into imported helpers left for count_asserts."""
        if key in self.resolved:
            return self.resolved[key]
        found = self.scanned[key]
        prefix = key.rsplit("::", 1)[0] + "::" if "::" in key else ""
        sites, ext = list(found.sites), []
        for line, name in found.calls:
            local = self.local(name, prefix)
            if local is not None and local not in seen:
                inner, far = self.resolve(local, seen | {local})
                sites += [[line, text] for _line, text in inner]
                ext += [[line, *rest] for _line, *rest in far]
            elif local is None and self.imported(name):
                ext.append([line, *self.imported(name)])
        sites.sort(key=lambda site: int(site[0]))
        self.resolved[key] = (sites, ext)
        return sites, ext

    def local(self, name: str, prefix: str) -> str | None:
        if name.startswith(("self.", "cls.")) and name.count(".") == 1:
            name = prefix + name.split(".", 1)[1]
        return name if name in self.scanned else None

    def imported(self, name: str) -> list[str]:
        if name in self.names:
            return self.names[name]
        module, _, attr = name.rpartition(".")
        return [self.modules[module], attr] if module in self.modules else []

    def scope(
        self,
        body: Sequence[ast.stmt],
        prefix: str,
        skips: list[list[Any]],
        blocked: str,
        off: set[str],
        functions: list[list[Any]],
        setup: Setup,
    ) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(
                    node,
                    prefix,
                    skips + functions + self.requested(node, setup),
                    blocked or ("__test__ = False" if node.name in off else ""),
                )
            elif isinstance(node, ast.ClassDef):
                own = self.setups.get(id(node)) or self.class_setup(node)
                if not (own.case or is_test_class(node)):
                    continue
                inner = blocked or self.class_block(node, own.case)
                self.scope(
                    node.body,
                    f"{prefix}{node.name}::",
                    skips + own.skips(),
                    inner,
                    marked_false(node.body),
                    [],
                    Setup(fixtures={**setup.fixtures, **own.fixtures}),
                )

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
        for line, name in scanner.found.calls:
            method = name.split(".", 1)[1] if name.startswith(("self.", "cls.")) else ""
            target = (setup if method else self.module).methods.get(method or name)
            if target is not None and id(target) not in seen and "." not in method:
                skips += [[line, kind] for _line, kind in self.skips_of(target, setup, seen)]
        self.body_skips[id(node)] = skips
        return skips

    def requested(self, node: Func, setup: Setup) -> list[list[Any]]:
        """Skips of the fixtures a test names (arguments, `usefixtures`) defined in this file."""
        if not node.name.startswith("test"):
            return []
        names = [a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
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
    ) -> None:
        digest = self.source.digest(node.body)
        if not node.name.startswith("test"):
            self.others[prefix + node.name] = digest
            self.pending[prefix + node.name] = node
            return
        scanner = Scanner(self.source, self.helpers)
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


def analyze(source: bytes, path: str, helpers: Sequence[str] = ()) -> dict[str, Any]:
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
        }
    scan = FileScan(tree, Source(source), helpers)
    return {
        "error": None,
        "tests": scan.tests,
        "others": scan.others,
        "functions": scan.functions,
    }


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
