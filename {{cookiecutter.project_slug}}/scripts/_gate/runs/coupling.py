"""Parent tests coupled to internals the patch moved: the crossrun's one way to a review.

A parent test that reaches into the package's internals (imports a private helper, patches a
function by its dotted name) fails on a patch that moves them although the behaviour it checks
is kept, and the patch then updates the test. Such a failure is a review, not a block, when
the test failed on a name that is gone (an import, a mock.patch target, an attribute looked up
while setting up or importing), the patch changed the test's file, and the patch's version of
the test passes on the patch build. Everything else a parent test meets on the patch, a
failing assertion above all, stays the crossrun's finding. The patch's version shares an author
with the patch: its pass only turns a block into a code owner's review, never into a merge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _gate.core.protocol import Tampered
from _gate.runs.crossrun_run import Setup, tampered
from _gate.runs.crossrun_run import run as run_tests
from _gate.runs.env_probe import shadowing
from _gate.runs.perturbed_tests import PATCH

SET_UP = ("error",)  # pytest's outcome for a failure while collecting or setting up a test
ANY_PHASE = ("failed", "error")
MOCK = "AttributeError: <(?:module|class)"  # mock.patch("pkg.mod.name"), patch.object(...)
OWNER, NAME = r"'(?P<owner>[\w.]+)'", r"'(?P<name>\w+)'"
# The exception line pytest prints (`E   ...`) for a name that is gone, with the phases in which
# it means that: an AttributeError in a test's body is behaviour, at set-up it is a lookup.
MOVED = (
    (re.compile(f"ModuleNotFoundError: No module named {OWNER}"), ANY_PHASE),
    (re.compile(f"ImportError: cannot import name {NAME} from {OWNER}"), ANY_PHASE),
    (re.compile(f"{MOCK} {OWNER}[^>]*> does not have the attribute {NAME}"), ANY_PHASE),
    (re.compile(f"AttributeError: (?:module|type object) {OWNER} has no attribute {NAME}"), SET_UP),
)


def moved_name(outcome: str, message: str) -> str:
    """The dotted name a test failed on because it is gone, or "" where it failed otherwise."""
    for line in message.splitlines():
        if not line.startswith("E "):
            continue
        text = line[1:].strip()
        for pattern, phases in MOVED:
            found = pattern.match(text)
            if found and outcome in phases:
                parts = found.groupdict()
                return ".".join(filter(None, (parts["owner"], parts.get("name"))))
    return ""


def changed_file(node: str, parent: Path, patch: Path) -> bool:
    """Whether the patch changed the file that holds the test `node` (a test it deleted has no
    version of its own to pass)."""
    rel = node.split("::", 1)[0]
    old, new = parent / rel, patch / rel
    return new.is_file() and (not old.is_file() or old.read_bytes() != new.read_bytes())


def moved_internals(
    tree: Path, patch: tuple[Path, Path] | None, rows: Sequence[dict[str, Any]], setup: Setup
) -> dict[str, str]:
    """The lost tests (`rows` of the crossrun) coupled to internals the patch moved, each with
    the name it failed on: those the patch changed whose own version passes on the patch
    build (`patch`: its Python and its tree), run as the parent's were (a private copy,
    canaries, the build's modules hidden). `tree`: the base tree."""
    if patch is None:
        return {}
    python, patch_tree = patch
    names = {
        row["id"]: moved_name(row["outcome"], row["message"])
        for row in rows
        if not row["allowed"] and changed_file(row["id"], tree, patch_tree)
    }
    names = {node: name for node, name in names.items() if name}
    if not names:
        return {}
    files = sorted({node.split("::", 1)[0] for node in names})  # a test it renamed is not there
    try:
        own = run_tests(python, patch_tree, files, setup)
    except Tampered as exc:
        raise tampered(PATCH, "run of its own version of its tests", exc) from None
    if shadowing(python, own, files):
        return {}  # it tested the tree's sources, not the build: no version of its own passed
    passed = {node for node, outcome in (own.outcomes or {}).items() if outcome == "passed"}
    return {node: name for node, name in names.items() if node in passed}
