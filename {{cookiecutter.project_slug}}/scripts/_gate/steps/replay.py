"""Replay the parent cassettes three ways: recorded parent, parent build now, patch build.

    python scripts/replay_cassettes.py --cassette FILE --parent-command P --patch-command Q

Recorded and parent-now disagree: environment drift, fail closed. Parent-now and patch disagree
on a compared field: block, unless a reviewed allowlist row (`id`, `field`, `base`, `reason`,
`reviewer`; scripts/allow.py writes one) names it; each blocking field names the command that
writes its row. Fields agree as `cases.holds` says: equal, or for an additive field (help text)
the parent's words all kept in order; an additive field the patch added to is reported, with
the lines it gained (`grown`), and does not block. A row amends one recording: it applies only
while the judged base (--base, default the cassette's) starts with its `base`; a row of another
base is reported for clean-up, never applied, never fatal. A row missing a field, or a row of
this base matching no mismatch (stale), fails closed so rows cannot accumulate. Unstable fields
(differing between parent runs at record time) never block and are always reported.
With `--same-build` (scripts/_gate/runs/reuse.py) the parent-now run is the patch's too. With
`--parent-now FILE`, the parent-now runs it holds (the judge takes them beside the patch's
build: _gate/runs/cassettes.parent_now) stand for the command and the cases they were taken of; the
others run here.
With `--shard I/N` only that shard's cases replay, and only the rows naming them are checked
(scripts/_gate/plugin/shard.py): every case and every row is judged by exactly one shard.
Exit codes: 0 the surface is preserved, 1 block (a mismatch), 2 fail closed (drift, a bad or
stale allowlist, a cassette whose provenance does not match the cases, a `--parent-now` file
that is not the one whose `--parent-now-sha256` is given).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate.core.allowlist import (
    ALLOWLIST,
    Row,
    allow_command,
    is_cassette_row,
    load_allowlist,
    other_base_note,
    split_by_base,
)
from _gate.core.config import Config
from _gate.core.context import ChangedFile, ChangedFunctions, Judgment, review_requested
from _gate.core.protocol import (
    BLOCK,
    EXIT_CODES_HELP,
    FAIL_CLOSED,
    PASS,
    FailClosed,
    Outcome,
    add_report_arg,
)
from _gate.core.seal import Seal, read_sealed
from _gate.plugin.shard import Shard, add_shard_arg
from _gate.runs.cases import CASES, Case, load_cases
from _gate.runs.cassettes import Found, cassette_path, parent_now, replay, taken_fields
from _gate.runs.entry import Contract, Earlier
from _gate.runs.envs import bin_dir
from _gate.runs.perturb import add_perturb_args, runnable
from _gate.runs.reach import selecting
from _gate.runs.reuse import add_same_build_arg, noted


def cassette_rows(path: Path, base: str, shard: Shard) -> tuple[list[Row], list[Row]]:
    """(cassette rows of the judged base, of another base) naming cases of this shard; the
    others belong to the assert inventory and the crossrun."""
    rows = [row for row in load_allowlist(path) if is_cassette_row(row)]
    return split_by_base(shard.pick(rows, lambda row: row.id), base)


# A blocking field whose allowlist row the patch itself adds: no command to run, a review.
CARRIED = (
    "the patch's oracle/allowlist.yaml carries its row, which applies once a code owner "
    "reviewed it (ORACLE_REVIEW=1)"
)


def carried_rows(path: Path | None, base: str, shard: Shard) -> set[tuple[str, str]]:
    """The (id, field) rows the patch's own allowlist holds for this base: what a review
    would apply. Unreadable, it carries none (the base's copy decides, as without a review)."""
    if path is None or not path.is_file():
        return set()
    try:
        rows = cassette_rows(path, base, shard)[0]
    except FailClosed:
        return set()
    return {(row.id, row.field) for row in rows}


def judged_base(given: Inputs, cassette: dict[str, Any]) -> str:
    recorded = str(cassette.get("provenance", {}).get("base", ""))
    base = str(given.base or recorded).lower()
    if not base or not recorded.lower().startswith(base):
        raise FailClosed(
            f"{given.cassette}: recorded from base {recorded[:12] or '?'}, not the judged base "
            f"{base[:12]}; re-record it (`nox -s record`)"
        )
    return recorded.lower()


def taken_before(given: Inputs, cases: Sequence[Case]) -> dict[str, Any]:
    """The parent-now fields `--parent-now` holds (_gate/runs/cassettes.taken_fields), by case id;
    none where it names no file, or a file that cannot be read (replay then runs them
    itself). With `--parent-now-sha256` (the judge's), a file that is not the one it wrote
    fails closed."""
    path, sha256 = given.parent_now, given.parent_now_sha256
    if path is None:
        return {}
    try:
        data = read_sealed(Seal(path, sha256)) if sha256 else path.read_bytes()
    except (OSError, ValueError) as exc:
        if sha256:
            raise FailClosed(
                f"{path}: the parent-now runs changed since the judge wrote them ({exc}); it "
                "is the judge's own file"
            ) from None
        return {}
    try:
        doc = json.loads(data)
    except ValueError:
        return {}
    return taken_fields(doc, given.parent_command, cases)


def perturbation_note(
    ran: Sequence[str], used: Sequence[str], why: Mapping[str, str], same_build: bool
) -> str:
    """What the summary says of the perturbations: which ran, and why any other did not."""
    if same_build:
        return "; no perturbed run: no perturbation can tell a build from itself"
    notes = [f"{name} perturbation: unavailable ({reason})" for name, reason in why.items()]
    notes += [
        f"{name} perturbation: not in the recording (record it on this machine)"
        for name in ran
        if name not in used
    ]
    said = f"; perturbed: {', '.join(used)}" if used else "; no perturbation ran"
    return said + "".join(f"; {note}" for note in notes)


def check_cassette(
    cassette: dict[str, Any] | None, cases: Sequence[Case], path: Path
) -> dict[str, Any]:
    if cassette is None:
        raise FailClosed(f"{path}: no cassette; run `nox -s record` (the judge records it)")
    recorded = cassette.get("cases", {})
    for case in cases:
        if recorded.get(case.id, {}).get("digest") != case.digest:
            raise FailClosed(
                f"{path}: case {case.id!r} changed since it was recorded; re-record from the base"
            )
    return cassette


@dataclass(frozen=True)
class Inputs:
    """What the replay step decides on."""

    cassette: Path
    base: str | None  # the judged base (None: the cassette's)
    parent_command: Path  # the two builds' CLIs
    patch_command: Path
    cases: Path
    fixtures: Path
    timeout: float  # seconds per case
    allowlist: Path  # the reviewed rows (the base's, or the patch's under review)
    patch_allowlist: Path | None  # the patch's: rows it carries are named, never applied
    review: bool  # ORACLE_REVIEW=1
    shard: Shard
    same_build: bool
    perturb: tuple[str, ...]
    perturb_required: tuple[str, ...]
    parent_now: Path | None  # parent-now runs taken beforehand, beside the patch's build
    parent_now_sha256: str  # that file's SHA-256, as its writer took it ("": unsealed)
    changed: tuple[ChangedFile, ...] = ()  # the package lines the patch changed: traced
    # The base functions it changed: a perturbed run of a case that called none is left out
    # (_gate/runs/reach.py; None: every one runs, as by hand or with ORACLE_SELECT=off).
    functions: ChangedFunctions | None = None


def inputs(j: Judgment) -> Inputs:
    now = j.built.beside.get(STEP.name)
    return Inputs(
        cassette=cassette_path(j.repo, j.base, j.shard),
        base=j.base,
        parent_command=j.command("parent"),
        patch_command=j.command("patch"),
        cases=j.parent / CASES,
        fixtures=j.parent / "fixtures",
        timeout=j.config.case_timeout,
        allowlist=j.evidence_tree / ALLOWLIST,
        patch_allowlist=j.patch / ALLOWLIST,
        review=j.review,
        shard=j.shard,
        same_build=j.built.same,
        perturb=j.config.perturb,
        perturb_required=j.config.perturb_required,
        parent_now=None if now is None else now.file,
        parent_now_sha256="" if now is None else now.sha256,
        changed=j.built.changed,
        functions=j.built.functions if selecting() else None,
    )


def from_args(args: argparse.Namespace) -> Inputs:
    return Inputs(
        cassette=args.cassette,
        base=args.base,
        parent_command=args.parent_command,
        patch_command=args.patch_command,
        cases=args.cases,
        fixtures=args.fixtures,
        timeout=args.timeout,
        allowlist=args.allowlist,
        patch_allowlist=args.patch_allowlist,
        review=review_requested(),
        shard=args.shard,
        same_build=args.same_build,
        perturb=tuple(args.perturb),
        perturb_required=tuple(args.perturb_required),
        parent_now=args.parent_now,
        parent_now_sha256=args.parent_now_sha256 or "",
    )


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    r = replayed(given)
    evidence = replay_evidence(given, r)
    if r.found.drift:
        d = r.found.drift[0]
        return Outcome(
            FAIL_CLOSED,
            f"environment drift: the parent build now disagrees with its recording on "
            f"{d['id']} {d['field']} ({len(r.found.drift)} fields); re-record it on this machine "
            "from the merge base: `nox -s record`",
            evidence,
        )
    if r.stale:
        s = r.stale[0]
        return Outcome(
            FAIL_CLOSED,
            f"{given.allowlist}: row {s.id} {s.field} for this base matches no mismatch (stale); "
            "remove it",
            evidence,
        )
    note = replay_note(given, r)
    blocking = [m for m in r.mismatches if "allow" in m]
    if blocking:
        b = blocking[0]
        under = f" under the {b['perturbation']} perturbation" if "perturbation" in b else ""
        hint = f"an intended change needs a reviewed allowlist row: {b['allow']}"
        if b.get("carried"):
            hint = CARRIED
        return Outcome(
            BLOCK,
            f"{len(blocking)} compared fields changed (first: {b['id']} {b['field']}{under}); "
            f"{hint}{note}",
            evidence,
        )
    allowed_note = f", {len(r.mismatches)} allowlisted" if r.mismatches else ""
    scope = "" if given.shard.whole else f" of shard {given.shard}"
    summary = f"{len(r.cases)} cases{scope} replayed, surface preserved{allowed_note}{note}"
    return noted(Outcome(PASS, summary, evidence), given.same_build)


@dataclass
class Replayed:
    """One replay of this shard's cases against the cassette, and its mismatches marked."""

    every: list[Case]  # every case of the judgment; `cases` are this shard's
    cases: list[Case]
    base: str
    allow: list[Row]  # this base's allowlist rows of the shard
    other_base: list[Row]
    ran: list[str]  # the perturbations this machine can run
    why: dict[str, str]  # and why the others cannot
    perturbed: list[str]  # those the recording holds, replayed
    taken: dict[str, Any]  # parent-now fields observed beside the patch's build
    found: Found
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    stale: list[Row] = field(default_factory=list)


def replayed(given: Inputs) -> Replayed:
    every = load_cases(given.cases, given.timeout)
    cases = given.shard.pick(every, lambda case: case.id)
    try:
        cassette = json.loads(given.cassette.read_bytes())
    except (OSError, ValueError):
        cassette = None
    cassette = check_cassette(cassette, cases, given.cassette)
    base = judged_base(given, cassette)
    allow, other_base = cassette_rows(given.allowlist, base, given.shard)
    commands = [given.parent_command, *([] if given.same_build else [given.patch_command])]
    ran, why = runnable(given.perturb, given.perturb_required)
    recorded = cassette.get("perturbations") or []
    perturbed = [] if given.same_build else [name for name in ran if name in recorded]
    taken = taken_before(given, cases)
    found = replay(
        cases,
        cassette,
        commands,
        given.fixtures,
        perturbations=perturbed,
        taken=taken,
        changed=given.changed,
        functions=given.functions,
    )
    r = Replayed(every, cases, base, allow, other_base, list(ran), why, perturbed, taken, found)
    allowed = {(row.id, row.field) for row in allow}
    carried = carried_rows(given.patch_allowlist, base, given.shard) if not given.review else set()
    r.mismatches = [
        m
        if (m["id"], m["field"]) in allowed
        else {**m, "allow": allow_command(m["id"], m["field"])}
        | ({"carried": True} if (m["id"], m["field"]) in carried else {})
        for m in found.mismatches
    ]
    used = {(m["id"], m["field"]) for m in r.mismatches}
    r.stale = [row for row in allow if (row.id, row.field) not in used]
    return r


def replay_evidence(given: Inputs, r: Replayed) -> dict[str, Any]:
    return {
        "cases": len(r.cases),
        "shard": given.shard.evidence(len(r.cases), len(r.every)),
        "base": r.base,
        "allowlist": str(given.allowlist),
        "allowlist_source": "patch (ORACLE_REVIEW=1)" if given.review else "base",
        "mismatches": r.mismatches,
        "allowed": [m for m in r.mismatches if "allow" not in m],
        "drift": r.found.drift,
        "stale_allow_rows": [row.as_dict() for row in r.stale],
        "other_base_rows": [row.as_dict() for row in r.other_base],
        "unstable": r.found.unstable,
        "grown": r.found.grown,
        "parent_now_taken_before": len(r.taken),  # beside the patch's build (`parent_now`)
        **({"coverage": r.found.coverage.as_dict()} if given.changed else {}),
        "perturbations": {
            "ran": r.perturbed,
            "unavailable": r.why,
            "opted_out": [
                {"id": case.id, "perturbation": name, "reason": reason}
                for case in r.cases
                for name, reason in case.unperturbed
            ],
            "unstable": r.found.perturbed_unstable,
            "unselected": r.found.unselected,
        },
    }


def replay_note(given: Inputs, r: Replayed) -> str:
    unstable = r.found.unstable
    note = f", {len(unstable)} unstable fields not compared (see record)" if unstable else ""
    note += "; allowlist read from the patch under ORACLE_REVIEW=1" if given.review else ""
    note += other_base_note(r.other_base, given.allowlist)
    note += f"; {len(r.found.grown)} additive fields grew" if r.found.grown else ""
    note += perturbation_note(r.ran, r.perturbed, r.why, given.same_build)
    left = len(r.found.unselected)
    return note + (
        f"; {left} perturbed runs of cases that called no changed function there "
        "on the parent left out"
        if left
        else ""
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--cassette", type=Path, required=True, help="recorded parent cassette")
    p.add_argument("--parent-command", type=Path, required=True, help="parent build's CLI")
    p.add_argument("--patch-command", type=Path, required=True, help="patch build's CLI")
    p.add_argument("--cases", type=Path, default=Path("oracle/cases.yaml"))
    p.add_argument("--allowlist", type=Path, default=Path("oracle/allowlist.yaml"))
    p.add_argument(
        "--patch-allowlist",
        type=Path,
        help="the patch's allowlist: rows it carries are named, never applied without a review",
    )
    p.add_argument("--base", help="the judged base commit (default: the cassette's base)")
    p.add_argument("--fixtures", type=Path, default=Path("fixtures"))
    p.add_argument(
        "--timeout", type=float, default=Config.case_timeout, help="per-case timeout (s)"
    )
    p.add_argument(
        "--parent-now",
        type=Path,
        help="parent-now runs taken beforehand (the judge's, beside the patch's build); the "
        "cases it lacks, or holds of another command or case, run here",
    )
    p.add_argument("--parent-now-sha256", help="that file's SHA-256, as its writer took it")
    add_shard_arg(p)
    add_same_build_arg(p)  # never a kept parent-now: it is the drift check, it runs now
    add_perturb_args(p)
    add_report_arg(p, "replay-report")
    return p


def parent_now_runs(j: Judgment, parent: Path, stop: Callable[[], bool]) -> object:
    """The parent-now runs of this shard's cases on the parent's build (its environment
    `parent`), taken before the replay starts (`Contract.beside_build`)."""
    every = load_cases(j.parent / CASES, j.config.case_timeout)
    command = bin_dir(parent) / j.config.command
    return parent_now(
        command, j.shard.pick(every, lambda case: case.id), j.parent / "fixtures", stop
    )


STEP = Contract("replay", parser, from_args, inputs, decide, beside_build=parent_now_runs)
