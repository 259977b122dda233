"""Flake budget, the last step: the only place an oracle or crossrun failure can be excused.

    python scripts/flake_budget.py --oracle-report reports/oracle.json --oracle BASE/oracle \
        --oracle-python O --patch-python Q --quarantine FILE --ledger FILE --max-retry 1 \
        [--crossrun-report reports/crossrun.json --tree BASE_TREE]

It decides only what the oracle step and the crossrun step deferred to it: tests that passed on
the parent build and failed or errored on the patch. Such a test is excused when a live
quarantine row or a live variance-ledger row (both read from the protected oracle ref) names
it, or when it passes again within `--max-retry` reruns on the patch. A rerun is the step's
whole run again (its tests, in their order, its shard), never the test alone: a test that fails
only after earlier tests ran the patch's code (state they left behind: a module's globals, the
environment, a file) fails again, where alone it would pass; one rerun per attempt serves every
test the step deferred. Everything else those steps already decided, and this step leaves it
as it is: a new test gets zero retries, a missing or skipped test is never a flake. Cassette
replay, the inventory, the lock and the write-set are never excused. A deferring report that
cannot be read fails closed.
Exit codes: 0 every deferred failure is excused (or none was deferred), 1 block, 2 fail closed.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate.core.config import Config
from _gate.core.context import Judgment
from _gate.core.ledger import frozen_ids, load_ledger
from _gate.core.protocol import (
    BLOCK,
    EXIT_CODES_HELP,
    PASS,
    FailClosed,
    Outcome,
    Report,
    Tampered,
    add_report_arg,
    read_report,
)
from _gate.core.quarantine import active_ids, load_quarantine
from _gate.core.seal import Seal, TrustedEnv, seal_of
from _gate.plugin.shard import Shard
from _gate.runs.crossrun_run import Setup
from _gate.runs.crossrun_run import run as crossrun_run
from _gate.runs.entry import Contract, Earlier
from _gate.runs.oracle_run import add_oracle_args
from _gate.runs.oracle_run import run as run_oracle
from _gate.runs.pytest_run import PytestRun, Subject

TIMEOUT = 900.0  # seconds per rerun


@dataclass(frozen=True)
class Inputs:
    """What flake control decides with, besides the deferring steps' outcomes."""

    oracle: Path  # oracle/ of the base tree
    oracle_python: Path | None  # the oracle env's python (None: no property oracle)
    seal: Seal | None
    patch_python: Path
    tree: Path | None  # the base tree the crossrun's tests come from
    # The tests a live row excuses: of quarantine.yaml, of variance-ledger.json (the oracle
    # ref's, on the judgment's day).
    quarantined: frozenset[str]
    frozen: frozenset[str]
    max_retry: int  # retries per pre-existing test
    timeout: float
    call_timeout: float


def inputs(j: Judgment) -> Inputs:
    ref = j.oracle_ref
    if ref.quarantine is None or ref.ledger is None:
        raise FailClosed(ref.unreadable)  # flake control reads nothing but the oracle ref
    quarantined, frozen = live_rows(ref.quarantine, ref.ledger, dt.date.today())
    return Inputs(
        oracle=j.parent / "oracle",
        oracle_python=j.built.oracle if j.built.oracle_seal is not None else None,
        seal=j.built.oracle_seal,
        patch_python=j.built.patch,
        tree=j.parent,
        quarantined=quarantined,
        frozen=frozen,
        max_retry=j.config.flake_max_retry,
        timeout=TIMEOUT,
        call_timeout=j.config.call_timeout,
    )


def from_args(args: argparse.Namespace) -> Inputs:
    if args.crossrun_report and args.tree is None:
        raise FailClosed("--crossrun-report needs --tree, the base tree its tests come from")
    quarantined, frozen = live_rows(args.quarantine, args.ledger, args.today)
    return Inputs(
        oracle=args.oracle,
        oracle_python=args.oracle_python,
        seal=seal_of(args),
        patch_python=args.patch_python,
        tree=args.tree,
        quarantined=quarantined,
        frozen=frozen,
        max_retry=args.max_retry,
        timeout=args.timeout,
        call_timeout=args.call_timeout,
    )


def live_rows(
    quarantine: Path, ledger: Path, today: dt.date
) -> tuple[frozenset[str], frozenset[str]]:
    """The test ids a live quarantine row and a live variance-ledger row name."""
    quarantined = active_ids(load_quarantine(quarantine), today)
    return frozenset(quarantined), frozenset(frozen_ids(load_ledger(ledger), today))


@dataclass(frozen=True)
class Retry:
    """What a rerun needs: the inputs, the oracle env sealed once for every retry, and the
    whole runs made so far (by step and attempt), each shared by the tests that step deferred."""

    given: Inputs
    oracle_env: TrustedEnv | None
    runs: dict[tuple[str, int], PytestRun] = field(default_factory=dict)


Rerun = Callable[[Retry, dict[str, Any]], PytestRun]


def retries_for(node: str, parent: dict[str, str], max_retry: int) -> int:
    """Retries are residual: only a test that passed before the patch may spend any."""
    return max_retry if parent.get(node) == "passed" else 0


def rerun_oracle(retry: Retry, evidence: dict[str, Any]) -> PytestRun:
    """The property oracles' whole run on the patch build again, its shard's."""
    given = retry.given
    if retry.oracle_env is None:
        raise FailClosed("no oracle environment to retry the property oracles in (--oracle-python)")
    subject = Subject(given.patch_python, given.call_timeout)
    shard = shard_of(evidence)
    return run_oracle(retry.oracle_env, subject, given.oracle, given.timeout, shard=shard)


