"""Coverage a patch removes: a test deleted or weakened whose parent version still passes on the
patch build keeps the behaviour it checked, so the finding asks for a reviewer, not a block."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import _gate.inventory.probes
from _gate.core.protocol import FAIL_CLOSED, NEEDS_REVIEW, PASS, Outcome

# Findings of a test that checks less than its parent version did: where that version still
# passes on the patch build, the behaviour it checked is kept, and a reviewer decides.
COVERAGE_RULES = frozenset(
    {"deleted-test", "deleted-file", "fewer-asserts", "weakened", "fewer-checks"}
)


def coverage_removed(
    blocking: Sequence[dict[str, Any]], outcomes: Mapping[str, str]
) -> list[dict[str, str]]:
    """Each blocking finding as a removed coverage ({id, rule}), when all of them are: a
    deleted or weakened test whose parent version passed on the patch build (`outcomes`: the
    crossrun's parent tests there), and the total drop they make. [] when any is not."""
    tests = [f for f in blocking if f["rule"] != "total-drop"]
    if not tests or not all(
        f["rule"] in COVERAGE_RULES and passed_on_patch(str(f["id"]), outcomes) for f in tests
    ):
        return []
    return [{"id": str(f["id"]), "rule": str(f["rule"])} for f in tests]


def passed_on_patch(test: str, outcomes: Mapping[str, str]) -> bool:
    """Whether a parent test (an id without parameters, or a file) ran on the patch build and
    every id of it passed."""
    ids = [
        n for n in outcomes if _gate.inventory.probes.family(n) == test or n.split("::")[0] == test
    ]
    return bool(ids) and all(outcomes[n] == "passed" for n in ids)


def reviewed_coverage(
    removed: Sequence[dict[str, str]],
    counts: str,
    note: str,
    evidence: dict[str, Any],
    review: bool,
) -> Outcome:
    more = f" and {len(removed) - 1} more" if len(removed) > 1 else ""
    what = f"coverage removed: {removed[0]['id']} ({removed[0]['rule']}){more}"
    if review:
        return Outcome(PASS, f"{counts}; {what}, reviewed (ORACLE_REVIEW=1){note}", evidence)
    return Outcome(
        FAIL_CLOSED,
        f"{counts}; {what}: its parent version passes on the patch build, so the behaviour "
        f"stays; a code owner reviews the removal, then ORACLE_REVIEW=1{note}",
        evidence,
        status=NEEDS_REVIEW,
    )
