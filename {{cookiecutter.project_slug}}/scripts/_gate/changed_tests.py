"""Which of the patch's test modules must run on the patch build, when the crossrun has run the
rest: the inventory's run of the patch's tests and the crossrun's run of the base's tests on
the patch build are one run for every test module both trees hold byte for byte, when nothing
those modules could read differs.

Both runs work from a copy of a tree without the build's own modules (crossrun_run.copied).
Where the copies differ in a file of the test folders or pytest's configuration that is not a
test module (a conftest.py, a helper, a data file), every module runs: pytest loads those for
all of them. Elsewhere (a changelog, documents, a script) a file differs for the modules that
name it. So a file is dirty when the patch changed it, or when a Python file or test module of
the copy names a dirty one (its name or stem as a word: an import, a plugin string, a path; a
changed file outside the test folders by its folders' names too, which a glob names), until no
file is added. Every dirty test module runs; if a dirty file is one pytest loads for all of
them, every module runs.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from _gate.context import test_input
from _gate.crossrun_run import copied
from _gate.pytest_run import PytestRun


def to_run(
    parent: Path,
    patch: Path,
    hidden: Sequence[str],
    tests: Sequence[str],
    test_files: Collection[str],
) -> list[str] | None:
    """The test modules the patch changed, added or deleted, and those that name a dirty file
    (None: every module must run, as `tests:` names them)."""
    before, after = set(copied(parent, hidden)), set(copied(patch, hidden))
    dirty = before ^ after
    dirty |= {rel for rel in before & after if not same(parent / rel, patch / rel)}
    readers = sorted(rel for rel in before & after if rel.endswith(".py") or rel in test_files)
    sources = {rel: (patch / rel).read_text("utf-8", "replace") for rel in readers}
    while True:  # the files that name a dirty one, until none is added
        if any(test_input(rel, tests) and rel not in test_files for rel in dirty):
            return None  # pytest loads it for every module
        words = {word for rel in dirty for word in named_by(rel, tests, test_files)}
        named = {rel for rel, text in sources.items() if rel not in dirty and names(text, words)}
        if not named:
            return sorted(rel for rel in dirty if rel in test_files)
        dirty |= named


def named_by(rel: str, tests: Sequence[str], test_files: Collection[str]) -> set[str]:
    """The words a file that reads `rel` would hold: its name and stem, and for a file outside
    the test folders its folders' names (a glob of docs/*.md names `docs`)."""
    path = Path(rel)
    words = {path.name, path.stem}
    if rel not in test_files and not test_input(rel, tests):
        words |= set(path.parent.parts)
    return words


def same(one: Path, other: Path) -> bool:
    return one.stat().st_size == other.stat().st_size and one.read_bytes() == other.read_bytes()


def names(text: str, words: Collection[str]) -> bool:
    """Whether `text` holds one of `words` with no word character on either side."""
    spelled = "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))
    return bool(words) and re.search(rf"(?<!\w)(?:{spelled})(?!\w)", text) is not None


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
