"""What pytest collects on each side and the rules of the suite around the tests: collection
settings, hooks, fixtures and plugins a patch adds or changes."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _gate.core.config
import _gate.inventory.inventory
import _gate.runs.collect
import _gate.runs.test_deps
from _gate.core.protocol import FailClosed
from _gate.inventory.comparison import Comparison, finding
from _gate.inventory.trees import Cache, Tree


def naming_of(root: Path) -> _gate.inventory.inventory.Naming:
    """What pytest collects by name, by the parent's configuration: both sides are read by it
    (a patch that changes it is a `not-collected` finding of its own)."""
    config, default = _gate.runs.collect.PytestConfig(root), _gate.inventory.inventory.Naming()
    return _gate.inventory.inventory.Naming(
        tuple(config.get("python_files")) or default.files,
        tuple(config.get("python_classes")) or default.classes,
        tuple(config.get("python_functions")) or default.functions,
    )


def pytest_settings(root: Path) -> dict[str, str]:
    """The collection settings of a tree's pytest configuration, wherever pytest reads them."""
    return _gate.runs.collect.PytestConfig(root).collection_settings()


@dataclass
class Side:
    """One tree's collection: its python, what to collect, and the result."""

    python: Path
    root: Path
    targets: list[str]
    required: list[str]
    result: _gate.runs.collect.Collection | None = None


def collect_side(side: Side, cache: Cache, autoload: bool) -> _gate.runs.collect.Collection:
    if not side.targets:
        return _gate.runs.collect.Collection(())
    args = [*side.required, "--", *side.targets]
    key = _gate.runs.collect.collection_key(side.python, side.root, args, autoload)
    if key is not None and key in cache.collections:
        return _gate.runs.collect.Collection(tuple(cache.collections[key]), cached=True)
    result = _gate.runs.collect.collect(
        side.python, side.root, side.targets, side.required, autoload
    )
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

    def results(self) -> tuple[_gate.runs.collect.Collection, _gate.runs.collect.Collection]:
        parent, patch = (f.result() for f in self.futures)
        if parent.ids is None:
            self.autoload = True
            again = [self.pool.submit(collect_side, s, self.cache, True) for s in self.pair]
            parent, patch = (f.result() for f in again)
        self.pool.shutdown()
        self.pair[0].result, self.pair[1].result = parent, patch
        return parent, patch


def function_id(node_id: str) -> str:
    path, name, _param = _gate.runs.collect.split_id(node_id)
    return f"{path}::{name}"


def unmapped(tree: Tree, ids: Iterable[str], side: str) -> dict[str, str]:
    """Each file holding a collected id that has no test the inventory parsed, with why."""
    found: dict[str, str] = {}
    for node_id in ids:
        path, name, _param = _gate.runs.collect.split_id(node_id)
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
        path, name, param = _gate.runs.collect.split_id(node_id)
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
        for _l, name in _gate.inventory.inventory.outcome_hooks(data)
    }
    out = []
    for path, data in patch.conftests.items():
        for line, name in _gate.inventory.inventory.outcome_hooks(data):
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
        before = _gate.inventory.inventory.fixture_skips(old) if old is not None else {}
        for name, skips in _gate.inventory.inventory.fixture_skips(data).items():
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
    added = _gate.runs.collect.named_plugins(
        patch.root, _gate.runs.collect.PytestConfig(patch.root), changed
    )
    if added:
        config = _gate.runs.collect.PytestConfig(parent.root)
        before = {
            n.name for n in _gate.runs.collect.named_plugins(parent.root, config, before_sources)
        }
        added = [n for n in added if n.name not in before]
    added += _gate.runs.collect.environment_plugins(os.environ)
    return [
        finding(
            "outcome-hook",
            n.path,
            n.line,
            f"{n.path} loads pytest plugin {n.name} ({n.how}), which can rewrite outcomes",
        )
        for n in added
    ]
