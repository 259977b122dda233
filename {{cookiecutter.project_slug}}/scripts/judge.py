"""Judge a patch: the steps of the gate's table (scripts/_gate/core/steps.py), in its order.

    python scripts/judge.py [--base REF] [--head REF]      # usually: nox -s judge -- ...

The parent (--base, default the merge base of --head and the base branch, or of
origin/<base_branch> when it exists) and the patch (--head, default HEAD) are each materialized
in their own detached worktree; a base without the gate (oracle/judge.yaml and the step
scripts) fails at once, saying so. The step scripts, oracle/, oracles/, fixtures.lock and the
allowlist are all taken from the parent's worktree, never from the patch: a patch that edits
the judge does not change how it is judged. Start the judge from a trusted checkout of the
base branch; running it inside the patch's own worktree trusts that worktree's noxfile.

The judgment (scripts/_gate/core/context.py: commits, worktrees, the diff, judge.yaml, the review
flag, the builds) is resolved once and given to every step: each step's contract is decided in a
thread of this process when the base's scripts are the judge's own, else the base's script runs
as a process given the judgment as `--judgment FILE`. The table's lanes run side by side once
the builds exist (`jobs` in judge.yaml), and each step's seconds are reported. Outcomes stay in
memory: a step that reads an earlier one gets it from the judge, and reports/ (every step's
report, then the judge's) is written last, from them.
Writes reports/judge-report.json and reports/judge-summary.md (appended to $GITHUB_STEP_SUMMARY
when set), and the verdict word to $ORACLE_VERDICT_FILE when set. Before anything it clears the
reports an earlier judgment left there and writes one saying this judgment has not finished;
SIGINT, SIGTERM and SIGHUP end it cleanly with verdict `error` (docs/faults.md). Reports name
the worktrees `base:` and `head:` (the judgment's names, carried to every step), never by their
temporary folders.

With `--shard I/N` (one CI runner of N) record, replay, oracle and crossrun judge only the cases
and tests of shard I (_gate/plugin/shard.py); preconditions, build and flake budget run on every
shard, the other steps on shard 1 only. scripts/merge_shards.py combines the N report folders
into one verdict. Evidence whose inputs did not change is reused (scripts/_gate/runs/reuse.py:
a patch whose build is the parent's, parent runs and the parent's and oracle's environments
kept between judgments, scripts/_gate/runs/kept_envs.py); `--fresh` keeps and
reuses nothing between judgments and skips no step's run, as `adopt` does to see each step
run on a new project.
Exit codes: 0 merge, 1 block, 2 fail closed: verdict `needs-review` when the patch touches a
protected path or moves internals parent tests reach into (a code owner reviews it, then the
judge runs again with ORACLE_REVIEW=1), `error` when the gate could not judge.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from _gate.core.config import load_config
from _gate.core.context import Judgment, review_requested
from _gate.core.protocol import FAIL_CLOSED, PASS, FailClosed
from _gate.core.steps import LANES, SETUP
from _gate.judge.base import base_commit, confinable, note_uncommitted, oracle_ref, same_files
from _gate.judge.build import build_all
from _gate.judge.interrupt import Interrupted, handled_signals, ignore_signals, settle
from _gate.judge.lanes import Judge, table
from _gate.judge.run_state import Run, begin, judgment_folder, remove_leftovers
from _gate.plugin.shard import add_shard_arg
from _gate.runs.envs import WHEELHOUSE
from _gate.runs.git import (
    add_worktree,
    changes,
    remove_worktree,
    repo_root,
    resolve_commit,
    show_file,
)
from _gate.runs.process import share_cores
from _gate.runs.sandbox import require_sandbox
from _gate.verdict.verdict import EXIT_CODES, run_id, write_reports

OWN_SCRIPTS = Path(__file__).resolve().parent


def judge(run: Judge, args: argparse.Namespace) -> None:
    """Resolve the judgment once, then run the table: setup, the trees beside the builds,
    then every lane after the builds."""
    repo = run.repo
    remove_leftovers(repo)
    note_uncommitted(repo)
    run.head = head = resolve_commit(repo, args.head, "--head")
    run.base = base = base_commit(repo, args.base, args.head, head)
    with judgment_folder() as tmp, run.held:
        run.tmp = tmp
        run.name(repo, "")
        run.name(tmp, "tmp:")
        run.name(tmp / "envs", "envs:")
        parent = add_worktree(repo, base, tmp / "parent")
        run.name(parent, "base:")
        run.parent = parent
        patch = run.patch = add_worktree(repo, head, tmp / "patch")
        run.name(patch, "head:")
        run.inline = same_files(parent / "scripts", OWN_SCRIPTS)
        try:
            config = load_config(parent / "oracle" / "judge.yaml")
            share_cores(config.jobs)
            require_sandbox(config.sandbox == "required")
            ref = oracle_ref(run, repo, config.oracle_ref, tmp)  # names its worktree
            run.judgment = Judgment(
                repo=repo,
                reports=run.reports,
                base=base,
                head=head,
                parent=parent,
                patch=patch,
                config=config,
                review=review_requested(),
                changes=changes(repo, base, head),
                shard=run.shard,
                oracle_ref=ref,
                names=run.names,
            )
            judged(run, args.wheelhouse.resolve())
        finally:
            settle()
            remove_worktree(repo, parent)
            remove_worktree(repo, patch)


def judged(run: Judge, wheelhouse: Path) -> None:
    if run.j.oracle_ref.unreadable:  # flake control would fail on it last, after every step
        run.record("setup", FAIL_CLOSED, run.j.oracle_ref.unreadable)
        return
    for step in table(run, SETUP):
        if run.append(*run.conclude(step)) != PASS:
            return  # nothing of the patch, its build included, may run then
    if not confinable(run):
        return
    built = build_all(run, run.tmp / "envs", wheelhouse)
    if built is None:
        return
    run.judgment = run.j.evolve(builds=built)
    run.run_lanes([table(run, lane) for lane in LANES])


def publish(run: Judge, matrix: str, started: Run) -> int:
    """Write reports/ last, from the outcomes in memory: each step's report, judge-report.json,
    the summary and the SARIF. Nothing written there meanwhile is read."""
    run.write_step_reports()
    report = {
        "judgment": asdict(started),
        "finished": True,
        "base": run.base,
        "head": run.head,
        "scripts_from": run.base if run.judgment else "",
        "steps_inline": run.inline,
        "shard": {"index": run.shard.index, "count": run.shard.count},
        "confinement": run.confinement,
        "run": run_id(),
        "steps": run.steps,
    }
    outcomes = [run.outcomes[row["name"]] for row in run.steps]  # in the table's order
    return write_reports(run.reports, report, outcomes, matrix, "judge", repo=run.repo)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES)
    p.add_argument("--base", help="parent commit-ish (default: merge base with the base branch)")
    p.add_argument("--head", default="HEAD", help="patch commit-ish (default HEAD)")
    p.add_argument("--repo", type=Path, default=Path("."), help="the repository (default .)")
    p.add_argument("--reports", type=Path, default=Path("reports"), help="report folder")
    p.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE, help="local wheelhouse")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="keep and reuse nothing between judgments, skip no step's run (docs/reuse.md)",
    )
    add_shard_arg(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    run = Judge(repo=args.repo, reports=args.reports.resolve(), shard=args.shard, fresh=args.fresh)
    run.reports.mkdir(parents=True, exist_ok=True)
    started = begin(run.reports)
    matrix = b""
    with handled_signals():
        try:
            matrix = attempt(run, args)
            ignore_signals()  # ended: a signal now would only lose the verdict
        except Interrupted as exc:  # raised once: later signals are ignored
            ended = f"after the {run.steps[-1]['name']} step" if run.steps else "before any step"
            run.record("judge", FAIL_CLOSED, f"interrupted by {exc.name} {ended}")
        return publish(run, matrix.decode("utf-8", "replace"), started)


def attempt(run: Judge, args: argparse.Namespace) -> bytes:
    """The judgment, any failure recorded as one line; the base's matrix, when it got there."""
    try:
        run.repo = repo_root(args.repo)
        judge(run, args)
        return show_file(run.repo, run.base, "oracles/MATRIX.md") or b""
    except FailClosed as exc:
        run.record("setup" if not run.steps else "judge", FAIL_CLOSED, str(exc))
    except Exception as exc:  # one line and a report, never a traceback
        run.record("judge", FAIL_CLOSED, f"internal error {type(exc).__name__}: {exc}")
    return b""


if __name__ == "__main__":
    sys.exit(main())
