"""Running a cassette case: in a scratch home and working folder of its own, confined, with
its fixtures; a run's streams and files observed as the fields a cassette records (noise
normalized); many cases side by side, under a perturbation, or until one passes, and the
built CLI of a tree to run them with."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, NamedTuple

from _gate.core.protocol import FailClosed, Progress
from _gate.core.seal import build_digest
from _gate.plugin.confine import Reach
from _gate.plugin.patch_env import gate_env
from _gate.runs import perturb
from _gate.runs.cases import (
    FILES_SPEC,
    HEAD_SHOWN,
    NOISE_MARK,
    POINTER_SPEC,
    Case,
    Noise,
    pointer_get,
)
from _gate.runs.envs import bin_dir
from _gate.runs.git import add_worktree, remove_worktree
from _gate.runs.kept_envs import base_env
from _gate.runs.process import Stream
from _gate.runs.reach import calls, reached_command, read_reach
from _gate.runs.sandbox import hides, run_confined
from _gate.runs.traced import Coverage, Trace, traced_command


@dataclass(frozen=True)
class Run:
    exit_code: int
    timed_out: bool
    stdout: Stream
    stderr: Stream
    files: dict[str, str]
    seconds: float
    touched: dict[str, str] | None = None  # perturb.touched: only a run among decoy files
    # A watched run's (perturbed, at the namespaces level): where it reached beyond its
    # scratch, what it typed into a terminal (confine.Watching); None where not watched.
    reached: tuple[str, ...] | None = None
    typed: bytes = b""
    coverage: Coverage | None = None  # a traced run's (the patch's build): the lines it ran
    # A reach run's (the parent's build, reach.py): the functions it called; None if broken.
    called: list[str] | None = None


def case_env(case: Case, home: Path, bin_dir: Path) -> dict[str, str]:
    """A case's environment in the gate's own scene (_gate/plugin/patch_env.py): HOME given, TMPDIR
    beside it, the build's scripts first on PATH; then the case's own variables."""
    env = gate_env(home, home.parent / "tmp", bin_dir)
    env.update(case.env)
    for key in case.env_remove:
        env.pop(key, None)
    return env


def file_digests(root: Path, specs: Sequence[str]) -> dict[str, str]:
    globs = [s[len(FILES_SPEC) :] for s in specs if s.startswith(FILES_SPEC)]
    if not globs:
        return {}
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not path.is_symlink() and any(fnmatchcase(rel, g) for g in globs):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


class Scratch:
    """Each thread's HOME and working directory, made once and used again while a run leaves
    them as made (empty, same mode): an empty folder is as fresh as a new one, and making and
    removing two folders per run costs more than a short run itself. A run that leaves
    anything behind, or a case with a `cwd` fixture, gets new ones."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.local = threading.local()

    def folders(self, case: Case, fixtures: Path) -> tuple[Path, Path]:
        """HOME and the working directory; beside them `tmp`, the run's TMPDIR (the only
        other folder a confined case may write)."""
        kept: tuple[Path, Path] | None = getattr(self.local, "kept", None)
        self.local.kept = None
        if kept is not None and not case.cwd and all(_untouched(p) for p in scratch_folders(*kept)):
            return kept
        if kept is not None:
            shutil.rmtree(kept[0].parent, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(dir=self.root))
        home, work = tmp / "home", tmp / "work"
        home.mkdir(mode=FOLDER_MODE)
        (tmp / "tmp").mkdir(mode=FOLDER_MODE)
        if not case.cwd:
            work.mkdir(mode=FOLDER_MODE)
            return home, work
        source = fixtures / case.cwd
        if not source.is_dir():
            raise FailClosed(f"case {case.id!r}: cwd fixtures/{case.cwd} is not a folder")
        shutil.copytree(source, work, symlinks=True)
        return home, work

    def keep(self, folders: tuple[Path, Path], case: Case) -> None:
        """After the run: this thread's folders for its next run, or gone (a fixture copy)."""
        if case.cwd:
            shutil.rmtree(folders[0].parent, ignore_errors=True)
        else:
            self.local.kept = folders


FOLDER_MODE = 0o700


def scratch_folders(home: Path, work: Path) -> tuple[Path, Path, Path]:
    """Every folder a case may write: its HOME, working directory and TMPDIR."""
    return home, work, home.parent / "tmp"


def _untouched(path: Path) -> bool:
    try:
        if path.stat().st_mode & 0o7777 != FOLDER_MODE:
            return False
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def run_case(
    command: Path, case: Case, fixtures: Path, scratch: Scratch, trace: Trace | None = None
) -> Run:
    """Run one case in an empty HOME and working directory; kill its whole group on timeout.
    With `trace` (the patch's build), which changed lines it ran, from a folder of its own."""
    home, work = scratch.folders(case, fixtures)
    env = case_env(case, home, command.parent)
    with traced_command(command, case.argv, scratch.root, trace) as traced:
        done = run_confined(
            traced.cmd,
            writable=[*scratch_folders(home, work), *traced.writable],
            timeout=case.timeout,
            cwd=work,
            env=env,
            stdin=case.stdin,
        )
        coverage = traced.coverage()
    files = file_digests(work, case.compare)
    scratch.keep((home, work), case)
    run = (done.exit_code, done.timed_out, done.stdout, done.stderr, files, done.seconds)
    return Run(*run, coverage=coverage)


