"""Run the patch's own tests (`tests:` of judge.yaml), advisory: never part of the verdict.

    python scripts/advisory_tests.py --tree PATCH_TREE --python PATCH_PYTHON [--tests tests ...]

These tests share an author with the patch, so a pass is no evidence and a failure is a review
signal only. Outcomes are read from the gate's evidence plugin and checked against the tests the
inventory saw collected: a missing result, or an exit status the results contradict
(`os._exit(0)`, a forged status, a forced outcome), is reported as suspicious.
With `--crossrun-report` (the judge passes it when the patch left its test folders and pytest
configuration as the base has them) the tests are the very ones the crossrun already ran on
the patch build, so their outcomes are read from its report instead of running them again.
The outcomes are also written as JUnit XML beside the report (reports/tests.xml for
reports/tests.json), for CI test reporters, whichever run they come from.
Exit codes: 0 always once the run is reported (advisory), 2 fail closed (bad arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from _gate.config import tree_tests
from _gate.protocol import EXIT_CODES_HELP, PASS, Outcome, add_report_arg, run_main
from _gate.pytest_run import PytestRun, run_pytest


def collected_ids(inventory_report: Path | None) -> list[str]:
    """Test ids the inventory saw pytest collect in the patch tree (parameters folded)."""
    try:
        data = json.loads(inventory_report.read_bytes()) if inventory_report else {}
    except (OSError, ValueError):
        return []
    return list((data.get("evidence") or {}).get("collected_patch") or [])


def suspicions(result: PytestRun, collected: list[str]) -> list[str]:
    """What the run's own results contradict: never trust the exit status alone."""
    if result.outcomes is None:
        return [
            f"no result report (exit {result.exit_code}): the run was cut short or its report lost"
        ]
    found = []
    ran = {node.split("[", 1)[0] for node in result.outcomes}
    missing = [test for test in collected if test not in ran]
    if missing:
        found.append(f"{len(missing)} collected tests left no result (first: {missing[0]})")
    failed = any(v in ("failed", "error") for v in result.outcomes.values())
    if result.exit_code == 0 and failed:
        found.append("exit status 0 despite failures in its results")
    if result.exit_code not in (0, 5) and not failed:
        found.append(f"exit status {result.exit_code} with no failure in its results")
    return found


def crossran(report: Path | None) -> PytestRun | None:
    """The crossrun's run on the patch build, when its report has one."""
    try:
        evidence = json.loads(report.read_bytes())["evidence"] if report else {}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    outcomes = evidence.get("patch") if isinstance(evidence, dict) else None
    if not isinstance(outcomes, dict) or not outcomes:
        return None
    failed = any(v in ("failed", "error") for v in outcomes.values())
    return PytestRun(int(failed), False, dict(outcomes), {}, {}, {}, "")


JUNIT_ELEMENT = {"failed": "failure", "error": "error", "skipped": "skipped"}


def write_junit(path: Path, outcomes: dict[str, str]) -> None:
    """One testcase per test id (`classname` its file, `name` the rest of the id)."""
    from xml.etree import ElementTree as ET

    suite = ET.Element("testsuite", name="advisory", tests=str(len(outcomes)))
    for key, tag in (("failed", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(tag, str(sum(1 for outcome in outcomes.values() if outcome == key)))
    for test_id, outcome in sorted(outcomes.items()):
        file, _, name = test_id.partition("::")
        case = ET.SubElement(suite, "testcase", classname=file, name=name or file)
        if outcome in JUNIT_ELEMENT:
            ET.SubElement(case, JUNIT_ELEMENT[outcome], message=outcome)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def execute(args: argparse.Namespace) -> Outcome:
    entries = args.tests or tree_tests(args.tree)
    # A file is collected whatever its name: pytest takes one named on its command line.
    folders = [f for f in entries if (args.tree / f).exists()]
    if not folders:
        return Outcome(PASS, f"none of {', '.join(entries)} in the patch", {"outcomes": {}})
    result = crossran(args.crossrun_report)
    source = "; unchanged from the base, as the crossrun ran them on the patch build"
    if result is None:
        source = ""
        result = run_pytest(
            args.python, args.tree, folders, prefix="", timeout=args.timeout, trusted=False
        )
    outcomes = result.outcomes or {}
    counts = {
        k: sum(1 for v in outcomes.values() if v == k)
        for k in ("passed", "failed", "error", "skipped")
    }
    shown = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no results"
    suspicious = suspicions(result, collected_ids(args.inventory_report))
    note = f"; suspicious: {suspicious[0]}" if suspicious else source
    junit = args.report.with_suffix(".xml")
    write_junit(junit, outcomes)
    evidence = {
        "exit_code": result.exit_code,
        "junit": junit.name,
        "counts": counts,
        "suspicious": suspicious,
        "outcomes": outcomes,
        "output_tail": result.output_tail,
    }
    return Outcome(
        PASS, f"patch tests: {shown}{note} (advisory, never part of the verdict)", evidence
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--tree", type=Path, required=True, help="patch tree")
    p.add_argument("--python", type=Path, required=True, help="patch build's python")
    p.add_argument(
        "--tests", nargs="+", help="test files or folders (default: `tests:` of the tree)"
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds (judge.yaml)")
    p.add_argument("--inventory-report", type=Path, help="assert-inventory.json (collected ids)")
    p.add_argument(
        "--crossrun-report",
        type=Path,
        help="crossrun.json: its patch run, when tests are unchanged",
    )
    add_report_arg(p, "tests")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("tests", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
