"""Crossrun: the parent's own tests, taken from the base tree, judge the patch's build.

    python scripts/crossrun.py --tree BASE_TREE --parent-python P --patch-python Q \
        [--tests tests test.py ...] [--allowlist FILE --base SHA] [--mode block|advisory] \
        [--test-extra NAME] [--patch-tree HEAD_TREE [--reviewed]]

The tests of the base tree (`tests:` of its judge.yaml: folders, or files such as a root test.py,
which pytest collects whatever its `python_files`) run twice, in the parent build's environment
(the reference) and in the patch build's, under the oracle's isolation: the base tree's pytest
configuration and conftest.py files only (ini, rootdir and confcutdir pinned to it), no plugin
autoloading, no cache, the process group killed at the end. Each run works from the root of a
private copy of the base tree, as the project's own CI works from its checkout, so that paths
relative to the root resolve; a module that fails to import is that module's error (its tests then
count as erroring with it), and the rest still run. The patch can edit its own copy of a test; it
cannot edit this one.

A test that passes on the parent and fails or errors on the patch is lost. It is deferred to
flake-budget, which may retry it within the budget or excuse it by quarantine, unless an allowlist
row of this base (`field: crossrun`, `id`: the test id) names it, or unless every lost test failed
on a name the patch moved and the patch's own version of it (from `--patch-tree`) passes: that is a
code owner's review, status `needs-review` naming the tests and the names
(scripts/_gate/runs/coupling.py), accepted with `--reviewed` (ORACLE_REVIEW=1). A test that passed
on the parent and is skipped or missing on the patch blocks here. Tests already failing or skipped
on the parent are reported, never counted; if none passes there, the step cannot see and fails
closed. Each run works on its own copy of the base tree's tracked files, without the top-level
modules the builds install (at the root or under `src/`): pytest's default import mode may put the
root on sys.path, and a flat-layout package there would be tested instead of the build. A run that
still imported, from its copy, a module the build provides (a conftest that extends sys.path, say)
fails closed. Test dependencies are an extra or a dependency group of the base's pyproject.toml
(`--test-extra`), installed like every judge dependency from the hash-pinned wheelhouse; one
missing from a build fails closed, and the pytest plugins they declare are loaded by name.

The patch's code runs in the process that runs these tests: weaker evidence than the cassettes or
the worker-isolated oracle, stronger than the patch's own tests. Each run therefore gets canaries,
planted in its copy beside the base's test modules and named like them: tests that must fail and
tests that must pass, kept out of the outcomes compared here; and the gate's plugin checks at the
end of the session that pytest's running and reporting machinery is what it loaded
(_gate/runs/canaries.py, _gate/plugin/tamper.py). A canary with the wrong outcome or missing,
changed machinery, or an evidence file rewritten afterwards fails closed, in either mode, naming
the build and what was wrong. With `--mode advisory` the step reports and never decides. With
`--shard I/N` both runs hold only the tests of that shard and only the rows naming them are checked
(_gate/plugin/shard.py); whether any parent test passes at all is then the merge's to check
(`parent_passing` in the evidence). With `--same-build` the patch's run is the parent's, and where
reuse is on (`--cache`) and `--patch-tree` also holds the base's tests and pytest configuration
byte for byte (a docs- or CI-only patch) neither side runs: the step passes, `reused (no input
changed)`; with `--cache` and `--parent-build` the parent's run is kept between judgments under a
digest of its inputs (scripts/_gate/runs/reuse.py): the build, the tests and pytest's
configuration; with `--patch-build` the patch's run is kept as the parent's run of a base that is
the patch. A test lost against a kept run runs again on the parent's build now, since a test may
read a file the key leaves out.

With `--perturb` naming `env` or `clock` (the default names both), the tests that can reach the
change (scripts/_gate/runs/reach.py) run once more in a user's scene under the shifted clock: a
test the parent passes there and the patch fails blocks (scripts/_gate/runs/perturbed_tests.py).
Exit codes: 0 pass (or advisory), 1 block (or deferred, see the report's status), 2 fail closed
(status `needs-review` where the tests depend on internals the patch moved).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _gate.core.allowlist import (
    ALLOWLIST,
    Row,
    allow_command,
    load_allowlist,
    other_base_note,
    split_by_base,
)
from _gate.core.allowlist import CROSSRUN as FIELD
from _gate.core.config import Config, tree_tests
from _gate.core.context import Judgment, test_input
from _gate.core.protocol import (
    BLOCK,
    EXIT_CODES_HELP,
    FAIL_CLOSED,
    NEEDS_REVIEW,
    PASS,
    FailClosed,
    Outcome,
    Tampered,
    add_report_arg,
)
from _gate.plugin.shard import WHOLE
from _gate.runs.coupling import moved_internals
from _gate.runs.crossrun_run import (
    Setup,
    copied,
    last_line,
    lost_rows,
    reference,
    refuse_empty,
    refuse_shadowing,
    same_tests,
    tampered,
    untampered,
)
from _gate.runs.crossrun_run import run as run_tests
from _gate.runs.entry import Contract, Earlier
from _gate.runs.env_probe import environments, own_modules
from _gate.runs.perturb import Perturbation
from _gate.runs.perturbed_tests import (
    PARENT,
    PATCH,
    Runner,
    applied,
    planned,
)
from _gate.runs.pytest_run import PytestRun
from _gate.runs.reuse import (
    REUSED,
    cache_key,
    files_digest,
    keep_run,
    kept_run,
    noted,
)
from _gate.runs.run_settings import RunSettings, add_run_args
from _gate.runs.selected_tests import Perturbed, chosen, compared, parent_reach
from _gate.runs.traced import covered

PERTURBED = ("env", "clock")  # the perturbed run of the parent's tests (docs/perturbation.md)


def allowed_ids(given: Inputs) -> tuple[set[str], list[Row], list[Row]]:
    rows = (
        [r for r in load_allowlist(given.allowlist) if r.field == FIELD] if given.allowlist else []
    )
    if rows and not given.base:
        raise FailClosed(f"{given.allowlist}: a row applies only to the base it names; pass --base")
    current, other = split_by_base(
        given.runs.shard.pick(rows, lambda row: row.id), given.base or ""
    )
    return {r.id for r in current}, current, other


def judged(
    given: Inputs,
    parent: dict[str, str],
    patch: PytestRun,
    rows: list[dict[str, Any]],
    moved: dict[str, str],
) -> Outcome:
    allowed, current, other = allowed_ids(given)
    stale = sorted(allowed - {row["id"] for row in rows})
    if stale:
        raise FailClosed(
            f"{given.allowlist}: row {stale[0]} {FIELD} for this base matches no lost test (stale)"
        )
    counted = [row for row in rows if not row["allowed"]]
    known = sorted(k for k, v in parent.items() if v != "passed")
    evidence: dict[str, Any] = {
        "mode": given.mode,
        "parent_passing": sum(outcome == "passed" for outcome in parent.values()),
        "parent": parent,
        "patch": patch.outcomes,
        # The checks each test ran on the patch build: the inventory compares the patch's
        # tests with them (scripts/_gate/inventory/run_checks.py).
        "patch_checks": patch.checks,
        "failures": counted,
        "allowed": [row["id"] for row in rows if row["allowed"]],
        "parent_not_passing": known,
        "allow_rows": [allow_command(row["id"], FIELD) for row in counted],
        "other_base_rows": [row.as_dict() for row in other],
    }
    head = f"parent tests on the patch: {len(parent)} run"
    note = other_base_note(other, given.allowlist)
    if known:
        note += f"; {len(known)} not passing on the parent either (reported, not counted)"
    if current:
        note += f"; {len(current)} allowed by the allowlist"
    if patch.outcomes is None:
        why = "timed out" if patch.timed_out else f"exit {patch.exit_code}"
        return Outcome(BLOCK, f"{head}, no result on the patch ({why}){note}", evidence)
    final = [row for row in counted if not row["retryable"]]
    if final:
        first = final[0]
        summary = f"{head}, {len(final)} passing on the parent are {first['outcome']} on the patch"
        return Outcome(BLOCK, f"{summary} (first: {first['id']}){note}", evidence)
    if counted and all(row["id"] in moved for row in counted):
        return coupled(
            given, head, note, evidence, {row["id"]: moved[row["id"]] for row in counted}
        )
    if counted:
        first = counted[0]
        summary = (
            f"{head}, {len(counted)} pass on the parent and fail on the patch (first: "
            f"{first['id']}: {last_line(first['message'])}); flake-budget decides{note}"
        )
        return Outcome(BLOCK, summary, evidence, deferred_to="flake-budget")
    return Outcome(PASS, f"{head}, every test passing on the parent passes{note}", evidence)


def coupled(
    given: Inputs, head: str, note: str, evidence: dict[str, Any], moved: dict[str, str]
) -> Outcome:
    """Every lost test failed on a name the patch moved, and the patch's own version of each
    passes: a code owner's review (_gate/runs/coupling.py), accepted under ORACLE_REVIEW=1."""
    evidence["coupled"] = [{"id": node, "moved": name} for node, name in sorted(moved.items())]
    evidence["allow_rows"] = []
    first, name = next(iter(sorted(moved.items())))
    more = f" and {len(moved) - 1} more" if len(moved) > 1 else ""
    found = f"{len(moved)} depend on internals the patch moved (first: {first}: {name}{more})"
    if given.reviewed:
        return Outcome(PASS, f"{head}, {found}, accepted under ORACLE_REVIEW=1{note}", evidence)
    summary = f"{head}, {found}; the patch's versions of them pass: a code owner reviews them"
    return Outcome(FAIL_CLOSED, f"{summary}{note}", evidence, status=NEEDS_REVIEW)


