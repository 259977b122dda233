"""Preconditions of a judgment: offline, no model endpoint, the decision table, some oracle.

    python scripts/check_preconditions.py --tree BASE_TREE

The judge must be a judge, not another generator: JUDGE_OFFLINE=1 must be set (the nox session
sets it), no model endpoint variable may be set (MODEL_ENDPOINT, MODEL_API_KEY, OPENAI_API_KEY,
ANTHROPIC_API_KEY, plus `model_env` in oracle/judge.yaml), and oracles/MATRIX.md must exist in
the base tree. The base must also hold oracle evidence: at least one cassette case in
oracle/cases.yaml or one property oracle (a test_*.py file under oracle/). With neither, every
later step would pass for want of anything to compare, and the gate would say merge.
Exit codes: 0 all hold, 2 fail closed (any does not). This step never blocks with 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from _cases import load_cases
from _gate import (
    EXIT_CODES_HELP,
    FAIL_CLOSED,
    PASS,
    FailClosed,
    Outcome,
    add_report_arg,
    load_config,
    run_main,
)

MATRIX = "oracles/MATRIX.md"
CASES = "oracle/cases.yaml"
NO_EVIDENCE = (
    f"no oracle evidence in the base: {CASES} has no case and oracle/ has no test_*.py "
    f"property oracle; add a case to {CASES} (README: How to add a case) or a property "
    "test under oracle/ on the base branch"
)


def property_oracles(tree: Path) -> list[str]:
    """test_*.py files under oracle/: the files the oracle step runs (run_oracle.py)."""
    oracle = tree / "oracle"
    return sorted(p.relative_to(tree).as_posix() for p in oracle.rglob("test_*.py") if p.is_file())


def execute(args: argparse.Namespace) -> Outcome:
    config = load_config(args.tree / "oracle" / "judge.yaml")
    problems = []
    if os.environ.get("JUDGE_OFFLINE") != "1":
        problems.append("JUDGE_OFFLINE=1 is not set; run the judge through `nox -s judge`")
    present = [name for name in config.model_variables if os.environ.get(name)]
    if present:
        problems.append(f"model endpoint variable {present[0]} is set; unset it for the judge")
    if not (args.tree / MATRIX).is_file():
        problems.append(f"{MATRIX} is missing from the base; restore the decision table")
    oracles = property_oracles(args.tree)
    try:
        cases: int | None = len(load_cases(args.tree / CASES, config.case_timeout))
    except FailClosed as exc:  # reported with the other problems, in one line
        problems.append(str(exc))
        cases = None
    if cases == 0 and not oracles:
        problems.append(NO_EVIDENCE)
    evidence = {
        "model_variables_checked": list(config.model_variables),
        "set": present,
        "cases": cases,
        "property_oracles": oracles,
    }
    if problems:
        return Outcome(FAIL_CLOSED, "; ".join(problems), evidence)
    return Outcome(
        PASS,
        f"offline, {len(config.model_variables)} model variables unset, {MATRIX} present, "
        f"{cases} cases and {len(oracles)} property oracle files",
        evidence,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--tree", type=Path, default=Path("."), help="the base tree")
    add_report_arg(p, "preconditions")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("preconditions", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
