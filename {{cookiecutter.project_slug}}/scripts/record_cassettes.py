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
With `--shard I/N` only the cases of that shard are recorded (scripts/_gate/shard.py). With
`--cache` and `--parent-build` a recording is kept between judgments under a digest of its
inputs (the build, the cases, the fixtures), and one kept is reused (scripts/_gate/reuse.py).
Exit codes: 0 recorded (unstable fields, timeouts and signals are reported, not fatal),
2 fail closed (bad cases.yaml, no merge base, the base does not build, an unexpected traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from _gate.cases import Case, built_cli, load_cases
from _gate.cassettes import case_args, cassette_path, load_cassette, provenance, record
from _gate.config import Config, committed_config
from _gate.context import Judgment
from _gate.entry import run_main
from _gate.envs import WHEELHOUSE
from _gate.git import (
    base_ref,
    default_base,
    git,
    repo_root,
    resolve_commit,
    rev_exists,
    tracked,
    uncommitted,
)
from _gate.perturb import add_perturb_args, runnable
from _gate.protocol import (
    EXIT_CODES_HELP,
    FAIL_CLOSED,
    PASS,
    FailClosed,
    Outcome,
    Report,
    add_report_arg,
    say,
)
from _gate.reports import write_json
from _gate.reuse import REUSED, add_cache_args, cache_key, files_digest, keep, kept
from _gate.sandbox import require_sandbox
from _gate.shard import Shard, add_shard_arg


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


RECORDED = ("oracle/cases.yaml", "fixtures")  # what a recording reads from the base commit


def materialize(args: argparse.Namespace) -> Outcome:
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
        cassette = record(built.cli, cases, built.tree / "fixtures", base, ran, built.build)
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
        write_json(out, cassette)
    return outcome


KEPT_VERB = "kept"


def recording_key(args: argparse.Namespace, cases: Sequence[Case]) -> str:
    """What a recording depends on (_gate/reuse.py): the parent's build, the cases, the
    fixtures they run in; "" when nothing is kept."""
    if args.cache is None or not args.parent_build:
        return ""
    fixtures = tracked(args.fixtures) if args.fixtures.is_dir() else []
    return cache_key(
        "record",
        build=args.parent_build,
        cases={case.id: case.digest for case in cases},
        fixtures=files_digest(args.fixtures, fixtures),
        timeout=args.timeout,
        perturb=args.perturb,
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


def execute(args: argparse.Namespace) -> Outcome:
    if args.command is None:
        return materialize(args)
    if not args.base or not args.out:
        raise FailClosed("--command needs --base SHA and --out FILE; or omit --command")
    cases = owned_cases(args.cases, args.timeout, args.shard)
    args.perturb, _ = runnable(args.perturb, args.perturb_required)
    existing = load_cassette(args.out) if args.reuse else None
    if existing and reusable(existing, args.base, cases, args.perturb, args.parent_build):
        return write(existing, args.out, args.cases, verb="reused")
    key = recording_key(args, cases)
    kept_recording = kept(args.cache, key)
    if kept_recording is not None and isinstance(kept_recording.get("cases"), dict):
        cassette = {**kept_recording, "provenance": provenance(args.base, cases, args.parent_build)}
        return write(cassette, args.out, args.cases, verb=KEPT_VERB)
    cassette = record(
        args.command, cases, args.fixtures, args.base, args.perturb, args.parent_build
    )
    outcome = write(cassette, args.out, args.cases)
    if outcome.code == PASS:
        keep(args.cache, key, cassette)
    return outcome


def run(j: Judgment, earlier: Mapping[str, Report]) -> Outcome:
    out = cassette_path(j.repo, j.base, j.shard)
    argv = ["--command", str(j.command("parent")), "--repo", str(j.repo), "--base", j.base]
    argv += ["--reuse", "--out", str(out), *case_args(j)]
    argv += j.built.cache_args()
    # Replay runs no perturbed run on a build that is the parent's, and none is required; the
    # recording of those this machine can run is made all the same where it is kept, for a
    # code patch on a base of this build to find instead of recording on its critical path.
    if j.built.same:
        argv += ["--perturb-required", ""] + (["--perturb", ""] if j.built.cache is None else [])
    return execute(parser().parse_args(argv))


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


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("record", parser(), execute, argv, run)


if __name__ == "__main__":
    sys.exit(main())
