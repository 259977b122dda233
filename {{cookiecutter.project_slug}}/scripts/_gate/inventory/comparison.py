"""Parent against patch, test by test: renames, splits, weakened and lost assertion sites,
hollow tests and new skips, each a finding."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import _gate.core.config
import _gate.inventory.inventory
import _gate.inventory.sites
import _gate.inventory.truth
import _gate.runs.collect
import _gate.runs.test_deps
from _gate.core.context import Change
from _gate.inventory.trees import Entry, Helpers, Tree, totals

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

    def sites(
        self, tree: Tree, path: str, test: dict[str, Any]
    ) -> list[_gate.inventory.sites.Site]:
        raw = test.get("sites", [])
        if test.get("ext"):
            far = self.helpers[id(tree)].sites(path, test["ext"])
            raw = sorted([*raw, *far], key=lambda s: int(s[0]))
        return [_gate.inventory.sites.site(line, text) for line, text in raw]

    def count(self, tree: Tree, path: str, test: dict[str, Any]) -> int:
        """Meaningful assertions, with those of helpers imported from other files."""
        return meaningful(test) + self.far(tree, path, test)

    def far(self, tree: Tree, path: str, test: dict[str, Any]) -> int:
        """What a test's calls into other files' helpers add to its own count, which holds
        one per `assert*` call (see _gate.inventory.inventory.FileScan.finish)."""
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
        changed, lost, gained = _gate.inventory.sites.pairs(old, new)
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
            # apply here (_gate/inventory/run_checks.py); a skip call or a hook is the AST's alone.
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
    changed: Iterable[tuple[_gate.inventory.sites.Site, _gate.inventory.sites.Site]],
) -> list[tuple[_gate.inventory.sites.Site, _gate.inventory.sites.Site, str]]:
    """Paired sites (parent, patch) where the patch checks less, with why."""
    out = []
    for was, now in changed:
        why = _gate.inventory.sites.weakening(was, now)
        if why:
            out.append((was, now, why))
    return out


def vacuous_rule(kind: str) -> str:
    return "dead-assert" if kind in _gate.inventory.truth.DEAD_KINDS else "vacuous"


@dataclass
class Short:
    """A paired test with fewer assertions than on the parent, and the sites it lost."""

    test_id: str
    path: str
    line: int
    counts: list[int]
    lost: list[str]
