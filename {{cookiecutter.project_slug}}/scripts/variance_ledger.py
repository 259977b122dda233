"""Variance ledger: run the oracle k times on machines the author did not provision, and
freeze the tests that disagree with themselves.

    python scripts/variance_ledger.py run [--runs K] --out reports/variance-run-NAME.json
    python scripts/variance_ledger.py merge reports/variance-run-*.json --update-ref

`run` executes the oracle (oracle/ of this tree) k times with this interpreter and records each
test's outcome and duration and the machine the runs ran on (scripts/_gate/core/machine.py: the CI
runner, or the host outside CI). `merge` pools run files, one or more per machine. A test is
unstable when its outcome changes between the runs of one machine or between machines that ran
it (a skip on one image is the image's), or when the coefficient of variation of its duration
on one machine exceeds `duration_cv_max`. A measurement counts only with at
least `variance_runs` runs from at least `variance_machines` distinct machines (both in
oracle/judge.yaml); one that does not is reported and changes nothing. One that counts
freezes each unstable test for `ledger_ttl_days` and clears each frozen test it finds stable;
a row past its expiry drops. The ledger (`variance-ledger.json` on the oracle ref: the live
`frozen` rows and the `history` of why each came and went) is committed with --update-ref,
which needs a measurement that counts and, when no run was on CI, --allow-local (the commit
message then says so).
Exit codes: 0 done (the report lists what froze, cleared and expired), 2 fail closed (no runs,
a bad run or ledger file, or --update-ref with a measurement that does not count or is local).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _gate.core.config import Config, load_config
from _gate.core.ledger import LEDGER, Ledger, live, parse_ledger
from _gate.core.machine import identity
from _gate.core.protocol import EXIT_CODES_HELP, PASS, FailClosed, Outcome, add_report_arg
from _gate.core.reports import write_report
from _gate.core.seal import TrustedEnv
from _gate.runs.entry import run_main
from _gate.runs.git import commit_file, git, resolve_oracle_ref
from _gate.runs.oracle_run import run
from _gate.runs.pytest_run import Subject
from _gate.runs.sandbox import require_sandbox

DURATION_FLOOR = 0.05  # seconds of mean duration before the duration spread is judged
EVENTS = ("frozen", "extended", "cleared", "expired")  # what a measurement does to a row


def run_once(env: TrustedEnv, oracle: Path, timeout: float) -> dict[str, Any]:
    # The project is installed in this environment, so it serves as runner and subject both;
    # each run finds it as the first found it (seal.TrustedEnv), or the measurement stops.
    result = run(env, Subject(env.python), oracle, timeout)
    if result.outcomes is None:
        return {"complete": False, "exit_code": result.exit_code, "tests": {}}
    tests = {
        node: {"outcome": outcome, "seconds": result.durations.get(node, 0.0)}
        for node, outcome in result.outcomes.items()
    }
    return {"complete": True, "exit_code": result.exit_code, "tests": tests}


def read_runs(files: Sequence[Path]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Every run of `files`, each tagged with its machine's id, and the machines by id. A file
    passed twice (or a copy of one) counts once: runs are counted towards `variance_runs`."""
    runs: list[dict[str, Any]] = []
    machines: dict[str, dict[str, Any]] = {}
    seen: set[bytes] = set()
    for path in files:
        try:
            raw = path.read_bytes()
            data = json.loads(raw)
            machine, found = data["machine"], data["runs"]
            key = str(machine["id"])
            assert isinstance(machine["ci"], bool)
            assert all(map(well_formed, found))
        except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
            raise FailClosed(
                f"{path}: not a variance run file naming its machine ({exc or 'wrong types'}); "
                "rerun `run` with this version of the script"
            ) from None
        if raw not in seen:
            seen.add(raw)
            machines[key] = machine
            runs += [{**one, "machine": key} for one in found]
    return runs, machines


def well_formed(run: dict[str, Any]) -> bool:
    tests = run["tests"]
    return isinstance(run["complete"], bool) and all(
        isinstance(row["outcome"], str) and isinstance(row["seconds"], (int, float))
        for row in tests.values()
    )


