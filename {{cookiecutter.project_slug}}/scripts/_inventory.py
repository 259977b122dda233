"""What a test file asserts, read from its AST: tests, assertions, skips, vacuous checks.

Pure and cacheable: `analyze(source bytes, path, helper patterns)` returns plain JSON data, so
count_asserts.py can cache it by git blob id and compare parent and patch file by file.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

PYTEST_CHECKS = frozenset({"raises", "warns", "fail", "deprecated_call"})
UNITTEST_CONTEXTS = frozenset({"assertRaises", "assertRaisesRegex", "assertWarns", "assertLogs"})
SKIP_MARKS = frozenset({"skip", "skipif", "xfail"})
UNITTEST_SKIPS = frozenset({"skip", "skipIf", "skipUnless", "expectedFailure"})
SKIP_CALLS = frozenset({"skip", "importorskip", "xfail", "skipTest"})
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
EQUAL, TRUTHY, NOT_NONE, NOT_EQUAL, OTHER = "eq", "truthy", "not-none", "ne", "other"


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

    def digest(self, body: Sequence[ast.stmt]) -> str:
        first, last = body[0].lineno - 1, body[-1].end_lineno or body[-1].lineno
        return hashlib.sha1(b"\n".join(line.strip() for line in self.lines[first:last])).hexdigest()


def truthy_literal(node: ast.AST) -> bool:
    """A value that is true whatever the code under test does."""
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    return isinstance(node, ast.JoinedStr) and any(
        isinstance(v, ast.Constant) and v.value for v in node.values
    )


def constant_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and not node.value


@dataclass
class Found:
    """What one test's body holds."""

    asserts: int = 0
    vacuous: list[list[Any]] = field(default_factory=list)  # [line, kind]
    skips: list[list[Any]] = field(default_factory=list)  # [line, kind]
    checks: list[str] = field(default_factory=list)  # "kind:subject"
    first_assert: int = 0
    returns: list[int] = field(default_factory=list)

    def add_assert(self, line: int, vacuous: str = "") -> None:
        self.asserts += 1
        self.first_assert = self.first_assert or line
        if vacuous:
            self.vacuous.append([line, vacuous])


class Scanner:
    """Walk one test's statements with the context that makes an assertion hollow."""

    def __init__(self, source: Source, helpers: Sequence[str]) -> None:
        self.source, self.helpers = source, helpers
        self.found = Found()

    def statements(self, body: Iterable[ast.stmt], hollow: str = "") -> None:
        dead = ""
        for stmt in body:
            self.statement(stmt, hollow or dead)
            if isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
                dead = "after-return"

    def statement(self, stmt: ast.stmt, hollow: str) -> None:
        if isinstance(stmt, ast.Assert):
            self.assertion(stmt, hollow)
            self.expressions(stmt.msg, hollow)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Compare):
            self.found.vacuous.append([stmt.lineno, "bare-comparison"])
        elif isinstance(stmt, (ast.If, ast.While)):
            self.expressions(stmt.test, hollow)
            self.statements(stmt.body, hollow or ("if-false" if constant_false(stmt.test) else ""))
            self.statements(stmt.orelse, hollow)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self.trial(stmt, hollow)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.expressions(item.context_expr, hollow)
            self.statements(stmt.body, hollow)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.expressions(stmt.iter, hollow)
            self.statements(stmt.body, hollow)
            self.statements(stmt.orelse, hollow)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.statements(stmt.body, hollow)
        else:
            if isinstance(stmt, ast.Return) and not hollow:
                self.found.returns.append(stmt.lineno)
            self.expressions(stmt, hollow)

    def trial(self, stmt: Any, hollow: str) -> None:
        caught = set()
        for handler in stmt.handlers:
            kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught |= {dotted(k).rsplit(".", 1)[-1] if k is not None else "" for k in kinds}
        swallowed = "swallowed" if caught & (SWALLOWS | {""}) else ""
        self.statements(stmt.body, hollow or swallowed)
        for handler in stmt.handlers:
            self.statements(handler.body, hollow)
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
            broad = last in ("raises", "assertRaises") and any(
                dotted(a).rsplit(".", 1)[-1] in BROAD for a in node.args[:1]
            )
            self.found.add_assert(node.lineno, hollow or ("broad-raises" if broad else ""))
        elif last.startswith("assert"):
            self.found.add_assert(node.lineno, hollow or self.unittest_vacuous(last, node))
            self.unittest_check(last, node)
        elif last and any(fnmatchcase(last, pattern) for pattern in self.helpers):
            self.found.add_assert(node.lineno, hollow)
        elif last in SKIP_CALLS and (name.startswith(("pytest.", "self.")) or name == last):
            self.found.skips.append([node.lineno, f"{last}-call"])

    def assertion(self, stmt: ast.Assert, hollow: str) -> None:
        test = stmt.test
        vacuous = hollow
        if not vacuous and truthy_literal(test):
            vacuous = "literal"
        if not vacuous and isinstance(test, ast.Compare) and len(test.ops) == 1:
            text = self.source.text
            if isinstance(test.ops[0], (ast.Eq, ast.Is, ast.LtE, ast.GtE)) and text(
                test.left
            ) == text(test.comparators[0]):
                vacuous = "self-comparison"
        self.found.add_assert(stmt.lineno, vacuous)
        for subject, kind in checks_of(test, self.source):
            self.found.checks.append(f"{kind}:{subject}")

    def unittest_vacuous(self, name: str, node: ast.Call) -> str:
        args = node.args
        if name in ("assertTrue", "assert_") and args and truthy_literal(args[0]):
            return "literal"
        pairs = ("assertEqual", "assertEquals", "assertIs", "assertLessEqual", "assertGreaterEqual")
        if (
            name in pairs
            and len(args) >= 2
            and self.source.text(args[0]) == self.source.text(args[1])
        ):
            return "self-comparison"
        return ""

    def unittest_check(self, name: str, node: ast.Call) -> None:
        kind = {
            "assertEqual": EQUAL,
            "assertEquals": EQUAL,
            "assertTrue": TRUTHY,
            "assertIsNotNone": NOT_NONE,
            "assertNotEqual": NOT_EQUAL,
        }.get(name)
        if kind is None:
            return
        count = 2 if kind in (EQUAL, NOT_EQUAL) else 1
        for arg in node.args[:count]:
            self.found.checks.append(f"{kind}:{self.source.text(arg)}")


