"""Judge a patch: every step of the gate, in order, each in its own process.

    python scripts/judge.py [--base REF] [--head REF]      # usually: nox -s judge -- ...

The parent (--base, default the merge base of --head and the base branch, or of
origin/<base_branch> when it exists) and the patch (--head, default HEAD) are each materialized
in their own detached worktree; a base without the gate (oracle/judge.yaml and the step
scripts) fails at once, saying so. The step scripts, oracle/, oracles/, fixtures.lock and the
allowlist are all taken from the parent's worktree, never from the patch: a patch that edits
the judge does not change how it is judged. Start the judge from a trusted checkout of the
base branch; running it inside the patch's own worktree trusts that worktree's noxfile.

Steps: preconditions, write-set, fixtures-lock, build, record, replay, assert-inventory,
oracle, crossrun, quarantine, flake-budget, tests (advisory); once the builds exist, the
independent ones run side by side (`jobs` in judge.yaml), and each step's seconds are reported.
Writes reports/judge-report.json and reports/judge-summary.md (appended to $GITHUB_STEP_SUMMARY
when set), and the verdict word to $ORACLE_VERDICT_FILE when set. Reports name the worktrees
`base:` and `head:` ($ORACLE_PATH_NAMES, read by every step), never by their temporary folders.

With `--shard I/N` (one CI runner of N) record, replay, oracle and crossrun judge only the cases
and tests of shard I (scripts/_gate/shard.py); preconditions, build and flake budget run on every
shard, the other steps on shard 1 only. scripts/merge_shards.py combines the N report folders
into one verdict.
Exit codes: 0 merge, 1 block, 2 fail closed: verdict `needs-review` when the patch touches a
protected path (a code owner reviews it, then the judge runs again with ORACLE_REVIEW=1),
`error` when the gate could not judge.
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
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate.cassettes import cassette_path
from _gate.config import Config, load_config
from _gate.envs import WHEELHOUSE, bin_dir, build_env, tools_env
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
)
from _gate.process import exits_within, share_cores
from _gate.protocol import (
    BLOCK,
    ERROR,
    FAIL_CLOSED,
    PASS,
    PROGRESS_LINE,
    STATUS,
    FailClosed,
    NotInWheelhouse,
    listening,
)
from _gate.reports import PATH_NAMES, named
from _gate.shard import WHOLE, Shard, add_shard_arg
from _gate.steps import JUDGE_STEPS
from _gate.verdict import CODE, EXIT_CODES, REPORT_FILES, brief, run_id, write_reports

# Each step run by a script of the base's scripts/ (`_gate.JUDGE_STEPS`), and that script.
STEP_SCRIPTS = {name: script for name, script in JUDGE_STEPS.items() if script}
# What a base must hold for the judge to run on it: its settings and the scripts it runs.
GATE_FILES = (
    "oracle/judge.yaml",
    "scripts/requirements-judge.txt",
    *(f"scripts/{script}" for script in STEP_SCRIPTS.values()),
)
Args = tuple[str | Path, ...]
HEARTBEAT = 5.0  # seconds between two "still running" lines of a quiet step
OWN_SCRIPTS = Path(__file__).resolve().parent
# Steps that stay processes even inline: the inventory's AST work, in a process pool when
# cold, would hold the judge's GIL (and fork it) while the other lanes wait on their cases.
OWN_PROCESS = frozenset({"count_asserts.py"})


@dataclass
class Judgment:
    """One judgment: the refs, the two worktrees, and every step recorded so far."""

    repo: Path
    reports: Path
    base: str = ""
    head: str = ""
    parent: Path = Path()
    patch: Path = Path()
    config: Config | None = None
    shard: Shard = WHOLE
    # The base's scripts are the judge's own, byte for byte: each step's main(argv) runs in
    # this process (the same code a step process would run, without starting Python again).
    inline: bool = False
    steps: list[dict[str, Any]] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # folder -> its name in reports

    @property
    def leads(self) -> bool:
        """Whether this run holds the steps that are not split across shards."""
        return self.shard.index == 1

    @property
    def settings(self) -> Config:
        assert self.config is not None, "judge.yaml is read before any step runs"
        return self.config

    def record(self, name: str, code: int, summary: str, seconds: float = 0.0) -> int:
        return self.add(name, STATUS[code], summary, {}, seconds)

    def add(
        self,
        name: str,
        status: str,
        summary: str,
        evidence: dict[str, Any],
        seconds: float = 0.0,
    ) -> int:
        return self.append(self.step(name, status, summary, evidence, seconds))

    def step(
        self, name: str, status: str, summary: str, evidence: dict[str, Any], seconds: float
    ) -> dict[str, Any]:
        summary = self.shorten(summary)
        step = {"name": name, "status": status, "summary": summary, "evidence": evidence}
        return {**step, "seconds": round(seconds, 2)}

    def append(self, step: dict[str, Any]) -> int:
        self.steps.append(step)
        print(f"judge: {step['name']}: {step['status']}: {step['summary']}", flush=True)
        return CODE[step["status"]]

    def shorten(self, text: str) -> str:
        """Name files the way git does (base:path, head:path), not by temporary worktree."""
        return str(named(text, list(self.names.items())))

    def name(self, path: Path, label: str) -> None:
        """Reports write `path` as `label` (`_gate.named`): the judge's own and every step's,
        inline or a process, which read the names from the environment."""
        self.names[str(path)] = label
        os.environ[PATH_NAMES] = json.dumps(self.names)

    def run(self, name: str, script: str, *args: str | Path, advisory: bool = False) -> int:
        """Run one step script of the base tree; its JSON report is the step's only output."""
        return self.append(self.outcome(Step(name, script, args, advisory)))

    def lanes(self, lanes: Sequence[Sequence[Step]], jobs: int) -> list[list[dict[str, Any]]]:
        """Run lanes of steps side by side, `jobs` at a time; within a lane one after the other,
        a `needs_pass` step only if the one before it passed. Returns each lane's steps, for
        the caller to record in the order of the decision table."""

        def lane(steps: Sequence[Step]) -> list[dict[str, Any]]:
            done: list[dict[str, Any]] = []
            for step in steps:
                if step.needs_pass and done and CODE[done[-1]["status"]] != PASS:
                    break
                done.append(self.outcome(step))
            return done

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(lane, lanes))

    def outcome(self, step: Step) -> dict[str, Any]:
        return self.finish(
            step.name, self.invoke(step.name, step.script, *step.args), step.advisory
        )

    def invoke(self, name: str, script: str, *args: str | Path) -> Ran:
        report = self.report_file(name)
        report.unlink(missing_ok=True)
        argv = [*map(str, args), "--report", str(report)]
        if self.inline and script not in OWN_PROCESS:
            return run_inline(name, script, argv)
        cmd = [sys.executable, str(self.parent / "scripts" / script), *argv]
        return run_step(name, cmd, self.repo)

    def report_file(self, name: str) -> Path:
        return self.reports / REPORT_FILES.get(name, f"{name}.json")

    def finish(self, name: str, ran: Ran, advisory: bool = False) -> dict[str, Any]:
        """The step as its report tells it (pure: recorded by `append`)."""
        report = self.report_file(name)
        forward_workflow_commands(ran.stdout)
        try:
            data = json.loads(report.read_bytes())
        except (OSError, ValueError):
            tail = [line for line in ran.stderr if line.strip()]
            why = tail[-1].strip() if tail else f"exit {ran.returncode}"
            summary = f"step left no report ({why})"
            return self.step(name, STATUS[FAIL_CLOSED], summary, {}, ran.seconds)
        evidence = brief(report, data.get("evidence") or {})
        status = str(data.get("status"))
        status = "advisory" if advisory else status if status in CODE else ERROR
        return self.step(name, status, str(data.get("summary", "")), evidence, ran.seconds)


