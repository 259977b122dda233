"""What each function of the package reaches for directly, read from its source (no code
runs): the process environment, clocks, the filesystem outside the working directory, the
network, new processes, the terminal, ioctls, the interpreter and host, dynamic code and
native code. Code that behaves by the world it is judged in must read that world first; the
change step (_gate/steps/change.py) lists what the patch's functions newly reach.

A name is followed through imports (`import os as o`, `from time import time as now`,
`m = importlib.import_module("os")`) and `getattr` with a literal name; what no import names
(a parameter, `self.x`) counts only by the attribute it reads where that attribute says it
(`.isatty()`, `.st_mtime`). The table atop the baked docs/capabilities.md lists every rule.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

# Qualified names (a prefix names everything under it) and the capability each reaches.
NAMES: dict[str, str] = {
    **dict.fromkeys(
        ("os.environ", "os.environb", "os.getenv", "os.getenvb", "os.putenv", "os.unsetenv"),
        "env",
    ),
    **dict.fromkeys(
        (
            *(f"time.{n}" for n in ("time", "time_ns", "localtime", "gmtime", "ctime")),
            *(f"time.{n}" for n in ("asctime", "strftime", "monotonic", "monotonic_ns")),
            *(f"time.{n}" for n in ("perf_counter", "perf_counter_ns", "process_time")),
            *(f"time.{n}" for n in ("thread_time", "clock_gettime", "clock_gettime_ns")),
            *(f"time.{n}" for n in ("timezone", "altzone", "tzname", "daylight", "tzset")),
            *(f"datetime.datetime.{n}" for n in ("now", "utcnow", "today")),
            "datetime.date.today",
            *(f"os.path.get{n}time" for n in ("m", "c", "a")),
        ),
        "clock",
    ),
    **dict.fromkeys(
        ("tempfile", "os.path.expanduser", "pathlib.Path.home", "os.path.expandvars"),
        "filesystem",
    ),
    **dict.fromkeys(
        (
            *("socket", "ssl", "http.client", "http.server", "urllib.request", "urllib3"),
            *("requests", "httpx", "aiohttp", "smtplib", "ftplib", "telnetlib", "imaplib"),
            *("poplib", "xmlrpc", "socketserver", "websocket", "websockets"),
            *("asyncio.open_connection", "asyncio.start_server"),
            *("asyncio.open_unix_connection", "asyncio.start_unix_server"),
        ),
        "network",
    ),
    **dict.fromkeys(
        (
            *("subprocess", "multiprocessing", "pty", "concurrent.futures.ProcessPoolExecutor"),
            *("os.system", "os.popen", "os.fork", "os.forkpty", "os.kill", "os.killpg"),
            *("os.posix_spawn", "os.posix_spawnp", "os.pidfd_open", "signal.pidfd_send_signal"),
            *("asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell"),
            *(f"os.exec{n}" for n in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
            *(f"os.spawn{n}" for n in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
        ),
        "process",
    ),
    **dict.fromkeys(
        (
            *("os.isatty", "os.ttyname", "os.ctermid", "os.get_terminal_size", "curses"),
            *("getpass", "os.fstat", "stat.S_ISREG", "stat.S_ISCHR", "stat.S_ISFIFO"),
        ),
        "terminal",
    ),
    "shutil.get_terminal_size": "terminal",
    **dict.fromkeys(("fcntl.ioctl", "termios", "tty"), "ioctl"),
    **dict.fromkeys(
        (
            *(f"sys.{n}" for n in ("flags", "executable", "prefix", "base_prefix")),
            *(f"sys.{n}" for n in ("exec_prefix", "orig_argv", "platform", "getwindowsversion")),
            *(f"os.get{n}" for n in ("uid", "euid", "gid", "egid", "groups", "resuid")),
            *(f"os.get{n}" for n in ("pid", "ppid", "pgrp", "pgid", "sid", "login", "loadavg")),
            *("os.uname", "os.cpu_count", "os.sched_getaffinity", "os.confstr", "os.sysconf"),
            *("platform", "pwd", "grp", "resource", "sysconfig", "socket.gethostname"),
            "getpass.getuser",
        ),
        "introspection",
    ),
    **dict.fromkeys(
        (
            *("builtins", "sys.modules"),
            *("sys._getframe", "runpy", "marshal", "types.CodeType", "types.FunctionType"),
            *("importlib.util.spec_from_file_location", "importlib.machinery", "code"),
            # The gate's tracer and what would reach into it (_gate/plugin/change_trace.py).
            *("sys.settrace", "sys.gettrace", "sys.setprofile", "sys.monitoring"),
            *("threading.settrace", "threading.gettrace", "threading.setprofile"),
            *("gc.get_objects", "gc.get_referrers", "gc.get_referents"),
        ),
        "dynamic",
    ),
    **dict.fromkeys(("ctypes", "_ctypes", "cffi", "_cffi_backend"), "native"),
}
# Imports whose target may be given at run time: dynamic unless the name is a literal.
IMPORTERS = frozenset({"__import__", "importlib.import_module", "importlib.__import__"})
# Attributes that say what they read whatever holds them (a stream's isatty, a stat's times).
ATTRIBUTES: dict[str, str] = {
    "isatty": "terminal",
    **dict.fromkeys(
        (*(f"st_{n}time" for n in ("m", "a", "c", "birth")), "st_mtime_ns", "st_ctime_ns"),
        "clock",
    ),
    # A frame's globals, its caller, and its tracer (the gate's: _gate/plugin/change_trace.py).
    **dict.fromkeys(
        ("__builtins__", "f_globals", "f_back", "f_trace", "f_trace_lines", "f_trace_opcodes"),
        "dynamic",
    ),
}
# String literals that name the world: folders outside the working directory, the kernel's
# clocks and the process's own view of itself, and the preloads a perturbation could use.
PREFIXES: dict[str, str] = {
    "/proc/uptime": "clock",
    "/proc/stat": "clock",
    "/proc/self/": "introspection",
    "/proc/1/": "introspection",
    **dict.fromkeys(
        ("/proc/", "/sys/", "/etc/", "/dev/", "/tmp/", "/var/", "/run/", "/home/", "/root/"),
        "filesystem",
    ),
    "/tmp": "filesystem",
    "~/": "filesystem",
}
WORDS: dict[str, str] = {
    "LD_PRELOAD": "introspection",
    "LD_LIBRARY_PATH": "introspection",
    "FAKETIME": "introspection",
    "faketime": "introspection",
    "uid_map": "introspection",
    "gid_map": "introspection",
    "/.dockerenv": "introspection",
}
MODULE = "<module>"  # the function name of a module's top-level code


@dataclass(frozen=True)
class Reach:
    """One function of the package and what it reaches directly: capability -> its lines."""

    module: str  # dotted, as the build installs it
    path: str  # where it is in its tree
    function: str  # `name`, `Class.name`, `outer.inner`, or <module>
    capabilities: Mapping[str, tuple[int, ...]]
    span: frozenset[int] = frozenset()  # its own lines (a function nested in it has its own)


def reaches(source: str | bytes, module: str, path: str) -> list[Reach]:
    """Every function of one module, and its top-level code, with what each reaches. Raises
    SyntaxError for a source this Python cannot read."""
    tree = ast.parse(source)
    aliases = imported(tree)
    found: list[Reach] = []
    for name, body in scopes(tree):
        seen = Seen(aliases)
        for node in body:
            seen.visit(node)
        if seen.lines:
            lines = {cap: tuple(sorted(rows)) for cap, rows in sorted(seen.lines.items())}
            found.append(Reach(module, path, name, lines, own_lines(body)))
    return found


def own_lines(body: Sequence[ast.AST]) -> frozenset[int]:
    """The lines a scope's nodes span, but the bodies of the functions and classes in it."""
    lines: set[int] = set()
    inner: set[int] = set()
    for node in body:
        first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if first is not None and last is not None:
            lines.update(range(first, last + 1))
        for sub in ast.walk(node):
            if isinstance(sub, (*FUNCTIONS, ast.ClassDef)) and sub.end_lineno is not None:
                inner.update(range(sub.body[0].lineno, sub.end_lineno + 1))
    return frozenset(lines - inner)


