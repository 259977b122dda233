"""What a test file asserts, read from its AST: tests, assertions, skips, vacuous checks.

Pure and cacheable: `analyze(source bytes, path, helper patterns)` returns plain JSON data, so
trees.py keeps it by git blob id and comparison.py compares parent and patch file by file. The
scan's parts: syntax.py (names and shapes), truth.py (checks that cannot fail), skips.py,
scanner.py (one test body's walk).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from _gate.inventory.scanner import Found, Scanner
from _gate.inventory.skips import (
    class_marks,
    decorator_skips,
    marked_false,
    module_skips,
    test_false,
)
from _gate.inventory.syntax import (
    CLASS_RUNNERS,
    FUNCTION_RUNNERS,
    MODULE_RUNNERS,
    OUTCOME_HOOKS,
    Func,
    Source,
    all_args,
    bind,
    constants,
    dotted,
    imports_of,
    matches,
    sizes,
)
from _gate.inventory.truth import truth


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
        # count what the helper runs (comparison.Comparison.count).
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
            test["bases"] = bases  # their skips are the test's: the comparison reads them

    def resolve(self, key: str, seen: frozenset[str]) -> tuple[list[list[Any]], list[list[Any]]]:
        """A function's assertion sites with the sites of the local helpers it calls (at the
        call's line), and the calls into imported helpers left for trees.Helpers."""
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
            # imported base is looked into by trees.Helpers.
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
