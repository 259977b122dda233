"""Assert inventory: compare every test of the parent tree with the patch tree, by AST.

    python scripts/count_asserts.py --parent PARENT_TREE --patch PATCH_TREE \
        [--repo . --base B --head H] [--parent-python P --patch-python Q] [--cache FILE]

A test is a `test*` function, or a `test*` method of a `Test*` class or a `*TestCase` subclass,
named `path::Class::name`. Assertions: `assert`, unittest `assert*` calls, `pytest.raises`,
`pytest.warns`, `pytest.fail`, and the helper patterns of `assert_helpers` in judge.yaml.
Sources are read as bytes (PEP 263 cookies honoured); a file that does not parse is a finding.
With --base/--head, git rename detection maps moved files; a test moved between files is found
by its body. With --parent-python/--patch-python, `pytest --collect-only` runs in both trees,
so a test that stops being collected is visible even when the source still holds it.

Blocks (rule ids): deleted-file, deleted-test, fewer-asserts, total-drop, unparseable,
not-collected, skip-added, vacuous-added, weakened, outcome-hook; each unless a reviewed
allowlist row (`id`: the test id or path, `field`: `inventory:<rule>`, `base`: the commit it was
reviewed against, a prefix of --base) names it; a row of another base is reported, not applied.
Exit codes: 0 nothing lost, 1 block, 2 fail closed (bad input, a stale allowlist row).
"""

from __future__ import annotations

import argparse
import configparser
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import _inventory
from _gate import (
    BLOCK,
    EXIT_CODES_HELP,
    PASS,
    FailClosed,
    Outcome,
    add_report_arg,
    git,
    load_config,
    parse_name_status,
    resolve_commit,
    run_main,
    write_json,
)
from _process import run_group
from allow import Row, load_allowlist, other_base_note, split_by_base

ALLOW_PREFIX = "inventory:"
COLLECTION_KEYS = ("python_files", "python_classes", "python_functions", "testpaths")
PARALLEL_FROM = 64  # files to analyze before a process pool pays for its start-up