@dataclass(frozen=True)
class Step:
    """One step script to run: its name, script, arguments, and how it is judged."""

    name: str
    script: str
    args: Args
    advisory: bool = False
    needs_pass: bool = False  # in a lane, runs only if the step before it passed

    @classmethod
    def of(cls, name: str, args: Args, advisory: bool = False, needs_pass: bool = False) -> Step:
        """Step `name` of the table, with its script."""
        return cls(name, STEP_SCRIPTS[name], args, advisory, needs_pass)


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


def run_inline(name: str, script: str, argv: list[str]) -> Ran:
    """Run a step's main(argv) in a thread of this process, watched as `run_step` watches a
    step process: progress passes through, GitHub annotations too (stdout), the step's own
    summary line does not (the judge prints its own), and a quiet step is said to be running."""
    quiet = Quiet(name)
    ended: list[int | str] = []

    def hear(line: str, error: bool) -> None:
        if error:
            quiet.passed(line)
        elif line.startswith("::error "):
            print(line, flush=True)

    def body() -> None:
        try:
            with listening(hear):
                ended.append(importlib.import_module(script.removesuffix(".py")).main(argv))
        except BaseException as exc:  # argparse's SystemExit too: the step left no report
            ended.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=body, name=f"step {name}", daemon=True)
    thread.start()
    thread.join(HEARTBEAT)
    while thread.is_alive():
        quiet.tick()
        thread.join(HEARTBEAT)
    seconds, code = time.monotonic() - quiet.start, ended[0]
    if isinstance(code, int):
        return Ran(code, b"", [], seconds)
    return Ran(FAIL_CLOSED, b"", [code], seconds)


