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
relative to the root resolve; a module that fails to import is that module's error (its tests
then count as erroring with it), and the rest still run. The patch can edit its own copy of a
test; it cannot edit this one.

A test that passes on the parent and fails or errors on the patch is lost. It is deferred to
flake-budget, which may retry it within the budget or excuse it by quarantine, unless an
allowlist row of this base (`field: crossrun`, `id`: the test id) names it, or unless every lost
test failed on a name the patch moved and the patch's own version of it (from `--patch-tree`)
passes: that is a code owner's review, status `needs-review` naming the tests and the names
(scripts/_gate/coupling.py), accepted with `--reviewed` (ORACLE_REVIEW=1). A test that passed
on the parent and is skipped or missing on the patch blocks here. Tests already failing or
skipped on the parent are reported, never counted; if none passes there, the step cannot see
and fails closed. Each run works on its own copy of the base tree's tracked files, without the
top-level modules the builds install (at the root or under `src/`): pytest's default import
mode may put the root on sys.path, and a flat-layout package there would be tested instead of
the build. A run that still imported, from its copy, a module the build provides (a conftest
that extends sys.path, say) fails closed. Test dependencies are an extra or a dependency
group of the base's pyproject.toml (`--test-extra`), installed like every judge dependency from
the hash-pinned wheelhouse; one missing from a build fails closed, and the pytest plugins they
declare are loaded by name.

