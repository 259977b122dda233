"""Which of the patch's test modules must run on the patch build, when the crossrun has run the
rest: the inventory's run of the patch's tests and the crossrun's run of the base's tests on
the patch build are one run for every test module both trees hold byte for byte, when nothing
else those modules could read differs.

Both runs work from a copy of a tree without the build's own modules (crossrun_run.copied). The
patch's run is cut to its changed test modules only where every file in which the two copies
differ is a test module (a file pytest collects tests from, in either tree): a changed
conftest.py, helper, data file, document or pytest configuration can change what an unchanged
module does, so then every module runs. An unchanged module that names a changed one (an
import, a plugin string, a path: by its name as a word) runs again too, and so on for the
modules that name it, since it imports or reads what the patch changed.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from _gate.crossrun_run import copied
from _gate.pytest_run import PytestRun


def to_run(
    parent: Path, patch: Path, hidden: Sequence[str], test_files: Collection[str]
) -> list[str] | None:
    """The test modules the patch changed, added or deleted, and those that name one (None:
    every module must run, as `tests:` names them)."""
    before, after = set(copied(parent, hidden)), set(copied(patch, hidden))
    differ = before ^ after
    differ |= {rel for rel in before & after if not same(parent / rel, patch / rel)}
    if not differ <= set(test_files):
        return None
    dirty = set(differ)
    readers = sorted(rel for rel in before & after if rel.endswith(".py") or rel in test_files)
    sources = {rel: (patch / rel).read_text("utf-8", "replace") for rel in readers}
    while True:  # the modules that name a dirty one, until none is added
        words = {Path(rel).stem for rel in dirty}
        named = {rel for rel, text in sources.items() if rel not in dirty and names(text, words)}
        if not named:
            return sorted(dirty)
        if not named <= set(test_files):
            return None  # a conftest or helper names a changed module: any module may
        dirty |= named


def same(one: Path, other: Path) -> bool:
    return one.stat().st_size == other.stat().st_size and one.read_bytes() == other.read_bytes()


def names(text: str, words: Collection[str]) -> bool:
    return any(re.search(rf"\b{re.escape(word)}\b", text) for word in words)


def combined(run: PytestRun | None, crossran: PytestRun, ran: Collection[str]) -> PytestRun:
    """The patch's tests' run: `run` for the modules in `ran`, the crossrun's patch run for
    every module the patch left as it was (a module both trees hold that is not in `ran`).
    `ran` holds the deleted modules too, whose tests are in neither."""
    kept = {
        node: outcome
        for node, outcome in (crossran.outcomes or {}).items()
        if module(node) not in ran
    }
    checks = {node: c for node, c in crossran.checks.items() if module(node) not in ran}
    if run is None:  # the patch only deleted test modules
        return replace(crossran, outcomes=kept, checks=checks)
    if run.outcomes is None:  # no report: the run says so itself
        return run
    return replace(
        run,
        outcomes={**kept, **(run.outcomes or {})},
        checks={**checks, **run.checks},
    )


def module(node: str) -> str:
    """The file of a node id (a module's own error is its file alone)."""
    return node.split("::", 1)[0]


def shared(outcomes: Mapping[str, str], ran: Collection[str]) -> int:
    """How many of `outcomes` are the crossrun's."""
    return sum(module(node) not in ran for node in outcomes)
