"""Preconditions of a judgment: offline, no model endpoint, the decision table present.

    python scripts/check_preconditions.py --tree BASE_TREE

The judge must be a judge, not another generator: JUDGE_OFFLINE=1 must be set (the nox session
sets it), no model endpoint variable may be set (MODEL_ENDPOINT, MODEL_API_KEY, OPENAI_API_KEY,
ANTHROPIC_API_KEY, plus `model_env` in oracle/judge.yaml), and oracles/MATRIX.md must exist in
the base tree.
Exit codes: 0 all hold, 2 fail closed (any does not). This step never blocks with 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from _gate import (
    EXIT_CODES_HELP,
    FAIL_CLOSED,
    PASS,
    Outcome,
    add_report_arg,
    load_config,
    run_main,
)

MATRIX = "oracles/MATRIX.md"


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
    evidence = {"model_variables_checked": list(config.model_variables), "set": present}
    if problems:
        return Outcome(FAIL_CLOSED, "; ".join(problems), evidence)
    return Outcome(
        PASS,
        f"offline, {len(config.model_variables)} model variables unset, {MATRIX} present",
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
