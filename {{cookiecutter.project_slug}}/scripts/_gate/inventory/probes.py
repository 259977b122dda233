"""Assertion probes: each check of a test the patch added or changed is forced to fail, and its
test must then fail (docs/assertion-probes.md).

A site whose forced failure leaves its test passing cannot fail: it sits in dead code, behind a
swallowed error, in a nested function nobody calls, after an early exit, under a skip taken at
run time, in a thread or a destructor whose errors go nowhere. The AST rules know many such
spellings by name; a probe knows them by what happens when the test runs.

Sites are found by AST in the patch's test files and conftest.py files: `assert` statements,
calls of `assert*` methods and functions (unittest's, the project's helpers, a library's),
the helper patterns of judge.yaml `assert_helpers`, calls of the file's own functions that hold
a check, and `pytest.raises`, `pytest.warns`, `assertRaises` and their kin. A test is probed
when the patch added or changed it, or changed a helper or fixture it names; its sites are its
own, and those of the changed helpers it names. A site is forced in the test's source, in a
private copy of the patch tree:

- `assert e` becomes a failing `assert`, a check call a raised AssertionError (unittest's
  failure exception), and an expected-exception check expects a type nothing raises, so the
  exception of its block escapes (or nothing is raised and the check fails);
- each run forces one site of each test it holds (a helper site is forced only in a run where
  no other test names that helper), so one pytest process probes many tests, and the runs go
  side by side, confined like every run of the patch's code, with canaries.

A site that cannot fail in a test the parent had is forced once more in the parent's version of
the test (the same check, by its text), run on the patch build: a site that cannot fail there
either is the base's, reported and not counted.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from _gate.inventory.syntax import UNITTEST_ASSERTS, dotted

# Checks that pass when their block raises (or warns): forced, they expect a type nothing raises.
RAISE_CHECKS = frozenset(
    {"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "deprecated_call"}
)
WARN_CHECKS = frozenset({"warns", "assertWarns", "assertWarnsRegex"})
LOG_CHECKS = frozenset({"assertLogs", "assertNoLogs"})
FORCED = b'(_ for _ in ()).throw(AssertionError("oracle probe: forced failure"'
NEVER = {
    "raises": b'type("OracleProbe", (Exception,), {})',
    "warns": b'type("OracleProbe", (Warning,), {})',
}
ROUNDS_LIMIT = 64  # runs a probe takes at most; sites beyond are reported, not probed
Span = tuple[int, int, int, int]  # line, column, end line, end column (columns in bytes)


@dataclass(frozen=True)
class Site:
    """One check in a test file: where it is, how it is forced, what it reads."""

    path: str
    owner: str  # the function it sits in: `name` or `Class::name`
    span: Span
    kind: str  # "assert", "call" or "raises"/"warns" (the argument `arg` is replaced)
    text: str
    arg: Span | None = None

    @property
    def line(self) -> int:
        return self.span[0]


@dataclass
class Function:
    """A function of a test file: its checks, the names it uses, a digest of its source."""

    key: str
    digest: str
    sites: list[Site] = field(default_factory=list)
    names: frozenset[str] = frozenset()


def span_of(node: ast.AST) -> Span:
    end_line = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
    end_col = getattr(node, "end_col_offset", None) or 0
    return node.lineno, node.col_offset, end_line, end_col  # type: ignore[attr-defined]


def text_of(lines: Sequence[bytes], span: Span) -> str:
    first, col, last, end = span
    if first == last:
        chunk = lines[first - 1][col:end]
    else:
        chunk = b"\n".join(
            [lines[first - 1][col:], *lines[first : last - 1], lines[last - 1][:end]]
        )
    return b" ".join(chunk.split()).decode("utf-8", "replace")


class Scan:
    """Every function of one file (module level, in classes), with its checks."""

    def __init__(self, path: str, data: bytes, helpers: Sequence[str]) -> None:
        self.path, self.lines = path, data.splitlines()
        self.helpers = [re.compile(pattern) for pattern in helpers]
        self.functions: dict[str, Function] = {}
        tree = ast.parse(data)
        nodes = dict(self.defined(tree.body, ""))
        # A call of the file's own function that holds a check is a check where it stands.
        own = {key.rsplit("::", 1)[-1] for key, node in nodes.items() if self.checks_in(node)}
        for key, node in nodes.items():
            names = frozenset(self.names_in(node))
            sites = list(self.sites(node, key, own - {key.rsplit("::", 1)[-1]}))
            self.functions[key] = Function(key, self.digest(node), sites, names)

    def defined(self, body: Iterable[ast.stmt], owner: str) -> Iterator[tuple[str, ast.AST]]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{owner}{node.name}", node
            elif isinstance(node, ast.ClassDef):
                yield from self.defined(node.body, f"{owner}{node.name}::")

    def digest(self, node: ast.AST) -> str:
        first, _, last, _ = span_of(node)
        for decorator in getattr(node, "decorator_list", []):
            first = min(first, decorator.lineno)
        body = b"\n".join(line.strip() for line in self.lines[first - 1 : last])
        return hashlib.sha1(body).hexdigest()

    @staticmethod
    def names_in(node: ast.AST) -> Iterator[str]:
        for child in ast.walk(node):
            if isinstance(child, ast.Name):
                yield child.id
            elif isinstance(child, ast.Attribute):
                yield child.attr
            elif isinstance(child, ast.arg):
                yield child.arg

    def checks_in(self, node: ast.AST) -> bool:
        return any(True for _ in self.sites(node, "", frozenset()))

    def check_kind(self, call: ast.Call, own: frozenset[str] | set[str]) -> str:
        name = dotted(call.func) or (call.func.attr if isinstance(call.func, ast.Attribute) else "")
        last = name.rsplit(".", 1)[-1]
        if last in RAISE_CHECKS:
            return "raises"
        if last in WARN_CHECKS:
            return "warns"
        if last in LOG_CHECKS or last in UNITTEST_ASSERTS or last.startswith("assert"):
            return "call"
        if any(pattern.search(name) for pattern in self.helpers):
            return "call"
        bare = name.removeprefix("self.").removeprefix("cls.")
        return "call" if "." not in bare and bare in own else ""

    def sites(self, node: ast.AST, owner: str, own: frozenset[str] | set[str]) -> Iterator[Site]:
        """The checks under `node`, outermost first: a check inside another is not one more,
        nor is one in the block of an expected-exception check (`with pytest.raises(...)`:
        a test of an assertion helper expects its failure there)."""
        todo = list(ast.iter_child_nodes(node))
        while todo:
            child = todo.pop(0)
            if isinstance(child, ast.Assert):
                yield self.site(owner, child, "assert")
                continue
            if isinstance(child, ast.Call):
                kind = self.check_kind(child, own)
                if kind:
                    yield self.site(owner, child, kind)
                    continue
            if isinstance(child, (ast.With, ast.AsyncWith)) and self.expects_raise(child, own):
                todo[:0] = [item.context_expr for item in child.items]
                continue
            todo[:0] = list(ast.iter_child_nodes(child))

    def expects_raise(
        self, block: ast.With | ast.AsyncWith, own: frozenset[str] | set[str]
    ) -> bool:
        return any(
            isinstance(item.context_expr, ast.Call)
            and self.check_kind(item.context_expr, own) in NEVER
            for item in block.items
        )

    def site(self, owner: str, node: ast.AST, kind: str) -> Site:
        span = span_of(node)
        arg = None
        if kind in NEVER:
            args = node.args if isinstance(node, ast.Call) else []
            if args:
                arg = span_of(args[0])
            else:
                kind = "call"  # nothing to replace: the whole call raises instead
        return Site(self.path, owner, span, kind, text_of(self.lines, span), arg)


def forced(data: bytes, sites: Iterable[Site]) -> bytes:
    """The source with each site forced to fail, line numbers kept."""
    lines = data.split(b"\n")
    for site in sorted(sites, key=lambda s: s.arg or s.span, reverse=True):
        first, col, last, end = site.arg or site.span
        pad = b"\n" * (last - first)
        if site.kind == "assert":
            new = b'assert False, ("oracle probe: forced failure"' + pad + b")"
        elif site.kind in NEVER:
            new = b"(" + NEVER[site.kind] + pad + b")"
        else:
            new = FORCED + pad + b"))"
        head, tail = lines[first - 1][:col], lines[last - 1][end:]
        lines[first - 1 : last] = (head + new + tail).split(b"\n")
    source = b"\n".join(lines)
    compile(source, "<probe>", "exec", dont_inherit=True)  # a forced file that breaks is ours
    return source


@dataclass(frozen=True)
class Probe:
    """One site of one test to force."""

    test: str  # the test's id, parameters folded (`path::Class::name`)
    site: Site


def schedule(plans: Mapping[str, Sequence[Site]]) -> list[list[Probe]]:
    """Runs of probes: each run forces at most one site of each test in it, and no site that
    another test of the run can reach (its own sites and the helper sites it names)."""
    pending = {test: list(sites) for test, sites in plans.items() if sites}
    reach = {test: set(sites) for test, sites in plans.items()}
    runs: list[list[Probe]] = []
    while pending:
        run: dict[str, Site] = {}
        for test in sorted(pending):
            site = pending[test][0]
            # Another test's forced site may be this one (a helper both name): both fail for it.
            clash = any(
                other != site and (other in reach[test] or site in reach[named])
                for named, other in run.items()
            )
            if not clash:
                run[test] = site
        for test in run:
            pending[test].pop(0)
            if not pending[test]:
                del pending[test]
        runs.append([Probe(test, site) for test, site in sorted(run.items())])
    return runs


def family(node: str) -> str:
    """A test id without its parameters."""
    return node.split("[", 1)[0]


def failed(outcomes: Mapping[str, str], test: str) -> bool:
    """Whether any id of `test`'s family failed or errored. A module that did not import is
    no failure of its tests: the forced sources compile (`forced`), so that is not the probe's."""
    return any(
        outcome in ("failed", "error") for node, outcome in outcomes.items() if family(node) == test
    )


