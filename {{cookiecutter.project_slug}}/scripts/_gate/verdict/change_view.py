"""What the `change` step shows a reviewer in judge-summary.md: the capabilities the patch's
code newly reaches for, and which of its changed lines the evidence ran."""

from __future__ import annotations

from typing import Any

from _gate.core.reports import spans


def change_lines(evidence: dict[str, Any]) -> list[str]:
    """What the patch's changed code newly reaches for (step `change`), a review's first."""
    rows = sorted(evidence.get("capabilities") or [], key=lambda row: not row.get("review"))
    if not rows:
        return []
    lines = ["", "### What the patch's code newly reaches for (step `change`)"]
    for row in rows[:CHANGE_ROWS]:
        unseen = f": {row['unseen']}" if row.get("unseen") else ""
        mark = f" (**a code owner reviews it**{unseen})" if row.get("review") else ""
        where = f"`{row['path']}:{row['line']}` in `{row['function']}`"
        lines.append(f"- `{row['capability']}` at {where}{mark}")
    more = len(rows) - CHANGE_ROWS
    return lines + ([f"- and {more} more (reports/change.json)"] if more > 0 else [])


CHANGE_ROWS = 10  # capabilities shown in the summary; the step's report has them all
EVIDENCE_NAMED = 3  # runs named per changed line in the summary; reports/change.json has all


def seen_lines(evidence: dict[str, Any]) -> list[str]:
    """Per file of the change, its changed lines of code: those the evidence ran (and which
    runs), those whose branch went one way only, those only the patch's own tests ran (not
    counted), and those none ran (step `change`)."""
    changed: dict[str, list[int]] = evidence.get("changed") or {}
    coverage = evidence.get("coverage") or {}
    unseen: dict[str, dict[str, list[int]]] = evidence.get("unseen") or {}
    if not any(changed.values()):
        return []
    lines = ["", "### What the evidence saw (step `change`)"]
    lost = coverage.get("lost") or []
    if lost:
        runs = f" ({len(lost)} runs in all)" if len(lost) > 1 else ""
        said = f"The tracer was removed or replaced in a run, {lost[0]}{runs}"
        lines += ["", f"{said}: what ran after it there is not counted."]
    for path, numbers in sorted(changed.items()):
        hits = (coverage.get("hits") or {}).get(path, {})
        ran = {n: hits.get(str(n), []) for n in numbers}
        lines += file_lines(path, ran, unseen.get(path, {}))
    return lines


def file_lines(path: str, ran: dict[int, list[str]], missed: dict[str, list[int]]) -> list[str]:
    """One changed file: the runs that ran each line, and the lines none counted ran."""
    unrun, one_way = missed.get("unrun", []), missed.get("one_way", [])
    counted = [n for n in ran if n not in unrun]
    said = f"{len(counted)} of {len(ran)} changed lines ran in a case, property or test"
    lines = ["", f"`{path}`: {said} of the base"]
    groups: dict[tuple[str, ...], list[int]] = {}
    for n in counted:
        groups.setdefault(tuple(ran[n][:EVIDENCE_NAMED]), []).append(n)
    for names, group in groups.items():
        more = len(ran[group[0]]) - len(names)
        named = ", ".join(f"`{name}`" for name in names) + (f" and {more} more" if more else "")
        lines.append(f"- line(s) {spans(group)}: {named}")
    if one_way:
        lines.append(f"- line(s) {spans(one_way)}: **a branch there went one way only**")
    own_only = [n for n in unrun if ran[n]]
    if own_only:
        lines.append(f"- line(s) {spans(own_only)}: only the patch's own tests (not counted)")
    none = [n for n in unrun if not ran[n]]
    if none:
        lines.append(f"- line(s) {spans(none)}: **no evidence ran them**")
    return lines
