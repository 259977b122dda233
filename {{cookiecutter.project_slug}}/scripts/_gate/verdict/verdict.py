"""The verdict of a judgment's steps, and what is written from it: judge-report.json, the
summary (judge-summary.md), the SARIF findings and the verdict word.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _gate.core.protocol import (
    BLOCK,
    DEFERRED,
    ERROR,
    FAIL_CLOSED,
    NEEDS_REVIEW,
    ExitCode,
    FailClosed,
    Report,
    read_report,
)
from _gate.core.reports import write_json, write_report
from _gate.core.steps import MATRIX_STEP, decision_rows, report_file
from _gate.verdict.change_view import change_lines, seen_lines
from _gate.verdict.sarif import CASES, Evidence, sarif_log

VERDICT_FILE = "ORACLE_VERDICT_FILE"  # where to write the verdict word: exit 2 has two


EXIT_CODES = "exit codes: 0 merge, 1 block, 2 fail closed (verdict needs-review or error)"


MERGE_STEP = "merge"  # the step merge_shards.py reports when shard reports do not add up

EVIDENCE_LIMIT = 4000  # characters of one evidence value copied into the judge report


def brief(report: Path, evidence: dict[str, Any]) -> dict[str, Any]:
    """A step's evidence as the judge report carries it: the values that are short, and
    where the step's own report has them all (beside judge-report.json)."""
    kept = {"report": report.name}
    for key, value in evidence.items():
        if len(json.dumps(value, default=str)) <= EVIDENCE_LIMIT:
            kept[key] = value
    return kept


def step_row(step: Report, seconds: float, reports: Path | None) -> dict[str, Any]:
    """A step as judge-report.json lists it: its evidence in brief where its own report lies
    in `reports` (None: it has none of its own), else whole, as JSON holds it (a deferral
    too)."""
    evidence = step.payload()["evidence"]
    if reports is not None:
        evidence = brief(reports / report_file(step.step), evidence)
    row = {"name": step.step, "status": step.status, "summary": step.summary}
    return {**row, "evidence": evidence, "seconds": round(seconds, 2)}


def verdict(steps: Sequence[Report]) -> tuple[int, str]:
    """The exit code and verdict word (the table atop docs/how-the-gate-decides.md):

    0. `error` when shard reports could not be merged as one judgment's (`MERGE_STEP`): a
       shard's proof may be of another patch.
    1. `block` when a step proves the patch wrong or shows its code acting against the gate,
       whatever else failed closed: a proof stands on its own evidence, and the summary
       still lists the steps that could not judge. Not when the patch edits the evidence a
       review lets the judge read from it (`REVIEWED_EVIDENCE`): the block may rest on the
       base's copy, and a review decides first.
    2. `error` when a step could not judge (a deferred step with no later step to decide it
       counts, and so does a judgment without steps): evidence that was never produced
       cannot be reviewed, so the error is what to fix first.
    3. `needs-review` when every step that failed closed did so for a code owner's review.
    4. `merge` otherwise."""
    codes = [s.code for s in steps]
    if any(s.step == MERGE_STEP and s.status == ERROR for s in steps):
        return FAIL_CLOSED, ERROR  # shards not shown to be one judgment's: no proof of this patch
    if BLOCK in codes and not review_may_lift(steps):
        return BLOCK, ExitCode(BLOCK).verdict
    if unjudged(steps) or not steps:
        return FAIL_CLOSED, ERROR
    code = max(codes)
    return code, NEEDS_REVIEW if code == FAIL_CLOSED else ExitCode(code).verdict


def unjudged(steps: Sequence[Report]) -> list[Report]:
    """The steps that could not judge: an error, or a deferral no later step decides."""
    found = [s for s in steps if s.status == ERROR]
    for index, step in enumerate(steps):
        decider = step.deferred_to
        if step.status == DEFERRED and all(s.step != decider for s in steps[index:]):
            found.append(step)
    return found


# What the judge reads from the patch once a code owner reviewed it (Judgment.evidence_tree):
# cases, allowlist, oracles, fixtures.lock. A block may rest on the base's copy of those.
REVIEWED_EVIDENCE = ("oracle/", "oracles/", "fixtures.lock")


