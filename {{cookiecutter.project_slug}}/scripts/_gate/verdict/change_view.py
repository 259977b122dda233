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
    runs), those only the patch's own tests ran (not counted), those whose branch went one
    way only, and those none ran (step `change`)."""
    changed: dict[str, list[int]] = evidence.get("changed") or {}
    hits: dict[str, dict[str, list[str]]] = (evidence.get("coverage") or {}).get("hits") or {}
    unseen: dict[str, dict[str, list[int]]] = evidence.get("unseen") or {}
    if not any(changed.values()):
        return []
    lines = ["", "### What the evidence saw (step `change`)"]
    for path, numbers in sorted(changed.items()):
        ran = {n: hits.get(path, {}).get(str(n), []) for n in numbers}
        missed = unseen.get(path, {})
        unrun, one_way = missed.get("unrun", []), missed.get("one_way", [])
        counted = [n for n in numbers if n not in unrun]
        said = f"{len(counted)} of {len(numbers)} changed lines ran in a case, property or test"
        lines += ["", f"`{path}`: {said} of the base"]
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
        if len(own_only) < len(unrun):
            none = [n for n in unrun if not ran[n]]
            lines.append(f"- line(s) {spans(none)}: **no evidence ran them**")
    return lines
