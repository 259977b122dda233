"""Bytecode for a build's environment (_gate/runs/bytecode.py), on real builds of a small package.

A build's environment gets the bytecode of its donor where a module is the same file and its
own compile where it is not; every `.pyc` is hash-checked, so it serves wherever its source
is the same bytes. A `.pyc` never rides on its header's word: a forged one in the donor that
claims the patch's source hash, or one a build backend leaves in the environment (by mtime,
by hash, unchecked, for a tool's module or the package's own), is never what Python runs.
"""

from __future__ import annotations

import importlib._bootstrap_external as external
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from _gate.core.protocol import FailClosed
from _gate.core.seal import build_digest, digest
from _gate.runs.bytecode import write_bytecode
from _gate.runs.envs import build_env
from _gate.runs.manifest import check, strays

from tests.helpers import BACKENDS, SCRIPTS, tiny

SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"

RULES = "def rate():\n    return 20\n"
PATCHED = "def rate():\n    return 21\n"

# Bytecode planted in an environment: for a tool's module and for the package's, by the
# source's mtime and size, by its hash, and unchecked. Each holds code that sets FORGED.
PLANTS = """
import importlib._bootstrap_external as external
import importlib.util
import pathlib
import sys
import sysconfig

def plant(source, how, data=None, optimization=""):
    forged = compile("FORGED = True\\n", str(source), "exec")
    if how == "mtime":
        stat = source.stat()
        pyc = external._code_to_timestamp_pyc(forged, int(stat.st_mtime), stat.st_size)
    else:
        digest = importlib.util.source_hash(source.read_bytes() if data is None else data)
        pyc = external._code_to_hash_pyc(forged, digest, how == "checked")
    cached = importlib.util.cache_from_source(str(source), optimization=optimization)
    pathlib.Path(cached).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(cached).write_bytes(bytes(pyc))

def plant_all(rules):
    # Every folder of packages the interpreter has, its own and any other on sys.path,
    # quietly giving up where it may not.
    sites = {sysconfig.get_paths()["purelib"], *(p for p in sys.path if "-packages" in p)}
    for site in map(pathlib.Path, sites):
        for args in (
            (site / "iniconfig" / "__init__.py", "mtime"),
            (site / "_pytest" / "reports.py", "checked"),
            (site / "yaml" / "__init__.py", "unchecked"),
            (site / "packaging" / "__init__.py", "mtime", None, 1),  # run under -O
            # The package's own module, before the installer writes it: by its source's hash.
            (site / "tiny" / "rules.py", "checked", rules),
        ):
            try:
                plant(*args)
            except OSError:
                pass
"""

# A build backend that plants them in the environment it runs in: before issue 48 that was
# the environment then judged (no build isolation, the build installed into it).
PLANTING_BACKEND = (
    PLANTS
    + """
from flit_core import buildapi
from flit_core.buildapi import *

def build_wheel(*args, **kwargs):
    plant_all(pathlib.Path("tiny/rules.py").read_bytes())
    return buildapi.build_wheel(*args, **kwargs)
"""
)


Builder = Callable[..., Path]


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Builder:
    """Build a tiny tree into a fresh environment as the judge builds one; returns the
    environment (its bytecode not yet written)."""
    root = tmp_path_factory.mktemp("bytecode")
    requirements = root / "requirements.txt"
    pins = [SCRIPTS / "requirements-judge.txt", BACKENDS]
    requirements.write_text("".join(p.read_text("utf-8") for p in pins), "utf-8")

    def built(name: str, rules: str = RULES, backend: str = "") -> Path:
        tree = tiny(root / name / "tree", backend=backend)
        (tree / "tiny/rules.py").write_text(rules, "utf-8")
        env = root / name / "env"
        build_env(tree, env, wheelhouse, requirements)
        return env

    return built


@pytest.fixture(scope="module")
def parent(build: Builder) -> Path:
    env = build("parent")
    write_bytecode(env)
    return env


