"""Build provenance on real builds: the wheel installs the tree it was built from."""

from __future__ import annotations

from pathlib import Path

import pytest
from _gate.envs import build_env, dist_infos
from _gate.protocol import FailClosed
from _gate.provenance import Installed, Provenance, compare, provenance, refuse_startup_files

from tests.helpers import SCRIPTS
from tools.bakery import branch, edit, judge

PYPROJECT = """
[build-system]
requires = ["flit_core>=3.9,<5"]
build-backend = {backend}
{backend_path}

[project]
name = "tiny"
version = "0.1.0"
description = "a package the provenance check builds"

[tool.flit.module]
name = "tiny"
"""

# An in-tree backend that builds the wheel from an older copy of the module than the tree
# holds (it edits its build copy first): every step would judge the old code.
SWAPPING_BACKEND = """
import pathlib
from flit_core import buildapi
from flit_core.buildapi import *

def build_wheel(*args, **kwargs):
    for module in pathlib.Path().rglob("tiny/rules.py"):
        module.write_text("def rate():\\n    return 10\\n")
    return buildapi.build_wheel(*args, **kwargs)
"""


def tiny(root: Path, src: bool = False, backend: str = "") -> Path:
    """A small package, flat or src layout, with the example's backend or `backend`."""
    package = root / ("src/tiny" if src else "tiny")
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""tiny"""\n', "utf-8")
    (package / "rules.py").write_text("def rate():\n    return 20\n", "utf-8")
    (package / "data.json").write_text("{}\n", "utf-8")
    if backend:
        (root / "_backend").mkdir()
        (root / "_backend/evil.py").write_text(backend, "utf-8")
    path = 'backend-path = ["_backend"]' if backend else ""
    named = '"evil"' if backend else '"flit_core.buildapi"'
    text = PYPROJECT.format(backend=named, backend_path=path)
    (root / "pyproject.toml").write_text(text, "utf-8")
    return root


def built(tree: Path, dest: Path, wheelhouse: Path) -> Path:
    """The dist-info of `tree`'s build, installed as the judge installs it."""
    python = build_env(tree, dest, wheelhouse, SCRIPTS / "requirements-judge.txt")
    return next(i for i in dist_infos(python.parent.parent) if i.name.startswith("tiny-"))


def test_an_honest_wheel_installs_its_tree_file_for_file(tmp_path: Path, wheelhouse: Path) -> None:
    tree = tiny(tmp_path / "tree")
    found = provenance(tree, built(tree, tmp_path / "env", wheelhouse), "head:")
    assert {f.path: f.source for f in found.files} == {
        "tiny/__init__.py": "tiny/__init__.py",
        "tiny/data.json": "tiny/data.json",
        "tiny/rules.py": "tiny/rules.py",
    }
    assert found.folders == {"tiny": ""} and found.generated == frozenset()


def test_a_backend_that_swaps_a_module_fails_closed_naming_it(
    tmp_path: Path, wheelhouse: Path
) -> None:
    tree = tiny(tmp_path / "tree", backend=SWAPPING_BACKEND)
    info = built(tree, tmp_path / "env", wheelhouse)
    with pytest.raises(FailClosed, match=r"the wheel's tiny/rules\.py is not head:tiny/rules\.py"):
        provenance(tree, info, "head:")


def test_startup_files_in_a_wheel_fail_closed() -> None:
    for path in ("zz_forge.pth", "sitecustomize.py", "usercustomize.py", "tiny/x.pth"):
        with pytest.raises(FailClosed, match="runs at every interpreter start"):
            refuse_startup_files(["tiny/__init__.py", path])
    refuse_startup_files(["tiny/sitecustomize.py", "tiny/__init__.py"])  # a module of its own


def files(*rows: tuple[str, str]) -> Provenance:
    return Provenance(
        tuple(Installed(path, "0" * 64, source) for path, source in rows),
        {p.split("/")[0]: s.removesuffix(p).rstrip("/") for p, s in rows if s},
    )


