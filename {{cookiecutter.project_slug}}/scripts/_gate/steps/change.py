"""What the patch's changed package code newly reaches for: the capability diff.

    python scripts/change.py --parent-tree BASE --patch-tree HEAD --package src/shop [...]

The package is what the patch's wheel installs (the build step's files; by hand, the folders
`--package` names in both trees). For each package file the patch changed, the capabilities
each function reaches directly are read from the base's and the patch's source
(_gate/change/capabilities.py: no code runs), and every capability a function gains is listed
with its file, line and function. Code that behaves only in the gate's world (a sandbox told by
its user namespace, a clock told from its shift, a terminal of another width) must read that
world first, and this lists where it began to.
A network, process, ioctl, dynamic-code or native-code capability new to its module (to the
whole package, for a module the base did not have) needs a code owner's review
(`needs-review`) unless the base's judge.yaml `capabilities:` lists it for that module or a
package above it (`shop.cli: [process]`); under ORACLE_REVIEW=1 it is accepted. Every other
gain is reported, never a verdict by itself.
Exit codes: 0 pass (gains reported), 2 fail closed: status `needs-review` for a reviewed
capability the patch adds, `error` when a changed file cannot be read.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from _gate.change.capabilities import Added, Reach, added, reaches
from _gate.change.lines import Files, installed
from _gate.core.config import CAPABILITIES, load_config
from _gate.core.context import ChangedFile, Judgment, review_requested
from _gate.core.protocol import (
    BLOCK,
    EXIT_CODES_HELP,
    FAIL_CLOSED,
    NEEDS_REVIEW,
    PASS,
    FailClosed,
    Outcome,
    add_report_arg,
)
from _gate.core.reports import spans
from _gate.plugin.change_trace import OWN_TESTS
from _gate.runs.entry import Contract, Earlier
from _gate.runs.traced import Coverage, covered

SHOWN = 3  # gains named in the summary; the evidence lists them all


@dataclass(frozen=True)
class Inputs:
    """What the capability diff reads."""

    parent_tree: Path
    patch_tree: Path
    # By hand, the package's folders or files in both trees; in a judge run (), and the
    # build step's files say what each wheel installs from where.
    package: tuple[str, ...]
    allowed: tuple[str, ...]  # judge.yaml `capabilities:`, as `module:capability`
    reviewed: bool  # ORACLE_REVIEW=1
    # The changed lines of code the runs of the patch's build traced (by hand: none, and no
    # coverage is judged).
    changed: tuple[ChangedFile, ...] = ()


def inputs(j: Judgment) -> Inputs:
    return Inputs(j.parent, j.patch, (), j.config.capabilities, j.review, j.built.changed)


def from_args(args: argparse.Namespace) -> Inputs:
    allowed = load_config(args.config).capabilities if args.config else ()
    return Inputs(args.parent_tree, args.patch_tree, tuple(args.package), allowed, args.reviewed)


# The steps whose runs of the patch's build are traced: the cases, the base's properties and
# tests (evidence the patch cannot edit), and the patch's own tests (shown, never counted).
TRACED = ("replay", "oracle", "crossrun", "assert-inventory", "tests")


def coverage_of(earlier: Earlier) -> Coverage:
    """Which evidence ran each changed line, over every traced step that reported."""
    return covered(coverage_in(earlier[name].evidence) for name in TRACED if name in earlier)


def coverage_in(evidence: Mapping[str, Any]) -> Coverage | None:
    """A traced step's coverage (the inventory's run of the patch's tests is in its run-time
    evidence); None where it traced nothing."""
    row = evidence.get("coverage") or (evidence.get("run_time") or {}).get("coverage")
    return Coverage.from_dict(row) if row else None


@dataclass(frozen=True)
class Unseen:
    """Changed lines of code that evidence the patch cannot edit did not run, or ran with a
    branch on them taken one way only."""

    unrun: tuple[int, ...] = ()
    one_way: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.unrun or self.one_way)

    def within(self, span: frozenset[int]) -> Unseen:
        return Unseen(
            tuple(n for n in self.unrun if n in span), tuple(n for n in self.one_way if n in span)
        )

    @property
    def said(self) -> str:
        parts = [f"no case, property or test ran line(s) {spans(self.unrun)}"] if self.unrun else []
        if self.one_way:
            parts.append(f"a branch on line(s) {spans(self.one_way)} went one way only")
        return " and ".join(parts)


def unseen(changed: Sequence[ChangedFile], coverage: Coverage) -> dict[str, Unseen]:
    """Per changed file, what the evidence did not see."""
    found = {}
    for row in changed:
        ran = coverage.hits.get(row.source, {})
        unrun = tuple(n for n in row.lines if not counted(ran.get(n, [])))
        one_way = coverage.one_way(row.source, counted) - set(unrun)
        found[row.source] = Unseen(unrun, tuple(sorted(one_way)))
    return found


def counted(evidence: Sequence[str]) -> bool:
    """Whether evidence the patch cannot edit ran a line: not only the patch's own tests."""
    return any(name.split(" ", 1)[0] != OWN_TESTS for name in evidence)