def review_may_lift(steps: Sequence[Report]) -> bool:
    """Whether a protected path the patch touches is evidence a review replaces (a step whose
    list of paths was too long to keep counts as one)."""
    for step in steps:
        if step.status != NEEDS_REVIEW or step.step != "write-set":
            continue  # a crossrun's review of coupled tests replaces no evidence
        rows = step.evidence.get("protected")
        if not isinstance(rows, list):
            return True
        if any(str(row.get("path", "")).startswith(REVIEWED_EVIDENCE) for row in rows):
            return True
    return False


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def matrix_rows(matrix: str, steps: dict[str, dict[str, Any]], absent: str) -> list[str]:
    """The decision table of oracles/MATRIX.md, each row with this patch's evidence; `absent`
    for a step this report does not hold (the precondition checked every row names a step)."""
    rows: list[str] = []
    shown: set[str] = set()
    for _, cols in decision_rows(matrix):
        found = MATRIX_STEP.search(cols[1])
        name = found.group(1) if found else ""
        step = steps.get(name)
        if step is None:
            evidence = absent
        elif name in shown:
            evidence = f"same step as above ({step['status']})"
        else:
            evidence = f"**{step['status']}**: {step['summary']}"
        shown.add(name)
        rows.append(f"| {cols[0]} | {cols[1]} | {cols[3]} | {cell(evidence)} |")
    return rows


def confinement_note(report: dict[str, Any]) -> str:
    level = report.get("confinement")
    if level == "unconfined":
        return f" · **{UNCONFINED_NOTE[2:]}**"
    return f" · the patch's code ran confined ({level})" if level else ""


def summary_markdown(report: dict[str, Any], matrix: str, evidence: Evidence | None = None) -> str:
    """The summary of `report`; replay's findings, and the tests lost under a perturbation,
    from `evidence` (a step's whole evidence) where given, else as the report kept them
    (`brief` drops a long list)."""
    steps = {s["name"]: s for s in report["steps"]}
    shard = report.get("shard") or {"count": 1}
    count, index = shard["count"], shard.get("index")
    absent = "did not run: the judgment stopped before this step"
    if count == 1:
        scope = ""
    elif index:
        scope = f" (shard {index}/{count})"
        absent = "not run on this shard: see shard 1's report" if index > 1 else absent
    else:
        scope = f" ({count} shards merged)"
    lines = [
        f"## Oracle judge: **{report['verdict']}** (exit {report['exit_code']}){scope}",
        "",
        f"base `{report['base'][:12]}` head `{report['head'][:12]}`{confinement_note(report)}"
        + unjudged_note(report.get("unjudged") or [], report["verdict"]),
        "",
        strength_line(steps.get("preconditions", {}).get("evidence", {}).get("strength")),
        "",
        *in_process_lines(report["verdict"], steps),
        *excused_lines(report.get("excused") or []),
        "| Failure class | First oracle | Merge only if | This patch |",
        "|---|---|---|---|",
        *matrix_rows(matrix, steps, absent),
        "",
        "| Step | Status | Seconds | Evidence |",
        "|---|---|---|---|",
        *(
            f"| {s['name']} | {s['status']} | {s['seconds']:.1f} | {cell(s['summary'])} |"
            for s in report["steps"]
        ),
    ]

    def whole(name: str) -> dict[str, Any]:
        step = steps.get(name, {})
        return evidence(step) if evidence and step else step.get("evidence", {})

    lines += replay_lines(whole("replay"))
    lines += change_lines(whole("change")) + seen_lines(whole("change"))
    lines += crossrun_lines(steps.get("crossrun", {}).get("evidence", {}))
    for name in ("oracle", "crossrun"):
        lines += perturbed_test_lines(name, whole(name))
    lines += review_lines(report.get("review"))
    return "\n".join(lines) + "\n"


SHOWN_FIELDS = 3  # replay fields shown in the summary, of each kind


