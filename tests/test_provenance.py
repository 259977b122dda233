"""Build provenance on real builds: the wheel installs the tree it was built from."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from _gate.core.protocol import FailClosed
from _gate.core.seal import digest
from _gate.runs.envs import build_env, dist_infos, without_installer
from _gate.runs.manifest import strays
from _gate.runs.provenance import Installed, Provenance, compare, provenance, refuse_startup_files

from tests.helpers import BACKENDS, SCRIPTS, TINY_PYPROJECT, tiny
from tools.bakery import branch, edit, judge

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


def built(tree: Path, dest: Path, wheelhouse: Path) -> Path:
    """The dist-info of `tree`'s build, installed as the judge installs it (with the judge's
    tools and the backends of tests/data/requirements-backends.txt)."""
    requirements = dest.parent / f"{dest.name}-requirements.txt"
    pins = [SCRIPTS / "requirements-judge.txt", BACKENDS]
    requirements.write_text("".join(p.read_text("utf-8") for p in pins), "utf-8")
    python = build_env(tree, dest, wheelhouse, requirements)
    return next(i for i in dist_infos(python.parent.parent) if i.name.startswith("tiny-"))


def test_an_environment_holds_the_tools_its_runs_use_and_not_the_judges_installer(
    tmp_path: Path, wheelhouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv is pinned with the judge's tools for the judge's own installs and checks; nothing
    runs it from an environment the judge builds, so none holds it (issue 28), whatever the
    shell that started the judge sets."""
    assert "\nuv==" in (SCRIPTS / "requirements-judge.txt").read_text("utf-8")
    monkeypatch.setenv("UV_EXCLUDE", str(tmp_path / "no-such-file.txt"))
    env = tmp_path / "env"
    built(tiny(tmp_path / "tree"), env, wheelhouse)
    assert (env / "bin/pytest").is_file()
    assert (env / "bin/hypothesis").is_file()
    assert not (env / "bin/uv").exists()
    assert not list(env.glob("lib/python*/site-packages/uv"))
    spaced = tmp_path / "a b"  # a path uv would split: the environment then holds uv
    spaced.mkdir()
    assert without_installer(spaced) == {"UV_EXCLUDE": ""}


def test_an_honest_wheel_installs_its_tree_file_for_file(tmp_path: Path, wheelhouse: Path) -> None:
    tree = tiny(tmp_path / "tree")
    found = provenance(tree, built(tree, tmp_path / "env", wheelhouse), "head:")
    assert {f.path: f.source for f in found.files} == {
        "tiny/__init__.py": "tiny/__init__.py",
        "tiny/data.json": "tiny/data.json",
        "tiny/rules.py": "tiny/rules.py",
    }
    assert found.folders == {"tiny": ""}
    assert found.generated == frozenset()


def test_a_backend_that_swaps_a_module_fails_closed_naming_it(
    tmp_path: Path, wheelhouse: Path
) -> None:
    tree = tiny(tmp_path / "tree", backend=SWAPPING_BACKEND)
    info = built(tree, tmp_path / "env", wheelhouse)
    with pytest.raises(FailClosed, match=r"the wheel's tiny/rules\.py is not head:tiny/rules\.py"):
        provenance(tree, info, "head:")


# A backend that edits its build copy's declarations: the wheel's console script runs other
# code than the tree's, or requires what the tree does not.
RETARGETING_BACKEND = """
import pathlib
from flit_core import buildapi
from flit_core.buildapi import *

def build_wheel(*args, **kwargs):
    project = pathlib.Path("pyproject.toml")
    project.write_text(project.read_text().replace({old!r}, {new!r}))
    return buildapi.build_wheel(*args, **kwargs)
"""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'tiny = "tiny:main"',
            'tiny = "tiny.rules:rate"',
            r"declares entry point \[console_scripts\] tiny = tiny\.rules:rate, which "
            r"head:pyproject\.toml does not declare",
        ),
        (
            "[project.scripts]",
            '[project.entry-points.pytest11]\nforge = "tiny.rules"\n\n[project.scripts]',
            r"entry point \[pytest11\] forge = tiny\.rules, which head:pyproject\.toml does not",
        ),
        (
            '"PyYAML >= 6"',
            '"PyYAML >= 6", "pytest"',
            r"declares requirement pytest, which head:pyproject\.toml does not declare",
        ),
        (
            'Test_X = ["hypothesis',
            'other = ["hypothesis',
            r"declares requirement hypothesis \(extra other\), which head:pyproject",
        ),
    ],
)
def test_the_wheels_entry_points_and_requirements_are_the_trees(
    tmp_path: Path, wheelhouse: Path, old: str, new: str, message: str
) -> None:
    tree = tiny(tmp_path / "tree", backend=RETARGETING_BACKEND.format(old=old, new=new))
    with pytest.raises(FailClosed, match=message):
        provenance(tree, built(tree, tmp_path / "env", wheelhouse), "head:")


