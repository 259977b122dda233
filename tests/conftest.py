"""Fixtures shared by the template's tests: one wheelhouse, real bakes, real repositories.

The plain helpers the tests share (functions, constants, types) are helpers.py's.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _gate.runs.envs import build_env
from _gate.runs.reuse import CACHE_ENV

from tests.helpers import (
    ADOPTER,
    BACKENDS,
    CLASS_STYLE,
    PERTURBATIONS,
    SCRIPTS,
    UNITTEST_STYLE,
    Built,
    C,
    U,
    bake_with,
    builder,
    compiled,
)
from tools import adopted_history
from tools.bakery import TEMPLATE, bake, edit, git


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first: pytest-xdist gives each worker whole modules in this order, and a module
    of whole judges started last would finish alone. `e2e(heavy=True)` goes first of all."""

    def weight(item: pytest.Item) -> int:
        mark = item.get_closest_marker("e2e")
        return 0 if mark is None else 2 if mark.kwargs.get("heavy") else 1

    items.sort(key=weight, reverse=True)


@pytest.fixture(scope="session", autouse=True)
def judges_wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fill the judges' shared wheelhouse once (the only download); every judge is offline."""
    path = Path(os.environ.get("ORACLE_WHEELHOUSE") or TEMPLATE / ".cache" / "wheelhouse")
    os.environ["ORACLE_WHEELHOUSE"] = str(path)
    report = tmp_path_factory.mktemp("wheelhouse") / "report.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # pytest-xdist workers share the wheelhouse: one fills it, the others then find it full.
    with open(path.parent / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # The judge's set, the strength session's (the judge's and mutmut's, one set), and
        # the build backends the provenance tests build with.
        judge, strength = (SCRIPTS / f"requirements-{n}.txt" for n in ("judge", "strength"))
        for files in ([judge], [judge, strength], [BACKENDS]):
            cmd = [sys.executable, str(SCRIPTS / "wheelhouse.py"), "--dest", str(path)]
            for file in files:
                cmd += ["--requirements", str(file)]
            proc = subprocess.run([*cmd, "--report", str(report)], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr
    return path


@pytest.fixture(scope="module")
def wheelhouse(request: pytest.FixtureRequest, judges_wheelhouse: Path) -> Path:
    """The wheelhouse a module's judges install from: the judges' one, or in a module marked
    `adopted`, the adopted projects' own, kept between runs beside it."""
    if request.node.get_closest_marker("adopted"):
        return adopted_history.adopted_wheelhouse()
    return judges_wheelhouse


@pytest.fixture
def identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Adopted projects commit as their users' would (ADOPTER): `usefixtures` in a module."""
    for name, value in ADOPTER.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="session", autouse=True)
def kept_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of kept parent runs for the suite (scripts/_gate/runs/reuse.py), as one machine
    keeps them: judgments of one bake's base share its parent's runs, across modules and
    pytest-xdist workers (whose temporary folders share a parent)."""
    root = tmp_path_factory.getbasetemp()
    path = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "oracle-cache"
    os.environ[CACHE_ENV] = str(path)
    return path


@pytest.fixture(scope="module")
def shop(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default bake, shared by a module whose tests each judge their own branch.

    Its base runs no perturbed run (oracle/judge.yaml `perturb: []`, as a user may set it)
    unless the module is marked `perturbed`: the perturbed runs multiply each case's runs by
    four, and they have tests of their own (test_perturb.py, marked; the honest bases of
    test_confinement_attacks.py turn them on), as do the real projects' histories and the
    README's steps, which judge with the baked default."""
    repo = bake(tmp_path_factory.mktemp("bake"))
    if request.node.get_closest_marker("perturbed") is None:
        edit(repo / "oracle/judge.yaml", PERTURBATIONS, "perturb: []\n")
        git(repo, "commit", "-q", "--amend", "--no-edit", "--no-verify", "oracle/judge.yaml")
    return repo


@pytest.fixture(scope="module")
def envs(shop: Path, tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Built:
    """The module bake's commits built as the judge builds them (helpers.builder), each once:
    a module whose bake is another declares its own `envs` over that bake."""
    return builder(shop, tmp_path_factory.mktemp("envs"), wheelhouse)


@pytest.fixture
def repo(shop: Path) -> Iterator[Path]:
    """The module's bake (`shop`) for one test, put back after it: on main, its work tree and
    index as committed, and no merge in progress (a failed test may leave one). Branches a
    test commits stay, as they do in `shop`; a module's fixtures that need its bake for the
    whole module take `shop` itself."""
    yield shop
    git(shop, "reset", "-q", "--hard")
    git(shop, "checkout", "-q", "--force", "main")


@pytest.fixture(scope="module")
def inventory_repo(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """The inventory's bake (test_inventory*.py): its base gains unittest and class-based tests
    in one commit. Module-scoped: each module that takes it gets a bake of its own."""
    files = {U: UNITTEST_STYLE, C: CLASS_STYLE}
    base = bake_with(tmp_path_factory.mktemp("inventory"), files, "unittest and class tests")
    return base


@pytest.fixture(scope="module")
def inventory_python(
    inventory_repo: Path, tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path
) -> Path:
    """The example built once: patches here touch only tests, so both sides share it."""
    requirements = inventory_repo / "scripts/requirements-judge.txt"
    return compiled(
        build_env(inventory_repo, tmp_path_factory.mktemp("env") / "env", wheelhouse, requirements)
    )
