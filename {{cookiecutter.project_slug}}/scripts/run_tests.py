"""Run the patch's own tests/, advisory: reported, never part of the verdict.

    python scripts/run_tests.py --tree PATCH_TREE --python PATCH_PYTHON

These tests share an author with the patch, so a pass is no evidence and a failure is a review
signal only. Outcomes are read from JUnit XML.
Exit codes: 0 always once the run is reported (advisory), 2 fail closed (bad arguments).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from _gate import EXIT_CODES_HELP, PASS, Outcome, add_report_arg, run_main, run_pytest


def execute(args: argparse.Namespace) -> Outcome:
    folders = [f for f in args.tests if (args.tree / f).exists()]
    if not folders:
        return Outcome(PASS, "no test folder in the patch", {"outcomes": {}})
    result = run_pytest(
        args.python, args.tree, folders, prefix="", timeout=args.timeout, trusted=False
    )
    outcomes = result.outcomes or {}
    counts = {
        k: sum(1 for v in outcomes.values() if v == k)
        for k in ("passed", "failed", "error", "skipped")
    }
    shown = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no results"
    truncated = "" if result.outcomes is not None else " (no JUnit XML: the run was cut short)"
    evidence = {
        "exit_code": result.exit_code,
        "counts": counts,
        "outcomes": outcomes,
        "output_tail": result.output_tail,
    }
    return Outcome(PASS, f"{shown}{truncated} (never part of the verdict)", evidence)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--tree", type=Path, required=True, help="patch tree")
    p.add_argument("--python", type=Path, required=True, help="patch build's python")
    p.add_argument("--tests", nargs="+", default=["tests"], help="test folders")
    p.add_argument("--timeout", type=float, default=900.0)
    add_report_arg(p, "tests")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("tests", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
