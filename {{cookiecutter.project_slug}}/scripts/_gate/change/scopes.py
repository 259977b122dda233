"""Which of the base's functions a test must call to reach the patch's change: the input of
safe test selection (_gate/runs/reach.py). No code runs here: both sides are parsed.

A changed line runs in one function's frame: the innermost `def` whose body holds it (a line
of a `def`'s decorators, defaults or signature runs where the `def` statement runs, in the
scope around it), or a `lambda` on it. Each function is named as the reach tracer records a
call of it: its file as the parent's build installs it and its code's first line there (a
decorated function's first decorator). A line of the patch is matched to the base's function
of the same qualified name; a function the base lacks, to the one around it.

A changed import at a module's top reaches the functions that read a name it binds. Any other
change to code no function holds (a module's or a class's own statements, a module added or
deleted), a function that changed its kind (a generator, a coroutine), a changed package file
that is not Python, or changed dependencies or entry points can reach every test: then
`everything` says why, and every test runs.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from _gate.change.lines import rewritten
from _gate.core.context import ChangedFunctions

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# What a wheel's metadata says that can change what the build runs: its dependencies.
REQUIRES = ("Requires-Dist:", "Requires-Python:", "Provides-Extra:")


@dataclass(frozen=True)
class Function:
    """One function's code: where a call of it is recorded, and the lines its frame runs."""

    name: str  # qualified: `Class.method`, `outer.inner`, `outer.<lambda>`
    first: int  # its code object's first line
    body: frozenset[int]  # the lines that run when it is called
    header: frozenset[int]  # its decorators and signature: they run in `parent`'s frame
    kind: str  # def, generator, async, async generator, lambda
    parent: Function | None
    reads: frozenset[str]  # the names its own code loads


def functions(tree: ast.Module) -> list[Function]:
    """Every function and lambda of a module, outermost first."""
    found: list[Function] = []

    def visit(node: ast.AST, prefix: str, parent: Function | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (*DEFS, ast.Lambda)):
                made = function(child, prefix, parent)
                found.append(made)
                visit(child, f"{made.name}.", made)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", parent)
            else:
                visit(child, prefix, parent)

    visit(tree, "", None)
    return found


def function(node: ast.AST, prefix: str, parent: Function | None) -> Function:
    end = node.end_lineno or node.lineno  # type: ignore[attr-defined]
    reads = loaded(own_nodes(node))
    if isinstance(node, ast.Lambda):
        lines = frozenset(range(node.lineno, end + 1))
        return Function(f"{prefix}<lambda>", node.lineno, lines, lines, "lambda", parent, reads)
    assert isinstance(node, DEFS)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    # Its docstring is its `__doc__`, made with it (click's help text): the def's own.
    start = node.body[0]
    documented = isinstance(start, ast.Expr) and isinstance(start.value, ast.Constant)
    head = [start.end_lineno or start.lineno] if documented and len(node.body) > 1 else []
    parts = [*ast.walk(node.args), *([node.returns] if node.returns else [])]
    signed = [getattr(n, "end_lineno", None) or n.lineno for n in parts if hasattr(n, "lineno")]
    header = frozenset(range(first, max([node.lineno, *signed, *head, start.lineno - 1]) + 1))
    body = frozenset(range(start.lineno, end + 1))
    return Function(f"{prefix}{node.name}", first, body, header, kind(node), parent, reads)


def own_nodes(node: ast.AST, classes: bool = False) -> Iterator[ast.AST]:
    """The nodes a function's own frame runs: not those of a function in it, nor of a class
    in it (`classes`: a module's own code runs its classes' bodies too)."""
    for child in ast.iter_child_nodes(node):
        inner = isinstance(child, (*DEFS, ast.Lambda)) or (
            isinstance(child, ast.ClassDef) and not classes
        )
        if not inner:
            yield child
            yield from own_nodes(child, classes)


