"""The baked manual: a one-page README that links every page of docs/, in every variant.

A new user reads the README first and follows its links: each must lead to a page (and to a
heading of it, where the link names one), and a bake without the example must not send them
to commands, files or words that exist only in the example. An adopted repository keeps the
manual under oracle/, the README and its pages together, so the same links resolve there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from noxfile import VARIANTS
from tools import adopt
from tools.bakery import bake

MAX_LINES = 150
# What only the example has: its CLI's words, modules, tests, oracles and fixtures.
EXAMPLE_WORDS = (
    "order",
    "discount",
    "stack_discounts",
    "cart",
    "test_properties.py",
    "test_rejections.py",
    "test_replay_corpus.py",
    "test_orders",
    "test_discounts",
    "carts.jsonl",
    "existing-order",
)
BARE = [name for name, answers in VARIANTS.items() if answers["include_example"] == "no"]
EXAMPLE = [name for name in VARIANTS if name not in BARE]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
LEFTOVER = re.compile(r"(?<!\$)\{\{|\{%|cookiecutter\.")  # `${{ }}` is GitHub Actions'


@pytest.fixture(scope="module")
def bakes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One bake of each variant (example or not, with a workflow or not)."""
    root = tmp_path_factory.mktemp("readme")
    return {name: bake(root / name, **answers) for name, answers in VARIANTS.items()}


def manual(root: Path) -> list[Path]:
    """The README and every page of docs/ beside it."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, code spans blanked, each block one "```" line:
    what a reader reads as text, where a `[x](y)` is a link and not code."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            lines += ["```"] if fenced else []
        elif not fenced:
            lines.append(CODE_SPAN.sub("``", line))
    return lines


def links(page: Path) -> list[str]:
    """The page's relative links (a web address is not the manual's to check)."""
    found = [m for line in prose(page.read_text("utf-8")) for m in LINK.findall(line)]
    return [link for link in found if "://" not in link and not link.startswith("mailto:")]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.lstrip("#").strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(line) for line in prose(page.read_text("utf-8")) if line.startswith("#")}


def broken(root: Path) -> list[str]:
    """Each link of the manual under `root` that leads to no file, or to no heading of it."""
    found = []
    for page in manual(root):
        for link in links(page):
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.is_file():
                found.append(f"{page.relative_to(root)}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                found.append(f"{page.relative_to(root)}: {link} (no such heading)")
    return found


def linked(page: Path) -> set[Path]:
    return {(page.parent / link.partition("#")[0]).resolve() for link in links(page)}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_readme_is_one_page_that_links_every_doc(bakes: dict[str, Path], variant: str) -> None:
    root = bakes[variant]
    readme = root / "README.md"
    pages = {page.resolve() for page in manual(root)[1:]}
    assert len(readme.read_text("utf-8").splitlines()) <= MAX_LINES
    assert len(pages) >= 10  # the manual moved there: an empty docs/ links trivially
    assert sorted(pages - linked(readme)) == []


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_relative_link_of_the_manual_resolves(bakes: dict[str, Path], variant: str) -> None:
    assert broken(bakes[variant]) == []


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_page_has_a_title_and_a_link_back(bakes: dict[str, Path], variant: str) -> None:
    for page in manual(bakes[variant])[1:]:
        lines = page.read_text("utf-8").splitlines()
        assert lines[0].startswith("# "), page.name
        assert any("](../README.md)" in line for line in lines[1:4]), page.name


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_manual_renders_cleanly(bakes: dict[str, Path], variant: str) -> None:
    """No template syntax left, and the conditionals' whitespace control leaves no trailing
    space, no run of blank lines in the text and one final newline."""
    for page in manual(bakes[variant]):
        text = page.read_text("utf-8")
        assert not LEFTOVER.search(text), page.name
        assert text.endswith("\n"), page.name
        assert not text.endswith("\n\n"), page.name
        assert [line for line in text.splitlines() if line != line.rstrip()] == [], page.name
        assert "\n\n\n" not in "\n".join(prose(text)), page.name


@pytest.mark.parametrize("variant", BARE)
def test_a_bake_without_the_example_never_speaks_of_it(
    bakes: dict[str, Path], variant: str
) -> None:
    said = [
        f"{page.name}: {word}"
        for page in manual(bakes[variant])
        for word in EXAMPLE_WORDS
        if word in page.read_text("utf-8").lower()
    ]
    assert said == []
    readme = (bakes[variant] / "README.md").read_text("utf-8")
    assert "nox -s case -- --id help -- --help" in readme  # the stub CLI's first case
    assert "`shop --help`" in readme


@pytest.mark.parametrize("variant", EXAMPLE)
def test_the_example_readme_speaks_of_the_example_cli(bakes: dict[str, Path], variant: str) -> None:
    readme = (bakes[variant] / "README.md").read_text("utf-8")
    assert "-- order create --cart -" in readme
    assert "--help" not in readme.split("## From a bake", 1)[1].split("## Everything", 1)[0]


def test_an_adopted_repository_keeps_the_manual_beside_its_oracle(
    bakes: dict[str, Path], tmp_path: Path
) -> None:
    """adopt bakes without the example and copies the gate's files; the manual goes to
    oracle/README.md and oracle/docs/, never over the project's own README or docs/."""
    bake_dir, repo = bakes["bare-github"], tmp_path / "project"
    own = {"README.md": "# ours\n", "docs/index.md": "# Our docs\n"}
    for rel, text in own.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)

    changed = adopt.add_files(bake_dir, repo)

    pages = sorted(p.name for p in (bake_dir / "docs").glob("*.md"))
    assert {"oracle/README.md", *(f"oracle/docs/{name}" for name in pages)} <= set(changed)
    assert sorted(p.name for p in (repo / "oracle/docs").iterdir()) == pages
    assert {rel: (repo / rel).read_text() for rel in own} == own
    assert sorted(p.name for p in (repo / "docs").iterdir()) == ["index.md"]
    assert broken(repo / "oracle") == []
    assert linked(repo / "oracle/README.md") >= {p.resolve() for p in manual(repo / "oracle")[1:]}


def test_adopting_again_never_overwrites_a_page(bakes: dict[str, Path], tmp_path: Path) -> None:
    bake_dir, repo = bakes["bare-none"], tmp_path / "project"
    repo.mkdir()
    adopt.add_files(bake_dir, repo)
    page = repo / "oracle/docs/known-limits.md"
    page.write_text("# Known limits\n\nOurs.\n")

    assert adopt.add_files(bake_dir, repo) == []
    assert page.read_text() == "# Known limits\n\nOurs.\n"
