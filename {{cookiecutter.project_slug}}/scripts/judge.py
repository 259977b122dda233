"""Judge a patch: the steps of the gate's table (scripts/_gate/steps.py), in its order.

    python scripts/judge.py [--base REF] [--head REF]      # usually: nox -s judge -- ...

The parent (--base, default the merge base of --head and the base branch, or of
origin/<base_branch> when it exists) and the patch (--head, default HEAD) are each materialized
in their own detached worktree; a base without the gate (oracle/judge.yaml and the step
scripts) fails at once, saying so. The step scripts, oracle/, oracles/, fixtures.lock and the
allowlist are all taken from the parent's worktree, never from the patch: a patch that edits
the judge does not change how it is judged. Start the judge from a trusted checkout of the
base branch; running it inside the patch's own worktree trusts that worktree's noxfile.

The judgment (scripts/_gate/context.py: commits, worktrees, the diff, judge.yaml, the review
flag, the builds) is resolved once and given to every step: each step's contract is decided in a
thread of this process when the base's scripts are the judge's own, else the base's script runs
as a process given the judgment as `--judgment FILE`. The table's lanes run side by side once
the builds exist (`jobs` in judge.yaml), and each step's seconds are reported. Outcomes stay in
memory: a step that reads an earlier one gets it from the judge, and reports/ (every step's
report, then the judge's) is written last, from them.
Writes reports/judge-report.json and reports/judge-summary.md (appended to $GITHUB_STEP_SUMMARY
when set), and the verdict word to $ORACLE_VERDICT_FILE when set. Reports name the worktrees
`base:` and `head:` ($ORACLE_PATH_NAMES, read by every step), never by their temporary folders.

With `--shard I/N` (one CI runner of N) record, replay, oracle and crossrun judge only the cases
and tests of shard I (scripts/_gate/shard.py); preconditions, build and flake budget run on every
shard, the other steps on shard 1 only. scripts/merge_shards.py combines the N report folders
into one verdict. Evidence whose inputs did not change is reused (scripts/_gate/reuse.py:
a patch whose build is the parent's, parent runs and the parent's and oracle's environments
kept between judgments, scripts/_gate/kept_envs.py); `--fresh` keeps and
reuses nothing between judgments and skips no step's run, as `adopt` does to see each step
run on a new project.
Exit codes: 0 merge, 1 block, 2 fail closed: verdict `needs-review` when the patch touches a
protected path or moves internals parent tests reach into (a code owner reviews it, then the
judge runs again with ORACLE_REVIEW=1), `error` when the gate could not judge.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from _gate.bytecode import write_bytecode
from _gate.cases import load_cases
from _gate.cassettes import parent_now
from _gate.config import committed_config, load_config
from _gate.confine import SHM
from _gate.context import Builds, Judgment, OracleRef, changes, review_requested, write_judgment
from _gate.entry import Contract
from _gate.envs import WHEELHOUSE, bin_dir, tools_env
from _gate.git import (
    SCORE_FILE,
    add_worktree,
    base_ref,
    default_base,
    git,
    remove_worktree,
    repo_root,
    resolve_commit,
    resolve_oracle_ref,
    show_file,
    uncommitted,
)
from _gate.kept_envs import (
    CHANGED,
    KEPT,
    Cache,
    base_build,
    env_limit,
    evict,
    kept_env,
    oracle_env_key,
    parent_env_key,
)
from _gate.oracle_run import has_tests
from _gate.process import exits_within, share_cores
from _gate.protocol import (
    ADVISORY,
    BLOCK,
    ERROR,
    FAIL_CLOSED,
    PASS,
    PROGRESS_LINE,
    STATUS,
    TAMPERED,
    FailClosed,
    NotInWheelhouse,
    Report,
    concluded,
    listening,
    read_report,
)
from _gate.provenance import compare, project_info, provenance, summary
from _gate.reports import PATH_NAMES, named, write_report
from _gate.reuse import CACHE_ENV, REUSED, cache_folder, prune, runs_limit
from _gate.sandbox import Sandbox, probe_sandbox, require_sandbox, unconfinable
from _gate.seal import Seal, build_digest, seal, write_sealed
from _gate.shard import WHOLE, Shard, add_shard_arg
from _gate.steps import BY_NAME, LANES, SCRIPTS, SETUP, STEPS, TREES, Step, report_file
from _gate.verdict import EXIT_CODES, brief, run_id, write_reports

# What a base must hold for the judge to run on it: its settings and the scripts it runs.
GATE_FILES = (
    "oracle/judge.yaml",
    "scripts/requirements-judge.txt",
    *(f"scripts/{script}" for script in SCRIPTS),
)
# What the gate reads, all from committed revisions: edits in the working tree are named.
GATE_PATHS = ("oracle", "oracles", "fixtures", "fixtures.lock", "scripts", "noxfile.py")
HEARTBEAT = 5.0  # seconds between two "still running" lines of a quiet step
OWN_SCRIPTS = Path(__file__).resolve().parent


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
    names: dict[str, str] = field(default_factory=dict)  # folder -> its name in reports
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
        evidence = report.evidence
        if has_report(report.step):
            evidence = brief(self.reports / report_file(report.step), evidence)
        step = {"name": report.step, "status": report.status, "summary": report.summary}
        self.steps.append({**step, "evidence": evidence, "seconds": round(seconds, 2)})
        print(f"judge: {report.step}: {report.status}: {report.summary}", flush=True)
        return report.code

    def shorten(self, text: str) -> str:
        """Name files the way git does (base:path, head:path), not by temporary worktree."""
        return str(named(text, list(self.names.items())))

    def name(self, path: Path, label: str) -> None:
        """Reports write `path` as `label` (`reports.named`): the judge's own and every
        step's, inline or a process, which read the names from the environment."""
        self.names[str(path)] = label
        os.environ[PATH_NAMES] = json.dumps(self.names)

    def conclude(self, step: Step) -> tuple[Report, float]:
        """Run one step of the table on the judgment, with the outcomes it reads; its status as
        the table says (`advisory` for a step that does not decide)."""
        assert step.script is not None
        earlier = {name: self.outcomes[name] for name in step.reads if name in self.outcomes}
        start = time.monotonic()
        if self.inline and not step.own_process:
            report = inline(step, self.j, earlier)
        else:
            report = self.run_process(step, earlier)
        if step.advisory(self.j.config) and not report.evidence.get(TAMPERED):
            report = replace(report, status=ADVISORY)  # a forged run blocks in every mode
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