# Remaps that build a module of the package from a file outside its source folder, holding
# the old code, in the three backends' spellings (the build configuration is needs-review as
# well: tests/test_writeset.py).
HATCH = (
    TINY_PYPROJECT.replace('["flit_core>=3.9,<5"]', '["hatchling"]')
    .replace("{backend}\n{backend_path}", '"hatchling.build"')
    .replace(
        '[tool.flit.module]\nname = "tiny"',
        '[tool.hatch.build.targets.wheel]\npackages = ["tiny"]\n{remap}',
    )
)
SETUPTOOLS = HATCH.replace(
    'requires = ["hatchling"]\nbuild-backend = "hatchling.build"',
    'requires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"',
).replace("[tool.hatch.build.targets.wheel]\npackages", "[tool.setuptools]\npackages")
FILE = r"the wheel's tiny/rules\.py is not head:tiny/rules\.py"
FOLDER = r"the wheel's tiny is built from head:old/tiny, the parent's from tiny, which still"
REMAPS = {  # (the parent's pyproject.toml, the patch's, what the check says)
    "hatch-force-include": (
        HATCH.format(remap=""),
        HATCH.format(
            remap='exclude = ["tiny/rules.py"]\n\n'
            '[tool.hatch.build.targets.wheel.force-include]\n"old/rules.py" = "tiny/rules.py"'
        ),
        FILE,
    ),
    "hatch-sources": (
        HATCH.format(remap=""),
        HATCH.replace('packages = ["tiny"]', 'packages = ["old/tiny"]').format(
            remap='\n[tool.hatch.build.targets.wheel.sources]\n"old" = ""'
        ),
        FOLDER,
    ),
    "setuptools-package-dir": (
        SETUPTOOLS.format(remap=""),
        SETUPTOOLS.format(remap='package-dir = {"tiny" = "old/tiny"}'),
        FOLDER,
    ),
}


@pytest.mark.parametrize("remap", sorted(REMAPS))
def test_a_remap_to_old_code_outside_the_package_fails_closed(
    tmp_path: Path, wheelhouse: Path, remap: str
) -> None:
    parent_config, patch_config, message = REMAPS[remap]
    parent = tiny(tmp_path / "parent")
    (parent / "pyproject.toml").write_text(parent_config, "utf-8")
    before = provenance(parent, built(parent, tmp_path / "parent-env", wheelhouse), "base:")
    assert before.folders == {"tiny": ""}
    assert not before.generated
    patch = tiny(tmp_path / "patch")
    (patch / "pyproject.toml").write_text(patch_config, "utf-8")
    old = "def rate():\n    return 10\n"
    if message == FOLDER:
        shutil.copytree(patch / "tiny", patch / "old/tiny")
        (patch / "old/tiny/rules.py").write_text(old, "utf-8")
    else:
        (patch / "old").mkdir()
        (patch / "old/rules.py").write_text(old, "utf-8")
    (patch / "tiny/rules.py").write_text("def rate():\n    return 30\n", "utf-8")

    def judged() -> None:  # either reading the patch's wheel or comparing it refuses
        after = provenance(patch, built(patch, tmp_path / "patch-env", wheelhouse), "head:")
        compare(before, after, patch, "head:")

    with pytest.raises(FailClosed, match=message):
        judged()


