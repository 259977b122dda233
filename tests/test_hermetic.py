"""The patch cannot shape the world it is judged in (issue 48): attack branches of the example.

Each attack is a real break for real users, which the gate would see in the environment a
user installs the wheel into, and code that keeps the break out of the environment the gate
judges it in. Every branch is judged confined (this machine's namespaces), after a code
owner's review (ORACLE_REVIEW=1: an in-tree backend is build configuration, needs-review on
its own; what is judged here is what the patch's code does), with a cache folder of the
module's own: the base's runs are kept once for every attack, and whatever an attack planted
where it may not would be kept there for every later one to find. Before issue 48 each
merged.

- A build that writes into its own judged environment: the backend imports the package for
  its version (a non-literal `__version__`, `dynamic = ["version"]`), or is a backend of the
  tree's own, and writes code that undoes the break at every interpreter start.
- A landed patch's plant: patch A, honest to the eye, plants a dormant startup file at build
  time; kept by its inputs, A's environment is the parent of patch B, where the plant wakes
  and fails the very parent test B breaks.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from _gate.core.context import REVIEW
from _gate.runs.reuse import CACHE_ENV

from tests.helpers import BROKEN_RETURN, CAUGHT_BY, HONEST_RETURN, breaks_the_rules, pth, shown
from tools.bakery import Verdict, branch, edit, judge

INIT, TOML = "src/shop/__init__.py", "pyproject.toml"
# The break's undoing: at interpreter start, the rule is put back as it was.
UNDO = """
import shop.discounts as _d
_broken = _d.invert_discount
def _honest(discounted_cents, bps):
    amount = _broken(discounted_cents, bps)
    return amount - 1 if discounted_cents > 1000 else amount
_d.invert_discount = _honest
"""

# Writes each of PLANTS (path under site-packages, text) into every folder of packages the
# running interpreter has (its own, and any other on sys.path), quietly giving up where it
# may not.
PLANT = """
import pathlib as _pathlib
import sys as _sys
import sysconfig as _sysconfig

def _plant():
    _sites = {_sysconfig.get_paths()["purelib"], *(p for p in _sys.path if "-packages" in p)}
    for _site in map(_pathlib.Path, _sites):
        for _name, _text in PLANTS:
            try:
                (_site / _name).parent.mkdir(parents=True, exist_ok=True)
                (_site / _name).write_text(_text)
            except OSError:
                pass
"""

# Appended to the package: flit_core imports it to read a version that is not a literal.
AT_BUILD = """
import sys as _sys
if "flit_core" in _sys.modules:
    _plant()
"""

# A backend of the tree's own: flit_core's, planting first.
BACKEND = """
from flit_core import buildapi
from flit_core.buildapi import *

def build_wheel(*args, **kwargs):
    _plant()
    return buildapi.build_wheel(*args, **kwargs)
"""

Plants = list[tuple[str, str]]


def named(code: str, plants: Plants) -> str:
    return f"PLANTS = {plants!r}\n{PLANT}{code}"


def dynamic_version(repo: Path) -> None:
    """The version read from the package at build time, as many projects do."""
    edit(repo / TOML, 'version = "0.1.0"\n', 'dynamic = ["version"]\n')
    edit(repo / INIT, '__version__ = "0.1.0"', '__version__ = ".".join(("0", "1", "0"))')


def planted_at_import(plants: Plants) -> Callable[[Path], None]:
    def change(repo: Path) -> None:
        breaks_the_rules(repo)
        dynamic_version(repo)
        path = repo / INIT
        path.write_text(path.read_text("utf-8") + named(AT_BUILD, plants), "utf-8")

    return change


def planted_by_backend(plants: Plants) -> Callable[[Path], None]:
    def change(repo: Path) -> None:
        breaks_the_rules(repo)
        (repo / "_build").mkdir()
        (repo / "_build/backend.py").write_text(named(BACKEND, plants), "utf-8")
        edit(
            repo / TOML,
            'build-backend = "flit_core.buildapi"',
            'build-backend = "backend"\nbackend-path = ["_build"]',
        )

    return change


def recorded(name: str, files: dict[str, str]) -> Plants:
    """`files` and a dist-info of `name` whose RECORD lists them with their digests: what an
    installer would have written for them."""
    info = f"{name}-1.0.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"}
    rows = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        rows.append(f"{path},sha256={digest.decode()},{len(text.encode())}\n")
    return [*files.items(), (f"{info}/RECORD", "".join(rows) + f"{info}/RECORD,,\n")]


BUILD_TIME = {
    "sitecustomize-at-import": planted_at_import([("sitecustomize.py", UNDO)]),
    "pth-at-import": planted_at_import([("zz_shop.pth", pth(UNDO))]),
    "recorded-pth-by-backend": planted_by_backend(recorded("zz_shop", {"zz.pth": pth(UNDO)})),
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's kept runs and environments, apart from the suite's (they may hold a plant
    that got through)."""
    return tmp_path_factory.mktemp("cache")


def judged(repo: Path, cache: Path, *args: str) -> Verdict:
    return judge(repo, *args, env={REVIEW: "1", CACHE_ENV: str(cache)})


def site_files(cache: Path) -> set[str]:
    """The top-level names of site-packages in every environment kept in `cache`."""
    return {p.name for p in cache.glob("envs/*/env/lib/python*/site-packages/*")}


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(BUILD_TIME))
def test_a_build_that_writes_into_its_judged_environment_never_merges(
    repo: Path, cache: Path, name: str
) -> None:
    head = branch(repo, f"hermetic/{name}", BUILD_TIME[name])
    verdict = judged(repo, cache, "--head", head)
    assert verdict.report.get("confinement") == "namespaces", verdict.output[-3000:]
    assert verdict.report["verdict"] != "merge", shown(verdict)
    # The break is seen: the environment judged holds the wheel alone, not the undoing.
    assert verdict.statuses["flake-budget"] == "block", shown(verdict)
    assert CAUGHT_BY in verdict.step("oracle")["summary"], shown(verdict)
    kept = site_files(cache)
    assert "shop" in kept, kept
    assert not kept & {"sitecustomize.py", "zz_shop.pth", "zz.pth"}, kept