def finished(path: Path, name: str, ran: Ran) -> Report:
    """A step process's outcome as its report tells it, read once; its GitHub annotations
    (`::error file=...`) reach the log only through the judge."""
    forward_workflow_commands(ran.stdout)
    try:
        return read_report(path)
    except FailClosed:
        tail = [line for line in ran.stderr if line.strip()]
        why = tail[-1].strip() if tail else f"exit {ran.returncode}"
        return Report(name, ERROR, FAIL_CLOSED, f"step left no report ({why})")


def has_report(name: str) -> bool:
    """Whether the step is one of a script, which has a report of its own."""
    return name in BY_NAME and BY_NAME[name].script is not None


def run_inline(name: str, body: Callable[[], int]) -> Ran:
    """Run a step's body in a thread of this process, watched as `run_step` watches a step
    process: progress passes through, GitHub annotations too (stdout), the step's own summary
    line does not (the judge prints its own), and a quiet step is said to be running."""
    quiet = Quiet(name)
    ended: list[int | str] = []

    def hear(line: str, error: bool) -> None:
        if error:
            quiet.passed(line)
        elif line.startswith("::error "):
            print(line, flush=True)

    def watched() -> None:
        try:
            with listening(hear):
                ended.append(body())
        except BaseException as exc:  # argparse's SystemExit too: the step left no outcome
            ended.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=watched, name=f"step {name}", daemon=True)
    thread.start()
    thread.join(HEARTBEAT)
    while thread.is_alive():
        quiet.tick()
        thread.join(HEARTBEAT)
    seconds, code = time.monotonic() - quiet.start, ended[0]
    if isinstance(code, int):
        return Ran(code, b"", [], seconds)
    return Ran(FAIL_CLOSED, b"", [code], seconds)