def ran_in(gain: Added, coverage: Coverage) -> list[str]:
    """The evidence that ran any line of the gain's function."""
    found: list[str] = []
    for line, evidence in sorted(coverage.hits.get(gain.path, {}).items()):
        if line in gain.span:
            found += [name for name in evidence if name not in found]
    return found


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    changed, gains = gained(given, earlier)
    seen = Seen(coverage_of(earlier), given.changed, given.allowed, given.reviewed)
    return concluded(changed, gains, seen)


@dataclass(frozen=True)
class Seen:
    """What the runs of the patch's build saw of its changed lines, and what a code owner
    allowed: with the gains, all a conclusion needs (a merge of shards concludes again)."""

    coverage: Coverage
    changed: tuple[ChangedFile, ...]  # () by hand: no coverage is judged
    allowed: tuple[str, ...]
    reviewed: bool

    def evidence(self, files: Mapping[str, Unseen]) -> dict[str, Any]:
        if not self.changed:
            return {}
        return {
            "coverage": self.coverage.as_dict(),
            "changed": {row.source: list(row.lines) for row in self.changed},
            "unseen": {
                path: {"unrun": list(found.unrun), "one_way": list(found.one_way)}
                for path, found in files.items()
            },
            "allowed": list(self.allowed),
            "reviewed": self.reviewed,
        }


def concluded(changed: int, gains: Sequence[Added], seen: Seen) -> Outcome:
    """The step's outcome from the gains and what the runs saw."""
    coverage = seen.coverage
    if coverage.tampered:
        return Outcome(
            BLOCK,
            f"the patch's code acted against the gate's change coverage: {coverage.tampered[0]}"
            f" ({len(coverage.tampered)} in all)",
            {"changed_files": changed, "coverage": coverage.as_dict()},
        )
    files = unseen(seen.changed, coverage)
    untested = {gain: files.get(gain.path, Unseen()).within(gain.span) for gain in gains}
    review = [gain for gain in gains if needs_review(gain, seen.allowed) or untested[gain]]
    waits = [] if seen.reviewed else review
    # Each gain, and whether it waits for a code owner (the summary, SARIF and review read it).
    rows = [gain_row(gain, seen, gain in waits, untested[gain]) for gain in gains]
    evidence = {"changed_files": changed, "capabilities": rows, **seen.evidence(files)}
    head = f"change: {changed} package file(s) changed"
    if not gains:
        return Outcome(PASS, f"{head}; no function reaches anything it did not", evidence)
    summary = (
        f"{head}; {len(gains)} capabilit{'y' if len(gains) == 1 else 'ies'} gained ({shown(gains)})"
    )
    if not review:
        return Outcome(PASS, summary, evidence)
    if not waits:
        return Outcome(
            PASS, f"{summary}; {review[0].said} accepted under ORACLE_REVIEW=1", evidence
        )
    return Outcome(
        FAIL_CLOSED,
        f"{summary}; {why_review(seen, review[0], untested[review[0]])}",
        evidence,
        status=NEEDS_REVIEW,
    )


def gain_row(gain: Added, seen: Seen, waits: bool, untested: Unseen) -> dict[str, object]:
    """A gain as the report holds it, with the function's changed lines of code (`lines`:
    what a merge of shards judges again)."""
    lines = next((row.lines for row in seen.changed if row.source == gain.path), ())
    mine = [n for n in lines if n in gain.span]
    return {**gain.row(), "review": waits, "unseen": untested.said, "lines": mine}


def rejudged(evidence: Mapping[str, Any], coverage: Coverage) -> Outcome:
    """The step concluded again from its report and the coverage of every shard's runs (the
    lead shard's run saw its own shard's alone)."""
    gains = [
        Added(
            str(row["module"]),
            str(row["path"]),
            str(row["function"]),
            str(row["capability"]),
            int(row["line"]),
            bool(row["new_to_module"]),
            frozenset(int(n) for n in row["lines"]),
        )
        for row in evidence["capabilities"]
    ]
    changed = tuple(
        ChangedFile("", str(path), tuple(int(n) for n in lines))
        for path, lines in evidence["changed"].items()
    )
    allowed = tuple(str(row) for row in evidence["allowed"])
    seen = Seen(coverage, changed, allowed, bool(evidence["reviewed"]))
    return concluded(int(evidence["changed_files"]), gains, seen)


