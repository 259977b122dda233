"""Run the patch's own tests (`tests:` of judge.yaml), advisory: never part of the verdict.

    python scripts/advisory_tests.py --tree PATCH_TREE --python PATCH_PYTHON [--tests tests ...]

These tests share an author with the patch, so a pass is no evidence and a failure is a review
signal only. Outcomes are read from the gate's evidence plugin and checked against the tests the
inventory saw collected: a missing result, or an exit status the results contradict
(`os._exit(0)`, a forged status, a forced outcome), is reported as suspicious.
With `--reuse` (the judge sets it when the patch left its test folders and pytest
configuration as the base has them, and gives the crossrun's outcome in memory; by hand,
`--crossrun-report FILE` names that outcome) the tests are the very ones the crossrun already
ran on the patch build, so their outcomes are taken from it instead of running them again;
where the crossrun ran nothing (the patch's build is the parent's too: a docs- or CI-only
patch), neither do they, as a CI path filter skips tests for such a change.
When the patch changed them, the assert inventory ran them on the patch build (to count their
checks), and the judge takes their outcomes from that run.
The outcomes are also written as JUnit XML beside the report (reports/tests.xml for
reports/tests.json), for CI test reporters, whichever run they come from.
Exit codes: 0 once the run is reported (status `advisory`, whatever it found), 2 when it could
not run (bad arguments, a tree it cannot read; the status stays `advisory`).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _gate.core.config import Config, tree_tests
from _gate.core.context import ChangedFile, Judgment, touches_tests
from _gate.core.protocol import (
    EXIT_CODES_HELP,
    PASS,
    FailClosed,
    Outcome,
    Report,
    add_report_arg,
    read_report,
)
from _gate.core.reports import Names
from _gate.core.steps import report_file
from _gate.plugin.change_trace import OWN_TESTS
from _gate.runs.crossrun_run import copy_tree
from _gate.runs.entry import Contract, Earlier
from _gate.runs.pytest_run import PytestOptions, PytestRun, run_pytest
from _gate.runs.reuse import REUSED
from _gate.runs.traced import Trace


def collected_ids(inventory: Report | None) -> list[str]:
    """Test ids the inventory saw pytest collect in the patch tree (parameters folded)."""
    return list((inventory.evidence if inventory else {}).get("collected_patch") or [])


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


def crossran(crossrun: Report | None) -> PytestRun | None:
    """The crossrun's run on the patch build, when its report has one."""
    return outcomes_run((crossrun.evidence if crossrun else {}).get("patch"))


def inventoried(inventory: Report | None) -> PytestRun | None:
    """The inventory's run of the patch's tests on the patch build, when it made one."""
    run_time = (inventory.evidence if inventory else {}).get("run_time") or {}
    return outcomes_run((run_time.get("patch_run") or {}).get("outcomes"))


def outcomes_run(outcomes: object) -> PytestRun | None:
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


@dataclass(frozen=True)
class Inputs:
    """What the advisory tests run, and where their JUnit XML goes."""

    tree: Path  # the patch tree
    python: Path  # the patch build's python
    tests: tuple[str, ...]  # test files or folders
    timeout: float
    reuse: bool  # the crossrun's patch run is theirs (the tests are the base's)
    junit: Path  # beside the report
    changed: tuple[ChangedFile, ...] = ()  # the patch's changed lines, which their run traces


def inputs(j: Judgment) -> Inputs:
    junit = (j.reports / report_file("tests")).with_suffix(".xml")
    settings = j.config
    return Inputs(
        j.patch,
        j.built.patch,
        settings.tests,
        settings.advisory_timeout,
        reuses(j),
        junit,
        j.built.changed,
    )


def from_args(args: argparse.Namespace) -> Inputs:
    return Inputs(
        tree=args.tree,
        python=args.python,
        tests=tuple(args.tests or tree_tests(args.tree)),
        timeout=args.timeout,
        reuse=args.reuse or args.crossrun_report is not None,
        junit=args.report.with_suffix(".xml"),
    )