def checks_of(test: ast.expr, source: Source) -> Iterator[tuple[str, str]]:
    """(subject, kind) pairs: what an assert says about which expression."""
    dump = source.text
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(op, ast.Eq):
            yield dump(test.left), EQUAL
            yield dump(right), EQUAL
        elif isinstance(op, ast.IsNot) and isinstance(right, ast.Constant) and right.value is None:
            yield dump(test.left), NOT_NONE
        elif isinstance(op, ast.NotEq):
            yield dump(test.left), NOT_EQUAL
            yield dump(right), NOT_EQUAL
        else:
            yield dump(test.left), OTHER
    elif not isinstance(test, ast.BoolOp):
        yield dump(test), TRUTHY


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


def module_skips(tree: ast.Module) -> list[list[Any]]:
    skips = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets
        ):
            values = (
                stmt.value.elts if isinstance(stmt.value, (ast.List, ast.Tuple)) else [stmt.value]
            )
            skips += decorator_skips(values)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            last = call_name(stmt.value).rsplit(".", 1)[-1]
            if last in SKIP_CALLS:
                skips.append([stmt.lineno, f"{last}-call"])
    return skips


def is_test_class(node: ast.ClassDef) -> bool:
    bases = {dotted(b).rsplit(".", 1)[-1] for b in node.bases}
    return node.name.startswith("Test") or any(b.endswith("TestCase") for b in bases)


class FileScan:
    """Every test of one module, with what keeps it from being collected or from testing."""

    def __init__(self, tree: ast.Module, source: Source, helpers: Sequence[str]) -> None:
        self.source, self.helpers = source, helpers
        self.tests: dict[str, dict[str, Any]] = {}
        self.others: dict[str, str] = {}  # function name -> body digest, to spot renames away
        off = marked_false(tree.body)
        base_skips = module_skips(tree)
        blocked = "module __test__ = False" if test_false(tree.body) else ""
        self.scope(tree.body, "", base_skips, blocked, off)

    def scope(
        self,
        body: Sequence[ast.stmt],
        prefix: str,
        skips: list[list[Any]],
        blocked: str,
        off: set[str],
    ) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(
                    node, prefix, skips, blocked or ("__test__ = False" if node.name in off else "")
                )
            elif isinstance(node, ast.ClassDef) and is_test_class(node):
                inner = blocked or self.class_block(node)
                self.scope(
                    node.body,
                    f"{prefix}{node.name}::",
                    skips + decorator_skips(node.decorator_list),
                    inner,
                    marked_false(node.body),
                )

    @staticmethod
    def class_block(node: ast.ClassDef) -> str:
        if test_false(node.body):
            return f"class {node.name} sets __test__ = False"
        has_init = any(isinstance(s, ast.FunctionDef) and s.name == "__init__" for s in node.body)
        bases = {dotted(b).rsplit(".", 1)[-1] for b in node.bases}
        if has_init and not any(b.endswith("TestCase") for b in bases):
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
            return
        scanner = Scanner(self.source, self.helpers)
        scanner.statements(node.body)
        found = scanner.found
        early = [line for line in found.returns if found.first_assert and line < found.first_assert]
        self.tests[prefix + node.name] = {
            "line": node.lineno,
            "asserts": found.asserts,
            "vacuous": found.vacuous,
            "skips": skips
            + decorator_skips(node.decorator_list)
            + found.skips
            + [[line, "early-return"] for line in early[:1]],
            "checks": sorted(set(found.checks)),
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
        }
    scan = FileScan(tree, Source(source), helpers)
    return {"error": None, "tests": scan.tests, "others": scan.others}


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