def normalized(case: Case, stream: Stream, name: str) -> Stream:
    """Apply the case's regex normalizers (within the cap: a capped stream keeps its digest)."""
    rules = [n for n in case.noise if n.regex is not None and name in n.streams]
    if not rules or stream.truncated:
        return stream
    data = stream.head
    for rule in rules:
        assert rule.regex is not None
        data = rule.regex.sub(rule.replace, data)
    return Stream(data, hashlib.sha256(data).hexdigest(), len(data))


def text_value(stream: Stream) -> Any:
    """Output as JSON: text when UTF-8 and within the cap; else an escaped head and a digest."""
    try:
        text = stream.head.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not stream.truncated:
        return text
    head = stream.head[:HEAD_SHOWN].decode("utf-8", "backslashreplace")
    flag = "$truncated" if stream.truncated else "$non_utf8"
    return {flag: True, "sha256": stream.sha256, "head": head, "bytes": stream.size}


def _json_doc(data: bytes, noise: Sequence[Noise]) -> Any:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return {"$invalid_json": str(exc)}
    for rule in noise:
        if rule.pointer is not None:
            doc = pointer_set(doc, rule.pointer, NOISE_MARK)
    return doc


def pointer_set(doc: Any, pointer: str, value: Any) -> Any:
    """Replace the value at `pointer` when it exists (noise); other documents are unchanged."""
    parent_pointer, _, last = pointer.rpartition("/")
    parent = pointer_get(doc, parent_pointer)
    key = last.replace("~1", "/").replace("~0", "~")
    if isinstance(parent, dict) and key in parent:
        parent[key] = value
    elif isinstance(parent, list) and key.isdigit() and int(key) < len(parent):
        parent[int(key)] = value
    return doc


def observe(case: Case, run: Run) -> dict[str, Any]:
    """The value of each compared field of one run (JSON-serialisable), after noise."""
    out, err = normalized(case, run.stdout, "stdout"), normalized(case, run.stderr, "stderr")
    doc: Any = {"$truncated": True, "sha256": out.sha256} if out.truncated else None
    if doc is None and any(
        s.startswith("stdout.json") and s != "stdout.jsonl" for s in case.compare
    ):
        doc = _json_doc(out.head, case.noise)
    values = {spec: field_value(spec, case, run, (out, err), doc) for spec in case.compare}
    if run.touched is not None:
        values[perturb.TOUCHED] = run.touched
    if run.reached is not None:
        values[perturb.REACHED] = list(run.reached)
        values[perturb.TYPED] = run.typed.decode("utf-8", "backslashreplace")
    return values


def field_value(spec: str, case: Case, run: Run, streams: tuple[Stream, Stream], doc: Any) -> Any:
    """One compared field of a run: `streams` are its stdout and stderr after noise, `doc`
    stdout's JSON document (when a spec reads it)."""
    out, err = streams
    stream = out if spec.startswith("stdout") else err
    if spec == "exit_code":
        return "timeout" if run.timed_out else run.exit_code
    if spec.startswith(POINTER_SPEC):
        return pointer_get(doc, spec[len(POINTER_SPEC) :])
    if spec.startswith(FILES_SPEC):
        glob = spec[len(FILES_SPEC) :]
        return {k: v for k, v in run.files.items() if fnmatchcase(k, glob)}
    if spec.endswith((".raw", ".additive")):  # the text itself; they differ in `holds`
        return text_value(stream)
    if spec.endswith(".sha256"):
        return stream.sha256
    if spec == "stdout.json":
        return doc
    return [_json_doc(line, case.noise) for line in out.head.splitlines()]  # stdout.jsonl


class Job(NamedTuple):
    """A command, a case, the perturbation it runs under (None: the gate's own environment),
    and, for the patch's build, what the run traces."""

    command: Path
    case: Case
    how: perturb.Perturbation | None = None
    trace: Trace | None = None
    # The parent's package modules, where the run records the functions it calls (reach.py).
    reach: Mapping[str, str] | None = None


def run_many(runs: Sequence[tuple[Path, Case]], fixtures: Path, label: str) -> list[Run]:
    """Run (command, case) pairs across all cores, each in its own directory; order is kept.
    A long run reports its progress on stderr."""
    return run_jobs([Job(command, case) for command, case in runs], fixtures, label)


def run_jobs(jobs: Sequence[Job], fixtures: Path, label: str) -> list[Run]:
    """run_many, with each job's perturbation (perturb.py) applied to its run."""
    progress = Progress(label, len(jobs), "invocations")
    done = []
    with (
        tempfile.TemporaryDirectory(prefix="oracle-case-") as root,
        ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool,
    ):
        scratch = Scratch(Path(root))

        def one(job: Job) -> Run:
            if job.how is None:
                return run_case(job.command, job.case, fixtures, scratch, job.trace)
            return run_perturbed(job, fixtures, Path(root))

        for run in pool.map(one, jobs):
            done.append(run)
            progress.advance()
    return done


