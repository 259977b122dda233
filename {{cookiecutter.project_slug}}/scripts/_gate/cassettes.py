"""Cassettes: the parent build's answers to every case, recorded twice, and where they are kept."""

from __future__ import annotations

import json
import platform
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from _gate import perturb
from _gate.cases import Case, Job, Run, describe, observe, run_jobs, run_until
from _gate.sandbox import hides
from _gate.shard import WHOLE, Shard

RUNS = 2


TRACEBACK = "Traceback (most recent call last):"


def provenance(base: str, cases: Sequence[Case], build: str = "") -> dict[str, Any]:
    """What a recording was made of: the base, its cases, the interpreter and machine
    (whether its perturbed runs are watched there: their network.reached and terminal.typed),
    and the digest of the parent's build (seal.build_digest, of an environment held to its
    manifest), where the recorder knew it."""
    return {
        "base": base,
        "build": build,
        "watched": hides(),
        "cases": {case.id: case.digest for case in cases},
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def cassette_path(repo: Path, base: str, shard: Shard = WHOLE) -> Path:
    """Where a base's recording is kept: one file per shard, so shards never share one."""
    name = "cassettes" if shard.whole else f"cassettes-shard-{shard.index}-of-{shard.count}"
    return repo / ".oracle" / "cassettes" / base / f"{name}.json"


def load_cassette(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def traceback_line(run: Run) -> str | None:
    """The exception line of the last Python traceback on stderr (None without one): the first
    unindented line after the header, since frames and source lines are indented."""
    _, header, after = run.stderr.head.decode("utf-8", "backslashreplace").rpartition(TRACEBACK)
    if not header:
        return None
    lines = [line.rstrip() for line in after.splitlines() if line.strip()]
    return next((line for line in lines if not line[0].isspace()), (lines or [TRACEBACK])[-1])


def record(
    command: Path,
    cases: Sequence[Case],
    fixtures: Path,
    base: str,
    *,
    perturbations: Sequence[str] = (),
    build: str = "",
) -> dict[str, Any]:
    """Run every case twice on the parent build, and twice in each perturbed run it gets
    (perturb.planned): the fields two runs there agree on are what replay holds the patch to
    in that run; the others are unstable there and left out."""
    clock = perturb.shifted_clock(date.today()) if "clock" in perturbations else ""
    under = [
        (case, how)
        for case in cases
        for how in perturb.planned(case.perturbations(perturbations), clock)
    ]
    jobs: list[Job] = [(command, case, None) for case in cases for _ in range(RUNS)]
    jobs += [(command, case, how) for case, how in under for _ in range(RUNS)]
    done = run_jobs(jobs, fixtures, "record")
    perturbed = perturbed_fields(under, done[len(cases) * RUNS :])
    recorded: dict[str, Any] = {}
    for index, case in enumerate(cases):
        runs = done[index * RUNS : (index + 1) * RUNS]
        stable, unstable = split([observe(case, run) for run in runs])
        first = runs[0]
        recorded[case.id] = {
            "digest": case.digest,
            "fields": stable,
            "unstable": unstable,
            "run": describe(first),
            "crashed": any(run.timed_out or run.exit_code < 0 for run in runs),
            "traceback": next(filter(None, map(traceback_line, runs)), None),
            "expect_crash": case.expect_crash,
            "perturbed": perturbed.get(case.id, {}),
        }
    cassette = {"provenance": provenance(base, cases, build), "cases": recorded}
    return {**cassette, "perturbations": list(perturbations), "clock": clock}


def split(seen: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The fields every run saw alike (stable), and the others with each run's value."""
    stable = {k: v for k, v in seen[0].items() if all(s.get(k) == v for s in seen[1:])}
    return stable, {k: [s.get(k) for s in seen] for k in seen[0] if k not in stable}


def perturbed_fields(
    under: Sequence[tuple[Case, perturb.Perturbation]], runs: Sequence[Run]
) -> dict[str, dict[str, Any]]:
    """Per case and perturbed run, its stable fields and its unstable ones."""
    found: dict[str, dict[str, Any]] = {}
    for index, (case, how) in enumerate(under):
        pair = runs[index * RUNS : (index + 1) * RUNS]
        stable, unstable = split([observe(case, run) for run in pair])
        found.setdefault(case.id, {})[str(how)] = {"fields": stable, "unstable": unstable}
    return found


def parent_now(
    command: Path, cases: Sequence[Case], fixtures: Path, stop: Callable[[], bool]
) -> dict[str, Any]:
    """The drift check's runs of the parent build, as many as finish before `stop()`: the
    judge takes them while the patch's environment is being built, where a core idles, since
    they need the parent's build alone; replay (`--parent-now`) runs the rest."""
    runs = run_until(command, cases, fixtures, stop, workers=1)  # the build has the other core
    held = {
        case.id: {"digest": case.digest, "fields": observe(case, runs[case.id])}
        for case in cases
        if case.id in runs
    }
    return {"command": str(command), "cases": held}


def taken_fields(doc: Any, command: Path, cases: Sequence[Case]) -> dict[str, Any]:
    """The parent-now fields `parent_now`'s document holds, by case id: only those taken by
    `command` of a case as it is now."""
    ours = isinstance(doc, dict) and doc.get("command") == str(command)
    held = doc.get("cases") if ours else {}
    if not isinstance(held, dict):
        return {}
    taken = {}
    for case in cases:
        value = held.get(case.id)
        if not isinstance(value, dict) or value.get("digest") != case.digest:
            continue
        if isinstance(value.get("fields"), dict):
            taken[case.id] = value["fields"]
    return taken
