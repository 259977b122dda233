"""Change coverage: which of the patch's changed lines a run of its code executed, and for
which evidence (a case, a test, a property).

    python change_trace.py SPEC COMMAND [ARG ...]      # a CLI case: COMMAND runs traced

The gate writes SPEC (JSON: `files`, each installed file of the patch's build with its changed
lines; `out`, where hits go; `token`, the run's secret; `label`, the evidence's name) into a
folder of the run's own; the tracer reads and removes it before any of the patch's code runs.
In a pytest run the evidence plugin starts it (`--oracle-trace SPEC`) and names each test as
it runs; for a CLI case this file is the program: it starts the tracer and runs COMMAND's
console script as Python would (argv, `__main__`, exit status and tracebacks as without it).

Each changed line is written once per evidence as it first runs (`TOKEN\\tEVIDENCE\\tFILE\\tLINE`,
so a run killed or ended by `os._exit` keeps what it ran); so is each conditional branch on a
changed line, as its code first runs (`LINE:OFFSET`: both ways are owed), and each way it went
(`LINE:OFFSET:f`, fell through; `LINE:OFFSET:j`, jumped): `a if probe() else b` runs its line
whichever way it goes, and one way never taken is a world no run met. The end of the run
writes `TOKEN\\tend\\tFINDINGS`: what changed in the tracer meanwhile (removed or replaced).
The gate reads only lines with the run's token; any other line is forged.

In reach mode (`"reach": true`, a run of the parent's build for safe test selection,
_gate/runs/reach.py) it records each call of a function of the watched files, once per
evidence, as `@FIRSTLINE` (its code's first line), and each new process a test starts (audit
events: its children run code no tracer here sees), as `process`.

Between tests (the evidence plugin asks), a tracer a test unset or replaced is set again, and
the test is named `untraced`: a recursion past Python's limit unsets a trace function, a test
of tracing sets its own. What ran in it after that is unknown; the tests after it are traced.

`sys.settrace` on every version: the frames of watched files trace their lines (and, where a
changed line holds a branch, their instructions); any other call returns at once. Stdlib
only: it runs in the build's interpreter.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading

TYPE_CHECKING = False  # typing's own costs an import at each traced start: mypy reads this alike
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType, FrameType, ModuleType, TracebackType
    from typing import Any

    TraceFunction = Callable[[FrameType, str, Any], Any]

END = "end"
# The label of the patch's own tests' runs: shown, never counted as evidence that ran a line
# (a test the patch writes can build the world its code looks for).
OWN_TESTS = "test"
# Reach mode: what a fixture of these scopes calls can reach the tests of every file that
# uses it, so the evidence plugin names it SHARED after the test it is set up for.
SHARED, SHARED_SCOPES = "@shared", ("package", "session")
# Audit events of a new process (fork, exec, spawn): reach mode records them.
SPAWNS = frozenset(
    {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork"}
    | {"os.forkpty", "pty.spawn"}
)
UNTRACED = "untraced"  # the tracer was unset or replaced in this evidence: set again after it


class Tracer:
    """Records, per evidence, the watched lines that ran, and which way each conditional
    branch on them went; one per process."""

    def __init__(
        self,
        files: dict[str, frozenset[int]],
        out: str,
        token: str,
        label: str,
        reach: bool = False,
    ) -> None:
        self.files = {os.path.realpath(path): lines for path, lines in files.items()}
        self.reach = reach
        self.paths: dict[str, str] = {}
        self.token = token
        self.label = label
        self.evidence = label
        self.fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.seen: set[tuple[str, str, str]] = set()
        self.by_name: dict[str, TraceFunction | None] = {}
        self.lock = threading.Lock()
        self.ended = False
        # One object: `sys.gettrace() is` compares it.
        self.trace: TraceFunction = self.reached if reach else self.call

    def name(self, evidence: str) -> None:
        """What runs from now on: `label evidence` (a test's id), or the label alone."""
        self.evidence = f"{self.label} {evidence}".strip()

    def start(self) -> None:
        sys.settrace(self.trace)
        threading.settrace(self.trace)
        if self.reach:
            sys.addaudithook(self.audit)

    def restore(self) -> None:
        """Between tests: a tracer unset or replaced since is named for the evidence then
        running (what it ran after that is unknown) and set again for the tests after it."""
        if sys.gettrace() is self.trace and threading.gettrace() is self.trace:
            return
        self.hit("", UNTRACED)
        sys.settrace(self.trace)
        threading.settrace(self.trace)

    def reached(self, frame: FrameType, event: str, arg: Any) -> None:
        """Reach mode: a call of a watched file's function, by its code's first line."""
        code = frame.f_code
        try:
            path = self.paths[code.co_filename]
        except KeyError:
            name = code.co_filename
            real = os.path.realpath(name) if name[:1] == os.sep else ""
            path = self.paths[name] = real if real in self.files else ""
        if path and code.co_name != "<module>":  # a module's own code: no function's
            self.hit(path, f"@{code.co_firstlineno}")

    def audit(self, event: str, args: Any) -> None:
        if event in SPAWNS:
            self.hit("", "process")

    def call(self, frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
        filename = frame.f_code.co_filename
        try:
            local = self.by_name[filename]
        except KeyError:
            local = self.by_name[filename] = self.local(filename)
        if local is not None:
            local(frame, event, arg)  # its branches known, and traced by instruction if any
        return local

    def local(self, filename: str) -> TraceFunction | None:
        """The tracer of a watched file's frames; None (no line events) for any other. A frame
        whose code has a conditional branch on a watched line is traced by instruction too:
        the instruction after the branch says which way it went."""
        path = os.path.realpath(filename) if filename[:1] == os.sep else ""
        lines = self.files.get(path)
        if not lines:
            return None
        codes: dict[CodeType, dict[int, tuple[int, int, int]]] = {}
        after: dict[FrameType, tuple[int, int, int, int]] = {}

        def trace(frame: FrameType, event: str, arg: Any) -> TraceFunction:
            if event == "opcode":
                went = after.pop(frame, None)
                if went is not None:
                    line, branch, fall, jump = went
                    way = "f" if frame.f_lasti == fall else "j" if frame.f_lasti == jump else ""
                    if way:
                        self.hit(path, f"{line}:{branch}:{way}")
                known = codes.get(frame.f_code, {}).get(frame.f_lasti)
                if known is not None:
                    after[frame] = (known[0], frame.f_lasti, known[1], known[2])
            elif event == "line" and frame.f_lineno in lines:
                self.hit(path, str(frame.f_lineno))
            elif event == "call":
                self.enter(frame, path, lines, codes)
            elif event == "return":
                after.pop(frame, None)
            return trace

        return trace

    def enter(
        self,
        frame: FrameType,
        path: str,
        lines: frozenset[int],
        codes: dict[CodeType, dict[int, tuple[int, int, int]]],
    ) -> None:
        code = frame.f_code
        if code not in codes:
            codes[code] = branches(code, lines)
            for offset, (line, _, _) in codes[code].items():
                self.hit(path, f"{line}:{offset}")  # the branch exists: both ways are owed
        if codes[code]:
            frame.f_trace_opcodes = True

    def hit(self, path: str, where: str) -> None:
        key = (self.evidence, path, where)
        if key in self.seen or self.ended:  # a thread still traced after the end writes nothing
            return
        with self.lock:
            if not self.ended:
                self.seen.add(key)
                self.write(f"{self.evidence}\t{path}\t{where}")

    def write(self, line: str) -> None:
        text = f"{self.token}\t{line}\n".encode("utf-8", "backslashreplace")
        os.write(self.fd, text)

    def finish(self) -> None:
        """The end line: what changed in the tracer while the run ran."""
        found = []
        if sys.gettrace() is not self.trace:
            found.append("sys.settrace: the gate's tracer was removed or replaced")
        if threading.gettrace() is not self.trace:
            found.append("threading.settrace: the gate's tracer was removed or replaced")
        sys.settrace(None)
        with self.lock:  # a thread still traced writes nothing after this
            if self.ended:
                return
            self.ended = True
            self.write(f"{END}\t{json.dumps(found)}")
            os.close(self.fd)


# Conditional jumps Python adds that no line of the source chose: whether `with`'s exit
# swallowed an exception, whether an `except` clause matches (after these instructions), and
# an `assert` that fails (its jump leads to the AssertionError). Each goes its other way only
# when something raised: an untested error path, never a world.
HIDDEN_AFTER = frozenset({"WITH_EXCEPT_START", "CHECK_EXC_MATCH", "CHECK_EG_MATCH"})


def branches(code: CodeType, lines: frozenset[int]) -> dict[int, tuple[int, int, int]]:
    """The conditional branches of `code` on watched lines: offset -> (line, the offset it
    falls through to, the offset it jumps to). A loop's end is its body's lines."""
    import dis  # only once a watched file's code runs
    import itertools

    line_of = {o: n for start, end, n in code.co_lines() if n for o in range(start, end, 2)}
    steps = list(dis.get_instructions(code))
    at = {step.offset: step for step in steps}
    found = {}
    for index, (here, then) in enumerate(itertools.pairwise(steps)):
        name = here.opname
        conditional = "JUMP" in name and "_IF_" in name and "EXC_MATCH" not in name
        line = line_of.get(here.offset)
        if not conditional or line not in lines or not isinstance(here.argval, int):
            continue
        before = {step.opname for step in steps[max(0, index - 2) : index]}
        ends = (then, at.get(here.argval))
        failing = any(step is not None and step.opname == "LOAD_ASSERTION_ERROR" for step in ends)
        if not (before & HIDDEN_AFTER or failing):
            found[here.offset] = (line, then.offset, here.argval)
    return found


def load(spec_path: str) -> Tracer:
    """The tracer SPEC describes; SPEC is removed as it is read."""
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    os.unlink(spec_path)
    files = {str(path): frozenset(int(n) for n in lines) for path, lines in spec["files"].items()}
    label, reach = str(spec.get("label", "")), bool(spec.get("reach"))
    return Tracer(files, str(spec["out"]), str(spec["token"]), label, reach)


HERE = os.path.realpath(__file__)


def without_ours(tb: TracebackType | None) -> TracebackType | None:
    """A traceback as Python prints it without this file's frames."""
    while tb is not None and tb.tb_frame.f_code.co_filename == HERE:
        tb = tb.tb_next
    return tb


def main_module(command: str) -> ModuleType:
    """A `__main__` as Python makes one for a script it runs (`python COMMAND`): no package
    and no spec (click tells `python -m` apart by them), a loader of the file, the builtins."""
    import builtins
    import importlib.machinery
    import types

    module = types.ModuleType("__main__")
    module.__file__ = command
    module.__loader__ = importlib.machinery.SourceFileLoader("__main__", command)
    module.__builtins__ = builtins  # type: ignore[attr-defined]
    module.__cached__ = None  # type: ignore[attr-defined]
    module.__annotations__ = {}
    return module


def run_traced(argv: list[str]) -> None:
    """Start the tracer SPEC describes, then run COMMAND (a console script) as its shebang's
    Python would: COMMAND is argv[0], its folder leads sys.path, it runs as `__main__`."""
    spec, command, *args = argv
    with open(command, "rb") as script:
        code = compile(script.read(), command, "exec", dont_inherit=True)
    tracer = load(spec)
    atexit.register(tracer.finish)
    hook = sys.excepthook

    def shown(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        hook(kind, value.with_traceback(without_ours(tb)), value.__traceback__)

    sys.excepthook = shown
    sys.argv = [command, *args]
    sys.path[0] = os.path.dirname(command)
    main = sys.modules["__main__"] = main_module(command)
    tracer.start()
    exec(code, vars(main))


if __name__ == "__main__":
    run_traced(sys.argv[1:])