def run_step(name: str, cmd: list[str], cwd: Path) -> Ran:
    """Run a step, passing its progress lines through as they come, and saying every few
    seconds that a step which reports nothing is still running."""
    quiet = Quiet(name)
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kept: list[str] = []
    out: list[bytes] = []

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


@dataclass(frozen=True)
class Builds:
    """The two builds under judgment, and the oracle's own environment holding neither."""

    parent: Path
    patch: Path
    oracle: Path


def forward_workflow_commands(stdout: bytes) -> None:
    """A step's GitHub annotations (`::error file=...`) reach the log only through the judge."""
    for line in stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("::error "):
            print(line, flush=True)


def build_all(j: Judgment, envs: Path, wheelhouse: Path, static: Sequence[Step]) -> Builds | None:
    """Build parent, patch and the oracle env side by side, and beside them run the `static`
    steps (which read trees only; reported first). The base not building is ours."""
    start = time.monotonic()
    requirements = j.parent / "scripts" / "requirements-judge.txt"
    with ThreadPoolExecutor(max_workers=4) as pool:
        beside = pool.submit(lambda: [j.outcome(step) for step in static])
        jobs = {
            side: pool.submit(build_env, tree, envs / side, wheelhouse, requirements)
            for side, tree in (("parent", j.parent), ("patch", j.patch))
        }
        jobs["oracle"] = pool.submit(
            lambda: tools_env(envs / "oracle", wheelhouse, requirements)[0]
        )
    for step in beside.result():
        j.append(step)
    built: dict[str, Path] = {}
    for side, job in jobs.items():
        try:
            built[side] = job.result()
        except FailClosed as exc:
            # A patch that does not build is its own fault; a wheelhouse that lacks what a
            # build needs means the gate cannot see, whichever side it is.
            own_fault = side == "patch" and not isinstance(exc, NotInWheelhouse)
            code = BLOCK if own_fault else FAIL_CLOSED
            j.record("build", code, f"the {side} does not build: {exc}", time.monotonic() - start)
            return None
    done = "parent, patch and oracle built into fresh offline environments"
    j.record("build", PASS, done, time.monotonic() - start)
    return Builds(**built)


