"""The code under test, behind a process boundary: a pytest fixture in front, a worker behind.

The process that decides an oracle verdict (pytest and hypothesis, judged by the evidence
plugin) runs where the build under test is not installed. Every call into that build goes to
one long-lived worker started with the build's own interpreter: the fixture sends a function
name and JSON arguments, the worker calls `oracle/adapter.py` (from the base tree) and sends
back a JSON value or the exception's type and message. The worker can compute a wrong answer,
which the property then catches; it cannot touch an outcome, since no assertion and no report
is made in its process.

    def test_total(subject: Subject) -> None:
        assert subject.stack_discounts(100, []) == 100

Loaded by the gate as `-p _gate.plugin.subject` with `--subject-python` (the build's python) and
`--subject-adapter` (the adapter file); the worker is `worker.py` beside it.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from _gate.plugin.confine import command as confined
from _gate.plugin.worker import CALL_TIMEOUT, exported, load_adapter
from _gate.plugin.worker_scene import WorkerScene

STDERR_TAIL = 2000
TERM_GRACE = 2.0  # seconds the worker's launcher has to end what the worker started
WORKER = Path(__file__).with_name("worker.py")
TRACER = Path(__file__).with_name("change_trace.py")


class SubjectBroken(BaseException):
    """The worker died, hung or spoke garbage. A BaseException, so that neither
    `pytest.raises(Exception)` nor `except Exception` in a property can swallow it."""


class SubjectRaised(Exception):
    """The subject raised an exception type that is not a Python builtin."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name


def rebuild_exception(type_name: str, message: str) -> BaseException:
    """A builtin exception type comes back as itself, so `pytest.raises(ValueError)` works."""
    found = getattr(builtins, type_name, None)
    if isinstance(found, type) and issubclass(found, Exception):
        return found(message)
    return SubjectRaised(type_name, message)


class Worker:
    """One worker process per pytest run, restarted lazily after it breaks."""

    def __init__(
        self, python: Path, adapter: Path, timeout: float, require: bool, scene: WorkerScene | None
    ) -> None:
        self.python, self.adapter, self.timeout, self.require = python, adapter, timeout, require
        self.scene = scene
        self.cap = ""  # the judge's launcher level cap (confine.level_cap), its own default
        self.trace: dict[str, Any] | None = None  # change coverage's spec (--subject-trace)
        self.traced: Path | None = None  # the running worker's tracer folder
        self.proc: subprocess.Popen[bytes] | None = None
        self.buffer = b""
        self.stderr = bytearray()

    # No `assert` statements in this module: pytest rewrites plugins, and an assertion here
    # would count as a hit of the oracle test that called it.
    def start(self) -> subprocess.Popen[bytes]:
        # -I: no PYTHONPATH, no user site, no script directory on sys.path in the worker.
        # -B: no bytecode written, where the build is the trusted env itself (variance).
        # A perturbed run's scene (docs/perturbation.md) is a user's: Python as a user starts
        # it, in the scene's environment and working directory.
        bin_dir = self.python.parent
        scene = self.scene or WorkerScene.own(tempfile.mkdtemp(prefix="subject-"), bin_dir)
        flags = ["-I", "-B"] if scene.isolated else []
        worker = [str(self.python), *flags, str(WORKER), str(self.adapter), *self.worker_trace()]
        # Confined: it writes only its scratch, and whatever it spawns dies with it (it runs
        # under a PID 1 of its own, killed with the launcher). Same process group as pytest:
        # when the gate kills the run's group, the launcher goes with it.
        status = os.path.join(tempfile.mkdtemp(prefix="subject-status-"), "status")
        writable = [*scene.writable, *([str(self.traced)] if self.traced else [])]
        cmd = confined(worker, writable, status, self.require, cap=self.cap)
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=scene.env,
            cwd=scene.cwd,
        )
        self.buffer, self.stderr = b"", bytearray()
        threading.Thread(target=self._keep_stderr, args=(self.proc.stderr,), daemon=True).start()
        return self.proc

    def worker_trace(self) -> list[str]:
        """The worker's tracer spec, in a folder of its own it may write (its tracer deletes
        it as it starts): the run's, with a file of this worker's for the lines it runs, and
        the tracer's module beside it."""
        if self.trace is None:
            return []
        self.traced = Path(tempfile.mkdtemp(prefix="subject-trace-"))
        # The tracer beside its spec: the worker may see no other file of this folder's.
        shutil.copyfile(TRACER, self.traced / TRACER.name)
        spec = self.traced / "spec.json"
        spec.write_text(json.dumps({**self.trace, "out": str(self.traced / "out")}), "utf-8")
        return [str(spec)]

    def collect_trace(self) -> None:
        """What the ended worker's tracer wrote, added to the run's file the gate reads."""
        if self.trace is None or self.traced is None:
            return
        with contextlib.suppress(OSError):
            data = (self.traced / "out").read_bytes()
            with open(self.trace["out"], "ab") as out:
                out.write(data)
        shutil.rmtree(self.traced, ignore_errors=True)
        self.traced = None

    def _keep_stderr(self, pipe: IO[bytes]) -> None:
        while chunk := pipe.read1(4096):  # type: ignore[attr-defined]
            self.stderr += chunk
            del self.stderr[:-STDERR_TAIL]

    def close(self) -> None:
        """End the worker: SIGTERM first, so a launcher without a PID namespace (a subreaper)
        kills what the worker started before it goes; SIGKILL after TERM_GRACE seconds."""
        if self.proc is None:
            return
        if self.trace is not None:  # its input closed, it ends its tracer itself
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # type: ignore[union-attr]
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(TERM_GRACE)
        self.proc.terminate()
        try:
            self.proc.wait(TERM_GRACE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        self.collect_trace()

    def broken(self, why: str) -> SubjectBroken:
        code = self.proc.poll() if self.proc else None
        self.close()
        tail = self.stderr.decode("utf-8", "backslashreplace").strip().splitlines()
        detail = f"; its stderr ends: {tail[-1]}" if tail else ""
        return SubjectBroken(f"subject worker {why} (exit {code}){detail}")

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        proc = self.proc or self.start()
        call = {"fn": name, "args": args, "kwargs": kwargs, "evidence": Running.nodeid}
        request = json.dumps(call) + "\n"
        try:
            proc.stdin.write(request.encode("utf-8"))  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            raise self.broken("closed its input") from None
        answer = self._read_line()
        try:
            reply = json.loads(answer)
        except ValueError:
            raise self.broken(f"sent a line that is not JSON: {answer[:200]!r}") from None
        raised = reply.get("raised") if isinstance(reply, dict) else None
        if isinstance(raised, dict):
            raise rebuild_exception(str(raised.get("type")), str(raised.get("message")))
        if not isinstance(reply, dict) or "ok" not in reply:
            raise self.broken(f"sent an answer of the wrong shape: {answer[:200]!r}")
        return reply["ok"]

    def _read_line(self) -> bytes:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                if not selector.select(self.timeout):
                    raise self.broken(f"did not answer within {self.timeout:g} s")
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise self.broken("exited")
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


class InProcess:
    """The adapter imported into this process: only for measuring the worker's overhead."""

    def __init__(self, adapter: Path) -> None:
        self.module = load_adapter(adapter)

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return json.loads(json.dumps(exported(self.module, name)(*args, **kwargs)))

    def close(self) -> None:
        return None


class Subject:
    """`subject.NAME(*args)` calls the adapter's function NAME in the worker."""

    def __init__(self, backend: Worker | InProcess) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self._backend.call(name, args, kwargs)


# --- the pytest side (trusted) ----------------------------------------------------------------


class Running:
    """The test whose calls the worker answers now: the evidence its tracer names."""

    nodeid = ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    Running.nodeid = item.nodeid
    try:
        return (yield)
    finally:
        Running.nodeid = ""


# Hypothesis settings of every oracle run, whether or not a property remembers a decorator:
# derandomized (a verdict never depends on the draw), no example database (nothing carries
# over between runs or from the patch's tree), no deadline (a slow worker call is not a
# failure: --subject-timeout bounds it), bounded. A property's own @settings still applies on
# top: the oracle is the base's code, reviewed.
ORACLE_PROFILE: dict[str, Any] = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "max_examples": 100,
}


