"""The docs adopt writes into the project it adopts (issue 49): the gate's manual as that
project's (its layout, paths and commands, never the bake's), comments that point at the pages
where adopt put them (oracle/docs/), and no example-only ignore rules. A flat-layout and a
src-layout project are adopted here for real (without the check, which test_adopt_checks.py
covers), and their adopted files read as a user reads them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import ADOPTER, TALLY, committed, flit_project
from tools import adopt, adopted_history
from tools.bakery import git


def a_test_of(name: str) -> str:
    return f"from {name}.cli import main\n\n\ndef test_it():\n    assert main() == 0\n"


# name: the project's files, and what its adopted manual must name (the console script's
# module, the package's folder, how the gate's sessions start).
PROJECTS = {
    "flat": (
        {
            "pyproject.toml": flit_project("tally", "tally.cli:main"),
            "tally/__init__.py": '"""Counts words."""\n',
            "tally/cli.py": TALLY,
            "tests/test_tally.py": a_test_of("tally"),
            ".gitignore": "/.venv/\n",
        },
        ("tally", "`tally/cli.py`", "`tally/`", "nox -s judge -- --head BRANCH"),
    ),
    "src": (
        {
            "pyproject.toml": flit_project("counted", "counted.cli:main"),
            "src/counted/__init__.py": '"""Counts words."""\n',
            "src/counted/cli.py": TALLY,
            "checks/test_counted.py": a_test_of("counted"),
            "noxfile.py": "import nox\n\n\n@nox.session\ndef tests(s):\n    s.run('pytest')\n",
            ".github/dependabot.yml": "version: 2\nupdates: []\n",
        },
        (
            "counted",
            "`src/counted/cli.py`",
            "`src/counted/`",
            "nox -f noxfile_oracle.py -s judge -- --head BRANCH",
        ),
    ),
}
# What the bake's README says that an adopted project's must not: its steps bake a new project
# and replace a stub CLI.
BAKE_WORDS = ("cookiecutter", "Bake", "is a stub to replace", "src/<", "six steps")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOCS_PATH = re.compile(r"[\w./-]*docs/[\w./-]*\w")
# The adopted files whose comments name pages of the manual.
COMMENTED = ("oracle/cases.yaml", "CODEOWNERS", "oracle/judge.yaml", ".github/workflows/oracle.yml")


@pytest.fixture(scope="module")
def adopted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each project adopted, on its gate's branch."""
    wheelhouse = adopted_history.adopted_wheelhouse()
    repos = {}
    with pytest.MonkeyPatch.context() as env:
        for name, value in ADOPTER.items():
            env.setenv(name, value)
        for layout, (files, _) in PROJECTS.items():
            repo = committed(tmp_path_factory.mktemp(layout) / "project", files)
            argv = [str(repo), "--wheelhouse", str(wheelhouse), "--owners", "@org/gate"]
            assert adopt.main([*argv, "--no-check"]) == 0
            repos[layout] = repo
    return repos


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, code spans blanked: where a link is a link."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(re.sub(r"`[^`\n]*`", "``", line))
    return lines


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings."""
    headings = [line for line in prose(page.read_text("utf-8")) if line.startswith("#")]
    slugs = [h.lstrip("#").strip().lower().replace("`", "") for h in headings]
    return {re.sub(r"[^\w\- ]", "", s).replace(" ", "-") for s in slugs}


@pytest.mark.e2e
@pytest.mark.parametrize("layout", list(PROJECTS))
def test_the_adopted_manual_describes_the_project_it_was_adopted_in(
    adopted: dict[str, Path], layout: str
) -> None:
    repo = adopted[layout]
    command, cli, package, judge = PROJECTS[layout][1]
    readme = (repo / "oracle/README.md").read_text("utf-8")
    assert f"`{command}`, the console script `{command} = {command}.cli:main`, in {cli}" in readme
    assert f"the package `{command}` in {package}" in readme
    tests = "`checks`" if layout == "src" else "`tests`"
    assert f"**Tests** (`tests`): {tests}," in readme
    assert judge in readme
    assert [word for word in BAKE_WORDS if word in readme] == []
    if layout == "flat":
        assert "src/" not in readme
    assert readme.endswith("\n")
    assert not readme.endswith("\n\n")
    assert "\n\n\n" not in readme
    assert [line for line in readme.splitlines() if line != line.rstrip()] == []
    assert "{{" not in readme
    assert "{%" not in readme


@pytest.mark.e2e
@pytest.mark.parametrize("layout", list(PROJECTS))
def test_every_link_and_docs_path_the_adopted_files_name_resolves(
    adopted: dict[str, Path], layout: str
) -> None:
    repo = adopted[layout]
    manual = [repo / "oracle/README.md", *sorted((repo / "oracle/docs").glob("*.md"))]
    broken = []
    for page in manual:
        for line in prose(page.read_text("utf-8")):
            for link in LINK.findall(line):
                path, _, anchor = link.partition("#")
                if "://" in link or link.startswith("mailto:"):
                    continue
                target = (page.parent / path).resolve() if path else page
                if not target.is_file():
                    broken.append(f"{page.relative_to(repo)}: {link}")
                elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                    broken.append(f"{page.relative_to(repo)}: {link} (no such heading)")
    assert broken == []
    assert len(manual) > 10
    assert "](docs/how-the-gate-decides.md)" in manual[0].read_text()
    named = []
    for rel in [*COMMENTED, "oracle/adapter.py"]:
        if not (repo / rel).is_file():
            continue
        text = (repo / rel).read_text("utf-8")
        said = (
            text
            if rel.endswith(".py")
            else "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
        )
        named += [(rel, path) for path in DOCS_PATH.findall(said)]
    assert {rel for rel, _ in named} >= {"oracle/cases.yaml", "CODEOWNERS", "oracle/judge.yaml"}
    assert [(rel, path) for rel, path in named if not (repo / path).is_file()] == []


@pytest.mark.e2e
@pytest.mark.parametrize("layout", list(PROJECTS))
def test_the_adopted_gitignore_has_no_rule_of_the_example(
    adopted: dict[str, Path], layout: str
) -> None:
    rules = (repo := adopted[layout]).joinpath(".gitignore").read_text().splitlines()
    assert "/.orders/" not in rules
    assert "/.oracle/" in rules
    assert "/reports/" in rules
    assert git(repo, "status", "--porcelain") == ""
