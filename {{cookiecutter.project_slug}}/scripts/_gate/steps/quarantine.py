"""Check the flake quarantine read from the protected oracle ref (never from the patch).

    python scripts/check_quarantine.py --file QUARANTINE_YAML --parent TREE --patch TREE

Rows: `id` (a test id such as `oracle/test_x.py::test_y`), `until` (YYYY-MM-DD), `reason`,
`owner`. An expired row blocks until a human removes or extends it: it never silently returns
to the scoring set. A row naming a test absent from both trees blocks.
Exit codes: 0 every row is live and names a real test, 1 block (an expired row, a row naming
no test), 2 fail closed (the file is missing or malformed).
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _gate.core.context import Judgment
from _gate.core.protocol import BLOCK, EXIT_CODES_HELP, PASS, FailClosed, Outcome, add_report_arg
from _gate.core.quarantine import active_ids, load_quarantine
from _gate.inventory.inventory import analyze
from _gate.runs.entry import Contract, Earlier


def test_exists(test_id: str, trees: Sequence[Path]) -> bool:
    """Whether `path::[Class::]name[param]` names a test function defined in either tree."""
    path, _, rest = test_id.partition("::")
    wanted = rest.split("[", 1)[0]
    for tree in trees:
        file = tree / path
        if file.is_file() and wanted in analyze(file.read_bytes(), path)["tests"]:
            return True
    return False


@dataclass(frozen=True)
class Inputs:
    """What the quarantine step decides on."""

    file: Path  # quarantine.yaml, copied out of the oracle ref
    parent: Path  # the trees whose tests a row may name
    patch: Path
    today: dt.date


def inputs(j: Judgment) -> Inputs:
    if j.oracle_ref.quarantine is None:
        raise FailClosed(j.oracle_ref.unreadable)
    return Inputs(j.oracle_ref.quarantine, j.parent, j.patch, dt.date.today())


def from_args(args: argparse.Namespace) -> Inputs:
    return Inputs(args.file, args.parent, args.patch, args.today)


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    rows = load_quarantine(given.file)
    expired = [r for r in rows if r["until"] < given.today]
    unknown = [r for r in rows if not test_exists(r["id"], [given.parent, given.patch])]
    evidence = {
        "file": str(given.file),
        "today": given.today.isoformat(),
        "active": sorted(active_ids(rows, given.today)),
        "expired": [{**r, "until": r["until"].isoformat()} for r in expired],
        "unknown": [r["id"] for r in unknown],
    }
    if expired:
        row = expired[0]
        return Outcome(
            BLOCK,
            f"quarantine row {row['id']} expired on {row['until']}; a human removes or extends it "
            "on the oracle ref",
            evidence,
        )
    if unknown:
        return Outcome(
            BLOCK, f"quarantine row {unknown[0]['id']} names no test in either tree", evidence
        )
    return Outcome(PASS, f"{len(rows)} quarantine rows, all live", evidence)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--file", type=Path, required=True, help="quarantine.yaml from the oracle ref")
    p.add_argument("--parent", type=Path, required=True, help="parent tree")
    p.add_argument("--patch", type=Path, required=True, help="patch tree")
    p.add_argument(
        "--today", type=dt.date.fromisoformat, default=dt.date.today(), help="YYYY-MM-DD"
    )
    add_report_arg(p, "quarantine")
    return p


STEP = Contract("quarantine", parser, from_args, inputs, decide)
