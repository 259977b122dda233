"""The write-set sees what merge commits wrote, and only what the patch wrote in them.

Each test grows its own base branch (`trunk-*`) from the bake's main, so the shared bake's main
never moves; the write-set step runs against the merge base, as the judge runs it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import write_set as write_set_step

from tools.bakery import git

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

CASES = "oracle/cases.yaml"


@pytest.fixture(autouse=True)
def no_review(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORACLE_REVIEW", raising=False)


def commit(repo: Path, message: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "--no-verify", "-m", message)


def append(repo: Path, name: str, line: str) -> str:
    return (repo / name).read_text() + line


def start(repo: Path, name: str) -> tuple[str, str]:
    """A base branch `trunk-NAME` and a patch `patch-NAME` on it with one source commit."""
    trunk, patch = f"trunk-{name}", f"patch-{name}"
    git(repo, "checkout", "-q", "-b", trunk, "main")
    git(repo, "checkout", "-q", "-b", patch)
    commit(repo, "patch: source", {f"src/{name}.py": "VALUE = 1\n"})
    return trunk, patch


def on_base(repo: Path, trunk: str, files: dict[str, str]) -> None:
    git(repo, "checkout", "-q", trunk)
    commit(repo, "base: reviewed change", files)


def merge(repo: Path, into: str, other: str, edit: dict[str, str] | None = None) -> None:
    """Merge `other` into `into`, with `edit` made inside the merge commit itself."""
    git(repo, "checkout", "-q", into)
    git(repo, "merge", "-q", "--no-ff", "--no-commit", other)
    for name, text in (edit or {}).items():
        (repo / name).write_text(text)
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "--no-verify", "-m", f"merge {other}")


def write_set(repo: Path, head: str, trunk: str, tmp: Path) -> tuple[int, dict[str, Any]]:
    base = git(repo, "merge-base", head, trunk)
    report = tmp / f"write-set-{head}.json"
    argv = ["--repo", str(repo), "--base", base, "--head", head, "--report", str(report)]
    code = write_set_step.main([*argv, "--config", str(repo / "oracle/judge.yaml")])
    return code, json.loads(report.read_text())


def paths(report: dict[str, Any], kind: str) -> list[str]:
    return [row["path"] for row in report["evidence"][kind]]


def test_oracle_edit_in_a_merge_then_reverted_by_a_commit(repo: Path, tmp_path: Path) -> None:
    trunk, patch = start(repo, "evil1")
    original = (repo / CASES).read_text()
    on_base(repo, trunk, {"docs/base1.md": "base\n"})
    merge(repo, patch, trunk, edit={CASES: append(repo, CASES, "# widened\n")})
    commit(repo, "patch: put it back", {CASES: original})
    code, report = write_set(repo, patch, trunk, tmp_path)
    assert code == 2
    assert paths(report, "protected") == [CASES]
    assert "docs/base1.md" not in json.dumps(report["evidence"])


def test_oracle_edit_in_a_merge_then_reverted_by_another_merge(repo: Path, tmp_path: Path) -> None:
    """Neither the net diff nor a non-merge commit shows the oracle: only the merges do."""
    trunk, patch = start(repo, "evil2")
    original = (repo / CASES).read_text()
    on_base(repo, trunk, {"docs/base2a.md": "base\n"})
    merge(repo, patch, trunk, edit={CASES: append(repo, CASES, "# widened\n")})
    on_base(repo, trunk, {"docs/base2b.md": "base\n"})
    merge(repo, patch, trunk, edit={CASES: original})
    assert git(repo, "diff", "--name-only", f"{trunk}...{patch}", "--", "oracle") == ""
    code, report = write_set(repo, patch, trunk, tmp_path)
    assert code == 2, report["summary"]
    assert paths(report, "protected") == [CASES]
    assert report["status"] == "needs-review"
    assert "a code owner must review: oracle/cases.yaml (rule /oracle/)" in report["summary"]


def test_merge_that_drops_the_bases_oracle_change_is_the_patchs(repo: Path, tmp_path: Path) -> None:
    trunk, patch = start(repo, "ours")
    on_base(repo, trunk, {CASES: append(repo, CASES, "# reviewed on base\n")})
    git(repo, "checkout", "-q", patch)
    git(repo, "merge", "-q", "-s", "ours", "--no-edit", trunk)  # keeps the old cases
    code, report = write_set(repo, patch, trunk, tmp_path)
    assert code == 2
    assert paths(report, "protected") == [CASES]


@pytest.mark.parametrize("direction", ["base-into-patch", "patch-into-base"])
def test_merging_the_base_back_in_is_not_the_patchs_write(
    repo: Path, tmp_path: Path, direction: str
) -> None:
    """The base's own reviewed oracle change comes in with the merge: it is the base's."""
    trunk, patch = start(repo, f"honest-{direction}")
    base_files = {CASES: append(repo, CASES, "# reviewed on base\n"), "docs/b.md": "b\n"}
    on_base(repo, trunk, base_files)
    if direction == "base-into-patch":
        merge(repo, patch, trunk)
        head = patch
    else:  # a merge whose first parent is the base
        head = f"{patch}-up"
        git(repo, "checkout", "-q", "-b", head, trunk)
        merge(repo, head, patch)
    on_base(repo, trunk, {"oracle/later.yaml": "later: true\n"})  # the base moves on
    code, report = write_set(repo, head, trunk, tmp_path)
    assert code == 0, report["summary"]
    assert paths(report, "protected") == []
    assert paths(report, "source") == [f"src/honest-{direction}.py"]
    assert "docs/b.md" not in json.dumps(report["evidence"])


def test_edit_inside_a_merge_of_the_patchs_own_branches(repo: Path, tmp_path: Path) -> None:
    """A side branch of the patch merged into it twice: its commits count, and so does what a
    merge wrote itself, even when a later merge puts it back."""
    trunk, patch = start(repo, "side")
    original = (repo / "noxfile.py").read_text()
    git(repo, "checkout", "-q", "-b", "side-feature")
    commit(repo, "side: helper", {"src/side_helper.py": "X = 1\n"})
    merge(repo, patch, "side-feature")
    clean, report = write_set(repo, patch, trunk, tmp_path)
    assert clean == 0
    assert paths(report, "source") == ["src/side.py", "src/side_helper.py"]
    git(repo, "checkout", "-q", "side-feature")
    commit(repo, "side: more", {"src/side_more.py": "Y = 1\n"})
    merge(repo, patch, "side-feature", edit={"noxfile.py": "# gone\n"})
    git(repo, "checkout", "-q", "side-feature")
    commit(repo, "side: last", {"src/side_last.py": "Z = 1\n"})
    merge(repo, patch, "side-feature", edit={"noxfile.py": original})
    assert (
        git(
            repo,
            "log",
            "--no-merges",
            "--format=",
            "--name-only",
            f"{trunk}..{patch}",
            "--",
            "noxfile.py",
        )
        == ""
    )
    code, report = write_set(repo, patch, trunk, tmp_path)
    assert code == 2
    assert paths(report, "protected") == ["noxfile.py"]
    assert "src/side_more.py" in paths(report, "source")


# --- the build configuration (_gate/runs/build_config.py) ---------------------------------------

BUILD = "build configuration"


def protected_rules(report: dict[str, Any]) -> dict[str, str]:
    return {row["path"]: row["rule"] for row in report["evidence"]["protected"]}


def pyproject_with(repo: Path, old: str, new: str) -> dict[str, str]:
    text = (repo / "pyproject.toml").read_text()
    assert old in text
    return {"pyproject.toml": text.replace(old, new)}


@pytest.mark.parametrize(
    ("name", "old", "new", "tables"),
    [
        # An in-tree backend, in three spellings: a table edit, a dotted key, an inline table.
        (
            "backend-path",
            'build-backend = "flit_core.buildapi"\n',
            'build-backend = "evil"\nbackend-path = ["_backend"]\n',
            "[build-system]",
        ),
        (
            "dotted-key",
            "[tool.cruft]\n",
            '[tool]\nsetuptools.package-dir = {"" = "old"}\n\n[tool.cruft]\n',
            "[tool.setuptools]",
        ),
        (
            "inline-hatch",
            "[tool.ruff]\n",
            '[tool.hatch]\nbuild = { targets = { wheel = { sources = { "old" = "" } } } }\n\n'
            "[tool.ruff]\n",
            "[tool.hatch.build]",
        ),
        (
            "flit-module",
            '[tool.flit.module]\nname = "shop"',
            '[tool.flit.module]\nname = "x"',
            "[tool.flit.module]",
        ),
    ],
)
def test_a_build_table_edit_needs_review_in_any_spelling(
    repo: Path, tmp_path: Path, name: str, old: str, new: str, tables: str
) -> None:
    trunk, patch = start(repo, f"build-{name}")
    commit(repo, "patch: build", pyproject_with(repo, old, new))
    code, report = write_set(repo, patch, trunk, tmp_path)
    assert (code, report["status"]) == (2, "needs-review"), report["summary"]
    rule = protected_rules(report)["pyproject.toml"]
    assert rule == f"{BUILD} {tables}"


def test_a_build_file_pyproject_names_needs_review_and_a_reverted_table_still_counts(
    repo: Path, tmp_path: Path
) -> None:
    trunk, patch = start(repo, "build-hook")
    hook = '[tool.hatch.build.hooks.custom]\npath = "tools/hook.py"\n\n[tool.ruff]\n'
    commit(repo, "patch: a hook", pyproject_with(repo, "[tool.ruff]\n", hook))
    commit(repo, "patch: its code", {"tools/hook.py": "print('hook')\n", "setup.py": "x = 1\n"})
    original = git(repo, "show", f"{trunk}:pyproject.toml")
    commit(repo, "patch: the table reverted", {"pyproject.toml": original})
    code, report = write_set(repo, patch, trunk, tmp_path)
    rules = protected_rules(report)
    assert code == 2
    assert rules["tools/hook.py"] == BUILD
    assert rules["setup.py"] == BUILD
    assert rules["pyproject.toml"] == f"{BUILD} [tool.hatch.build]"


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        ("version", 'version = "0.1.0"', 'version = "0.2.0"'),
        ("dependency", "dependencies = []", 'dependencies = ["pyyaml>=6"]'),
        ("metadata", "requires-python", 'keywords = ["shop"]\nrequires-python'),
        ("tool-table", "line-length = 100", "line-length = 99"),
        ("reformatted", 'requires = ["flit_core>=3.9,<5"]', "requires = [ 'flit_core>=3.9,<5', ]"),
    ],
)
def test_ordinary_pyproject_edits_stay_source(
    repo: Path, tmp_path: Path, name: str, old: str, new: str
) -> None:
    trunk, patch = start(repo, f"ordinary-{name}")
    commit(repo, "patch: pyproject", pyproject_with(repo, old, new))
    commit(repo, "patch: a module named like a build script", {"src/shop/build.py": "X = 1\n"})
    code, report = write_set(repo, patch, trunk, tmp_path)
    assert code == 0, report["summary"]
    assert {"pyproject.toml", "src/shop/build.py"} <= set(paths(report, "source"))


def test_a_pyproject_that_does_not_parse_needs_review(repo: Path, tmp_path: Path) -> None:
    trunk, patch = start(repo, "build-unparsed")
    commit(repo, "patch: broken", pyproject_with(repo, "[project]\n", "[project\n"))
    code, report = write_set(repo, patch, trunk, tmp_path)
    assert code == 2
    assert protected_rules(report)["pyproject.toml"] == f"{BUILD} (pyproject.toml does not parse)"


SETUP = """\
from setuptools import find_packages, setup