def is_test_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def blob_id(data: bytes) -> str:
    """Git's blob id of these bytes: the cache key, identical to `git hash-object`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Entry:
    """One file's inventory from the cache: per-test counts at once, the details on demand.

    A warm run mostly needs the counts; the details (checks, skips, bodies) are kept as JSON
    text and parsed only for files that differ between parent and patch.
    """

    def __init__(self, record: dict[str, Any]) -> None:
        self.counts: dict[str, list[int]] = record["counts"]  # name -> [asserts, vacuous, skips]
        self.error: dict[str, Any] | None = record["error"]
        self.text: str = record["detail"]

    @cached_property
    def detail(self) -> dict[str, Any]:
        return dict(json.loads(self.text))

    @staticmethod
    def record(inventory: dict[str, Any]) -> dict[str, Any]:
        counts = {
            name: [t["asserts"], len(t["vacuous"]), len(t["skips"])]
            for name, t in inventory["tests"].items()
        }
        return {"counts": counts, "error": inventory["error"], "detail": json.dumps(inventory)}


@dataclass
class Tree:
    """One side: test files by path (as bytes and blob id) and their inventories."""

    root: Path
    blobs: dict[str, str] = field(default_factory=dict)
    data: dict[str, bytes] = field(default_factory=dict)
    files: dict[str, Entry] = field(default_factory=dict)
    conftests: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def read(cls, root: Path, folders: Sequence[str]) -> Tree:
        tree = cls(root)
        for folder in folders:
            for path in sorted((root / folder).rglob("*.py")):
                rel = path.relative_to(root).as_posix()
                if path.name == "conftest.py":
                    tree.conftests[rel] = path.read_bytes()
                elif is_test_file(path.name) and path.is_file():
                    tree.data[rel] = path.read_bytes()
                    tree.blobs[rel] = blob_id(tree.data[rel])
        return tree

    def tests(self) -> Iterable[tuple[str, str, dict[str, Any]]]:
        for path, entry in self.files.items():
            for name, test in entry.detail["tests"].items():
                yield path, name, test


def _analyze(job: tuple[bytes, str, tuple[str, ...]]) -> dict[str, Any]:
    return Entry.record(_inventory.analyze(*job))


class Cache:
    """Inventories by git blob id, valid for one analyzer source and one helper list."""

    def __init__(self, path: Path | None, helpers: Sequence[str]) -> None:
        self.path = path
        analyzer = Path(_inventory.__file__).read_bytes() + json.dumps(list(helpers)).encode()
        self.key = hashlib.sha256(analyzer).hexdigest()
        self.records: dict[str, Any] = {}
        self.hits = 0
        if path is not None and path.is_file():
            try:
                stored = json.loads(path.read_bytes())
            except ValueError:
                stored = {}
            if isinstance(stored, dict) and stored.get("key") == self.key:
                self.records = stored.get("records") or {}

    def fill(self, trees: Sequence[Tree], helpers: Sequence[str]) -> None:
        """Analyze each distinct blob once, across both trees, in parallel when it pays."""
        todo: dict[str, tuple[bytes, str, tuple[str, ...]]] = {}
        for tree in trees:
            for path, blob in tree.blobs.items():
                if blob not in self.records and blob not in todo:
                    todo[blob] = (tree.data[path], path, tuple(helpers))
        self.hits = sum(len(t.blobs) for t in trees) - len(todo)
        if len(todo) >= PARALLEL_FROM and (os.cpu_count() or 1) > 1:
            from concurrent.futures import ProcessPoolExecutor  # only a cold run pays the import

            with ProcessPoolExecutor() as pool:
                results = list(pool.map(_analyze, todo.values(), chunksize=8))
        else:
            results = [_analyze(job) for job in todo.values()]
        self.records.update(zip(todo, results, strict=True))
        entries = {
            blob: Entry(self.records[blob]) for tree in trees for blob in tree.blobs.values()
        }
        for tree in trees:
            tree.files = {path: entries[blob] for path, blob in tree.blobs.items()}
        if todo and self.path is not None:
            write_json(self.path, {"key": self.key, "records": self.records})


def finding(rule: str, path: str, line: int, reason: str, test: str = "") -> dict[str, Any]:
    return {"rule": rule, "id": test or path, "path": path, "line": line, "reason": reason}


def renames(repo: Path, base: str, head: str) -> dict[str, str]:
    raw = git(repo, "diff", "-z", "--name-status", "-M", base, head)
    return {names[0]: names[1] for status, names in parse_name_status(raw) if status[0] == "R"}


class Comparison:
    """Parent against patch, test by test; every way a test can stop testing is a finding."""

    def __init__(self, parent: Tree, patch: Tree, moved: dict[str, str]) -> None:
        self.parent, self.patch, self.moved = parent, patch, moved
        self.findings: list[dict[str, Any]] = []
        self.pairs: dict[str, str] = {}  # parent test id -> patch test id
        self.splits: dict[str, list[str]] = {}  # parent test id -> the new tests holding it
        self.collected: list[str] = []  # what pytest collected in the patch tree

    @cached_property
    def bodies(self) -> dict[str, str]:
        """Patch tests by body digest: where a test went when it left its file or class."""
        return {t["body"]: f"{p}::{n}" for p, n, t in self.patch.tests()}

    @cached_property
    def renamed_away(self) -> dict[str, str]:
        """Patch functions pytest does not collect, by body digest."""
        return {
            digest: f"{p}::{name}"
            for p, inventory in self.patch.files.items()
            for name, digest in inventory.detail["others"].items()
        }

    def add(self, rule: str, path: str, line: int, reason: str, test: str = "") -> None:
        self.findings.append(finding(rule, path, line, reason, test))

    def run(self) -> list[dict[str, Any]]:
        lost: list[tuple[str, dict[str, Any], str, bool]] = []
        for path, inventory in self.parent.files.items():
            lost += self.file(path, inventory)
        fresh = self.unpaired() if lost else {}  # reading every patch test costs a warm run
        for test_id, test, path, file_gone in lost:
            self.lost(test_id, test, path, file_gone, fresh)
        for path, inventory in self.patch.files.items():
            if inventory.error:
                error = inventory.error
                reason = f"{path} does not parse: {error['message']}"
                self.add("unparseable", path, error["line"], reason)
        return self.findings

    def file(self, path: str, inventory: Entry) -> list[tuple[str, dict[str, Any], str, bool]]:
        """Pair the file's tests; return the ones with no counterpart in the patch."""
        new_path = self.moved.get(path, path)
        now = self.patch.files.get(new_path)
        if self.parent.blobs[path] == self.patch.blobs.get(new_path):
            # Same bytes, same inventory: every test pairs with itself and nothing changed.
            self.pairs.update(
                {f"{path}::{name}": f"{new_path}::{name}" for name in inventory.counts}
            )
            return []
        lost = []
        for name, test in inventory.detail["tests"].items():
            test_id = f"{path}::{name}"
            match = self.locate(new_path, name, test, now)
            if match is None:
                lost.append((test_id, test, path, now is None))
                continue
            self.pairs[test_id] = match
            found_path, found_name = match.split("::", 1)
            after = self.patch.files[found_path].detail["tests"][found_name]
            self.test(test_id, test, found_path, after)
        if now is None and lost:
            self.add("deleted-file", path, 1, f"test file {path} was deleted ({len(lost)} tests)")
        return lost

    def locate(self, path: str, name: str, test: dict[str, Any], now: Entry | None) -> str | None:
        if now is not None and name in now.counts:
            return f"{path}::{name}"
        return self.bodies.get(test["body"])  # moved to another file or class, body unchanged

    def unpaired(self) -> dict[str, dict[str, Any]]:
        """Patch tests that no parent test maps to: new, or the halves of a split."""
        taken = set(self.pairs.values())
        return {f"{p}::{n}": t for p, n, t in self.patch.tests() if f"{p}::{n}" not in taken}

    def lost(
        self,
        test_id: str,
        test: dict[str, Any],
        path: str,
        file_gone: bool,
        fresh: dict[str, dict[str, Any]],
    ) -> None:
        away = self.renamed_away.get(test["body"])
        if away:
            reason = f"{test_id} was renamed to {away}, which pytest does not collect"
            self.add("not-collected", path, test["line"], reason, test_id)
        elif split_into(test, fresh):
            self.splits[test_id] = split_into(test, fresh)
        elif not file_gone:
            self.add("deleted-test", path, test["line"], f"{test_id} was deleted", test_id)

    def test(self, test_id: str, before: dict[str, Any], path: str, after: dict[str, Any]) -> None:
        line = after["line"]
        counts = [meaningful(before), meaningful(after)]
        if after["blocked"] and not before["blocked"]:
            self.add(
                "not-collected",
                path,
                line,
                f"{test_id} is no longer collected: {after['blocked']}",
                test_id,
            )
        if len(after["skips"]) > len(before["skips"]):
            kinds = sorted(
                {kind for _line, kind in after["skips"]} - {kind for _line, kind in before["skips"]}
            )
            self.add(
                "skip-added",
                path,
                line,
                f"{test_id} gained a skip ({', '.join(kinds) or 'another'})",
                test_id,
            )
        if len(after["vacuous"]) > len(before["vacuous"]):
            kinds = sorted({kind for _line, kind in after["vacuous"]})
            self.add(
                "vacuous-added",
                path,
                line,
                f"{test_id} gained a vacuous assertion ({', '.join(kinds)})",
                test_id,
            )
        if counts[1] < counts[0]:
            self.add(
                "fewer-asserts",
                path,
                line,
                f"{test_id}: {counts[0]} assertions on the parent, {counts[1]} now",
                test_id,
            )
        weakened = weakenings(before["checks"], after["checks"])
        if weakened:
            subject, kind = weakened[0]
            self.add(
                "weakened",
                path,
                line,
                f"{test_id}: `{subject}` was checked for equality, now only {kind}",
                test_id,
            )


