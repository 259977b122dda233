"""The crossrun's perturbed run of the patch, selected (_gate/runs/reach.py): the parent's
record of which functions each test file calls in that world, kept between judgments, and the
test files that can reach the change, or every one and why."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from _gate.runs.crossrun_run import Setup, untampered
from _gate.runs.crossrun_run import run as run_tests
from _gate.runs.perturb import Perturbation
from _gate.runs.perturbed_tests import PARENT, Found, Runner, compare, outcome_in
from _gate.runs.pytest_run import PytestRun
from _gate.runs.reach import SELECT_ENV, Reached, Selection, everything, run_order, select
from _gate.runs.reuse import keep, kept
from _gate.runs.run_settings import RunSettings


@dataclass(frozen=True)
class Perturbed:
    """The patch's perturbed run of the tests the selection holds (None: it holds none), and
    the runner of their reruns."""

    selection: Selection
    run: PytestRun | None
    rerun: Runner


def chosen(
    runs: RunSettings,
    plugins: Sequence[str],
    reach: Callable[[], Reached],
    present: Callable[[], Sequence[str]],
) -> Selection:
    """The test files the perturbed run holds: those `reach` (the parent's record) says can
    reach the change, or every one where selection is off or cannot be sure. `present`: the
    files of the tests' copy."""
    if not runs.select:
        return everything(f"${SELECT_ENV}=off")
    functions = runs.functions
    if functions is None or functions.everything:
        return select(functions, None, ())
    shuffled = [plugin for plugin in plugins if "random" in plugin]
    if shuffled:  # the order a run ran the tests in says nothing of the next run's
        return everything(f"the plugin {shuffled[0]} runs the tests in a random order")
    return select(functions, reach(), present())


def parent_reach(
    python: Path, tree: Path, folders: Sequence[str], setup: Setup, kept_as: tuple[Path | None, str]
) -> Reached:
    """Which functions of the parent's package each test file calls under `setup.how`
    (`setup.reach` names the modules): kept by an earlier judgment on this base (`kept_as`:
    the folder and the key), or taken by a run of the parent's build now and kept. A record
    that cannot be used is kept too: it selects every test, and the next judgment on the
    base need not run the parent's tests again to learn that (a test that recurses past the
    limit unsets any `sys.settrace` tracer: structlog's)."""
    folder, key = kept_as
    reached = Reached.readable(kept(folder, key))
    if reached is not None:
        return reached
    run = untampered(PARENT, lambda: run_tests(python, tree, folders, setup))
    reached = Reached.from_dict(run.reached) if run.reached else Reached(broken="no record")
    reached.order = run_order(run.outcomes or {})
    if run.outcomes is None:
        reached.broken = f"the parent's run under the {setup.how} perturbation left no result"
    keep(folder, key, reached.as_dict())
    return reached


def compared(
    how: Perturbation | None, perturbed: Perturbed | None, parent: dict[str, str], patch: PytestRun
) -> Found | None:
    """The patch's perturbed run against the parent, for the selected tests that passed on
    both builds today (None: no perturbed run was planned)."""
    if how is None or perturbed is None:
        return None
    if perturbed.run is None:  # no test can reach the change there
        return Found(str(how))
    held = perturbed.selection.holds
    passing = [n for n in parent if held(n) and outcome_in(patch, n) == parent[n] == "passed"]
    return compare(how, perturbed.rerun, perturbed.run, passing, "parent tests")
