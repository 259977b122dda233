"""The launcher of the patch's code: a process that cannot outlive its command, write outside
its scratch, reach the network, or signal the judge.

    python -I -S confine.py --status FILE [--write DIR]... [--tty FD]... [--see PATH]...
        [--bind DIR AS]... [--watch] [--cap LEVEL] [--require] -- CMD...

It is a file of its own, the standard library only, so the judge and the subject plugin (in
a pytest run where no other module of scripts/ is importable) start it by path. Two levels,
the first the kernel allows (`status` in the report names it):

- `namespaces`: new user, PID, network and mount namespaces. The command runs under a PID 1
  of its own, which, when the command exits, names and kills whatever it left running (the
  kernel kills the rest when PID 1 ends); the network namespace has no interface but a
  loopback that is down. Needs unprivileged user namespaces.
- `subreaper`: no namespaces; the launcher is a child subreaper, so every orphan of the
  command becomes its child, found and killed when the command exits; Landlock's TCP rules
  stand in for the network namespace (TCP only) and its signal scope keeps the command from
  killing the launcher. Needs Landlock ABI 6 (Linux 6.12).

At both levels, Landlock (Linux 5.13+, unprivileged) makes the whole filesystem read-only
but for the `--write` folders and /dev, so the command cannot write the status file: at the
`subreaper` level Landlock is applied in the command's own process, at `namespaces` in its
PID 1, which opened the status file before and keeps what the command lacks (`Job.spawn`).
With neither level the command runs unconfined (`none`); with `--require`, below
`namespaces` it does not run at all (exit 125).

With `--tty FD` (1, or 0 and 1: the terminal perturbation), those fds of the command are a
pseudo-terminal of 80 columns by 24 lines that does not echo, its controlling terminal, in a
session of its own; the launcher copies what the command writes there to its own stdout, and
gives a terminal stdin end of input at once (a user who typed nothing and pressed Ctrl-D).

At the `namespaces` level PID 1 also hides the machine's services: `/tmp`, `/var/tmp` and
`/run` are empty mounts of the job's own but for what it names (`Job.kept`, and `--see PATH`),
and `--bind DIR AS` shows a folder at another path (a user's HOME where the user database
keeps it). With `--watch`, PID 1 watches the command's system calls (syscall_watch.py): where
it tried to reach, what it typed into a terminal.

The status file, written once the command's processes are gone, has one `key value` line
each: `level`, `exit`, `missing` (what a higher level needs), `refused` (why it did not run),
`hidden` and `watched` (yes or no), `typed` (hex), a `reached` line per address and a
`survivor` line per process the command left running, its command line hex-encoded (a
command line may hold any byte). Exit code: the command's own (128+N for a signal), or 125
when it did not run (with `--require`, at a level that cannot confine it: below
`namespaces`, which alone hides the machine's services).
"""

from __future__ import annotations

# This file starts before every case: it imports only what it must (not typing, not signal,
# whose enum import alone costs more than the rest).
import ctypes
import errno
import os
import sys
import time

TYPE_CHECKING = False  # typing's own costs an import: mypy reads this one alike
if TYPE_CHECKING:
    from types import ModuleType

FILE = os.path.abspath(__file__)
NOT_RUN = 125
LEVELS = ("none", "subreaper", "namespaces")
LEVEL_VARIABLE = "ORACLE_SANDBOX_LEVEL"
SIGKILL = 9
SURVIVORS_NAMED = 20  # the status names this many (a fork bomb leaves thousands)
SURVIVOR_GRACE = 1.0  # seconds a child may take to exit after the command (a resource tracker)

# Linux's unified syscall numbers for Landlock (the same on x86_64 and aarch64).
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
MS_REC, MS_PRIVATE, MS_BIND, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x4000, 0x40000, 0x1000, 2, 4, 8
MNT_DETACH = 2
MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 0x1

