"""Adopting the gate in an existing repository (tools/adopt.py), then judging its real history.

tests/data/slugify-slice.bundle holds 14 first-parent commits of un33k/python-slugify, made as
tests/test_history.py describes for its slices: a root commit with the tree of d968ca7c0b5a
(2022-02-22), then every first-parent commit of d968ca7c0b5a..499112d (2023-10-25) with its
original tree, author, dates and message and an `Original-commit:` trailer. The project has a
setup.py (no pyproject.toml), a `slugify` console script from its second commit on, and its
tests in a root `test.py` of unittest classes: the layout pytest does not collect by default.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import PYPROJECT, TALLY, history_rows
from tools import adopt, adopted_history
from tools.bakery import TEMPLATE, git

SLICE = TEMPLATE / "tests" / "data" / "slugify-slice.bundle"
CASES = ['"Hello World"', "--separator _ \"C'est déjà l'été\"", "--max-length 9 one two three"]
# The module's adopted projects commit as the user's would (conftest.py identity).
pytestmark = [pytest.mark.adopted, pytest.mark.usefixtures("identity")]


# Two of the five commits after adoption: a workflow edit and a merge commit (judged by its
# first parent). The three others ("SemVer Table", a README edit; "By default, prefer unidecode
# if installed", a release; "Update import order for unidecode vs text_unidecode (#126)", a
# code change) land on the base unjudged, to keep the suite's time; judged by hand (`python -m
# tools.adopted_history`), all three merge.
JUDGED = ("master~11", "master~9")


@pytest.mark.e2e
def test_adopted_into_a_real_project_its_upstream_commits_are_judged(
    tmp_path: Path, wheelhouse: Path
) -> None:
    picked = [f"--commit={rev}" for rev in JUDGED]
    rows = history_rows(SLICE, "master~12", tmp_path, wheelhouse, CASES, "--count", "5", *picked)
    repo = tmp_path / "repo"
    judge_yaml = git(repo, "show", f"{adopt.BRANCH}:oracle/judge.yaml")
    assert 'command: "slugify"' in judge_yaml
    assert 'tests: ["test.py"]' in judge_yaml
    assert 'strength_paths: ["slugify"]' in judge_yaml  # a flat layout: the package itself
    assert 'base_branch: "base"' in judge_yaml
    pins = git(repo, "show", f"{adopt.BRANCH}:scripts/requirements-judge.txt")
    assert "text-unidecode==" in pins
    assert "setuptools==" in pins
    assert "--hash=sha256:" in pins
    assert git(repo, "show", "oracle/main:quarantine.yaml").startswith("#")
    # The gate starts with the case adopt added: `--help`, which exits 0.
    cases = git(repo, "show", f"{adopt.BRANCH}:oracle/cases.yaml")
    assert '  - id: "help"\n    argv: ["--help"]\n' in cases
    assert git(repo, "show", f"{adopt.BRANCH}~1:oracle/cases.yaml").rstrip().endswith("cases: []")
    verdicts = [(row["subject"], row["verdict"]) for row in rows]
    # A reviewer's verdicts, from each diff: "merge sandbox" bumps the CI matrix in
    # .github/workflows and setup.cfg (a code owner must look); the merge commit edits the
    # README.
    assert verdicts == [
        ("merge sandbox", "needs-review"),
        ("Merge branch 'sandbox' into development", "merge"),
    ]
    assert rows[0]["why"].startswith("write-set: ")
    assert ".github/workflows/ci.yml" in rows[0]["why"]


@pytest.mark.e2e
def test_adopting_keeps_every_file_the_project_has(tmp_path: Path, wheelhouse: Path) -> None:
    repo = tmp_path / "tally"
    mine = {
        "pyproject.toml": PYPROJECT,
        "tally.py": TALLY,
        "checks/test_tally.py": "import tally\n\n\ndef test_it():\n    assert tally.main() == 0\n",
        "noxfile.py": "import nox\n\n\n@nox.session\ndef tests(s):\n    s.run('pytest')\n",
        ".github/CODEOWNERS": "* @me\n/noxfile.py @me\n",
        ".gitignore": "/.venv/\n/.nox/\n",
        "README.md": "# tally\n",
        "docs/usage.md": "# Using tally\n",
        ".github/workflows/ci.yml": "on: push\njobs: {}\n",
    }
    for rel, text in mine.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(tmp_path, "init", "-q", "-b", "trunk", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tally")
    # Its files are the subject here; adopt's check of its work is test_adopt_layouts.py's.
    argv = [str(repo), "--wheelhouse", str(wheelhouse), "--owners", "@org/gate", "--no-check"]
    assert adopt.main(argv) == 0
    assert git(repo, "branch", "--show-current") == adopt.BRANCH
    for rel in set(mine) - {".github/CODEOWNERS", ".gitignore"}:
        assert (repo / rel).read_text() == mine[rel], rel
    # GitHub reads only the first CODEOWNERS it finds: the gate's rules go into the project's.
    assert not (repo / "CODEOWNERS").exists()
    codeowners = (repo / ".github/CODEOWNERS").read_text()
    assert codeowners.startswith(mine[".github/CODEOWNERS"])
    rules = [line.split() for line in codeowners.splitlines()]
    assert ["/noxfile_oracle.py", "@org/gate"] in rules
    assert ["/noxfile.py", "@org/gate"] not in rules  # the project's own noxfile stays its own
    assert (repo / ".gitignore").read_text().startswith(mine[".gitignore"])
    assert "/.oracle/" in (repo / ".gitignore").read_text()
    workflow = (repo / ".github/workflows/oracle.yml").read_text()
    assert "nox -f noxfile_oracle.py -s judge" in workflow
    assert "nox -s " not in workflow
    judge_yaml = (repo / "oracle/judge.yaml").read_text()
    assert 'command: "tally"' in judge_yaml
    assert 'tests: ["checks"]' in judge_yaml
    assert "  - /noxfile_oracle.py\n" in judge_yaml
    assert "def judge(" in (repo / "noxfile_oracle.py").read_text()
    # The gate's manual sits under oracle/, its pages beside it; the project's docs/ is its own.
    assert sorted(p.name for p in (repo / "docs").iterdir()) == ["usage.md"]
    pages = re.findall(r"\]\((docs/[^)#]+)", (repo / "oracle/README.md").read_text())
    assert pages
    assert all((repo / "oracle" / page).is_file() for page in pages)
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "log", "-2", "--format=%s").splitlines() == ["Adopt the oracle gate", "tally"]

    # Adopting again, once the gate has landed and its branch is gone, adds nothing.
    git(repo, "checkout", "-q", "trunk")
    git(repo, "merge", "-q", "--ff-only", adopt.BRANCH)
    git(repo, "branch", "-D", adopt.BRANCH)
    assert adopt.main([str(repo), "--wheelhouse", str(wheelhouse)]) == 0
    assert git(repo, "rev-parse", "HEAD") == git(repo, "rev-parse", "trunk")
    assert git(repo, "log", "-1", "--format=%s") == "Adopt the oracle gate"
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("prepare", "why"),
    [
        (lambda repo: None, "not the top of a git repository"),
        (lambda repo: git(repo, "init", "-q"), "no commit yet; commit the project first"),
        (
            lambda repo: (
                git(repo, "init", "-q"),
                git(repo, "commit", "-q", "--allow-empty", "-m", "x"),
                (repo / "new.py").write_text(""),
            ),
            "uncommitted changes; commit or stash them first",
        ),
    ],
)
def test_a_repository_that_cannot_be_adopted_gets_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prepare: Callable[[Path], object], why: str
) -> None:
    repo = tmp_path / "project"
    repo.mkdir()
    prepare(repo)
    assert adopt.main([str(repo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"adopt: {repo}: {why}"]


@pytest.mark.parametrize(
    ("codeowners", "owners"),
    [
        ("/docs/ @writers\n* @core @ops\n/src/ @core\n", "@core @ops"),  # the `*` rule
        ("# who\n/src/ @core\n/lib/ @core\n/docs/ @writers\n", "@core"),  # the most frequent
        ("* @org/maintainers\n/src/ @core\n", "@core"),  # never the template's placeholder
    ],
)
def test_the_gates_owners_come_from_the_projects_codeowners(
    tmp_path: Path, codeowners: str, owners: str
) -> None:
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github/CODEOWNERS").write_text(codeowners)
    assert adopt.gate_owners(tmp_path, None) == owners
    assert adopt.gate_owners(tmp_path, "@given") == "@given"


def test_without_owners_anywhere_adopt_stops_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "nobody"
    repo.mkdir()
    (repo / "README.md").write_text("# nobody's\n")
    git(tmp_path, "init", "-q", "-b", "trunk", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    assert adopt.main([str(repo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "adopt: no CODEOWNERS rule names the project's owners: pass --owners @org/team (the "
        "gate's code owners, who review a patch that touches it)"
    ]
    assert git(repo, "branch", "--list", adopt.BRANCH) == ""


def test_adopted_history_takes_cases_that_look_like_options() -> None:
    argv = ["src", "--start", "v1", "--work", "w", "--wheelhouse", "h", "--case", "--version"]
    argv += ["--case", "--yes --stdin '{}' -- lint -", "--case", "hello world"]
    args = adopted_history.parser().parse_args(adopted_history.joined(argv))
    assert args.case == ["--version", "--yes --stdin '{}' -- lint -", "hello world"]
    assert [adopted_history.case_arguments(case) for case in args.case] == [
        ["--", "--version"],
        ["--yes", "--stdin", "{}", "--", "lint", "-"],
        ["--", "hello", "world"],
    ]


def test_adopt_copies_no_cache_a_run_from_this_checkout_left_in_the_template(
    tmp_path: Path,
) -> None:
    """cookiecutter copies whatever the template folder holds: the bytecode and tool caches a
    run of its scripts leaves there are not the gate's files (git refuses to add ignored
    ones)."""
    files = ["scripts/judge.py", "scripts/_gate/__pycache__/x.cpython-311.pyc"]
    files += ["scripts/.mypy_cache/CACHEDIR.TAG", ".ruff_cache/x", "scripts/old.pyc"]
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert [p.as_posix() for p in adopt.bake_files(tmp_path)] == ["scripts/judge.py"]


@pytest.mark.parametrize("value", ["2022-10-04", "2022-10-04T12:00:00", "yesterday"])
def test_an_as_of_that_is_not_a_time_with_its_zone_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        adopt.main([str(tmp_path), "--as-of", value])
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith("expected an RFC 3339 time with its zone, such as 2022-10-04T12:00:00Z")
    assert "--as-of" in error