def inline(step: Step, j: Judgment, earlier: Mapping[str, Report]) -> Report:
    """A step's contract (`STEP` of its module), decided in this process on the judgment: its
    outcome stays in memory."""
    assert step.script is not None
    contract: Contract[Any] = importlib.import_module(step.script.removesuffix(".py")).STEP
    kept: list[Report] = []

    def body() -> int:
        kept.append(concluded(step.name, lambda: contract.judged(j, earlier)))
        return kept[-1].exit_code

    ran = run_inline(step.name, body)
    if kept:
        return kept[0]
    why = ran.stderr[-1] if ran.stderr else f"exit {ran.returncode}"
    return Report(step.name, ERROR, FAIL_CLOSED, f"step left no report ({why})")


@dataclass(frozen=True)
class Ran:
    """One step's process, as the judge saw it."""

    returncode: int
    stdout: bytes
    stderr: list[str]  # its lines, progress lines left out
    seconds: float


class Quiet:
    """Says every HEARTBEAT seconds that a step which has reported nothing since is running."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.start = self.heard = time.monotonic()

    def passed(self, line: str) -> bool:
        """Pass a progress line through (True); any other line is the caller's."""
        if not re.match(PROGRESS_LINE, line):
            return False
        print(f"judge: {line}", file=sys.stderr, flush=True)
        self.heard = time.monotonic()
        return True

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.heard >= HEARTBEAT:
            line = f"judge: {self.name}: running, {now - self.start:.0f} s"
            print(line, file=sys.stderr, flush=True)
            self.heard = now


def run_step(name: str, cmd: list[str], cwd: Path) -> Ran:
    """Run a step, passing its progress lines through as they come, and saying every few
    seconds that a step which reports nothing is still running."""
    quiet = Quiet(name)
    kept: list[str] = []
    out: list[bytes] = []
    # `cmd` is a step script of the base's worktree (Judge.process), the gate's own code at the
    # merge base, never the patch's: each step runs the patch's code through run_confined.
    with subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:

        def read_stderr() -> None:
            assert proc.stderr is not None
            for raw in proc.stderr:
                line = raw.decode("utf-8", "backslashreplace").rstrip("\n")
                if not quiet.passed(line):
                    kept.append(line)

        def read_stdout() -> None:
            assert proc.stdout is not None
            out.append(proc.stdout.read())

        readers = [threading.Thread(target=f, daemon=True) for f in (read_stderr, read_stdout)]
        for reader in readers:
            reader.start()
        while not exits_within(proc, HEARTBEAT):
            quiet.tick()
        for reader in readers:
            reader.join()
    return Ran(proc.returncode, b"".join(out), kept[-50:], time.monotonic() - quiet.start)


def forward_workflow_commands(stdout: bytes) -> None:
    """A step's GitHub annotations (`::error file=...`) reach the log only through the judge."""
    for line in stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("::error "):
            print(line, flush=True)


