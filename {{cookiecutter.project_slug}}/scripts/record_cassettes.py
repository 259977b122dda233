"""Record the parent's public surface: run every case of oracle/cases.yaml on the merge-base build.

    python scripts/record_cassettes.py                      # materialize the merge base and record
    python scripts/record_cassettes.py --command ENV/bin/CLI --base SHA --cases ... --fixtures ...

Each case runs twice. A compared field that differs between the two parent runs is unstable: it
is not saved as an oracle, it is listed in the report with both values. A cassette carries its
provenance (base commit, case digest, interpreter, platform); `--reuse` keeps an existing file
only when that provenance still matches.
Exit codes: 0 recorded (unstable fields and crashing cases are reported, not fatal),
2 fail closed (bad cases.yaml, no merge base, the base does not build).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _cases import Case, describe, load_cases, observe, run_many
from _gate import (
    EXIT_CODES_HELP,
    PASS,
    WHEELHOUSE,
    FailClosed,
    Outcome,
    add_report_arg,
    add_worktree,
    bin_dir,
    build_env,
    default_base,
    load_config,
    remove_worktree,
    repo_root,
    resolve_commit,
    run_main,
    write_json,
)

RUNS = 2


def provenance(base: str, cases: Sequence[Case]) -> dict[str, Any]:
    return {
        "base": base,
        "cases": {case.id: case.digest for case in cases},
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def cassette_path(repo: Path, base: str) -> Path:
    return repo / ".oracle" / "cassettes" / base / "cassettes.json"


def load_cassette(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def record(command: Path, cases: Sequence[Case], fixtures: Path, base: str) -> dict[str, Any]:
    recorded: dict[str, Any] = {}
    done = run_many([(command, case) for case in cases for _ in range(RUNS)], fixtures)
    for index, case in enumerate(cases):
        runs = done[index * RUNS : (index + 1) * RUNS]
        seen = [observe(case, run) for run in runs]
        stable = {k: v for k, v in seen[0].items() if all(s[k] == v for s in seen[1:])}
        unstable = {k: [s[k] for s in seen] for k in seen[0] if k not in stable}
        first = runs[0]
        recorded[case.id] = {
            "digest": case.digest,
            "fields": stable,
            "unstable": unstable,
            "run": describe(first),
            "crashed": any(run.timed_out or run.exit_code < 0 for run in runs),
        }
    return {"provenance": provenance(base, cases), "cases": recorded}


def summarize(cassette: dict[str, Any], out: Path, reused: bool) -> Outcome:
    cases = cassette["cases"]
    unstable = [
        {"id": cid, "field": spec, "values": values}
        for cid, case in cases.items()
        for spec, values in case["unstable"].items()
    ]
    crashed = sorted(cid for cid, c in cases.items() if c["crashed"])
    verb = "reused" if reused else "recorded"
    where = os.path.relpath(out)
    summary = f"{verb} {len(cases)} cases from {cassette['provenance']['base'][:12]} into {where}"
    if unstable or crashed:
        summary += f"; {len(unstable)} unstable fields, {len(crashed)} crashed or timed out"
    proposal = "drop it from compare or add a noise rule"
    evidence = {
        "cassette": str(out),
        "unstable": unstable,
        "proposals": [{"id": u["id"], "field": u["field"], "proposal": proposal} for u in unstable],
        "crashed": crashed,
    }
    return Outcome(PASS, summary, evidence)


def materialize(args: argparse.Namespace) -> Outcome:
    repo = repo_root(args.repo)
    config = load_config(repo / args.config)
    base = (
        resolve_commit(repo, args.base, "--base")
        if args.base
        else default_base(repo, resolve_commit(repo, "HEAD", "--head"), config.base_branch)
    )
    out = args.out or cassette_path(repo, base)
    with tempfile.TemporaryDirectory(prefix="oracle-record-") as tmp:
        tree = add_worktree(repo, base, Path(tmp) / "parent")
        try:
            python = build_env(tree, Path(tmp) / "env", args.wheelhouse, tree / args.requirements)
            command = bin_dir(python.parent.parent) / config.command
            cases = load_cases(tree / "oracle" / "cases.yaml", config.case_timeout)
            return write(record(command, cases, tree / "fixtures", base), out)
        finally:
            remove_worktree(repo, tree)


def write(cassette: dict[str, Any], out: Path, reused: bool = False) -> Outcome:
    if not reused:
        write_json(out, cassette)
    return summarize(cassette, out, reused)


def execute(args: argparse.Namespace) -> Outcome:
    if args.command is None:
        return materialize(args)
    if not args.base or not args.out:
        raise FailClosed("--command needs --base SHA and --out FILE; or omit --command")
    cases = load_cases(args.cases, args.timeout)
    existing = load_cassette(args.out) if args.reuse else None
    if existing and existing.get("provenance") == provenance(args.base, cases):
        return write(existing, args.out, reused=True)
    return write(record(args.command, cases, args.fixtures, args.base), args.out)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--command", type=Path, help="the parent build's CLI (skips materializing)")
    p.add_argument("--base", help="base commit (default: merge base of HEAD and base_branch)")
    p.add_argument("--out", type=Path, help="cassette file (default .oracle/cassettes/SHA/)")
    p.add_argument("--cases", type=Path, default=Path("oracle/cases.yaml"))
    p.add_argument("--fixtures", type=Path, default=Path("fixtures"))
    p.add_argument("--timeout", type=float, default=10.0, help="default per-case timeout (s)")
    p.add_argument("--reuse", action="store_true", help="keep a cassette whose provenance matches")
    p.add_argument("--repo", type=Path, default=Path("."))
    p.add_argument("--config", type=Path, default=Path("oracle/judge.yaml"))
    p.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE, help="local wheelhouse")
    p.add_argument("--requirements", type=Path, default=Path("scripts/requirements-judge.txt"))
    add_report_arg(p, "record")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("record", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