def conftests(tree: Path, path: str) -> list[str]:
    """The conftest.py files whose fixtures a test file sees: its folder's and each above."""
    found = []
    folder = Path(path).parent
    while True:
        candidate = (folder / "conftest.py").as_posix()
        if (tree / candidate).is_file():
            found.append(candidate)
        if folder == folder.parent:
            return found
        folder = folder.parent


def scanned(tree: Path, path: str, helpers: Sequence[str]) -> Scan | None:
    try:
        return Scan(path, (tree / path).read_bytes(), helpers)
    except (OSError, SyntaxError, ValueError):
        return None  # gone, or not Python: the AST inventory names it


def plans(
    parent: Path,
    patch: Path,
    tests: Iterable[str],
    old_paths: Mapping[str, str],
    helpers: Sequence[str],
) -> dict[str, list[Site]]:
    """The sites to force, per test: a test the patch added or changed (its source differs
    from the parent's function of the same name) gets its own sites, and every test gets the
    sites of the changed helpers and fixtures it names (same file, or a conftest.py above).
    `old_paths`: a moved file's path on the patch -> its path on the parent."""
    scans: dict[str, Scan | None] = {}
    changed: dict[str, set[str]] = {}

    def scan(path: str) -> Scan | None:
        if path not in scans:
            scans[path] = found = scanned(patch, path, helpers)
            before = scanned(parent, old_paths.get(path, path), helpers)
            changed[path] = {
                key
                for key, function in (found.functions.items() if found else ())
                if before is None
                or key not in before.functions
                or before.functions[key].digest != function.digest
            }
        return scans[path]

    def helper_sites(test: str, function: Function) -> Iterator[Site]:
        """The sites of the changed helpers and fixtures the test names, but its own."""
        path = test.split("::", 1)[0]
        for where in (path, *conftests(patch, path)):
            found = scan(where)
            for name in sorted(changed[where]) if found else ():
                named = name.rsplit("::", 1)[-1] in function.names
                if found and named and f"{where}::{name}" != test:
                    yield from found.functions[name].sites

    out: dict[str, list[Site]] = {}
    for test in sorted(set(tests)):
        path, _, key = test.partition("::")
        found = scan(path)
        function = found.functions.get(key) if found else None
        if function is None:
            continue
        sites = list(function.sites) if key in changed[path] else []
        sites += helper_sites(test, function)
        if sites:
            out[test] = sites
    return out