def build_all(judge: Judge, envs: Path, wheelhouse: Path) -> Builds | None:
    """Build the oracle env (sealed) and the parent side by side, then the patch once the
    oracle env is sealed, and beside them run the steps of the `trees` lane (which read trees
    only; reported first). A base without property oracles gets no oracle env: nothing would
    run in it. The base not building is ours."""
    j, start = judge.j, time.monotonic()
    requirements = j.parent / "scripts" / "requirements-judge.txt"
    envs.mkdir(exist_ok=True)  # the seal is written here, whether the environments are or not
    cache, kept_in, runs = kept_for(judge)
    came: dict[str, str] = {}  # how each environment came (kept_envs.py)
    # Keyed as a base's: the patch's environment is the parent's of a judgment whose base it
    # becomes (kept_envs.py).
    keys = {
        side: parent_env_key(j.repo, commit, requirements)
        for side, commit in (("parent", j.base), ("patch", j.head))
    }

    def make_room(cache: Cache) -> None:
        """Bound the cache before this judgment keeps its own runs and environments (none
        of its own deleted), beside the builds, where a core is idle."""
        prune(cache.folder, runs)
        evict(cache, [oracle_env_key(requirements), *keys.values()])

    def side_build(side: str, tree: Path, donor: Callable[[], Path | None]) -> tuple[Path, str]:
        """The side's python and its build's digest, taken here: the parent's while the
        patch's environment is still being built."""

        build = base_build(tree, wheelhouse, requirements, donor)
        built = kept_env(kept_in, keys[side], envs / side, build)
        came[side] = built.came
        return built.python, build_digest(built.python.parent.parent)

    with ThreadPoolExecutor(max_workers=6) as pool:
        beside = pool.submit(lambda: [judge.conclude(step) for step in table(judge, TREES)])
        room = pool.submit(make_room, kept_in) if kept_in is not None else None
        oracle = None
        if has_tests(j.parent / "oracle"):
            oracle = pool.submit(sealed_tools_env, envs, wheelhouse, requirements, kept_in, came)

        def patch_build() -> tuple[Path, str] | None:
            # The patch's build backend is the first of its code to run: it starts once the
            # oracle environment is built and sealed, and not at all when that failed.
            if oracle is not None and oracle.exception() is not None:
                return None
            return side_build("patch", j.patch, patch_donor)

        def patch_donor() -> Path | None:
            # Never waits: the parent's build may wait for the lock this build holds (a
            # commit judged against itself keys both environments alike). The oracle's is
            # built by now (the patch's build starts after it).
            done = [job for job in (jobs["parent"], oracle) if job is not None and job.done()]
            return next(filter(None, map(env_of, done)), None)

        jobs: dict[str, Future[Any]] = {"oracle": oracle} if oracle is not None else {}
        # Each build takes the bytecode of an environment built before it (_gate/bytecode.py):
        # the parent's the oracle's, the patch's the parent's (or the oracle's, where the
        # parent's is not built yet).
        jobs["parent"] = pool.submit(side_build, "parent", j.parent, lambda: env_of(oracle))
        jobs["patch"] = pool.submit(patch_build)
        early = pool.submit(parent_now_beside, judge, jobs["parent"], jobs["patch"])
    for done in beside.result():
        judge.append(*done)
    if room is not None:
        room.result()
    built = waited_builds(judge, jobs, start)
    if built is None:
        return None
    seconds = time.monotonic() - start
    return checked_builds(judge, built, seconds, came, cache=cache, parent_now=early.result())


def kept_for(judge: Judge) -> tuple[Path | None, Cache | None, int]:
    """Where this judgment keeps environments and runs for the next ones, the kept
    environments there, and how many runs it keeps: nothing is kept from, or for, a judgment
    whose patch code ran unconfined (or --fresh). Both limits are read before any build: a
    bad value fails closed there."""
    if judge.confinement == "unconfined" or judge.fresh:
        return None, None, 0
    cache = cache_folder(judge.j.repo)
    return cache, Cache(cache, env_limit(), judge.held), runs_limit()


def waited_builds(
    judge: Judge, jobs: Mapping[str, Future[Any]], start: float
) -> dict[str, Any] | None:
    """Each build's result, or None once one failed (recorded as the build step's)."""
    built: dict[str, Any] = {}
    for side, job in jobs.items():  # the oracle's failure first: the patch never started then
        try:
            built[side] = job.result()
        except FailClosed as exc:
            # A patch that does not build is its own fault; a wheelhouse that lacks what a
            # build needs means the gate cannot see, whichever side it is.
            own_fault = side == "patch" and not isinstance(exc, NotInWheelhouse)
            code = BLOCK if own_fault else FAIL_CLOSED
            seconds = time.monotonic() - start
            judge.record("build", code, f"the {side} does not build: {exc}", seconds)
            return None
    return built


def checked_builds(
    judge: Judge,
    built: dict[str, Any],
    seconds: float,
    came: Mapping[str, str],
    *,
    cache: Path | None,
    parent_now: Seal | None,
) -> Builds | None:
    """The builds once each wheel is found to install its tree (the build step's outcome)."""
    try:
        matched, evidence = built_from_trees(judge.j, built["parent"], built["patch"])
    except FailClosed as exc:
        judge.record("build", FAIL_CLOSED, str(exc), seconds)
        return None
    done_line = f"{built_line('oracle' in built, came)}; {matched}"
    if evidence["same"]:
        done_line += "; the patch's build is the parent's, file for file"
    judge.append(Report("build", STATUS[PASS], PASS, judge.shorten(done_line), evidence), seconds)
    oracle_python, oracle_seal = built.pop("oracle", (None, None))
    return Builds(
        parent=built["parent"][0],
        patch=built["patch"][0],
        oracle=oracle_python,
        oracle_seal=oracle_seal,
        same=evidence["same"],
        parent_build=evidence["parent_build"],
        patch_build=evidence["patch_build"],
        cache=cache,
        parent_now=parent_now,
    )