# Every filesystem right that changes something, per ABI: write, remove, make, (2) refer,
# (3) truncate. Reading and executing stay unhandled, so they are allowed everywhere.
WRITE_RIGHTS = {1: 0b1_1111_1111_0010, 2: 0b11_1111_1111_0010, 3: 0b111_1111_1111_0010}
TCP_RIGHTS = 0b11  # bind, connect (ABI 4)
SCOPES = 0b11  # abstract UNIX sockets and signals outside the domain (ABI 6)
# Devices a command may write (a file rule allows writing it, never making or removing
# anything beside it): the sinks and sources every program uses, and terminals.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts")
FILE_RIGHTS = 0b10  # write (ABI 1); truncate is added where the ABI has it
SHM = "/dev/shm"  # POSIX shared memory (multiprocessing's semaphores): private at PID 1
# Where a machine's services keep their sockets (a container engine's, a session bus, an
# agent's, a database's): each is an empty mount of the job's own at PID 1, read-only, but
# for what the job names (Job.kept), bound back where it was.
HIDDEN = ("/tmp", "/var/tmp", "/run", "/var/run")
MS_REMOUNT, MS_RDONLY = 0x20, 1
PTS, PTMX = b"/dev/pts", b"/dev/ptmx"  # terminals: an instance of its own at PID 1
ROWS, COLUMNS = 24, 80  # the size of a job's terminal
EOF = b"\x04"  # a terminal's end-of-input character in canonical mode


class Attr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


libc = ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where there is none (not Linux, disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    version = libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), RULESET_VERSION)
    return max(0, int(version))


def landlock(writable: list[str], abi: int, isolate: bool) -> None:
    """Restrict this process and its children for good: write only beneath `writable`, no
    abstract UNIX socket and no signal outside the domain (ABI 6: the jobs of one launcher
    share a network namespace, whose abstract sockets another job could bind), and, when
    `isolate` (no network namespace), no TCP."""
    rights = WRITE_RIGHTS[min(abi, 3)]
    attr = Attr(rights, TCP_RIGHTS if isolate else 0, SCOPES if abi >= 6 else 0)
    # An older kernel takes the whole struct as long as the fields it does not know are 0.
    ruleset = libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(24), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    device = FILE_RIGHTS | (rights & (1 << 14))
    rules = [(folder, rights) for folder in (*writable, SHM)] + [(d, device) for d in DEVICES]
    for path, allowed in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a path that is not there cannot be written either
        rule = PathBeneath(allowed, fd)
        if libc.syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
        os.close(fd)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs")
    if libc.syscall(RESTRICT_SELF, ruleset, 0) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(ruleset)


def enter_namespaces(flags: int) -> bool:
    """New namespaces (`flags` holds CLONE_NEWUSER), this user mapped to itself; False where
    the kernel refuses (no unprivileged user namespaces, or an AppArmor rule against them)."""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(flags) != 0:
        return False
    try:
        write("/proc/self/setgroups", b"deny")
        write("/proc/self/uid_map", f"{uid} {uid} 1".encode())
        write("/proc/self/gid_map", f"{gid} {gid} 1".encode())
    except OSError:
        return False  # a restricted namespace: no capability in it
    return True


def private_mounts(job: Job) -> bool:
    """As PID 1: a mount namespace of the job's own, where every mount is read-only but the
    `writable` folders (bound onto themselves, writable), the machine's folders of services
    hidden (hide_services), with a /proc of this PID namespace (survivors are named; the
    command sees no process but its own), an empty /dev/shm and terminals of its own.
    Read-only mounts refuse what Landlock has no right for: chmod, chown, utime. Devices stay
    writable on a read-only mount. False where the kernel refuses a step (Landlock still
    holds the writes then)."""
    if libc.unshare(CLONE_NEWNS) != 0:
        return False
    done = libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
    done = done and set_mount(b"/", MOUNT_ATTR_RDONLY, 0)
    done = done and hide_services(job)
    for folder in job.writable:
        path = folder.encode()
        bound = libc.mount(path, path, None, MS_BIND | MS_REC, None) == 0
        done = done and bound and set_mount(path, 0, MOUNT_ATTR_RDONLY)
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    done = done and libc.mount(b"tmpfs", SHM.encode(), b"tmpfs", flags, b"mode=1777") == 0
    done = done and int(libc.mount(b"proc", b"/proc", b"proc", flags, None)) == 0
    return own_terminals() and done  # the user's terminals hidden whatever failed before