@dataclass(frozen=True)
class Inputs:
    """What the crossrun decides on."""

    tree: Path  # the base tree: its tests and pytest configuration
    patch_tree: Path | None  # the head tree: its versions of the tests it changed
    tests: tuple[str, ...]  # test files or folders of the base tree
    reviewed: bool  # a code owner reviewed the patch (ORACLE_REVIEW=1)
    parent_python: Path
    patch_python: Path
    allowlist: Path | None  # rows `crossrun`
    base: str | None  # the judged base commit (allowlist rows name it)
    mode: str  # block, advisory, or off (judge.yaml `crossrun`)
    test_extra: str  # the tests' extra or dependency group
    timeout: float  # seconds per pytest run
    runs: RunSettings  # shard, same build, kept runs, perturbations


def inputs(j: Judgment) -> Inputs:
    settings = j.config
    return Inputs(
        tree=j.parent,
        patch_tree=j.patch,
        tests=settings.tests,
        reviewed=j.review,
        parent_python=j.built.parent,
        patch_python=j.built.patch,
        allowlist=j.evidence_tree / ALLOWLIST,
        base=j.base,
        mode=settings.crossrun,
        test_extra=settings.test_extra,
        timeout=settings.crossrun_timeout,
        runs=RunSettings.of(j),
    )