def pytest_configure(config: pytest.Config) -> None:
    try:
        from hypothesis import settings
    except ImportError:  # an oracle without properties: nothing to set
        return
    settings.register_profile("oracle-gate", **ORACLE_PROFILE)
    settings.load_profile("oracle-gate")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("oracle subject")
    group.addoption("--subject-python", help="python of the build the oracle judges")
    group.addoption("--subject-adapter", help="oracle/adapter.py of the base tree")
    group.addoption("--subject-timeout", type=float, default=CALL_TIMEOUT)
    group.addoption("--subject-sandbox", choices=("required", "best-effort"), default="required")
    group.addoption("--subject-cap", default="", help="the judge's launcher level cap")
    group.addoption("--subject-inprocess", action="store_true", help="benchmarks only")
    group.addoption("--subject-scene", help="a perturbed run's scene for the worker (JSON)")
    group.addoption("--subject-trace", help="change coverage's spec for the worker (JSON)")


def read_spec(name: str | None) -> dict[str, Any] | None:
    """The tracer's spec the gate wrote, read and removed before any worker starts (a worker
    confined below the namespaces level could read it)."""
    if not name:
        return None
    path = Path(name)
    spec: dict[str, Any] = json.loads(path.read_text("utf-8"))
    path.unlink()
    return spec


# Session-scoped, so hypothesis' @given may use it and one worker serves the whole run.
@pytest.fixture(scope="session")
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    option = request.config.option
    adapter = Path(option.subject_adapter or "")
    if not adapter.is_file():
        raise SubjectBroken(f"no adapter at {adapter}; add oracle/adapter.py on the base")
    if option.subject_inprocess:
        backend: Worker | InProcess = InProcess(adapter)
    elif option.subject_python:
        require = option.subject_sandbox == "required"
        scene = WorkerScene.read(Path(option.subject_scene)) if option.subject_scene else None
        python = Path(option.subject_python)
        backend = Worker(python, adapter, option.subject_timeout, require, scene)
        backend.cap = option.subject_cap
        backend.trace = read_spec(option.subject_trace)
    else:
        raise SubjectBroken("no --subject-python; run the oracle through the gate's scripts")
    yield Subject(backend)
    backend.close()
