"""The launcher of the patch's code, on real processes: what a confined command can and cannot
do at each level this kernel reaches, and the one way the gate starts such a process."""

from __future__ import annotations

import ast
import errno
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from _gate.core.protocol import FailClosed
from _gate.plugin import confine
from _gate.plugin.confine import Reach
from _gate.runs.envs import build_env
from _gate.runs.sandbox import Sandbox, Server, probe_sandbox, run_confined

from tests.helpers import JOB_ENV as ENV
from tests.helpers import SCRIPTS, running

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

LEVELS = ("namespaces", "subreaper")


@pytest.fixture(params=LEVELS)
def level(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each level the launcher can take here, the lower one by capping it. The subreaper
    level cannot hide the machine's services (no mounts of its own): `sandbox: required`
    refuses it (test_a_subreaper_job_fails_closed_where_the_sandbox_is_required), so its
    jobs here run as under `best-effort`."""
    monkeypatch.setenv(confine.LEVEL_VARIABLE, request.param)
    assert probe_sandbox().level == request.param, "this kernel cannot reach the level"
    if request.param == "subreaper":
        monkeypatch.setattr(Sandbox, "required", False)
    return str(request.param)


def python(code: str) -> list[str]:
    return [sys.executable, "-I", "-c", textwrap.dedent(code)]


def test_a_confined_command_writes_its_scratch_and_nothing_else(tmp_path: Path, level: str) -> None:
    scratch, outside = tmp_path / "scratch", tmp_path / "outside"
    scratch.mkdir()
    outside.mkdir()
    (outside / "kept.txt").write_text("as made", "utf-8")
    code = f"""
        import os, pathlib
        pathlib.Path({str(scratch)!r}, "mine.txt").write_text("ok")
        os.makedirs({str(scratch / "deep" / "er")!r})
        for attempt in (
            lambda: pathlib.Path({str(outside)!r}, "new.txt").write_text("x"),
            lambda: open({str(outside / "kept.txt")!r}, "a").write("x"),
            lambda: os.truncate({str(outside / "kept.txt")!r}, 0),
            lambda: os.remove({str(outside / "kept.txt")!r}),
            lambda: os.rename({str(outside / "kept.txt")!r}, {str(scratch / "stolen")!r}),
            lambda: os.symlink("/etc/passwd", {str(outside / "link")!r}),
            lambda: os.mkdir({str(outside / "dir")!r}),
        ):
            try:
                attempt()
                print("WROTE")
            except OSError:
                print("refused")
    """
    done = run_confined(python(code), writable=[scratch], timeout=30, env=ENV)
    assert done.exit_code == 0, done.stderr.tail()
    assert done.confinement == level
    assert done.stdout.head.decode().split() == ["refused"] * 7
    assert (scratch / "mine.txt").read_text() == "ok"
    assert (scratch / "deep" / "er").is_dir()
    assert sorted(p.name for p in outside.iterdir()) == ["kept.txt"]
    assert (outside / "kept.txt").read_text("utf-8") == "as made"


@pytest.mark.parametrize(
    "escape",
    [
        # a classic daemon: fork, setsid, fork again
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n",
        # a new session through subprocess, its pipes closed
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL)\n",
        # a child that ignores the signals a polite cleanup sends
        "if os.fork() == 0:\n    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    signal.signal(signal.SIGHUP, signal.SIG_IGN)\n    time.sleep(60)\n",
    ],
    ids=["double-fork", "new-session", "ignores-signals"],
)
def test_a_process_left_running_fails_closed_named_and_is_killed(
    tmp_path: Path, level: str, escape: str
) -> None:
    code = "import os, signal, subprocess, sys, time\n" + escape
    with pytest.raises(FailClosed, match="outlived its command") as caught:
        run_confined([sys.executable, "-I", "-c", code], writable=[tmp_path], timeout=30, env=ENV)
    assert "python" in str(caught.value)  # named by its command line
    assert not running("sleep(60)")


def test_a_command_that_exits_with_its_children_leaves_no_survivor(
    tmp_path: Path, level: str
) -> None:
    """Children that end with their parent (a pool, a resource tracker) are no survivors."""
    code = """
        import multiprocessing, subprocess, sys
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            print(sum(pool.map(abs, [-1, -2, 3])))
    """
    done = run_confined(python(code), writable=[tmp_path], timeout=60, env=tmp_env(tmp_path))
    assert (done.exit_code, done.stdout.head.strip()) == (0, b"6"), done.stderr.tail()


def test_forked_processes_each_get_their_own_answers_from_the_launcher(tmp_path: Path) -> None:
    """mutmut forks a worker per mutant from a process that has already run confined jobs:
    each fork's jobs get their own status and output, never a sibling's."""
    echo = [sys.executable, "-I", "-c", "import sys; print(sys.argv[1])"]
    assert run_confined([*echo, "parent"], writable=[tmp_path], timeout=60, env=ENV).exit_code == 0
    children = []
    for child in range(3):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports by its exit status
            code = 0
            try:
                for turn in range(10):
                    said = f"{child}-{turn}"
                    done = run_confined([*echo, said], writable=[tmp_path], timeout=60, env=ENV)
                    code = code or int(done.stdout.head.strip() != said.encode())
            except BaseException:
                code = 3
            os._exit(code)
        children.append(pid)
    assert [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children] == [0, 0, 0]


def test_each_launchs_status_folder_goes_with_it_even_in_a_child_that_skips_exit_handlers(
    tmp_path: Path,
) -> None:
    """mutmut's forked workers end with os._exit, which runs no exit handler: the folder a
    launch's status is written in is there while its job runs, and gone when it returns."""
    temp = tmp_path / "temp"
    temp.mkdir()
    code = f"""
        import os, sys
        from _gate.runs.sandbox import run_confined
        look = [sys.executable, "-c", "import os; print(*os.listdir({str(temp)!r}))"]
        done = run_confined(look, writable=[], timeout=60, env=dict(os.environ))
        print(done.stdout.head.decode().strip())
        if os.fork() == 0:
            run_confined(look, writable=[], timeout=60, env=dict(os.environ))
            os._exit(0)
        os.wait()
    """
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS), "TMPDIR": str(temp)}
    command = [sys.executable, "-c", textwrap.dedent(code)]  # not isolated: PYTHONPATH holds
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    seen = done.stdout.split()
    assert len(seen) == 1, done.stdout
    assert seen[0].startswith("oracle-confine-"), done.stdout
    assert sorted(temp.iterdir()) == []


def tmp_env(tmp: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp), "HOME": str(tmp)}


def test_no_network_for_a_confined_command(tmp_path: Path, level: str) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=5)
                print("CONNECTED")
            except OSError as exc:
                print("refused", type(exc).__name__)
        """
        done = run_confined(python(code), writable=[tmp_path], timeout=30, env=ENV)
    assert done.stdout.head.startswith(b"refused"), done.stdout.head


def test_a_confined_command_cannot_signal_the_judge(tmp_path: Path, level: str) -> None:
    import os

    code = f"""
        import os, signal
        try:
            os.kill({os.getpid()}, signal.SIGTERM)
            print("SIGNALLED")
        except OSError as exc:
            print("refused", type(exc).__name__)
    """
    done = run_confined(python(code), writable=[tmp_path], timeout=30, env=ENV)
    assert done.stdout.head.startswith(b"refused"), done.stdout.head


# How a case's command is started in the launcher's job: with pipes, or with its stdout (and
# its stdin) on a terminal whose other end its supervisor keeps and relays (the terminal
# perturbation: confine.Terminal, its posix_spawn or fork in a session of its own).
THROUGH: dict[str, tuple[int, ...]] = {"launcher": (), "terminal": (1,), "terminal-stdin": (0, 1)}


@pytest.mark.parametrize("through", list(THROUGH))
def test_a_confined_command_cannot_reach_its_launcher_or_the_judge(
    tmp_path: Path, level: str, through: str
) -> None:
    """From inside the launcher's job: its parent (the job's supervisor, which relays its
    terminal where it has one), the launcher's server (the process sandbox.Server starts,
    which forks every job) and the judge cannot be killed, traced or read, the job holds no
    socket to the server, and the status the judge trusts cannot be written."""
    import os

    code = f"""
        import ctypes, glob, os, signal, stat
        def attempt(name, act):
            try:
                act()
                print(name.replace(" ", "-"), "DONE")
            except OSError:
                print(name.replace(" ", "-"), "refused")
        def ancestors(pid=os.getpid()):
            while pid > 1:
                pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
                yield pid
        def kill_servers():  # its own supervisor, its parent, is tried below
            found = []
            mine = set(ancestors())
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    argv = open(f"/proc/{{pid}}/cmdline", "rb").read().split(b"\\0")
                except OSError:
                    continue
                if b"--serve" in argv and int(pid) not in mine:
                    found.append(int(pid))
            if not found:
                print("server unseen")  # its own /proc: a PID namespace of its own
            else:
                attempt("server", lambda: [os.kill(pid, signal.SIGKILL) for pid in found])
        def sockets():
            for fd in os.listdir("/proc/self/fd"):
                try:
                    if stat.S_ISSOCK(os.fstat(int(fd)).st_mode):
                        return
                except OSError:
                    pass
            raise PermissionError("no socket held")
        def forge():  # in every launch's status folder in sight, its own among them
            folders = glob.glob(os.path.join({tempfile.gettempdir()!r}, "oracle-confine-*"))
            if not folders:  # hidden: the job's /tmp is its own (namespaces)
                raise PermissionError("no status folder in sight")
            refused = 0
            for folder in folders:
                try:
                    open(os.path.join(folder, "forged"), "w")
                except OSError:
                    refused += 1
            if refused == len(folders):
                raise PermissionError("every status folder")
        attempt("status", forge)
        attempt("memory", lambda: open("/proc/{os.getpid()}/mem", "rb").read(1))
        attempt("environ", lambda: open("/proc/{os.getpid()}/environ", "rb").read(1))
        attempt("judge", lambda: os.kill({os.getpid()}, signal.SIGKILL))
        # Its supervisor (PID 1 of its namespaces, which shares its Landlock domain there):
        # not traced, its memory and its fds (the status file among them) not opened.
        libc = ctypes.CDLL(None, use_errno=True)
        def trace():
            if libc.ptrace(16, os.getppid(), None, None) != 0:  # PTRACE_ATTACH
                raise OSError(ctypes.get_errno(), "ptrace")
        attempt("trace", trace)
        attempt("its memory", lambda: open(f"/proc/{{os.getppid()}}/mem", "rb").read(1))
        def reopen(folder=f"/proc/{{os.getppid()}}/fd"):
            return [os.open(f"{{folder}}/{{fd}}", os.O_WRONLY) for fd in os.listdir(folder)]
        attempt("its fds", reopen)
        kill_servers()
        attempt("socket", sockets)
        os.kill(os.getppid(), signal.SIGKILL)  # its supervisor: ignored, or refused
    """
    tty = THROUGH[through]
    done = run_confined(python(code), writable=[tmp_path], timeout=30, env=ENV, reach=Reach(tty))
    lines = done.stdout.head.decode().replace("\r", "").splitlines()  # a pty ends lines CR LF
    said = dict(line.split() for line in lines)
    # The command holds no capability at either level, even as root (this machine runs the
    # suite as root): the judge's environment is refused it, as its memory is.
    expected = {"status": "refused", "memory": "refused", "environ": "refused", "judge": "refused"}
    expected |= {"trace": "refused", "its-memory": "refused", "its-fds": "refused"}
    # At the subreaper level the server is in sight, and its kill is refused.
    expected |= {"server": "refused" if level == "subreaper" else "unseen", "socket": "refused"}
    assert said == expected, done.stdout.head
    assert done.confinement == level  # the supervisor lived to write the status
    # The job went through the server, which still serves the next one.
    assert Server.sockets.get(level) is not None
    again = run_confined(python("print('served')"), writable=[tmp_path], timeout=30, env=ENV)
    assert (again.stdout.head, again.confinement) == (b"served\n", level)


def test_a_terminal_job_has_a_terminal_of_its_own_and_never_the_users(
    tmp_path: Path, level: str
) -> None:
    """The terminal perturbation's job: its stdin and stdout a terminal of 80 columns that is
    its controlling one, at end of input at once, relayed to the judge. A terminal of the
    user's (the one the judge runs in) holds typed input and shows the screen: in a PID 1's
    own devpts the command can neither read the one nor write the other. At the subreaper
    level the machine's terminals stay in reach (docs/confinement.md says so)."""
    import os

    users, theirs = os.openpty()
    os.write(users, b"typed secret\n")  # input waiting on the user's terminal
    code = f"""
        import os, sys
        print("tty", sys.stdin.isatty(), sys.stdout.isatty(), os.get_terminal_size().columns)
        print("input", repr(sys.stdin.read()))
        with open("/dev/tty", "w") as own:
            own.write("controlling yes\\n")
        def reach(flags):
            try:
                fd = os.open({os.ttyname(theirs)!r}, flags | os.O_NONBLOCK | os.O_NOCTTY)
            except OSError:
                return "refused"
            try:
                if flags == os.O_WRONLY:
                    os.write(fd, b"SPOOFED verdict: merge\\n")
                return repr(os.read(fd, 64))
            except OSError:
                return "nothing"
        print("read", reach(os.O_RDONLY))
        reach(os.O_WRONLY)
    """
    done = run_confined(python(code), writable=[tmp_path], timeout=30, env=ENV, reach=Reach((0, 1)))
    os.set_blocking(users, False)
    try:
        shown = os.read(users, 4096)
    except BlockingIOError:
        shown = b""
    os.close(users)
    os.close(theirs)
    lines = done.stdout.head.decode().replace("\r", "").splitlines()
    said = dict(line.split(" ", 1) for line in lines)
    assert done.exit_code == 0, done.stderr.head
    assert said["tty"] == "True True 80", said
    assert said["input"] == "''", said
    assert said["controlling"] == "yes", said
    # The user's terminal's name, in the job's own devpts, is at most a terminal of the job's.
    reached = ("secret" in said["read"], b"SPOOFED" in shown)
    assert reached == ((False, False) if level == "namespaces" else (True, True)), said


