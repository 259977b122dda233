"""One run of the base tree's tests in a build's environment, from a private copy of the tree."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _gate.core.context import ChangedFunctions, test_input
from _gate.core.protocol import FailClosed, Tampered
from _gate.core.reports import Names
from _gate.plugin.shard import WHOLE, Shard
from _gate.runs.canaries import check, plant
from _gate.runs.env_probe import shadowing
from _gate.runs.git import tracked
from _gate.runs.perturb import Perturbation, tests_scene
from _gate.runs.perturbed_tests import PATCH
from _gate.runs.pytest_run import PytestOptions, PytestRun, run_pytest
from _gate.runs.reuse import files_digest
from _gate.runs.traced import Trace


@dataclass(frozen=True)
class Setup:
    """How the base's tests run in a build (`run`).

    The copy of the tree leaves out the `hidden` modules (the build's own): pytest's default
    import mode puts the root on sys.path for a tests/ package, and a flat-layout package
    there would shadow the build. With `canaries`, tests that must fail and tests that must
    pass are planted in the copy (scripts/_gate/runs/canaries.py): a run that left a result and
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
    trace: Trace | None = None  # a run of the patch's build: which test ran each changed line
    reach: ChangedFunctions | None = None  # a run of the parent's: which functions tests call


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
            trace=setup.trace,
            reach=setup.reach,
        )
        result = run_pytest(python, root, targets, how)
        fault = gate_fault(result, targets)
        if fault:
            raise FailClosed(fault)
        if planted is not None and result.outcomes is not None:
            check(planted, result.outcomes)
    # Messages name the private copy, gone by now: they name the tree it copies instead.
    return result.renamed(lambda text: Names(((str(root), f"{tree.resolve()}/"),))(text))


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


RETRYABLE = ("failed", "error")


def reference(result: PytestRun, shard: Shard) -> dict[str, str]:
    """The parent run's outcomes: what the patch must keep. A parent run on which nothing
    passes is no reference: the step cannot see (for a shard, the merge decides that)."""
    if result.outcomes is None:
        why = "timed out" if result.timed_out else f"exit {result.exit_code}"
        raise FailClosed(
            f"the parent's tests left no result on the parent build ({why}): "
            f"{result.output_tail[-200:]!r}"
        )
    if "passed" not in result.outcomes.values() and shard.whole:
        first = next(iter(sorted(result.outcomes)), "")
        why = last_line(result.messages.get(first, "")) if first else "none was collected"
        fix = "fix the base's tests"
        if MISSING_MODULE in why:
            fix = "add the tests' dependencies to judge.yaml test_extra and the wheelhouse"
        raise FailClosed(
            f"none of the parent's {len(result.outcomes)} tests passes on the parent build in "
            f"the crossrun (first: {first or '-'}: {why}); {fix}"
        )
    return result.outcomes


MISSING_MODULE = "No module named"


def collected(entry: str, outcomes: Mapping[str, str]) -> bool:
    """Whether a `tests:` entry (a folder or file) holds a node id of the run."""
    return any(node == entry or node.startswith((f"{entry}/", f"{entry}::")) for node in outcomes)


def lost_rows(parent: dict[str, str], patch: PytestRun, allowed: set[str]) -> list[dict[str, Any]]:
    """Each test that passed on the parent and does not pass on the patch."""
    got = patch.outcomes or {}
    rows = []
    for node, before in sorted(parent.items()):
        # A test missing because its module no longer imports has that module's error.
        where = node if node in got else node.split("::", 1)[0]
        after = got.get(where, "missing")
        if before == "passed" and after != "passed":
            rows.append(
                {
                    "id": node,
                    "outcome": after,
                    "retryable": after in RETRYABLE,
                    "allowed": node in allowed,
                    "message": patch.messages.get(where, "")[-1000:],
                }
            )
    return rows


def last_line(message: str) -> str:
    """What went wrong, in one line: pytest's first `E` line (the assertion), else the last."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    found = errors[0] if errors else lines[-1] if lines else "no message"
    return found[:200]


def same_tests(tree: Path, patch_tree: Path | None, folders: Sequence[str]) -> bool:
    """Whether the head tree holds the base's test folders and files, and the files at the
    root that configure pytest, byte for byte (no --patch-tree: it cannot tell)."""
    if patch_tree is None:
        return False
    names = [rel for rel in tracked(tree) if test_input(rel, folders)]
    theirs = [rel for rel in tracked(patch_tree) if test_input(rel, folders)]
    return names == theirs and files_digest(tree, names) == files_digest(patch_tree, names)


def untampered(side: str, result: Callable[[], PytestRun]) -> PytestRun:
    """The run of one build, unless its canaries or pytest's machinery say it was forged."""
    try:
        return result()
    except Tampered as exc:
        raise tampered(side, "pytest run", exc) from None


def tampered(side: str, run: str, exc: Tampered) -> Exception:
    """A forged run of the patch build blocks, in either mode: the patch's code did it (no
    honest build does). The parent build runs none of the patch's code: a forged run there
    is the base's, and the gate cannot judge on it."""
    if side == PATCH:
        return Tampered(f"the patch build's {run} was tampered with: {exc}")
    return FailClosed(
        f"the {side} build's {run} was tampered with, though it runs none of the patch's code: "
        f"{exc}; judge the base itself (its last landed patch)"
    )


def refuse_shadowing(
    pythons: Mapping[str, Path], results: Mapping[str, PytestRun], folders: Sequence[str]
) -> None:
    """A run that imported the code under test from the tree, not the build, tested neither."""
    for side, result in results.items():
        shadowed = shadowing(pythons[side], result, folders)
        if shadowed:
            raise FailClosed(
                f"the crossrun on the {side} build imported {shadowed[0]} from the base tree, "
                "not from the build: take the source folder out of pytest's `pythonpath` (or "
                "of sys.path in a conftest.py)"
            )


def refuse_empty(folders: Sequence[str], parent: Mapping[str, str], shard: Shard) -> None:
    """A `tests:` entry without a test pytest collects on the base (a whole run only: a
    shard may hold none of an entry's tests)."""
    empty = [entry for entry in folders if not collected(entry, parent)]
    if empty and shard.whole:
        raise FailClosed(
            f"oracle/judge.yaml: field 'tests' entry {empty[0]!r} holds no test pytest collects "
            "on the base: name the folders and files the base's tests are in"
        )
