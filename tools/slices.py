"""Pinned slices of real projects' histories (tests/data/*.bundle) that the gate is adopted
into, with the cases adoption adds: shared by the suite and `nox -s bench`.

yamllint-slice.bundle: 13 first-parent commits of adrienverge/yamllint (a setuptools project,
a `yamllint` console script, about 430 unittest-style tests), made as tests/test_history.py
describes for its slices; the gate is adopted at its third commit.
"""

from __future__ import annotations

from tools.bakery import TEMPLATE

YAMLLINT = TEMPLATE / "tests" / "data" / "yamllint-slice.bundle"
YAMLLINT_START = "main~10"
# A linter's cases: problems found (exit 1, on purpose: --yes), a clean file, its version.
YAMLLINT_CASES = [
    "--yes --stdin 'key: value\nlist: [ 1,2 ]\nkey: again\n' -- -f parsable -",
    "--stdin 'key: value\n' -- -d relaxed -f parsable -",
    "--version",
]
# Its own test command, as its CI runs it.
YAMLLINT_TESTS = ("-m", "unittest", "discover", "-q")