def meaningful(test: dict[str, Any]) -> int:
    return int(test["asserts"]) - len(test["vacuous"])


def split_into(test: dict[str, Any], fresh: dict[str, dict[str, Any]]) -> list[str]:
    """New tests that together hold every check of a vanished test: a split, not a deletion."""
    wanted = set(test["checks"])
    parts = [tid for tid, t in fresh.items() if wanted.intersection(t["checks"])]
    held = {check for tid in parts for check in fresh[tid]["checks"]}
    enough = sum(meaningful(fresh[tid]) for tid in parts) >= meaningful(test)
    return sorted(parts) if wanted and wanted <= held and enough else []


def weakenings(before: Iterable[str], after: Iterable[str]) -> list[tuple[str, str]]:
    """Subjects that lost their equality check and kept only a weaker one."""
    had = {check.split(":", 1)[1] for check in before if check.startswith(f"{_inventory.EQUAL}:")}
    now: dict[str, set[str]] = {}
    for check in after:
        kind, subject = check.split(":", 1)
        now.setdefault(subject, set()).add(kind)
    weaker = {_inventory.TRUTHY, _inventory.NOT_NONE, _inventory.NOT_EQUAL}
    return sorted(
        (subject, sorted(now[subject] & weaker)[0])
        for subject in had
        if subject in now and _inventory.EQUAL not in now[subject] and now[subject] & weaker
    )