def hide_services(job: Job) -> bool:
    """Cover each folder of HIDDEN with an empty file system of the job's own, then bind
    back, at the same paths, what the job names there (Job.kept) and its HOME's source at
    the HOME it is given (Job.bind); the covers end read-only. A socket a service made there
    is then out of the job's sight: Landlock cannot refuse connect(2) to one."""
    covers = [d for d in HIDDEN if os.path.isdir(d) and not os.path.islink(d)]
    shown = [target for _, target in job.bind]  # what the job names there is bound back too
    held = [(os.open(p, os.O_PATH | os.O_CLOEXEC), p) for p in job.kept([*covers, *shown])]
    binds = [(os.open(source, os.O_PATH | os.O_CLOEXEC), target) for source, target in job.bind]
    flags = MS_NOSUID | MS_NODEV
    done = all(libc.mount(b"tmpfs", d.encode(), b"tmpfs", flags, b"mode=755") == 0 for d in covers)
    for fd, path in binds:  # the job's own folder: writable, so mount points can be made
        done = bind_at(fd, path) and set_mount(path.encode(), 0, MOUNT_ATTR_RDONLY) and done
        os.close(fd)
    for fd, path in held:
        done = bind_at(fd, path) and done
        os.close(fd)
    for cover in covers:
        remount = MS_REMOUNT | MS_BIND | MS_RDONLY | flags
        done = libc.mount(None, cover.encode(), None, remount, None) == 0 and done
    return done


def bind_at(fd: int, path: str) -> bool:
    """Bind what the O_PATH `fd` holds at `path`, making the mount point it needs (in a
    cover, still writable then)."""
    try:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, exist_ok=True)
        elif not os.path.lexists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    except OSError:
        return False
    source = f"/proc/self/fd/{fd}".encode()
    return int(libc.mount(source, path.encode(), None, MS_BIND | MS_REC, None)) == 0


def own_terminals() -> bool:
    """A devpts instance of the job's own on /dev/pts, its /dev/ptmx bound over the machine's:
    the command sees, opens and makes only terminals of the job, never the user's (the one
    the judge runs in, whose input it would read and whose screen it would write)."""
    options = b"newinstance,ptmxmode=0666,mode=0620"
    if libc.mount(b"devpts", PTS, b"devpts", MS_NOSUID | MS_NOEXEC, options) != 0:
        return False
    if libc.mount(PTS + b"/ptmx", PTMX, None, MS_BIND, None) == 0:
        return True
    libc.umount2(PTS, MNT_DETACH)  # a /dev/ptmx that makes terminals this view cannot see
    return False


class MountAttr(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("set", "clear", "propagation", "userns")]


def set_mount(path: bytes, add: int, clear: int) -> bool:
    """mount_setattr(2) on `path` and every mount beneath it (Linux 5.12+)."""
    attr = MountAttr(add, clear, 0, 0)
    size = ctypes.c_size_t(ctypes.sizeof(attr))
    return (
        int(libc.syscall(MOUNT_SETATTR, AT_FDCWD, path, AT_RECURSIVE, ctypes.byref(attr), size))
        == 0
    )


def write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def command_line(pid: int) -> bytes:
    try:
        raw = read(f"/proc/{pid}/cmdline")
    except OSError:
        raw = b""
    return raw.rstrip(b"\0").replace(b"\0", b" ") or f"pid {pid}".encode()


def children() -> list[int]:
    """This process's children as /proc lists them: orphans of the command included, since
    they are reparented here (to PID 1 of the namespace, or to the subreaper)."""
    found: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found  # no /proc (not Linux): the command's group is killed by the judge
    for task in tasks:
        try:
            found += [int(pid) for pid in read(f"/proc/self/task/{task}/children").split()]
        except OSError:
            continue  # a thread that just ended
    return found