def run(env: Path, code: str, *flags: str) -> str:
    done = subprocess.run(
        [str(env / "bin/python"), *flags, "-c", code], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def pyc(env: Path, module: str) -> Path:
    return Path(importlib.util.cache_from_source(str(env / SITE / module)))


def hash_checked(env: Path, module: str) -> bool:
    """The module's `.pyc` is hash-checked and holds its source's hash (PEP 552)."""
    data = pyc(env, module).read_bytes()
    flags = int.from_bytes(data[4:8], "little")
    source = (env / SITE / module).read_bytes()
    return flags == 0b11 and data[8:16] == importlib.util.source_hash(source)


def test_every_module_gets_hash_checked_bytecode(parent: Path) -> None:
    modules = [p.relative_to(parent / SITE).as_posix() for p in (parent / SITE).rglob("*.py")]
    assert {"tiny/rules.py", "_pytest/reports.py", "hypothesis/core.py"} <= set(modules)
    missing = [m for m in modules if not pyc(parent, m).is_file()]
    # A few modules of the tools are templates or test data that do not compile.
    assert len(missing) < len(modules) / 50, missing[:5]
    assert all(hash_checked(parent, m) for m in modules if m not in missing)


def test_a_patch_takes_the_parents_bytecode_for_the_same_files_only(
    parent: Path, build: Builder
) -> None:
    patch = build("patch", PATCHED)
    compiled = write_bytecode(patch, parent)
    assert compiled == 1  # tiny/rules.py, the one module the patch changed
    for module, same in (("_pytest/reports.py", True), ("tiny/rules.py", False)):
        assert (pyc(patch, module).read_bytes() == pyc(parent, module).read_bytes()) is same
    assert hash_checked(patch, "tiny/rules.py")
    assert run(patch, "import tiny.rules; print(tiny.rules.rate())") == "21"
    assert build_digest(patch) != build_digest(parent)


def test_a_build_of_the_same_files_is_the_same_build_with_its_bytecode(
    parent: Path, build: Builder
) -> None:
    same = build("same")
    write_bytecode(same, parent)
    assert build_digest(same) == build_digest(parent)
    assert run(same, "import tiny.rules; print(tiny.rules.rate())") == "20"


FORGED = ("iniconfig", "_pytest.reports", "yaml", "tiny.rules")  # what PLANTS plants


def forged(env: Path, *flags: str) -> list[str]:
    """The modules of FORGED (and `packaging`) that run the backend's code in `env`."""
    names = [*FORGED, "packaging"]
    found = f"(n for n in {names!r} if hasattr(importlib.import_module(n), 'FORGED'))"
    return run(env, f"import importlib; print(*{found})", *flags).split()


def forge_hash_pyc(donor: Path, module: str, claimed: bytes) -> None:
    """The donor's `.pyc` of `module` replaced by one that sets FORGED and claims `claimed`'s
    source hash: as a module whose SipHash collides with the patch's would have it."""
    code = compile("FORGED = True\n", str(donor / SITE / module), "exec")
    digest = importlib.util.source_hash(claimed)
    pyc(donor, module).write_bytes(bytes(external._code_to_hash_pyc(code, digest, True)))  # type: ignore[attr-defined]


def test_a_donor_pyc_that_claims_the_patchs_source_hash_is_not_taken(
    parent: Path, build: Builder, tmp_path: Path
) -> None:
    donor = Path(shutil.copytree(parent, tmp_path / "donor", symlinks=True))
    forge_hash_pyc(donor, "tiny/rules.py", PATCHED.encode())
    patch = build("collide", PATCHED)
    write_bytecode(patch, donor)
    assert forged(patch) == []
    assert run(patch, "import tiny.rules; print(tiny.rules.rate())") == "21"


def test_a_build_backend_plants_nothing_in_the_environment_it_is_judged_in(
    build: Builder,
) -> None:
    """The backend runs in a throwaway environment of its own (issue 48): what it plants
    there never reaches the one judged, which holds its manifest alone."""
    planted = build("planted", PATCHED, PLANTING_BACKEND)
    assert forged(planted) == []
    assert forged(planted, "-O") == []
    assert strays(planted, digest(planted)) == []
    assert not list((planted / SITE).rglob("__pycache__"))  # the installer compiles nothing
    assert run(planted, "import tiny.rules; print(tiny.rules.rate())") == "21"


def test_bytecode_planted_in_an_environment_is_never_run(parent: Path, build: Builder) -> None:
    """However bytecode came into an environment before the judge writes its own (pip's
    fallback venv compiles its own tools), the judge's replaces it."""
    planted = build("planted-after", PATCHED)
    rules = PATCHED.encode()
    run(planted, f"{PLANTS}\nplant_all({rules!r})")
    # Before the judge writes its bytecode, Python runs what was planted.
    assert forged(planted) == [*FORGED]
    assert forged(planted, "-O") == ["packaging"]  # -O reads only the .opt-1.pyc
    write_bytecode(planted, parent)
    assert forged(planted) == []
    assert forged(planted, "-O") == []
    for module in ("iniconfig/__init__.py", "_pytest/reports.py", "yaml/__init__.py"):
        assert pyc(planted, module).read_bytes() == pyc(parent, module).read_bytes()
    assert not list((planted / SITE).rglob("*.opt-1.pyc"))
    assert run(planted, "import tiny.rules; print(tiny.rules.rate())") == "21"


def test_the_manifest_names_each_file_no_install_wrote(parent: Path, tmp_path: Path) -> None:
    """An environment holds its distributions' RECORDs, the installer's own files and the
    judge's bytecode of listed modules; anything else is named (_gate/runs/manifest.py)."""
    env = Path(shutil.copytree(parent, tmp_path / "env", symlinks=True))
    assert strays(env, digest(env)) == []
    site = env / SITE
    (site / "sitecustomize.py").write_text("import os\n", "utf-8")
    (site / "tiny/rules.py").write_text(PATCHED, "utf-8")
    (site / "tiny/__pycache__/ghost.cpython-311.pyc").write_bytes(b"\0")
    (env / "bin/activate").write_text("# the installer's file, rewritten: not run by the judge\n")
    found = strays(env, digest(env))
    assert found == [
        f"{SITE}/sitecustomize.py, which no RECORD lists",
        f"{SITE}/tiny/__pycache__/ghost.cpython-311.pyc, which no RECORD lists",
        f"{SITE}/tiny/rules.py, which differs from its RECORD",
    ]
    with pytest.raises(FailClosed, match=r"the patch environment holds .*sitecustomize.py"):
        check(env, digest(env), "patch")
