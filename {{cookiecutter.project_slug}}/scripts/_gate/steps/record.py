"""Record the parent's public surface: run every case of oracle/cases.yaml on the merge-base build.

    python scripts/record_cassettes.py               # materialize the judge's base and record
    python scripts/record_cassettes.py --command ENV/bin/CLI --base SHA --cases ... --fixtures ...

Without --base it records from the base the judge judges HEAD against, and says which: the
merge base of HEAD and origin/<base_branch> (oracle/judge.yaml), or of HEAD and <base_branch>
where there is no origin/<base_branch>. A local <base_branch> ahead of origin's is not that base
until it is pushed; the line names it and how to record from it (--base <base_branch>).
Each case runs twice. A compared field that differs between the two parent runs is unstable: it
is not saved as an oracle, it is listed in the report with both values. A cassette carries its
provenance (base commit, case digest, interpreter, platform); `--reuse` keeps an existing file
only when that provenance still matches.
A recording that is an uncaught Python exception (a traceback on stderr) is a broken base, not a
contract: it fails closed naming the case and the exception, unless the case says
`expect_crash: true`. Such a recording is not saved, so `--reuse` never picks it up.
With `--shard I/N` only the cases of that shard are recorded (scripts/_gate/plugin/shard.py). With
`--cache` and `--parent-build` a recording is kept between judgments under a digest of its
inputs (the build, the cases, the fixtures), and one kept is reused (scripts/_gate/runs/reuse.py).
Exit codes: 0 recorded (unstable fields, timeouts and signals are reported, not fatal),
2 fail closed (bad cases.yaml, no merge base, the base does not build, an unexpected traceback).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _gate.core.config import Config
from _gate.core.context import Judgment, Kept
from _gate.core.protocol import (
    EXIT_CODES_HELP,
    FAIL_CLOSED,
    PASS,
    FailClosed,
    Outcome,
    add_report_arg,
    say,
)
from _gate.core.reports import write_json
from _gate.plugin.shard import Shard, add_shard_arg
from _gate.runs.case_runs import built_cli
from _gate.runs.cases import CASES, Case, load_cases
from _gate.runs.cassettes import cassette_path, load_cassette, provenance, record, sealed
from _gate.runs.entry import Contract, Earlier
from _gate.runs.envs import WHEELHOUSE
from _gate.runs.git import (
    base_ref,
    committed_config,
    default_base,
    git,
    repo_root,
    resolve_commit,
    rev_exists,
    tracked,
    uncommitted,
)
from _gate.runs.perturb import add_perturb_args, runnable
from _gate.runs.reuse import REUSED, add_cache_args, cache_key, files_digest, keep, kept
from _gate.runs.sandbox import require_sandbox


def owned_cases(path: Path, timeout: float, shard: Shard) -> list[Case]:
    return shard.pick(load_cases(path, timeout), lambda case: case.id)


def summarize(cassette: dict[str, Any], out: Path, verb: str, cases_file: Path) -> Outcome:
    cases = cassette["cases"]
    unstable = [
        {"id": cid, "field": spec, "values": values}
        for cid, case in cases.items()
        for spec, values in case["unstable"].items()
    ]
    crashed = sorted(cid for cid, c in cases.items() if c["crashed"])
    where = os.path.relpath(out)
    summary = f"{verb} {len(cases)} cases from {cassette['provenance']['base'][:12]} into {where}"
    if verb == KEPT_VERB:
        summary += f" ({REUSED}: an earlier judgment recorded them on the same build)"
    if unstable or crashed:
        summary += f"; {len(unstable)} unstable fields, {len(crashed)} crashed or timed out"
    perturbed = [
        {"id": cid, "perturbation": run, "field": spec}
        for cid, case in cases.items()
        for run, seen in (case.get("perturbed") or {}).items()
        for spec in seen["unstable"]
    ]
    if perturbed:
        summary += f"; {len(perturbed)} fields unstable under a perturbation, left out there"
    proposal = "drop it from compare or add a noise rule"
    evidence = {
        "cassette": str(out),
        "unstable": unstable,
        "proposals": [{"id": u["id"], "field": u["field"], "proposal": proposal} for u in unstable],
        "crashed": crashed,
        "perturbed_unstable": perturbed,
        "tracebacks": tracebacks(cassette),
    }
    if evidence["tracebacks"]:
        return unexpected_traceback(evidence, cases_file)
    return Outcome(PASS, summary, evidence)


def tracebacks(cassette: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"id": cid, "exception": case["traceback"]}
        for cid, case in cassette["cases"].items()
        if case.get("traceback") and not case.get("expect_crash")
    ]


def unexpected_traceback(evidence: dict[str, Any], cases_file: Path) -> Outcome:
    """A base that crashes has no contract to record: replaying the crash would pass a patch
    that crashes the same way, and block the one that fixes it."""
    found = evidence["tracebacks"]
    more = f" ({len(found) - 1} more cases too)" if len(found) > 1 else ""
    return Outcome(
        FAIL_CLOSED,
        f"{cases_file}: case {found[0]['id']!r}: the recording is a Python traceback "
        f"({found[0]['exception']}){more}; fix the base, or set `expect_crash: true` on the "
        "case if the crash is the contract",
        evidence,
    )


RECORDED = (CASES, "fixtures")  # what a recording reads from the base commit


@dataclass(frozen=True)
class Inputs:
    """What the record step records: the parent build's CLI on the base's cases."""

    command: Path  # the parent build's CLI
    base: str  # the commit it was built from
    out: Path  # the cassette file
    cases: Path  # oracle/cases.yaml of the base
    fixtures: Path
    timeout: float  # seconds per case
    shard: Shard
    perturb: tuple[str, ...]
    perturb_required: tuple[str, ...]
    reuse: bool  # keep an existing cassette whose provenance matches
    kept: Kept


@dataclass(frozen=True)
class Materialize:
    """By hand without --command: build the judge's base, then record from it."""

    repo: Path
    base: str | None  # None: the judge's base
    out: Path | None  # None: .oracle/cassettes/SHA/
    config: Path | None  # None: oracle/judge.yaml as HEAD commits it
    wheelhouse: Path
    requirements: Path
    shard: Shard


def inputs(j: Judgment) -> Inputs:
    # Replay runs no perturbed run on a build that is the parent's, and none is required; the
    # recording of those this machine can run is made all the same where it is kept, for a
    # code patch on a base of this build to find instead of recording on its critical path.
    same, settings = j.built.same, j.config
    return Inputs(
        command=j.command("parent"),
        base=j.base,
        out=cassette_path(j.repo, j.base, j.shard),
        cases=j.parent / CASES,
        fixtures=j.parent / "fixtures",
        timeout=settings.case_timeout,
        shard=j.shard,
        perturb=() if same and j.built.cache is None else settings.perturb,
        perturb_required=() if same else settings.perturb_required,
        reuse=True,
        kept=j.built.kept,
    )


def from_args(args: argparse.Namespace) -> Inputs | Materialize:
    if args.command is None:
        return Materialize(
            args.repo,
            args.base,
            args.out,
            args.config,
            args.wheelhouse,
            args.requirements,
            args.shard,
        )
    if not args.base or not args.out:
        raise FailClosed("--command needs --base SHA and --out FILE; or omit --command")
    return Inputs(
        command=args.command,
        base=args.base,
        out=args.out,
        cases=args.cases,
        fixtures=args.fixtures,
        timeout=args.timeout,
        shard=args.shard,
        perturb=tuple(args.perturb),
        perturb_required=tuple(args.perturb_required),
        reuse=args.reuse,
        kept=Kept.from_args(args),
    )


def materialize(args: Materialize) -> Outcome:
    repo = repo_root(args.repo)
    config = committed_config(repo, args.config)
    require_sandbox(config.sandbox == "required")
    edited = uncommitted(repo, RECORDED)
    if edited:
        raise FailClosed(
            f"{edited[0]}: uncommitted changes; record reads the cases and fixtures as the base "
            f"commit holds them: commit them first (git commit {' '.join(RECORDED)})"
        )
    base = recorded_base(repo, args.base, config.base_branch)
    out = args.out or cassette_path(repo, base, args.shard)
    with built_cli(repo, base, args.wheelhouse, args.requirements, config.command) as built:
        cases_file = built.tree / "oracle" / "cases.yaml"
        cases = owned_cases(cases_file, config.case_timeout, args.shard)
        ran, _ = runnable(config.perturb, config.perturb_required)
        fixtures = built.tree / "fixtures"
        cassette = record(built.cli, cases, fixtures, base, perturbations=ran, build=built.build)
        return write(cassette, out, cases_file)


def recorded_base(repo: Path, given: str | None, branch: str) -> str:
    """The commit to record from, said in one line before the build: --base, else the judge's
    base (the merge base of HEAD and origin/<branch>, or <branch> without a remote copy)."""
    if given:
        sha = resolve_commit(repo, given, "--base")
        say(f"record: recording from {sha[:12]} (--base {given})")
        return sha
    target = base_ref(repo, branch)
    sha = default_base(repo, resolve_commit(repo, "HEAD", "--head"), branch)
    said = f"record: recording from {sha[:12]}, the merge base of HEAD and {target}"
    ahead = local_ahead(repo, branch, target)
    if ahead:
        said += (
            f"; {branch} is {ahead} commit{'s' if ahead > 1 else ''} ahead of {target}: the "
            f"judge judges against {target} until they are pushed (`--base {branch}` records "
            f"from {branch})"
        )
    say(said)
    return sha


