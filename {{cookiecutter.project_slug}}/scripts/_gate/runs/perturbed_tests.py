"""The base's tests once more under a perturbation (docs/perturbation.md), parent against patch.

The oracle runs its properties once more with the subject worker in a user's environment under
the shifted clock (`env`, `clock`); the crossrun runs the parent's tests once more under the
shifted clock. First the patch build runs every test under the perturbation, beside the step's
own runs. Only a test that passed today on both builds and does not pass on the patch under the
perturbation needs more: it runs under the perturbation again on both builds, side by side.

- The parent passes it there and the patch fails it again: lost, the step blocks naming the
  perturbation. The patch's second run is its retry (these are the base's tests, so they
  existed before the patch).
- The patch passes it alone: the whole run runs once more on both builds, in its order, since
  what the patch's code left behind in the process (a module's function replaced, a cache
  filled) reaches only the tests after it. The parent passes it there and the patch fails it
  again: lost; it passes: reported as flaky.
- The parent does not pass it there either: unstable under the perturbation (a test that pins
  today's date, say), left out and reported, never used.

A lost test of a run of several perturbations runs again under each alone on both builds, and
the block names the ones that tell the builds apart, as replay does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from _gate.core.protocol import BLOCK, PASS, Outcome
from _gate.runs.perturb import Perturbation, runnable, shifted_clock
from _gate.runs.pytest_run import PytestRun
from _gate.runs.run_settings import RunSettings

PARENT, PATCH = "parent", "patch"
# (side, perturbation, node ids or None for every test) -> that build's run under it.
Runner = Callable[[str, Perturbation, Sequence[str] | None], PytestRun]
BY_ID_LIMIT = 200  # more tests to run again than this: run them all, not a list of ids


def outcome_in(run: PytestRun, node: str) -> str:
    """A test's outcome in `run`; a test whose module failed to import has the module's."""
    got = run.outcomes or {}
    return got.get(node, got.get(node.split("::", 1)[0], "missing"))


def planned(
    applies: Sequence[str], runs: RunSettings
) -> tuple[Perturbation | None, dict[str, str]]:
    """The one perturbed run a step makes: the perturbations of `applies` judge.yaml wants and
    this machine can run (None: no run, as on a build that is the parent's), and why each
    other one wanted cannot run."""
    ran, why = runnable([name for name in runs.perturb if name in applies], runs.perturb_required)
    if runs.same_build or not ran:
        return None, why
    clock = shifted_clock(date.today()) if "clock" in ran else ""
    return Perturbation(tuple(ran), clock), why


@dataclass
class Found:
    """What the perturbed runs found, for the step's report."""

    perturbation: str
    lost: list[dict[str, str]] = field(default_factory=list)
    unstable: list[str] = field(default_factory=list)  # failing on the parent there too
    flaky: list[str] = field(default_factory=list)  # passed on the patch's second run

    def evidence(self, why: Mapping[str, str]) -> dict[str, Any]:
        return {
            "ran": self.perturbation.split("+") if self.perturbation else [],
            "unavailable": dict(why),
            "lost": self.lost,
            "unstable": self.unstable,
            "flaky": self.flaky,
        }


def compare(
    how: Perturbation, run: Runner, patch: PytestRun, passing: Iterable[str], what: str
) -> Found:
    """The patch's run under `how` (`patch`) against the parent under it, for the tests that
    passed on both builds today (`passing`): see the module's docstring."""
    found = Found(str(how))
    again = sorted(node for node in passing if outcome_in(patch, node) != "passed")
    if not again:
        return found
    targets = again if len(again) <= BY_ID_LIMIT else None
    parent, retry = both(run, how, targets)
    parent_at, patch_at, said = picked(parent, again), picked(retry, again), retry.messages
    alone = [node for node in again if parent_at[node] == patch_at[node] == "passed"]
    if alone and targets is not None:  # in order, with the tests before them
        parent_again, patch_again = both(run, how, None)
        parent_at.update(picked(parent_again, alone))
        patch_at.update(picked(patch_again, alone))
        said = {**said, **patch_again.messages}
    for node in again:
        if parent_at[node] != "passed":
            found.unstable.append(node)
        elif patch_at[node] == "passed":
            found.flaky.append(node)
        else:
            message = (said.get(node) or patch.messages.get(node) or "").strip()
            row = {"id": node, "outcome": patch_at[node], "perturbation": str(how)}
            found.lost.append({**row, "message": message[-1000:]})
    if len(how.names) > 1 and found.lost:
        name_perturbations(how, run, found.lost)
    return found


def picked(run: PytestRun, nodes: Sequence[str]) -> dict[str, str]:
    """The outcomes of `nodes` in `run`."""
    return {node: outcome_in(run, node) for node in nodes}


def both(
    run: Runner, how: Perturbation, targets: Sequence[str] | None
) -> tuple[PytestRun, PytestRun]:
    """The parent's and the patch's runs of `targets` under `how`, side by side."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        parent = pool.submit(run, PARENT, how, targets)
        patch = pool.submit(run, PATCH, how, targets)
        return parent.result(), patch.result()


def name_perturbations(how: Perturbation, run: Runner, lost: list[dict[str, str]]) -> None:
    """Name, for each lost test, the perturbations that tell the builds apart alone; none
    alone: the run's, together."""
    ids = [row["id"] for row in lost]
    alone: dict[str, list[str]] = {}
    for name in how.names:
        parent, patch = both(run, Perturbation((name,), how.clock if name == "clock" else ""), ids)
        for node in ids:
            if outcome_in(parent, node) == "passed" and outcome_in(patch, node) != "passed":
                alone.setdefault(node, []).append(name)
    for row in lost:
        row["perturbation"] = "+".join(alone.get(row["id"], how.names))


def applied(
    outcome: Outcome,
    found: Found | None,
    why: Mapping[str, str],
    what: str,
    *,
    same_build: bool,
    advisory: bool = False,
) -> Outcome:
    """The step's outcome with its perturbed runs: a lost test blocks a step that would pass
    (an `advisory` step's only says so); the summary says which perturbations ran, and why any
    other did not."""
    notes = [f"{name} perturbation: unavailable ({reason})" for name, reason in why.items()]
    if same_build:
        notes.insert(0, "no perturbed run: no perturbation can tell a build from itself")
    elif found is not None:
        notes.insert(0, f"perturbed: {found.perturbation.replace('+', ', ')}")
    if found is not None and found.unstable:
        notes.append(f"{len(found.unstable)} failing on the parent there too (left out)")
    if found is not None and found.lost and advisory:
        notes.append(f"{len(found.lost)} lost under a perturbation (advisory)")
    note = "".join(f"; {n}" for n in notes)
    evidence = (found or Found("")).evidence(why)
    # A deferred outcome would let flake control excuse what it retries today, unperturbed.
    deciding = not advisory and (outcome.code == PASS or bool(outcome.deferred_to))
    if found is None or not found.lost or not deciding:
        return outcome.noted(note, perturbations=evidence)
    first = found.lost[0]
    summary = (
        f"{len(found.lost)} {what} pass on the parent and fail on the patch under a perturbation "
        f"(first: {first['id']} {first['outcome']} under the {first['perturbation']} "
        "perturbation)"
    )
    return Outcome(BLOCK, summary + note, {**outcome.evidence, "perturbations": evidence})
