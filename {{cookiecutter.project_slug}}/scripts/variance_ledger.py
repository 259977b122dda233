"""Variance ledger: run the oracle k times, freeze tests that disagree with themselves.

    python scripts/variance_ledger.py run --runs 5 --out reports/variance-runs.json
    python scripts/variance_ledger.py merge reports/variance-runs*.json --update-ref

`run` executes the oracle (oracle/ of this tree) k times with this interpreter and records each
test's outcome and duration. `merge` pools run files (one per runner, in CI a matrix of
machines), classifies each test (pass/fail constant across runs, duration coefficient of
variation within the bound), writes reports/inventory.variance.json and, with --update-ref,
commits the new ledger to the oracle ref. Ledger rows carry an expiry date: expired rows are
dropped and the test returns to the gate.
Exit codes: 0 done (frozen tests are reported), 2 fail closed (no runs, a bad run or ledger file).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _gate import (
    EXIT_CODES_HELP,
    PASS,
    FailClosed,
    Outcome,
    add_report_arg,
    git,
    load_config,
    resolve_oracle_ref,
    run_main,
    write_report,
)
from run_oracle import run

LEDGER = "variance-ledger.json"
DURATION_FLOOR = 0.05  # seconds of mean duration before the duration spread is judged
IDENTITY = {
    "GIT_AUTHOR_NAME": "oracle variance",
    "GIT_AUTHOR_EMAIL": "oracle-variance@localhost",
    "GIT_COMMITTER_NAME": "oracle variance",
    "GIT_COMMITTER_EMAIL": "oracle-variance@localhost",
}


def load_ledger(path: Path) -> dict[str, dict[str, Any]]:
    try:
        return parse_ledger(path.read_text("utf-8"), str(path))
    except (FileNotFoundError, UnicodeDecodeError):
        raise FailClosed(
            f"{path}: ledger missing or not UTF-8; it lives on the oracle ref"
        ) from None


def parse_ledger(text: str, where: str) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(text or "{}")
    except ValueError as exc:
        raise FailClosed(f"{where}: not valid JSON ({exc}); restore it on the oracle ref") from None
    if not isinstance(data, dict) or not all(
        isinstance(row, dict) and iso_day(row.get("expires")) for row in data.values()
    ):
        raise FailClosed(f"{where}: expected an object of test id -> row with 'expires' YYYY-MM-DD")
    return data


def iso_day(value: object) -> bool:
    """A YYYY-MM-DD string: anything else would only fail later, without naming the file."""
    try:
        dt.date.fromisoformat(str(value))
    except ValueError:
        return False
    return isinstance(value, str)


def frozen_ids(ledger: dict[str, dict[str, Any]], today: dt.date) -> set[str]:
    return {k for k, row in ledger.items() if dt.date.fromisoformat(row["expires"]) >= today}


def run_once(python: Path, oracle: Path, timeout: float) -> dict[str, Any]:
    # The project is installed in this environment, so it serves as runner and subject both.
    result = run(python, python, oracle, timeout)
    if result.outcomes is None:
        return {"complete": False, "exit_code": result.exit_code, "tests": {}}
    tests = {
        node: {"ok": outcome == "passed", "seconds": result.durations.get(node, 0.0)}
        for node, outcome in result.outcomes.items()
    }
    return {"complete": True, "exit_code": result.exit_code, "tests": tests}


def classify(runs: Sequence[dict[str, Any]], cv_max: float) -> dict[str, dict[str, Any]]:
    """Per test: how many runs saw it pass, and how much its duration spread."""
    ids = sorted({node for run in runs for node in run["tests"]})
    out: dict[str, dict[str, Any]] = {}
    for node in ids:
        seen = [run["tests"].get(node) for run in runs]
        oks = [bool(s and s["ok"]) for s in seen]
        secs = [s["seconds"] for s in seen if s]
        mean = statistics.fmean(secs) if secs else 0.0
        # Below the floor a duration is timer noise: its spread says nothing about the test.
        timed = mean >= DURATION_FLOOR and len(secs) > 1
        cv = statistics.pstdev(secs) / mean if timed else 0.0
        boolean_stable = len(set(oks)) == 1
        out[node] = {
            "k": len(runs),
            "pass_count": sum(oks),
            "boolean_stable": boolean_stable,
            "duration_cv": round(cv, 4),
            "duration_stable": cv <= cv_max,
            "freeze": not boolean_stable or cv > cv_max,
        }
    return out


def next_ledger(
    old: dict[str, dict[str, Any]], classes: dict[str, dict[str, Any]], today: dt.date, ttl: int
) -> dict[str, dict[str, Any]]:
    """Drop expired rows, then add or refresh a row for every test frozen by this measurement."""
    ledger = {k: v for k, v in old.items() if dt.date.fromisoformat(v["expires"]) >= today}
    expires = (today + dt.timedelta(days=ttl)).isoformat()
    for node, row in classes.items():
        if row["freeze"]:
            reason = "boolean_unstable" if not row["boolean_stable"] else "duration_unstable"
            ledger[node] = {
                "reason": reason,
                "k": row["k"],
                "pass_count": row["pass_count"],
                "duration_cv": row["duration_cv"],
                "expires": expires,
            }
    return dict(sorted(ledger.items()))


def commit_ledger(repo: Path, ref: str, source: str, ledger: dict[str, Any], today: dt.date) -> str:
    """Commit the ledger on top of `source` as refs/heads/<ref>, with plumbing only.

    The work tree is never touched and every other file of the ref (quarantine.yaml) is kept.
    """
    full = f"refs/heads/{ref}"
    parent = git(repo, "rev-parse", "--verify", "--quiet", source, check=False).strip()
    current = git(repo, "rev-parse", "--verify", "--quiet", full, check=False).strip()
    text = json.dumps(ledger, indent=2, sort_keys=True) + "\n"
    blob = git(repo, "hash-object", "-w", "--stdin", stdin=text.encode()).strip()
    entries = git(repo, "ls-tree", "-z", parent).split("\0") if parent else []
    rows = [e for e in entries if e and not e.endswith(f"\t{LEDGER}")]
    rows.append(f"100644 blob {blob}\t{LEDGER}")
    tree = git(repo, "mktree", "-z", stdin="\0".join(rows).encode() + b"\0").strip()
    parents = ["-p", parent] if parent else []
    identity = {k: os.environ.get(k, v) for k, v in IDENTITY.items()}
    message = f"variance ledger {today}"
    commit = git(repo, "commit-tree", tree, *parents, "-m", message, env=identity).strip()
    git(repo, "update-ref", full, commit, *([current] if current else []))
    return commit


def do_run(args: argparse.Namespace) -> Outcome:
    k = args.runs or load_config(args.config).variance_runs
    runs = [run_once(args.python, args.oracle, args.timeout) for _ in range(k)]
    write_report(args.out, {"runs": runs})
    complete = sum(1 for r in runs if r["complete"])
    return Outcome(PASS, f"{len(runs)} oracle runs ({complete} complete) written to {args.out}")


def do_merge(args: argparse.Namespace) -> Outcome:
    config = load_config(args.config)
    runs: list[dict[str, Any]] = []
    for path in args.files:
        try:
            runs += json.loads(path.read_bytes())["runs"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FailClosed(f"{path}: not a variance run file ({exc}); rerun `run`") from None
    if not runs:
        raise FailClosed("no runs to merge; pass the files written by `run`")
    broken = [i for i, run in enumerate(runs, 1) if not run["complete"]]
    if broken:
        raise FailClosed(
            f"run {broken[0]} of {len(runs)} left no result report (pytest exit "
            f"{runs[broken[0] - 1]['exit_code']}); fix the oracle before measuring its variance"
        )
    classes = classify(runs, config.duration_cv_max)
    ref = resolve_oracle_ref(args.repo, config.oracle_ref)
    old = parse_ledger(git(args.repo, "show", f"{ref}:{LEDGER}", check=False), f"{ref}:{LEDGER}")
    ledger = next_ledger(old, classes, args.today, config.ledger_ttl_days)
    frozen = sorted(k for k, row in classes.items() if row["freeze"])
    report = {"k": len(runs), "tests": classes, "ledger": ledger}
    write_report(args.variance_report, report)
    commit = (
        commit_ledger(args.repo, config.oracle_ref, ref, ledger, args.today)
        if args.update_ref
        else ""
    )
    where = f"; ledger committed to {config.oracle_ref} at {commit[:12]}" if commit else ""
    summary = f"{len(runs)} runs, {len(classes)} tests, {len(frozen)} frozen{where}"
    return Outcome(PASS, summary, {"frozen": frozen, "commit": commit})


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    add_report_arg(p, "variance")
    sub = p.add_subparsers(dest="mode", required=True)
    run = sub.add_parser("run", help="run the oracle k times")
    run.add_argument("--runs", type=int, help="k (default: variance_runs in judge.yaml)")
    run.add_argument("--config", type=Path, default=Path("oracle/judge.yaml"))
    run.add_argument("--python", type=Path, default=Path(sys.executable))
    run.add_argument("--oracle", type=Path, default=Path("oracle"))
    run.add_argument("--timeout", type=float, default=900.0)
    run.add_argument("--out", type=Path, default=Path("reports/variance-runs.json"))
    merge = sub.add_parser("merge", help="classify pooled runs and update the ledger")
    merge.add_argument("files", nargs="+", type=Path)
    merge.add_argument("--repo", type=Path, default=Path("."))
    merge.add_argument("--config", type=Path, default=Path("oracle/judge.yaml"))
    merge.add_argument("--today", type=dt.date.fromisoformat, default=dt.date.today())
    merge.add_argument("--update-ref", action="store_true", help="commit the ledger to the ref")
    merge.add_argument(
        "--variance-report", type=Path, default=Path("reports/inventory.variance.json")
    )
    return p


def execute(args: argparse.Namespace) -> Outcome:
    return do_run(args) if args.mode == "run" else do_merge(args)


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("variance", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
