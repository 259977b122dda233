"""One side of an inventory: its test files by path and blob id, their inventories kept by blob
id (the cache), and the assertion helpers of other files its tests import."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

import _gate.core.config
import _gate.inventory.inventory
import _gate.inventory.scanner
import _gate.inventory.skips
import _gate.inventory.syntax
import _gate.inventory.truth
import _gate.runs.collect
import _gate.runs.test_deps
from _gate.core.reports import write_json

PARALLEL_FROM = 64  # files to analyze before a process pool pays for its start-up


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
    naming: _gate.inventory.inventory.Naming = field(
        default_factory=_gate.inventory.inventory.Naming
    )
    blobs: dict[str, str] = field(default_factory=dict)
    data: dict[str, bytes] = field(default_factory=dict)
    files: dict[str, Entry] = field(default_factory=dict)
    conftests: dict[str, bytes] = field(default_factory=dict)
    looked: set[str] = field(default_factory=set)  # conftest.py paths already looked for

    @classmethod
    def read(
        cls, root: Path, entries: Sequence[str], naming: _gate.inventory.inventory.Naming
    ) -> Tree:
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


Job = tuple[
    bytes, str, tuple[str, ...], _gate.inventory.inventory.Naming
]  # source, path, helpers, naming


def _analyze(job: Job) -> dict[str, Any]:
    return Entry.record(_gate.inventory.inventory.analyze(*job))


# The modules whose code makes an inventory: a kept one is valid for exactly their source.
ANALYZER = (
    _gate.inventory.syntax,
    _gate.inventory.truth,
    _gate.inventory.skips,
    _gate.inventory.scanner,
    _gate.inventory.inventory,
)


class Cache:
    """Inventories by git blob id, valid for one analyzer source and one helper list."""

    def __init__(
        self, path: Path | None, helpers: Sequence[str], naming: _gate.inventory.inventory.Naming
    ) -> None:
        self.path, self.helpers, self.naming = path, tuple(helpers), naming
        inputs = json.dumps([list(helpers), repr(naming)]).encode()
        analyzer = b"".join(Path(m.__file__ or "").read_bytes() for m in ANALYZER) + inputs
        self.key = hashlib.sha256(analyzer).hexdigest()
        self.records: dict[str, Any] = {}
        # Collected ids by _gate.runs.collect.collection_key: tree id, python, arguments.
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
                out += _gate.inventory.syntax.bind(
                    self.expand(where, name, seen), function, shape, line
                )
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
                self.modules[rel] = _gate.inventory.inventory.analyze(
                    data, rel, (), self.tree.naming
                )
        return self.modules[rel]


def totals(tree: Tree) -> dict[str, int]:
    return {
        path: sum(asserts - vacuous for asserts, vacuous, _skips in entry.counts.values())
        for path, entry in tree.files.items()
    }


def reaches_anywhere(name: str) -> bool:
    """A call into another file reaches a method of an imported base class (`Class::name`)."""
    return "::" in name