def gained(given: Inputs, earlier: Earlier) -> tuple[int, list[Added]]:
    """How many package files the patch changed, and what each changed function gains."""
    parent, patch = package_files(given, earlier)
    changed = [
        path
        for path, source in sorted(patch.items())
        if path not in parent
        or read(given.parent_tree, parent[path]) != read(given.patch_tree, source)
    ]
    base_reach: list[Reach] = []
    patch_reach: list[Reach] = []
    for path in changed:
        module = module_name(path)
        if path in parent:
            base_reach += parsed(given.parent_tree, parent[path], module, "base:")
        patch_reach += parsed(given.patch_tree, patch[path], module, "head:")
    moved = [path for path in changed if path not in parent]
    package = package_reach(given.parent_tree, parent) if moved else ()
    return len(changed), added(base_reach, patch_reach, package)


def why_review(seen: Seen, first: Added, untested: Unseen) -> str:
    """What waits for a code owner: a reviewed kind of capability new to its module, or a
    capability in a function with changed lines no evidence ran."""
    if needs_review(first, seen.allowed):
        return (
            f"new to its module: {first.said}: a code owner reviews it, then lists "
            f"`{first.module}: [{first.capability}]` under judge.yaml `capabilities:` or judges "
            "again with ORACLE_REVIEW=1"
        )
    ran = ran_in(first, seen.coverage)
    shown = f"; ran: {', '.join(ran[:2])}" if ran else "; no evidence ran the function"
    return (
        f"behaves by the {first.capability} at {first.path}:{first.line} in {first.function}, "
        f"and {untested.said}{shown}: a code owner reviews it (ORACLE_REVIEW=1), or a case "
        "runs it"
    )


def package_reach(tree: Path, files: Files) -> set[str]:
    """Everything any module of the base's package reaches: what a module the base did not
    have (new, or moved there) is compared with."""
    found: set[str] = set()
    for path, source in files.items():
        with contextlib.suppress(FailClosed):  # a module unread reaches nothing: gains look new
            for reach in parsed(tree, source, module_name(path), "base:"):
                found.update(reach.capabilities)
    return found


def shown(gains: Sequence[Added]) -> str:
    more = f", and {len(gains) - SHOWN} more" if len(gains) > SHOWN else ""
    return ", ".join(gain.said for gain in gains[:SHOWN]) + more


def needs_review(gain: Added, allowed: Sequence[str]) -> bool:
    """A reviewed kind of capability new to its module, which judge.yaml does not list for the
    module or a package above it."""
    if not (CAPABILITIES[gain.capability] and gain.new_to_module):
        return False
    parts = gain.module.split(".")
    above = {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
    return not any(row == f"{module}:{gain.capability}" for module in above for row in allowed)


def package_files(given: Inputs, earlier: Earlier) -> tuple[Files, Files]:
    """Each side's Python files of the package, by the path the wheel installs them at."""
    if given.package:
        package = given.package
        return named_files(given.parent_tree, package), named_files(given.patch_tree, package)
    build = earlier.get("build")
    if build is None or "patch" not in build.evidence:
        raise FailClosed("the build step's list of the files each wheel installs is missing")
    return installed(build.evidence["parent"]), installed(build.evidence["patch"])


def named_files(tree: Path, package: Sequence[str]) -> dict[str, str]:
    """By hand: every .py file under each named folder (or the named file), installed at its
    path from the folder's parent (`src/shop/x.py` as `shop/x.py`)."""
    found: dict[str, str] = {}
    for entry in package:
        root = PurePosixPath(entry.strip("/"))
        folder = tree / root
        paths = [folder] if folder.is_file() else sorted(folder.rglob("*.py"))
        for path in paths:
            source = PurePosixPath(path.relative_to(tree).as_posix())
            found[source.relative_to(root.parent).as_posix()] = source.as_posix()
    return found


def module_name(path: str) -> str:
    """`shop/cli.py` -> shop.cli, `shop/__init__.py` -> shop."""
    parts = PurePosixPath(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read(tree: Path, source: str) -> bytes:
    try:
        return (tree / source).read_bytes()
    except OSError as exc:
        raise FailClosed(
            f"{source}: cannot be read ({exc.strerror}): the capability diff cannot see it"
        ) from None


def parsed(tree: Path, source: str, module: str, label: str) -> list[Reach]:
    try:
        return reaches(read(tree, source), module, source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None) or 0
        raise FailClosed(
            f"{label}{source} line {line}: not Python this interpreter reads "
            f"({type(exc).__name__}): the capability diff cannot see it"
        ) from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--parent-tree", type=Path, required=True, help="the base tree")
    p.add_argument("--patch-tree", type=Path, required=True, help="the head tree")
    p.add_argument(
        "--package",
        nargs="+",
        required=True,
        help="the package's folders or files in both trees (src/shop)",
    )
    p.add_argument("--config", type=Path, help="judge.yaml whose `capabilities:` is reviewed")
    p.add_argument(
        "--reviewed",
        action="store_true",
        default=review_requested(),
        help="a code owner reviewed the patch (ORACLE_REVIEW=1)",
    )
    add_report_arg(p, "change")
    return p


STEP = Contract("change", parser, from_args, inputs, decide)
