"""The assert inventory's run-time evidence (docs/assertion-probes.md): the patch's tests run on
the patch build, their checks compared with those the parent's tests ran on it in the crossrun
(run_checks.py), and every check of a test the patch added or changed forced to fail
(probes.py). Each run is of the patch's code: confined, from a private copy of the tree without
the build's own modules, canaries planted (a run that forges outcomes fails closed). Where the
patch changed test modules alone, only those run: the others are the very ones the crossrun ran
on the patch build (changed_tests.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate.core.context import ChangedFile
from _gate.core.protocol import Tampered
from _gate.inventory import changed_tests, probes
from _gate.inventory.run_checks import Decided, Ran, compare
from _gate.plugin.change_trace import OWN_TESTS
from _gate.runs.crossrun_run import Setup
from _gate.runs.crossrun_run import run as run_tests
from _gate.runs.pytest_run import PytestRun
from _gate.runs.traced import Trace


@dataclass(frozen=True)
class Setting:
    """What the run-time evidence needs of the judgment."""

    parent: Path  # the parent tree
    patch: Path  # the patch tree
    python: Path  # the patch build's python
    tests: Sequence[str]  # the test folders and files, as judge.yaml names them
    plugins: Sequence[str]  # pytest plugins of the tests' dependencies (-p)
    hidden: Sequence[str]  # the tree's modules the build installs, left out of each copy
    timeout: float
    helpers: Sequence[str]  # judge.yaml assert_helpers
    crossran: PytestRun  # the parent's tests on the patch build (the crossrun's patch run)
    test_files: frozenset[str] = frozenset()  # test modules of either tree (by name or id)
    changed: tuple[ChangedFile, ...] = ()  # the patch's changed lines, which its run traces


@dataclass
class Found:
    """What ran said: findings, AST findings it set aside, and the evidence to report."""

    findings: list[dict[str, Any]] = field(default_factory=list)
    decided: Decided = field(default_factory=Decided)
    probed: probes.Probed = field(default_factory=probes.Probed)
    base_cannot_fail: list[str] = field(default_factory=list)
    patch_run: PytestRun | None = None
    ran: list[str] | None = None  # the test modules run (None: all); the rest the crossrun's

    def evidence(self) -> dict[str, Any]:
        run = self.patch_run
        return {
            "set_aside": [
                {
                    "rule": f["rule"],
                    "id": f["id"],
                    "reason": f["reason"],
                    "decided_by": "run-time checks",
                }
                for f in self.decided.set_aside
            ],
            "moved_tests": self.decided.moved,
            "probes": {
                "rounds": self.probed.rounds,
                "can_fail": len(self.probed.can_fail),
                "cannot_fail": [named(site) for site in self.probed.cannot_fail],
                "cannot_fail_on_the_parent_too": self.base_cannot_fail,
                "not_probed": [f"{p.test}: line {p.site.line}" for p in self.probed.not_probed],
            },
            **({"coverage": run.coverage.as_dict()} if run and run.coverage else {}),
            "patch_run": {
                "outcomes": run.outcomes,
                "exit_code": run.exit_code,
                "modules_run": "all" if self.ran is None else self.ran,
                "from_the_crossrun": changed_tests.shared(run.outcomes or {}, self.ran or ()),
            }
            if run
            else None,
        }


def named(site: probes.Site) -> str:
    """`tests/test_x.py::test_y: line 12`: the test (for a helper's site, the helper) and line."""
    return f"{site.path}::{site.owner}: line {site.line}"


def judged(
    setting: Setting,
    pairs: Mapping[str, str],
    old_paths: Mapping[str, str],
    ast_findings: Sequence[dict[str, Any]],
) -> Found:
    """The patch's tests run, compared and probed. `pairs`: parent test -> the patch test the
    AST compared it with; `old_paths`: a moved file's patch path -> its parent path."""
    found = Found()
    found.ran = changed_tests.to_run(
        setting.parent, setting.patch, setting.hidden, setting.tests, setting.test_files
    )
    try:
        run = patch_tests(setting, found.ran)
    except Tampered as exc:
        reason = f"the patch's tests forged their outcomes on the patch build: {exc}"
        found.findings.append(finding("tampered-run", ".", ".", 0, reason))
        return found
    found.patch_run = run
    if run.outcomes is None:
        why = "timed out" if run.timed_out else f"exit {run.exit_code}"
        reason = (
            f"the patch's tests left no result on the patch build ({why}): their checks "
            "cannot be counted or probed"
        )
        found.findings.append(finding("no-run", ".", ".", 0, reason))
        return found
    parent = Ran.of(setting.crossran.outcomes or {}, setting.crossran.checks)
    patch = Ran.of(run.outcomes, run.checks, run.reflexive)
    found.decided = compare(parent, patch, pairs, ast_findings)
    found.findings += found.decided.findings
    try:
        probed(setting, patch, pairs, old_paths, found)
    except Tampered as exc:
        reason = f"an assertion probe's run of the patch's tests forged its outcomes: {exc}"
        found.findings.append(finding("tampered-run", ".", ".", 0, reason))
    return found


def probed(
    setting: Setting,
    patch: Ran,
    pairs: Mapping[str, str],
    old_paths: Mapping[str, str],
    found: Found,
) -> None:
    """Force the checks of the changed tests that passed; a check that cannot fail and is not
    the base's is a finding."""
    plans = probes.plans(setting.parent, setting.patch, patch.passed, old_paths, setting.helpers)
    took = found.patch_run.durations if found.patch_run else {}
    found.probed = probes.probe(setting.patch, plans, runner(setting, took), os.cpu_count() or 1)
    back = {now: before for before, now in pairs.items()}
    for site, tests in found.probed.cannot_fail.items():
        if on_the_base(setting, site, tests, back):
            found.base_cannot_fail.append(named(site))
            continue
        reason = f"{named(site)} cannot fail (forced failure passed)"
        owner = f"{site.path}::{site.owner}"  # a test, or the helper the tests name
        found.findings.append(finding("cannot-fail", owner, site.path, site.line, reason))


def finding(rule: str, test: str, path: str, line: int, reason: str) -> dict[str, Any]:
    return {"rule": rule, "id": test, "path": path, "line": line, "reason": reason}


def patch_tests(setting: Setting, ran: list[str] | None) -> PytestRun:
    """The patch's tests on the patch build, as the crossrun runs the parent's: the modules of
    `ran` that the patch holds (None: every one), the others taken from the crossrun. Tampered
    when its canaries or pytest's machinery say the run was forged (the patch's own tests did
    it: a finding, not an error of the gate)."""
    trace = Trace(setting.changed, OWN_TESTS, tests=True) if setting.changed else None
    if ran is None:
        return confined_run(setting, setting.patch, setting.tests, setting.timeout, trace=trace)
    held = [rel for rel in ran if (setting.patch / rel).is_file()]  # not the deleted ones
    run = confined_run(setting, setting.patch, held, setting.timeout, trace=trace) if held else None
    combined = changed_tests.combined(run, setting.crossran, ran)
    combined.coverage = run.coverage if run else None
    return combined


def confined_run(
    setting: Setting,
    tree: Path,
    targets: Sequence[str],
    timeout: float,
    *,
    sources: Mapping[str, bytes] | None = None,
    trace: Trace | None = None,
) -> PytestRun:
    """One confined run of `targets` of a copy of `tree` on the patch build, canaries planted
    (`trace`: which of the patch's tests ran each changed line)."""
    plugins, hidden = tuple(setting.plugins), tuple(setting.hidden)
    setup = Setup(timeout, plugins, hidden, canaries=True, sources=sources, trace=trace)
    return run_tests(setting.python, tree, targets, setup)


# A probe's run may take this long, and ten times what its tests took in the patch's run:
# a forced failure can leave a test waiting forever (a thread's gate never set), and the
# step's own timeout (crossrun_timeout) is for a whole suite.
PROBE_FLOOR, PROBE_FACTOR = 60.0, 10.0


def runner(setting: Setting, durations: Mapping[str, float] | None = None) -> probes.Runner:
    """A probe's run: the tests named, from a copy of `tree` with the forced sources. A test
    that outlives the run's time did not pass with its check forced to fail: it is reported
    failed, with the outcomes of the tests the run finished, and the tests it never reached
    run again without it. A run that ends before any test (in collection) runs each alone."""
    took = durations or {}

    def run(tree: Path, sources: Mapping[str, bytes], tests: Sequence[str]) -> Mapping[str, str]:
        spent = sum(s for node, s in took.items() if probes.family(node) in tests)
        timeout = min(setting.timeout, PROBE_FLOOR + PROBE_FACTOR * spent)
        done = confined_run(setting, tree, tests, timeout, sources=sources)
        if not done.timed_out:
            return done.outcomes or {}
        if done.running:
            reached = {probes.family(node) for node in [*done.finished, done.running]}
            rest = [test for test in tests if test not in reached]
            later = run(tree, sources, rest) if rest else {}
            return {**done.finished, done.running: "failed", **later}
        if len(tests) > 1:  # it ended before any test: each alone
            return {node: o for test in tests for node, o in run(tree, sources, [test]).items()}
        return {tests[0]: "failed"}

    return run


def on_the_base(
    setting: Setting, site: probes.Site, tests: Sequence[str], back: Mapping[str, str]
) -> bool:
    """Whether the same check (by its text) in the parent's version of its function cannot
    fail either: forced there, the parent's versions of the tests it left passing still pass
    on the patch build. Then it is the base's. `back`: a patch test -> its parent test."""
    own = f"{site.path}::{site.owner}"
    path, _, owner = back.get(own, own).partition("::")
    before = probes.scanned(setting.parent, path, setting.helpers)
    function = before.functions.get(owner) if before else None
    same = [s for s in function.sites if s.text == site.text] if function else []
    had = {probes.family(node) for node in setting.crossran.outcomes or {}}
    olds = sorted({back.get(test, test) for test in tests} & had)
    if not same or not olds:
        return False
    sources = {path: probes.forced((setting.parent / path).read_bytes(), same[:1])}
    outcomes = runner(setting)(setting.parent, sources, olds)
    ran = [test for test in olds if any(probes.family(node) == test for node in outcomes)]
    return bool(ran) and not any(probes.failed(outcomes, test) for test in ran)


SET_ASIDE_NOTES = {
    "skip-added": "whose condition does not hold here: it ran and passed",
    "vacuous": "where it ran, an object's own `__eq__` compared it with itself",
}


def summary_note(ran: Found | None) -> str:
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
