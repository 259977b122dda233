"""The pytest plugin of strength's mutmut runs (scripts/strength.py loads it with `-p` in each).

mutmut stops a mutant at its first failing test (`-x`) and hands over its tests fastest first:
the cassette tests (strength_cassettes.py) run first the cases that killed a mutant of the same
function earlier in the run, then those that killed any, then the rest as mutmut gave them. A
kill is a kill in any order, so the score stays what it is; most mutants then end at their
first case (on the example, a killed mutant ran 3.9 cases before, 2.1 now).

A property (hypothesis) ends at its first failing example: a mutant is killed or not by it,
and shrinking that example and explaining it would run more examples than finding it did.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import pytest


@pytest.hookimpl(trylast=True)  # on the profile the project's or the oracle's set
def pytest_configure() -> None:
    try:
        from hypothesis import Phase, settings
    except ImportError:  # no property here
        return
    current = settings()  # the profile loaded now
    kept = [phase for phase in current.phases if phase not in (Phase.shrink, Phase.explain)]
    settings.register_profile("oracle-strength", current, phases=kept)
    settings.load_profile("oracle-strength")


def kills(function: str) -> Path:
    """The folder of the kills of `function`'s mutants ("" for any function's) in this mutmut
    run, a file per case, a byte per kill: in its TMPDIR, which every mutant's worker shares."""
    tmp = Path(os.environ.get("TMPDIR") or tempfile.gettempdir())
    return tmp / "oracle-kills" / short(function)


def short(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def killed_by(case_id: str, mutant: str) -> None:
    """Count the kill of `mutant` by the case, for the mutants after it (an append of one byte
    is whole, whichever workers append at once)."""
    for function in (mutant.rpartition("__mutmut_")[0], ""):
        folder = kills(function)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / short(case_id), "ab") as tally:
            tally.write(b".")


def counted(folder: Path) -> dict[str, int]:
    """Kills per case, by the case's short name."""
    if not folder.is_dir():
        return {}
    return {entry.name: entry.stat().st_size for entry in os.scandir(folder)}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A mutant's cases, those that killed most of its function's other mutants first, then
    those that killed most of any (the sort is stable: the rest, and tests of no case, as
    mutmut gave them)."""
    function = os.environ.get("MUTANT_UNDER_TEST", "").rpartition("__mutmut_")[0]
    if not function:
        return
    here, anywhere = counted(kills(function)), counted(kills(""))

    def rank(item: pytest.Item) -> tuple[int, int]:
        callspec = getattr(item, "callspec", None)
        if callspec is None or "case_id" not in callspec.params:
            return (0, 0)
        name = short(str(callspec.params["case_id"]))
        return (-here.get(name, 0), -anywhere.get(name, 0))

    items.sort(key=rank)