def test_required_refuses_to_run_unconfined_naming_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(confine.LEVEL_VARIABLE, "none")
    marker = tmp_path / "ran"
    opens = python(f"open({str(marker)!r}, 'w')")
    with pytest.raises(FailClosed, match=r"cannot confine .*ORACLE_SANDBOX_LEVEL.*best-effort"):
        run_confined(opens, writable=[tmp_path], timeout=30, env=ENV)
    assert not marker.exists()  # it never ran


def test_best_effort_runs_unconfined_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(confine.LEVEL_VARIABLE, "none")
    monkeypatch.setattr(Sandbox, "required", False)
    outside = tmp_path / "outside"
    done = run_confined(python(f"open({str(outside)!r}, 'w')"), writable=[], timeout=30, env=ENV)
    assert (done.exit_code, done.confinement) == (0, "none")
    assert outside.exists()


def test_a_level_that_is_not_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(confine.LEVEL_VARIABLE, "off")
    with pytest.raises(FailClosed, match="cannot confine"):
        run_confined(python("pass"), writable=[], timeout=30, env=ENV)


def test_a_command_that_cannot_start_fails_closed_naming_it(tmp_path: Path, level: str) -> None:
    with pytest.raises(FailClosed, match=r"no-such-program could not be confined"):
        run_confined([str(tmp_path / "no-such-program")], writable=[tmp_path], timeout=30, env=ENV)