The patch's code runs in the process that runs these tests: weaker evidence than the cassettes
or the worker-isolated oracle, stronger than the patch's own tests. Each run therefore gets
canaries, planted in its copy beside the base's test modules and named like them: tests that
must fail and tests that must pass, kept out of the outcomes compared here; and the gate's
plugin checks at the end of the session that pytest's running and reporting machinery is what
it loaded (scripts/_gate/canaries.py, scripts/_gate/tamper.py). A canary with the wrong outcome
or missing, changed machinery, or an evidence file rewritten afterwards fails closed, in
either mode, naming the build and what was wrong. With `--mode advisory` the
step reports and never decides. With `--shard I/N` both runs hold only the tests of that shard
and only the rows naming them are checked (scripts/_gate/shard.py); whether any parent test passes
at all is then the merge's to check (`parent_passing` in the evidence).
With `--same-build` the patch's run is the parent's, and where reuse is on (`--cache`) and
`--patch-tree` also holds the base's tests and pytest configuration byte for byte (a docs- or
CI-only patch) neither side runs: the step passes, `reused (no input changed)`; with `--cache`
and `--parent-build` the parent's run is kept between judgments under a digest of its inputs
(scripts/_gate/reuse.py): the build, the tests and pytest's configuration; with
`--patch-build` the patch's run is kept as the parent's run of a base that is the patch. A test
lost against a kept run runs again on the parent's build now, since a test may read a file the
key leaves out.
With `--perturb` naming `env` or `clock` (the default names both), the tests run once more in
a user's scene under the shifted clock, parent against patch: a test the parent passes there
and the patch fails blocks, naming the perturbation (scripts/_gate/perturbed_tests.py).
Exit codes: 0 pass (or advisory), 1 block (or deferred, see the report's status), 2 fail closed
(status `needs-review` where the tests depend on internals the patch moved).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _gate.allowlist import (
    ALLOWLIST,
    Row,
    allow_command,
    load_allowlist,
    other_base_note,
    split_by_base,
)
from _gate.allowlist import CROSSRUN as FIELD
from _gate.config import Config, tree_tests
from _gate.context import Judgment, Kept, test_input
from _gate.coupling import changed_file, moved_name
from _gate.crossrun_run import Setup, copied
from _gate.crossrun_run import run as run_tests
from _gate.entry import Contract, Earlier
from _gate.git import tracked
from _gate.patch_env import gate_env
from _gate.perturb import Perturbation, add_perturb_args
from _gate.perturbed_tests import PARENT, PATCH, Runner, applied, compare, outcome_in, planned
from _gate.protocol import (
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
from _gate.pytest_run import PytestRun
from _gate.reuse import (
    REUSED,
    add_cache_args,
    add_same_build_arg,
    cache_key,
    files_digest,
    keep_run,
    kept_run,
    noted,
)
from _gate.sandbox import run_confined
from _gate.shard import WHOLE, Shard, add_shard_arg
from _gate.test_deps import test_requirements

RETRYABLE = ("failed", "error")
PERTURBED = ("env", "clock")  # the perturbed run of the parent's tests (docs/perturbation.md)
# Run in a build's environment (isolated: no tree on sys.path): which of the distributions
# named before `--` are missing, the pytest plugins they declare, and which of the module names
# after `--` the environment installs (in site-packages: not the standard library's).
PROBE = """
import importlib.metadata as m, importlib.util as u, json, os, sys, sysconfig
cut = sys.argv.index("--")
installed = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
missing, plugins, provided = [], [], []
for name in sys.argv[1:cut]:
    try:
        dist = m.distribution(name)
    except m.PackageNotFoundError:
        missing.append(name)
        continue
    plugins += [ep.value.split(":")[0] for ep in dist.entry_points if ep.group == "pytest11"]
for module in sys.argv[cut + 1:]:
    try:
        spec = u.find_spec(module)
    except (ImportError, ValueError):
        continue
    where = spec and (spec.origin or next(iter(spec.submodule_search_locations or ()), None))
    if where and any(os.path.realpath(where).startswith(d + os.sep) for d in installed):
        provided.append(module)
print(json.dumps({"missing": missing, "plugins": plugins, "provided": provided}))
"""


PROBE_TIMEOUT = 120.0  # seconds for the environment probe: one interpreter start


@dataclass(frozen=True)
class Environment:
    """What a build's environment holds for the crossrun."""

    missing: tuple[str, ...]  # test dependencies not installed
    plugins: tuple[str, ...]  # pytest plugins the test dependencies declare, loaded by -p
    provided: frozenset[str]  # of the modules asked about, those the environment can import


def probe(python: Path, names: Sequence[str], modules: Sequence[str]) -> Environment:
    """What the build's environment holds; its python runs the build's .pth files, so the
    probe is confined like the rest of the patch's code."""
    with tempfile.TemporaryDirectory(prefix="probe-") as tmp:
        done = run_confined(
            [str(python), "-I", "-c", PROBE, *names, "--", *modules],
            writable=[Path(tmp)],
            timeout=PROBE_TIMEOUT,
            cwd=python.parent,
            env=gate_env(Path(tmp), Path(tmp), python.parent),
        )
    try:
        data = json.loads(done.stdout.head)
    except ValueError:
        raise FailClosed(
            f"{python}: the environment probe failed: {done.stderr.tail(200)!r}"
        ) from None
    return Environment(tuple(data["missing"]), tuple(data["plugins"]), frozenset(data["provided"]))


def own_modules(tree: Path) -> list[str]:
    """Top-level modules of the tree a build could provide: packages and modules at the root
    (flat layout) and under `src/`."""
    found = []
    for folder in (tree, tree / "src"):
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            if entry.suffix == ".py" and entry.name != "conftest.py" and entry.is_file():
                found.append(entry.stem)
            elif (entry / "__init__.py").is_file():
                found.append(entry.name)
    return sorted(set(found))


def environments(
    given: Inputs, pythons: dict[str, Path], candidates: Sequence[str]
) -> dict[str, Environment]:
    """One probe per build: the tests' own dependencies (each must be installed) and which of
    the tree's top-level modules the build installs."""
    needed = test_requirements(given.tree, given.test_extra)
    found = {side: probe(python, needed, candidates) for side, python in pythons.items()}
    for side, env in found.items():
        if env.missing:
            raise FailClosed(
                f"test dependency {env.missing[0]} (judge.yaml test_extra {given.test_extra!r}) "
                f"is not in the {side} build's environment: add it, hash-pinned, to "
                "scripts/requirements-judge.txt"
            )
    return found


def shadowing(python: Path, result: PytestRun, folders: Sequence[str]) -> list[str]:
    """Modules the run imported from the base tree that the build provides too: the run tested
    the tree's sources, not the build. Test folders and conftest.py files are the tree's own."""
    own = tuple(f"{f.rstrip('/')}/" for f in folders)
    tops = {
        name.split(".", 1)[0]: path
        for name, path in result.sources.items()
        if not path.startswith(own) and path not in folders and Path(path).name != "conftest.py"
    }
    provided = probe(python, [], sorted(tops)).provided if tops else frozenset()
    return sorted(f"{name} ({tops[name]})" for name in provided)


def allowed_ids(given: Inputs) -> tuple[set[str], list[Row], list[Row]]:
    rows = (
        [r for r in load_allowlist(given.allowlist) if r.field == FIELD] if given.allowlist else []
    )
    if rows and not given.base:
        raise FailClosed(f"{given.allowlist}: a row applies only to the base it names; pass --base")
    current, other = split_by_base(given.shard.pick(rows, lambda row: row.id), given.base or "")
    return {r.id for r in current}, current, other


def reference(result: PytestRun, shard: Shard) -> dict[str, str]:
    """The parent run's outcomes: what the patch must keep. A parent run on which nothing
    passes is no reference: the step cannot see (for a shard, the merge decides that)."""
    if result.outcomes is None:
        why = "timed out" if result.timed_out else f"exit {result.exit_code}"
        raise FailClosed(
            f"the parent's tests left no result on the parent build ({why}): "
            f"{result.output_tail[-200:]!r}"
        )
    if "passed" not in result.outcomes.values() and shard.whole:
        first = next(iter(sorted(result.outcomes)), "")
        why = last_line(result.messages.get(first, "")) if first else "none was collected"
        fix = "fix the base's tests"
        if MISSING_MODULE in why:
            fix = "add the tests' dependencies to judge.yaml test_extra and the wheelhouse"
        raise FailClosed(
            f"none of the parent's {len(result.outcomes)} tests passes on the parent build in "
            f"the crossrun (first: {first or '-'}: {why}); {fix}"
        )
    return result.outcomes


MISSING_MODULE = "No module named"


def collected(entry: str, outcomes: Mapping[str, str]) -> bool:
    """Whether a `tests:` entry (a folder or file) holds a node id of the run."""
    return any(node == entry or node.startswith((f"{entry}/", f"{entry}::")) for node in outcomes)


def lost_rows(parent: dict[str, str], patch: PytestRun, allowed: set[str]) -> list[dict[str, Any]]:
    """Each test that passed on the parent and does not pass on the patch."""
    got = patch.outcomes or {}
    rows = []
    for node, before in sorted(parent.items()):
        # A test missing because its module no longer imports has that module's error.
        where = node if node in got else node.split("::", 1)[0]
        after = got.get(where, "missing")
        if before == "passed" and after != "passed":
            rows.append(
                {
                    "id": node,
                    "outcome": after,
                    "retryable": after in RETRYABLE,
                    "allowed": node in allowed,
                    "message": patch.messages.get(where, "")[-1000:],
                }
            )
    return rows


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
        # tests with them (scripts/_gate/run_checks.py).
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
        return graded(given, BLOCK, f"{head}, no result on the patch ({why}){note}", evidence)
    final = [row for row in counted if not row["retryable"]]
    if final:
        first = final[0]
        summary = f"{head}, {len(final)} passing on the parent are {first['outcome']} on the patch"
        return graded(given, BLOCK, f"{summary} (first: {first['id']}){note}", evidence)
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
        evidence["deferred_to"] = "flake-budget"
        return graded(given, BLOCK, summary, evidence, status="deferred")
    return graded(given, PASS, f"{head}, every test passing on the parent passes{note}", evidence)


def coupled(
    given: Inputs, head: str, note: str, evidence: dict[str, Any], moved: dict[str, str]
) -> Outcome:
    """Every lost test failed on a name the patch moved, and the patch's own version of each
    passes: a code owner's review (scripts/_gate/coupling.py), accepted under ORACLE_REVIEW=1."""
    evidence["coupled"] = [{"id": node, "moved": name} for node, name in sorted(moved.items())]
    evidence["allow_rows"] = []
    first, name = next(iter(sorted(moved.items())))
    more = f" and {len(moved) - 1} more" if len(moved) > 1 else ""
    found = f"{len(moved)} depend on internals the patch moved (first: {first}: {name}{more})"
    if given.reviewed:
        return graded(
            given, PASS, f"{head}, {found}, accepted under ORACLE_REVIEW=1{note}", evidence
        )
    summary = f"{head}, {found}; the patch's versions of them pass: a code owner reviews them"
    return graded(given, FAIL_CLOSED, f"{summary}{note}", evidence, status=NEEDS_REVIEW)


def graded(
    given: Inputs,
    code: int,
    summary: str,
    evidence: dict[str, Any],
    status: str | None = None,
) -> Outcome:
    if given.mode == "advisory":
        evidence.pop("deferred_to", None)
        return Outcome(PASS, f"{summary} (advisory: never part of the verdict)", evidence)
    return Outcome(code, summary, evidence, status=status)


def last_line(message: str) -> str:
    """What went wrong, in one line: pytest's first `E` line (the assertion), else the last."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    found = errors[0] if errors else lines[-1] if lines else "no message"
    return found[:200]


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
    shard: Shard
    same_build: bool
    kept: Kept
    perturb: tuple[str, ...]
    perturb_required: tuple[str, ...]


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
        shard=j.shard,
        same_build=j.built.same,
        kept=j.built.kept,
        perturb=settings.perturb,
        perturb_required=settings.perturb_required,
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
        shard=args.shard,
        same_build=args.same_build,
        kept=Kept.from_args(args),
        perturb=tuple(args.perturb),
        perturb_required=tuple(args.perturb_required),
    )


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    if given.mode == "off":
        return Outcome(PASS, "off in judge.yaml: the parent's tests did not run")
    folders = list(given.tests)
    missing = [entry for entry in folders if not (given.tree / entry).exists()]
    if missing:  # the preconditions say so first, with the fix; a step that ran nothing fails
        raise FailClosed(f"tests entry {missing[0]!r} is not in the base tree: nothing to run")
    reusing = given.same_build and given.kept.folder is not None and given.shard.whole
    if reusing and same_tests(given.tree, given.patch_tree, folders):
        return unchanged(given)
    pythons = {"parent": given.parent_python, "patch": given.patch_python}
    if given.same_build:  # one build's code: the parent's run is the patch's (_gate/reuse.py)
        pythons.pop("patch")
    # The tests stay whatever the builds install (a stray top-level `tests` package).
    tops = {f.strip("/").split("/", 1)[0].removesuffix(".py") for f in folders}
    candidates = [m for m in own_modules(given.tree) if m not in tops]
    envs = environments(given, pythons, candidates)
    plugins = envs.get("patch", envs["parent"]).plugins
    hidden = tuple(sorted(frozenset().union(*(env.provided for env in envs.values()))))
    # Every run of the base's tests here: the builds' modules hidden, canaries planted.
    setup = Setup(given.timeout, plugins, hidden, canaries=True)
    key = parent_key(given, folders, setup, given.kept.parent_build)
    kept_parent = kept_run(given.kept.folder, key, given.tree)
    how, unrunnable = planned(PERTURBED, given.perturb, given.perturb_required, given.same_build)
    under = perturbed_runner(given, folders, setup)
    with ThreadPoolExecutor(max_workers=3) as pool:
        sharded = replace(setup, shard=given.shard)
        jobs = {
            side: pool.submit(run_tests, python, given.tree, folders, sharded)
            for side, python in pythons.items()
            if not (side == "parent" and kept_parent)
        }
        patch_under = pool.submit(under, PATCH, how, None) if how else None
        results = {side: untampered(side, job.result) for side, job in jobs.items()}
    if kept_parent:
        results["parent"] = kept_parent
    else:
        keep_run(given.kept.folder, key, given.tree, results["parent"])
    if "patch" in results:  # the parent's run of the next judgment, should the patch land
        later = parent_key(given, folders, setup, given.kept.patch_build)
        keep_run(given.kept.folder, later, given.tree, results["patch"])
    refuse_shadowing(pythons, results, folders)
    parent = reference(results["parent"], given.shard)
    refuse_empty(folders, parent, given.shard)
    patch = results.get("patch", results["parent"])
    rows = lost_rows(parent, patch, allowed_ids(given)[0])
    if kept_parent and rows:
        parent = rechecked(given, parent, rows, setup)
        rows = lost_rows(parent, patch, allowed_ids(given)[0])
    moved = moved_internals(given, rows, setup)
    found = None
    if how is not None and patch_under is not None:
        passing = [node for node in parent if outcome_in(patch, node) == parent[node] == "passed"]
        found = compare(how, under, patch_under.result(), passing, "parent tests")
    outcome = applied(
        judged(given, parent, patch, rows, moved),
        found,
        unrunnable,
        "parent tests",
        same_build=given.same_build,
        advisory=given.mode == "advisory",
    )
    outcome = noted(outcome, given.same_build, bool(kept_parent))
    total = len(parent) + results["parent"].deselected
    outcome.evidence["shard"] = given.shard.evidence(len(parent), total)
    # The plugins loaded by name, and the modules left out of the copy the tests ran from.
    outcome.evidence.update(plugins=list(plugins), hidden=list(hidden))
    return outcome


def refuse_shadowing(
    pythons: Mapping[str, Path], results: Mapping[str, PytestRun], folders: Sequence[str]
) -> None:
    """A run that imported the code under test from the tree, not the build, tested neither."""
    for side, result in results.items():
        shadowed = shadowing(pythons[side], result, folders)
        if shadowed:
            raise FailClosed(
                f"the crossrun on the {side} build imported {shadowed[0]} from the base tree, "
                "not from the build: take the source folder out of pytest's `pythonpath` (or "
                "of sys.path in a conftest.py)"
            )


def refuse_empty(folders: Sequence[str], parent: Mapping[str, str], shard: Shard) -> None:
    """A `tests:` entry without a test pytest collects on the base (a whole run only: a
    shard may hold none of an entry's tests)."""
    empty = [entry for entry in folders if not collected(entry, parent)]
    if empty and shard.whole:
        raise FailClosed(
            f"oracle/judge.yaml: field 'tests' entry {empty[0]!r} holds no test pytest collects "
            "on the base: name the folders and files the base's tests are in"
        )


def same_tests(tree: Path, patch_tree: Path | None, folders: Sequence[str]) -> bool:
    """Whether the head tree holds the base's test folders and files, and the files at the
    root that configure pytest, byte for byte (no --patch-tree: it cannot tell)."""
    if patch_tree is None:
        return False
    names = [rel for rel in tracked(tree) if test_input(rel, folders)]
    theirs = [rel for rel in tracked(patch_tree) if test_input(rel, folders)]
    return names == theirs and files_digest(tree, names) == files_digest(patch_tree, names)


def unchanged(given: Inputs) -> Outcome:
    """A patch whose build and tests are the parent's: both runs would run the same tests on
    the same files, so neither runs. The build step's digests are the evidence."""
    summary = (
        "nothing ran: the patch's build is the parent's, file for file, and its tests are the "
        f"parent's, so no run of them can tell the two apart: {REUSED}"
    )
    evidence = {"mode": given.mode, "ran": False, "parent_run": REUSED, "patch_run": REUSED}
    return graded(given, PASS, summary, evidence)


def perturbed_runner(given: Inputs, folders: Sequence[str], setup: Setup) -> Runner:
    """A build's run of the parent's tests under a perturbation (a user's scene, the shifted
    clock)."""
    pythons = {PARENT: given.parent_python, PATCH: given.patch_python}

    def run(side: str, how: Perturbation, targets: Sequence[str] | None) -> PytestRun:
        shard = given.shard if targets is None else WHOLE
        under = replace(setup, shard=shard, how=how)
        try:
            return run_tests(pythons[side], given.tree, targets or folders, under)
        except Tampered as exc:
            raise tampered(side, f"pytest run under the {how} perturbation", exc) from None

    return run


def parent_key(given: Inputs, folders: Sequence[str], setup: Setup, build: str) -> str:
    """What a parent's run depends on (_gate/reuse.py): the build's digest, and of the tree
    the files `same_tests` compares (the tests and pytest's configuration; a README is not
    one); "" when nothing is kept. The patch's run is kept under its build's digest: the
    parent's run of a judgment whose base it becomes."""
    if given.kept.folder is None or not build:
        return ""
    names = [rel for rel in copied(given.tree, setup.hidden) if test_input(rel, folders)]
    return cache_key(
        "crossrun",
        tree=files_digest(given.tree, names),
        build=build,
        tests=list(folders),
        plugins=list(setup.plugins),
        hidden=list(setup.hidden),
        shard=str(given.shard),
        timeout=given.timeout,
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


def moved_internals(given: Inputs, rows: list[dict[str, Any]], setup: Setup) -> dict[str, str]:
    """The lost tests coupled to internals the patch moved (scripts/_gate/coupling.py), each
    with the name it failed on: those the patch changed whose own version passes on the patch
    build, run as the parent's were (a private copy, canaries, the build's modules hidden)."""
    if given.patch_tree is None:
        return {}
    names = {
        row["id"]: moved_name(row["outcome"], row["message"])
        for row in rows
        if not row["allowed"] and changed_file(row["id"], given.tree, given.patch_tree)
    }
    names = {node: name for node, name in names.items() if name}
    if not names:
        return {}
    files = sorted({node.split("::", 1)[0] for node in names})  # a test it renamed is not there
    try:
        own = run_tests(given.patch_python, given.patch_tree, files, setup)
    except Tampered as exc:
        raise tampered(PATCH, "run of its own version of its tests", exc) from None
    if shadowing(given.patch_python, own, files):
        return {}  # it tested the tree's sources, not the build: no version of its own passed
    passed = {node for node, outcome in (own.outcomes or {}).items() if outcome == "passed"}
    return {node: name for node, name in names.items() if node in passed}


def untampered(side: str, result: Callable[[], PytestRun]) -> PytestRun:
    """The run of one build, unless its canaries or pytest's machinery say it was forged."""
    try:
        return result()
    except Tampered as exc:
        raise tampered(side, "pytest run", exc) from None


def tampered(side: str, run: str, exc: Tampered) -> Exception:
    """A forged run of the patch build blocks, in either mode: the patch's code did it (no
    honest build does). The parent build runs none of the patch's code: a forged run there
    is the base's, and the gate cannot judge on it."""
    if side == PATCH:
        return Tampered(f"the patch build's {run} was tampered with: {exc}")
    return FailClosed(
        f"the {side} build's {run} was tampered with, though it runs none of the patch's code: "
        f"{exc}; judge the base itself (its last landed patch)"
    )


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
    add_shard_arg(p)
    add_same_build_arg(p)
    add_cache_args(p)
    add_perturb_args(p)
    add_report_arg(p, FIELD)
    return p


STEP = Contract(FIELD, parser, from_args, inputs, decide)


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
