"""SARIF 2.1.0 of a judgment's findings, for code scanning: each on its file and line.

Written beside judge-report.json as judge.sarif by judge.py and merge_shards.py, for
`github/codeql-action/upload-sarif` or any SARIF viewer. Only steps that did not pass give
results: an inventory finding on the patch's line (else the parent's), a protected path the
patch touches, a parent test or a property that fails on the patch (on its file), a case
whose output changed (on its line in oracle/cases.yaml). Paths are repository-relative.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
CASES = "oracle/cases.yaml"
LEVEL = {"block": "error", "deferred": "error", "needs-review": "warning", "error": "error"}
Evidence = Callable[[dict[str, Any]], dict[str, Any]]


def result(rule: str, level: str, text: str, path: str, line: int) -> dict[str, Any]:
    location = {"artifactLocation": {"uri": path}, "region": {"startLine": max(line, 1)}}
    return {
        "ruleId": rule,
        "level": level,
        "message": {"text": text},
        "locations": [{"physicalLocation": location}],
    }


def case_lines(cases_file: Path) -> dict[str, int]:
    """Each case id's line in cases.yaml, so a changed case points at its definition."""
    try:
        text = cases_file.read_text("utf-8")
    except OSError:
        return {}
    found = re.finditer(r"^\s*-\s*id:\s*[\"']?([^\"'\s#]+)", text, re.MULTILINE)
    return {m.group(1): text.count("\n", 0, m.start()) + 1 for m in found}


def step_results(
    step: dict[str, Any], evidence: dict[str, Any], cases: dict[str, int]
) -> Iterator[dict[str, Any]]:
    name, level = step["name"], LEVEL.get(step["status"], "error")
    if name == "assert-inventory":
        for row in evidence.get("findings") or []:
            where = row.get("patch") or row.get("parent") or row
            yield result(
                f"inventory/{row['rule']}", level, row["reason"], where["path"], where["line"]
            )
    elif name == "write-set":
        for row in evidence.get("protected") or []:
            text = f"protected path (rule {row['rule']}): a code owner reviews it"
            yield result("write-set/protected", level, text, row["path"], 1)
    elif name == "replay":
        for row in evidence.get("mismatches") or []:
            text = f"case {row['id']}: {row['field']} changed on the patch"
            yield result("replay/changed", level, text, CASES, cases.get(row["id"], 1))
    elif name in ("crossrun", "oracle"):
        for row in evidence.get("failures") or []:
            text = f"{row['id']}: {row.get('outcome', 'failed')} on the patch"
            yield result(f"{name}/failed", level, text, row["id"].split("::")[0], 1)


def capability_notes(step: dict[str, Any], evidence: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each capability a function gains, on its line: a warning where it waits for a code
    owner, else a note; and a note on each changed line no evidence ran."""
    for row in evidence.get("capabilities") or []:
        waits = bool(row.get("review"))
        text = f"{row['function']} newly reaches {row['capability']}"
        text += ": a code owner reviews it (judge.yaml capabilities:)" if waits else ""
        level = "warning" if waits else "note"
        yield result(f"change/{row['capability']}", level, text, row["path"], row["line"])
    for path, missed in sorted((evidence.get("unseen") or {}).items()):
        for n in missed["unrun"]:
            text = "a changed line no case, property or test of the base ran"
            yield result("change/unrun", "note", text, path, n)
        for n in missed["one_way"]:
            yield result("change/one-way", "note", "a branch here went one way only", path, n)


def sarif_log(report: dict[str, Any], evidence: Evidence, cases_file: Path) -> dict[str, Any]:
    """The findings of a judgment that did not merge (a merge has none: a failure the flake
    budget excused is no finding), and on every judgment, notes on the lines where the
    patch's code newly reaches for a capability; `evidence` gives a step's full evidence."""
    results: list[dict[str, Any]] = []
    cases = case_lines(cases_file)
    for step in report["steps"]:
        if step["name"] == "change":
            results += capability_notes(step, evidence(step))
        elif report["verdict"] != "merge" and step["status"] not in ("pass", "advisory"):
            results += step_results(step, evidence(step), cases)
    rules = sorted({found["ruleId"] for found in results})
    driver = {"name": "oracle-gate", "rules": [{"id": rule} for rule in rules]}
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }
