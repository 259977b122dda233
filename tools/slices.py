"""Pinned slices of real projects' histories (tests/data/*.bundle) that the gate is adopted
into, with the cases adoption adds: shared by the suite and `nox -s bench`.

yamllint-slice.bundle: 13 first-parent commits of adrienverge/yamllint (a setuptools project,
a `yamllint` console script, about 430 unittest-style tests), made as tests/test_history.py
describes for its slices; the gate is adopted at its third commit.

markdown-slice.bundle, branch `backticks`: 11 first-parent commits of Python-Markdown/markdown
(a `markdown_py` console script, about 1,200 unittest-style tests, some generated from files),
made as tests/test_history.py describes; the gate is adopted at its root.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools.bakery import TEMPLATE


@dataclass(frozen=True)
class Slice:
    """A real project's pinned history, as the gate is adopted into it."""

    name: str
    bundle: Path
    start: str  # the commit adoption happens at
    cases: tuple[str, ...]  # `tools.adopted_history --case` values
    tests: tuple[str, ...]  # its own test command's arguments to python, as its CI runs it
    branch: str | None = None  # the bundle's branch (a bundle of several slices has no HEAD)
    extra: str = ""  # the extra its own tests need installed beside it

    def requirement(self, repo: Path) -> str:
        """What pip installs for its own test command: the checkout, with its tests' extra."""
        return f"{repo}[{self.extra}]" if self.extra else str(repo)

    def options(self) -> list[str]:
        """`tools.adopted_history` options beyond the cases."""
        return ["--branch", self.branch] if self.branch else []


YAMLLINT = Slice(
    "yamllint",
    TEMPLATE / "tests" / "data" / "yamllint-slice.bundle",
    "main~10",
    # A linter's cases: problems found (exit 1, on purpose: --yes), a clean file, its version.
    (
        "--yes --stdin 'key: value\nlist: [ 1,2 ]\nkey: again\n' -- -f parsable -",
        "--stdin 'key: value\n' -- -d relaxed -f parsable -",
        "--version",
    ),
    ("-m", "unittest", "discover", "-q"),
)
MARKDOWN = Slice(
    "Python-Markdown",
    TEMPLATE / "tests" / "data" / "markdown-slice.bundle",
    "backticks~10",
    ("--version", r"--stdin '# Title\n\n*a* [b](c) `x`\n' -- -x toc"),
    ("-m", "unittest", "discover", "-q", "tests"),
    branch="backticks",
    extra="testing",  # PyYAML, for its meta-data tests
)
