"""Python-Markdown adopted (issue 50): a unittest-style suite of about 1,200 tests that its CI
runs with `python -m unittest discover`, whose tests/test_legacy.py turns every warning into an
error at import and generates its tests from files (a metaclass), and whose code commits add a
changelog line beside their tests.

The `backticks` slice of tests/data/markdown-slice.bundle (tests/test_history.py says how it
was made) is adopted at its root with the one command; its last two commits are judged, the
eight before them land unjudged (judged by hand with `python -m tools.adopted_history`: 7
merge, 1 needs-review for a workflow edit, 2 block; the README's table). "Allow reference
links with backticks" (code, changelog and tests) merges; its revert, which deletes the
feature's tests with it, blocks: their parent versions fail on the patch build.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import slice_rows
from tools.slices import MARKDOWN

LINKS = "tests/test_syntax/inline/test_links.py"
pytestmark = [pytest.mark.adopted, pytest.mark.usefixtures("identity")]


@pytest.mark.e2e
def test_python_markdown_is_adopted_and_its_commits_judged_right(
    tmp_path: Path, wheelhouse: Path
) -> None:
    picked = ("--commit=backticks~1", "--commit=backticks")
    rows = slice_rows(MARKDOWN, tmp_path, wheelhouse, *picked)
    verdicts = [(row["subject"], row["verdict"]) for row in rows]
    assert verdicts == [
        ("Allow reference links with backticks", "merge"),
        ('Revert "Allow reference links with backticks"', "block"),
    ], rows
    assert rows[1]["why"].startswith("assert-inventory: "), rows[1]
    inventory = json.loads((tmp_path / "repo/reports/assert-inventory.json").read_text("utf-8"))
    # The legacy tests and the TestSuite of md_in_html's are generated; the revert's other
    # modules are the crossrun's: only the module it changed ran again.
    generated = ["tests/test_legacy.py", "tests/test_syntax/extensions/test_md_in_html.py"]
    assert inventory["evidence"]["collection"]["generated"] == generated
    assert inventory["evidence"]["run_time"]["patch_run"]["modules_run"] == [LINKS]