def spread(seconds: Sequence[float]) -> float:
    """The coefficient of variation; 0 below the floor, where a duration is timer noise."""
    mean = statistics.fmean(seconds) if seconds else 0.0
    if mean < DURATION_FLOOR or len(seconds) < 2:
        return 0.0
    return statistics.pstdev(seconds) / mean


def agrees(outcomes: dict[str, list[str]]) -> bool:
    """Each machine saw one outcome in every run, and the machines that ran the test agree: a
    test one image skips (or never collects) and another passes is the image's, not a flake."""
    if any(len(set(seen)) > 1 for seen in outcomes.values()):
        return False
    return len({seen[0] for seen in outcomes.values()} - {"skipped", "missing"}) <= 1


def classify(runs: Sequence[dict[str, Any]], cv_max: float) -> dict[str, dict[str, Any]]:
    """Per test: how many runs saw it pass, on how many machines, how much its duration spread."""
    ids = sorted({node for run in runs for node in run["tests"]})
    out: dict[str, dict[str, Any]] = {}
    for node in ids:
        outcomes: dict[str, list[str]] = {}
        durations: dict[str, list[float]] = {}
        for one in runs:
            test = one["tests"].get(node)
            outcomes.setdefault(one["machine"], []).append(test["outcome"] if test else "missing")
            if test:
                durations.setdefault(one["machine"], []).append(test["seconds"])
        # Durations compare within a machine: two runner images differ in speed, not the test.
        cv = max(map(spread, durations.values()), default=0.0)
        boolean_stable = agrees(outcomes)
        out[node] = {
            "k": len(runs),
            "pass_count": sum(seen.count("passed") for seen in outcomes.values()),
            "machines": len(durations),
            "boolean_stable": boolean_stable,
            "duration_cv": round(cv, 4),
            "duration_stable": cv <= cv_max,
            "stable": boolean_stable and cv <= cv_max,
        }
    return out


def measured(
    runs: Sequence[dict[str, Any]], machines: dict[str, dict[str, Any]], config: Config
) -> dict[str, Any]:
    """What the pooled runs are: how many, on which machines, and whether they count."""
    lacking = []
    if len(runs) < config.variance_runs:
        lacking.append(f"{len(runs)} runs, variance_runs needs {config.variance_runs}")
    if len(machines) < config.variance_machines:
        lacking.append(
            f"{len(machines)} machine(s), variance_machines needs {config.variance_machines}"
        )
    return {
        "runs": len(runs),
        "machines": [machines[key] for key in sorted(machines)],
        "local_only": not any(machine["ci"] for machine in machines.values()),
        "counts": not lacking,
        "lacking": "; ".join(lacking),
    }


def described(row: dict[str, Any]) -> str:
    return (
        f"passed {row['pass_count']} of {row['k']} runs on {row['machines']} machine(s), "
        f"duration CV {row['duration_cv']}"
    )


def next_ledger(
    old: Ledger,
    classes: dict[str, dict[str, Any]],
    measurement: dict[str, Any],
    today: dt.date,
    ttl: int,
) -> tuple[Ledger, list[dict[str, Any]]]:
    """Drop expired rows; then, if the measurement counts, freeze (or extend) every unstable
    test and clear every frozen test it found stable. Each change is an event of the history."""
    day = today.isoformat()
    events: list[dict[str, Any]] = []
    frozen: dict[str, dict[str, Any]] = {}
    for node, row in old.frozen.items():
        if live(row, today):
            frozen[node] = row
        else:
            why = f"expired on {row['expires']} before a measurement found it stable"
            events.append({"date": day, "id": node, "event": "expired", "why": why})
    expires = (today + dt.timedelta(days=ttl)).isoformat()
    for node, row in classes.items() if measurement["counts"] else ():
        if row["stable"]:
            if frozen.pop(node, None) is not None:
                why = f"stable: {described(row)}"
                events.append({"date": day, "id": node, "event": "cleared", "why": why})
            continue
        reason = "duration_unstable" if row["boolean_stable"] else "boolean_unstable"
        since = frozen.get(node, {}).get("since", day)
        event = "extended" if node in frozen else "frozen"
        keep = ("k", "pass_count", "machines", "duration_cv")
        frozen[node] = {"reason": reason, **{key: row[key] for key in keep}}
        frozen[node].update(since=since, measured=day, expires=expires)
        why = f"{reason}: {described(row)}"
        events.append({"date": day, "id": node, "event": event, "why": why})
    return Ledger(frozen, [*old.history, *events]), events