def pytest_settings(root: Path) -> dict[str, str]:
    """The collection settings of a tree's pytest configuration, wherever pytest reads them."""
    found: dict[str, str] = {}
    for name, section in (
        ("pytest.ini", "pytest"),
        ("tox.ini", "pytest"),
        ("setup.cfg", "tool:pytest"),
    ):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(root / name, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            found[f"{name}:unreadable"] = "1"
            continue
        if parser.has_section(section):
            found.update(
                {
                    f"{name}:{k}": " ".join(parser[section][k].split())
                    for k in COLLECTION_KEYS
                    if k in parser[section]
                }
            )
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text("utf-8", "replace") if pyproject.is_file() else ""
    # A regex, not tomllib: scripts run on Python 3.10, which has no TOML parser.
    table = re.search(r"^\[tool\.pytest\.ini_options\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    body = table.group(1) if table else ""
    for key in COLLECTION_KEYS:
        value = re.search(rf"^{key}\s*=\s*(.+)$", body, re.M)
        if value:
            found[f"pyproject.toml:{key}"] = " ".join(value.group(1).split())
    return found


COLLECT_CAP = 64 << 20  # bytes of `--collect-only -q` output: one id a line


def collected(python: Path, root: Path, folders: Sequence[str]) -> set[str] | None:
    """Test ids pytest collects in a tree (parameters folded), or None if collection failed."""
    targets = [f for f in folders if (root / f).exists()]
    if not targets:
        return set()
    cmd = [str(python), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *targets]
    done = run_group(cmd, cwd=root, timeout=600, cap=COLLECT_CAP)
    if done.timed_out or done.exit_code not in (0, 5) or done.stdout.truncated:
        return None
    lines = done.stdout.head.decode("utf-8", "replace").splitlines()
    return {line.split("[", 1)[0] for line in lines if "::" in line}


def collection_findings(
    args: argparse.Namespace, cmp: Comparison, folders: Sequence[str]
) -> list[dict[str, Any]]:
    out = []
    before, after = pytest_settings(args.parent), pytest_settings(args.patch)
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            reason = f"pytest setting {key} changed from {before.get(key)!r} to {after.get(key)!r}"
            out.append(finding("not-collected", key.split(":", 1)[0], 0, reason))
    if not (args.parent_python and args.patch_python):
        return out
    parent = collected(args.parent_python, args.parent, folders)
    patch = collected(args.patch_python, args.patch, folders)
    cmp.collected = sorted(patch or ())
    if patch is None and parent is not None:
        out.append(finding("not-collected", ".", 0, "pytest --collect-only fails on the patch"))
        return out
    for test_id in sorted((parent or set()) & set(cmp.pairs)):
        now = cmp.pairs[test_id]
        if now not in (patch or set()):
            path = now.split("::", 1)[0]
            out.append(
                finding(
                    "not-collected",
                    path,
                    0,
                    f"{now} is in the source but pytest no longer collects it",
                    now,
                )
            )
    return out


def hook_findings(parent: Tree, patch: Tree) -> list[dict[str, Any]]:
    before = {
        (p, name)
        for p, data in parent.conftests.items()
        for _l, name in _inventory.outcome_hooks(data)
    }
    out = []
    for path, data in patch.conftests.items():
        for line, name in _inventory.outcome_hooks(data):
            if (path, name) not in before:
                out.append(
                    finding(
                        "outcome-hook",
                        path,
                        line,
                        f"{path} adds {name}, which can rewrite outcomes or collection",
                    )
                )
    return out


def apply_allowlist(
    findings: list[dict[str, Any]], path: Path | None, base: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Row]]:
    """Split findings into (blocking, allowed, rows of another base, never applied); a row of
    this base that allows nothing is stale and fails."""
    rows = [r for r in load_allowlist(path) if r.field.startswith(ALLOW_PREFIX)] if path else []
    if rows and not base:
        raise FailClosed(f"{path}: a row applies only to the base it names; pass --base")
    current, other_base = split_by_base(rows, base or "")
    allowed_keys = {(r.id, r.field[len(ALLOW_PREFIX) :]) for r in current}
    allowed = [f for f in findings if (f["id"], f["rule"]) in allowed_keys]
    used = {(f["id"], f["rule"]) for f in allowed}
    stale = sorted(key for key in allowed_keys if key not in used)
    if stale:
        test, rule = stale[0]
        raise FailClosed(
            f"{path}: row {test} {ALLOW_PREFIX}{rule} for this base matches no finding (stale)"
        )
    return [f for f in findings if f not in allowed], allowed, other_base


def totals(tree: Tree) -> dict[str, int]:
    return {
        path: sum(asserts - vacuous for asserts, vacuous, _skips in entry.counts.values())
        for path, entry in tree.files.items()
    }


def execute(args: argparse.Namespace) -> Outcome:
    config = load_config(args.config) if args.config else None
    folders = list(config.tests) if config else args.tests
    helpers = list(config.assert_helpers) if config else []
    parent, patch = Tree.read(args.parent, folders), Tree.read(args.patch, folders)
    cache = Cache(args.cache, helpers)
    cache.fill([parent, patch], helpers)
    moved = renames(args.repo, args.base, args.head) if args.base and args.head else {}
    cmp = Comparison(parent, patch, moved)
    findings = cmp.run() + collection_findings(args, cmp, folders) + hook_findings(parent, patch)
    per_parent, per_patch = totals(parent), totals(patch)
    parent_total, patch_total = sum(per_parent.values()), sum(per_patch.values())
    if patch_total < parent_total:
        findings.append(
            finding(
                "total-drop",
                ".",
                0,
                f"assertion total dropped from {parent_total} to {patch_total}",
            )
        )
    base = resolve_commit(args.repo, args.base, "--base") if args.base else None
    blocking, allowed, other_base = apply_allowlist(findings, args.allowlist, base)
    rows = test_rows(parent, patch, cmp.pairs)
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
        "split": cmp.splits,
        "collected_patch": cmp.collected,
        "tests_columns": TEST_COLUMNS,
        "tests": rows,
        "findings": blocking,
        "allowed": allowed,
        "other_base_rows": [row.as_dict() for row in other_base],
        "cache": {"hits": cache.hits, "files": len(parent.blobs) + len(patch.blobs)},
    }
    counts = f"{parent_total} -> {patch_total} assertions in {len(rows)} tests"
    note = other_base_note(other_base, args.allowlist)
    if blocking:
        return Outcome(
            BLOCK, f"{counts}; {blocking[0]['reason']} ({len(blocking)} findings){note}", evidence
        )
    return Outcome(PASS, f"{counts}; no test lost an assertion{note}", evidence)