def oracle_ref_files(j: Judgment, dest: Path, *names: str) -> list[Path]:
    """Files as they stand on the protected oracle ref, never on the branch (empty when the
    ref has none of that name)."""
    ref = resolve_oracle_ref(j.repo, j.settings.oracle_ref)
    shown = ref.removeprefix("refs/remotes/").removeprefix("refs/heads/")
    paths = [dest / name for name in names]
    for path in paths:
        path.write_text(git(j.repo, "show", f"{ref}:{path.name}", check=False), "utf-8")
        j.name(path, f"{shown}:{path.name}")  # reports name them as git does
    return paths


def strength_args(j: Judgment, dest: Path) -> Args:
    """The oracle's strength score on the oracle ref, for the preconditions (strength_min)."""
    try:
        (score,) = oracle_ref_files(j, dest, SCORE_FILE)
    except FailClosed:  # no oracle ref: the flake budget fails closed on it later
        return ()
    return ("--strength", score)


def static_steps(j: Judgment, tmp: Path) -> list[Step] | None:
    """Steps that read trees only, to run beside the build; None when preconditions fail and
    the judgment cannot go on (nothing of the patch, its build included, may run then)."""
    checks = ("--tree", j.parent, *strength_args(j, tmp))
    if j.run("preconditions", STEP_SCRIPTS["preconditions"], *checks) != PASS:
        return None
    if not j.leads:
        return []
    # With ORACLE_REVIEW=1 a human has reviewed the patch's oracle edits, so they take effect.
    evidence = j.patch if os.environ.get("ORACLE_REVIEW") == "1" else j.parent
    config = j.parent / "oracle" / "judge.yaml"
    refs = ("--repo", j.repo, "--base", j.base, "--head", j.head)
    lock = ("--lock", evidence / "fixtures.lock", "--base-root", j.parent)
    return [
        Step.of("write-set", (*refs, "--config", config)),
        Step.of("fixtures-lock", ("--check", "--root", j.patch, *lock)),
    ]


