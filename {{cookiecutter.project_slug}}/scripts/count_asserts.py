"""Assert inventory: compare every test of the parent tree with the patch tree, by AST.

    python scripts/count_asserts.py --parent PARENT_TREE --patch PATCH_TREE \
        [--repo . --base B --head H] [--parent-python P --patch-python Q] [--cache FILE]

A test is a `test*` function, or a `test*` method of a `Test*` class or a `*TestCase` subclass,
its own or inherited from a mixin of its file, named `path::Class::name`. Assertions: `assert`,
unittest `assert*` calls, `pytest.raises`, `pytest.warns`, `pytest.fail`, the helper patterns of
`assert_helpers` in judge.yaml, and calls to functions that assert (same module, conftest.py,
helper modules under the test folders).
A project's own `assert*` helper (a function, or a method of the test's class or of a base
class, wherever that lives) counts the checks its body runs, once per item of a literal argument
for a check in a loop over that parameter. Per-test counts in the report count such a call into
another file as one; comparisons count what it runs.
Assertions are compared site by site (_gate/sites.py): weakened, moved to another test, or hollow.
Sources are read as bytes (PEP 263 cookies honoured); a file that does not parse is a finding.
With --base/--head, git rename detection maps moved files; a test moved between files is found
by its body, a renamed one by a similar body or similar assertions (`Comparison.rename`). With
--parent-python/--patch-python, `pytest --collect-only` runs in both trees
(concurrently, plugin autoloading off; see _gate/collect.py), and every id the parent collects,
parameters kept, must still be collected on the patch; the files inventoried then include every
file pytest collects from, and a collected test the AST cannot map fails closed, unless the
base's file holds such tests too: tests the base generates (a metaclass, a loop), judged by
their ids and, where the patch changed the tests, by the checks they ran. A pytest plugin
the patch loads through configuration (`-p` in addopts, `pytest_plugins`, a `pytest11` entry
point, PYTEST_ADDOPTS) is an outcome hook. With GITHUB_ACTIONS=true, each blocking finding is
also printed as an `::error` workflow command.
With --crossrun-report (the judge gives the crossrun's report: the checks the parent's tests ran
on the patch build) and --patch-python, a patch that changed its tests has them run on the patch
build: their checks that ran are compared with the parent's, and every check of a test it added
or changed is forced to fail, which must fail the test (scripts/_gate/run_evidence.py). Those
decide where they disagree with the AST, and the report says which decided. Where the patch
changed test modules alone, only those run: the others' outcomes and checks are the crossrun's
(scripts/_gate/changed_tests.py).

Blocks (rule ids): deleted-file, deleted-test, fewer-asserts, total-drop, unparseable,
not-collected, skip-added, vacuous, dead-assert, weakened, outcome-hook, and from the runs
cannot-fail, fewer-checks, no-run, tampered-run; each unless a reviewed
allowlist row (`id`: the test id or path, `field`: `inventory:<rule>`, `base`: the commit it was
reviewed against, a prefix of --base) names it; a row of another base is reported, not applied.
Coverage removed: where every blocking finding is a deleted or weakened test (deleted-test,
deleted-file, fewer-asserts, weakened, fewer-checks, and the total-drop they make) whose
parent version passes on the patch build (the crossrun ran it there), the patch removed a
check the behaviour still passes: `needs-review` naming each, not `block`; a code owner's
review (ORACLE_REVIEW=1) lets it merge. A deleted test whose parent version fails on the
patch build blocks.
Exit codes: 0 nothing lost, 1 block, 2 fail closed (bad input, a stale allowlist row, a parent
that cannot be collected, a collected test the inventory cannot map).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

import _gate.collect
import _gate.config
import _gate.inventory
import _gate.probes
import _gate.run_evidence
import _gate.sites
import _gate.test_deps
from _gate.allowlist import ALLOWLIST, Row, load_allowlist, other_base_note, split_by_base
from _gate.config import Config, load_config
from _gate.context import Change, Judgment, changes, review_requested, touches_tests
from _gate.entry import Contract, Earlier
from _gate.git import resolve_commit
from _gate.protocol import (
    BLOCK,
    EXIT_CODES_HELP,
    FAIL_CLOSED,
    NEEDS_REVIEW,
    PASS,
    FailClosed,
    Outcome,
    add_report_arg,
    read_report,
    say,
)
from _gate.pytest_run import PytestRun
from _gate.reports import write_json

ALLOW_PREFIX = "inventory:"
PARALLEL_FROM = 64  # files to analyze before a process pool pays for its start-up
# A vanished test and an unpaired new one are a rename from this score (see `similarity`). On
# the last 200 commits of Python-Markdown, the renames a reviewer confirms score 0.595 and up
# (testReset -> testTOCReset, its checks ported to `assertMarkdownRenders`), and the best
# candidate of a test with no counterpart scores 0.52 at most: the threshold sits between. A
# renamed pair is still compared like any pair (fewer assertions, weakened sites, skips): a
# rename passes only where the same edit made in place, under the old name, would pass.
RENAME_SIMILARITY = 0.56
# Whatever the names, bodies and sites less alike than this are no rename: a new test that only
# borrows a vanished test's name is not one, though one-line asserts share `assert ` and ` == `
# (0.33 for two unrelated ones).
RENAME_CONTENT_FLOOR = 0.4
# Names this alike (the old name inside the new: `testTitle` -> `testTOCTitle`, 0.86), in a class
# of the same name (or, outside classes, the same file), lower the floor: Python-Markdown's
# e4ab4a610e moved class TestTOC to another file and ported testTitle to
# `assertMarkdownRenders` with a stronger check, body ratio 0.35. A vanished test's name taken
# by a new test of another home is no rename. The pair is then compared like any other.
RENAME_NAMED = 0.85
RENAME_NAMED_FLOOR = 0.33
# Vanished tests times unpaired new tests beyond which no rename is looked for (every vanished
# test stays `deleted-test`): the quadratic comparison must not stall a gate.
RENAME_PAIRS = 40_000
SELF = re.compile(r"\bself\.")


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
        # [module, anywhere] of each module whose helpers a test calls (see Helpers.find).
        self.ext: list[list[Any]] = record.get("ext") or []

    @cached_property
    def detail(self) -> dict[str, Any]:
        return dict(json.loads(self.text))

    @staticmethod
    def record(inventory: dict[str, Any]) -> dict[str, Any]:
        counts = {
            name: [t["asserts"], len(t["vacuous"]), len(t["skips"])]
            for name, t in inventory["tests"].items()
        }
        tests = inventory["tests"].values()
        ext = {(e[1], reaches_anywhere(e[2])) for t in tests for e in t["ext"]}
        ext |= {(module, True) for t in tests for module, _cls in t.get("bases", [])}
        detail = json.dumps(inventory)
        record = {"counts": counts, "error": inventory["error"], "detail": detail}
        return {**record, "ext": sorted(ext)}


@dataclass
class Tree:
    """One side: test files by path (as bytes and blob id) and their inventories."""

    root: Path
    naming: _gate.inventory.Naming = field(default_factory=_gate.inventory.Naming)
    blobs: dict[str, str] = field(default_factory=dict)
    data: dict[str, bytes] = field(default_factory=dict)
    files: dict[str, Entry] = field(default_factory=dict)
    conftests: dict[str, bytes] = field(default_factory=dict)
    looked: set[str] = field(default_factory=set)  # conftest.py paths already looked for

    @classmethod
    def read(cls, root: Path, entries: Sequence[str], naming: _gate.inventory.Naming) -> Tree:
        """Test files under `entries` (folders: the `python_files` names; files: whatever
        their name), and every conftest.py from them up to the root."""
        tree = cls(root, naming)
        for entry in entries:
            top = root / entry
            if top.is_file():
                tree.add([top.relative_to(root).as_posix()])
                continue
            for path in sorted(top.rglob("*.py")):
                rel = path.relative_to(root).as_posix()
                if path.name == "conftest.py":
                    tree.conftests[rel] = path.read_bytes()
                elif naming.test_file(path.name) and path.is_file():
                    tree.take(rel, path)
        return tree

    def add(self, paths: Iterable[str]) -> list[str]:
        """Inventory these files too (pytest collects from them); returns the ones added."""
        added = []
        for rel in paths:
            if rel in self.data or not rel.endswith(".py") or rel.startswith("/"):
                continue
            if ".." in rel.split("/"):
                continue  # an id naming a file outside the tree stays unmapped: fail closed
            path = self.root / rel
            if path.name != "conftest.py" and path.is_file():
                self.take(rel, path)
                added.append(rel)
        return added

    def take(self, rel: str, path: Path) -> None:
        """One test file, and the conftest.py files of its folder and those above it.

        Strings, not Path objects: this runs once per file of a suite of thousands."""
        self.data[rel] = path.read_bytes()
        self.blobs[rel] = blob_id(self.data[rel])
        folders = rel.split("/")[:-1]
        for depth in range(len(folders), -1, -1):
            key = "/".join([*folders[:depth], "conftest.py"])
            if key in self.looked:
                return  # this folder and those above it were looked at for another file
            self.looked.add(key)
            if os.path.isfile(f"{self.root}/{key}"):
                self.conftests[key] = Path(self.root, key).read_bytes()

    def tests(self) -> Iterable[tuple[str, str, dict[str, Any]]]:
        for path, entry in self.files.items():
            for name, test in entry.detail["tests"].items():
                yield path, name, test


Job = tuple[bytes, str, tuple[str, ...], _gate.inventory.Naming]  # source, path, helpers, naming


def _analyze(job: Job) -> dict[str, Any]:
    return Entry.record(_gate.inventory.analyze(*job))


class Cache:
    """Inventories by git blob id, valid for one analyzer source and one helper list."""

    def __init__(
        self, path: Path | None, helpers: Sequence[str], naming: _gate.inventory.Naming
    ) -> None:
        self.path, self.helpers, self.naming = path, tuple(helpers), naming
        inputs = json.dumps([list(helpers), repr(naming)]).encode()
        analyzer = Path(_gate.inventory.__file__).read_bytes() + inputs
        self.key = hashlib.sha256(analyzer).hexdigest()
        self.records: dict[str, Any] = {}
        # Collected ids by _gate.collect.collection_key: tree id, python, arguments.
        self.collections: dict[str, list[str]] = {}
        self.hits = 0
        self.seen = 0  # blobs counted by an earlier fill: files collection added later
        self.dirty = False
        if path is not None and path.is_file():
            try:
                stored = json.loads(path.read_bytes())
            except ValueError:
                stored = {}
            if isinstance(stored, dict) and stored.get("key") == self.key:
                self.records = stored.get("records") or {}
                self.collections = stored.get("collections") or {}

    def save(self) -> None:
        if self.dirty and self.path is not None:
            payload = {"key": self.key, "records": self.records}
            write_json(self.path, {**payload, "collections": self.collections})

    def fill(self, trees: Sequence[Tree]) -> None:
        """Analyze each distinct blob once, across both trees, in parallel when it pays."""
        todo: dict[str, Job] = {}
        for tree in trees:
            for path, blob in tree.blobs.items():
                if blob not in self.records and blob not in todo:
                    todo[blob] = (tree.data[path], path, self.helpers, self.naming)
        self.hits += sum(len(t.blobs) for t in trees) - len(todo) - self.seen
        self.seen = sum(len(t.blobs) for t in trees)
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
        self.dirty = self.dirty or bool(todo)


def finding(rule: str, path: str, line: int, reason: str, test: str = "") -> dict[str, Any]:
    return {"rule": rule, "id": test or path, "path": path, "line": line, "reason": reason}


def renames(net: Sequence[Change]) -> dict[str, str]:
    return {names[0]: names[1] for status, names in net if status[0] == "R"}


class Comparison:
    """Parent against patch, test by test; every way a test can stop testing is a finding."""

    def __init__(self, parent: Tree, patch: Tree, moved: dict[str, str]) -> None:
        self.parent, self.patch, self.moved = parent, patch, moved
        self.findings: list[dict[str, Any]] = []
        self.pairs: dict[str, str] = {}  # parent test id -> patch test id
        self.splits: dict[str, list[str]] = {}  # parent test id -> the new tests holding it
        self.collected: list[str] = []  # what pytest collected in the patch tree
        self.helpers = {id(parent): Helpers(parent), id(patch): Helpers(patch)}
        self.gained: list[tuple[str, str]] = []  # (test id, site text) new in a paired test
        self.short: list[Short] = []  # paired tests with fewer assertions, until moves are known
        self.moved_sites: dict[str, int] = {}  # test id -> assertions found in another test
        self.renamed: dict[str, str] = {}  # vanished parent test id -> its similar new test
        self.sources: dict[tuple[int, str], dict[str, str]] = {}  # (tree, path) -> bodies
        # Files whose tests pair with themselves, helpers included: their totals cancel out.
        self.same: dict[int, set[str]] = {id(parent): set(), id(patch): set()}

    @cached_property
    def bodies(self) -> dict[str, list[str]]:
        """New patch tests by body digest: where a test went when it left its file or class.
        A test that keeps its id is no destination, though another test has its body: deleting
        one of two identical tests is a deletion."""
        kept = {
            f"{self.moved.get(path, path)}::{name}"
            for path, entry in self.parent.files.items()
            for name in entry.counts
        }
        out: dict[str, list[str]] = {}
        for path, name, test in self.patch.tests():
            if f"{path}::{name}" not in kept:
                out.setdefault(test["body"], []).append(f"{path}::{name}")
        return out

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
        # Reading every patch test costs a warm run: only when something went missing.
        fresh = self.unpaired() if lost or self.short else {}
        gone = [item for item in lost if not self.lost(item[0], item[1], item[2], fresh)]
        self.rename(gone, fresh)
        files_gone: dict[str, int] = {}
        for test_id, test, path, file_gone in gone:
            if test_id in self.renamed:
                continue
            if file_gone:
                files_gone[path] = files_gone.get(path, 0) + 1
            else:
                self.add("deleted-test", path, test["line"], f"{test_id} was deleted", test_id)
        for path, count in files_gone.items():
            self.add("deleted-file", path, 1, f"test file {path} was deleted ({count} tests)")
        self.settle(fresh)
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
        if self.parent.blobs[path] == self.patch.blobs.get(new_path) and not (
            inventory.ext and self.helpers_changed(path, new_path, inventory.ext)
        ):
            # Same bytes, same inventory: every test pairs with itself and nothing changed.
            self.same[id(self.parent)].add(path)
            self.same[id(self.patch)].add(new_path)
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
        return lost

    def locate(self, path: str, name: str, test: dict[str, Any], now: Entry | None) -> str | None:
        if now is not None and name in now.counts:
            return f"{path}::{name}"
        # Moved to another file or class, body unchanged: one destination per test.
        found = self.bodies.get(test["body"])
        return found.pop(0) if found else None

    def unpaired(self) -> dict[str, dict[str, Any]]:
        """Patch tests that no parent test maps to: new, or the halves of a split. A file whose
        tests all pair with the parent's, unchanged, holds none: only the others are read."""
        taken, same = set(self.pairs.values()), self.same[id(self.patch)]
        return {
            f"{p}::{n}": t
            for p, entry in self.patch.files.items()
            if p not in same
            for n, t in entry.detail["tests"].items()
            if f"{p}::{n}" not in taken
        }

    def lost(
        self, test_id: str, test: dict[str, Any], path: str, fresh: dict[str, dict[str, Any]]
    ) -> bool:
        """Whether a vanished test is accounted for: renamed away from collection (a finding)
        or split into new tests (none)."""
        away = self.renamed_away.get(test["body"])
        if away:
            reason = f"{test_id} was renamed to {away}, which pytest does not collect"
            self.add("not-collected", path, test["line"], reason, test_id)
            return True
        parts = split_into(test, fresh)
        if parts:
            self.splits[test_id] = parts
        return bool(parts)

    def rename(
        self,
        gone: Sequence[tuple[str, dict[str, Any], str, bool]],
        fresh: dict[str, dict[str, Any]],
    ) -> None:
        """Pair each vanished test with the unpaired new test most like it, one to one, best
        score first; a pair is then compared like any other, so a rename that drops, weakens
        or skips a check still blocks. The candidates are the new tests of the patch (in the
        test's own file or another file the patch added tests to) that are no split's half."""
        halves = {part for parts in self.splits.values() for part in parts}
        candidates = {tid: t for tid, t in fresh.items() if tid not in halves}
        if not gone or not candidates or len(gone) * len(candidates) > RENAME_PAIRS:
            return
        shapes = {new_id: self.shape(self.patch, new_id, new) for new_id, new in candidates.items()}
        scored = []
        for test_id, test, _path, _file_gone in gone:
            before = self.shape(self.parent, test_id, test)
            for new_id, shape in shapes.items():
                names = name_similarity(test_id, new_id)
                named = names >= RENAME_NAMED and home(test_id) == home(new_id)
                score = similarity(before, shape, names, named)
                if score >= RENAME_SIMILARITY:
                    scored.append((-score, -names, test_id, new_id))
        tests = {item[0]: item[1] for item in gone}
        for _score, _names, test_id, new_id in sorted(scored):
            if test_id in self.renamed or new_id not in candidates:
                continue
            after = candidates.pop(new_id)
            del fresh[new_id]  # paired now: its sites count as gained, not as new
            self.renamed[test_id] = self.pairs[test_id] = new_id
            self.test(test_id, tests[test_id], new_id.split("::", 1)[0], after)

    def shape(self, tree: Tree, test_id: str, test: dict[str, Any]) -> tuple[str, str]:
        """What a rename keeps: the test's normalized body and its checks as written, as text,
        `self.` left out (a test whose subject moves from an attribute set in setUp to a local
        variable still checks the same)."""
        path, name = test_id.split("::", 1)
        key = (id(tree), path)
        if key not in self.sources:
            data = tree.data.get(path)
            self.sources[key] = test_bodies(data) if data is not None else {}
        sites = "\n".join(text for _line, text in test["written"])
        body = self.sources[key].get(name, "")
        return SELF.sub("", body), SELF.sub("", sites)

    def sites(self, tree: Tree, path: str, test: dict[str, Any]) -> list[_gate.sites.Site]:
        raw = test.get("sites", [])
        if test.get("ext"):
            far = self.helpers[id(tree)].sites(path, test["ext"])
            raw = sorted([*raw, *far], key=lambda s: int(s[0]))
        return [_gate.sites.site(line, text) for line, text in raw]

    def count(self, tree: Tree, path: str, test: dict[str, Any]) -> int:
        """Meaningful assertions, with those of helpers imported from other files."""
        return meaningful(test) + self.far(tree, path, test)

    def far(self, tree: Tree, path: str, test: dict[str, Any]) -> int:
        """What a test's calls into other files' helpers add to its own count, which holds
        one per `assert*` call (see _gate.inventory.FileScan.finish)."""
        if not test["ext"]:
            return 0
        written = sum(1 for call in test["ext"] if call[4])
        return len(self.helpers[id(tree)].sites(path, test["ext"])) - written

    def skips(self, tree: Tree, path: str, test: dict[str, Any]) -> list[list[Any]]:
        """A test's skips, with those of its base classes in other files."""
        inherited = self.helpers[id(tree)].class_skips(path, test.get("bases", []))
        return [*test["skips"], *inherited]

    def helpers_changed(self, path: str, new_path: str, modules: Iterable[list[Any]]) -> bool:
        before, after = self.helpers[id(self.parent)], self.helpers[id(self.patch)]
        return any(before.digest(path, m, a) != after.digest(new_path, m, a) for m, a in modules)

    def totals(self, tree: Tree) -> dict[str, int]:
        """Per-file totals (see `totals`), plus the assertions of helpers in other files, in
        every file: a base's totals do not depend on which files a patch wrote."""
        out = totals(tree)
        for path, entry in tree.files.items():
            if entry.ext:
                out[path] += sum(self.far(tree, path, t) for t in entry.detail["tests"].values())
        return out

    def hollow(
        self, test_id: str, before: dict[str, Any], path: str, after: dict[str, Any]
    ) -> None:
        """Assertions that cannot fail (`vacuous`) or cannot run (`dead-assert`), by rule."""
        for rule in ("vacuous", "dead-assert"):
            old = [v for v in before["vacuous"] if vacuous_rule(v[1]) == rule]
            new = [v for v in after["vacuous"] if vacuous_rule(v[1]) == rule]
            if len(new) <= len(old):
                continue
            seen = {line for line, _kind in old}
            line, _kind = next((v for v in new if v[0] not in seen), new[-1])
            kinds = ", ".join(sorted({kind for _line, kind in new}))
            what = "cannot fail" if rule == "vacuous" else "can never run"
            reason = f"{test_id}: line {line} holds an assertion that {what} ({kinds})"
            self.add(rule, path, line, reason, test_id)
            if rule == "vacuous":
                # `assertEqual(r, r)` tests r's own `__eq__`: the run may show it did.
                self.findings[-1]["counts"] = [len(old), len(new)]
                self.findings[-1]["same_sides"] = [v[0] for v in new if v[1] in SAME_SIDES]

    def compare_sites(
        self, test_id: str, before: dict[str, Any], path: str, after: dict[str, Any]
    ) -> list[str]:
        """Pair the sites of both versions; report weakened pairs, return the lost texts."""
        old_path = test_id.split("::", 1)[0]
        old, new = self.sites(self.parent, old_path, before), self.sites(self.patch, path, after)
        if [s.text for s in old] == [s.text for s in new]:
            return []
        changed, lost, gained = _gate.sites.pairs(old, new)
        for was, now, why in weakenings(changed):
            reason = (
                f"{test_id}: `{was.text}` (parent line {was.line}) became `{now.text}` "
                f"(patch line {now.line}): {why}"
            )
            self.add("weakened", path, now.line, reason, test_id)
        # A check moves into a test only by an edit of that test: a site a test gains because a
        # helper it calls changed (a loop no longer bound to its argument) received nothing.
        skipped = self.skips(self.patch, path, after) or after["blocked"]
        if not skipped and before["body"] != after["body"]:
            self.gained += [(test_id, s.text) for s in gained]
        return [s.text for s in lost]

    def settle(self, fresh: dict[str, dict[str, Any]]) -> None:
        """A test short of assertions whose lost sites appear, unchanged, in another test of
        the patch (one it gained them in, or a new one) moved them: not `fewer-asserts`."""
        pool: dict[str, int] = {}
        for _test, text in self.gained:
            pool[text] = pool.get(text, 0) + 1
        for test_id, test in fresh.items():
            path = test_id.split("::", 1)[0]
            if not (self.skips(self.patch, path, test) or test["blocked"]):
                for site in self.sites(self.patch, path, test):
                    pool[site.text] = pool.get(site.text, 0) + 1
        for short in self.short:
            moved = 0
            for text in short.lost:
                if pool.get(text, 0) > 0:
                    pool[text] -= 1
                    moved += 1
            if short.counts[1] + moved >= short.counts[0]:
                self.moved_sites[short.test_id] = moved
                continue
            before, now = short.counts
            reason = f"{short.test_id}: {before} assertions on the parent, {now} now"
            self.add("fewer-asserts", short.path, short.line, reason, short.test_id)

    def test(self, test_id: str, before: dict[str, Any], path: str, after: dict[str, Any]) -> None:
        line = after["line"]
        old_path = test_id.split("::", 1)[0]
        counts = [self.count(self.parent, old_path, before), self.count(self.patch, path, after)]
        if after["blocked"] and not before["blocked"]:
            self.add(
                "not-collected",
                path,
                line,
                f"{test_id} is no longer collected: {after['blocked']}",
                test_id,
            )
        old_skips = self.skips(self.parent, old_path, before)
        new_skips = self.skips(self.patch, path, after)
        if len(new_skips) > len(old_skips):
            kinds = sorted(
                {kind for _line, kind in new_skips} - {kind for _line, kind in old_skips}
            )
            self.add(
                "skip-added",
                path,
                line,
                f"{test_id} gained a skip ({', '.join(kinds) or 'another'})",
                test_id,
            )
            # A skipif-style decorator: what runs on the judge's machine may show it does not
            # apply here (_gate/run_checks.py); a skip call or a hook is the AST's alone.
            gained = set(kinds) or {kind for _line, kind in new_skips}
            self.findings[-1]["conditional"] = gained <= CONDITIONAL_SKIPS
        self.hollow(test_id, before, path, after)
        lost = self.compare_sites(test_id, before, path, after)
        if counts[1] < counts[0]:
            self.short.append(Short(test_id, path, line, counts, lost))