# Modules that may start a process, and why each start runs no code of a tree under judgment
# unconfined: confine.py is the launcher (its forks and execs, and the posix_spawn of a PID 1
# that confined itself first, with or without a terminal on the command's fds, are the
# confined path itself: tests above and below show what a command it starts can and cannot
# reach, its PID 1 among them: test_a_confined_command_cannot_reach_its_launcher_or_the_judge
# for each way it starts one, and test_a_terminal_job_has_a_terminal_of_its_own_and_never_
# the_users), process.py
# runs trusted commands (run_group), sandbox.py starts the launcher's server (which runs no
# code of a tree; a job it forks cannot reach it: test_a_confined_command_cannot_reach_its_
# launcher_or_the_judge) and, where there is none, the launcher itself (run_confined),
# subject.py starts the worker through the launcher, git.py runs git, wheelhouse.py runs pip
# download (no build), judge/runner.py runs the base's own step scripts, staged_inventory.py
# count_asserts.py, strength_cassettes.py forks a case from mutmut's worker, which strength.py
# runs through the launcher (a mutant's code runs confined with the whole mutmut run).
SPAWNERS = {
    "_gate/strength/strength_cassettes.py",
    "_gate/plugin/confine.py",
    "_gate/runs/process.py",
    "_gate/runs/sandbox.py",
    "_gate/plugin/subject.py",
    "_gate/runs/git.py",
    "wheelhouse.py",
    "_gate/judge/runner.py",
    "staged_inventory.py",
}
# The callers of run_group, the unconfined path: a venv and the tools from the wheelhouse
# (envs.py), the oracle's own pytest in the oracle environment (pytest_run.py), the gate's
# own interpreter on a fixed program under the clock library, to see it shift the clock
# (perturb.py), and the launcher, which confines what it runs (sandbox.py).
UNCONFINED_CALLERS = {
    "_gate/runs/sandbox.py",
    "_gate/runs/envs.py",
    "_gate/runs/pytest_run.py",
    "_gate/runs/perturb.py",
}