@dataclass
class Probed:
    """What the probes found, site by site: a site can fail when forcing it failed a test (a
    helper's: any test of those that name it)."""

    can_fail: list[Site] = field(default_factory=list)
    cannot_fail: dict[Site, list[str]] = field(default_factory=dict)  # -> the tests it left passing
    not_probed: list[Probe] = field(default_factory=list)  # beyond ROUNDS_LIMIT
    rounds: int = 0


# (tree, {relative path: its forced source}, test ids) -> outcomes by node id
Runner = Callable[[Path, Mapping[str, bytes], Sequence[str]], Mapping[str, str]]


def probe(tree: Path, plans: Mapping[str, Sequence[Site]], run: Runner, lanes: int) -> Probed:
    """Force each planned site of each test in `tree` and see whether the test fails."""
    found = Probed()
    runs = schedule(plans)
    for later in runs[ROUNDS_LIMIT:]:
        found.not_probed += later
    runs = runs[:ROUNDS_LIMIT]
    found.rounds = len(runs)

    def one(probes: list[Probe]) -> tuple[list[Probe], Mapping[str, str]]:
        by_file: dict[str, set[Site]] = defaultdict(set)  # a helper's site, once for all
        for each in probes:
            by_file[each.site.path].add(each.site)
        sources = {
            path: forced((tree / path).read_bytes(), sites) for path, sites in by_file.items()
        }
        return probes, run(tree, sources, sorted({each.test for each in probes}))

    passed: dict[Site, list[str]] = defaultdict(list)
    failing: set[Site] = set()
    with ThreadPoolExecutor(max_workers=max(1, lanes)) as pool:
        for probes, outcomes in pool.map(one, runs):
            for each in probes:
                if failed(outcomes, each.test):
                    failing.add(each.site)
                else:
                    passed[each.site].append(each.test)
    found.can_fail = sorted(failing, key=lambda site: (site.path, site.span))
    found.cannot_fail = {site: tests for site, tests in passed.items() if site not in failing}
    return found