def local_ahead(repo: Path, branch: str, target: str) -> int:
    """How many commits the local `branch` has that `target` (its remote copy) has not."""
    if target == branch or not rev_exists(repo, f"refs/heads/{branch}"):
        return 0
    counted = git(repo, "rev-list", "--count", f"{target}..refs/heads/{branch}", check=False)
    return int(counted.strip() or 0)


def write(cassette: dict[str, Any], out: Path, cases_file: Path, verb: str = "recorded") -> Outcome:
    """Save only a cassette that passes, so `--reuse` never picks up a rejected recording."""
    outcome = summarize(cassette, out, verb, cases_file)
    if outcome.code == PASS and verb != "reused":
        write_json(out, sealed(cassette))
    return outcome


KEPT_VERB = "kept"


def recording_key(given: Inputs, perturb: Sequence[str], cases: Sequence[Case]) -> str:
    """What a recording depends on (_gate/runs/reuse.py): the parent's build, the cases, the
    fixtures they run in; "" when nothing is kept."""
    if given.kept.folder is None or not given.kept.parent_build:
        return ""
    fixtures = tracked(given.fixtures) if given.fixtures.is_dir() else []
    return cache_key(
        "record",
        build=given.kept.parent_build,
        cases={case.id: case.digest for case in cases},
        fixtures=files_digest(given.fixtures, fixtures),
        timeout=given.timeout,
        perturb=list(perturb),
    )


def reusable(
    existing: dict[str, Any] | None,
    base: str,
    cases: Sequence[Case],
    perturbations: list[str],
    build: str,
) -> bool:
    """Same provenance (the parent's build among it) and perturbations, and recorded by a
    recorder that looked for tracebacks."""
    if not existing or existing.get("provenance") != provenance(base, cases, build):
        return False
    if existing.get("perturbations") != perturbations:
        return False
    return all("traceback" in case for case in existing.get("cases", {}).values())


def decide(given: Inputs | Materialize, earlier: Earlier) -> Outcome:
    if isinstance(given, Materialize):
        return materialize(given)
    cases = owned_cases(given.cases, given.timeout, given.shard)
    perturb, _ = runnable(given.perturb, given.perturb_required)
    build, out = given.kept.parent_build, given.out
    existing = load_cassette(out) if given.reuse else None
    if existing and reusable(existing, given.base, cases, perturb, build):
        return write(existing, out, given.cases, verb="reused")
    key = recording_key(given, perturb, cases)
    kept_recording = kept(given.kept.folder, key)
    if kept_recording is not None and isinstance(kept_recording.get("cases"), dict):
        cassette = {**kept_recording, "provenance": provenance(given.base, cases, build)}
        return write(cassette, out, given.cases, verb=KEPT_VERB)
    cassette = record(
        given.command, cases, given.fixtures, given.base, perturbations=perturb, build=build
    )
    outcome = write(cassette, out, given.cases)
    if outcome.code == PASS:
        keep(given.kept.folder, key, cassette)
    return outcome


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--command", type=Path, help="the parent build's CLI (skips materializing)")
    p.add_argument(
        "--base",
        help="commit to record from (default: the judge's base, the merge base of HEAD and "
        "origin/<base_branch>, or of HEAD and <base_branch> where there is no origin copy)",
    )
    p.add_argument("--out", type=Path, help="cassette file (default .oracle/cassettes/SHA/)")
    p.add_argument("--cases", type=Path, default=Path("oracle/cases.yaml"))
    p.add_argument("--fixtures", type=Path, default=Path("fixtures"))
    p.add_argument(
        "--timeout", type=float, default=Config.case_timeout, help="per-case timeout (s)"
    )
    p.add_argument("--reuse", action="store_true", help="keep a cassette whose provenance matches")
    add_cache_args(p)
    p.add_argument("--repo", type=Path, default=Path("."))
    p.add_argument("--config", type=Path, help="default: oracle/judge.yaml as HEAD commits it")
    p.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE, help="local wheelhouse")
    p.add_argument("--requirements", type=Path, default=Path("scripts/requirements-judge.txt"))
    add_shard_arg(p)
    add_perturb_args(p)
    add_report_arg(p, "record")
    return p


STEP: Contract[Inputs | Materialize] = Contract("record", parser, from_args, inputs, decide)
