"""One run of the judge (`Judge`): the judgment once resolved, every step's outcome so far, and
the table's lanes run side by side."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from _gate.core.context import Judgment, write_judgment
from _gate.core.protocol import PASS, STATUS, Report, line_to
from _gate.core.reports import Names, write_report
from _gate.core.steps import STEPS, Step, report_file
from _gate.judge.runner import finished, has_report, inline, run_step
from _gate.plugin.shard import WHOLE, Shard
from _gate.verdict.verdict import step_row


@dataclass
class Judge:
    """One run of the judge: its judgment, once resolved, and every step's outcome so far,
    kept in memory (reports/ is written from them, last)."""

    repo: Path
    reports: Path
    base: str = ""
    head: str = ""
    parent: Path = Path()  # the base's worktree, whose scripts/ run
    patch: Path = Path()
    shard: Shard = WHOLE
    judgment: Judgment | None = None
    # The base's scripts are the judge's own, byte for byte: each step's contract is decided in
    # this process (the same code a step process would run, without starting Python again).
    inline: bool = False
    tmp: Path = Path()
    confinement: str = ""  # how the patch's code ran: the launcher's level, or "unconfined"
    fresh: bool = False  # --fresh: nothing kept or reused between judgments, no run skipped
    steps: list[dict[str, Any]] = field(default_factory=list)
    outcomes: dict[str, Report] = field(default_factory=dict)  # name -> all its evidence
    names: Names = field(default_factory=Names)  # this judgment's folders, as reports name them
    # The locks that hold the kept environments this judgment uses (kept_envs.py), until it ends.
    held: ExitStack = field(default_factory=ExitStack)

    @property
    def j(self) -> Judgment:
        assert self.judgment is not None, "the judgment is resolved before any step runs"
        return self.judgment

    def record(self, name: str, code: int, summary: str, seconds: float = 0.0) -> int:
        return self.append(Report(name, STATUS[code], code, self.shorten(summary)), seconds)

    def append(self, report: Report, seconds: float) -> int:
        """Keep a step's outcome: whole in memory, in brief for judge-report.json."""
        self.outcomes[report.step] = report
        own = self.reports if has_report(report.step) else None
        self.steps.append(step_row(report, seconds, own))
        line_to(sys.stdout, f"judge: {report.step}: {report.status}: {report.summary}")
        return report.code

    def shorten(self, text: str) -> str:
        """Name files the way git does (base:path, head:path), not by temporary worktree."""
        return str(self.names(text))

    def name(self, path: Path, label: str) -> None:
        """Reports write `path` as `label`: the judge's own, and every step's, whose judgment
        carries the names (`Judgment.names`)."""
        self.names = self.names.adding(path, label)

    def conclude(self, step: Step) -> tuple[Report, float]:
        """Run one step of the table on the judgment, with the outcomes it reads; its status
        as the step's contract told it, once (`Contract.concluded`), never rewritten here."""
        assert step.script is not None
        earlier = {name: self.outcomes[name] for name in step.reads if name in self.outcomes}
        start = time.monotonic()
        if self.inline and not step.own_process:
            report = inline(step, self.j, earlier)
        else:
            report = self.run_process(step, earlier)
        # Named again for an older base's script, which reads no names from its judgment, and
        # for a step that left no report (its last line of stderr).
        return replace(report, summary=self.shorten(report.summary)), time.monotonic() - start

    def run_process(self, step: Step, earlier: Mapping[str, Report]) -> Report:
        """The base's script of the step, as a process given the judgment in a file."""
        assert step.script is not None
        given = self.tmp / f"{step.name}.judgment.json"
        write_judgment(given, self.j, earlier)
        return self.process(step.name, step.script, "--judgment", given)

    def process(self, name: str, script: str, *args: str | Path) -> Report:
        """Run a step script of the base's scripts/ as a process; its report is read once, as
        soon as it exits."""
        path = self.reports / report_file(name)
        path.unlink(missing_ok=True)
        cmd = [sys.executable, str(self.parent / "scripts" / script), *map(str, args)]
        return finished(path, name, run_step(name, [*cmd, "--report", str(path)], self.repo))

    def run_lanes(self, lanes: Sequence[Sequence[Step]]) -> None:
        """Run lanes side by side, `jobs` at a time; within a lane one after the other, each
        step once the steps it reads have ended, and not at all when the step it `needs`
        did not pass. Recorded in the order of the table."""
        ended = {step.name: threading.Event() for lane in lanes for step in lane}
        done: dict[str, tuple[Report, float]] = {}

        def lane(steps: Sequence[Step]) -> None:
            for step in steps:
                for name in step.reads:
                    if name in ended:
                        ended[name].wait()
                if step.needs and (step.needs not in done or done[step.needs][0].code != PASS):
                    break
                try:
                    done[step.name] = self.conclude(step)
                    self.outcomes[step.name] = done[step.name][0]  # for the lanes reading it
                finally:
                    ended[step.name].set()
            for step in steps:  # those it left out end too, for any lane reading them
                ended[step.name].set()

        with ThreadPoolExecutor(max_workers=max(1, self.j.config.jobs)) as pool:
            list(pool.map(lane, lanes))
        for step in STEPS:
            if step.name in done:
                self.append(*done[step.name])

    def write_step_reports(self) -> None:
        """Every step's report, as the judgment kept it: whatever was written there meanwhile."""
        for report in self.outcomes.values():
            if has_report(report.step):
                write_report(self.reports / report_file(report.step), report.payload())


def table(judge: Judge, lane: str) -> list[Step]:
    """The steps of one lane that this shard runs, in the order of the table; the judge's own
    (setup, build) are its code's, not a script's."""
    return [s for s in STEPS if s.lane == lane and s.script and s.runs_on(judge.shard)]