def reap() -> None:
    """Collect every child that has exited (a zombie is not a survivor)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def survivors(grace: float) -> list[int]:
    """The children still running after `grace` seconds, zombies reaped meanwhile."""
    deadline = time.monotonic() + grace
    while True:
        reap()
        alive = children()
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.01)


def kill_all(pids: list[int]) -> None:
    """Kill every survivor and whatever it forks meanwhile, until none is left. PID 1 of a
    namespace kills all of it at once."""
    if pids and os.getpid() == 1:
        try:  # noqa: SIM105 (contextlib is an import this launcher does not pay for)
            os.kill(-1, SIGKILL)
        except ProcessLookupError:
            pass
        pids = survivors(0.0)
    while pids:
        for pid in pids:
            try:  # noqa: SIM105
                os.kill(pid, SIGKILL)
            except ProcessLookupError:
                pass
        pids = survivors(0.0)


def exit_status(status: int) -> int:
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


class Job:
    """One command to confine: what it runs, where, and what it may write. `env`, `cwd` and
    `fds` (its stdin, stdout, stderr) are None where it inherits the launcher's own."""

    def __init__(self, argv: list[str], writable: list[str], status: str, require: bool) -> None:
        self.argv, self.writable, self.status, self.require = argv, writable, status, require
        self.env: dict[str, str] | None = None
        self.cwd: str | None = None
        self.fds: list[int] | None = None
        self.tty: list[int] = []  # the command's fds that are a terminal (Terminal)
        self.see: list[str] = []  # more paths it reads under HIDDEN than it names (kept)
        self.bind: list[tuple[str, str]] = []  # (source, target): a folder seen elsewhere
        self.watch = False  # record what it types into a terminal and where it connects
        self.watching: Watching | None = None  # the watch, once PID 1 installed it

    def environ(self) -> dict[str, str]:
        """The command's variables: its own, or where it has none the launcher's."""
        return dict(os.environ) if self.env is None else self.env

    def kept(self, covers: list[str]) -> list[str]:
        """The paths under `covers` the job reads: its folders, working directory and program,
        the absolute paths among its arguments (`--opt=PATH` too) and variables, and `see`;
        a path in a virtual environment keeps the environment and the interpreter its
        pyvenv.cfg names. The outermost of each nest, never a cover itself."""
        env = self.environ()
        named = [*self.writable, *self.see, self.cwd or os.getcwd()]
        try:  # noqa: SIM105 (contextlib is an import this launcher does not pay for)
            named.append(program(self.argv[0], env))
        except OSError:
            pass  # a program that is not there: the job reports it
        named += [arg.rpartition("=")[2] for arg in self.argv[1:]]
        named += [part for value in env.values() for part in value.split(os.pathsep)]
        found = {kept for path in named if path.startswith("/") for kept in seen(path)}
        under = sorted(p for p in found if any(p.startswith(c + "/") for c in covers))
        return [p for p in under if not any(p.startswith(q + "/") for q in under if q != p)]

    def exec(self, abi: int, level: str, terminal: Terminal | None) -> None:
        """In the command's own process: its fds and folder, Landlock, then exec."""
        if self.fds is not None:
            for target, fd in enumerate(self.fds):
                os.dup2(fd, target)
            for fd in set(self.fds) - {0, 1, 2}:
                os.close(fd)
        if terminal is not None:
            terminal.attach()
        if self.cwd is not None:
            os.chdir(self.cwd)
        if abi:
            drop_capabilities()  # as a PID 1 does for its command: none, even as root
            landlock(self.writable, abi, isolate=level == "subreaper")
        if self.env is None:
            os.execvp(self.argv[0], self.argv)
        os.execvpe(self.argv[0], self.argv, self.env)

    def spawn(self, abi: int, terminal: Terminal | None) -> int:
        """As PID 1 of the job's namespaces: confine this process, then start the command with
        posix_spawn (no copy of this process, the cost of a job); the command's pid. PID 1 then
        shares the command's Landlock domain, but not its reach: it keeps the capabilities the
        command has none of and is not dumpable, so the command can neither trace it nor open
        its memory or fds; its status fd was opened before."""
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl PR_SET_DUMPABLE")
        if self.cwd is not None:
            os.chdir(self.cwd)
        drop_capabilities()
        if abi:
            landlock(self.writable, abi, isolate=False)
        if self.watch:  # before the command: it inherits the filter
            try:
                self.watching = Watching(self.writable)
            except OSError:
                self.watching = None  # the status says `watched no`: the judge decides
        env = self.environ()
        actions: list[tuple[object, ...]] = [
            (os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(self.fds or ())
        ]
        actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in set(self.fds or ()) - {0, 1, 2}]
        # In a session of its own (made before the file actions run), the terminal's first
        # open makes it the command's controlling terminal.
        actions += terminal.opens() if terminal is not None else []
        found = program(self.argv[0], env)
        return os.posix_spawn(
            found, self.argv, env, file_actions=actions, setsid=terminal is not None
        )