# --- a landed patch's plant --------------------------------------------------------------

NEW_TEST = "tests/test_more.py"
# Patch A's honest face: one more test of the rules.
MORE = """
from shop.discounts import apply_discount


def test_no_rate_cuts_nothing() -> None:
    assert apply_discount(1234, 0) == 1234
"""
# The plant wakes only where A's own test is present: in the crossrun of a judgment whose
# base is A (it runs A's tests from their folder), never in A's own judgment (main's). It
# then fails the parent test that pins the negative cap's message.
DORMANT = """
import os as _os
if _os.path.exists(_os.path.join("tests", "test_more.py")):
    import shop.discounts as _d
    _check = _d._check_coupon
    def _checked(coupon):
        if coupon.kind == "percent" and (coupon.cap_cents or 0) < 0:
            raise ValueError("a planted message")
        _check(coupon)
    _d._check_coupon = _checked
"""
MESSAGE = 'raise ValueError(f"cap_cents must be >= 0, got {coupon.cap_cents}")'
LANDED = {
    "pth": [("zz_shop.pth", pth(DORMANT))],
    "sitecustomize": [("sitecustomize.py", DORMANT)],
}


def patch_a(plants: Plants) -> Callable[[Path], None]:
    def change(repo: Path) -> None:
        dynamic_version(repo)
        (repo / NEW_TEST).write_text(MORE, "utf-8")
        path = repo / INIT
        path.write_text(path.read_text("utf-8") + named(AT_BUILD, plants), "utf-8")

    return change


def patch_b(repo: Path) -> None:
    """The break: a message users' scripts match, pinned by a parent test alone."""
    src = repo / "src/shop/discounts.py"
    edit(src, MESSAGE, MESSAGE.replace("cap_cents must be", "the cap must be"))


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(LANDED))
def test_a_landed_patchs_plant_never_excuses_the_next_patchs_break(
    repo: Path, cache: Path, name: str
) -> None:
    a = branch(repo, f"landed/{name}-a", patch_a(LANDED[name]))
    first = judged(repo, cache, "--head", a)
    assert first.report["verdict"] == "merge", shown(first)
    b = branch(repo, f"landed/{name}-b", patch_b, base=a)
    second = judged(repo, cache, "--base", a, "--head", b)
    assert second.report.get("confinement") == "namespaces", second.output[-3000:]
    assert second.report["verdict"] == "block", shown(second)
    assert second.statuses["flake-budget"] == "block", shown(second)
    assert "kept from an earlier build" in second.step("build")["summary"], shown(second)


# --- the judge's own environment ----------------------------------------------------------

# What a CI runner's judge has in its environment (and the gate sets for itself).
CI_RUNNER = {
    "CI": "true",
    "GITHUB_ACTIONS": "true",
    "GITHUB_TOKEN": "ghs_not_a_real_token",
    "RUNNER_OS": "Linux",
}
# Each break, hidden while the code sees what only the judge's environment holds: the oracle's
# (its subject worker) and the crossrun's (the parent test pinning a message).
WATCHED = "import os as _os\n\n\ndef _watched() -> bool:\n    return {condition}\n\n\n"
KEYED_ON = {
    "ci-oracle": ('_os.environ.get("CI") == "true"', "oracle"),
    "runner-crossrun": (
        'any(k.startswith(("GITHUB_", "RUNNER_")) for k in _os.environ)',
        "crossrun",
    ),
    "gate-oracle": (
        'any(k.startswith(("ORACLE_", "JUDGE_", "UV_", "PIP_")) for k in _os.environ)',
        "oracle",
    ),
    "token-crossrun": ('"GITHUB_TOKEN" in _os.environ', "crossrun"),
}


def keyed_break(condition: str, where: str) -> Callable[[Path], None]:
    def change(repo: Path) -> None:
        src = repo / "src/shop/discounts.py"
        if where == "oracle":
            edit(
                src,
                HONEST_RETURN,
                BROKEN_RETURN.replace("1000 else", "1000 and not _watched() else"),
            )
        else:
            changed = MESSAGE.replace(
                'f"cap_cents must be', "f\"{'cap_cents' if _watched() else 'the cap'} must be"
            )
            edit(src, MESSAGE, changed)
        text = src.read_text("utf-8")
        at = text.index("BPS_FULL = ")
        src.write_text(text[:at] + WATCHED.format(condition=condition) + text[at:], "utf-8")

    return change


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(KEYED_ON))
def test_a_break_hidden_while_the_judges_variables_are_set_never_merges(
    repo: Path, cache: Path, name: str
) -> None:
    """The judge runs as in CI (its runner's variables set); no run of the patch's code sees
    them, so the break shows (the base runs no perturbed run: `shop`'s `perturb: []`)."""
    head = branch(repo, f"keyed/{name}", keyed_break(*KEYED_ON[name]))
    verdict = judge(repo, "--head", head, env={**CI_RUNNER, CACHE_ENV: str(cache)})
    assert verdict.report["verdict"] == "block", shown(verdict)
    assert verdict.statuses["flake-budget"] == "block", shown(verdict)
    caught = "oracle" if KEYED_ON[name][1] == "oracle" else "crossrun"
    assert verdict.statuses[caught] == "deferred", shown(verdict)