def rerun_crossrun(retry: Retry, evidence: dict[str, Any]) -> PytestRun:
    """The crossrun's whole run on the patch build again: its test files and folders in their
    order, its shard, with canaries as the crossrun ran it (a forger could pass only its
    retries)."""
    plugins = [str(p) for p in evidence.get("plugins") or []]
    hidden = [str(m) for m in evidence.get("hidden") or []]
    tests = evidence.get("tests")
    given = retry.given
    if given.tree is None:
        raise FailClosed("no base tree to retry the crossrun's tests from (--tree)")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise FailClosed(
            "the crossrun report has no field 'tests' (the test files and folders it ran, in "
            "order), which a retry runs again: judge it again with this gate's crossrun"
        )
    setup = Setup(given.timeout, tuple(plugins), tuple(hidden), shard_of(evidence), canaries=True)
    try:
        return crossrun_run(given.patch_python, given.tree, tests, setup)
    except Tampered as exc:
        why = f"the patch build's retry of the crossrun was tampered with: {exc}"
        raise Tampered(why) from None


def shard_of(evidence: dict[str, Any]) -> Shard:
    """The shard a deferring step's run held (its evidence's `shard`)."""
    try:
        return Shard.of(evidence.get("shard"))
    except ValueError as exc:
        raise FailClosed(f"a deferring report's shard: {exc}") from None


def passes_again(
    retry: Retry, step: str, node: str, evidence: dict[str, Any], again: Rerun
) -> int | None:
    """The attempt (1-based) on which `node` passed again in its step's whole run, or None
    if it never did."""
    parent = evidence.get("parent") or {}
    for attempt in range(1, retries_for(node, parent, retry.given.max_retry) + 1):
        if (step, attempt) not in retry.runs:
            retry.runs[step, attempt] = again(retry, evidence)
        result = retry.runs[step, attempt]
        if (result.outcomes or {}).get(node) == "passed":
            return attempt
    return None


RERUN: dict[str, Rerun] = {"oracle": rerun_oracle, "crossrun": rerun_crossrun}


def deferred(earlier: Mapping[str, Report]) -> list[tuple[str, dict[str, Any], Rerun]]:
    """(step, evidence, how to run its whole run again) of each step that deferred to us."""
    found = []
    for step, again in RERUN.items():
        report = earlier.get(step)
        if report is not None and report.deferred_to == "flake-budget":
            found.append((step, report.evidence, again))
    return found


def reported(args: argparse.Namespace) -> Earlier:
    """By hand: the earlier outcomes from the report files the flags name."""
    paths = {"oracle": args.oracle_report, "crossrun": args.crossrun_report}
    return {step: read_report(path) for step, path in paths.items() if path is not None}


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    # One for every retry (by hand: sealed at the first); none without property oracles.
    oracle_env = TrustedEnv(given.oracle_python, given.seal) if given.oracle_python else None
    retry = Retry(given, oracle_env)
    excluded: list[dict[str, Any]] = []
    flaky: list[dict[str, Any]] = []
    remaining: list[dict[str, Any]] = []
    total = 0
    for step, evidence, again in deferred(earlier):
        parent = evidence.get("parent") or {}
        for row in [r for r in evidence.get("failures") or [] if r.get("retryable")]:
            total += 1
            node = row["id"]
            by = f"a live {'quarantine' if node in given.quarantined else 'variance ledger'} row"
            if node in given.quarantined | given.frozen and parent.get(node) == "passed":
                excluded.append({"id": node, "step": step, "by": by})
                continue
            attempt = passes_again(retry, step, node, evidence, again)
            found = {"id": node, "step": step, "passed_on_retry": attempt}
            (flaky if attempt else remaining).append(found)
    out = {
        "excluded": excluded,
        "flaky": flaky,
        "remaining": remaining,
        "max_retry": given.max_retry,
    }
    if not total:
        return Outcome(PASS, "no oracle or crossrun failure was deferred to flake control", out)
    if remaining:
        return Outcome(BLOCK, unexcused(remaining), out)
    spent = f"{len(flaky)} passed on retry, {len(excluded)} excluded by the oracle ref"
    return Outcome(PASS, f"{total} deferred failures excused: {spent}", out)


FAILED_BY = {"crossrun": "parent test", "oracle": "property oracle"}


def unexcused(remaining: Sequence[dict[str, Any]]) -> str:
    """The failures flake control left standing, named as the step that found them: flake
    control may excuse a failure, it does not own it."""
    first = remaining[0]
    more = f" (and {len(remaining) - 1} more)" if len(remaining) > 1 else ""
    return (
        f"{first['step']} failure: {FAILED_BY.get(first['step'], 'test')} {first['id']} fails "
        f"on the patch{more}; not a flake: no retry passed and no live quarantine or variance "
        "row excuses it"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--oracle-report", type=Path, default=Path("reports/oracle.json"))
    p.add_argument("--crossrun-report", type=Path, help="crossrun.json, when the step ran")
    p.add_argument("--tree", type=Path, help="the base tree the crossrun's tests come from")
    add_oracle_args(
        p, oracle_python="oracle env's python (none: no property oracle)", timeout=TIMEOUT
    )
    p.add_argument("--quarantine", type=Path, required=True, help="quarantine.yaml (oracle ref)")
    p.add_argument("--ledger", type=Path, required=True, help="variance-ledger.json (oracle ref)")
    p.add_argument(
        "--max-retry",
        type=int,
        default=Config.flake_max_retry,
        help="retries per pre-existing test",
    )
    p.add_argument("--today", type=dt.date.fromisoformat, default=dt.date.today())
    add_report_arg(p, "flake-budget")
    return p


STEP = Contract("flake-budget", parser, from_args, inputs, decide, reported)