def starts_processes(tree: ast.AST) -> set[str]:
    """The process-starting calls in a module: subprocess.*, os.exec*/spawn*/system/popen."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            name = f"{node.value.id}.{node.attr}"
            starts = node.value.id == "subprocess" and node.attr in {
                "run",
                "Popen",
                "call",
                "check_call",
                "check_output",
                "getoutput",
            }
            starts |= node.value.id == "os" and node.attr.startswith(
                ("exec", "spawn", "system", "popen", "posix_spawn", "fork")
            )
            if starts:
                found.add(name)
    return found


def modules() -> list[Path]:
    return sorted([*SCRIPTS.glob("*.py"), *(SCRIPTS / "_gate").rglob("*.py")])


def test_only_the_known_modules_start_processes() -> None:
    starting = {
        p.relative_to(SCRIPTS).as_posix()
        for p in modules()
        if starts_processes(ast.parse(p.read_bytes()))
    }
    assert starting == SPAWNERS


def test_the_unconfined_runner_has_only_the_known_callers() -> None:
    callers = {
        p.relative_to(SCRIPTS).as_posix()
        for p in modules()
        if any(
            isinstance(node, ast.Name | ast.Attribute)
            and getattr(node, "id", getattr(node, "attr", "")) == "run_group"
            for node in ast.walk(ast.parse(p.read_bytes()))
        )
    }
    assert callers == UNCONFINED_CALLERS


BACKEND = """
import os, pathlib
from flit_core import buildapi

def _work():
    # What an honest backend writes: objects beside its sources, a cache in HOME, temp files.
    pathlib.Path("build").mkdir(exist_ok=True)
    pathlib.Path("build", "tiny.o").write_text("compiled")
    cache = pathlib.Path(os.environ["HOME"], ".cache", "tiny")
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "hits").write_text("1")
    import tempfile
    with tempfile.NamedTemporaryFile() as scratch:
        scratch.write(b"x")
    try:  # and what a hostile one would
        pathlib.Path(OUTSIDE).write_text("escaped")
    except OSError:
        pass

def build_wheel(*args, **kwargs):
    _work()
    return buildapi.build_wheel(*args, **kwargs)

get_requires_for_build_wheel = buildapi.get_requires_for_build_wheel
prepare_metadata_for_build_wheel = buildapi.prepare_metadata_for_build_wheel
build_sdist = buildapi.build_sdist
"""

PYPROJECT = """
[build-system]
requires = ["flit_core>=3.9,<5"]
build-backend = "backend"
backend-path = ["_build"]

[project]
name = "tiny"
version = "0.1.0"
description = "a package whose backend writes beside its sources"

[tool.flit.module]
name = "tiny"
"""


def test_a_build_writes_its_scratch_from_a_copy_of_the_tree_and_nothing_else(
    tmp_path: Path, wheelhouse: Path
) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside.txt"
    (tree / "_build").mkdir(parents=True)
    (tree / "tiny").mkdir()
    (tree / "tiny" / "__init__.py").write_text("VALUE = 42\n", "utf-8")
    (tree / "_build" / "backend.py").write_text(f"OUTSIDE = {str(outside)!r}\n" + BACKEND)
    (tree / "pyproject.toml").write_text(PYPROJECT, "utf-8")
    before = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*"))
    requirements = SCRIPTS / "requirements-judge.txt"
    python = build_env(tree, tmp_path / "env", wheelhouse, requirements)
    cmd: list[str | Path] = [python, "-c", "import tiny; print(tiny.VALUE)"]
    done = run_confined(cmd, writable=[], timeout=60, env=ENV)
    assert done.stdout.head.strip() == b"42"
    assert not outside.exists()
    after = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*"))
    assert after == before  # built from a copy: the tree stays as checked out


def test_a_command_killed_on_its_timeout_takes_what_it_started_with_it(
    tmp_path: Path, level: str
) -> None:
    code = """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(61)"],
                         start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        time.sleep(60)
    """
    done = run_confined(python(code), writable=[tmp_path], timeout=2, env=ENV)
    assert done.timed_out
    assert not running("sleep(61)")


# Reaches for every service of the machine it is told of: a pathname unix socket (connect, and
# a datagram sent to it), and an abstract one; prints what it reached.
SERVICES = """
import socket, sys
for path in map(bytes.fromhex, sys.argv[1:]):
    path = path.decode()
    for kind, act in (
        ("stream", lambda s, a: s.connect(a)),
        ("datagram", lambda s, a: s.sendto(b"hi", a)),
    ):
        family = socket.SOCK_STREAM if kind == "stream" else socket.SOCK_DGRAM
        address = (path if kind == "stream" else path + ".d").replace("@", "\\0", 1)
        with socket.socket(socket.AF_UNIX, family) as s:
            try:
                act(s, address)
                print("REACHED", kind, path)
            except OSError as exc:
                print("refused", kind, path, exc.errno)