def replay_lines(evidence: dict[str, Any]) -> list[str]:
    """Each changed field with its diff (and the perturbation it changed under) and, when it
    blocks, the command a reviewer runs to allow it; then each additive field that grew, with
    the lines it gained; then which perturbations ran."""
    lines: list[str] = []
    for mismatch in (evidence.get("mismatches") or [])[:SHOWN_FIELDS]:
        title = f"`{mismatch['id']}` `{mismatch['field']}`"
        if mismatch.get("perturbation"):
            title += f" under the {mismatch['perturbation']} perturbation (docs/perturbation.md)"
        lines += ["", title, "```diff", mismatch["diff"], "```"]
        if mismatch.get("carried"):
            lines += [
                "The patch carries its allowlist row: a code owner reviews it, then the "
                "judge runs again with `ORACLE_REVIEW=1`."
            ]
        elif mismatch.get("allow"):
            lines += ["If the change is intended, a reviewer adds:", f"`{mismatch['allow']}`"]
    grown = evidence.get("grown") or []
    if grown:
        lines += ["", "### Additive fields that grew (the parent's text is all kept)"]
    for row in grown[:SHOWN_FIELDS]:
        added = [f"+ {line}" for line in row["added"]]
        lines += ["", f"`{row['id']}` `{row['field']}`", "```diff", *added, "```"]
    return lines + perturbation_lines(evidence.get("perturbations") or {})


def perturbation_lines(ran: dict[str, Any]) -> list[str]:
    """Which perturbations replay ran, which this machine could not, which cases opted out."""
    if not ran:
        return []
    lines = ["", f"Perturbations run: {', '.join(ran.get('ran') or []) or 'none'}"]
    lines += [
        f"- {name} perturbation: unavailable ({why})"
        for name, why in (ran.get("unavailable") or {}).items()
    ]
    lines += [
        f"- `{row['id']}` opts out of {row['perturbation']}: {row['reason']}"
        for row in (ran.get("opted_out") or [])[:SHOWN_FIELDS]
    ]
    return lines


def perturbed_test_lines(step: str, evidence: dict[str, Any]) -> list[str]:
    """The step's tests that pass on the parent and fail on the patch under a perturbation
    (_gate/runs/perturbed_tests.py), each with the end of its message."""
    lines: list[str] = []
    for row in ((evidence.get("perturbations") or {}).get("lost") or [])[:SHOWN_FIELDS]:
        title = f"`{row['id']}` ({step}) {row['outcome']} on the patch under the "
        lines += ["", f"{title}{row['perturbation']} perturbation (docs/perturbation.md)"]
        tail = row.get("message", "").strip().splitlines()[-3:]
        lines += ["```", *tail, "```"] if tail else []
    return lines


def strength_line(score: dict[str, Any] | None) -> str:
    """How much the base's oracle sees, as the oracle ref last measured it."""
    if not score:
        return "Oracle strength: not measured (`nox -s strength -- --update-ref` on the base)"
    mutants = (score.get("totals") or {}).get("mutants", "?")
    when = f"measured {score.get('date', '?')} on `{str(score.get('base', '?'))[:12]}`"
    return f"Oracle strength: **{score['score']:.1%}** of {mutants} mutants killed ({when})"


IN_PROCESS = "In-process evidence only"


def in_process_lines(word: str, steps: dict[str, dict[str, Any]]) -> list[str]:
    """A merge no property oracle saw rests on the crossrun, a pytest process the patch's code
    runs in (its tamper checks see blanket forgers only), and on cassettes that replay the
    CLI's surface, which may never reach the changed code: the summary says so."""
    oracle = steps.get("oracle", {}).get("evidence", {})
    crossrun = steps.get("crossrun", {})
    mode = crossrun.get("evidence", {}).get("mode")
    decided = crossrun.get("status") == "pass" and mode == "block"
    if word != "merge" or sum((oracle.get("kinds") or {}).values()) or not decided:
        return []
    cases = steps.get("replay", {}).get("evidence", {}).get("cases", 0)
    return [
        f"**{IN_PROCESS}**: no property oracle ran; beside {cases} replayed cases (the CLI's "
        "surface, which may not reach the changed code) this merge rests on the crossrun, whose "
        "pytest process runs the patch's code. Its canaries and machinery checks passed; code "
        "that knows them can pass them too (docs/known-limits.md).",
        "",
    ]


