"""The cassettes as pytest tests, for mutmut: one test per recorded case (scripts/strength.py).

Each test replays its case against the mutant ($MUTANT_UNDER_TEST, which mutmut sets in the
worker it forks for a mutant) and compares the fields the recording of the unmutated build holds
stable (record_cassettes.record). A case runs in a child forked from this worker, not in a new
interpreter. The child runs the mutant's code in the worker's confinement: strength.py starts
each mutmut run through the launcher (confine.py), and its recording names the level the
launcher reaches here; where it names none (no confinement, or the tests run by hand) every case
runs out of process through the launcher, as the judge runs it. The child takes the case's
environment, working directory, stdin and argv, imports the mutated package afresh (its
import-time code runs under the mutant, as in a new process) and calls the console script's
entry point. A fork costs milliseconds where a new interpreter costs tens of them, for every
case of every mutant. The fork is held to the recording: once per mutmut run the unmutated code
answers each case forked, and a case whose forked answer is not the recorded one (a CLI that
depends on what a fresh interpreter sets up) runs out of process, as the judge runs it, for
every mutant. mutmut learns which functions each test reaches in a pass of its own, in process,
with $MUTANT_UNDER_TEST=stats; there the case runs in this process, through the entry point, for
the calls to be seen.
A case that kills its mutant says so, and the strength plugin (strength_plugin.py) runs such
cases first for the mutants after it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, NoReturn, TextIO

import pytest

from _gate.runs.case_runs import Run, Scratch, case_env, file_digests, observe, run_case
from _gate.runs.cases import Case, holds, load_cases
from _gate.runs.process import OUTPUT_CAP, Sink, Stream, ends_within
from _gate.runs.reuse import keep, kept
from _gate.runs.sandbox import Sandbox
from _gate.strength.strength_plugin import killed_by

RECORDING: dict[str, Any] = json.loads(
    Path(os.environ["ORACLE_STRENGTH_RECORDING"]).read_text("utf-8")
)
CASES = {case.id: case for case in load_cases(Path(RECORDING["cases"]))}
# strength.py's mutmut runs, this one among them, are confined at the level it recorded: at
# the namespaces level, the cases this process starts are in its mounts.
Sandbox.inside = RECORDING.get("confined") == "namespaces"


@functools.cache
def console_script() -> EntryPoint | None:
    """The command's entry point; None when no one console script of that name is installed
    (a command that is not one: its cases run out of process)."""
    found = entry_points(group="console_scripts", name=RECORDING["command_name"])
    return next(iter(found)) if len(found) == 1 else None


def reach(case: Case, tmp: Path) -> None:
    """Run the case in this process, for mutmut's coverage pass: what it reaches, not what
    it answers, so every exit and exception is the case's own business."""
    script = console_script()
    if script is None:
        name = RECORDING["command_name"]
        raise LookupError(f"no one console script named {name!r} is installed here to reach")
    work = tmp / "work"
    if case.cwd:
        shutil.copytree(Path(RECORDING["fixtures"]) / case.cwd, work)
    else:
        work.mkdir()
    saved = (sys.argv, sys.stdin, os.getcwd())
    sys.argv = [RECORDING["command_name"], *case.argv]
    sys.stdin = io.TextIOWrapper(io.BytesIO(case.stdin), encoding="utf-8")
    out, err = io.TextIOWrapper(io.BytesIO()), io.TextIOWrapper(io.BytesIO())
    try:
        os.chdir(work)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            script.load()()
    except (SystemExit, Exception):  # what it answers is the replay's to judge
        pass
    finally:
        sys.argv, sys.stdin = saved[0], saved[1]
        os.chdir(saved[2])


def exit_status(code: object) -> int:
    """The status `sys.exit(code)` ends a process with, as the interpreter reports it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def fresh_imports(roots: list[str]) -> None:
    """Forget every module imported from the mutated code, and put it first on sys.path as
    PYTHONPATH would: the next import runs its module-level code under the mutant."""
    folders = tuple(os.path.join(os.path.abspath(root), "") for root in roots)
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if where and os.path.abspath(where).startswith(folders):
            del sys.modules[name]
    sys.path[:0] = roots


def stdio(fd: int, errors: str = "strict") -> TextIO:
    """One of the child's standard streams (0, 1, 2), open until it exits."""
    if fd == 0:
        return open(fd, encoding="utf-8", errors=errors, closefd=False)
    return open(fd, "w", encoding="utf-8", errors=errors, closefd=False)


def child(case: Case, env: dict[str, str], work: Path, files: tuple[Path, Path, Path]) -> NoReturn:
    """In the forked child: the case's process, then its exit status; never returns."""
    status = 70  # EX_SOFTWARE: the child's own setup failed
    with contextlib.suppress(BaseException):
        os.setpgid(0, 0)
        fresh_imports(env["PYTHONPATH"].split(os.pathsep))  # before chdir: paths may be relative
        os.chdir(work)
        os.environ.clear()
        os.environ.update(env)
        time.tzset()
        for fd, flags in enumerate((os.O_RDONLY, os.O_WRONLY, os.O_WRONLY)):
            opened = os.open(files[fd], flags)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin, sys.stdout, sys.stderr = stdio(0), stdio(1), stdio(2, "backslashreplace")
        sys.argv = [RECORDING["command_name"], *case.argv]
        script = console_script()
        assert script is not None  # forked only where there is one
        main: Callable[[], object] = script.load()
        try:
            status = exit_status(main())
        except SystemExit as exc:
            status = exit_status(exc.code)
        except BaseException:
            traceback.print_exc()
            status = 1
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    os._exit(status)


def captured(path: Path) -> Stream:
    sink = Sink(OUTPUT_CAP)
    sink.take(path.read_bytes())
    return sink.stream()


def forked(case: Case, env: dict[str, str], tmp: Path) -> Run:
    """One run of `case` in a child of this process (see the module's docstring), in the
    folders and environment run_case gives it: killed with its process group at the case's
    timeout."""
    tmp.mkdir()
    home, work = Scratch(tmp).folders(case, Path(RECORDING["fixtures"]))
    env = {**case_env(case, home, Path(RECORDING["command"]).parent), **env}
    files = (home.parent / "stdin", home.parent / "stdout", home.parent / "stderr")
    files[0].write_bytes(case.stdin)
    files[1].touch()
    files[2].touch()
    console_script()  # found once, in the worker: each child only imports it
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(case, env, work, files)
    # A fork runs only confined, on Linux 5.13+ (Landlock): its pidfd is there.
    timed_out = not ends_within(pid, case.timeout)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # at its timeout, or what it left running
    _, status = os.waitpid(pid, 0)
    seconds = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    streams = captured(files[1]), captured(files[2])
    return Run(code, timed_out, *streams, file_digests(work, case.compare), seconds)


def out_of_process(case: Case, env: tuple[tuple[str, str], ...], tmp: Path) -> Run:
    """The case as the judge runs it: the console script in a new interpreter."""
    tmp.mkdir()
    replayed = dataclasses.replace(case, env=(*case.env, *env))
    command, fixtures = Path(RECORDING["command"]), Path(RECORDING["fixtures"])
    return run_case(command, replayed, fixtures, Scratch(tmp))


def forks_as_recorded(case: Case, mutated: str, tmp: Path) -> bool:
    """Whether the unmutated code, forked, gives the recorded answer to `case`: found once per
    mutmut run and kept in its TMPDIR, which the worker of every mutant shares."""
    marks = Path(os.environ.get("TMPDIR") or tempfile.gettempdir()) / "oracle-forked"
    key = hashlib.sha256(case.id.encode()).hexdigest()
    found = kept(marks, key)
    if found is not None:
        return found.get("fork") is True
    if console_script() is None:
        return False
    unmutated = {"MUTANT_UNDER_TEST": "", "PYTHONPATH": mutated}
    seen = json.loads(json.dumps(observe(case, forked(case, unmutated, tmp))))
    same = all(seen.get(f) == value for f, value in RECORDING["expected"][case.id].items())
    keep(marks, key, {"fork": same})  # whole or not at all: workers side by side may write it
    return same


@pytest.mark.parametrize("case_id", sorted(RECORDING["expected"]))
def test_case_answers_as_recorded(case_id: str) -> None:
    # A folder of its own, not tmp_path: strength.py turns that plugin off (scripts/strength.py).
    with tempfile.TemporaryDirectory(prefix="oracle-case-") as name:
        answers_as_recorded(CASES[case_id], Path(name))


def answers_as_recorded(case: Case, tmp: Path) -> None:
    """The test of one case, in the folder `tmp`."""
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if mutant == "stats":
        reach(case, tmp)
        return
    mutated = os.environ["ORACLE_STRENGTH_MUTATED"]
    ours = {"MUTANT_UNDER_TEST": mutant, "PYTHONPATH": mutated}
    # A fork runs the mutant's code in this process's confinement: only where strength.py
    # found the launcher confining the mutmut run that started it.
    if RECORDING.get("confined") and forks_as_recorded(case, mutated, tmp / "unmutated"):
        run = forked(case, ours, tmp / "mutant")
    else:  # the fork does not answer as a new interpreter does: run it as the judge does
        run = out_of_process(case, tuple(ours.items()), tmp / "mutant")
    expected = RECORDING["expected"][case.id]  # the fields stable when recorded
    seen = json.loads(json.dumps(observe(case, run)))
    # As replay judges a field: a mutant that only adds to an additive field is not caught.
    changed = {f: seen.get(f) for f, value in expected.items() if not holds(f, value, seen.get(f))}
    if changed:
        killed_by(case.id, mutant)
    assert not changed, changed