def commit_message(
    measurement: dict[str, Any], events: list[dict[str, Any]], today: dt.date
) -> str:
    counts = Counter(event["event"] for event in events)
    changes = ", ".join(f"{counts[kind]} {kind}" for kind in EVENTS if counts[kind]) or "no change"
    lines = [
        f"variance ledger {today}: {measurement['runs']} runs on "
        f"{len(measurement['machines'])} machines, {changes}"
    ]
    if measurement["local_only"]:
        lines += ["", "Built from local runs only (--allow-local): no CI runner measured it."]
    return "\n".join(lines)


def do_run(args: argparse.Namespace) -> Outcome:
    k = args.runs or load_config(args.config).variance_runs
    machine = identity()
    env = TrustedEnv(args.python)
    runs = [run_once(env, args.oracle, args.timeout) for _ in range(k)]
    write_report(args.out, {"machine": machine, "runs": runs})
    complete = sum(1 for r in runs if r["complete"])
    where = "local host" if not machine["ci"] else f"{machine['provider']} runner"
    return Outcome(
        PASS,
        f"{len(runs)} oracle runs ({complete} complete) on machine {machine['id']} ({where}) "
        f"written to {args.out}",
    )


def do_merge(args: argparse.Namespace) -> Outcome:
    config = load_config(args.config)
    require_sandbox(config.sandbox == "required")
    runs, machines = read_runs(args.files)
    if not runs:
        raise FailClosed("no runs to merge; pass the files written by `run`")
    broken = [i for i, run in enumerate(runs, 1) if not run["complete"]]
    if broken:
        raise FailClosed(
            f"run {broken[0]} of {len(runs)} left no result report (pytest exit "
            f"{runs[broken[0] - 1]['exit_code']}); fix the oracle before measuring its variance"
        )
    classes = classify(runs, config.duration_cv_max)
    measurement = measured(runs, machines, config)
    ref = resolve_oracle_ref(args.repo, config.oracle_ref)
    old = parse_ledger(git(args.repo, "show", f"{ref}:{LEDGER}", check=False), f"{ref}:{LEDGER}")
    ledger, events = next_ledger(old, classes, measurement, args.today, config.ledger_ttl_days)
    unstable = sorted(node for node, row in classes.items() if not row["stable"])
    report = {"measurement": measurement, "tests": classes, "events": events}
    write_report(args.variance_report, {**report, "ledger": ledger.frozen})
    found = f"{len(runs)} runs on {len(machines)} machine(s), {len(classes)} tests, "
    found += f"{len(unstable)} unstable"
    evidence = {"unstable": unstable, "events": events, "counts": measurement["counts"]}
    if not measurement["counts"]:
        summary = f"{found}; the measurement does not count ({measurement['lacking']})"
        if args.update_ref:
            raise FailClosed(
                f"{summary}: the ledger is unchanged; run `variance` on the CI matrix "
                "(docs/flake-control.md) and merge the runs of every machine"
            )
        return Outcome(PASS, f"{summary}: nothing frozen or cleared", evidence)
    if args.update_ref and measurement["local_only"] and not args.allow_local:
        raise FailClosed(
            f"{found}: every run is local; the oracle ref takes ledgers measured on CI "
            "runners. Merge CI runs, or pass --allow-local to commit it (its message says so)"
        )
    changes = ", ".join(f"{e['event']} {e['id']}" for e in events) or "no change"
    if not args.update_ref:
        return Outcome(PASS, f"{found}; would commit: {changes}", evidence)
    message = commit_message(measurement, events, args.today)
    text = ledger.text()
    commit = commit_file(args.repo, config.oracle_ref, ref, LEDGER, text=text, message=message)
    summary = f"{found}; {changes}; ledger committed to {config.oracle_ref} at {commit[:12]}"
    return Outcome(PASS, summary, {**evidence, "commit": commit})


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
        "--allow-local",
        action="store_true",
        help="with --update-ref: commit a ledger no CI runner measured (the message says so)",
    )
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