class Terminal:
    """The pseudo-terminal a job's command has on its `tty` fds, made by the launcher (the
    command's own process could not keep the other end from it): the launcher relays what
    the command writes there to `out`, the stdout it was given. It outlives the command, and
    so does this end of it, so the relay never meets an end of file that would race with
    output still buffered there."""

    def __init__(self, job: Job) -> None:
        import fcntl  # only a terminal's job pays for these imports
        import struct
        import termios

        self.fds, self.out = job.tty, job.fds[1] if job.fds else 1
        self.relaying = True
        self.master, self.slave = os.openpty()  # neither is inherited by the command
        attrs = termios.tcgetattr(self.slave)
        attrs[3] &= ~termios.ECHO  # lflag: what the launcher writes is input, never output
        termios.tcsetattr(self.slave, termios.TCSANOW, attrs)
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.path = os.ttyname(self.slave)

    def opens(self) -> list[tuple[object, ...]]:
        """posix_spawn's file actions that put the terminal on the command's fds."""
        return [(os.POSIX_SPAWN_OPEN, fd, self.path, os.O_RDWR, 0) for fd in self.fds]

    def attach(self) -> None:
        """In a forked command, before exec: a session of its own, the terminal on its fds."""
        os.setsid()
        for fd in self.fds:
            opened = os.open(self.path, os.O_RDWR)  # the first makes it the controlling one
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)

    def relay(self) -> None:
        """Copy what the command wrote on the terminal to `out` (all of it once the reader
        went away: a timeout; drained, relayed nowhere)."""
        data = os.read(self.master, 65536)
        while data and self.relaying:
            try:
                data = data[os.write(self.out, data) :]
            except OSError:
                self.relaying = False


class Watching:
    """The watch of a job's system calls (syscall_watch.py, loaded by its path: this file
    starts by its own, where no package is importable): installed in PID 1 before the
    command starts, served by PID 1 while the command runs."""

    def __init__(self, writable: list[str]) -> None:
        module = watch_module()
        self.watch = module.Watch(writable)  # a socket of its own folders is no service
        self.listener: int = module.install_filter()