def dynamic_steps(j: Judgment, tmp: Path, built: Builds) -> None:
    """Steps that run the builds, side by side where they are independent (`jobs` in
    judge.yaml): the oracle; record then replay; the crossrun; the inventory then the advisory
    tests (which read its collected ids); quarantine. Flake budget comes after all of them (it
    decides what they deferred), beside the advisory tests when they are the crossrun's (tests
    unchanged by the patch); the report lists every step in the order of the decision table."""
    parent_py, patch_py = built.parent, built.patch
    review = os.environ.get("ORACLE_REVIEW") == "1"
    parent_cmd = bin_dir(parent_py.parent.parent) / j.settings.command
    patch_cmd = bin_dir(patch_py.parent.parent) / j.settings.command
    cassette = cassette_path(j.repo, j.base, j.shard)
    shard = ("--shard", str(j.shard))
    cases: Args = ("--cases", j.parent / "oracle/cases.yaml", "--fixtures", j.parent / "fixtures")
    cases += ("--timeout", str(j.settings.case_timeout), *shard)
    record: Args = ("--command", parent_cmd, "--repo", j.repo, "--base", j.base, "--reuse")
    record += ("--out", cassette)
    allowlist = (j.patch if review else j.parent) / "oracle/allowlist.yaml"
    commands = ("--parent-command", parent_cmd, "--patch-command", patch_cmd)
    replay = ("--cassette", cassette, *commands, "--allowlist", allowlist, "--base", j.base)
    trees = ("--parent", j.parent, "--patch", j.patch)
    refs = ("--repo", j.repo, "--base", j.base, "--head", j.head)
    config = ("--config", j.parent / "oracle/judge.yaml", "--allowlist", allowlist)
    builds = ("--parent-python", parent_py, "--patch-python", patch_py)
    cache = ("--cache", j.repo / ".oracle" / "inventory-cache.json")
    oracle: Args = ("--oracle", j.parent / "oracle", "--oracle-python", built.oracle)
    oracle += ("--call-timeout", str(j.settings.call_timeout))
    split: Args = (*oracle, *shard)
    tests = tests_args(j, patch_py)
    crossrun = crossrun_args(j, allowlist, builds)
    # Unchanged tests are the crossrun's: the advisory step reads its patch run, after it
    # (a shard's crossrun ran only some of them).
    reuse = crossrun is not None and j.shard.whole and tests_unchanged(j)
    advised = Step.of("tests", tests, advisory=True)
    unreadable = ""  # why the oracle ref's files cannot be read: flake budget cannot run
    try:
        quarantine, ledger = oracle_ref_files(j, tmp, "quarantine.yaml", "variance-ledger.json")
    except FailClosed as exc:
        unreadable, quarantine, ledger = str(exc), None, None
    # The longest lanes first: `jobs` of them start at once.
    lanes: list[list[Step]] = [
        [Step.of("oracle", (*split, *builds))],
        [
            Step.of("record", (*record, *cases)),
            Step.of("replay", (*replay, *cases), needs_pass=True),
        ],
        [Step.of("crossrun", (*crossrun, *shard))] if crossrun is not None else [],
        [
            Step.of("assert-inventory", (*trees, *refs, *config, *builds, *cache)),
            *([] if reuse else [advised]),
        ]
        if j.leads
        else [],
        [Step.of("quarantine", ("--file", quarantine, *trees))]
        if j.leads and quarantine is not None
        else [],
    ]
    done = {step["name"]: step for lane in j.lanes(lanes, j.settings.jobs) for step in lane}
    for name in ("record", "replay", "assert-inventory", "oracle", "crossrun", "quarantine"):
        if name in done:
            j.append(done[name])
        elif name == "crossrun" and crossrun is None:
            j.add(name, "advisory", "off in judge.yaml: the parent's tests did not run", {})
        elif name == "quarantine" and unreadable:
            j.record(name, FAIL_CLOSED, unreadable)
    # The tail, side by side: flake budget reads the oracle and crossrun reports, the reused
    # advisory tests the crossrun and inventory reports; neither reads the other's.
    tail: list[list[Step]] = []
    if quarantine is not None and ledger is not None:
        flake: Args = ("--oracle-report", j.reports / "oracle.json", *oracle)
        flake += ("--patch-python", patch_py, "--quarantine", quarantine, "--ledger", ledger)
        flake += ("--max-retry", str(j.settings.flake_max_retry))
        if crossrun is not None:
            flake += ("--crossrun-report", j.report_file("crossrun"), "--tree", j.parent)
        tail.append([Step.of("flake-budget", flake)])
    if reuse:
        report = ("--crossrun-report", j.report_file("crossrun"))
        tail.append([Step.of("tests", (*tests, *report), advisory=True)])
    done.update({step["name"]: step for lane in j.lanes(tail, j.settings.jobs) for step in lane})
    for name in ("flake-budget", "tests"):
        if name in done:
            j.append(done[name])


def tests_unchanged(j: Judgment) -> bool:
    """Whether the patch left the test folders and every file that configures pytest at the
    root as the base has them (the same git objects)."""
    paths = (
        *j.settings.tests,
        "conftest.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
    )
    listed = [git(j.repo, "ls-tree", ref, "--", *paths, check=False) for ref in (j.base, j.head)]
    return listed[0] == listed[1]


def tests_args(j: Judgment, patch_python: Path) -> Args:
    """The advisory tests step's arguments: the patch's copy of the tests the base names."""
    args: Args = ("--tree", j.patch, "--python", patch_python, "--tests", *j.settings.tests)
    args += ("--timeout", str(j.settings.advisory_timeout))
    return (*args, "--inventory-report", j.reports / "assert-inventory.json")


