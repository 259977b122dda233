"""Merge the report folders of a sharded judgment (`judge.py --shard I/N`) into one verdict.

    python scripts/merge_shards.py reports-1 reports-2 reports-3 reports-4 --out reports

Each folder is what one shard's judge wrote (judge-report.json and each step's report). The
folders must be the N shards of one judgment: the same base, head, shard count and CI run, each
shard exactly once; anything else fails closed naming the folder. Each step is merged across
the shards that ran it: the worst status, the findings of every shard (mismatches, failures,
stale rows) and the counts added up. A split step whose shards do not add up to the whole (a
case or test judged by no shard) fails closed, and so does a crossrun in which no shard saw a
parent test pass. The output folder then reads like an unsharded run's: judge-report.json,
judge-summary.md and each merged step's report. A step that needs review on its shard (write-set,
which runs on shard 1) needs it in the merge: the verdict is `needs-review` unless an error
anywhere makes it `error`.
Exit codes: 0 merge, 1 block, 2 fail closed (verdict needs-review or error).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate.core.protocol import CODE, ERROR, FAIL_CLOSED, SEVERITY, FailClosed, Report
from _gate.core.reports import write_report
from _gate.core.steps import report_file
from _gate.runs.git import repo_root, show_file
from _gate.runs.traced import Coverage
from _gate.runs.traced import covered as covered_runs
from _gate.steps.change import TRACED, coverage_in, rejudged
from _gate.verdict.verdict import (
    EXIT_CODES,
    MERGE_STEP,
    full_evidence,
    step_row,
    write_reports,
)


def severity(status: str) -> int:
    """A shard's status, ranked (protocol.SEVERITY; one no report may hold ranks as an error):
    a step's status over its shards is its worst, so a shard's proof blocks whatever another
    could not judge (the tally says so)."""
    return SEVERITY.get(status, SEVERITY[ERROR])


SUMMED = ("cases", "tests", "parent_passing")  # counts of a shard's own ids
SAME = ("base", "head", "run")  # what every shard of one judgment agrees on


@dataclass(frozen=True)
class ShardRun:
    """One shard's report folder, read."""

    folder: Path
    index: int
    report: dict[str, Any]

    def step_report(self, step: dict[str, Any]) -> dict[str, Any]:
        """The step's own report (all its evidence), else what the judge report kept."""
        return full_evidence(self.folder, step)


