"""Adopt's `tests:` and adopt's check of its own work (issue 49).

`tests:` comes from pytest's own configuration (`testpaths`) and from the files of the node ids
it collects, never from another line of its output: a warnings summary line holding `::` once
became a `tests:` entry, and the judge then blamed the patch for the gate's configuration. The
layouts below are real projects collected by a real pytest (this suite's), then two real
projects adopted whole. The check judges a no-op patch and a patch that touches a test file,
so that every step runs once before adopt says the gate works.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import PYPROJECT, TALLY, TALLY_TEST, committed, written
from tools import adopt, adopted_history
from tools.bakery import git

TEST = TALLY_TEST
# A project whose pytest prints, beside its one node id, lines holding `::` that are not: a
# warning whose text has `::` (shown indented in the warnings summary, one line of it indented
# again), and a plugin's own lines, one unindented with a folder before its `::`, one indented
# with a real node id.
WARNS = {
    "tally.py": TALLY,
    "conftest.py": """import warnings

warnings.warn("old fixtures\\n  Test: tests::helper is gone", UserWarning)


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("tests::a note a plugin prints")
    terminalreporter.write_line("Docs::see CONTRIBUTING")
    terminalreporter.write_line("  tests/test_tally.py::test_it")
""",
    "tests/test_tally.py": 'import warnings\n\nwarnings.warn("Test: tests::deprecated")\n\n' + TEST,
}
PACKAGE = {"tally/__init__.py": TALLY}
DOCTEST = '''"""Counts words.

>>> 1 + 1
2
"""
'''
LAYOUTS = {
    "pytest prints warnings holding ::": (WARNS, ["tests"]),
    "testpaths of pytest.ini": (
        {
            **PACKAGE,
            "pytest.ini": "[pytest]\ntestpaths = tests/unit\n",
            "tests/unit/test_tally.py": TEST,
            "tests/slow/test_slow.py": TEST,
        },
        ["tests/unit"],
    ),
    "testpaths of pyproject.toml, a glob": (
        {
            **PACKAGE,
            "pyproject.toml": PYPROJECT + '\n[tool.pytest.ini_options]\ntestpaths = ["checks/*"]\n',
            "checks/unit/test_tally.py": TEST,
            "checks/cli/test_cli.py": TEST,
        },
        ["checks/cli", "checks/unit"],
    ),
    "testpaths of tox.ini": (
        {
            **PACKAGE,
            "tox.ini": "[tox]\nenvlist = py3\n\n[pytest]\ntestpaths = suite/fast\n",
            "suite/fast/test_tally.py": TEST,
            "suite/slow/test_slow.py": TEST,
        },
        ["suite/fast"],
    ),
    "testpaths of setup.cfg, the code and its tests, doctests on": (
        {
            "src/tally/__init__.py": DOCTEST + TALLY.split('"""', 2)[2],
            "setup.cfg": "[tool:pytest]\ntestpaths = src tests\naddopts = --doctest-modules\n",
            "tests/test_tally.py": TEST,
        },
        ["tests"],
    ),
    "a root test.py of unittest classes": (
        {
            **PACKAGE,
            "test.py": "import unittest\n\nimport tally\n\n\nclass TestTally(unittest.TestCase):\n"
            "    def test_main(self):\n        self.assertEqual(tally.main(), 0)\n",
        },
        ["test.py"],
    ),
    "a test/ folder": ({**PACKAGE, "test/test_tally.py": TEST}, ["test"]),
    "tests inside the package": (
        {**PACKAGE, "tally/tests/__init__.py": "", "tally/tests/test_tally.py": TEST},
        ["tally/tests"],
    ),
    "tests inside a src layout's package": (
        {
            "src/tally/__init__.py": TALLY,
            "src/tally/tests/__init__.py": "",
            "src/tally/tests/test_tally.py": TEST,
        },
        ["src/tally/tests"],
    ),
    "doctests of the package beside the tests": (
        {
            "tally/__init__.py": DOCTEST + TALLY.split('"""', 2)[2],
            "pytest.ini": "[pytest]\naddopts = --doctest-modules\n",
            "tests/test_tally.py": TEST,
        },
        ["tests"],
    ),
}