def test_a_generated_version_file_and_a_version_bump_keep_their_origin(
    tmp_path: Path, wheelhouse: Path
) -> None:
    """hatchling's version hook writes _version.py at build time, as hatch-vcs and
    setuptools-scm do: generated on both sides, listed with its digest."""
    hook = '[tool.hatch.build.hooks.version]\npath = "tiny/_version.py"'
    sides = {}
    for side, version in (("parent", "0.1.0"), ("patch", "0.2.0")):
        tree = tiny(tmp_path / side)
        config = HATCH.format(remap=hook).replace('version = "0.1.0"', f'version = "{version}"')
        (tree / "pyproject.toml").write_text(config, "utf-8")
        sides[side] = provenance(tree, built(tree, tmp_path / f"{side}-env", wheelhouse), "head:")
    compare(sides["parent"], sides["patch"], tmp_path / "patch", "head:")
    generated = [f for f in sides["patch"].files if f.path == "tiny/_version.py"]
    assert generated
    assert generated[0].source == ""
    assert len(generated[0].sha256) == 64
    assert sides["patch"].generated == sides["parent"].generated == {"tiny/_version.py"}


SETUP_PY = """
from pathlib import Path
from setuptools import setup
from setuptools.command.build_py import build_py


class Old(build_py):
    def run(self):
        super().run()
        Path(self.build_lib, "tiny", "rules.py").write_text("def rate():\\n    return 10\\n")


setup(cmdclass={"build_py": Old})
"""


def test_a_setup_py_that_copies_old_code_into_the_build_fails_closed(
    tmp_path: Path, wheelhouse: Path
) -> None:
    tree = tiny(tmp_path / "tree")
    (tree / "pyproject.toml").write_text(SETUPTOOLS.format(remap=""), "utf-8")
    (tree / "setup.py").write_text(SETUP_PY, "utf-8")
    with pytest.raises(FailClosed, match=FILE):
        provenance(tree, built(tree, tmp_path / "env", wheelhouse), "head:")


def test_startup_files_in_a_wheel_fail_closed() -> None:
    for path in ("zz_forge.pth", "sitecustomize.py", "usercustomize.py", "sitecustomize"):
        with pytest.raises(FailClosed, match="runs at every interpreter start"):
            refuse_startup_files(["tiny/__init__.py", path])
    # A module of its own, and weights saved as .pth inside the package: nothing runs them.
    refuse_startup_files(["tiny/sitecustomize.py", "tiny/__init__.py", "tiny/model.pth"])


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
# Builds the unbroken rule only where its environment looks like the judge's: by the variables
# the judge and CI set, or by the network a sandbox lacks.
JUDGED_BY = {
    # uv's own (UV, UV_INTERNAL__BUILD_DIR, VIRTUAL_ENV) are in every build uv runs.
    "variables": "any(k.startswith(('ORACLE_', 'JUDGE_', 'NOX', 'PIP_', 'CI', 'GITHUB_'))"
    " or k in ('UV_OFFLINE', 'UV_CACHE_DIR', 'UV_NO_INDEX') for k in os.environ)",
    "offline": "not online()",
}
KNOWS_THE_JUDGE = f"""
import os, pathlib, socket
from flit_core import buildapi
from flit_core.buildapi import *

def online():
    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
    except OSError:
        return False
    return True

def build_wheel(*args, **kwargs):
    if {{judged}}:
        rule = pathlib.Path({RULE!r})
        rule.write_text(rule.read_text().replace({BROKEN!r}, {HONEST!r}))
    return buildapi.build_wheel(*args, **kwargs)
"""


def in_tree_backend(repo: Path, code: str) -> None:
    edit(
        repo / "pyproject.toml",
        'build-backend = "flit_core.buildapi"\n',
        'build-backend = "evil"\nbackend-path = ["_backend"]\n',
    )
    (repo / "_backend").mkdir()
    (repo / "_backend/evil.py").write_text(code, "utf-8")


# The patch breaks the rule in its tree and builds its wheel from the unbroken copy: every
# step would judge the old code while users run the new.
def swaps_the_rule(repo: Path) -> None:
    edit(repo / RULE, HONEST, BROKEN)
    in_tree_backend(repo, KNOWS_THE_JUDGE.format(judged="True"))


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


