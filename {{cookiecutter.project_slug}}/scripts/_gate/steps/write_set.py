"""Classify every path the patch wrote, over all commits of the branch, against the base.

    python scripts/write_set.py --base MERGE_BASE --head HEAD

Classes: `protected` (the judge and its evidence, and the build configuration of
_gate/runs/build_config.py: needs a code owner's review, then ORACLE_REVIEW=1),
`fixtures` (judged by fixtures.lock, reported here), `tests` (the patch's own tests: advisory),
`source` (everything else). Renames count on both sides, names are read with -z. A merge
commit counts too: what it wrote against a base-side parent, and any path it made differ from
every parent, so an edit made in a merge and reverted later is still seen; what merging the
base back in brought is the base's, not the patch's.
Exit codes: 0 no protected path touched (or ORACLE_REVIEW=1), 2 fail closed: status
`needs-review` when a protected path was touched (the summary names each with its rule),
`error` when git or config input is bad. This step never blocks with 1.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from _gate.core.config import Config, load_config
from _gate.core.context import Change, Judgment, review_requested
from _gate.core.patterns import PLACEHOLDER_OWNER, codeowners, matches, owners, placeholder
from _gate.core.protocol import (
    EXIT_CODES_HELP,
    FAIL_CLOSED,
    NEEDS_REVIEW,
    PASS,
    Outcome,
    add_report_arg,
)
from _gate.runs.build_config import build_changes, metadata_edits
from _gate.runs.entry import Contract, Earlier
from _gate.runs.git import changes, git, parse_name_status, resolve_commit

FIXTURES = "fixtures/"
SHOWN = 3  # protected paths named in the summary; the evidence lists them all
TEST_NAME = re.compile(r"^(test_.*\.py|.*_test\.py|conftest\.py)$")


def merge_writes(repo: Path, base: str, head: str) -> list[tuple[str, list[str]]]:
    """What the branch's merges wrote, which `git log` never shows.

    Against a parent outside the branch (the base merged back in), the merge's whole diff is the
    patch's: what the base brought is in that parent already. Against a parent inside the branch
    the diff is the other side's commits, listed on their own, so only paths differing from
    every parent count there (an edit or a resolution made in the merge itself).
    """
    inside = set(git(repo, "rev-list", f"{base}..{head}").split())
    rows: list[tuple[str, list[str]]] = []
    for line in git(repo, "rev-list", "--merges", "--parents", f"{base}..{head}").splitlines():
        merge, *parents = line.split()
        combined = ("diff-tree", "--no-commit-id", "-z", "-r", "-c", "--name-status", merge)
        rows += parse_name_status(git(repo, *combined))
        for parent in (p for p in parents if p not in inside):
            rows += parse_name_status(git(repo, "diff", "-z", "--name-status", "-M", parent, merge))
    return rows


def touched(repo: Path, base: str, head: str, net: Sequence[Change]) -> dict[str, set[str]]:
    """Every path written by the branch: the net diff, each commit, each merge (both sides of
    renames)."""
    each = git(
        repo, "log", "-z", "--name-status", "-M", "--no-merges", "--format=", f"{base}..{head}"
    )
    rows = [(status, list(names)) for status, names in net]
    rows += parse_name_status(each) + merge_writes(repo, base, head)
    paths: dict[str, set[str]] = {}
    for status, names in rows:
        for name in names:
            paths.setdefault(name, set()).add(status[:1])
    return paths


def classify(
    path: str, protected: Sequence[str], tests: Sequence[str], build: Mapping[str, str]
) -> tuple[str, str]:
    rule = matches(path, protected) or build.get(path)
    if rule:
        return "protected", rule
    if path.startswith(FIXTURES):
        return "fixtures", FIXTURES
    in_tests = any(path == t or path.startswith(t.rstrip("/") + "/") for t in tests)
    if in_tests or TEST_NAME.match(PurePosixPath(path).name):
        return "tests", "test path"
    return "source", ""


@dataclass(frozen=True)
class Inputs:
    """What the write-set step decides on."""

    repo: Path
    base: str  # commits
    head: str
    config: Config
    review: bool  # a code owner reviewed the protected paths (ORACLE_REVIEW=1)
    changes: tuple[Change, ...]  # the net diff
    owned_by: Path  # the tree whose CODEOWNERS says who reviews


def inputs(j: Judgment) -> Inputs:
    return Inputs(j.repo, j.base, j.head, j.config, j.review, j.changes, j.parent)


def from_args(args: argparse.Namespace) -> Inputs:
    base = resolve_commit(args.repo, args.base, "--base")
    head = resolve_commit(args.repo, args.head, "--head")
    net = changes(args.repo, base, head)
    config = load_config(args.config)
    return Inputs(args.repo, base, head, config, review_requested(), net, args.repo)


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    """The patch's paths by class."""
    repo, base, head, review = given.repo, given.base, given.head, given.review
    classes: dict[str, list[dict[str, object]]] = {
        "protected": [],
        "fixtures": [],
        "tests": [],
        "source": [],
    }
    written = touched(repo, base, head, given.changes)
    build = build_changes(repo, base, head, written)
    metadata = metadata_edits(repo, base, head, written)
    for path, statuses in sorted(written.items()):
        kind, rule = (
            ("source", "")
            if path in metadata
            else classify(path, given.config.protected, given.config.tests, build)
        )
        classes[kind].append({"path": path, "status": "".join(sorted(statuses)), "rule": rule})
    counts = ", ".join(f"{len(v)} {k}" for k, v in classes.items())
    evidence = {"base": base, "head": head, "oracle_review": review, **classes}
    hits = classes["protected"]
    if hits and not review:
        unreviewable = nobody_reviews(given.owned_by, hits)
        if unreviewable:
            return Outcome(FAIL_CLOSED, unreviewable, evidence)
        return Outcome(FAIL_CLOSED, needs_review(hits), evidence, status=NEEDS_REVIEW)
    note = " (protected paths accepted under ORACLE_REVIEW=1)" if hits else ""
    return Outcome(PASS, f"write-set: {counts}{note}; tests in it are advisory", evidence)