def loaded(nodes: Iterable[ast.AST]) -> frozenset[str]:
    """The names `nodes` read."""
    return frozenset(n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def kind(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    yields = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own_nodes(node))
    prefix = "async " if isinstance(node, ast.AsyncFunctionDef) else ""
    return f"{prefix}generator" if yields else prefix + "def" if prefix else "def"


def owners(line: int, found: Iterable[Function]) -> set[Function | None]:
    """The functions whose frame runs `line` (None: the module's own code)."""
    found = list(found)
    holding = [f for f in found if f.kind != "lambda" and line in f.body]
    inner = min(holding, key=lambda f: len(f.body), default=None)
    ran: set[Function | None] = {inner}
    ran.update(f.parent for f in found if f.kind != "lambda" and line in f.header)
    ran.update(f for f in found if f.kind == "lambda" and line in f.body)
    return ran


def imports_at_top(tree: ast.Module) -> dict[int, frozenset[str]]:
    """Each line of an import among the module's own statements (under its `if` and `try`
    too), with the names the import binds."""
    found: dict[int, frozenset[str]] = {}
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = frozenset((a.asname or a.name).split(".")[0] for a in node.names)
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                found[line] = found.get(line, frozenset()) | bound
        elif not isinstance(node, (*DEFS, ast.ClassDef)):
            stack += [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
            stack += [h for h in ast.iter_child_nodes(node) if isinstance(h, ast.excepthandler)]
    return found


@dataclass
class Side:
    """One side's version of a module: its functions, by name, and its imports at the top."""

    tree: ast.Module
    functions: list[Function]
    imports: dict[int, frozenset[str]]

    @classmethod
    def parse(cls, text: str) -> Side:
        tree = ast.parse(text)
        return cls(tree, functions(tree), imports_at_top(tree))

    def named(self, name: str) -> list[Function]:
        return [f for f in self.functions if f.name == name]

    def module_reads(self) -> frozenset[str]:
        """The names the module's own code (a class body too) loads."""
        return loaded(own_nodes(self.tree, classes=True))


class Everything(Exception):
    """The change can reach every test: why."""


def module_functions(path: str, old: str, new: str) -> set[tuple[str, int]]:
    """The base's functions of one module (`path`, as installed) whose code the patch changed,
    as (path, first line). Raises Everything when a change runs outside any function."""
    base, patch = Side.parse(old), Side.parse(new)
    found: set[Function] = set()
    names: set[str] = set()
    for line in sorted(rewritten(old, new) & meaningful(new)):
        names |= patch.imports.get(line, frozenset())
        found |= on_base(path, line, patch, base, line in patch.imports)
    for line in sorted(rewritten(new, old) & meaningful(old)):
        names |= base.imports.get(line, frozenset())
        for ran in owners(line, base.functions):
            if ran is None and line not in base.imports:
                raise Everything(f"{path}:{line} (base) runs in the module's own code")
            if ran is not None:
                found.add(ran)
    if names & (base.module_reads() | patch.module_reads()):
        raise Everything(f"{path}: a changed import binds a name the module's own code reads")
    found |= {f for f in base.functions if f.reads & names}
    found |= {g for f in patch.functions if f.reads & names for g in matched(f, base)}
    return {(path, f.first) for f in found}


def meaningful(text: str) -> set[int]:
    """The lines of a module that say anything: all but blank lines and comments (a line
    inside a string is its value, though it holds no instruction)."""
    found: set[int] = set()
    quiet = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in (*quiet, tokenize.ENDMARKER):
            found.update(range(token.start[0], token.end[0] + 1))
    return found


def on_base(path: str, line: int, patch: Side, base: Side, imports: bool) -> set[Function]:
    """The base's functions a changed line of the patch runs in."""
    found: set[Function] = set()
    for ran in owners(line, patch.functions):
        if ran is None and not imports:
            raise Everything(f"{path}:{line} runs in the module's own code")
        if ran is not None and ran.kind != "lambda":
            found |= set(matched(ran, base))
    for ran in found:
        twin = next((f for f in patch.named(ran.name) if f.kind != ran.kind), None)
        if twin is not None:
            what = f"{ran.name} changed from a {ran.kind} to a {twin.kind}"
            raise Everything(f"{path}:{line}: {what}")
    return found


def matched(function: Function | None, base: Side) -> list[Function]:
    """The base's functions of `function`'s name; for one the base lacks, those around it.
    Raises Everything when none is (a new function at the module's top)."""
    while function is not None:
        same = base.named(function.name)
        if same:
            return same
        function = function.parent
    raise Everything("a function the base lacks, outside any function it has")


def changed_functions(
    modules: Mapping[str, str], parent: Mapping[str, str], patch: Mapping[str, str]
) -> ChangedFunctions:
    """What a test must call to reach the change, from the files that differ between the two
    builds (`parent`, `patch`: installed path -> its text, or a digest for a file that is not
    Python nor METADATA). `modules`: the parent's package modules, the path its frames name ->
    as installed (where the reach tracer records calls)."""
    found: set[tuple[str, int]] = set()
    try:
        for path in sorted(parent.keys() | patch.keys()):
            old, new = parent.get(path), patch.get(path)
            if old == new:
                continue
            if old is None or new is None:
                what = "added" if old is None else "deleted"
                raise Everything(f"{path}: a module {what}" if path.endswith(".py") else path)
            if path.endswith(".py"):
                found |= module_functions(path, old, new)
            elif not metadata_only(path, old, new):
                raise Everything(f"{path}: a file of the build that is not Python changed")
    except Everything as exc:
        return ChangedFunctions(dict(modules), (), str(exc))
    except (SyntaxError, ValueError, RecursionError, MemoryError, tokenize.TokenError) as exc:
        return ChangedFunctions(dict(modules), (), f"a module Python cannot parse: {exc}")
    keys = tuple(sorted(f"{path}:{first}" for path, first in found))
    return ChangedFunctions(dict(modules), keys)


def metadata_only(path: str, old: str, new: str) -> bool:
    """Whether a changed file is wheel metadata no test reaches: METADATA but its
    dependencies (its version, its README); never the entry points."""
    folder, _, name = path.rpartition("/")
    if not folder.endswith(".dist-info") or name != "METADATA":
        return False

    def requires(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith(REQUIRES)]

    return requires(old) == requires(new)