def parent_now_beside(judge: Judge, parent: Future[Any], patch: Future[Any]) -> Seal | None:
    """The replay's parent-now runs (the drift check's), taken once the parent is built and
    until the patch is, where a core idles: they need the parent's build alone. None where
    the replay would not read them (a step of the base's own scripts, a shard without it) or
    the parent did not build; a case that cannot run here is the replay's to report. One at a
    time: the patch's build has the other core."""
    j, env = judge.j, env_of(parent)
    if not judge.inline or not BY_NAME["replay"].runs_on(j.shard) or env is None:
        return None
    try:
        every = load_cases(j.parent / "oracle" / "cases.yaml", j.config.case_timeout)
        cases = j.shard.pick(every, lambda case: case.id)
        command = bin_dir(env) / j.config.command
        taken = parent_now(command, cases, j.parent / "fixtures", patch.done)
    except FailClosed:
        return None
    return write_sealed(judge.tmp / "parent-now.json", json.dumps(taken).encode("utf-8"))


def env_of(job: Future[Any] | None) -> Path | None:
    """The environment a build job made, once it is done (None: no such job, or it failed).
    Each job gives its python first, then the oracle's seal or a side's digest."""
    if job is None or job.exception() is not None:
        return None
    python: Path = job.result()[0]
    return python.parent.parent


def built_from_trees(
    j: Judgment, parent: tuple[Path, str], patch: tuple[Path, str]
) -> tuple[str, dict[str, Any]]:
    """Build provenance (_gate/provenance.py): each wheel installs its tree, and the patch's
    has the parent's kind of origin; the summary's words and the build step's evidence. Each
    side comes as its python and its build's digest."""
    sides = {}
    for side, tree, (python, _), label in (
        ("parent", j.parent, parent, "base:"),
        ("patch", j.patch, patch, "head:"),
    ):
        sides[side] = provenance(tree, project_info(python.parent.parent), label)
    compare(sides["parent"], sides["patch"], j.patch, "head:")
    evidence: dict[str, Any] = {side: found.evidence() for side, found in sides.items()}
    # Each build's digest keys the runs kept of it (_gate/reuse.py); two equal digests are
    # one build.
    evidence["parent_build"], evidence["patch_build"] = parent[1], patch[1]
    same = sides["parent"].files == sides["patch"].files
    evidence["same"] = same and patch[1] == parent[1]
    return f"patch wheel {summary(sides['patch'], 'head:')}", evidence


def built_line(oracle: bool, came: Mapping[str, str]) -> str:
    """The build step's words for its environments: built fresh, or kept (_gate/kept_envs.py)."""
    names = ["parent", "patch", *(["oracle"] if oracle else [])]
    kept = [name for name in names if came.get(name) == KEPT]
    fresh = [name for name in names if name not in kept]
    parts = []
    if fresh:
        many = "s" if len(fresh) > 1 else ""
        where = "fresh offline environments" if many else "a fresh offline environment"
        parts.append(f"{listed(fresh)} built into {where}")
    if kept:
        many = "s" if len(kept) > 1 else ""
        parts.append(
            f"the {listed(kept)} environment{many} kept from an earlier build and checked "
            f"file for file: {REUSED}"
        )
    parts += [
        f"the {name} environment kept in the cache changed since it was built: not used "
        "(delete its folder under envs/ there to keep a new one)"
        for name in names
        if came.get(name) == CHANGED
    ]
    return "; ".join(parts)


