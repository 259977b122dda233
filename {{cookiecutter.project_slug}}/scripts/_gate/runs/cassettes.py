"""Cassettes: the parent build's answers to every case, recorded twice, where they are kept, and
their replay: each case's fields on the parent build now and the patch build (also perturbed),
compared with the recording field by field."""

from __future__ import annotations

import difflib
import hashlib
import json
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from _gate.core.context import ChangedFile, ChangedFunctions
from _gate.core.protocol import FailClosed, say
from _gate.plugin.shard import WHOLE, Shard
from _gate.runs import perturb
from _gate.runs.case_runs import Job, Run, describe, observe, run_jobs, run_until
from _gate.runs.cases import Case, added_lines, holds
from _gate.runs.perturb import Perturbation, planned
from _gate.runs.provenance import package_modules, project_info
from _gate.runs.reach import case_reaches
from _gate.runs.sandbox import hides
from _gate.runs.traced import Coverage, Trace, covered

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
    """A recording as `sealed` wrote it; None where there is none, or, named, where its bytes
    changed since (the caller records again)."""
    try:
        data = json.loads(path.read_bytes())
    except OSError:
        return None
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get(DIGEST) == content_digest(data):
        return data
    say(f"kept: {path} changed since it was written: not used, recorded again", error=True)
    return None


DIGEST = "digest"  # a recording's: the SHA-256 of the rest of it (content_digest)


def content_digest(cassette: dict[str, Any]) -> str:
    rest = {key: value for key, value in cassette.items() if key != DIGEST}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def sealed(cassette: dict[str, Any]) -> dict[str, Any]:
    """The recording with the digest a later reuse checks (load_cassette)."""
    return {**cassette, DIGEST: content_digest(cassette)}


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
    modules = parent_modules(command)
    jobs = [Job(command, case) for case in cases for _ in range(RUNS)]
    # The first of each perturbed pair records what the case calls there (safe selection).
    jobs += [
        Job(command, case, how, None, None if n else modules)
        for case, how in under
        for n in range(RUNS)
    ]
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
        seen = {"fields": stable, "unstable": unstable, "called": pair[0].called}
        found.setdefault(case.id, {})[str(how)] = seen
    return found


def parent_modules(command: Path) -> dict[str, str] | None:
    """The package modules of the build whose console script `command` is (None where it is
    no environment the gate built: every case then runs perturbed on the patch)."""
    try:
        return package_modules(project_info(command.parent.parent))
    except (FailClosed, OSError):
        return None


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


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, sort_keys=True)


def unified(parent: Any, patch: Any) -> str:
    lines = difflib.unified_diff(
        as_text(parent).splitlines(), as_text(patch).splitlines(), "parent", "patch", lineterm=""
    )
    return "\n".join(list(lines)[:200])


@dataclass
class Found:
    """What replay found over every compared field of every case."""

    drift: list[dict[str, Any]] = field(default_factory=list)
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    unstable: list[dict[str, Any]] = field(default_factory=list)
    grown: list[dict[str, Any]] = field(default_factory=list)  # additive fields the patch added to
    # Fields left out under one perturbation: two parent runs there disagreed (record).
    perturbed_unstable: list[dict[str, Any]] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)  # which case ran each changed line
    # Perturbed runs left out: on the parent's build there the case called no changed
    # function and started no process (reach.py), `id [perturbation]`.
    unselected: list[str] = field(default_factory=list)


def compare(
    cases: Sequence[Case], cassette: dict[str, Any], parent_now: list[Any], patch: list[Any]
) -> Found:
    found = Found()
    for case, parent_fields, patch_fields in zip(cases, parent_now, patch, strict=True):
        recorded = cassette["cases"][case.id]
        for spec in case.compare:
            if spec in recorded["unstable"]:
                found.unstable.append(
                    {"id": case.id, "field": spec, "values": recorded["unstable"][spec]}
                )
                continue
            was, now, new = recorded["fields"][spec], parent_fields[spec], patch_fields[spec]
            if not holds(spec, was, now):
                found.drift.append({"id": case.id, "field": spec, "recorded": was, "parent": now})
            elif not holds(spec, now, new):
                row = {"id": case.id, "field": spec, "parent": now, "patch": new}
                found.mismatches.append({**row, "diff": unified(now, new)})
            elif now != new:  # holds, and differs: an additive field grew
                added = added_lines(now, new)
                found.grown.append({"id": case.id, "field": spec, "added": added})
    return found


