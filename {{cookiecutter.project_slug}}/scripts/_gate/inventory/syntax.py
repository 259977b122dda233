"""The names and shapes of test code the inventory reads: what counts as an assertion, a skip,
a runner, a hook; dotted names, calls, parameters, literal sizes and bound names."""

from __future__ import annotations

import ast
import hashlib
import sys
from collections import deque
from collections.abc import Iterable, Sequence
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


Func: TypeAlias = ast.FunctionDef | ast.AsyncFunctionDef


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
