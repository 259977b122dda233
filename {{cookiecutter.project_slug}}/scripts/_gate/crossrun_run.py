"""One run of the base tree's tests in a build's environment, from a private copy of the tree."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from _gate.canaries import check, plant
from _gate.git import tracked
from _gate.perturb import Perturbation, tests_scene
from _gate.protocol import FailClosed
from _gate.pytest_run import PytestOptions, PytestRun, run_pytest
from _gate.reports import named
from _gate.shard import WHOLE, Shard


@dataclass(frozen=True)
class Setup:
    """How the base's tests run in a build (`run`).

    The copy of the tree leaves out the `hidden` modules (the build's own): pytest's default
    import mode puts the root on sys.path for a tests/ package, and a flat-layout package
    there would shadow the build. With `canaries`, tests that must fail and tests that must
    pass are planted in the copy (scripts/_gate/canaries.py): a run that left a result and
    got one wrong, or changed pytest's machinery, raises Tampered. `how`: the perturbation
    the run is under (a user's scene, the shifted clock: perturb.tests_scene). `sources`:
    files of the copy written anew (a probe's forced checks)."""

    timeout: float  # seconds
    plugins: tuple[str, ...] = ()  # loaded by name (-p): the tests' dependencies' plugins
    hidden: tuple[str, ...] = ()
    shard: Shard = WHOLE
    canaries: bool = False
    how: Perturbation | None = None
    sources: Mapping[str, bytes] | None = None


def run(python: Path, tree: Path, targets: Sequence[str], setup: Setup) -> PytestRun:
    """The base's tests in one build's environment, from a private copy of the base tree, as
    `setup` says."""
    flags = [arg for plugin in setup.plugins for arg in ("-p", plugin)]
    # A module that fails to import is that module's error (its id carries it); the rest run.
    flags += [*setup.shard.pytest_options(), "--continue-on-collection-errors"]
    with (
        tempfile.TemporaryDirectory(prefix="crossrun-") as name,
        tests_scene(setup.how, python.parent) as scene,
    ):
        root = copy_tree(tree, Path(name) / "tree", setup.hidden).resolve()
        for rel, data in (setup.sources or {}).items():
            (root / rel).write_bytes(data)
        planted = plant(root, targets, Path(name)) if setup.canaries else None
        if planted is not None:
            flags.append(planted.option())
        how = PytestOptions(
            timeout=setup.timeout,
            own_config=True,
            options=tuple(flags),
            # The private copy (tests may write beside their files), and the canary list the
            # evidence plugin deletes once read.
            writable=(Path(name), *scene.writable),
            scene=scene.env,
        )
        result = run_pytest(python, root, targets, how)
        fault = gate_fault(result, targets)
        if fault:
            raise FailClosed(fault)
        if planted is not None and result.outcomes is not None:
            check(planted, result.outcomes)
    # Messages name the private copy, gone by now: they name the tree it copies instead.
    return result.renamed(lambda text: named(text, [(str(root), f"{tree.resolve()}/")]))


USAGE, NO_TESTS = 4, 5  # pytest's exit codes: its arguments refused; nothing collected


def gate_fault(result: PytestRun, targets: Sequence[str]) -> str:
    """Why a run says nothing of the code under test because of the gate's own configuration
    ("" when it does not): pytest refused the arguments the gate gave it (a `tests:` entry that
    is not there, an option or plugin it does not know) or collected nothing from `targets`.
    An error of the gate's, never evidence that the patch's code forged the run."""
    if result.exit_code not in (USAGE, NO_TESTS) or result.timed_out:
        return ""
    lines = [line.strip() for line in result.output_tail.splitlines() if line.strip()]
    said = next((line for line in lines if line.startswith("ERROR")), lines[-1] if lines else "")
    what = "refused its arguments" if result.exit_code == USAGE else "collected no test"
    return (
        f"pytest {what} (exit {result.exit_code}: {said[:200]}) running {', '.join(targets)}: "
        "the gate's configuration, not the patch; check oracle/judge.yaml `tests:` and "
        "`test_extra` against the tree"
    )


def copy_tree(tree: Path, dest: Path, hidden: Sequence[str]) -> Path:
    """The tree's `copied` files, in `dest`."""
    for rel in copied(tree, hidden):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tree / rel, target)
    dest.mkdir(parents=True, exist_ok=True)
    return dest


def copied(tree: Path, hidden: Sequence[str]) -> list[str]:
    """The tree's tracked files (all its files outside git) but the `hidden` modules: what a
    run from a copy of the tree can read of it."""
    skip = {p for name in hidden for p in (name, f"{name}.py", f"src/{name}", f"src/{name}.py")}
    return [
        rel
        for rel in tracked(tree)
        if rel.split("/", 1)[0] not in skip and "/".join(rel.split("/")[:2]) not in skip
    ]
