"""The score of a strength run: what became of each mutant (killed by the oracle, only by the
tests, not judged, survived), the counts per file and function, the Markdown table, and the
merge of N shards' reports into the one a single run would have written."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from _gate.core.protocol import FailClosed, read_report

# mutmut's exit codes for a mutant (mutmut/stats.py): its tests passed, or none reached it; or
# mutmut did not judge it. Every other code is a kill: a failure, a timeout, a crash.
SURVIVED = frozenset({0, 5, 33})  # 33: no test reached it
NOT_JUDGED = frozenset({None, 2, 34, 35, 37})


def verdict(codes: dict[str, int | None]) -> tuple[str, list[str]]:
    """What became of one mutant, and the kinds of evidence that killed it."""
    killed = [kind for kind, code in codes.items() if code not in SURVIVED | NOT_JUDGED]
    if set(killed) - {"tests"}:
        return "oracle", killed
    if killed:
        return "only_tests", killed
    if any(code in NOT_JUDGED for code in codes.values()):
        return "not_judged", killed
    return "survived", killed


def missed_by_oracle(
    results: dict[str, dict[str, int | None]], patterns: Sequence[str]
) -> list[str]:
    """The mutants `patterns` name (none: all) that no kind of the oracle's evidence in
    `results` killed: the only ones whose verdict a kind after them can change."""
    every = sorted(set().union(*results.values()))
    named = [m for m in every if not patterns or any(fnmatch(m, p) for p in patterns)]
    return [m for m in named if verdict({k: c.get(m) for k, c in results.items()})[0] != "oracle"]


def tally(
    results: dict[str, dict[str, int | None]], where: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Per file and function, how many mutants each kind of evidence kills; and every mutant
    the oracle (cassettes and properties) does not."""
    per: dict[str, dict[str, Counter[str]]] = {}
    missed: list[dict[str, Any]] = []
    for mutant, info in where.items():
        found, killed = verdict({kind: codes.get(mutant) for kind, codes in results.items()})
        bucket = per.setdefault(info["file"], {}).setdefault(info["function"], Counter())
        bucket.update(["mutants", found, *(kind for kind in killed if kind != "tests")])
        if found != "oracle":
            missed.append({"mutant": mutant, "verdict": found, **info})
    return scored(per, missed)


def scored(per: dict[str, dict[str, Counter[str]]], missed: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts per file and function, their totals and the score, and the missed mutants in
    the order of the source."""
    totals: Counter[str] = sum((c for fns in per.values() for c in fns.values()), Counter())
    score = totals["oracle"] / totals["mutants"] if totals["mutants"] else 0.0
    files = {f: {fn: dict(c) for fn, c in sorted(fns.items())} for f, fns in sorted(per.items())}
    missed = sorted(missed, key=lambda row: (row["file"], row["line"], row["mutant"]))
    return {"score": round(score, 4), "totals": dict(totals), "files": files, "missed": missed}


def markdown(report: dict[str, Any]) -> str:
    totals = report["totals"]
    lines = [
        f"## Oracle strength: {report['score']:.1%} of {totals.get('mutants', 0)} mutants killed",
        "",
        f"The properties kill {totals.get('properties', 0)}, the cassettes "
        f"{totals.get('cassettes', 0)} more; {totals.get('only_tests', 0)} only the project's "
        f"tests kill (the oracle is blind there), {totals.get('survived', 0)} survive everything.",
        "",
        "| File | Function | Mutants | Properties | Cassettes | Only tests | Survived |",
        "|---|---|---|---|---|---|---|",
    ]
    for file, fns in report["files"].items():
        for fn, c in fns.items():
            counts = [c.get(k, 0) for k in ("mutants", "properties", "cassettes", "only_tests")]
            lines.append(
                f"| {file} | `{fn}` | "
                + " | ".join(map(str, counts))
                + f" | {c.get('survived', 0)} |"
            )
    lines += ["", "### Mutants the oracle misses", ""]
    for row in report["missed"]:
        kill = " (the project's tests kill it)" if row["verdict"] == "only_tests" else ""
        lines.append(f"- `{row['file']}:{row['line']}` `{row['function']}`: `{row['code']}`{kill}")
    return "\n".join(lines) + "\n"


def merged(files: Sequence[Path]) -> dict[str, Any]:
    """The shard reports of one measurement as one: every shard 1..N once, none narrowed."""
    reports: list[dict[str, Any]] = []
    shards: list[tuple[int, int]] = []
    for path in files:
        try:
            reports.append(read_report(path).evidence)
            shards.append((int(reports[-1]["shard"]["index"]), int(reports[-1]["shard"]["count"])))
        except (FailClosed, KeyError, TypeError, ValueError):
            raise FailClosed(f"{path}: not a strength report of a shard; rerun it") from None
    shards.sort()
    count = shards[0][1] if shards else 0
    if (
        shards != [(i, count) for i in range(1, count + 1)]
        or len({r["base"] for r in reports}) != 1
    ):
        raise FailClosed(
            f"the shards {[f'{i}/{n}' for i, n in shards]} are not 1..N of one measurement of one "
            "base; pass every shard's report once"
        )
    per: dict[str, dict[str, Counter[str]]] = {}
    for report in reports:
        for file, fns in report["files"].items():
            for fn, counts in fns.items():
                per.setdefault(file, {}).setdefault(fn, Counter()).update(counts)
    return {
        **scored(per, [row for report in reports for row in report["missed"]]),
        "kinds": sorted({kind for r in reports for kind in r["kinds"]}),
        "proposals": [p for r in reports for p in r["proposals"]],
        "seconds": {str(r["shard"]["index"]): r["seconds"] for r in reports},
        "partial": any(r["partial"] for r in reports),
        "shard": {"index": 1, "count": 1, "merged": count},
        "base": reports[0]["base"],
    }
