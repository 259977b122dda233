"""Which of the patch's test modules must run on the patch build, when the crossrun has run the
rest: the inventory's run of the patch's tests and the crossrun's run of the base's tests on
the patch build are one run for every test module both trees hold byte for byte, when nothing
those modules could read differs.

Both runs work from a copy of a tree without the build's own modules (crossrun_run.copied).
Where the copies differ in a file of the test folders or pytest's configuration that is not a
test module (a conftest.py, a helper, a data file), every module runs: pytest loads those for
all of them. Elsewhere (a changelog, documents, a script) a changed file matters only to the
modules that read it. So a file is dirty when the patch changed it, or when a file the tests
load names a dirty one (a test module, a Python file of the test folders, or a module of the
copy they import: by a dirty file's name or stem as a word, an import, a plugin string, a
path; a file outside the test folders by its folders' names too, which a glob names), until
no file is added. Every dirty test module runs; if a dirty file is one pytest loads for all
of them, every module runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from _gate.core.context import test_input
from _gate.runs.crossrun_run import copied
from _gate.runs.pytest_run import PytestRun


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
    loaded = {rel for rel in after if rel in test_files or (test_input(rel, tests) and py(rel))}
    sources = {rel: text for rel, text in imports(patch, loaded, after).items() if rel in before}
    while True:  # the files that name a dirty one, until none is added
        if any(test_input(rel, tests) and rel not in test_files for rel in dirty):
            return None  # pytest loads it for every module
        words = {word for rel in dirty for word in named_by(rel, tests, test_files)}
        named = {rel for rel, text in sources.items() if rel not in dirty and names(text, words)}
        if not named:
            return sorted(rel for rel in dirty if rel in test_files)
        dirty |= named


def py(rel: str) -> bool:
    return rel.endswith(".py")


def imports(root: Path, start: Collection[str], files: Collection[str]) -> dict[str, str]:
    """The text of `start`'s files and of every Python file of `files` they import, and so on:
    what the tests can read by importing. A module is matched by its dotted name's path at
    the end of a file's (`a.b` is `x/a/b.py` or `x/a/b/__init__.py`): more, never fewer."""
    modules: dict[str, list[str]] = {}
    for rel in filter(py, files):
        parts = rel.removesuffix(".py").removesuffix("/__init__").split("/")
        for depth in range(1, len(parts) + 1):
            modules.setdefault(".".join(parts[-depth:]), []).append(rel)
    texts: dict[str, str] = {}
    todo = sorted(start)
    while todo:
        rel = todo.pop()
        if rel in texts:
            continue
        texts[rel] = (root / rel).read_text("utf-8", "replace")
        if py(rel):
            todo += [f for name in imported(texts[rel]) for f in modules.get(name, ())]
    return texts


def imported(text: str) -> set[str]:
    """The dotted names a module's imports name: `from a import b` names `a` and `a.b`."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()  # pytest cannot import it either: its own error
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


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
    same = {node: r for node, r in crossran.reflexive.items() if module(node) not in ran}
    if run is None:  # the patch only deleted test modules
        return replace(crossran, outcomes=kept, checks=checks, reflexive=same)
    if run.outcomes is None:  # no report: the run says so itself
        return run
    return replace(
        run,
        outcomes={**kept, **run.outcomes},
        checks={**checks, **run.checks},
        reflexive={**same, **run.reflexive},
    )


def module(node: str) -> str:
    """The file of a node id (a module's own error is its file alone)."""
    return node.split("::", 1)[0]


def shared(outcomes: Mapping[str, str], ran: Collection[str]) -> int:
    """How many of `outcomes` are the crossrun's."""
    return sum(module(node) not in ran for node in outcomes)