def run_until(
    command: Path, cases: Sequence[Case], fixtures: Path, stop: Callable[[], bool], workers: int
) -> dict[str, Run]:
    """Each case's run by `command`, in order, `workers` at a time, until `stop()` says so: a
    run started then finishes, none starts after it; by case id."""
    pending = iter(cases)
    lock = threading.Lock()
    done: dict[str, Run] = {}
    with tempfile.TemporaryDirectory(prefix="oracle-case-") as root:
        scratch = Scratch(Path(root))

        def work() -> None:
            while not stop():
                with lock:
                    case = next(pending, None)
                if case is None:
                    return
                done[case.id] = run_case(command, case, fixtures, scratch)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(work) for _ in range(workers)]:
                future.result()
    return done


def run_perturbed(job: Job, fixtures: Path, root: Path) -> Run:
    """One run of the job's case under its perturbation, in a scene of its own
    (perturb.scene)."""
    command, case, how, trace, modules = job
    assert how is not None
    folder = Path(tempfile.mkdtemp(dir=root))
    setting = perturb.Setting(
        gate_env=case_env(case, folder / "home", command.parent),
        pinned=dict(case.env),
        cwd=case.cwd,
        fixtures=fixtures,
        bin_dir=command.parent,
        stdin_piped=bool(case.stdin),
    )
    # Where the launcher has mounts of its own, a user's HOME where they keep it, and the run
    # watched (its PID 1 serves the watch).
    watched = hides()
    shown = perturb.passwd_home() if watched else None
    stage = perturb.scene(how, setting, folder, shown)
    for key in case.env_remove:
        stage.env.pop(key, None)
    try:
        before = perturb.snapshot(stage.watched) if stage.watched else {}
        bound = tuple((str(home), str(shown)) for home, shown in stage.bind)
        started = (
            traced_command(command, case.argv, root, trace)
            if modules is None
            else reached_command(command, case.argv, root, modules)
        )
        with started as traced:
            done = run_confined(
                traced.cmd,
                writable=[*stage.writable, *traced.writable],
                timeout=case.timeout,
                cwd=stage.cwd,
                env=stage.env,
                stdin=case.stdin,
                reach=Reach(stage.tty, bind=bound, watch=watched),
            )
            coverage = traced.coverage()
            found = traced.found
            called = calls(read_reach(found, modules)) if found and modules is not None else None
        moved = perturb.touched(before, perturb.snapshot(stage.watched)) if stage.watched else None
        files = file_digests(stage.work, case.compare)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for made in stage.elsewhere:
            shutil.rmtree(made, ignore_errors=True)
    stdout = done.stdout if "terminal" not in how.names else perturb.terminal_output(done.stdout)
    reached = done.reached if watched else None
    run = (done.exit_code, done.timed_out, stdout, done.stderr, files, done.seconds, moved)
    return Run(*run, reached, done.typed, coverage, called)


def describe(run: Run) -> dict[str, Any]:
    return {
        "exit_code": run.exit_code,
        "signal": -run.exit_code if run.exit_code < 0 else None,
        "timed_out": run.timed_out,
        "seconds": round(run.seconds, 4),
        "stdout_bytes": run.stdout.size,
        "stderr_head": run.stderr.head[:400].decode("utf-8", "backslashreplace"),
    }


class BuiltCli(NamedTuple):
    tree: Path  # a worktree of the commit
    cli: Path  # its console script, in its build's environment
    came: str  # how that environment came: kept, built or changed (_gate/runs/kept_envs.py)
    build: str  # that build's digest (seal.build_digest), as a judgment keys its runs


@contextmanager
def built_cli(
    repo: Path, sha: str, wheelhouse: Path, requirements: str | Path, command: str
) -> Iterator[BuiltCli]:
    """A worktree of `sha` and its console script `command` in an offline build of it
    (`requirements` is relative to the tree), kept as a judgment keeps its base's; the
    worktree is gone afterwards."""
    with tempfile.TemporaryDirectory(prefix="oracle-cli-") as tmp, ExitStack() as held:
        tree = add_worktree(repo, sha, Path(tmp) / "tree")
        try:
            if not (tree / requirements).is_file():
                raise FailClosed(
                    f"{sha[:12]} has no {requirements}: the gate is not on that commit yet "
                    "(merge the branch that adds it into the base first)"
                )
            fresh, pins = Path(tmp) / "parent", tree / requirements  # a base's build
            env = base_env(
                repo, sha, tree, fresh, wheelhouse=wheelhouse, requirements=pins, held=held
            )
            folder = env.python.parent.parent
            yield BuiltCli(tree, bin_dir(folder) / command, env.came, build_digest(folder))
        finally:
            remove_worktree(repo, tree)