def watch_module() -> ModuleType:
    """syscall_watch.py beside this file, once a process (the server loads it once)."""
    global WATCH_MODULE
    if WATCH_MODULE is None:
        import importlib.util

        path = os.path.join(os.path.dirname(FILE), "syscall_watch.py")
        spec = importlib.util.spec_from_file_location("oracle_syscall_watch", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        # No bytecode beside the gate's scripts: they are a base's worktree, or the template
        # a bake copies whole.
        writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
        try:
            spec.loader.exec_module(module)
        finally:
            sys.dont_write_bytecode = writes
        WATCH_MODULE = module
    return WATCH_MODULE


WATCH_MODULE: ModuleType | None = None


def waited(pid: int, terminal: Terminal | None, watching: Watching | None) -> int:
    """Wait for the command, relaying its terminal and serving its watch meanwhile; its wait
    status. Its end is a pidfd becoming readable, seen at once; the terminal is drained
    first (polling a terminal flushes its buffers: n_tty_poll), then `out` closed (its
    reader reads to its end)."""
    if terminal is None and watching is None:
        return os.waitpid(pid, 0)[1]
    if terminal is not None and 0 in terminal.fds:
        os.write(terminal.master, EOF)
    served(pid, terminal, watching)
    if watching is not None:
        watching.watch.drain(watching.listener)
    if terminal is not None:
        os.close(terminal.out)
    return os.waitpid(pid, 0)[1]


def served(pid: int, terminal: Terminal | None, watching: Watching | None) -> None:
    """Relay the terminal and serve the watch until the command ends."""
    import select

    ended = os.pidfd_open(pid)
    poller = select.poll()
    master = terminal.master if terminal is not None else -1
    listener = watching.listener if watching is not None else -1
    for fd in (ended, master, listener):
        if fd >= 0:
            poller.register(fd, select.POLLIN)
    while True:
        ready = dict(poller.poll())
        if watching is not None and ready.get(listener, 0) & select.POLLIN:
            watching.watch.handle(listener)
        elif terminal is not None and master in ready:
            terminal.relay()
        elif ended in ready:
            break
    os.close(ended)


def seen(path: str) -> list[str]:
    """What a job that names `path` reads: the path (if it is there), or the virtual
    environment it lies in and the prefix of the interpreter that environment's pyvenv.cfg
    names (its `home`, the interpreter's bin folder)."""
    path = os.path.normpath(path)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return []
    if mode & 0o170000 == 0o140000:
        return []  # a socket: a service, never what a job reads
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    while folder != "/":
        try:
            config = read(os.path.join(folder, "pyvenv.cfg")).decode("utf-8", "replace")
        except OSError:
            folder = os.path.dirname(folder)
            continue
        settings = (line.partition("=") for line in config.splitlines())
        homes = [value.strip() for key, _, value in settings if key.strip() == "home"]
        return [folder, *(os.path.dirname(home) for home in homes if home.startswith("/"))]
    return [path, *shebang(path)]


def shebang(path: str) -> list[str]:
    """What a script's interpreter line names (and that interpreter reads)."""
    try:
        with open(path, "rb") as script:
            line = script.readline(256)
    except OSError:
        return []
    words = line[2:].split() if line.startswith(b"#!") else []
    named = words[0].decode("utf-8", "replace") if words else ""
    return seen(named) if named.startswith("/") and named != path else []


def program(name: str, env: dict[str, str]) -> str:
    """`name` found as execvpe finds it: on the PATH of the command's own environment."""
    if os.sep in name:
        return name
    for folder in os.get_exec_path(env):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", name)


def drop_capabilities() -> None:
    """Empty the bounding set, so the command holds no capability in the user namespace it
    shares with the other jobs (its network namespace's owner), even as its root."""
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            return  # past the last capability this kernel knows


def run_command(job: Job, abi: int, level: str) -> str:
    """Start the command, confined, and wait for it: its exit code, or why it did not run."""
    terminal = None
    try:
        terminal = Terminal(job) if job.tty else None  # before Landlock: /dev/ptmx
        if level == "namespaces":
            pid = job.spawn(abi, terminal)
        else:
            pid = forked(job, abi, level, terminal)
    except OSError as exc:
        return f"{job.argv[0]}: {exc}".replace("\n", " ")
    finally:
        relayed = {terminal.out} if terminal is not None else set()
        for fd in set(job.fds or ()) - relayed:  # the command holds them now
            os.close(fd)
    status = waited(pid, terminal, job.watching)
    return str(os.waitstatus_to_exitcode(status))  # -N: killed by signal N


def forked(job: Job, abi: int, level: str, terminal: Terminal | None) -> int:
    """Below the namespaces level the launcher stays outside the command's Landlock domain
    (the domain is all that keeps the command from tracing it): a fork confines itself and
    execs. Its error comes back through a pipe that a successful exec closes."""
    errors, report = os.pipe()  # not inheritable: closed by a successful exec
    pid = os.fork()
    if pid == 0:
        os.close(errors)
        try:
            job.exec(abi, level, terminal)
        except OSError as exc:
            os.write(report, str(exc).encode())
        os._exit(NOT_RUN)
    os.close(report)
    refused = os.read(errors, 4096).decode("utf-8", "replace")
    os.close(errors)
    if refused:
        os.waitpid(pid, 0)
        raise OSError(refused)
    return pid


class Status:
    """What the launcher tells the judge: the level it reached, the command's exit code,
    what it left running, what a higher level needs."""

    def __init__(self, level: str, missing: str = "") -> None:
        self.level, self.missing = level, missing
        self.exit, self.refused, self.survivors = NOT_RUN, "", list[bytes]()
        self.hidden = False  # the machine's services out of the job's sight (hide_services)
        self.watched = False  # its system calls watched (Watching), and what they reached
        self.reached: list[str] = []
        self.typed = b""

    def supervise(self, job: Job, abi: int) -> int:
        """Run the command, then name and kill what it left behind; the command's exit."""
        ended = run_command(job, abi, self.level)
        if job.watching is not None:
            self.watched = True
            self.reached, self.typed = job.watching.watch.reached, job.watching.watch.typed
        if ended.lstrip("-").isdigit():
            self.exit = int(ended)
        else:
            self.refused = ended
        left = survivors(SURVIVOR_GRACE)
        self.survivors = [command_line(pid) for pid in left[:SURVIVORS_NAMED]]
        kill_all(left)
        return self.exit

    def text(self) -> bytes:
        lines = [f"level {self.level}", f"exit {self.exit}", f"missing {self.missing}"]
        lines += [f"refused {self.refused}", f"hidden {'yes' if self.hidden else 'no'}"]
        lines += [f"watched {'yes' if self.watched else 'no'}", f"typed {self.typed.hex()}"]
        lines += [f"reached {address.encode().hex()}" for address in self.reached]
        lines += [f"survivor {name.hex()}" for name in self.survivors]
        return "\n".join(lines).encode() + b"\n"

    def write(self, path: str) -> None:
        write(path, self.text())


def confine(job: Job, cap: int) -> int:
    """Run one job at the highest level this machine allows under `cap`; its exit code."""
    abi = landlock_abi()
    if abi and cap >= 2 and enter_namespaces(CLONE_NEWUSER | CLONE_NEWNET):
        return under_pid_one(job, abi)
    return without_namespaces(job, abi, missing_features(abi, cap), cap)


def without_namespaces(job: Job, abi: int, missing: str, cap: int) -> int:
    # A subreaper even unconfined: survivors are found and killed unless they kill it first.
    if sys.platform.startswith("linux"):
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if abi >= 6 and cap >= 1 and job.require:
        # Required confinement hides the machine's services, which takes mounts of its own.
        Status("subreaper", missing).write(job.status)
        return NOT_RUN
    if abi >= 6 and cap >= 1:
        kill_tree_on_sigterm()
        return finish(Status("subreaper", missing), job, abi)
    if job.require:
        Status("none", missing).write(job.status)
        return NOT_RUN
    return finish(Status("none", missing), job, 0)


def kill_tree_on_sigterm() -> None:
    """On SIGTERM (the judge's, at a timeout) kill the command and every process it started,
    then end. Only a subreaper needs it (a PID namespace dies with its PID 1), so only it pays
    for the signal module's import."""
    import signal

    def kill_tree(*_: object) -> None:
        kill_all(children())
        os._exit(128 + signal.SIGTERM)

    signal.signal(signal.SIGTERM, kill_tree)


def level_cap() -> str:
    """$ORACLE_SANDBOX_LEVEL in the judge's environment: the highest level to try (none,
    subreaper, namespaces), for trying the lower levels on a machine that has the higher.
    Lowering it never passes unnoticed: the report names the level reached, and `required`
    refuses `none` (as it does a value that is not a level)."""
    return os.environ.get(LEVEL_VARIABLE, LEVELS[-1])


def finish(found: Status, job: Job, abi: int) -> int:
    code = found.supervise(job, abi)
    found.write(job.status)
    return code


def missing_features(abi: int, cap: int) -> str:
    if cap < len(LEVELS) - 1:
        return f"${LEVEL_VARIABLE} caps the launcher at {LEVELS[cap]}"
    if not abi:
        return "Landlock (Linux 5.13+ with landlock in the kernel's lsm= list)"
    return (
        f"unprivileged user namespaces (or Landlock ABI 6, this kernel has {abi}): "
        "sysctl kernel.unprivileged_userns_clone=1, and on Ubuntu 23.10+ "
        "kernel.apparmor_restrict_unprivileged_userns=0"
    )


def under_pid_one(job: Job, abi: int) -> int:
    """Fork the PID 1 of a new PID namespace, which runs the job; its exit ends every process
    of the namespace, and it dies with the launcher."""
    if libc.unshare(CLONE_NEWPID) != 0:
        raise OSError(ctypes.get_errno(), "unshare of the job's PID namespace")
    pid = os.fork()
    if pid == 0:
        libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
        os._exit(pid_one(job, abi) & 0xFF)
    for fd in job.fds or ():
        os.close(fd)
    _, code = os.waitpid(pid, 0)
    return exit_status(code)


def pid_one(job: Job, abi: int) -> int:
    """As PID 1 of the job's namespace: run the command, name and kill what it left, write
    the status (through a file opened before the world turned read-only)."""
    status = os.open(job.status, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    found = Status("namespaces")
    found.hidden = private_mounts(job)  # where it fails, /proc/self still finds survivors
    code = found.supervise(job, abi)
    os.write(status, found.text())
    os.close(status)
    return code


def serve(channel: int, cap: int) -> int:
    """The launcher as a server (`--serve FD`): one process per judge that starts every job
    sent on the socket `channel` (a JSON request and the job's three fds), so a job costs a
    fork instead of a Python start, and its network namespace is made once, here.
    It answers each request with a pidfd of the job's supervisor."""
    import json
    import socket

    abi = landlock_abi()
    shared = bool(abi and cap >= 2 and enter_namespaces(CLONE_NEWUSER | CLONE_NEWNET))
    missing = "" if shared else missing_features(abi, cap)
    sock = socket.socket(fileno=channel)
    while True:
        reap()
        message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        if not message:
            return 0
        request = json.loads(message)
        job = Job(request["argv"], request["writable"], request["status"], request["require"])
        job.env, job.cwd, job.fds = request["env"], request["cwd"], fds
        job.tty, job.see = request.get("tty", []), request.get("see", [])
        job.bind = [(source, target) for source, target in request.get("bind", [])]
        job.watch = bool(request.get("watch"))
        if job.watch:
            watch_module()  # loaded once, here, for every fork
        pid = os.fork()  # the job's supervisor (a process may make one PID namespace only)
        if pid == 0:
            sock.close()
            os.setsid()  # a group of its own, which the judge kills on a timeout
            code = under_pid_one(job, abi) if shared else without_namespaces(job, abi, missing, cap)
            os._exit(code & 0xFF)
        for fd in fds:
            os.close(fd)
        handle = os.pidfd_open(pid)
        socket.send_fds(sock, [b"started"], [handle])
        os.close(handle)


class Reach:
    """What a job reaches beyond the folders it may write: its `tty` fds (1, or 0 and 1) are a
    terminal the launcher relays to stdout; of the folders under HIDDEN it sees `see` too;
    `bind`: (folder, where the job sees it) pairs, at the namespaces level only; `watch`:
    record where it connects and what it types into a terminal (the namespaces level only).
    A plain class: this file imports no typing (see its imports)."""

    __slots__ = ("bind", "see", "tty", "watch")

    def __init__(
        self,
        tty: tuple[int, ...] = (),
        see: tuple[str, ...] = (),
        bind: tuple[tuple[str, str], ...] = (),
        watch: bool = False,
    ) -> None:
        self.tty, self.see, self.bind, self.watch = tty, see, bind, watch


NOWHERE = Reach()  # a job that reaches nothing beyond its folders


def command(
    cmd: list[str],
    writable: list[str],
    status: str,
    require: bool,
    *,
    reach: Reach = NOWHERE,
    python: str = sys.executable,
    cap: str = "",
) -> list[str]:
    """The command line that runs `cmd` confined: for the judge and the subject plugin, whose
    process has none of the judge's variables and is given the judge's `cap` (level_cap)."""
    options = [arg for folder in writable for arg in ("--write", folder)]
    options += [arg for fd in reach.tty for arg in ("--tty", str(fd))]
    options += [arg for path in reach.see for arg in ("--see", path)]
    options += [arg for pair in reach.bind for arg in ("--bind", *pair)]
    options += ["--watch"] if reach.watch else []
    options += ["--cap", cap or level_cap(), *(["--require"] if require else [])]
    return [python, "-I", "-S", FILE, "--status", status, *options, "--", *cmd]


def server_command(channel: int, python: str = sys.executable) -> list[str]:
    return [python, "-I", "-S", FILE, "--serve", str(channel), "--cap", level_cap()]


def read_status(path: str) -> Status | None:
    """The status a launcher wrote, or None where it wrote none (killed, or never started)."""
    try:
        lines = read(path).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    listed = ("survivor ", "reached ")
    fields = dict(line.partition(" ")[::2] for line in lines if not line.startswith(listed))
    if "level" not in fields:
        return None  # opened, never written: its PID 1 was killed (a timeout)
    found = Status(fields["level"], fields.get("missing", ""))
    found.exit = int(fields["exit"]) if fields.get("exit", "").lstrip("-").isdigit() else NOT_RUN
    found.refused = fields.get("refused", "")
    found.hidden = fields.get("hidden") == "yes"
    found.watched = fields.get("watched") == "yes"
    found.typed = bytes.fromhex(fields.get("typed", ""))
    found.reached = [
        bytes.fromhex(line[8:]).decode() for line in lines if line.startswith("reached ")
    ]
    found.survivors = [bytes.fromhex(line[9:]) for line in lines if line.startswith("survivor ")]
    return found


def main(argv: list[str]) -> int:
    cap_name = argv[argv.index("--cap") + 1] if "--cap" in argv else LEVELS[-1]
    cap = LEVELS.index(cap_name) if cap_name in LEVELS else 0
    if argv[:1] == ["--serve"]:
        return serve(int(argv[1]), cap)
    if "--" not in argv:
        print(
            "usage: confine.py --status FILE [--write DIR]... [--tty FD]... [--see PATH]... "
            "[--bind DIR AS]... [--watch] [--cap LEVEL] [--require] -- CMD..."
        )
        return 2
    split = argv.index("--")
    options, cmd = argv[:split], argv[split + 1 :]
    writable = [options[i + 1] for i, o in enumerate(options) if o == "--write"]
    status = options[options.index("--status") + 1]
    job = Job(cmd, writable, status, "--require" in options)
    job.tty = [int(options[i + 1]) for i, o in enumerate(options) if o == "--tty"]
    job.see = [options[i + 1] for i, o in enumerate(options) if o == "--see"]
    job.bind = [(options[i + 1], options[i + 2]) for i, o in enumerate(options) if o == "--bind"]
    job.watch = "--watch" in options
    return confine(job, cap)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