TEST_COLUMNS = ["id", "parent [asserts, vacuous, skips]", "patch [asserts, vacuous, skips]"]


def test_rows(parent: Tree, patch: Tree, pairs: dict[str, str]) -> list[list[Any]]:
    """One row per test (TEST_COLUMNS), parent and patch side by side; a moved test keeps its
    parent id. Rows are lists: an inventory can hold tens of thousands of tests."""
    rows: dict[str, list[Any]] = {
        f"{path}::{name}": [f"{path}::{name}", counts, None]
        for path, entry in parent.files.items()
        for name, counts in entry.counts.items()
    }
    back = {now: before for before, now in pairs.items() if now != before}
    for path, entry in patch.files.items():
        for name, counts in entry.counts.items():
            test_id = f"{path}::{name}"
            rows.setdefault(back.get(test_id, test_id), [test_id, None, None])[2] = counts
    return [rows[key] for key in sorted(rows)]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--parent", type=Path, required=True, help="parent tree")
    p.add_argument("--patch", type=Path, required=True, help="patch tree")
    p.add_argument("--repo", type=Path, default=Path("."), help="git repository (for renames)")
    p.add_argument("--base", help="parent commit, for rename detection")
    p.add_argument("--head", help="patch commit, for rename detection")
    p.add_argument("--config", type=Path, help="judge.yaml (tests folders, assert_helpers)")
    p.add_argument("--tests", nargs="+", default=["tests"], help="test folders without --config")
    p.add_argument("--allowlist", type=Path, help="allowlist.yaml (rows with field inventory:RULE)")
    p.add_argument("--parent-python", type=Path, help="parent build's python, for --collect-only")
    p.add_argument("--patch-python", type=Path, help="patch build's python, for --collect-only")
    p.add_argument("--cache", type=Path, help="inventory cache file, keyed by git blob id")
    add_report_arg(p, "assert-inventory")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("assert-inventory", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