def nobody_reviews(tree: Path, hits: Sequence[dict[str, object]]) -> str:
    """Why no review can be asked for ("": it can): the base's CODEOWNERS gives a protected
    path the patch touches to the template's placeholder alone (preconditions.py lets it
    judge where no review is needed)."""
    found = codeowners(tree)
    rules = found[1] if found else []
    paths = [str(hit["path"]) for hit in hits]
    path = next((path for path in paths if placeholder(owners(rules, path))), "")
    if not path:
        return ""
    return (
        f"patch touches protected path {path}, which CODEOWNERS gives only to "
        f"{PLACEHOLDER_OWNER}, the template's placeholder: nobody can review it; put your "
        "team's handle in the base's CODEOWNERS"
    )


def needs_review(hits: Sequence[dict[str, object]]) -> str:
    """What a code owner must look at, and what runs once they approved it."""
    shown = ", ".join(f"{hit['path']} (rule {hit['rule']})" for hit in hits[:SHOWN])
    more = f" and {len(hits) - SHOWN} more" if len(hits) > SHOWN else ""
    return (
        f"patch touches protected paths a code owner must review: {shown}{more}; the gate "
        "cannot judge edits to itself: once they approve, judge again with ORACLE_REVIEW=1"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--repo", type=Path, default=Path("."), help="git repository")
    p.add_argument("--base", required=True, help="the merge base (commit-ish)")
    p.add_argument("--head", default="HEAD", help="the patch (commit-ish)")
    p.add_argument("--config", type=Path, default=Path("oracle/judge.yaml"), help="judge.yaml")
    add_report_arg(p, "write-set")
    return p


STEP = Contract("write-set", parser, from_args, inputs, decide)
