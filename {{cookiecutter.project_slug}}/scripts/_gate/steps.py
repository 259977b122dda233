"""The judge's steps: the one table that says their order, lanes and what each decides."""

from __future__ import annotations

import re

# Every step a judgment reports, in the order of the decision table (oracles/MATRIX.md), with
# the script of scripts/ that runs it; the build is the judge's own work.
JUDGE_STEPS: dict[str, str | None] = {
    "preconditions": "preconditions.py",
    "write-set": "write_set.py",
    "fixtures-lock": "fixtures_lock.py",
    "build": None,
    "record": "record_cassettes.py",
    "replay": "replay_cassettes.py",
    "assert-inventory": "count_asserts.py",
    "oracle": "oracle.py",
    "crossrun": "crossrun.py",
    "quarantine": "check_quarantine.py",
    "flake-budget": "flake_budget.py",
    "tests": "advisory_tests.py",
}


MATRIX_STEP = re.compile(r"\(`([a-z-]+)`\)")


def decision_rows(matrix: str) -> list[tuple[int, list[str]]]:
    """The body rows of the decision table: (line number, its four cells)."""
    rows = []
    for number, line in enumerate(matrix.splitlines(), 1):
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        header = set(cols[0]) <= set("-: ") or cols[0] == "Failure class"
        if line.startswith("|") and len(cols) == 4 and not header:
            rows.append((number, cols))
    return rows