# Vacuous kinds of a check that may compare one object with itself (`assertEqual(r, r)`,
# `assert r == r`).
SAME_SIDES = frozenset({"self-comparison", "always-true"})

# Skips under a condition, as decorators: pytest's skipif, unittest's skipIf and skipUnless.
CONDITIONAL_SKIPS = frozenset({"skipif", "skipIf", "skipUnless"})


def meaningful(test: dict[str, Any]) -> int:
    return int(test["asserts"]) - len(test["vacuous"])


def test_bodies(data: bytes) -> dict[str, str]:
    """Each function's body by inventory name (`Class::name`), unparsed from the AST without
    its docstring: formatting, comments and implicitly joined strings do not tell a rename."""
    try:
        module = ast.parse(data)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, str] = {}
    todo: list[tuple[str, list[ast.stmt]]] = [("", module.body)]
    while todo:
        prefix, nodes = todo.pop()
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                todo.append((f"{prefix}{node.name}::", node.body))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                out[prefix + node.name] = "\n".join(ast.unparse(stmt) for stmt in body)
    return out


def similarity(
    before: tuple[str, str], after: tuple[str, str], names: float, named: bool = False
) -> float:
    """How alike two tests are: the better difflib ratio of their bodies and of their
    assertion-site texts, or its mean with the similarity of their names when that is higher
    (a test ported to a new helper keeps its name better than its text); 0 below the content
    floor. The cheap upper bounds go first: most pairs of a large patch are far apart."""
    least = RENAME_NAMED_FLOOR if named else RENAME_CONTENT_FLOOR
    # The content ratio must reach this for the score to reach the threshold.
    floor = max(least, min(RENAME_SIMILARITY, 2 * RENAME_SIMILARITY - names))
    best = 0.0
    for old, new in zip(before, after, strict=True):
        if not old or not new:
            continue
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        least = max(best, floor)
        if matcher.real_quick_ratio() < least or matcher.quick_ratio() < least:
            continue
        best = max(best, matcher.ratio())
    if best < least:
        return 0.0
    return max(best, (best + names) / 2)


def home(test_id: str) -> str:
    """A test's class (`Outer::Inner`), or its file when it is a module-level function."""
    path, *classes, _name = test_id.split("::")
    return "::".join(classes) or path


def name_similarity(old_id: str, new_id: str) -> float:
    """How alike two test names are, class left out (`testMarker` -> `testTOCMarker`)."""
    old, new = old_id.rsplit("::", 1)[-1], new_id.rsplit("::", 1)[-1]
    return difflib.SequenceMatcher(None, old.lower(), new.lower()).ratio()


def split_into(test: dict[str, Any], fresh: dict[str, dict[str, Any]]) -> list[str]:
    """New tests that together hold every check of a vanished test: a split, not a deletion."""
    wanted = site_texts(test)
    parts = [tid for tid, t in fresh.items() if wanted.intersection(site_texts(t))]
    held = {text for tid in parts for text in site_texts(fresh[tid])}
    enough = sum(meaningful(fresh[tid]) for tid in parts) >= meaningful(test)
    return sorted(parts) if wanted and wanted <= held and enough else []


def site_texts(test: dict[str, Any]) -> set[str]:
    return {text for _line, text in test["sites"]}


def weakenings(
    changed: Iterable[tuple[_gate.sites.Site, _gate.sites.Site]],
) -> list[tuple[_gate.sites.Site, _gate.sites.Site, str]]:
    """Paired sites (parent, patch) where the patch checks less, with why."""
    out = []
    for was, now in changed:
        why = _gate.sites.weakening(was, now)
        if why:
            out.append((was, now, why))
    return out