"""


@contextmanager
def services(tmp: Path) -> Iterator[list[str]]:
    """Unix sockets a machine's services listen on (stream and datagram at each path): in a
    folder of the temporary directory, under /run, and an abstract one."""
    host = Path(tempfile.mkdtemp(prefix="host-"))
    paths = [str(host / "engine.sock"), f"/run/oracle-test-{os.getpid()}.sock"]
    names = [*paths, f"@oracle-test-{os.getpid()}"]
    held = []
    try:
        for name in names:
            for family in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                server = socket.socket(socket.AF_UNIX, family)
                where = name.replace("@", "\0", 1) + ("" if family == socket.SOCK_STREAM else ".d")
                server.bind(where)
                if family == socket.SOCK_STREAM:
                    server.listen()
                held.append(server)
        yield names
    finally:
        for server in held:
            server.close()
        for path in paths:
            for suffix in ("", ".d"):
                Path(path + suffix).unlink(missing_ok=True)
        shutil.rmtree(host, ignore_errors=True)


def test_a_namespaced_job_reaches_no_service_of_the_machine(tmp_path: Path) -> None:
    """Its /tmp, /var/tmp and /run are empty mounts of its own but for what it names (its
    scratch among them); an abstract socket is out of its Landlock domain (issue 48)."""
    with services(tmp_path) as names:
        # Named in hex: a path a job names is bound back into its view (confine.Job.kept).
        cmd = [sys.executable, "-I", "-c", SERVICES, *(name.encode().hex() for name in names)]
        unconfined = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        done = run_confined(cmd, writable=[tmp_path], timeout=30, env=ENV)
    said = done.stdout.head.decode()
    assert unconfined.count("REACHED") == 6, unconfined  # each is there to reach
    assert "REACHED" not in said, said
    assert said.count("refused") == 6
    assert done.confinement == "namespaces"
    listing = run_confined(
        [sys.executable, "-I", "-c", "import os; print(sorted(os.listdir('/run')))"],
        writable=[tmp_path],
        timeout=30,
        env=ENV,
    )
    assert listing.stdout.head.decode().strip() == "[]"  # nothing of the machine's /run


def test_a_subreaper_job_fails_closed_where_the_sandbox_is_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without mounts of its own a job could reach the machine's services, which Landlock
    cannot refuse: `sandbox: required` says so and what to do; `best-effort` runs it."""
    monkeypatch.setenv(confine.LEVEL_VARIABLE, "subreaper")
    marker = tmp_path / "ran"
    code = python(f"open({str(marker)!r}, 'w')")
    with pytest.raises(FailClosed, match=r"cannot hide its services .*subreaper level"):
        run_confined(code, writable=[tmp_path], timeout=30, env=ENV)
    assert not marker.exists()  # it never ran
    monkeypatch.setattr(Sandbox, "required", False)
    assert run_confined(code, writable=[tmp_path], timeout=30, env=ENV).confinement == "subreaper"
    assert marker.exists()


def test_jobs_reach_no_abstract_socket_of_another_job(tmp_path: Path) -> None:
    """The jobs of one launcher share its network namespace, where abstract sockets live:
    Landlock's scope keeps each job's out of the others' reach (ABI 6)."""
    name = f"oracle-test-job-{os.getpid()}"
    listen = f"""
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.bind("\\0{name}")
        s.listen()
        s.settimeout(3)
        try:
            s.accept()
            print("ACCEPTED")
        except OSError:
            print("alone")
    """
    dial = f"""
        import socket, time
        for _ in range(100):
            try:
                socket.socket(socket.AF_UNIX).connect("\\0{name}")
                print("REACHED")
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
            except OSError as exc:
                print("refused", exc.errno)
                break
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(run_confined, python(listen), writable=[tmp_path], timeout=30, env=ENV)
        second = run_confined(python(dial), writable=[tmp_path], timeout=30, env=ENV)
        assert second.stdout.head.decode().split() == ["refused", str(errno.EPERM)]
        assert first.result().stdout.head.decode().strip() == "alone"