def from_args(args: argparse.Namespace) -> Inputs:
    return Inputs(
        tree=args.tree,
        patch_tree=args.patch_tree,
        tests=tuple(args.tests or tree_tests(args.tree)),
        reviewed=args.reviewed,
        parent_python=args.parent_python,
        patch_python=args.patch_python,
        allowlist=args.allowlist,
        base=args.base,
        mode=args.mode,
        test_extra=args.test_extra,
        timeout=args.timeout,
        runs=RunSettings.from_args(args),
    )


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    if given.mode == "off":
        return Outcome(PASS, "off in judge.yaml: the parent's tests did not run")
    folders, runs = list(given.tests), given.runs
    missing = [entry for entry in folders if not (given.tree / entry).exists()]
    if missing:  # the preconditions say so first, with the fix; a step that ran nothing fails
        raise FailClosed(f"tests entry {missing[0]!r} is not in the base tree: nothing to run")
    reusing = runs.same_build and runs.kept.folder is not None and runs.shard.whole
    if reusing and same_tests(given.tree, given.patch_tree, folders):
        return unchanged(given)
    pythons = {"parent": given.parent_python, "patch": given.patch_python}
    if runs.same_build:  # one build's code: the parent's run is the patch's (_gate/runs/reuse.py)
        pythons.pop("patch")
    setup = run_setup(given, folders, pythons)
    key = parent_key(given, folders, setup, runs.kept.parent_build)
    kept_parent = kept_run(runs.kept.folder, key, given.tree)
    how, unrunnable = planned(PERTURBED, runs)
    with ThreadPoolExecutor(max_workers=3) as pool:
        sharded = replace(setup, shard=runs.shard)
        traced = {"patch": replace(sharded, trace=runs.trace("crossrun", tests=True))}
        jobs = {
            side: pool.submit(run_tests, python, given.tree, folders, traced.get(side, sharded))
            for side, python in pythons.items()
            if not (side == "parent" and kept_parent)
        }
        under = pool.submit(perturbed_patch, given, folders, setup, how) if how else None
        results = {side: untampered(side, job.result) for side, job in jobs.items()}
    if kept_parent:
        results["parent"] = kept_parent
    keep_runs(given, folders, setup, results, key if not kept_parent else "")
    refuse_shadowing(pythons, results, folders)
    parent = reference(results["parent"], runs.shard)
    refuse_empty(folders, parent, runs.shard)
    patch = results.get("patch", results["parent"])
    rows = lost_rows(parent, patch, allowed_ids(given)[0])
    if kept_parent and rows:
        parent = rechecked(given, parent, rows, setup)
        rows = lost_rows(parent, patch, allowed_ids(given)[0])
    own = (given.patch_python, given.patch_tree) if given.patch_tree else None
    moved = moved_internals(given.tree, own, rows, setup)
    patch_runs = [results["patch"]] if "patch" in results else []
    perturbed = under.result() if under is not None else None
    found = compared(how, perturbed, parent, patch)
    patch_runs += [perturbed.run] if perturbed is not None and perturbed.run is not None else []
    selection = perturbed.selection if perturbed is not None else None
    outcome = applied(
        judged(given, parent, patch, rows, moved),
        found,
        unrunnable,
        "parent tests",
        same_build=runs.same_build,
        advisory=advisory(given),
    )
    outcome = noted(outcome, runs.same_build, bool(kept_parent))
    if selection is not None:
        outcome = outcome.noted(f"; {selection.why}", selection=selection.evidence())
    total = len(parent) + results["parent"].deselected
    owned = runs.shard.evidence(len(parent), total)
    return described(outcome, runs, setup, owned, patch_runs, tests=folders)