def read_shard(folder: Path) -> ShardRun:
    path = folder / "judge-report.json"
    try:
        report = json.loads(path.read_bytes())
        if report.get("finished") is False:  # run_state.begin's: the shard's judge never ended
            raise FailClosed(f"{path}: {report['summary']}; judge that shard again")
        index, count = report["shard"]["index"], report["shard"]["count"]
        steps = report["steps"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FailClosed(
            f"{path}: not a shard's judge report ({type(exc).__name__}: {exc}); pass the "
            "folders `nox -s judge -- --shard I/N` wrote"
        ) from None
    if not isinstance(index, int) or not isinstance(steps, list) or count < 2:
        raise FailClosed(f"{path}: field 'shard' names no shard of a split judgment ({count})")
    return ShardRun(folder, index, report)


def check_set(shards: Sequence[ShardRun]) -> int:
    """The shard count, once every shard 1..N is here exactly once, all of one judgment."""
    first = shards[0]
    count = first.report["shard"]["count"]
    for shard in shards:
        if shard.report["shard"]["count"] != count:
            raise FailClosed(
                f"{shard.folder}/judge-report.json: a shard of {shard.report['shard']['count']}, "
                f"but {first.folder} is a shard of {count}: merge the shards of one judgment only"
            )
        for key in SAME:
            if shard.report.get(key) != first.report.get(key):
                raise FailClosed(
                    f"{shard.folder}/judge-report.json: field {key!r} is "
                    f"{shard.report.get(key)!r}, but {first.folder} has {first.report.get(key)!r}: "
                    "merge the shards of one judgment only"
                )
    seen: dict[int, Path] = {}
    for shard in shards:
        if shard.index in seen:
            raise FailClosed(
                f"{shard.folder}: shard {shard.index}/{count} also in {seen[shard.index]}"
            )
        seen[shard.index] = shard.folder
    missing = [i for i in range(1, count + 1) if i not in seen]
    if missing:
        raise FailClosed(
            f"no report of shard {missing[0]}/{count} ({len(missing)} missing): pass every "
            "shard's report folder"
        )
    return int(count)


def merge_evidence(parts: Sequence[dict[str, Any]], worst: dict[str, Any]) -> dict[str, Any]:
    """Lists joined (each finding once), mappings united, own counts added; any other value
    as the worst shard has it."""
    merged: dict[str, Any] = {}
    for key in dict.fromkeys(k for part in parts for k in part):
        values = [part[key] for part in parts if key in part]
        if all(isinstance(v, list) for v in values):
            seen: dict[str, Any] = {}
            for item in (item for value in values for item in value):
                seen.setdefault(json.dumps(item, sort_keys=True, default=str), item)
            merged[key] = list(seen.values())
        elif key == "shard":
            merged[key] = covered(values)
        elif key == "coverage":  # which run ran each changed line: every shard's runs
            merged[key] = coverage_over(values).as_dict()
        elif all(isinstance(v, dict) for v in values):
            merged[key] = {k: v for value in values for k, v in value.items()}
        elif key in SUMMED and all(isinstance(v, int) for v in values):
            merged[key] = sum(values)
        else:
            merged[key] = worst.get(key, values[0])
    return merged


def coverage_over(values: Sequence[dict[str, Any]]) -> Coverage:
    return covered_runs(Coverage.from_dict(value) for value in values)


def covered(values: Sequence[dict[str, Any]]) -> dict[str, Any]:
    totals = {value.get("total") for value in values}
    owned = sum(int(value.get("owned", 0)) for value in values)
    return {
        "count": len(values),
        "owned": owned,
        "total": totals.pop() if len(totals) == 1 else None,
    }


@dataclass
class Merge:
    shards: list[ShardRun]
    count: int
    out: Path
    problems: list[str] = field(default_factory=list)  # what keeps the shards from adding up

    def step(self, name: str) -> tuple[Report, float]:
        """The step merged over the shards that ran it (its report written to `out`), and
        its seconds on the slowest of them."""
        ran = [(s, step) for s in self.shards for step in s.report["steps"] if step["name"] == name]
        parts = [shard.step_report(step) for shard, step in ran]
        at = max(range(len(ran)), key=lambda i: severity(ran[i][1]["status"]))
        worst_shard, worst = ran[at]
        evidence = merge_evidence(parts, parts[at])
        evidence["shards"] = {f"{s.index}/{self.count}": step["status"] for s, step in ran}
        self.check(name, evidence, len(ran))
        summary = worst["summary"]
        if len(ran) > 1:
            statuses = sorted(evidence["shards"].values(), key=severity)
            tally = ", ".join(f"{statuses.count(s)} {s}" for s in dict.fromkeys(statuses))
            summary = f"{summary} (shard {worst_shard.index}/{self.count}; shards: {tally})"
        status = worst["status"] if worst["status"] in CODE else ERROR
        if name == "change" and "changed" in evidence:
            status, summary, evidence = self.change_again(evidence)
        merged = {"step": name, "status": status, "summary": summary, "evidence": evidence}
        write_report(self.out / report_file(name), {**merged, "exit_code": CODE[status]})
        seconds = max(float(step.get("seconds", 0.0)) for _, step in ran)
        return Report.from_payload(merged), seconds

    def change_again(self, evidence: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        """The change step concluded again with what every shard's runs saw of the changed
        lines: the lead shard ran it with its own shard's runs alone."""
        found = [
            coverage_in(shard.step_report(step))
            for shard in self.shards
            for step in shard.report["steps"]
            if step["name"] in TRACED
        ]
        again = rejudged(evidence, covered_runs(found))
        return again.decided, again.summary, {**again.evidence, "shards": evidence["shards"]}

    def check(self, name: str, evidence: dict[str, Any], ran: int) -> None:
        """A split step must account for every id, in every shard."""
        shard = evidence.get("shard")
        if shard is None:
            return
        if ran != self.count or shard["count"] != self.count:
            self.problems.append(f"{name}: {ran} of {self.count} shards reported it")
        elif shard["total"] is None or shard["owned"] != shard["total"]:
            self.problems.append(
                f"{name}: the shards hold {shard['owned']} ids of {shard['total']}: "
                "they were not split from the same base"
            )
        if name == "crossrun" and evidence.get("parent_passing") == 0:
            self.problems.append(
                "crossrun: none of the parent's tests passes on the parent build in any shard; "
                "fix the base's tests or set judge.yaml test_extra"
            )


def matrix_text(repo: Path, base: str) -> str:
    """The decision table of the base, when this checkout has it; the summary shows it."""
    if not base:
        return ""
    try:
        return (show_file(repo_root(repo), base, "oracles/MATRIX.md") or b"").decode(
            "utf-8", "replace"
        )
    except FailClosed:
        return ""


def merged_report(args: argparse.Namespace) -> tuple[dict[str, Any], list[Report]]:
    """The merged judge report, and each merged step whole, in the shards' order."""
    shards = [read_shard(folder) for folder in args.folders]
    shards.sort(key=lambda shard: shard.index)
    merge = Merge(shards, check_set(shards), args.out)
    names = dict.fromkeys(step["name"] for s in shards for step in s.report["steps"])
    merged = [merge.step(name) for name in names]
    rows = [step_row(step, seconds, args.out) for step, seconds in merged]
    problems = [failed(problem) for problem in merge.problems]
    first = shards[0].report
    report = {
        **{key: first.get(key, "") for key in (*SAME, "scripts_from")},
        "shard": {"count": merge.count, "merged": [str(s.folder) for s in shards]},
        "steps": rows + [step_row(problem, 0, None) for problem in problems],
    }
    return report, [step for step, _ in merged] + problems


def failed(why: str) -> Report:
    return Report(MERGE_STEP, ERROR, FAIL_CLOSED, why)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES)
    p.add_argument("folders", nargs="+", type=Path, help="one report folder per shard")
    p.add_argument("--out", type=Path, default=Path("reports"), help="merged report folder")
    p.add_argument("--repo", type=Path, default=Path("."), help="repository (for MATRIX.md)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        report, steps = merged_report(args)
    except Exception as exc:  # one line and a report, never a traceback
        why = str(exc) if isinstance(exc, FailClosed) else f"internal error {exc!r}"
        steps = [failed(why)]
        report = {"base": "", "head": "", "steps": [step_row(steps[0], 0, None)]}
    matrix = matrix_text(args.repo, report["base"])
    return write_reports(args.out, report, steps, matrix, "merge", repo=args.repo)


if __name__ == "__main__":
    sys.exit(main())
