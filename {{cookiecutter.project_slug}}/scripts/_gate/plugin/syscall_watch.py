"""What a confined job reaches for beyond its scratch, watched (docs/confinement.md): the
launcher's seccomp user notifications, for the perturbed runs of cases.

A job's PID 1 installs a filter (install_filter) before it starts the command; the filter,
which the command and everything it starts inherit, parks a few system calls until PID 1
answers: `ioctl(TIOCSTI)` (input typed into a terminal, which in a user's shell runs once the
command exits), and `connect`, `sendto` with an address, `sendmsg` and `sendmmsg` (where the
job tries to reach: the network, which its namespace does not have, or a machine's service).
PID 1 reads the call's arguments from the job's memory (Watch.handle), records them, and lets
the kernel run the call unchanged (SECCOMP_USER_NOTIF_FLAG_CONTINUE): a job behaves as it
would unwatched, and what it tried becomes a compared field of its run.

An audit, not a rule: with CONTINUE the kernel reads the arguments again after PID 1 did, so
a job with threads can show one address and use another. The run has no network anyway; a
difference between the parent's and the patch's attempts is what blocks. Other system call
ABIs (i386 by `int 0x80`, x32) and io_uring, which would go around the filter, fail with
ENOSYS. A file of the standard library only, loaded by the launcher by its path.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import select
import socket
import struct
import sys
from collections.abc import Iterable
from typing import NamedTuple

# ---------------------------------------------------------------------------
# Constants (checked against linux/seccomp.h, linux/audit.h, asm-generic/unistd.h)
# ---------------------------------------------------------------------------

PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_USER_NOTIF = 0x7FC00000
SECCOMP_USER_NOTIF_FLAG_CONTINUE = 1

# _IOWR('!', 0, struct seccomp_notif) / _IOWR('!', 1, struct seccomp_notif_resp) /
# _IOW('!', 2, __u64).  Kernels before 5.8 only know the _IOR variant of ID_VALID
# (0x80082102); 5.8+ accept both, so try the correct one first.
NOTIF_RECV = 0xC0502100
NOTIF_SEND = 0xC0182101
NOTIF_ID_VALID = 0x40082102
NOTIF_ID_VALID_OLD = 0x80082102
# _IOW('!', 4, __u64), Linux 6.6+; the flag is passed by value, not through a pointer.
NOTIF_SET_FLAGS = 0x40082104
SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP = 1

TIOCSTI = 0x5412
X32_SYSCALL_BIT = 0x40000000
NR_IO_URING_SETUP = 425  # same number on every arch (unified table since 5.1)

_NOTIF = struct.Struct("=QIIiIQ6Q")  # seccomp_notif: id, pid, flags, seccomp_data
_RESP = struct.Struct("=QqiI")  # seccomp_notif_resp: id, val, error, flags
_MSGHDR = struct.Struct("=QI4xQQQQi4x")  # struct msghdr on LP64
_MMSGHDR_SIZE = 64  # struct msghdr + u32 msg_len + pad
_SOCKADDR_MAX = 128  # sizeof(struct sockaddr_storage); the kernel refuses longer

# The C library's own sockets, which any program reaches through a standard call (the user
# database through nscd or systemd's userdb, syslog), whatever its code means: not recorded.
PLUMBING = (
    b"/dev/log",
    b"/run/nscd",
    b"/var/run/nscd",
    b"/run/systemd/journal",
    b"/run/systemd/userdb",
)
MAX_REACHED = 50
MAX_TYPED = 4096
MAX_MMSG = 16
_DRAIN_LIMIT = 10000


class Arch(NamedTuple):
    """Per-architecture facts the filter and the decoder need."""

    audit_arch: int
    seccomp: int
    ioctl: int
    connect: int
    sendto: int
    sendmsg: int
    sendmmsg: int
    reject_x32: bool


ARCHES = {
    # arch/x86/entry/syscalls/syscall_64.tbl
    "x86_64": Arch(0xC000003E, 317, 16, 42, 44, 46, 307, True),
    # include/uapi/asm-generic/unistd.h
    "aarch64": Arch(0xC00000B7, 277, 29, 203, 206, 211, 269, False),
}


def native_arch(machine: str | None = None) -> Arch:
    """The table for this machine (or the named one); OSError(ENOSYS) if unsupported."""
    name = machine or os.uname().machine
    if name not in ARCHES:  # OSError so that callers have one thing to catch
        raise OSError(errno.ENOSYS, f"seccomp watch: unsupported machine {name}")
    return ARCHES[name]


# ---------------------------------------------------------------------------
# The BPF program
# ---------------------------------------------------------------------------

Insn = tuple[int, int, int, int]  # code, jt, jf, k  (struct sock_filter)
_Target = str | int  # a label, or 0 for "next instruction"

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K

# offsets into struct seccomp_data (little-endian: the low word of args[i] comes first)
_OFF_NR, _OFF_ARCH = 0, 4


def _arg_lo(i: int) -> int:
    return 16 + 8 * i


def _arg_hi(i: int) -> int:
    return 16 + 8 * i + 4


def _program_source(arch: Arch) -> list[tuple[str, int, _Target, _Target, int]]:
    """Symbolic program: (label, code, jt, jf, k)."""
    enosys = SECCOMP_RET_ERRNO | errno.ENOSYS
    src: list[tuple[str, int, _Target, _Target, int]] = [
        ("", _LD_ABS, 0, 0, _OFF_ARCH),
        ("", _JEQ, 0, "enosys", arch.audit_arch),  # i386 / arm32 compat: no
        ("", _LD_ABS, 0, 0, _OFF_NR),
    ]
    if arch.reject_x32:
        src.append(("", _JSET, "enosys", 0, X32_SYSCALL_BIT))
    src += [
        ("", _JEQ, "enosys", 0, NR_IO_URING_SETUP),  # io_uring would bypass the watch
        ("", _JEQ, "ioctl", 0, arch.ioctl),
        ("", _JEQ, "sendto", 0, arch.sendto),
        ("", _JEQ, "notify", 0, arch.connect),
        ("", _JEQ, "notify", 0, arch.sendmsg),
        ("", _JEQ, "notify", "allow", arch.sendmmsg),
        # ioctl's cmd is an unsigned int: the kernel ignores the high word, so do we.
        ("ioctl", _LD_ABS, 0, 0, _arg_lo(1)),
        ("", _JEQ, "notify", "allow", TIOCSTI),
        # sendto with dest_addr == NULL is send() on a connected socket: nothing new.
        ("sendto", _LD_ABS, 0, 0, _arg_lo(4)),
        ("", _JEQ, 0, "notify", 0),
        ("", _LD_ABS, 0, 0, _arg_hi(4)),
        ("", _JEQ, "allow", "notify", 0),
        ("notify", _RET, 0, 0, SECCOMP_RET_USER_NOTIF),
        ("allow", _RET, 0, 0, SECCOMP_RET_ALLOW),
        ("enosys", _RET, 0, 0, enosys),
    ]
    return src


def _resolve(target: _Target, here: int, labels: dict[str, int]) -> int:
    if isinstance(target, int):
        return target
    offset = labels[target] - here - 1
    if not 0 <= offset <= 255:  # cBPF jumps are forward-only, 8-bit
        raise ValueError(f"jump to {target} out of range")
    return offset


def build_filter(machine: str | None = None) -> list[Insn]:
    """The filter as (code, jt, jf, k) tuples for `machine` (default: this one)."""
    src = _program_source(native_arch(machine))
    labels = {name: i for i, (name, *_rest) in enumerate(src) if name}
    return [
        (code, _resolve(jt, i, labels), _resolve(jf, i, labels), k)
        for i, (_name, code, jt, jf, k) in enumerate(src)
    ]


# ---------------------------------------------------------------------------
# libc plumbing
# ---------------------------------------------------------------------------


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.process_vm_readv.restype = ctypes.c_ssize_t
_libc.process_vm_readv.argtypes = [
    ctypes.c_int,
    ctypes.POINTER(_Iovec),
    ctypes.c_ulong,
    ctypes.POINTER(_Iovec),
    ctypes.c_ulong,
    ctypes.c_ulong,
]


def _check(ret: int) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def _syscall(nr: int, *args: int) -> int:
    # syscall(2) reads every argument as a long: pass full-width values, never c_int.
    return _check(int(_libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])))


# ---------------------------------------------------------------------------
# Job side
# ---------------------------------------------------------------------------


def install_filter() -> int:
    """Install the watch filter on the calling thread; return the listener fd.

    The filter is inherited across fork/clone/execve.  The listener is O_CLOEXEC
    (the kernel sets it), so the command exec'd later does not hold it; hand it
    to the supervisor first (see offer_listener).  Raises OSError if the kernel refuses:
    EBUSY when an outer filter (a container manager's) already has a listener.
    """
    insns = build_filter()
    array = (_SockFilter * len(insns))(*[_SockFilter(*insn) for insn in insns])
    prog = _SockFprog(len(insns), array)
    # Without CAP_SYS_ADMIN the kernel demands no_new_privs; setting it twice is harmless.
    _check(
        int(
            _libc.prctl(
                ctypes.c_int(PR_SET_NO_NEW_PRIVS),
                ctypes.c_ulong(1),
                ctypes.c_ulong(0),
                ctypes.c_ulong(0),
                ctypes.c_ulong(0),
            )
        )
    )
    return _syscall(
        native_arch().seccomp,
        SECCOMP_SET_MODE_FILTER,
        SECCOMP_FILTER_FLAG_NEW_LISTENER,
        ctypes.addressof(prog),
    )


# ---------------------------------------------------------------------------
# Reading the job's memory and decoding addresses
# ---------------------------------------------------------------------------


def read_memory(pid: int, addr: int, size: int) -> bytes:
    """Up to `size` bytes at `addr` in `pid` (short if the range runs off a mapping)."""
    if addr == 0 or size <= 0:
        return b""
    buf = ctypes.create_string_buffer(size)
    local = _Iovec(ctypes.cast(buf, ctypes.c_void_p), size)
    remote = _Iovec(addr, size)
    got = _libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if got < 0:
        return _read_proc_mem(pid, addr, size)
    return buf.raw[:got]


def _read_proc_mem(pid: int, addr: int, size: int) -> bytes:
    # Fallback for kernels/containers without process_vm_readv (ENOSYS, seccomp'd).
    fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.pread(fd, size, addr)
    finally:
        os.close(fd)


def printable(raw: bytes) -> str:
    """`raw` as text with anything non-printable (and backslash) escaped."""
    out = []
    for ch in raw.decode("utf-8", "surrogateescape"):
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable() and ch != "\\":
            out.append(ch)
        else:
            out.append(ascii(ch)[1:-1])
    return "".join(out)


def _port(raw: bytes) -> int:
    return int.from_bytes(raw[2:4], "big")


def _describe_inet(raw: bytes) -> str | None:
    if len(raw) < 16:  # shorter than sockaddr_in: the kernel says EINVAL
        return None
    return f"inet {socket.inet_ntop(socket.AF_INET, raw[4:8])}:{_port(raw)}"


def _describe_inet6(raw: bytes) -> str | None:
    if len(raw) < 24:  # SIN6_LEN_RFC2133: the kernel's minimum
        return None
    return f"inet6 [{socket.inet_ntop(socket.AF_INET6, raw[8:24])}]:{_port(raw)}"


def _describe_unix(raw: bytes) -> str:
    path = raw[2:]
    if not path:
        return "unix (unnamed)"
    if path[0] == 0:  # abstract: the name is every byte up to addrlen, NULs included
        return "unix @" + printable(path[1:])
    return "unix " + printable(path.split(b"\0", 1)[0])


def describe_sockaddr(raw: bytes, connecting: bool) -> str | None:
    """Short text for a sockaddr; None when there is nothing to record.

    AF_UNSPEC means "disconnect" to connect(), but udp/raw sendmsg on an AF_INET
    socket treat it as AF_INET, so for sends it is decoded as an IPv4 address.
    """
    if len(raw) < 2:
        return None
    family = int.from_bytes(raw[:2], sys.byteorder)
    if family == socket.AF_UNSPEC:
        return None if connecting else _describe_inet(raw)
    if family == socket.AF_INET:
        return _describe_inet(raw)
    if family == socket.AF_INET6:
        return _describe_inet6(raw)
    if family == socket.AF_UNIX:
        return _describe_unix(raw)
    return f"family {family}"


def _msghdr_name(pid: int, raw: bytes) -> bytes | None:
    name, namelen = _MSGHDR.unpack_from(raw)[:2]
    if not name or not namelen:
        return None
    return read_memory(pid, name, min(namelen, _SOCKADDR_MAX))


# ---------------------------------------------------------------------------
# Supervisor side
# ---------------------------------------------------------------------------


class Notif(NamedTuple):
    id: int
    pid: int
    nr: int
    arch: int
    args: tuple[int, ...]


def _ioctl(fd: int, request: int, arg: bytes) -> bytes | None:
    """ioctl that retries EINTR and maps ENOENT (target gone / interrupted) to None."""
    while True:
        try:
            buf = bytearray(arg)
            fcntl.ioctl(fd, request, buf, True)
            return bytes(buf)
        except InterruptedError:
            continue
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise


def recv_notif(listener: int) -> Notif | None:
    """One pending notification, or None if it vanished (target killed meanwhile).

    Call only when poll() says the listener is readable.  The kernel counts requests
    and never un-counts one whose target died, so RECV then returns (ENOENT) instead
    of sleeping.  The buffer must be all zeros: the kernel rejects anything else.
    """
    raw = _ioctl(listener, NOTIF_RECV, bytes(_NOTIF.size))
    if raw is None:
        return None
    nid, pid, _flags, nr, arch, _ip, *args = _NOTIF.unpack(raw)
    return Notif(nid, pid, nr, arch, tuple(args))


def send_continue(listener: int, nid: int) -> bool:
    """Let the kernel run the syscall as asked.  False if the target is gone/interrupted."""
    resp = _RESP.pack(nid, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE)
    return _ioctl(listener, NOTIF_SEND, resp) is not None


def id_valid(listener: int, nid: int) -> bool:
    """Is the target still parked on notification `nid` (so its pid was not reused)?"""
    arg = struct.pack("=Q", nid)
    try:
        return _ioctl(listener, NOTIF_ID_VALID, arg) is not None
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTTY):
            raise
    return _ioctl(listener, NOTIF_ID_VALID_OLD, arg) is not None  # kernels < 5.8


def set_sync_wakeup(listener: int) -> bool:
    """Ask the kernel to hand the CPU straight from job to supervisor and back (6.6+).

    The job is parked while we work anyway, so this only cuts scheduler latency.
    False where the kernel does not know the ioctl.
    """
    try:
        fcntl.ioctl(listener, NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOTTY):
            return False
        raise
    return True


def _under(path: bytes, prefixes: Iterable[bytes]) -> bool:
    return any(path == p or path.startswith(p.rstrip(b"/") + b"/") for p in prefixes)


class Event(NamedTuple):
    typed: bytes
    reached: tuple[str, ...]


class Watch:
    """What the job did: `typed` (TIOCSTI bytes) and `reached` (distinct addresses)."""

    def __init__(self, allowed_unix_dirs: Iterable[str] = (), machine: str | None = None):
        self.arch = native_arch(machine)
        self._typed = bytearray()
        self.reached: list[str] = []
        self._seen: set[str] = set()
        self.notifications = 0  # answered notifications (recorded or not)
        self.stale = 0  # notifications whose target died or was interrupted
        self.typed_dropped = 0  # TIOCSTI bytes beyond MAX_TYPED
        # Arguments we could not read: a bad pointer (the kernel fails the call too) or no
        # ptrace rights (an unprivileged supervisor and a job that made itself non-dumpable).
        self.unreadable = 0
        lexical = [os.path.normpath(os.fsencode(d)) for d in allowed_unix_dirs]
        self._allowed = lexical + [os.path.realpath(d) for d in lexical]

    @property
    def typed(self) -> bytes:
        return bytes(self._typed)

    # -- the loop body -----------------------------------------------------

    def handle(self, listener: int) -> None:
        """Receive, decode, answer and record one notification.  Never leaves it unanswered."""
        notif = recv_notif(listener)
        if notif is None:
            self.stale += 1
            return
        event: Event | None = None
        try:
            event = self._decode(notif)
            if event and not id_valid(listener, notif.id):
                event = None  # the pid may already name another process
        finally:
            answered = send_continue(listener, notif.id)
        self._account(answered, event)

    def drain(self, listener: int) -> None:
        """Handle whatever is pending right now, without waiting."""
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        for _ in range(_DRAIN_LIMIT):  # descendants may keep producing; do not spin forever
            if not any(ev & select.POLLIN for _fd, ev in poller.poll(0)):
                return
            self.handle(listener)

    def _account(self, answered: bool, event: Event | None) -> None:
        # Record only once the kernel took our answer: if the target was interrupted
        # instead, it restarts the syscall and we see it (and record it) again.
        if not answered:
            self.stale += 1
            return
        self.notifications += 1
        if event:
            self._record(event)

    def _record(self, event: Event) -> None:
        room = MAX_TYPED - len(self._typed)
        self._typed += event.typed[:room]
        self.typed_dropped += max(0, len(event.typed) - room)
        for addr in event.reached:
            if addr not in self._seen and len(self.reached) < MAX_REACHED:
                self._seen.add(addr)
                self.reached.append(addr)

    # -- decoding ----------------------------------------------------------

    def _decode(self, n: Notif) -> Event | None:
        try:
            return self._decode_unsafe(n)
        except Exception:  # a decoding surprise must not kill the supervisor: an unserved
            self.unreadable += 1  # listener would park the job for good
            return None

    def _decode_unsafe(self, n: Notif) -> Event | None:
        a = self.arch
        if n.arch != a.audit_arch:
            return None
        if n.nr == a.ioctl:
            return Event(_exactly(read_memory(n.pid, n.args[2], 1), 1), ())
        if n.nr == a.connect:
            return self._addresses(
                n.pid, [read_memory(n.pid, n.args[1], _addrlen(n.args[2]))], connecting=True
            )
        if n.nr == a.sendto:
            return self._addresses(n.pid, [read_memory(n.pid, n.args[4], _addrlen(n.args[5]))])
        if n.nr == a.sendmsg:
            return self._addresses(n.pid, [_msghdr_name(n.pid, self._msghdr(n.pid, n.args[1]))])
        if n.nr == a.sendmmsg:
            return self._addresses(n.pid, self._mmsg_names(n.pid, n.args[1], n.args[2]))
        return None

    @staticmethod
    def _msghdr(pid: int, addr: int) -> bytes:
        return _exactly(read_memory(pid, addr, _MSGHDR.size), _MSGHDR.size)

    @staticmethod
    def _mmsg_names(pid: int, addr: int, vlen: int) -> list[bytes | None]:
        count = min(vlen & 0xFFFFFFFF, MAX_MMSG)
        raw = read_memory(pid, addr, count * _MMSGHDR_SIZE)
        whole = len(raw) // _MMSGHDR_SIZE  # the kernel stops at the first bad one too
        return [_msghdr_name(pid, raw[i * _MMSGHDR_SIZE :]) for i in range(whole)]

    def _addresses(self, pid: int, raws: Iterable[bytes | None], connecting: bool = False) -> Event:
        found = []
        for raw in raws:
            path = _unix_pathname(pid, raw or b"")
            if path is None:
                text = describe_sockaddr(raw or b"", connecting)
            elif self._own_socket(path) or _under(os.path.normpath(path), PLUMBING):
                continue
            else:
                text = "unix " + printable(path)
            if text:
                found.append(text[:200])
        return Event(b"", tuple(found))

    def _own_socket(self, path: bytes) -> bool:
        """Is this absolute AF_UNIX path under one of the job's own folders?"""
        if not _under(os.path.normpath(path), self._allowed):
            return False  # decided without touching the filesystem
        # Lexically inside: resolve symlinks so a link to /run/x.sock is not excused.
        return _under(os.path.realpath(path), self._allowed)


def _unix_pathname(pid: int, raw: bytes) -> bytes | None:
    """The absolute path of a pathname AF_UNIX sockaddr (None for anything else).

    A relative path is relative to the job's cwd, not ours; /proc/PID/cwd is read while
    the job is parked, so it is the cwd the kernel will use (same mount namespace assumed).
    """
    if not raw.startswith(_AF_UNIX_LE) or raw[2:3] in (b"", b"\0"):
        return None
    path = raw[2:].split(b"\0", 1)[0]
    if not path.startswith(b"/"):
        path = os.path.join(os.fsencode(os.readlink(f"/proc/{pid}/cwd")), path)
    return path


_AF_UNIX_LE = socket.AF_UNIX.to_bytes(2, sys.byteorder)


def _exactly(raw: bytes, size: int) -> bytes:
    if len(raw) != size:  # NULL or unmapped pointer: the kernel will say EFAULT
        raise OSError(errno.EFAULT, "unreadable argument")
    return raw


def _addrlen(value: int) -> int:
    # socklen_t is 32-bit; the kernel rejects more than sockaddr_storage anyway.
    return min(value & 0xFFFFFFFF, _SOCKADDR_MAX)