def vacuous_rule(kind: str) -> str:
    return "dead-assert" if kind in _gate.inventory.DEAD_KINDS else "vacuous"


@dataclass
class Short:
    """A paired test with fewer assertions than on the parent, and the sites it lost."""

    test_id: str
    path: str
    line: int
    counts: list[int]
    lost: list[str]


class Helpers:
    """Assertion helpers of other files a test imports (helper modules under the test folders,
    conftest.py), analyzed on demand, once per tree: the per-file cache stays pure."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.modules: dict[str, dict[str, Any]] = {}
        self.tops = {rel.split("/", 1)[0] for rel in (*tree.blobs, *tree.conftests)}
        self.memo: dict[tuple[str, str], list[list[Any]]] = {}
        self.digests: dict[str, str] = {}
        self.located: dict[tuple[str, str, bool], str | None] = {}

    def sites(self, path: str, ext: Iterable[list[Any]]) -> list[list[Any]]:
        """The sites of a test's calls into imported helpers, at each call's line."""
        return [site[:2] for site in self.calls(path, ext, frozenset())]

    def calls(
        self, path: str, ext: Iterable[list[Any]], seen: frozenset[tuple[str, str]]
    ) -> list[list[Any]]:
        out = []
        for line, module, name, shape, fallback in ext:
            where = self.locate(path, module, reaches_anywhere(name))
            function = self.functions(where).get(name) if where is not None else None
            if function is None:
                # Not a file of this tree (or of the test folders), or no such function: an
                # `assert*` call still counts as the one check it reads as.
                out += [[line, fallback]] if fallback else []
            elif where is not None and (where, name) not in seen:  # else a helper cycle
                out += _gate.inventory.bind(self.expand(where, name, seen), function, shape, line)
        return out

    def expand(self, where: str, name: str, seen: frozenset[tuple[str, str]]) -> list[list[Any]]:
        key = (where, name)
        if key not in self.memo:
            function = self.functions(where)[name]
            far = self.calls(where, function["ext"], seen | {key})
            self.memo[key] = function["sites"] + far
        return self.memo[key]

    def locate(self, path: str, module: str, anywhere: bool = False) -> str | None:
        key = (PurePosixPath(path).parent.as_posix(), module, anywhere)
        if key not in self.located:
            self.located[key] = self.find(path, module, anywhere)
        return self.located[key]

    def find(self, path: str, module: str, anywhere: bool) -> str | None:
        """The file a test's import names: relative to the test, its folders, the root, or
        `src/`. Only a file under the test folders (or a conftest's) holds helper functions;
        the base classes of test classes are test code wherever they live (`anywhere`)."""
        dots = len(module) - len(module.lstrip("."))
        parts = [p for p in module.lstrip(".").split(".") if p]
        here = PurePosixPath(path).parent
        if dots > len(here.parts) + 1:
            return None  # above the root: not a file of this tree
        if dots:
            bases = [here.parents[dots - 2] if dots > 1 else here]
        else:
            bases = [PurePosixPath("."), PurePosixPath("src"), here, *here.parents]
        for base in bases:
            stem = base.joinpath(*parts).as_posix()
            for rel in (f"{stem}.py", f"{stem}/__init__.py"):
                if (anywhere or rel.split("/", 1)[0] in self.tops) and self.readable(rel):
                    return rel
        return None

    def digest(
        self, path: str, module: str, anywhere: bool, seen: frozenset[str] = frozenset()
    ) -> str:
        """Which helper file an import reaches from this test file, with its bytes' digest and
        those of the helper files it imports in turn."""
        rel = self.locate(path, module, anywhere)
        if rel is None or rel in seen:
            return ""
        if rel not in self.digests:
            own = self.tree.blobs.get(rel) or blob_id((self.tree.root / rel).read_bytes())
            far = {
                (e[1], reaches_anywhere(e[2]))
                for f in self.functions(rel).values()
                for e in f["ext"]
            }
            inner = "".join(self.digest(rel, m, a, seen | {rel}) for m, a in sorted(far))
            self.digests[rel] = own + inner
        return f"{rel}:{self.digests[rel]}"

    def readable(self, rel: str) -> bool:
        path = self.tree.root / rel
        root = self.tree.root.resolve()
        return path.is_file() and path.resolve().is_relative_to(root)

    def functions(self, rel: str) -> dict[str, Any]:
        """A helper file's asserting functions."""
        functions: dict[str, Any] = self.analysis(rel)["functions"]
        return functions

    def class_skips(self, path: str, bases: Iterable[list[str]]) -> list[list[Any]]:
        """The skips a test inherits from base classes of other files (marks, setUp...)."""
        out = []
        for module, cls in bases:
            where = self.locate(path, module, True)
            skips = self.analysis(where).get("classes", {}).get(cls, []) if where else []
            out += [[line, f"{kind} in {where}"] for line, kind in skips]
        return out

    def analysis(self, rel: str) -> dict[str, Any]:
        """A helper file's inventory: from the cache when it is a test file too."""
        if rel not in self.modules:
            entry = self.tree.files.get(rel)
            if entry is not None:
                self.modules[rel] = entry.detail
            else:
                data = (self.tree.root / rel).read_bytes()
                self.modules[rel] = _gate.inventory.analyze(data, rel, (), self.tree.naming)
        return self.modules[rel]


def naming_of(root: Path) -> _gate.inventory.Naming:
    """What pytest collects by name, by the parent's configuration: both sides are read by it
    (a patch that changes it is a `not-collected` finding of its own)."""
    config, default = _gate.collect.PytestConfig(root), _gate.inventory.Naming()
    return _gate.inventory.Naming(
        tuple(config.get("python_files")) or default.files,
        tuple(config.get("python_classes")) or default.classes,
        tuple(config.get("python_functions")) or default.functions,
    )


def reaches_anywhere(name: str) -> bool:
    """A call into another file reaches a method of an imported base class (`Class::name`)."""
    return "::" in name


def pytest_settings(root: Path) -> dict[str, str]:
    """The collection settings of a tree's pytest configuration, wherever pytest reads them."""
    return _gate.collect.PytestConfig(root).collection_settings()


@dataclass
class Side:
    """One tree's collection: its python, what to collect, and the result."""

    python: Path
    root: Path
    targets: list[str]
    required: list[str]
    result: _gate.collect.Collection | None = None


def sides(given: Inputs, entries: Sequence[str], pythons: tuple[Path, Path]) -> list[Side]:
    """Parent and patch: the `tests:` entries each tree holds, plus its own `testpaths` (a
    patch may add test paths; only a parent id that stops being collected matters). Plugins
    load by name: those `required_plugins` names and those of the base's test extra."""
    tests_need = _gate.test_deps.test_requirements(given.parent, given.test_extra)
    out = []
    for python, root in zip(pythons, (given.parent, given.patch), strict=True):
        config = _gate.collect.PytestConfig(root)
        targets = [e for e in entries if (root / e).exists()] + config.testpaths()
        required = [*config.get("required_plugins"), *tests_need]
        out.append(Side(python, root, list(dict.fromkeys(targets)), required))
    return out


def collect_side(side: Side, cache: Cache, autoload: bool) -> _gate.collect.Collection:
    if not side.targets:
        return _gate.collect.Collection(())
    args = [*side.required, "--", *side.targets]
    key = _gate.collect.collection_key(side.python, side.root, args, autoload)
    if key is not None and key in cache.collections:
        return _gate.collect.Collection(tuple(cache.collections[key]), cached=True)
    result = _gate.collect.collect(side.python, side.root, side.targets, side.required, autoload)
    if key is not None and result.ids is not None:
        cache.collections[key] = list(result.ids)
        cache.dirty = True
    return result


class Collector:
    """Both collections at once, in threads (each is a process in its own group), while the
    AST work goes on. Autoloading is off; only when the parent cannot be collected so (a
    plugin the tree needs but never names) are both collected again with it on."""

    def __init__(self, pair: list[Side], cache: Cache) -> None:
        self.pair, self.cache, self.autoload = pair, cache, False
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.futures = [self.pool.submit(collect_side, s, cache, False) for s in pair]

    def results(self) -> tuple[_gate.collect.Collection, _gate.collect.Collection]:
        parent, patch = (f.result() for f in self.futures)
        if parent.ids is None:
            self.autoload = True
            again = [self.pool.submit(collect_side, s, self.cache, True) for s in self.pair]
            parent, patch = (f.result() for f in again)
        self.pool.shutdown()
        self.pair[0].result, self.pair[1].result = parent, patch
        return parent, patch


def function_id(node_id: str) -> str:
    path, name, _param = _gate.collect.split_id(node_id)
    return f"{path}::{name}"


def unmapped(tree: Tree, ids: Iterable[str], side: str) -> dict[str, str]:
    """Each file holding a collected id that has no test the inventory parsed, with why."""
    found: dict[str, str] = {}
    for node_id in ids:
        path, name, _param = _gate.collect.split_id(node_id)
        if not path.endswith(".py") or "." in name or path in found:
            continue  # a doctest or a non-Python item: no function to inventory
        entry = tree.files.get(path)
        last = name.rsplit("::", 1)[-1]
        if entry is None or entry.error:
            why = "does not parse" if entry else "is not inventoried"
            found[path] = f"pytest collects {node_id} on the {side}, but {path} {why}"
        elif not entry.counts:
            found[path] = f"the inventory finds no tests in {path} where pytest collects {node_id}"
        # An inherited test is collected under the subclass; the base holds its body.
        elif name not in entry.counts and not any(
            n.rsplit("::", 1)[-1] == last for n in entry.counts
        ):
            found[path] = f"pytest collects {node_id} on the {side}, but {path} has no such test"
    return found


def generated(parent: Tree, patch: Tree, ids: tuple[Sequence[str], Sequence[str]]) -> list[str]:
    """The base's files whose tests pytest collects but the AST finds no function for (made by
    a metaclass or a loop, bound by assignment, inherited from another file): the base's own
    layout (Python-Markdown's legacy tests), judged by their ids, each of which must still be
    collected, and by the checks they ran where the patch changed its tests. A file of the
    patch that does so where the base's does not fails closed: the gate cannot read it."""
    base = unmapped(parent, ids[0], "parent")
    new = [why for path, why in unmapped(patch, ids[1], "patch").items() if path not in base]
    if new:
        raise FailClosed(new[0])
    return sorted(base)


def collection_findings(
    cmp: Comparison, parent_ids: Sequence[str], patch_ids: Sequence[str]
) -> list[dict[str, Any]]:
    """Every id collected on the parent that the patch does not collect, parameters kept: a
    dropped `parametrize` row is a test gone. Moved files and moved tests map their ids."""
    now, out = set(patch_ids), []
    reported = {f["id"] for f in cmp.findings}  # a deleted or renamed-away test: found already
    for node_id in parent_ids:
        path, name, param = _gate.collect.split_id(node_id)
        func = f"{path}::{name}"
        if func in cmp.splits or func in reported or path in reported:
            continue  # split, or already a finding of its own (a deleted test or file)
        target = cmp.pairs.get(func) or f"{cmp.moved.get(path, path)}::{name}"
        if target + param in now:
            continue
        where = target.split("::", 1)[0]
        side, test = (cmp.patch, target) if where in cmp.patch.files else (cmp.parent, func)
        line = test_line(side, test)
        also = f" (looked for {target + param})" if target != func else ""
        reason = f"{node_id} is collected on the parent, not on the patch{also}"
        out.append(finding("not-collected", test.split("::", 1)[0], line, reason, node_id))
    return out


def test_line(tree: Tree, test_id: str) -> int:
    path, _, name = test_id.partition("::")
    entry = tree.files.get(path)
    if entry is None or name not in entry.counts:
        return 0
    return int(entry.detail["tests"][name]["line"])


def setting_findings(parent: Path, patch: Path) -> list[dict[str, Any]]:
    """Without builds nothing is collected, so a changed collection setting stands in."""
    out = []
    before, after = pytest_settings(parent), pytest_settings(patch)
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            reason = f"pytest setting {key} changed from {before.get(key)!r} to {after.get(key)!r}"
            out.append(finding("not-collected", key.split(":", 1)[0], 0, reason))
    return out


def hook_findings(parent: Tree, patch: Tree) -> list[dict[str, Any]]:
    before = {
        (p, name)
        for p, data in parent.conftests.items()
        for _l, name in _gate.inventory.outcome_hooks(data)
    }
    out = []
    for path, data in patch.conftests.items():
        for line, name in _gate.inventory.outcome_hooks(data):
            if (path, name) not in before:
                out.append(
                    finding(
                        "outcome-hook",
                        path,
                        line,
                        f"{path} adds {name}, which can rewrite outcomes or collection",
                    )
                )
    return out + fixture_findings(parent, patch) + plugin_findings(parent, patch)


def fixture_findings(parent: Tree, patch: Tree) -> list[dict[str, Any]]:
    """A conftest.py fixture that gains a skip skips every test that uses it (autouse: every
    test under its folder), wherever those tests are: a finding of the conftest itself."""
    out = []
    for path, data in patch.conftests.items():
        old = parent.conftests.get(path)
        if old == data:
            continue
        before = _gate.inventory.fixture_skips(old) if old is not None else {}
        for name, skips in _gate.inventory.fixture_skips(data).items():
            if len(skips) > len(before.get(name, [])):
                line, kind = skips[-1]
                reason = f"{path}: fixture {name} gains a skip ({kind}), for every test using it"
                out.append(finding("skip-added", path, line, reason))
    return out


def plugin_findings(parent: Tree, patch: Tree) -> list[dict[str, Any]]:
    """A plugin the patch makes pytest load is a hook of any name: compared by plugin name, so
    moving one between files adds nothing. The judged environment's own variables are checked
    too, since a build step can set them for the steps after it."""
    before_sources = {**parent.conftests, **parent.data}
    # A file both trees hold unchanged names nothing new: only changed files are candidates,
    # and the parent is read in full only when there is one (a warm run of thousands of files).
    changed = {
        path: data
        for path, data in {**patch.conftests, **patch.data}.items()
        if before_sources.get(path) != data
    }
    added = _gate.collect.named_plugins(patch.root, _gate.collect.PytestConfig(patch.root), changed)
    if added:
        config = _gate.collect.PytestConfig(parent.root)
        before = {n.name for n in _gate.collect.named_plugins(parent.root, config, before_sources)}
        added = [n for n in added if n.name not in before]
    added += _gate.collect.environment_plugins(os.environ)
    return [
        finding(
            "outcome-hook",
            n.path,
            n.line,
            f"{n.path} loads pytest plugin {n.name} ({n.how}), which can rewrite outcomes",
        )
        for n in added
    ]


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


@dataclass(frozen=True)
class Inputs:
    """What the assert inventory compares, and with what."""

    parent: Path  # the two trees
    patch: Path
    tests: tuple[str, ...]  # judge.yaml `tests:`
    helpers: tuple[str, ...]  # judge.yaml `assert_helpers`
    test_extra: str  # the tests' extra or dependency group (the plugins they load)
    crossrun_timeout: float  # seconds per run of the probes
    changes: tuple[Change, ...] | None  # the net diff (None: not known, by hand)
    base: str | None  # the base commit, which allowlist rows name
    review: bool  # ORACLE_REVIEW=1
    allowlist: Path | None  # rows with field inventory:RULE
    parent_python: Path | None  # the builds, for --collect-only and the probes
    patch_python: Path | None
    cache: Path | None  # keyed by git blob id


def inputs(j: Judgment) -> Inputs:
    settings = j.config
    return Inputs(
        parent=j.parent,
        patch=j.patch,
        tests=settings.tests,
        helpers=settings.assert_helpers,
        test_extra=settings.test_extra,
        crossrun_timeout=settings.crossrun_timeout,
        changes=j.changes,
        base=j.base,
        review=j.review,
        allowlist=j.evidence_tree / ALLOWLIST,
        parent_python=j.built.parent,
        patch_python=j.built.patch,
        cache=j.repo / ".oracle" / "inventory-cache.json",
    )


def from_args(args: argparse.Namespace) -> Inputs:
    config = load_config(args.config) if args.config else None
    tests = config.tests if config else args.tests or _gate.config.tree_tests(args.parent)
    base = resolve_commit(args.repo, args.base, "--base") if args.base else None
    diff = changes(args.repo, args.base, args.head) if args.base and args.head else None
    return Inputs(
        parent=args.parent,
        patch=args.patch,
        tests=tuple(tests),
        helpers=config.assert_helpers if config else (),
        test_extra=config.test_extra if config else "",
        crossrun_timeout=config.crossrun_timeout if config else Config.crossrun_timeout,
        changes=diff,
        base=base,
        review=review_requested(),
        allowlist=args.allowlist,
        parent_python=args.parent_python,
        patch_python=args.patch_python,
        cache=args.cache,
    )


def reported(args: argparse.Namespace) -> Earlier:
    """By hand: the crossrun's outcome from the report file `--crossrun-report` names."""
    return {"crossrun": read_report(args.crossrun_report)} if args.crossrun_report else {}


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    naming = naming_of(given.parent)
    cache = Cache(given.cache, list(given.helpers), naming)
    parent = Tree.read(given.parent, list(given.tests), naming)
    patch = Tree.read(given.patch, list(given.tests), naming)
    cache.fill([parent, patch])
    got = collected(given, cache, parent, patch)
    moved = renames(given.changes) if given.changes is not None else {}
    cmp = Comparison(parent, patch, moved)
    findings = static_findings(given, cmp, got)
    cache.save()
    ran = run_time(given, earlier, cmp, findings, moved)
    made = list(got.collection.get("generated") or []) if got else []
    changed_tests = given.changes is None or touches_tests(given.changes, given.tests)
    if made and ran is None and changed_tests:
        raise FailClosed(
            f"{made[0]} generates tests the AST cannot read, and the patch changed the tests: "
            "only their run on the patch build can compare their checks, and this judgment "
            "has none (a sharded crossrun, or no crossrun report)"
        )
    if ran is not None:
        findings = [f for f in findings if f not in ran.decided.set_aside] + ran.findings
    locate(findings, cmp)
    blocking, allowed, other_base = apply_allowlist(findings, given.allowlist, given.base)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for found in blocking:
            say(annotate(found))
    evidence = inventory_evidence(cmp, findings, got, moved, cache)
    evidence.update(
        findings=blocking,
        allowed=allowed,
        other_base_rows=[row.as_dict() for row in other_base],
        run_time=ran.evidence() if ran is not None else None,
    )
    note = other_base_note(other_base, given.allowlist) + run_time_note(ran)
    return judged(evidence, counted(evidence, made), note, given, earlier if ran else {})


@dataclass
class Collected:
    """What pytest collected from both trees: the ids, the evidence, and the findings of a
    patch that cannot be collected."""

    ids: tuple[Sequence[str], Sequence[str]]
    collection: dict[str, Any]
    findings: list[dict[str, Any]]


def collected(given: Inputs, cache: Cache, parent: Tree, patch: Tree) -> Collected | None:
    """Both trees collected by their builds (None: no builds to collect with). The files to
    inventory are the files pytest collects from, whatever their names."""
    if not (given.parent_python and given.patch_python):
        return None
    pythons = (given.parent_python, given.patch_python)
    collector = Collector(sides(given, list(given.tests), pythons), cache)
    before, after = collector.results()
    if before.ids is None:
        raise FailClosed(f"pytest --collect-only fails on the parent tree: {before.error}")
    grew = parent.add(function_id(i).split("::", 1)[0] for i in before.ids)
    grew += patch.add(function_id(i).split("::", 1)[0] for i in after.ids or ())
    if grew:
        cache.fill([parent, patch])
    ids = (before.ids, after.ids or ())
    collection = {
        "parent": len(ids[0]),
        "patch": len(ids[1]),
        "cached": [before.cached, after.cached],
        "plugin_autoload": collector.autoload,
        "generated": generated(parent, patch, ids),
    }
    if after.ids is None:
        collection["patch_failed"] = after.error
        reason = f"pytest --collect-only fails on the patch: {after.error}"
        return Collected(ids, collection, [finding("not-collected", ".", 0, reason)])
    return Collected(ids, collection, [])


def static_findings(given: Inputs, cmp: Comparison, got: Collected | None) -> list[dict[str, Any]]:
    """What the AST finds, the collections, the setting and hook changes and the total."""
    findings = cmp.run() + (got.findings if got else [])
    if got is None:
        findings += setting_findings(given.parent, given.patch)
    elif got.collection.get("patch_failed") is None:  # else one finding says it failed
        findings += collection_findings(cmp, got.ids[0], got.ids[1])
    findings += hook_findings(cmp.parent, cmp.patch)
    before, after = sum(cmp.totals(cmp.parent).values()), sum(cmp.totals(cmp.patch).values())
    if after < before:
        reason = f"assertion total dropped from {before} to {after}"
        findings.append(finding("total-drop", ".", 0, reason))
    return findings


def inventory_evidence(
    cmp: Comparison,
    findings: Sequence[dict[str, Any]],
    got: Collected | None,
    moved: Mapping[str, str],
    cache: Cache,
) -> dict[str, Any]:
    """The report's evidence but for the findings' verdicts and the run-time evidence."""
    per_parent, per_patch = cmp.totals(cmp.parent), cmp.totals(cmp.patch)
    parent, patch = cmp.parent, cmp.patch
    return {
        "parent_total": sum(per_parent.values()),
        "patch_total": sum(per_patch.values()),
        "deleted_files": sorted(f["path"] for f in findings if f["rule"] == "deleted-file"),
        "dropped_files": {
            path: {"parent": count, "patch": per_patch.get(moved.get(path, path), 0)}
            for path, count in per_parent.items()
            if per_patch.get(moved.get(path, path), 0) < count
        },
        "renamed": dict(moved),
        "split": cmp.splits,
        "moved_asserts": cmp.moved_sites,  # test id -> assertions it moved to other tests
        "renamed_tests": cmp.renamed,  # vanished test id -> the new test it was compared with
        # Parameters folded: the advisory tests step matches these against its outcomes.
        "collected_patch": sorted({function_id(i) for i in got.ids[1]}) if got else [],
        "collection": got.collection if got else {},
        "tests_columns": TEST_COLUMNS,
        "tests": test_rows(parent, patch, cmp.pairs),
        "cache": {"hits": cache.hits, "files": len(parent.blobs) + len(patch.blobs)},
    }


def counted(evidence: Mapping[str, Any], made: Sequence[str]) -> str:
    """The summary's counts: assertions, tests, collected ids, generated files."""
    counts = f"{evidence['parent_total']} -> {evidence['patch_total']} assertions in "
    counts += f"{len(evidence['tests'])} tests"
    collection = evidence["collection"]
    if collection:
        counts += f", {collection['parent']} -> {collection['patch']} collected"
    if made:  # the AST reads none of their tests: a reviewer knows what the counts leave out
        counts += f" ({len(made)} files generate tests: judged by id and by the checks they ran)"
    return counts


def judged(
    evidence: dict[str, Any], counts: str, note: str, given: Inputs, earlier: Earlier
) -> Outcome:
    """The verdict on the findings left standing: a coverage removal whose parent tests still
    pass (`earlier`: the crossrun, where run-time evidence ran) is a review's to accept."""
    blocking = evidence["findings"]
    removed = coverage_removed(blocking, parent_on_patch(earlier))
    if removed:
        evidence["coverage_removed"] = removed
        return reviewed_coverage(removed, counts, note, evidence, given.review)
    if blocking:
        return Outcome(
            BLOCK, f"{counts}; {blocking[0]['reason']} ({len(blocking)} findings){note}", evidence
        )
    return Outcome(PASS, f"{counts}; no test lost an assertion{note}", evidence)


# Findings of a test that checks less than its parent version did: where that version still
# passes on the patch build, the behaviour it checked is kept, and a reviewer decides.
COVERAGE_RULES = frozenset(
    {"deleted-test", "deleted-file", "fewer-asserts", "weakened", "fewer-checks"}
)


def coverage_removed(
    blocking: Sequence[dict[str, Any]], outcomes: Mapping[str, str]
) -> list[dict[str, str]]:
    """Each blocking finding as a removed coverage ({id, rule}), when all of them are: a
    deleted or weakened test whose parent version passed on the patch build (`outcomes`: the
    crossrun's parent tests there), and the total drop they make. [] when any is not."""
    tests = [f for f in blocking if f["rule"] != "total-drop"]
    if not tests or not all(
        f["rule"] in COVERAGE_RULES and passed_on_patch(str(f["id"]), outcomes) for f in tests
    ):
        return []
    return [{"id": str(f["id"]), "rule": str(f["rule"])} for f in tests]


def passed_on_patch(test: str, outcomes: Mapping[str, str]) -> bool:
    """Whether a parent test (an id without parameters, or a file) ran on the patch build and
    every id of it passed."""
    ids = [n for n in outcomes if _gate.probes.family(n) == test or n.split("::")[0] == test]
    return bool(ids) and all(outcomes[n] == "passed" for n in ids)


def parent_on_patch(earlier: Earlier) -> dict[str, str]:
    """The crossrun's outcomes of the parent's tests on the patch build ({} without one)."""
    crossrun = earlier.get("crossrun")
    found = crossrun.evidence.get("patch") if crossrun is not None else None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def reviewed_coverage(
    removed: Sequence[dict[str, str]],
    counts: str,
    note: str,
    evidence: dict[str, Any],
    review: bool,
) -> Outcome:
    more = f" and {len(removed) - 1} more" if len(removed) > 1 else ""
    what = f"coverage removed: {removed[0]['id']} ({removed[0]['rule']}){more}"
    if review:
        return Outcome(PASS, f"{counts}; {what}, reviewed (ORACLE_REVIEW=1){note}", evidence)
    return Outcome(
        FAIL_CLOSED,
        f"{counts}; {what}: its parent version passes on the patch build, so the behaviour "
        f"stays; a code owner reviews the removal, then ORACLE_REVIEW=1{note}",
        evidence,
        status=NEEDS_REVIEW,
    )


def run_time(
    given: Inputs,
    earlier: Earlier,
    cmp: Comparison,
    findings: Sequence[dict[str, Any]],
    moved: Mapping[str, str],
) -> _gate.run_evidence.Found | None:
    """The checks that ran and the probes (scripts/_gate/run_evidence.py), where the patch
    changed its tests and the crossrun ran the parent's tests on the patch build: None
    otherwise (the AST decides alone, as it does where nothing can run)."""
    crossrun = earlier.get("crossrun")
    evidence = crossrun.evidence if crossrun is not None else {}
    if not given.patch_python or not isinstance(evidence.get("patch"), dict):
        return None
    if (evidence.get("shard") or {}).get("count", 1) != 1:
        return None  # one shard's tests: a test of another shard would look deleted
    if given.changes is not None and not touches_tests(given.changes, given.tests):
        return None
    crossran = PytestRun(0, False, evidence["patch"], {}, {}, {}, "")
    crossran.checks = {k: list(v) for k, v in (evidence.get("patch_checks") or {}).items()}
    setting = _gate.run_evidence.Setting(
        parent=given.parent,
        patch=given.patch,
        python=given.patch_python,
        tests=list(given.tests),
        plugins=list(evidence.get("plugins") or []),
        hidden=list(evidence.get("hidden") or []),
        timeout=given.crossrun_timeout,
        helpers=list(given.helpers),
        crossran=crossran,
        test_files=frozenset(cmp.parent.data) | frozenset(cmp.patch.data),
    )
    pairs = {**cmp.pairs, **cmp.renamed}
    old_paths = {new: old for old, new in moved.items()}
    return _gate.run_evidence.judged(setting, pairs, old_paths, findings)


SET_ASIDE_NOTES = {
    "skip-added": "whose condition does not hold here: it ran and passed",
    "vacuous": "where it ran, an object's own `__eq__` compared it with itself",
}


def run_time_note(ran: _gate.run_evidence.Found | None) -> str:
    """What the checks that ran and the probes decided, in the summary."""
    if ran is None:
        return ""
    probed = ran.probed
    note = f"; probes: {len(probed.can_fail)} sites can fail, {len(probed.cannot_fail)} cannot"
    if ran.decided.set_aside:
        note += f"; run-time checks set aside {len(ran.decided.set_aside)} AST findings"
    # A skip that does not apply here, a check of the build's `__eq__` on one object: still
    # changes a reviewer sees.
    for rule, why in SET_ASIDE_NOTES.items():
        reasons = [f["reason"] for f in ran.decided.set_aside if f["rule"] == rule]
        if reasons:
            more = f" and {len(reasons) - 1} more" if len(reasons) > 1 else ""
            note += f"; {reasons[0]}, {why}{more}"
    if ran.decided.moved:
        note += f" ({len(ran.decided.moved)} tests moved)"
    return note


def locate(findings: list[dict[str, Any]], cmp: Comparison) -> None:
    """Give each finding its place on both sides, `{"path", "line"}` or None: the test's own
    line where the finding names a test, else the file and line it names."""
    for found in findings:
        func = function_id(found["id"]) if "::" in found["id"] else ""
        now = cmp.pairs.get(func, func)
        here = {"path": found["path"], "line": found["line"]}
        sides = {}
        for side, tree, test in (("parent", cmp.parent, func), ("patch", cmp.patch, now)):
            path = test.split("::", 1)[0]
            if test and path in tree.files:
                sides[side] = {"path": path, "line": test_line(tree, test) or 1}
            elif not test and (tree.root / found["path"]).is_file():
                sides[side] = here
        found["parent"], found["patch"] = sides.get("parent"), sides.get("patch")


def annotate(found: dict[str, Any]) -> str:
    """A GitHub workflow command: the finding on the patch's line, else the parent's."""
    where = found.get("patch") or found.get("parent") or {"path": found["path"], "line": 0}
    return _gate.collect.annotation(found["rule"], where["path"], where["line"], found["reason"])


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
    p.add_argument(
        "--tests",
        nargs="+",
        help="test folders or files without --config (default: `tests:` of the parent tree)",
    )
    p.add_argument("--allowlist", type=Path, help="allowlist.yaml (rows with field inventory:RULE)")
    p.add_argument("--parent-python", type=Path, help="parent build's python, for --collect-only")
    p.add_argument("--patch-python", type=Path, help="patch build's python, for --collect-only")
    p.add_argument("--cache", type=Path, help="inventory cache file, keyed by git blob id")
    p.add_argument(
        "--crossrun-report",
        type=Path,
        help="crossrun.json: the checks the parent's tests ran on the patch build; with "
        "--patch-python, the patch's tests run too, compared and probed",
    )
    add_report_arg(p, "assert-inventory")
    return p


STEP = Contract("assert-inventory", parser, from_args, inputs, decide, reported)


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