def test_the_patch_wheel_has_the_parents_kind_of_origin(tmp_path: Path) -> None:
    parent = files(("tiny/__init__.py", "src/tiny/__init__.py"), ("tiny/_version.py", ""))
    honest = files(("tiny/__init__.py", "src/tiny/__init__.py"), ("tiny/_version.py", ""))
    compare(parent, honest, tmp_path, "head:")  # a generated version file on both sides
    nowhere = files(("tiny/__init__.py", "src/tiny/__init__.py"), ("tiny/rules.py", ""))
    with pytest.raises(FailClosed, match=r"tiny/rules\.py has no source in head .*from nowhere"):
        compare(parent, nowhere, tmp_path, "head:")
    (tmp_path / "src/tiny").mkdir(parents=True)
    remapped = files(("tiny/__init__.py", "old/tiny/__init__.py"), ("tiny/_version.py", ""))
    with pytest.raises(FailClosed, match=r"built from head:old/tiny, the parent's from src/tiny"):
        compare(parent, remapped, tmp_path, "head:")
    new_top = files(("tiny/__init__.py", "src/tiny/__init__.py"), ("evil.py", "evil.py"))
    with pytest.raises(FailClosed, match=r"evil\.py, a top-level name the parent's wheel did not"):
        compare(parent, new_top, tmp_path, "head:")


def test_a_src_layout_maps_its_package_from_src(tmp_path: Path, wheelhouse: Path) -> None:
    tree = tiny(tmp_path / "tree", src=True)
    found = provenance(tree, built(tree, tmp_path / "env", wheelhouse), "head:")
    assert found.folders == {"tiny": "src"}
    assert {f.source for f in found.files} == {
        "src/tiny/__init__.py",
        "src/tiny/data.json",
        "src/tiny/rules.py",
    }


# --- on a bake: the judge -----------------------------------------------------------------

RULE = "src/shop/discounts.py"
HONEST, BROKEN = "    return amount\n", "    return amount + 1\n"
# The patch breaks the rule in its tree and builds its wheel from the unbroken copy: every
# step would judge the old code while users run the new.
SHOP_SWAP = f"""
import pathlib
from flit_core import buildapi
from flit_core.buildapi import *

def build_wheel(*args, **kwargs):
    rule = pathlib.Path({RULE!r})
    rule.write_text(rule.read_text().replace({BROKEN!r}, {HONEST!r}))
    return buildapi.build_wheel(*args, **kwargs)
"""


def swaps_the_rule(repo: Path) -> None:
    edit(repo / RULE, HONEST, BROKEN)
    edit(
        repo / "pyproject.toml",
        'build-backend = "flit_core.buildapi"\n',
        'build-backend = "evil"\nbackend-path = ["_backend"]\n',
    )
    (repo / "_backend").mkdir()
    (repo / "_backend/evil.py").write_text(SHOP_SWAP, "utf-8")


@pytest.mark.e2e
def test_the_judge_refuses_a_wheel_that_is_not_its_tree(shop: Path) -> None:
    verdict = judge(shop, "--head", branch(shop, "provenance-swap", swaps_the_rule))
    build = verdict.step("build")
    assert verdict.report["verdict"] == "error", build
    assert build["summary"] == (
        "the wheel's shop/discounts.py is not head:src/shop/discounts.py, the file it is built "
        "from; the build put other code into the wheel than the tree holds"
    )


@pytest.mark.e2e
def test_an_honest_patch_says_its_wheel_matches_its_tree(shop: Path) -> None:
    def comment(repo: Path) -> None:
        (repo / "src/shop/__init__.py").write_text(
            (repo / "src/shop/__init__.py").read_text("utf-8") + "# a comment\n", "utf-8"
        )

    verdict = judge(shop, "--head", branch(shop, "provenance-honest", comment))
    assert verdict.report["verdict"] == "merge", verdict.output[-2000:]
    build = verdict.step("build")
    assert "; patch wheel matches head:src/shop/ (" in build["summary"], build["summary"]
    rows = {row["path"]: row["source"] for row in build["evidence"]["patch"]["files"]}
    assert rows["shop/discounts.py"] == "src/shop/discounts.py"
