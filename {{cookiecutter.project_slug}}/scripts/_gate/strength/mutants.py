"""Where mutmut's mutants are: the names it gives functions, and each mutant's line and code.

mutmut 3 names a mutant `module.x_function__mutmut_N` (a method: `module.xǁClassǁmethod__...`)
and writes, into its copy of a file, the function's unmutated copy (`__mutmut_orig`) beside
every mutant. A mutant's line in the tree's own source is its function's line there plus the
first line where the mutant and the unmutated copy differ.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import Any


def function_keys(tree: Path, paths: Sequence[str], only: Sequence[str]) -> list[str]:
    """mutmut's name of each function it may mutate under `paths` (a mutant's name up to
    `__mutmut_`): `module.x_name`, `module.xǁClassǁname`, the module as mutmut names it."""
    keys: list[str] = []
    for root in paths:
        base = tree / root
        for file in [base] if base.is_file() else sorted(base.rglob("*.py")):
            rel = file.relative_to(tree).as_posix()
            if only and not any(fnmatch(rel, glob) for glob in only):
                continue
            module = rel.removesuffix(".py").replace("/", ".").removeprefix("src.")
            names = [name.replace(".", "ǁ") for name in functions(file)[1]]
            keys += [f"{module}.x{'_' if 'ǁ' not in n else 'ǁ'}{n}" for n in names]
    return [key.replace(".__init__.", ".") for key in keys]


def mangled(mutant: str) -> tuple[str, str]:
    """(the mutant's function in mutmut's mangled form, its display name)."""
    name = mutant.rpartition(".")[2].rpartition("__mutmut_")[0]
    shown = name.removeprefix("x_") if name.startswith("x_") else name[2:].replace("ǁ", ".")
    return name, shown


Function = ast.FunctionDef | ast.AsyncFunctionDef


def functions(path: Path) -> tuple[list[str], dict[str, Function]]:
    """The file's lines and its functions by qualified name (`name`, `Class.name`)."""
    text = path.read_text("utf-8")
    found: dict[str, Function] = {}
    for node in ast.parse(text).body:
        inner = node.body if isinstance(node, ast.ClassDef) else [node]
        prefix = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
        for item in inner:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[prefix + item.name] = item
    return text.splitlines(), found


def text_of(lines: list[str], node: Function, name: str) -> list[str]:
    """The function's lines, its `def` naming it `name`: mutmut renames every copy."""
    body = lines[node.lineno - 1 : node.end_lineno]
    return [body[0].replace(node.name, name, 1), *body[1:]]


def located(copy: Path, tree: Path, files: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each mutant's file, function, line in the tree's source and mutated line: its copy of
    the function against mutmut's unmutated copy, line by line."""
    mutated: dict[str, dict[str, Function]] = {}
    lines: dict[str, list[str]] = {}
    original: dict[str, dict[str, Function]] = {}
    out: dict[str, dict[str, Any]] = {}
    for mutant, rel in files.items():
        if rel not in mutated:
            lines[rel], defs = functions(copy / "mutants" / rel)
            mutated[rel] = {fn.name: fn for fn in defs.values()}
            original[rel] = functions(tree / rel)[1]
        name, shown = mangled(mutant)
        after = text_of(lines[rel], mutated[rel][mutant.rpartition(".")[2]], shown)
        before = text_of(lines[rel], mutated[rel][f"{name}__mutmut_orig"], shown)
        pairs = enumerate(zip(before, after, strict=False))
        offset = next((i for i, (a, b) in pairs if a != b), min(len(before), len(after)))
        source = original[rel].get(shown)
        out[mutant] = {
            "file": rel,
            "function": shown,
            "line": source.lineno + offset if source else 0,
            "code": after[offset].strip() if offset < len(after) else "(lines removed)",
            "was": before[offset].strip() if offset < len(before) else "",
        }
    return out