def excused_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [f"Flake control excused {failures(len(rows))} (step `flake-budget`):"]
    lines += [f"- {row['step']} `{row['id']}`: {row['by']}" for row in rows]
    return [*lines, ""]


def review(report: dict[str, Any], steps: Sequence[Report]) -> dict[str, Any]:
    """What a code owner looks at before the judge may run again with ORACLE_REVIEW=1: each
    protected path the patch touches, with the rule of judge.yaml `protected:` it falls under,
    and each parent test coupled to internals the patch moved, with the name it failed on."""
    found = [step.evidence for step in steps if step.status == NEEDS_REVIEW]
    rerun = f"ORACLE_REVIEW=1 nox -s judge -- --base {report['base']} --head {report['head']}"
    return {
        "protected": [row for each in found for row in each.get("protected") or []],
        "coupled": [row for each in found for row in each.get("coupled") or []],
        "coverage": [row for each in found for row in each.get("coverage_removed") or []],
        "capabilities": [
            row for each in found for row in each.get("capabilities") or [] if row.get("review")
        ],
        "rerun": rerun,
    }


def review_lines(found: dict[str, Any] | None) -> list[str]:
    if not found:
        return []
    lines = []
    if found["protected"]:
        lines += ["", "### Needs review: protected paths for a code owner"]
        lines += [f"- `{row['path']}` (rule `{row['rule']}`)" for row in found["protected"]]
    if found.get("coupled"):
        lines += ["", "### Needs review: parent tests depend on internals the patch moved"]
        lines += [f"- `{row['id']}`: `{row['moved']}`" for row in found["coupled"]]
    if found.get("coverage"):
        lines += [
            "",
            "### Needs review: coverage removed (each parent version passes on the patch)",
        ]
        lines += [f"- `{row['id']}` ({row['rule']})" for row in found["coverage"]]
    if found.get("capabilities"):
        lines += ["", "### Needs review: capabilities new to their module, or in lines no run ran"]
        lines += [
            f"- `{row['capability']}` at `{row['path']}:{row['line']}` in `{row['function']}`"
            + (f" ({row['unseen']})" if row.get("unseen") else "")
            for row in found["capabilities"]
        ]
    return [*lines, "", "Once a code owner approved them, judge again:", f"`{found['rerun']}`"]


def full_evidence(folder: Path, step: dict[str, Any]) -> dict[str, Any]:
    """A step's evidence from its own report in `folder` (all of it: a shard's, read by the
    merge), else what the judge report kept (`brief`)."""
    try:
        return dict(read_report(folder / report_file(step["name"])).payload()["evidence"])
    except FailClosed:
        return dict(step["evidence"])


def crossrun_lines(evidence: dict[str, Any]) -> list[str]:
    """The parent's tests that fail on the patch, each with its message and the allowlist row
    that would let it fail, kept apart from the patch's own (advisory) tests."""
    failures = evidence.get("failures") or []
    if not failures:
        return []
    lines = ["", "### Parent tests on the patch (these decide)"]
    for row, command in list(zip(failures, evidence.get("allow_rows") or [], strict=False))[:5]:
        message = row.get("message", "").strip().splitlines()[-6:]
        lines += ["", f"`{row['id']}`: {row['outcome']}", "```", *message, "```"]
        lines += ["If the change is intended, a reviewer adds:", f"`{command}`"]
    return lines


def run_id() -> str:
    """The CI run this judgment belongs to: a merge takes shard reports of one run only."""
    run = os.environ.get("GITHUB_RUN_ID", "")
    return f"{run}.{os.environ.get('GITHUB_RUN_ATTEMPT', '1')}" if run else ""


UNCONFINED_NOTE = (
    "; unconfined: the patch's code ran with the judge's authority (sandbox: best-effort)"
)