setup(
    name="shop",
    version="1.0",
    description="A shop.",
    classifiers=["Programming Language :: Python :: 3"],
    packages=find_packages("src"),
    package_dir={"": "src"},
)
"""
CFG = (
    "[metadata]\nname = shop\nversion = 1.0\n\n[options]\npackages = find:\n\n"
    "[tool:pytest]\ntestpaths = tests\n\n[flake8]\nignore =\n    E722\n"
)
# An edit of only the literal metadata setup() is given (issue 50), in several spellings, and
# edits that reach what the build runs or packs.
SETUP_EDITS = {
    "version": ('version="1.0"', 'version="1.1"', 0),
    "classifiers": ('"Programming Language :: Python :: 3"]', '"Typing :: Typed", "OS"]', 0),
    "description-and-url": ('description="A shop."', 'description="Shop.", url="https://x"', 0),
    "packages": ('find_packages("src")', 'find_packages("old")', 2),
    "version-from-code": ('version="1.0"', 'version=open("V").read()', 2),
    "new-statement": ("setup(\n", "import os\nos.system('x')\nsetup(\n", 2),
}


@pytest.mark.parametrize("name", sorted(SETUP_EDITS))
def test_a_setup_py_edit_of_its_metadata_alone_is_source(
    repo: Path, tmp_path: Path, name: str
) -> None:
    old, new, wanted = SETUP_EDITS[name]
    trunk, patch = start(repo, f"setup-{name}")
    on_base(repo, trunk, {"setup.py": SETUP, "setup.cfg": CFG})
    git(repo, "checkout", "-q", patch)
    git(repo, "rebase", "-q", trunk)
    commit(repo, "patch: setup.py", {"setup.py": SETUP.replace(old, new)})
    code, report = write_set(repo, patch, trunk, tmp_path)
    assert code == wanted, report["summary"]
    assert ("setup.py" in paths(report, "source")) == (wanted == 0)


@pytest.mark.parametrize(
    ("name", "new", "wanted"),
    [
        ("metadata", CFG.replace("version = 1.0", "version = 1.1\nurl = https://x"), 0),
        ("options", CFG.replace("packages = find:", "packages = old"), 2),
        # Flask 7464e17c: a lint tool's section; setuptools and pytest read neither.
        ("flake8", CFG.replace("    E722\n", "    E722\n    B905\n"), 0),
        ("mypy", CFG + "\n[mypy]\nstrict = true\n\n[coverage:run]\nbranch = true\n", 0),
        ("pytest", CFG.replace("testpaths = tests", "testpaths = tests/unit"), 2),
        ("a-command", CFG + "\n[build_py]\ncompile = 1\n", 2),
        ("unknown", CFG + "\n[oracle]\nx = 1\n", 2),
    ],
)
def test_a_setup_cfg_edit_of_its_metadata_section_alone_is_source(
    repo: Path, tmp_path: Path, name: str, new: str, wanted: int
) -> None:
    trunk, patch = start(repo, f"setup-cfg-{name}")
    on_base(repo, trunk, {"setup.py": SETUP, "setup.cfg": CFG})
    git(repo, "checkout", "-q", patch)
    git(repo, "rebase", "-q", trunk)
    commit(repo, "patch: setup.cfg", {"setup.cfg": new})
    code, report = write_set(repo, patch, trunk, tmp_path)
    assert code == wanted, report["summary"]
