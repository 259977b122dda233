"""The patch's changed lines of its package.

A changed line is one the patch added or rewrote in a package file (every line of a file the
base did not have) that holds code: a line Python compiles an instruction on (a comment, a
blank line or a function's docstring runs nothing, so no run can be asked to cover it). The
gate watches those lines in every run of the patch's code (_gate/runs/traced.py). Nothing
here runs the patch's code: its source is compiled, never executed.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import CodeType

from _gate.core.context import ChangedFile
from _gate.core.protocol import FailClosed

Files = Mapping[str, str]  # a side's package: installed path -> its path in the tree


def rewritten(base: str | None, patch: str) -> set[int]:
    """The patch's lines (1-based) that its base does not have where they stand."""
    new = patch.splitlines()
    if base is None:
        return set(range(1, len(new) + 1))
    matcher = difflib.SequenceMatcher(None, base.splitlines(), new, autojunk=False)
    return {
        number + 1
        for tag, _, _, start, end in matcher.get_opcodes()
        if tag in ("replace", "insert")
        for number in range(start, end)
    }


def code_lines(source: str, filename: str) -> set[int]:
    """The lines of `source` that hold an instruction (compiled, not run); SyntaxError and
    ValueError propagate."""

    def codes(code: CodeType) -> Iterator[CodeType]:
        yield code
        for const in code.co_consts:
            if isinstance(const, CodeType):
                yield from codes(const)

    top = compile(source, filename, "exec", dont_inherit=True)
    return {line for code in codes(top) for _, _, line in code.co_lines() if line}


def installed(side: Mapping[str, object]) -> dict[str, str]:
    """A build's Python files built from the tree (the build step's provenance rows with a
    source), by the path the wheel installs them at."""
    rows = side.get("files")
    if not isinstance(rows, list):
        raise FailClosed("the build step's evidence lists no installed files")
    return {
        str(row["path"]): str(row["source"])
        for row in rows
        if str(row["path"]).endswith(".py") and row.get("source")
    }


def text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def changed_files(
    trees: tuple[Path, Path], sides: tuple[Files, Files], site: Path
) -> tuple[ChangedFile, ...]:
    """Each package file of the patch's build (`site`: its site-packages) that differs from
    the base's, with its changed lines of code; a file that does not compile has none (the
    capability diff fails closed on it)."""
    (parent_tree, patch_tree), (parent, patch) = trees, sides
    found = []
    for path, source in sorted(patch.items()):
        new = text(patch_tree / source)
        old = text(parent_tree / parent[path]) if path in parent else None
        if new is None or new == old:
            continue
        try:
            lines = rewritten(old, new) & code_lines(new, source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            lines = set()
        found.append(ChangedFile(os.path.realpath(site / path), source, tuple(sorted(lines))))
    return tuple(found)
