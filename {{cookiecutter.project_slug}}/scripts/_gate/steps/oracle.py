"""Run the property oracles of the base tree against the parent build and the patch build.

    python scripts/oracle.py --oracle BASE/oracle --oracle-python O \
        --parent-python P --patch-python Q

The oracle directory comes from the base revision and runs in the oracle environment O, where
neither build is installed: each test reaches the code under test through the `subject`
fixture, which calls `oracle/adapter.py` in a worker started with P (parent run) or Q (patch
run). Nothing of the patch runs in the process that makes the assertions and reports the
outcomes. pytest runs with a fixed rootdir and ini, no plugin autoloading and no cache, from a
temporary directory; outcomes and assertion hits come from the gate's evidence plugin.

On the parent every oracle must pass and reach at least one assertion (a property whose
examples never get to an assert is incomplete, not evidence). On the patch, an oracle that
passed on the parent and now fails or errors may be a flake: the step is `deferred` and
flake-budget, the last step, decides. Every other failure blocks here: a test missing or
skipped on the patch, a failing id the parent never had, a truncated run.
With `--shard I/N` both runs hold only the tests of that shard (_gate/plugin/shard.py); a shard
that holds none passes, and the merge checks that the shards add up.
With `--same-build` the patch's run is the parent's; with `--cache` and `--parent-build`
the parent's run is kept between judgments under a digest of its inputs (_gate/runs/reuse.py).
With `--perturb` naming `env` or `clock` (the default: both), the oracles run once more with the
worker in a user's environment under the shifted clock, parent against patch: an oracle the
parent passes there and the patch fails blocks, naming the perturbation
(scripts/_gate/runs/perturbed_tests.py).
Exit codes: 0 pass, 1 block (or deferred, see the report's status), 2 fail closed (the oracle
does not pass, or is incomplete, on the parent build).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _gate.core.context import Judgment
from _gate.core.protocol import BLOCK, EXIT_CODES_HELP, PASS, FailClosed, Outcome, add_report_arg
from _gate.core.seal import Seal, TrustedEnv, seal_of
from _gate.plugin.patch_env import gate_env
from _gate.plugin.shard import WHOLE
from _gate.plugin.worker_scene import WorkerScene
from _gate.runs.entry import Contract, Earlier
from _gate.runs.git import tracked
from _gate.runs.oracle_run import PREFIX, RETRYABLE, add_oracle_args, has_tests
from _gate.runs.oracle_run import run as run_oracle
from _gate.runs.perturb import Perturbation, process_scene
from _gate.runs.perturbed_tests import PARENT, PATCH, Runner, applied, compare, outcome_in, planned
from _gate.runs.pytest_run import PytestRun, Subject
from _gate.runs.reuse import (
    cache_key,
    files_digest,
    keep_run,
    kept_run,
    noted,
)
from _gate.runs.run_settings import RunSettings, add_run_args
from _gate.runs.traced import covered

TIMEOUT = 900.0  # seconds per pytest run
NONE = {"tests": 0}  # the evidence of a base without property oracles
PERTURBED = ("env", "clock")  # the subject worker's perturbed run (docs/perturbation.md)


def parent_baseline(result: PytestRun) -> dict[str, str]:
    if result.outcomes is None:
        raise FailClosed(
            f"oracle left no result report on the parent build (exit {result.exit_code}, "
            f"timed out: {result.timed_out}); fix the oracle: {result.output_tail[-200:]!r}"
        )
    broken = sorted(k for k, v in result.outcomes.items() if v in RETRYABLE)
    if broken:
        message = result.messages.get(broken[0], "").strip().splitlines()
        hint = (
            "; oracle tests reach the code only through the `subject` fixture "
            "(oracle/adapter.py), the package is not importable in the oracle process"
            if any("ModuleNotFoundError" in line for line in message)
            else ""
        )
        raise FailClosed(
            f"oracle {broken[0]} does not pass on the parent build ({len(broken)} tests: "
            f"{message[-1] if message else 'no message'}){hint}; fix it on the base branch first"
        )
    if not result.outcomes:
        raise FailClosed("oracle collected no test on the parent build; fix oracle/")
    hitless = sorted(k for k, v in result.outcomes.items() if v == "passed" and not result.hits[k])
    if hitless:
        raise FailClosed(
            f"oracle {hitless[0]} reached no assertion on the parent build ({len(hitless)} "
            "tests): every example was filtered out or its asserts sit behind a branch no "
            "example takes; an incomplete property is not evidence, fix it on the base branch"
        )
    return result.outcomes


def failures(parent: dict[str, str], patch: PytestRun) -> list[dict[str, Any]]:
    """Every oracle result on the patch that is not a pass it earned on the parent too."""
    got = patch.outcomes or {}
    rows = []
    for node in sorted(parent.keys() | got.keys()):
        before, after = parent.get(node, "absent"), got.get(node, "missing")
        lost = before == "passed" and after != "passed"
        if lost or (before == "absent" and after in RETRYABLE):
            rows.append(
                {
                    "id": node,
                    "parent": before,
                    "outcome": after,
                    "retryable": before == "passed" and after in RETRYABLE,
                    "message": patch.messages.get(node, ""),
                }
            )
    return rows


def judged(parent: dict[str, str], patch: PytestRun, evidence: dict[str, Any]) -> Outcome:
    rows = evidence["failures"]
    final = [row for row in rows if not row["retryable"]]
    if patch.outcomes is None:
        why = "timed out" if patch.timed_out else f"exit {patch.exit_code}"
        return Outcome(
            BLOCK, f"oracle run on the patch left no result ({why}): truncated", evidence
        )
    if final:
        first = final[0]
        where = "a test the parent did not have" if first["parent"] == "absent" else "oracle"
        return Outcome(
            BLOCK,
            f"{len(final)} oracle results lost on the patch, not retryable (first: {where} "
            f"{first['id']} {first['outcome']})",
            evidence,
        )
    if rows:
        first = rows[0]
        return Outcome(
            BLOCK,
            f"{len(rows)} of {len(parent)} oracles failed on the patch after passing on the "
            f"parent (first: {first['id']} {first['outcome']}); flake-budget decides",
            evidence,
            deferred_to="flake-budget",
        )
    if patch.exit_code != 0:
        return Outcome(
            BLOCK,
            f"every oracle passed but pytest exited {patch.exit_code}: suspicious run",
            evidence,
        )
    return Outcome(PASS, f"{counted(evidence['kinds'])} pass on the parent and the patch", evidence)


def kinds(parent: dict[str, str], result: PytestRun) -> dict[str, int]:
    """How many of the oracle's tests are hypothesis properties, and how many run examples
    (a corpus replayed row by row, fixed inputs): a count of one is not the other."""
    properties = len(parent.keys() & result.properties)
    return {"properties": properties, "examples": len(parent) - properties}


def counted(found: dict[str, int]) -> str:
    return f"{found['properties']} property oracles and {found['examples']} example oracles"


@dataclass(frozen=True)
class Inputs:
    """What the oracle step decides on."""

    oracle: Path  # oracle/ of the base tree
    oracle_python: Path | None  # the oracle env's python (None: the base has no oracle)
    seal: Seal | None  # the oracle env's digest, taken when the judge built it
    parent_python: Path
    patch_python: Path
    timeout: float  # seconds per pytest run
    call_timeout: float  # seconds one call into a build may take
    runs: RunSettings  # shard, same build, kept runs, perturbations


def inputs(j: Judgment) -> Inputs:
    return Inputs(
        oracle=j.parent / "oracle",
        oracle_python=j.built.oracle,
        seal=j.built.oracle_seal,
        parent_python=j.built.parent,
        patch_python=j.built.patch,
        timeout=TIMEOUT,
        call_timeout=j.config.call_timeout,
        runs=RunSettings.of(j),
    )


def from_args(args: argparse.Namespace) -> Inputs:
    return Inputs(
        oracle=args.oracle,
        oracle_python=args.oracle_python,
        seal=seal_of(args),
        parent_python=args.parent_python,
        patch_python=args.patch_python,
        timeout=args.timeout,
        call_timeout=args.call_timeout,
        runs=RunSettings.from_args(args),
    )


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    if given.oracle_python is None or not has_tests(given.oracle):
        return Outcome(PASS, f"no property oracles in {given.oracle} on the base", NONE)
    runner, runs = TrustedEnv(given.oracle_python, given.seal), given.runs
    key = parent_key(given)
    kept_parent = kept_run(runs.kept.folder, key, given.oracle)
    # One build's code: the parent's run is the patch's (_gate/runs/reuse.py).
    sides = {"parent": given.parent_python, "patch": given.patch_python}
    if runs.same_build:
        sides.pop("patch")
    if kept_parent:
        sides.pop("parent")
    how, unrunnable = planned(PERTURBED, runs)
    under = perturbed_runner(given, runner)
    traces = {"patch": runs.trace("property", tests=False)}
    with ThreadPoolExecutor(max_workers=3) as pool:
        jobs = {
            side: pool.submit(
                run_oracle,
                runner,
                Subject(python, given.call_timeout, trace=traces.get(side)),
                given.oracle,
                given.timeout,
                shard=runs.shard,
            )
            for side, python in sides.items()
        }
        patch_under = pool.submit(under, PATCH, how, None) if how else None
        results = {side: job.result() for side, job in jobs.items()}
    parent_result = kept_parent or results["parent"]
    patch = results.get("patch", parent_result)
    if not kept_parent:
        keep_run(runs.kept.folder, key, given.oracle, parent_result)
    held = len(parent_result.outcomes or {})
    owned = runs.shard.evidence(held, held + parent_result.deselected)
    if parent_result.outcomes == {} and parent_result.deselected:
        summary = f"shard {runs.shard} holds none of the {owned['total']} property oracles"
        return Outcome(PASS, summary, {"shard": owned})
    parent = parent_baseline(parent_result)
    evidence = oracle_evidence(parent, parent_result, patch)
    evidence["shard"] = owned
    found = None
    patch_runs = [results["patch"]] if "patch" in results else []
    if how is not None and patch_under is not None:
        passing = [node for node in parent if outcome_in(patch, node) == parent[node] == "passed"]
        patch_runs.append(patch_under.result())
        found = compare(how, under, patch_runs[-1], passing, "oracles")
    if runs.changed:  # which property ran each changed line, in the patch's runs
        evidence["coverage"] = covered(run.coverage for run in patch_runs).as_dict()
    outcome = applied(
        judged(parent, patch, evidence),
        found,
        unrunnable,
        "oracles",
        same_build=runs.same_build,
    )
    return noted(outcome, runs.same_build, bool(kept_parent))


def oracle_evidence(
    parent: dict[str, str], parent_result: PytestRun, patch: PytestRun
) -> dict[str, Any]:
    """Both runs' outcomes, the kinds and hits of the parent's oracles, and what failed."""
    return {
        "parent": parent,
        "kinds": kinds(parent, parent_result),
        "parent_hits": parent_result.hits,
        "patch": patch.outcomes,
        "patch_exit_code": patch.exit_code,
        "patch_timed_out": patch.timed_out,
        "failures": failures(parent, patch),
        "output_tail": patch.output_tail if patch.exit_code else "",
    }


def perturbed_runner(given: Inputs, runner: TrustedEnv) -> Runner:
    """A build's oracle run, its subject worker in the scene of a perturbation."""
    pythons = {PARENT: given.parent_python, PATCH: given.patch_python}

    def run(side: str, how: Perturbation, targets: Sequence[str] | None) -> PytestRun:
        python = pythons[side]
        ids = [node.removeprefix(PREFIX) for node in targets] if targets else ["."]
        shard = given.runs.shard if targets is None else WHOLE
        trace = given.runs.trace(f"property [{how}]", tests=False) if side == PATCH else None
        with worker_scene(how, python) as scene:
            subject = Subject(python, given.call_timeout, scene, trace)
            return run_oracle(
                runner, subject, given.oracle, given.timeout, targets=ids, shard=shard
            )

    return run