def described(
    outcome: Outcome,
    runs: RunSettings,
    setup: Setup,
    shard: dict[str, Any],
    patch_runs: Sequence[PytestRun],
    *,
    tests: Sequence[str],
) -> Outcome:
    """The outcome's evidence of how the tests ran: the test files and folders in their order,
    the shard, the plugins loaded by name, the modules left out of the copy the tests ran from
    (a flake-budget retry runs them so again), and which test ran each changed line in the
    patch's runs."""
    outcome.evidence.update(
        tests=list(tests), shard=shard, plugins=list(setup.plugins), hidden=list(setup.hidden)
    )
    if runs.changed:
        outcome.evidence["coverage"] = covered(run.coverage for run in patch_runs).as_dict()
    return outcome


def run_setup(given: Inputs, folders: Sequence[str], pythons: Mapping[str, Path]) -> Setup:
    """Every run of the base's tests here: the builds' modules hidden from the copy the tests
    run from (the tests stay, whatever the builds install: a stray top-level `tests` package),
    the plugins the test dependencies declare loaded by name, canaries planted."""
    tops = {f.strip("/").split("/", 1)[0].removesuffix(".py") for f in folders}
    candidates = [m for m in own_modules(given.tree) if m not in tops]
    envs = environments(given.tree, given.test_extra, dict(pythons), candidates)
    plugins = envs.get("patch", envs["parent"]).plugins
    hidden = tuple(sorted(frozenset().union(*(env.provided for env in envs.values()))))
    return Setup(given.timeout, plugins, hidden, canaries=True)


def keep_runs(
    given: Inputs, folders: Sequence[str], setup: Setup, results: Mapping[str, PytestRun], key: str
) -> None:
    """Keep the parent's run under `key` ("": it was kept already), and the patch's as the
    parent's run of the next judgment, should the patch land."""
    if key:
        keep_run(given.runs.kept.folder, key, given.tree, results["parent"])
    if "patch" in results:
        later = parent_key(given, folders, setup, given.runs.kept.patch_build)
        keep_run(given.runs.kept.folder, later, given.tree, results["patch"])


def unchanged(given: Inputs) -> Outcome:
    """A patch whose build and tests are the parent's: both runs would run the same tests on
    the same files, so neither runs. The build step's digests are the evidence."""
    summary = (
        "nothing ran: the patch's build is the parent's, file for file, and its tests are the "
        f"parent's, so no run of them can tell the two apart: {REUSED}"
    )
    evidence = {"mode": given.mode, "ran": False, "parent_run": REUSED, "patch_run": REUSED}
    return Outcome(PASS, summary, evidence)


