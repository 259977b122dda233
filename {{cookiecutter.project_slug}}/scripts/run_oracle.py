"""Run the property oracles of the base tree on the parent build and on the patch build.

    python scripts/run_oracle.py --oracle BASE_TREE/oracle --parent-python P --patch-python Q

The oracle directory comes from the base revision; it runs with a fixed rootdir and ini, no
plugin autoloading and no cache, from a temporary working directory, so nothing in the patch
tree (conftest.py, pytest settings, plugins) is loaded. Outcomes are read from JUnit XML, never
from the exit code alone: a test that passed on the parent must be reported passed on the patch.
Exit codes: 0 every parent-passing oracle passes on the patch, 1 block (a failure, an error, a
skip, a missing or truncated result, a suspicious exit status), 2 fail closed (the oracle does
not pass on the parent build, or cannot run there).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _gate import (
    BLOCK,
    EXIT_CODES_HELP,
    PASS,
    FailClosed,
    Outcome,
    PytestRun,
    add_report_arg,
    run_main,
    run_pytest,
)

PREFIX = "oracle/"


def has_tests(oracle: Path) -> bool:
    return any(p.name.startswith("test_") for p in oracle.rglob("*.py"))


def run(python: Path, oracle: Path, timeout: float, targets: Sequence[str] = (".",)) -> PytestRun:
    return run_pytest(python, oracle, targets, prefix=PREFIX, timeout=timeout, trusted=True)


def parent_baseline(result: PytestRun) -> dict[str, str]:
    if result.outcomes is None:
        raise FailClosed(
            f"oracle produced no JUnit XML on the parent build (exit {result.exit_code}, "
            f"timed out: {result.timed_out}); fix the oracle: {result.output_tail[-200:]!r}"
        )
    broken = sorted(k for k, v in result.outcomes.items() if v in ("failed", "error"))
    if broken:
        raise FailClosed(
            f"oracle {broken[0]} does not pass on the parent build ({len(broken)} tests); "
            "the oracle or the base is broken: fix it on the base branch first"
        )
    if not result.outcomes:
        raise FailClosed("oracle collected no test on the parent build; fix oracle/")
    return result.outcomes


def failures(parent: dict[str, str], patch: PytestRun) -> list[dict[str, Any]]:
    got = patch.outcomes or {}
    rows = []
    for node, before in sorted(parent.items()):
        after = got.get(node, "missing")
        if before == "passed" and after != "passed":
            rows.append({"id": node, "outcome": after, "message": patch.messages.get(node, "")})
    return rows


def execute(args: argparse.Namespace) -> Outcome:
    if not has_tests(args.oracle):
        return Outcome(PASS, f"no property oracles in {args.oracle} on the base", {"tests": 0})
    with ThreadPoolExecutor(max_workers=2) as pool:
        parent_job = pool.submit(run, args.parent_python, args.oracle, args.timeout)
        patch_job = pool.submit(run, args.patch_python, args.oracle, args.timeout)
        parent_result, patch = parent_job.result(), patch_job.result()
    parent = parent_baseline(parent_result)
    rows = failures(parent, patch)
    evidence: dict[str, Any] = {
        "parent": parent,
        "patch": patch.outcomes,
        "patch_exit_code": patch.exit_code,
        "patch_timed_out": patch.timed_out,
        "failures": rows,
        "output_tail": patch.output_tail if rows or patch.exit_code else "",
    }
    if patch.outcomes is None:
        why = "timed out" if patch.timed_out else f"exit {patch.exit_code}"
        return Outcome(
            BLOCK, f"oracle run on the patch left no JUnit XML ({why}): truncated", evidence
        )
    if rows:
        first = rows[0]
        return Outcome(
            BLOCK,
            f"{len(rows)} of {len(parent)} oracles fail on the patch (first: {first['id']} "
            f"{first['outcome']})",
            evidence,
        )
    if patch.exit_code != 0:
        return Outcome(
            BLOCK,
            f"every oracle passed but pytest exited {patch.exit_code}: suspicious run",
            evidence,
        )
    return Outcome(
        PASS, f"{len(parent)} property oracles pass on the parent and the patch", evidence
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--oracle", type=Path, required=True, help="oracle/ of the base tree")
    p.add_argument("--parent-python", type=Path, required=True, help="parent build's python")
    p.add_argument("--patch-python", type=Path, required=True, help="patch build's python")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per pytest run")
    add_report_arg(p, "oracle")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("oracle", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