@contextmanager
def worker_scene(how: Perturbation, python: Path) -> Iterator[Path]:
    """The file of the subject worker's scene under `how` (worker_scene.py), and its folders,
    for one run."""
    with tempfile.TemporaryDirectory(prefix="oracle-scene-") as tmp:
        own = gate_env(Path(tmp), Path(tmp), python.parent)  # the scene replaces HOME, TMPDIR
        stage = process_scene(how, own, python.parent, Path(tmp) / "scene")
        try:
            path = Path(tmp) / "scene.json"
            writable = tuple(str(folder) for folder in stage.writable)
            scene = WorkerScene(stage.env, str(stage.work), writable, "env" not in how.names)
            scene.write(path)
            yield path
        finally:
            for made in stage.elsewhere:
                shutil.rmtree(made, ignore_errors=True)


def parent_key(given: Inputs) -> str:
    """What the parent's run depends on (_gate/runs/reuse.py): "" when nothing is kept. An oracle
    may read any file of its tree (a corpus under fixtures/), so the whole tree is an input;
    the oracle environment holds the pinned tools, which the gate's code digest covers."""
    if given.runs.kept.folder is None or not given.runs.kept.parent_build:
        return ""
    tree = given.oracle.parent
    return cache_key(
        "oracle",
        tree=files_digest(tree, tracked(tree)),
        oracle=given.oracle.name,
        build=given.runs.kept.parent_build,
        shard=str(given.runs.shard),
        timeout=given.timeout,
        call_timeout=given.call_timeout,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    add_oracle_args(p, oracle_python="", timeout=TIMEOUT)
    p.add_argument("--parent-python", type=Path, required=True, help="parent build's python")
    add_run_args(p)
    add_report_arg(p, "oracle")
    return p


STEP = Contract("oracle", parser, from_args, inputs, decide)
