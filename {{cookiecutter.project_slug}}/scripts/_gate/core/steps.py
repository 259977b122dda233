"""The judge's steps: the one table that says their order, lanes and what each decides."""

from __future__ import annotations

import re
from dataclasses import dataclass

from _gate.plugin.shard import Shard

EVERY, LEAD, SPLIT = "every", "lead", "split"  # how a step shards (`judge --shard I/N`)
# Lanes: what a step waits for. `setup` runs first and alone (nothing of the patch may run
# when it fails); `trees` beside the builds (they read trees only); `build` is the judge's
# own; after the builds, each named lane runs its steps one after the other, side by side
# with the other lanes (`jobs` in judge.yaml).
SETUP, TREES, BUILD = "setup", "trees", "build"


@dataclass(frozen=True)
class Step:
    """One step of the judge."""

    name: str  # as reports, the summary and oracles/MATRIX.md name it
    # Its entry script in scripts/, whose contract is `module`; None: the judge's own work.
    script: str | None
    lane: str
    reads: tuple[str, ...] = ()  # earlier steps whose outcomes it is given; it waits for them
    # False: advisory, its status is `advisory` whatever it found (entry.Contract.concluded).
    decides: bool = True
    shards: str = LEAD  # EVERY shard runs it, the LEAD shard (1/N) only, or each its SPLIT
    needs: str = ""  # an earlier step of its lane that must pass for it to run at all
    # A process of its own even where the judge decides steps in its own process (inline):
    # the inventory's AST work, in a process pool when cold, would hold the judge's GIL (and
    # fork it) while the other lanes wait on their cases.
    own_process: bool = False
    # Its contract's `beside_build` runs once the parent is built, beside the patch's build,
    # where a core idles; what it takes reaches the step sealed (`Builds.beside`).
    beside_build: bool = False
    # oracles/MATRIX.md names it, and every judgment that resolves reports it.
    in_matrix: bool = True

    @property
    def module(self) -> str:
        """The module of its contract: _gate/steps/, named as the step."""
        return f"_gate.steps.{self.name.replace('-', '_')}"

    def runs_on(self, shard: Shard) -> bool:
        return self.shards != LEAD or shard.index == 1


# Every step a judgment reports, in the order of the decision table (oracles/MATRIX.md): the
# judge runs this table, the summary and judge-report.json list steps in its order, and the
# preconditions check that MATRIX.md names exactly these steps.
STEPS: tuple[Step, ...] = (
    # The judge's own: the judgment resolved (worktrees, judge.yaml, the diff, the oracle
    # ref; judge.py `judge`), reported only when that fails. "judge" names a failure after it.
    Step("setup", None, SETUP, shards=EVERY, in_matrix=False),
    Step("preconditions", "preconditions.py", SETUP, shards=EVERY),
    Step("write-set", "write_set.py", TREES),
    Step("fixtures-lock", "fixtures_lock.py", TREES),
    Step("build", None, BUILD, shards=EVERY),
    Step("record", "record_cassettes.py", "cassettes", shards=SPLIT),
    # Its parent-now runs (the drift check's) need the parent's build alone.
    Step(
        "replay",
        "replay_cassettes.py",
        "cassettes",
        shards=SPLIT,
        needs="record",
        beside_build=True,
    ),
    # After the crossrun: the checks the parent's tests ran on the patch build are its own.
    Step("assert-inventory", "count_asserts.py", "inventory", ("crossrun",), own_process=True),
    Step("oracle", "oracle.py", "oracle", shards=SPLIT),
    # Advisory under judge.yaml `crossrun: advisory` (its contract's `advisory`).
    Step("crossrun", "crossrun.py", "crossrun", shards=SPLIT),
    Step("quarantine", "check_quarantine.py", "quarantine"),
    Step("flake-budget", "flake_budget.py", "flake", ("oracle", "crossrun"), shards=EVERY),
    # The crossrun's patch run is the advisory tests' own when the patch left the tests as
    # the base has them; the inventory's collected ids name what they cover.
    Step("tests", "advisory_tests.py", "inventory", ("assert-inventory", "crossrun"), False),
    # What the changed package code newly reaches, from the files the build step found each
    # wheel installs.
    Step(
        "change",
        "change.py",
        "change",
        ("build", "replay", "oracle", "crossrun", "assert-inventory", "tests"),
    ),
)
# The lanes after the builds, in the order they start: the longest first, and each after
# every lane it reads from, so a lane never waits on one that has not started.
LANES = ("oracle", "cassettes", "crossrun", "inventory", "quarantine", "flake", "change")
BY_NAME = {step.name: step for step in STEPS}
REPORT_FILES = {"replay": "replay-report.json"}  # the name the design notes give it


def report_file(name: str) -> str:
    """The file name of a step's report in the judgment's reports folder."""
    return REPORT_FILES.get(name, f"{name}.json")


JUDGE_STEPS = tuple(step.name for step in STEPS if step.in_matrix)  # the names, in order
SCRIPTS = tuple(step.script for step in STEPS if step.script)


MATRIX_STEP = re.compile(r"\(`([a-z-]+)`\)")


def decision_rows(matrix: str) -> list[tuple[int, list[str]]]:
    """The body rows of the decision table: (line number, its four cells)."""
    rows = []
    for number, line in enumerate(matrix.splitlines(), 1):
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        header = set(cols[0]) <= set("-: ") or cols[0] == "Failure class"
        if line.startswith("|") and len(cols) == 4 and not header:
            rows.append((number, cols))
    return rows