@pytest.mark.parametrize(("files", "expected"), list(LAYOUTS.values()), ids=list(LAYOUTS))
def test_tests_are_the_paths_pytest_collects_from_never_its_other_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], expected: list[str]
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # this suite's plugins, not theirs
    repo = written(tmp_path / "project", files)
    collected = adopt.collect(Path(sys.executable), repo)
    assert collected.files, "pytest collected nothing"
    entries = adopt.tests_entries(repo, collected.files, ["tally"])
    assert entries == expected
    assert all((repo / entry).exists() for entry in entries)


@pytest.mark.e2e
@pytest.mark.usefixtures("identity")
def test_adopt_writes_real_test_paths_and_checks_a_patch_that_touches_a_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The project whose pytest prints warnings holding `::`, adopted whole: `tests:` holds
    its one folder; the check judged a no-op patch and a patch appending a line to the test
    file, and both merged; nothing of the check is left in the repository."""
    files = {**WARNS, "pyproject.toml": PYPROJECT, "CODEOWNERS": "* @tally/owners\n"}
    repo = committed(tmp_path / "tally", files)
    wheelhouse = adopted_history.adopted_wheelhouse()
    assert adopt.main([str(repo), "--wheelhouse", str(wheelhouse)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out
    assert out[0].startswith("adopt: adopted: "), out
    assert (
        "a no-op patch merges on it, and so does a patch that touches tests/test_tally.py"
        in (out[0])
    )
    judge_yaml = yaml.safe_load(git(repo, "show", f"{adopt.BRANCH}:oracle/judge.yaml"))
    assert judge_yaml["tests"] == ["tests"]
    assert git(repo, "status", "--porcelain") == ""
    branches = git(repo, "branch", "--format=%(refname:short)").splitlines()
    assert sorted(branches) == [adopt.BRANCH, "oracle/main", "trunk"]
    assert (repo / "tests/test_tally.py").read_text() == WARNS["tests/test_tally.py"]


# A style test of the tests: a test file whose last line is a comment is left out of its
# checks. The patch the check makes (a comment line appended to a test file) makes it run one
# check fewer than its parent's version, which the assert inventory blocks; a no-op patch
# merges.
STYLE = """from pathlib import Path


def test_the_last_line_of_each_test_file_is_code():
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        last = path.read_text().splitlines()[-1]
        if not last.startswith("#"):
            assert last.strip(), path
"""


@pytest.mark.e2e
@pytest.mark.usefixtures("identity")
def test_adopt_names_the_step_a_patch_touching_a_test_does_not_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {"pyproject.toml": PYPROJECT, "tally.py": TALLY, "tests/test_tally.py": TEST}
    files |= {"tests/test_style.py": STYLE, "CODEOWNERS": "* @tally/owners\n"}
    repo = committed(tmp_path / "tally", files)
    wheelhouse = adopted_history.adopted_wheelhouse()
    assert adopt.main([str(repo), "--wheelhouse", str(wheelhouse)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("adopt: adopted: "), err
    assert "but a patch that touches tests/test_style.py does not merge there yet" in err[0]
    assert "assert-inventory: " in err[0]
    # It checks less than before, while its parent version passes: coverage removed.
    removed = "coverage removed: tests/test_style.py::test_the_last_line_of_each_test_file_is_code"
    assert f"{removed} (fewer-checks)" in err[0], err[0]
    assert "nox -s judge -- --head BRANCH" in err[0]
    assert git(repo, "branch", "--show-current") == adopt.BRANCH  # kept, for the fix
    assert git(repo, "status", "--porcelain") == ""
