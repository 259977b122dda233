"""Assert inventory: count assertions per test by AST on the parent tree and the patch tree.

    python scripts/count_asserts.py --parent PARENT_TREE --patch PATCH_TREE [--base B --head H]

A test is a `test*` function, or a `test*` method of a `Test*` class or a `*TestCase` subclass.
Assertions: `assert` statements, `assert*` calls (unittest), `pytest.raises`, `pytest.warns`,
`pytest.fail`. With --base/--head, git rename detection maps moved files so a rename keeps its
history and a deletion stays a deletion.
Exit codes: 0 nothing lost, 1 block (a deleted test file or test, a test with fewer assertions,
a lower total, a test file that no longer parses), 2 fail closed (bad input).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _gate import (
    BLOCK,
    EXIT_CODES_HELP,
    PASS,
    Outcome,
    add_report_arg,
    git,
    load_config,
    parse_name_status,
    relpath,
    run_main,
)

PYTEST_CHECKS = frozenset({"raises", "warns", "fail"})


@dataclass(frozen=True)
class Test:
    id: str
    line: int
    asserts: int


def is_test_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def call_name(node: ast.Call) -> tuple[str, str]:
    """(owner, name) of a call: `pytest.raises` -> ("pytest", "raises"), `f` -> ("", "f")."""
    func = node.func
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        return owner, func.attr
    return ("", func.id) if isinstance(func, ast.Name) else ("", "")


def count_assertions(func: ast.AST) -> int:
    count = 0
    for node in ast.walk(func):
        if isinstance(node, ast.Assert):
            count += 1
        elif isinstance(node, ast.Call):
            owner, name = call_name(node)
            if name.startswith("assert") or (owner == "pytest" and name in PYTEST_CHECKS):
                count += 1
    return count


def _is_test_class(node: ast.ClassDef) -> bool:
    bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
    return node.name.startswith("Test") or any(b.endswith("TestCase") for b in bases)


def iter_tests(body: Sequence[ast.stmt], prefix: str) -> Iterator[Test]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
            "test"
        ):
            yield Test(f"{prefix}::{node.name}", node.lineno, count_assertions(node))
        elif isinstance(node, ast.ClassDef) and _is_test_class(node):
            yield from iter_tests(node.body, f"{prefix}::{node.name}")


def inventory_file(path: Path, rel: str) -> tuple[list[Test], dict[str, Any] | None]:
    """Tests of one file; a file that does not parse is an error row, never a crash.

    Bytes go to the parser so PEP 263 encoding cookies are honoured.
    """
    try:
        tree = ast.parse(path.read_bytes(), filename=rel)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 0
        return [], {"path": rel, "line": line, "error": f"{type(exc).__name__}: {exc}"}
    return list(iter_tests(tree.body, rel)), None


def inventory_tree(
    root: Path, folders: Sequence[str]
) -> tuple[dict[str, list[Test]], list[dict[str, Any]]]:
    files: dict[str, list[Test]] = {}
    errors: list[dict[str, Any]] = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            if not is_test_file(path.name) or not path.is_file():
                continue
            rel = relpath(path, root)
            tests, error = inventory_file(path, rel)
            files[rel] = tests
            if error:
                errors.append(error)
    return files, errors


def renames(repo: Path, base: str, head: str) -> dict[str, str]:
    raw = git(repo, "diff", "-z", "--name-status", "-M", base, head)
    return {names[0]: names[1] for status, names in parse_name_status(raw) if status[0] == "R"}


def finding(rule: str, path: str, line: int, reason: str) -> dict[str, Any]:
    return {"rule": rule, "path": path, "line": line, "reason": reason}


def diff_inventories(
    parent: dict[str, list[Test]], patch: dict[str, list[Test]], moved: dict[str, str]
) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = []
    for path, tests in parent.items():
        new_path = moved.get(path, path)
        if new_path not in patch:
            findings.append(finding("deleted-file", path, 1, f"test file {path} was deleted"))
            continue
        now = {t.id.split("::", 1)[1]: t for t in patch[new_path]}
        for test in tests:
            name = test.id.split("::", 1)[1]
            after = now.get(name)
            if after is None:
                findings.append(finding("deleted-test", path, test.line, f"{test.id} was deleted"))
            elif after.asserts < test.asserts:
                reason = f"{test.id}: {test.asserts} assertions on the parent, {after.asserts} now"
                findings.append(finding("fewer-asserts", new_path, after.line, reason))
    return findings


def file_totals(files: dict[str, list[Test]]) -> dict[str, int]:
    return {path: sum(t.asserts for t in tests) for path, tests in files.items()}


def execute(args: argparse.Namespace) -> Outcome:
    folders = list(load_config(args.config).tests) if args.config else args.tests
    parent, parent_errors = inventory_tree(args.parent, folders)
    patch, patch_errors = inventory_tree(args.patch, folders)
    moved = renames(args.repo, args.base, args.head) if args.base and args.head else {}
    findings = diff_inventories(parent, patch, moved)
    per_parent, per_patch = file_totals(parent), file_totals(patch)
    parent_total, patch_total = sum(per_parent.values()), sum(per_patch.values())
    if patch_total < parent_total:
        reason = f"assertion total dropped from {parent_total} to {patch_total}"
        findings.append(finding("total-drop", ".", 0, reason))
    for error in patch_errors:
        findings.append(finding("unparseable", error["path"], error["line"], error["error"]))
    evidence = {
        "parent_total": parent_total,
        "patch_total": patch_total,
        "deleted_files": sorted(f["path"] for f in findings if f["rule"] == "deleted-file"),
        "dropped_files": {
            path: {"parent": count, "patch": per_patch.get(moved.get(path, path), 0)}
            for path, count in per_parent.items()
            if per_patch.get(moved.get(path, path), 0) < count
        },
        "renamed": moved,
        "tests": {
            side: {t.id: t.asserts for tests in files.values() for t in tests}
            for side, files in (("parent", parent), ("patch", patch))
        },
        "parse_errors": {"parent": parent_errors, "patch": patch_errors},
        "findings": findings,
    }
    counts = f"{parent_total} -> {patch_total} assertions"
    if findings:
        return Outcome(
            BLOCK, f"{counts}; {findings[0]['reason']} ({len(findings)} findings)", evidence
        )
    return Outcome(PASS, f"{counts}; no test lost an assertion", evidence)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--parent", type=Path, required=True, help="parent tree")
    p.add_argument("--patch", type=Path, required=True, help="patch tree")
    p.add_argument("--repo", type=Path, default=Path("."), help="git repository (for renames)")
    p.add_argument("--base", help="parent commit, for rename detection")
    p.add_argument("--head", help="patch commit, for rename detection")
    p.add_argument("--config", type=Path, help="judge.yaml (its `tests` folders)")
    p.add_argument("--tests", nargs="+", default=["tests"], help="test folders without --config")
    add_report_arg(p, "assert-inventory")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("assert-inventory", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