def reported(args: argparse.Namespace) -> Earlier:
    """By hand: the earlier steps' outcomes from the report files the flags name, where they
    are reports."""
    paths = {"assert-inventory": args.inventory_report, "crossrun": args.crossrun_report}
    found: dict[str, Report] = {}
    for step, path in paths.items():
        with contextlib.suppress(FailClosed):
            if path is not None:
                found[step] = read_report(path)
    return found


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    entries = given.tests
    # A file is collected whatever its name: pytest takes one named on its command line.
    folders = [f for f in entries if (given.tree / f).exists()]
    if not folders:
        return Outcome(PASS, f"none of {', '.join(entries)} in the patch", {"outcomes": {}})
    crossrun = earlier.get("crossrun")
    if given.reuse and crossrun is not None and crossrun.evidence.get("ran") is False:
        return not_run(given.junit)
    result = crossran(crossrun) if given.reuse else None
    source = "; unchanged from the base, as the crossrun ran them on the patch build"
    if result is None and (result := inventoried(earlier.get("assert-inventory"))):
        source = "; as the assert inventory ran them on the patch build"
    if result is None:
        source = ""
        trace = Trace(given.changed, OWN_TESTS, tests=True) if given.changed else None
        result = patch_tests(given.python, given.tree, folders, given.timeout, trace)
    outcomes = result.outcomes or {}
    counts = {
        k: sum(1 for v in outcomes.values() if v == k)
        for k in ("passed", "failed", "error", "skipped")
    }
    shown = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no results"
    suspicious = suspicions(result, collected_ids(earlier.get("assert-inventory")))
    note = f"; suspicious: {suspicious[0]}" if suspicious else source
    junit = given.junit
    write_junit(junit, outcomes)
    evidence = {
        "exit_code": result.exit_code,
        "junit": junit.name,
        "counts": counts,
        "suspicious": suspicious,
        "outcomes": outcomes,
        "output_tail": result.output_tail,
        **({"coverage": result.coverage.as_dict()} if result.coverage else {}),
    }
    return Outcome(PASS, f"patch tests: {shown}{note}", evidence)


def not_run(junit: Path) -> Outcome:
    """The crossrun ran nothing (the patch's build and tests are the parent's): neither do
    these tests, as a CI path filter skips them for a docs-only change."""
    write_junit(junit, {})
    summary = f"patch tests: not run, {REUSED}: the patch's build and tests are the parent's"
    evidence = {"junit": junit.name, "outcomes": {}, "run": REUSED, "suspicious": []}
    return Outcome(PASS, summary, evidence)


def patch_tests(
    python: Path, tree: Path, folders: Sequence[str], timeout: float, trace: Trace | None
) -> PytestRun:
    """The patch's tests from a private copy of its tree, which they may write to (the
    worktree stays as checked out for every other step); `trace`: which ran each changed
    line."""
    with tempfile.TemporaryDirectory(prefix="advisory-") as name:
        copy = copy_tree(tree, Path(name) / "tree", hidden=()).resolve()
        how = PytestOptions(timeout=timeout, trusted=False, writable=(copy,), trace=trace)
        result = run_pytest(python, copy, folders, how)
    return result.renamed(lambda text: Names(((str(copy), f"{tree.resolve()}/"),))(text))


def reuses(j: Judgment) -> bool:
    """Whether the crossrun's patch run is these tests' own: the crossrun ran them whole, and
    the patch left the test folders and every file that configures pytest at the root as the
    base has them."""
    if j.config.crossrun == "off" or not j.shard.whole:
        return False
    return not touches_tests(j.changes, j.config.tests)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--tree", type=Path, required=True, help="patch tree")
    p.add_argument("--python", type=Path, required=True, help="patch build's python")
    p.add_argument(
        "--tests", nargs="+", help="test files or folders (default: `tests:` of the tree)"
    )
    p.add_argument("--timeout", type=float, default=Config.advisory_timeout, help="seconds")
    p.add_argument("--inventory-report", type=Path, help="assert-inventory.json (collected ids)")
    p.add_argument(
        "--reuse", action="store_true", help="take the crossrun's patch run (tests unchanged)"
    )
    p.add_argument(
        "--crossrun-report",
        type=Path,
        help="crossrun.json: its patch run, when tests are unchanged",
    )
    add_report_arg(p, "tests")
    return p


STEP = Contract("tests", parser, from_args, inputs, decide, reported)