def listed(names: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def sealed_tools_env(
    envs: Path, wheelhouse: Path, requirements: Path, cache: Cache | None, came: dict[str, str]
) -> tuple[Path, Seal]:
    """The oracle environment, compiled and sealed (its digest beside it, in envs/) before any
    code of the patch runs: every trusted run checks it against that digest (_gate/seal.py).
    Kept between judgments where the cache allows (_gate/kept_envs.py)."""

    def build(dest: Path) -> Path:
        python = tools_env(dest, wheelhouse, requirements)[0]
        write_bytecode(dest)
        return python

    built = kept_env(cache, oracle_env_key(requirements), envs / "oracle", build)
    came["oracle"] = built.came
    return built.python, seal(built.python.parent.parent, envs / "oracle.digest.json", built.sealed)


def table(judge: Judge, lane: str) -> list[Step]:
    """The steps of one lane that this shard runs, in the order of the table."""
    return [s for s in STEPS if s.lane == lane and s.runs_on(judge.shard)]


def oracle_ref(judge: Judge, repo: Path, ref: str, dest: Path) -> OracleRef:
    """The oracle ref's files as they stand on the protected ref, never on the branch (empty
    when the ref has none of that name)."""
    try:
        full = resolve_oracle_ref(repo, ref)
    except FailClosed as exc:  # the steps that read it fail closed on it
        return OracleRef(unreadable=str(exc))
    shown = full.removeprefix("refs/remotes/").removeprefix("refs/heads/")
    paths = []
    for name in ("quarantine.yaml", "variance-ledger.json", SCORE_FILE):
        path = dest / name
        path.write_text(git(repo, "show", f"{full}:{name}", check=False), "utf-8")
        judge.name(path, f"{shown}:{name}")  # reports name them as git does
        paths.append(path)
    quarantine, ledger, strength = paths
    return OracleRef(quarantine, ledger, strength)


def judge(run: Judge, args: argparse.Namespace) -> None:
    """Resolve the judgment once, then run the table: setup, the trees beside the builds,
    then every lane after the builds."""
    repo = run.repo
    git(repo, "worktree", "prune", check=False)
    note_uncommitted(repo)
    run.head = head = resolve_commit(repo, args.head, "--head")
    run.base = base = base_commit(repo, args.base, args.head, head)
    with tempfile.TemporaryDirectory(prefix="oracle-judge-") as name, run.held:
        run.tmp = tmp = Path(name).resolve()  # pytest writes resolved paths; names must match
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
                oracle_ref=oracle_ref(run, repo, config.oracle_ref, tmp),
            )
            judged(run, args.wheelhouse.resolve())
        finally:
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


def out_of_reach(repo: Path) -> str:
    """Why a confined job would not find the judge's folders ("": it would): its temporary
    folder and its cache hold what the jobs run and write, and a job gets an empty /dev/shm of
    its own (_gate/confine.py): the patch's build would fail there as if it did not build."""
    for name, folder in (
        ("$TMPDIR", Path(tempfile.gettempdir())),
        (f"${CACHE_ENV}", cache_folder(repo)),
    ):
        if folder.resolve().is_relative_to(SHM):
            return (
                f"{name}: {folder} is under {SHM}, which every confined job gets empty, of its "
                f"own; set {name} to a folder outside {SHM}"
            )
    return ""


def confinable(run: Judge) -> bool:
    """Whether the patch's code may run here: confined, or unconfined where judge.yaml says
    `sandbox: best-effort` (and every report then says so)."""
    found = probe_sandbox()
    run.confinement = found.level if found.level != "none" else "unconfined"
    if found.level == "none" and Sandbox.required:
        run.record("build", FAIL_CLOSED, unconfinable(found.missing))
        return False
    # Only jobs in namespaces get mounts of their own, /dev/shm among them.
    hidden = out_of_reach(run.repo) if found.level == "namespaces" else ""
    if hidden:
        run.record("build", FAIL_CLOSED, hidden)
    return not hidden


def base_commit(repo: Path, base: str | None, head: str, head_sha: str) -> str:
    """The commit judged against: --base, else the merge base of the head and the base branch;
    either must hold the gate."""
    if base:
        sha = resolve_commit(repo, base, "--base")
        require_gate(repo, sha, f"{base} ({sha[:12]})", "pass --base REF of a commit that has it")
        return sha
    # Only the base branch's name comes from this checkout (as HEAD commits it); all else from
    # the base tree.
    branch = committed_config(repo).base_branch
    target = base_ref(repo, branch)
    sha, tip = default_base(repo, head_sha, branch), resolve_commit(repo, target, "base branch")
    if sha == tip:
        label = f"{target} ({sha[:12]})"
    else:
        label = f"{sha[:12]} (the merge base of {head} and {target})"
    if gate_missing(repo, tip):
        fix = f"merge the branch that adds it into {branch} first"
    else:
        fix = f"{target} has it: merge {target} into {head}"
    require_gate(repo, sha, label, f"{fix}, or pass --base REF of a commit that has it")
    return sha