def scopes(tree: ast.Module) -> Iterator[tuple[str, list[ast.AST]]]:
    """The module's own statements, then each function's and each class's, under its dotted
    name (`Class.method`, `outer.inner`); a function or class nested in another is a scope of
    its own, wherever it stands (under an `if`, a `try`'s handler, a loop)."""
    yield MODULE, list(tree.body)
    stack: list[tuple[str, ast.AST]] = [("", node) for node in tree.body]
    while stack:
        prefix, node = stack.pop()
        if isinstance(node, FUNCTIONS):
            name = f"{prefix}{node.name}"
            yield name, [*node.decorator_list, node.args, *node.body]
            stack += [(f"{name}.", child) for child in node.body]
        elif isinstance(node, ast.ClassDef):
            name = f"{prefix}{node.name}"
            yield name, [*node.decorator_list, *node.bases, *node.keywords, *node.body]
            stack += [(f"{name}.", child) for child in node.body]
        else:
            blocks = (ast.stmt, ast.excepthandler, ast.match_case)
            stack += [(prefix, c) for c in ast.iter_child_nodes(node) if isinstance(c, blocks)]


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def imported(tree: ast.Module) -> dict[str, str]:
    """Each name the module binds to something it imports, anywhere in the file, as the
    dotted name it stands for; `m = importlib.import_module("os")` binds too."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:  # `import a.b` binds a; `import a.b as c` binds c to a.b
                root = alias.name.split(".")[0]
                names[alias.asname or root] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            target_name = literal_import(value, names)
            if isinstance(target, ast.Name) and target_name:
                names[target.id] = target_name
    return names


def literal_import(node: ast.AST, names: Mapping[str, str]) -> str:
    """The module `__import__("x")` or `importlib.import_module("x")` imports, else ""."""
    if isinstance(node, ast.Call) and qualified(node.func, names) in IMPORTERS:
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return ""


def qualified(node: ast.AST, names: Mapping[str, str]) -> str:
    """The dotted name an expression stands for (`o.environ` -> os.environ where `import os
    as o`; a builtin by its own name), or "" when no import names its root."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call) and getattr_name(node):
            parts.append(getattr_name(node))
            node = node.args[0]
        elif isinstance(node, ast.Call) and (module := literal_import(node, names)):
            return ".".join([module, *reversed(parts)])
        else:
            break
    if not isinstance(node, ast.Name):
        return ""
    root = names.get(node.id, node.id if node.id in ("getattr", "__import__") else "")
    return ".".join([root, *reversed(parts)]) if root else ""