def crossrun_args(j: Judgment, allowlist: Path, builds: Args) -> Args | None:
    """The crossrun step's arguments, or None when judge.yaml turns it off."""
    settings = j.settings
    if settings.crossrun == "off":
        return None
    args: Args = ("--tree", j.parent, "--tests", *settings.tests, *builds)
    args += ("--allowlist", allowlist, "--base", j.base, "--mode", settings.crossrun)
    args += ("--timeout", str(settings.crossrun_timeout))
    return (*args, "--test-extra", settings.test_extra) if settings.test_extra else args


def judge(j: Judgment, args: argparse.Namespace) -> None:
    git(j.repo, "worktree", "prune", check=False)
    j.head = resolve_commit(j.repo, args.head, "--head")
    j.base = base_commit(j.repo, args.base, args.head, j.head)
    with tempfile.TemporaryDirectory(prefix="oracle-judge-") as name:
        tmp = Path(name).resolve()  # pytest writes resolved paths; names must match them
        j.name(j.repo, "")
        j.name(tmp, "tmp:")
        j.name(tmp / "envs", "envs:")
        j.parent = add_worktree(j.repo, j.base, tmp / "parent")
        j.name(j.parent, "base:")
        j.patch = add_worktree(j.repo, j.head, tmp / "patch")
        j.name(j.patch, "head:")
        j.inline = same_files(j.parent / "scripts", OWN_SCRIPTS)
        try:
            j.config = load_config(j.parent / "oracle" / "judge.yaml")
            share_cores(j.config.jobs)
            static = static_steps(j, tmp)
            if static is not None:
                built = build_all(j, tmp / "envs", args.wheelhouse.resolve(), static)
                if built:
                    dynamic_steps(j, tmp, built)
        finally:
            remove_worktree(j.repo, j.parent)
            remove_worktree(j.repo, j.patch)


def base_commit(repo: Path, base: str | None, head: str, head_sha: str) -> str:
    """The commit judged against: --base, else the merge base of the head and the base branch;
    either must hold the gate."""
    if base:
        sha = resolve_commit(repo, base, "--base")
        require_gate(repo, sha, f"{base} ({sha[:12]})", "pass --base REF of a commit that has it")
        return sha
    # Only the base branch's name comes from this checkout; all else from the base tree.
    branch = load_config(repo / "oracle" / "judge.yaml").base_branch
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


def publish(j: Judgment, matrix: str) -> int:
    report = {
        "base": j.base,
        "head": j.head,
        "scripts_from": j.base if j.config else "",
        "steps_inline": j.inline,
        "shard": {"index": j.shard.index, "count": j.shard.count},
        "run": run_id(),
        "steps": j.steps,
    }
    return write_reports(j.reports, report, matrix, "judge", j.repo)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES)
    p.add_argument("--base", help="parent commit-ish (default: merge base with the base branch)")
    p.add_argument("--head", default="HEAD", help="patch commit-ish (default HEAD)")
    p.add_argument("--repo", type=Path, default=Path("."), help="the repository (default .)")
    p.add_argument("--reports", type=Path, default=Path("reports"), help="report folder")
    p.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE, help="local wheelhouse")
    add_shard_arg(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    j = Judgment(repo=args.repo, reports=args.reports.resolve(), shard=args.shard)
    j.reports.mkdir(parents=True, exist_ok=True)
    matrix = b""
    with kept(PATH_NAMES):  # the names of this judgment's folders stay with it
        try:
            j.repo = repo_root(args.repo)
            judge(j, args)
            matrix = show_file(j.repo, j.base, "oracles/MATRIX.md") or b""
        except FailClosed as exc:
            j.record("setup" if not j.steps else "judge", FAIL_CLOSED, str(exc))
        except Exception as exc:  # one line and a report, never a traceback
            j.record("judge", FAIL_CLOSED, f"internal error {type(exc).__name__}: {exc}")
    return publish(j, matrix.decode("utf-8", "replace"))


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
