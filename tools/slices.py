"""Pinned slices of real projects' histories (tests/data/*.bundle) that the gate is adopted
into, with the cases adoption adds: shared by the suite and `nox -s bench`.

yamllint-slice.bundle: 13 first-parent commits of adrienverge/yamllint (a setuptools project,
a `yamllint` console script, about 430 unittest-style tests), made as tests/test_history.py
describes for its slices; the gate is adopted at its third commit.

markdown-slice.bundle, branch `backticks`: 11 first-parent commits of Python-Markdown/markdown
(a `markdown_py` console script, about 1,200 unittest-style tests, some generated from files),
made as tests/test_history.py describes; the gate is adopted at its root.

flask-slice.bundle: 14 first-parent commits of pallets/flask (2022-10 to 2023-01: setup.py
with setup.cfg, a `flask` console script on click, about 480 pytest tests with CliRunner
tests and `filterwarnings = error`, requirements/tests.txt compiled by pip-tools), a root with
the tree of 0d8c8ba7 and the first-parent commits of 0d8c8ba7..3a35977d, made the same way;
adopted at its root with its requirements as of that date (Werkzeug 3 breaks Flask 2.2).

more-itertools-slice.bundle: 13 first-parent commits of more-itertools/more-itertools (flit, no
console script, about 730 unittest-style tests, many from mixins), a root with the tree of
2fe1b2e~12 and the commits of 2fe1b2e~12..2fe1b2e, made the same way; adopted at its root with
`--command python` (the README's table lists how its commits are judged).

structlog-slice.bundle: 16 first-parent commits of hynek/structlog (hatchling with hatch-vcs and
hatch-fancy-pypi-readme, a src layout, no console script, about 850 pytest tests with
pytest-asyncio; a `dev` extra naming its own `structlog[tests,typing]`, which hatchling writes
out into the wheel's metadata), a root with the tree of 244fde4 and the commits of
244fde4..f07c136, made the same way, upstream's tag 25.3.0 on the commit it named; adopted at
its root with `--command python`. Its third-last commit moves the tests' requirements from the
`tests` extra to a dependency group.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools import adopted_history
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
    fixtures: tuple[tuple[str, str], ...] = ()  # files of fixtures/ its cases' --cwd names
    as_of_start: bool = False  # its requirements as they were at `start` (adopt --as-of)
    command: str = ""  # adopt's --command, for a library without a console script

    def options(self) -> list[str]:
        """`tools.adopted_history` options beyond the cases and the fixtures."""
        found = ["--branch", self.branch] if self.branch else []
        found += ["--command", self.command] if self.command else []
        return [*found, "--as-of-start"] if self.as_of_start else found

    def prepared(self, work: Path, wheelhouse: Path) -> tuple[Path, list[str]]:
        """adopted_history.prepare on this slice, its fixtures in `work`: the adopted clone
        and the commits after `start` (what `slice_rows` does through the command line)."""
        folder = work / "fixtures"
        self.write_fixtures(folder)
        return adopted_history.prepare(
            self.bundle,
            self.start,
            work,
            wheelhouse,
            self.cases,
            fixtures=folder if self.fixtures else None,
            adoption=adopted_history.Adoption(
                self.branch or None, self.command or None, self.as_of_start
            ),
        )

    def write_fixtures(self, folder: Path) -> list[str]:
        """Its fixtures written in `folder`; the `--fixtures` option naming them, if any."""
        for rel, text in self.fixtures:
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, "utf-8")
        return ["--fixtures", str(folder)] if self.fixtures else []


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
)

HELLO = """\
from flask import Flask

app = Flask(__name__)


@app.route("/")
def index() -> str:
    return "Hello"


@app.route("/user/<name>", methods=["GET", "POST"])
def user(name: str) -> str:
    return name
"""
FLASK = Slice(
    "Flask",
    TEMPLATE / "tests" / "data" / "flask-slice.bundle",
    "main~13",
    # Its version, an app's routes (it imports ./hello.py), an app it cannot import (exit 2).
    ("--version", "--cwd app -- --app hello routes", "--yes --cwd app -- --app nothere routes"),
    ("-m", "pytest", "-q", "-p", "no:cacheprovider"),
    fixtures=(("app/hello.py", HELLO),),
    as_of_start=True,
)

# A logging library's cases: a line rendered as key=value and as JSON, to stdout.
LOG = "import structlog, sys; structlog.configure(processors=[structlog.processors.{}], "
LOG += "logger_factory=structlog.PrintLoggerFactory(sys.stdout)); structlog.get_logger().{}"
STRUCTLOG = Slice(
    "structlog",
    TEMPLATE / "tests" / "data" / "structlog-slice.bundle",
    "main~15",
    (
        "-c " + repr(LOG.format("KeyValueRenderer(sort_keys=True)", "info('hi', a=1, b=[2])")),
        "-c " + repr(LOG.format("JSONRenderer(sort_keys=True)", "bind(x=1).warning('w', y=None)")),
    ),
    ("-m", "pytest", "-q", "-p", "no:cacheprovider"),
    command="python",
)