@pytest.mark.e2e
@pytest.mark.parametrize("spelling", sorted(JUDGED_BY))
def test_a_backend_that_builds_differently_for_the_judge_never_merges(
    shop: Path, spelling: str
) -> None:
    def knows(repo: Path) -> None:
        edit(repo / RULE, HONEST, BROKEN)
        in_tree_backend(repo, KNOWS_THE_JUDGE.format(judged=JUDGED_BY[spelling]))

    verdict = judge(shop, "--head", branch(shop, f"provenance-knows-{spelling}", knows))
    build, write_set = verdict.step("build"), verdict.step("write-set")
    assert verdict.report["verdict"] != "merge", verdict.output[-2000:]
    assert write_set["status"] == "needs-review", write_set["summary"]
    assert "pyproject.toml (rule build configuration [build-system])" in write_set["summary"]
    if spelling == "variables":  # it saw none of them, so it built the broken rule, judged
        assert "; patch wheel matches head:src/shop/ (" in build["summary"], build["summary"]
        assert verdict.step("flake-budget")["status"] == "block", verdict.output[-2000:]
    else:  # the sandbox has no network, so it built the old rule, refused
        assert build["summary"].startswith("the wheel's shop/discounts.py is not head:src/shop/")


# An in-tree backend that adds a .pth to the top of the wheel flit built.
SHIPS_A_PTH = """
import base64, hashlib, pathlib, zipfile
from flit_core import buildapi
from flit_core.buildapi import *

def build_wheel(directory, *args, **kwargs):
    name = buildapi.build_wheel(directory, *args, **kwargs)
    wheel = pathlib.Path(directory, name)
    line = b"import os; os.environ.setdefault('FORGED', '1')\\n"
    digest = base64.urlsafe_b64encode(hashlib.sha256(line).digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(wheel) as old:
        entries = {i.filename: old.read(i) for i in old.infolist()}
    record = next(n for n in entries if n.endswith(".dist-info/RECORD"))
    entries["zz_forge.pth"] = line
    entries[record] += f"zz_forge.pth,sha256={digest},{len(line)}\\n".encode()
    with zipfile.ZipFile(wheel, "w") as new:
        for path, data in entries.items():
            new.writestr(path, data)
    return name
"""


@pytest.mark.e2e
def test_a_wheel_that_ships_a_pth_does_not_merge(shop: Path) -> None:
    verdict = judge(
        shop, "--head", branch(shop, "provenance-pth", lambda r: in_tree_backend(r, SHIPS_A_PTH))
    )
    assert verdict.report["verdict"] == "error", verdict.output[-2000:]
    assert verdict.step("build")["summary"] == (
        "the wheel installs zz_forge.pth, which runs at every interpreter start; a build may "
        "not ship one (remove it from the package's files)"
    )


@pytest.mark.e2e
def test_ordinary_packaging_changes_merge(shop: Path) -> None:
    """A version bump, a new runtime dependency the wheelhouse holds, a package data file and
    a module moved within the package (its old name kept as a re-export)."""

    def ordinary(repo: Path) -> None:
        edit(repo / "pyproject.toml", 'version = "0.1.0"', 'version = "0.2.0"')
        edit(repo / "pyproject.toml", "dependencies = []", 'dependencies = ["PyYAML>=6"]')
        (repo / "src/shop/rates.json").write_text('{"vat": 0}\n', "utf-8")
        (repo / "src/shop/pricing").mkdir()
        (repo / "src/shop/pricing/__init__.py").write_text('"""Pricing rules."""\n', "utf-8")
        moved = repo / "src/shop/pricing/discounts.py"
        (repo / RULE).rename(moved)
        (repo / RULE).write_text(
            '"""Moved to shop.pricing.discounts."""\n\n'
            "from .pricing.discounts import *  # noqa: F403\n",
            "utf-8",
        )

    verdict = judge(shop, "--head", branch(shop, "provenance-ordinary", ordinary))
    assert verdict.report["verdict"] == "merge", verdict.output[-3000:]
    rows = {
        row["path"]: row["source"] for row in verdict.step("build")["evidence"]["patch"]["files"]
    }
    assert rows["shop/pricing/discounts.py"] == "src/shop/pricing/discounts.py"
    assert rows["shop/rates.json"] == "src/shop/rates.json"