def perturbed_patch(
    given: Inputs, folders: Sequence[str], setup: Setup, how: Perturbation
) -> Perturbed:
    """The patch's run of the parent's tests under `how`: the test files that can reach the
    change there (_gate/runs/reach.py), or every one."""
    under = replace(setup, how=how, reach=given.runs.functions, shard=given.runs.shard)
    world = f"{how} {how.clock}"
    key = parent_key(given, folders, under, given.runs.kept.parent_build, world)
    kept = (given.runs.kept.folder, key)
    selection = chosen(
        given.runs,
        setup.plugins,
        lambda: parent_reach(given.parent_python, given.tree, folders, under, kept),
        lambda: copied(given.tree, setup.hidden),
    )
    rerun = perturbed_runner(given, selection.files or folders, setup)
    return Perturbed(selection, rerun(PATCH, how, None) if selection.files != () else None, rerun)


def perturbed_runner(given: Inputs, folders: Sequence[str], setup: Setup) -> Runner:
    """A build's run of the parent's tests under a perturbation (a user's scene, the shifted
    clock)."""
    pythons = {PARENT: given.parent_python, PATCH: given.patch_python}

    def run(side: str, how: Perturbation, targets: Sequence[str] | None) -> PytestRun:
        shard = given.runs.shard if targets is None else WHOLE
        trace = given.runs.trace(f"crossrun [{how}]", tests=True) if side == PATCH else None
        under = replace(setup, shard=shard, how=how, trace=trace)
        try:
            return run_tests(pythons[side], given.tree, targets or folders, under)
        except Tampered as exc:
            raise tampered(side, f"pytest run under the {how} perturbation", exc) from None

    return run


def parent_key(
    given: Inputs, folders: Sequence[str], setup: Setup, build: str, world: str = ""
) -> str:
    """What a parent's run depends on (_gate/runs/reuse.py): the build's digest, and of the tree
    the files `same_tests` compares (the tests and pytest's configuration; a README is not
    one); "" when nothing is kept. The patch's run is kept under its build's digest: the
    parent's run of a judgment whose base it becomes."""
    if given.runs.kept.folder is None or not build:
        return ""
    names = [rel for rel in copied(given.tree, setup.hidden) if test_input(rel, folders)]
    return cache_key(
        "crossrun",
        tree=files_digest(given.tree, names),
        build=build,
        tests=list(folders),
        plugins=list(setup.plugins),
        hidden=list(setup.hidden),
        shard=str(given.runs.shard),
        timeout=given.timeout,
        world=world,
    )


def rechecked(
    given: Inputs, parent: dict[str, str], rows: list[dict[str, Any]], setup: Setup
) -> dict[str, str]:
    """The reference with each test the patch lost run again on the parent's build now: a
    kept run's key leaves out the files outside the tests (a README a test reads), so a test
    the patch loses is the parent's only if the parent still passes it today. A test the run
    now does not report (an id pytest cannot select, a timeout) keeps the kept outcome: it
    still counts."""
    ids = [row["id"] for row in rows]
    now = untampered("parent", lambda: run_tests(given.parent_python, given.tree, ids, setup))
    seen = now.outcomes or {}
    return {**parent, **{node: seen[node] for node in ids if node in seen}}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--tree", type=Path, required=True, help="the base tree (tests, config)")
    p.add_argument(
        "--patch-tree", type=Path, help="the head tree: its versions of the tests it changed"
    )
    p.add_argument(
        "--reviewed",
        action="store_true",
        help="a code owner reviewed the patch (ORACLE_REVIEW=1): tests coupled to the "
        "internals it moved are accepted",
    )
    p.add_argument(
        "--tests", nargs="+", help="test files or folders (default: `tests:` of the tree)"
    )
    p.add_argument("--parent-python", type=Path, required=True, help="parent build's python")
    p.add_argument("--patch-python", type=Path, required=True, help="patch build's python")
    p.add_argument("--allowlist", type=Path, help="oracle/allowlist.yaml (rows `crossrun`)")
    p.add_argument("--base", help="the judged base commit (allowlist rows name it)")
    p.add_argument("--mode", choices=("block", "advisory"), default="block")
    p.add_argument("--test-extra", default="", help="extra or dependency group of the tests")
    p.add_argument(
        "--timeout", type=float, default=Config.crossrun_timeout, help="seconds per pytest run"
    )
    add_run_args(p)
    add_report_arg(p, FIELD)
    return p


def advisory(given: Inputs) -> bool:
    """`crossrun: advisory` (`--mode advisory`): reported, never part of the verdict."""
    return given.mode == "advisory"


STEP = Contract(FIELD, parser, from_args, inputs, decide, advisory=advisory)