def write_reports(
    reports: Path,
    report: dict[str, Any],
    steps: Sequence[Report],
    matrix: str,
    label: str,
    *,
    repo: Path,
) -> int:
    """Decide the verdict of `steps` (whole, in the table's order; `report["steps"]` is how
    judge-report.json lists them), then write the JSON report, its findings as SARIF
    (judge.sarif: on the lines of `repo`'s checkout), the summary and the verdict word
    ($ORACLE_VERDICT_FILE: the exit code alone cannot tell the two of 2). Nothing is read
    back from `reports`."""
    code, word = verdict(steps)
    whole = {step.step: step.payload()["evidence"] for step in steps}

    def evidence(row: dict[str, Any]) -> dict[str, Any]:
        return dict(whole.get(row["name"], row["evidence"]))

    report = {"verdict": word, "exit_code": code, **report}
    report["unjudged"] = [step.step for step in unjudged(steps)]
    report["excused"] = excused(steps)
    if any(step.status == NEEDS_REVIEW for step in steps):
        report["review"] = review(report, steps)
    write_report(reports / "judge-report.json", report)
    sarif = sarif_log(report, evidence, repo / CASES)
    write_json(reports / "judge.sarif", sarif)
    text = summary_markdown(report, matrix, evidence)
    (reports / "judge-summary.md").write_text(text, "utf-8")
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(text)
    verdict_file = os.environ.get(VERDICT_FILE)
    if verdict_file:
        Path(verdict_file).write_text(f"{word}\n", "utf-8")
    where = reports / "judge-summary.md"  # the readable one; the JSON lies beside it
    notes = review_note(report.get("review"), word) + excused_note(report["excused"])
    notes += unjudged_note(report["unjudged"], word)
    notes += UNCONFINED_NOTE if report.get("confinement") == "unconfined" else ""
    print(f"{label}: verdict {word} (exit {code}){notes}; see {where}")
    return code


def unjudged_note(names: Sequence[str], word: str) -> str:
    """Beside a block, the steps that could not judge: the proof stands, they still failed."""
    if word != "block" or not names:
        return ""
    return f"; besides, {len(names)} step(s) could not judge ({', '.join(names)}): see the table"


def excused(steps: Sequence[Report]) -> list[dict[str, Any]]:
    """The failures flake control excused: a verdict that stands on them says so everywhere."""
    budget = next((s for s in steps if s.step == "flake-budget"), None)
    if budget is None or budget.status != "pass":
        return []
    found = budget.evidence
    retried = [
        {"id": row["id"], "step": row["step"], "by": f"passing on retry {row['passed_on_retry']}"}
        for row in found.get("flaky") or []
    ]
    return [*retried, *(found.get("excluded") or [])]


def failures(count: int) -> str:
    return f"{count} failure{'' if count == 1 else 's'}"


def excused_note(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return ""
    more = f" and {len(rows) - 1} more" if len(rows) > 1 else ""
    first = rows[0]
    where = f"{first['step']} {first['id']}: {first['by']}{more}"
    return f", {failures(len(rows))} excused by flake control ({where})"


def review_note(found: dict[str, Any] | None, word: str) -> str:
    """The verdict line's share of a review: what a code owner looks at, and what runs after
    (beside a block: that it is needed as well)."""
    if not found:
        return ""
    rows, tests = found["protected"], found.get("coupled") or []
    removed, gained = found.get("coverage") or [], found.get("capabilities") or []
    what = "the protected paths the write-set step lists"
    if gained:
        more = f" and {len(gained) - 1} more" if len(gained) > 1 else ""
        first = gained[0]
        what = f"{first['capability']} at {first['path']}:{first['line']}{more}"
    if removed:
        more = f" and {len(removed) - 1} more" if len(removed) > 1 else ""
        what = f"the coverage the patch removed ({removed[0]['id']}{more})"
    if rows:
        more = f" and {len(rows) - 1} more" if len(rows) > 1 else ""
        what = f"protected path {rows[0]['path']} (rule {rows[0]['rule']}){more}"
    elif tests:
        more = f" and {len(tests) - 1} more" if len(tests) > 1 else ""
        what = f"parent test {tests[0]['id']}, coupled to {tests[0]['moved']}{more}"
    if word != NEEDS_REVIEW:
        return f"; it also touches {what}, which a code owner must review"
    return f": a code owner reviews {what}, then: {found['rerun']}"