def replay(
    cases: Sequence[Case],
    cassette: dict[str, Any],
    commands: Sequence[Path],
    fixtures: Path,
    *,
    perturbations: Sequence[str] = (),
    taken: Mapping[str, Any] | None = None,
    changed: Sequence[ChangedFile] = (),
    functions: ChangedFunctions | None = None,
) -> Found:
    """Run parent-now and patch side by side, interleaved so both finish together, and the
    patch in each perturbed run the recording made of its case (perturb.planned), in the same
    lanes. With one command (the same build: _gate/runs/reuse.py), parent-now is the patch's run
    too, and the caller asks for no perturbation: none could tell them apart. `taken`: the
    parent-now fields already observed, by case id (_gate/runs/cassettes.parent_now); those cases
    run on the patch only. `changed`: the package lines the patch changed, which its runs
    trace (Found.coverage). `functions`: the base functions it changed; a perturbed run whose
    recording says the case called none of them there is left out (None: none is)."""
    taken = taken or {}
    jobs: list[Job] = []

    def trace(case: Case, how: Perturbation | None = None) -> Trace | None:
        label = f"case {case.id}" + (f" [{how}]" if how else "")
        return Trace(tuple(changed), label) if changed and len(commands) > 1 else None

    for case in cases:
        jobs += [] if case.id in taken else [Job(commands[0], case)]
        jobs += [Job(commands[1], case, None, trace(case))] if len(commands) > 1 else []
    clock = str(cassette.get("clock") or "")
    planned_runs = [
        (case, how) for case in cases for how in planned(case.perturbations(perturbations), clock)
    ]
    reaching = [case_reaches(functions, called(cassette, *pair)) for pair in planned_runs]
    under = [pair for pair, reaches in zip(planned_runs, reaching, strict=True) if reaches]
    jobs += [Job(commands[-1], case, how, trace(case, how)) for case, how in under]
    done = run_jobs(jobs, fixtures, "replay")
    found_coverage = covered(run.coverage for run in done)
    runs = iter(done)
    parent_now, patch_now = [], []
    for case in cases:
        parent_now.append(taken[case.id] if case.id in taken else observe(case, next(runs)))
        patch_now.append(observe(case, next(runs)) if len(commands) > 1 else parent_now[-1])
    found = compare(cases, cassette, parent_now, patch_now)
    found.coverage = found_coverage
    found.unselected = [
        f"{case.id} [{how}]"
        for (case, how), reaches in zip(planned_runs, reaching, strict=True)
        if not reaches
    ]
    compare_perturbed(under, list(runs), cassette, found)
    name_perturbations(cases, commands, fixtures, found, clock)
    return found


def called(cassette: Mapping[str, Any], case: Case, how: Perturbation) -> object:
    """What the case called in the recording's run of it under `how` (reach.py)."""
    recorded = cassette["cases"].get(case.id, {}).get("perturbed", {}).get(str(how)) or {}
    return recorded.get("called")


def compare_perturbed(
    under: Sequence[tuple[Case, Perturbation]],
    runs: Sequence[Run],
    cassette: dict[str, Any],
    found: Found,
) -> None:
    """The patch in each perturbed run against the parent's recording of that run: a field
    they disagree on is a mismatch (once: a field that changed already is not named again),
    except one two parent runs there disagreed on."""
    changed = {(m["id"], m["field"]) for m in found.mismatches}
    for (case, how), run in zip(under, runs, strict=True):
        recorded = cassette["cases"][case.id].get("perturbed", {}).get(str(how))
        if not isinstance(recorded, dict):
            continue  # recorded before this perturbed run existed: its recording says so
        for spec in recorded.get("unstable", {}):
            row = {"id": case.id, "field": spec, "perturbation": str(how)}
            found.perturbed_unstable.append(row)
        seen = observe(case, run)
        for spec, was in recorded.get("fields", {}).items():
            new = seen.get(spec)
            if (case.id, spec) in changed or holds(spec, was, new):
                continue
            row = {"id": case.id, "field": spec, "perturbation": str(how), "parent": was}
            found.mismatches.append({**row, "patch": new, "diff": unified(was, new)})
            changed.add((case.id, spec))


def name_perturbations(
    cases: Sequence[Case], commands: Sequence[Path], fixtures: Path, found: Found, clock: str
) -> None:
    """Name what tells the builds apart, for each mismatch of a perturbed run of several
    perturbations: both builds run the case under each of them alone, and the mismatch names
    those under which its field differs; none alone (files.touched, say, exists only with the
    decoy files and may differ only at a terminal): the run's perturbations, together."""
    by_id = {case.id: case for case in cases}
    rows = [m for m in found.mismatches if "+" in m.get("perturbation", "")]
    tried = [(row, name) for row in rows for name in row["perturbation"].split("+")]
    jobs = [
        Job(command, by_id[row["id"]], Perturbation((name,), clock if name == "clock" else ""))
        for row, name in tried
        for command in commands
    ]
    runs = run_jobs(jobs, fixtures, "replay: naming the perturbation")
    alone: dict[int, list[str]] = {}
    for index, (row, name) in enumerate(tried):
        case = by_id[row["id"]]
        parent, patch = (observe(case, run).get(row["field"]) for run in runs[2 * index :][:2])
        if not holds(row["field"], parent, patch):
            alone.setdefault(id(row), []).append(name)
    for row in rows:
        row["perturbation"] = "+".join(alone.get(id(row), [row["perturbation"]]))