# An honest setuptools build that compiles a C extension in its throwaway environment, ships
# package data, reads its version from the package at build time and writes caches of its
# own (build/, the egg-info, a compiler's temporary files) in its scratch.
EXTENSION = """
#include <Python.h>
static PyObject *twice(PyObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLong(2 * n);
}
static PyMethodDef methods[] = {{"twice", twice, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speed", NULL, -1, methods};
PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&module); }
"""
COMPILED_SETUP = """
from setuptools import Extension, setup

setup(ext_modules=[Extension("tiny._speed", ["tiny/_speed.c"])])
"""


def test_honest_builds_keep_working_in_their_throwaway_environment(
    tmp_path: Path, wheelhouse: Path
) -> None:
    tree = tiny(tmp_path / "tree")
    config = SETUPTOOLS.format(remap="").replace('version = "0.1.0"', 'dynamic = ["version"]')
    config += '\n[tool.setuptools.dynamic]\nversion = {attr = "tiny.__version__"}\n'
    config += '\n[tool.setuptools.package-data]\ntiny = ["data.json"]\n'
    (tree / "pyproject.toml").write_text(config, "utf-8")
    (tree / "setup.py").write_text(COMPILED_SETUP, "utf-8")
    (tree / "tiny/_speed.c").write_text(EXTENSION, "utf-8")
    (tree / "tiny/__init__.py").write_text('"""tiny"""\n__version__ = "1.2.3"\n', "utf-8")
    info = built(tree, tmp_path / "env", wheelhouse)
    env = tmp_path / "env"
    python = env / "bin/python"
    code = "import tiny, tiny._speed as s; print(tiny.__version__, s.twice(21))"
    assert subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split() == ["1.2.3", "42"]
    assert info.name == "tiny-1.2.3.dist-info"
    assert (info.parent / "tiny/data.json").is_file()
    assert strays(env, digest(env)) == []
    found = provenance(tree, info, "head:")
    generated = [f.path for f in found.files if not f.source]  # the compiled module alone
    assert len(generated) == 1, generated
    assert generated[0].startswith("tiny/_speed."), generated
    assert generated[0].endswith(".so"), generated
    assert not (tree / "build").exists()
    assert not list(tree.glob("*.egg-info"))


# Extras that name the project itself, nested, with a marker: hatchling resolves them into the
# rows of the extras they name, setuptools keeps them as written (issue 50).
SELF_EXTRAS = """
[project.optional-dependencies]
index = ["packaging>=20"]
test = ["tiny[index]", "pluggy; python_version >= '3.8'"]
all = ["Tiny[test] ; python_version >= '3.8'"]
"""


@pytest.mark.parametrize("backend", ["hatch", "setuptools"])
def test_extras_that_name_the_project_itself_match_the_tree_as_either_backend_writes_them(
    tmp_path: Path, wheelhouse: Path, backend: str
) -> None:
    tree = tiny(tmp_path / "tree")
    config = (HATCH if backend == "hatch" else SETUPTOOLS).format(remap="")
    head, _, rest = config.partition("[project.optional-dependencies]")
    config = head + SELF_EXTRAS.strip() + "\n" + rest.split("\n", 2)[2]
    (tree / "pyproject.toml").write_text(config, "utf-8")
    info = built(tree, tmp_path / "env", wheelhouse)
    provenance(tree, info, "head:")  # raises FailClosed on a requirement of no declaration
    # A requirement that is no extra's, given by neither spelling, still fails closed.
    metadata = info / "METADATA"
    text = metadata.read_text("utf-8").replace(
        "Requires-Dist: packaging",
        "Requires-Dist: evil; extra == 'test'\nRequires-Dist: packaging",
        1,
    )
    metadata.write_text(text, "utf-8")
    with pytest.raises(FailClosed, match=r"the wheel declares requirement evil \(extra test\)"):
        provenance(tree, info, "head:")
