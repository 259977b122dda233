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
        unrun = f": no evidence ran line(s) {spans(row['unrun'])}" if row.get("unrun") else ""
        mark = f" (**a code owner reviews it**{unrun})" if row.get("review") else ""
        where = f"`{row['path']}:{row['line']}` in `{row['function']}`"
        lines.append(f"- `{row['capability']}` at {where}{mark}")
    more = len(rows) - CHANGE_ROWS
    return lines + ([f"- and {more} more (reports/change.json)"] if more > 0 else [])


CHANGE_ROWS = 10  # capabilities shown in the summary; the step's report has them all
EVIDENCE_NAMED = 3  # runs named per changed line in the summary; reports/change.json has all


def seen_lines(evidence: dict[str, Any]) -> list[str]:
    """Per file of the change, its changed lines of code: those the evidence ran (and which
    runs), and those none ran (step `change`)."""
    changed: dict[str, list[int]] = evidence.get("changed") or {}
    hits: dict[str, dict[str, list[str]]] = (evidence.get("coverage") or {}).get("hits") or {}
    if not any(changed.values()):
        return []
    lines = ["", "### What the evidence saw (step `change`)"]
    for path, numbers in sorted(changed.items()):
        ran = hits.get(path, {})
        unrun = [n for n in numbers if not ran.get(str(n))]
        lines += ["", f"`{path}`: {len(numbers) - len(unrun)} of {len(numbers)} changed lines ran"]
        groups: dict[tuple[str, ...], list[int]] = {}
        for n in numbers:
            if ran.get(str(n)):
                groups.setdefault(tuple(ran[str(n)][:EVIDENCE_NAMED]), []).append(n)
        for names, group in groups.items():
            more = len(ran[str(group[0])]) - len(names)
            named = ", ".join(f"`{name}`" for name in names) + (f" and {more} more" if more else "")
            lines.append(f"- line(s) {spans(group)}: {named}")
        if unrun:
            lines.append(f"- line(s) {spans(unrun)}: **no evidence ran them**")
    return lines
