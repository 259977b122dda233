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
Assertions are compared site by site (_gate/inventory/sites.py): weakened, moved to another
test, or hollow.
Sources are read as bytes (PEP 263 cookies honoured); a file that does not parse is a finding.
With --base/--head, git rename detection maps moved files; a test moved between files is found
by its body, a renamed one by a similar body or similar assertions (`Comparison.rename`). With
--parent-python/--patch-python, `pytest --collect-only` runs in both trees
(concurrently, plugin autoloading off; see _gate/runs/collect.py), and every id the parent collects,
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
or changed is forced to fail, which must fail the test (_gate/inventory/run_evidence.py). Those
decide where they disagree with the AST, and the report says which decided. Where the patch
changed test modules alone, only those run: the others' outcomes and checks are the crossrun's
(scripts/_gate/inventory/changed_tests.py).

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
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _gate.core.config
import _gate.inventory.probes
import _gate.inventory.run_evidence
import _gate.runs.collect
import _gate.runs.test_deps
from _gate.core.allowlist import ALLOWLIST, Row, load_allowlist, other_base_note, split_by_base
from _gate.core.config import Config, load_config
from _gate.core.context import Change, ChangedFile, Judgment, review_requested, touches_tests
from _gate.core.protocol import (
    BLOCK,
    EXIT_CODES_HELP,
    PASS,
    FailClosed,
    Outcome,
    add_report_arg,
    read_report,
    say,
)
from _gate.inventory.comparison import Comparison, finding, renames
from _gate.inventory.removed_coverage import coverage_removed, reviewed_coverage
from _gate.inventory.suite_rules import (
    Collector,
    Side,
    collection_findings,
    function_id,
    generated,
    hook_findings,
    naming_of,
    setting_findings,
    test_line,
)
from _gate.inventory.trees import Cache, Tree
from _gate.runs.entry import Contract, Earlier
from _gate.runs.git import changes, resolve_commit
from _gate.runs.pytest_run import PytestRun

ALLOW_PREFIX = "inventory:"


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


def sides(given: Inputs, entries: Sequence[str], pythons: tuple[Path, Path]) -> list[Side]:
    """Parent and patch: the `tests:` entries each tree holds, plus its own `testpaths` (a
    patch may add test paths; only a parent id that stops being collected matters). Plugins
    load by name: those `required_plugins` names and those of the base's test extra."""
    tests_need = _gate.runs.test_deps.test_requirements(given.parent, given.test_extra)
    out = []
    for python, root in zip(pythons, (given.parent, given.patch), strict=True):
        config = _gate.runs.collect.PytestConfig(root)
        targets = [e for e in entries if (root / e).exists()] + config.testpaths()
        required = [*config.get("required_plugins"), *tests_need]
        out.append(Side(python, root, list(dict.fromkeys(targets)), required))
    return out


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
    changed: tuple[ChangedFile, ...] = ()  # the patch's changed lines: its tests' runs trace them


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
        changed=j.built.changed,
    )


def from_args(args: argparse.Namespace) -> Inputs:
    config = load_config(args.config) if args.config else None
    tests = config.tests if config else args.tests or _gate.core.config.tree_tests(args.parent)
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
    note = other_base_note(other_base, given.allowlist) + _gate.inventory.run_evidence.summary_note(
        ran
    )
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


def parent_on_patch(earlier: Earlier) -> dict[str, str]:
    """The crossrun's outcomes of the parent's tests on the patch build ({} without one)."""
    crossrun = earlier.get("crossrun")
    found = crossrun.evidence.get("patch") if crossrun is not None else None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def run_time(
    given: Inputs,
    earlier: Earlier,
    cmp: Comparison,
    findings: Sequence[dict[str, Any]],
    moved: Mapping[str, str],
) -> _gate.inventory.run_evidence.Found | None:
    """The checks that ran and the probes (scripts/_gate/inventory/run_evidence.py), where the patch
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
    setting = _gate.inventory.run_evidence.Setting(
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
        changed=given.changed,
    )
    pairs = {**cmp.pairs, **cmp.renamed}
    old_paths = {new: old for old, new in moved.items()}
    return _gate.inventory.run_evidence.judged(setting, pairs, old_paths, findings)


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
    return _gate.runs.collect.annotation(
        found["rule"], where["path"], where["line"], found["reason"]
    )


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