def note_uncommitted(repo: Path) -> None:
    """Name the gate files edited but not committed here: a user who edits oracle/cases.yaml and
    judges would otherwise wonder why the new case did nothing."""
    edited = uncommitted(repo, GATE_PATHS)
    if edited:
        more = f" and {len(edited) - 3} more" if len(edited) > 3 else ""
        print(
            f"judge: note: not judged, uncommitted here: {', '.join(edited[:3])}{more}; the gate "
            "reads committed revisions (commit them on the base branch to use them)",
            flush=True,
        )


def require_gate(repo: Path, sha: str, label: str, fix: str) -> None:
    """Fail closed in one line when the base has no gate yet (a project adopting it, whose base
    branch does not hold it): the judge runs the base's settings and scripts, never its own."""
    missing = gate_missing(repo, sha)
    if missing:
        raise FailClosed(f"base {label} has no oracle gate yet ({missing} missing): {fix}")


def gate_missing(repo: Path, sha: str) -> str:
    """Which of GATE_FILES the commit lacks, in a few words; '' when it holds them all."""
    listed = git(repo, "ls-tree", "-r", "-z", "--name-only", sha, "--", *GATE_FILES)
    present = set(listed.split("\0"))
    missing = [path for path in GATE_FILES if path not in present]
    scripts = [path for path in GATE_FILES if path.startswith("scripts/")]
    lost = [path for path in missing if path in scripts]
    words = [path for path in missing if path not in scripts]
    if lost == scripts:
        words.append("scripts/")
    elif lost:
        words.append(lost[0] + (f" and {len(lost) - 1} more scripts" if len(lost) > 1 else ""))
    return " and ".join(words)


def same_files(one: Path, other: Path) -> bool:
    """Whether two scripts/ folders hold the same Python files (theirs and _gate's), byte for byte;
    False when either cannot be read (the steps then run as processes, and say what is wrong)."""

    def files(folder: Path) -> dict[str, bytes]:
        paths = [*folder.glob("*.py"), *folder.glob("_gate/*.py")]
        return {path.relative_to(folder).as_posix(): path.read_bytes() for path in paths}

    try:
        return files(one) == files(other)
    except OSError:
        return False


def publish(run: Judge, matrix: str) -> int:
    """Write reports/ last, from the outcomes in memory: each step's report, judge-report.json,
    the summary and the SARIF. Nothing written there meanwhile is read."""
    run.write_step_reports()
    report = {
        "base": run.base,
        "head": run.head,
        "scripts_from": run.base if run.judgment else "",
        "steps_inline": run.inline,
        "shard": {"index": run.shard.index, "count": run.shard.count},
        "confinement": run.confinement,
        "run": run_id(),
        "steps": run.steps,
    }

    def evidence(step: dict[str, Any]) -> dict[str, Any]:
        kept = run.outcomes.get(step["name"])
        return dict(kept.evidence) if kept else dict(step["evidence"])

    return write_reports(run.reports, report, matrix, "judge", repo=run.repo, evidence=evidence)


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
    matrix = b""
    with kept(PATH_NAMES):  # the names of this judgment's folders stay with it
        try:
            run.repo = repo_root(args.repo)
            judge(run, args)
            matrix = show_file(run.repo, run.base, "oracles/MATRIX.md") or b""
        except FailClosed as exc:
            run.record("setup" if not run.steps else "judge", FAIL_CLOSED, str(exc))
        except Exception as exc:  # one line and a report, never a traceback
            run.record("judge", FAIL_CLOSED, f"internal error {type(exc).__name__}: {exc}")
    return publish(run, matrix.decode("utf-8", "replace"))


@contextmanager
def kept(variable: str) -> Iterator[None]:
    """The environment variable as it was before, whatever the block sets it to."""
    before = os.environ.get(variable)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = before


if __name__ == "__main__":
    sys.exit(main())