# Builtins that run or reach code named at run time, wherever the name is read (`e = eval`);
# `vars` only when called, since it is a common variable name.
DYNAMIC_BUILTINS = frozenset({"eval", "exec", "compile", "globals", "__builtins__"})


def getattr_name(node: ast.Call) -> str:
    """The literal name of `getattr(x, "name")`, else ""."""
    if not (isinstance(node.func, ast.Name) and node.func.id == "getattr"):
        return ""
    if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
        value = node.args[1].value
        return value if isinstance(value, str) else ""
    return ""


def capability_of(name: str) -> str:
    """The capability a qualified name reaches, by its longest listed prefix; "" for none."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        found = NAMES.get(".".join(parts[:end]))
        if found:
            return found
    return ""


@dataclass
class Seen(ast.NodeVisitor):
    """What one scope's statements reach, line by line; a nested function is skipped (it is
    a scope of its own), a lambda is not."""

    names: Mapping[str, str]
    lines: dict[str, set[int]] = field(default_factory=dict)

    def add(self, capability: str, node: ast.AST) -> None:
        if capability:
            self.lines.setdefault(capability, set()).add(getattr(node, "lineno", 0))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return  # its own scope

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        return

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        return  # its own scope, its methods theirs

    def visit_Expr(self, node: ast.Expr) -> None:
        if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            self.generic_visit(node)  # a docstring names no folder it opens

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = qualified(node, self.names)
        self.add(capability_of(name) or ATTRIBUTES.get(node.attr, ""), node)
        if node.attr == "__dict__" and qualified(node.value, self.names):
            self.add("dynamic", node)  # a module's namespace, any name of it
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            return  # binding a name reaches nothing; reading it does
        if node.id in self.names:
            self.add(capability_of(self.names[node.id]), node)
        elif node.id in DYNAMIC_BUILTINS:
            self.add("dynamic", node)

    def visit_Call(self, node: ast.Call) -> None:
        callee = qualified(node.func, self.names)
        if self.namespace_of_a_module(node):
            self.add("dynamic", node)
        elif callee in IMPORTERS and not literal_import(node, self.names):
            self.add("dynamic", node)  # a module named at run time
        elif callee == "getattr" and not getattr_name(node) and self.module_arg(node):
            self.add("dynamic", node)  # a module's attribute named at run time
        elif getattr_name(node):  # `getattr(os, "environ")`, standing alone
            self.add(capability_of(qualified(node, self.names)), node)
        self.generic_visit(node)

    def namespace_of_a_module(self, node: ast.Call) -> bool:
        """`vars()` (the caller's names) or `vars(module)`; `vars(self)` is an object's."""
        if not (isinstance(node.func, ast.Name) and node.func.id == "vars"):
            return False
        return "vars" not in self.names and (not node.args or self.module_arg(node))

    def module_arg(self, node: ast.Call) -> bool:
        first = node.args[0] if node.args else None
        return isinstance(first, ast.Name) and first.id in self.names

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, bytes):
            text = node.value.decode("latin-1")
        elif isinstance(node.value, str):
            text = node.value
        else:
            return
        for capability in literal_capabilities(text):
            self.add(capability, node)


def literal_capabilities(text: str) -> set[str]:
    """What a string literal names: a folder outside the working directory by its first
    listed prefix (longest first), and the words of preloads and user namespaces."""
    found = {cap for word, cap in WORDS.items() if word in text}
    for prefix, capability in PREFIXES.items():  # a folder's prefix ends in a slash
        if text == prefix or (prefix.endswith("/") and text.startswith(prefix)):
            found.add(capability)
            break
    return found


@dataclass(frozen=True)
class Added:
    """A capability a function of the patch reaches that its base version did not."""

    module: str
    path: str
    function: str
    capability: str
    line: int
    new_to_module: bool  # no function of the base's module reached it
    span: frozenset[int] = frozenset()  # the function's own lines in the patch

    @property
    def said(self) -> str:
        return f"{self.capability} at {self.path}:{self.line} in {self.function}"

    def row(self) -> dict[str, object]:
        return {
            "module": self.module,
            "path": self.path,
            "function": self.function,
            "capability": self.capability,
            "line": self.line,
            "new_to_module": self.new_to_module,
        }


def added(
    base: Sequence[Reach], patch: Sequence[Reach], package: Iterable[str] = ()
) -> list[Added]:
    """What each function of the patch reaches that the same function (same module, same
    name) of the base did not; a function the base lacks gains all it reaches. A gain is new
    to its module when no function of the base's module reached it; for a module the base did
    not have (new, or moved), when no module of the base's package did (`package`: what all of
    its modules reach)."""
    before = {(r.module, r.function): r.capabilities for r in base}
    modules: dict[str, set[str]] = {}
    for reach in base:
        modules.setdefault(reach.module, set()).update(reach.capabilities)
    found = []
    for reach in patch:
        had = before.get((reach.module, reach.function), {})
        known = modules.get(reach.module, set(package))
        for capability, lines in reach.capabilities.items():
            if capability not in had:
                new = capability not in known
                where = (reach.module, reach.path, reach.function)
                found.append(Added(*where, capability, lines[0], new, reach.span))
    return sorted(found, key=lambda a: (a.path, a.line, a.capability))
