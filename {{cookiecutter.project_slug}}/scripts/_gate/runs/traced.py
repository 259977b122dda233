"""A traced run of the patch's code: the spec its tracer reads, and which evidence ran each
changed line, read back from what the tracer wrote (_gate/plugin/change_trace.py).

Only lines with the run's token count, each naming a line the gate watched; any other line is
forged. A run that wrote no end line ended before its tracer could check itself (killed, its
timeout, `os._exit`): what it wrote still counts, as lines that ran.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate.core.context import ChangedFile
from _gate.plugin.change_trace import END, UNTRACED


@dataclass(frozen=True)
class Trace:
    """What a run of the patch's code traces: the changed files, and the evidence's name."""

    changed: tuple[ChangedFile, ...]
    label: str  # "crossrun", "case greet [terminal]": a test's id follows it in a pytest run
    # Tests run in the process beside the patch's code (a pytest run): a tracer removed there
    # may be a test's doing (a test of tracing), so it is lost coverage, not the patch's act.
    tests: bool = False


@dataclass(frozen=True)
class Watch:
    """One traced run: the spec the tracer reads (and removes) and the file it writes."""

    spec: Path
    out: Path
    token: str


def watch(folder: Path, trace: Trace | None) -> Watch | None:
    """A tracer spec for one run in `folder` (a folder the run may write); None when there is
    nothing to trace (no trace asked, or the patch changed no line of code)."""
    files = {row.installed: list(row.lines) for row in trace.changed if row.lines} if trace else {}
    if trace is None or not files:
        return None
    return write_spec(folder, files, trace.label)


def write_spec(
    folder: Path, files: Mapping[str, list[int]], label: str, *, reach: bool = False
) -> Watch:
    """The spec the tracer reads (_gate/plugin/change_trace.py) for one run, in `folder`: the
    files it watches, with their lines (none in reach mode), and the run's secret token."""
    # The files' names say nothing of the token the run's lines must carry.
    token, name = secrets.token_hex(16), secrets.token_hex(4)
    out, spec = folder / f"trace-{name}", folder / f"spec-{name}.json"
    payload = {"files": dict(files), "out": str(out), "token": token, "label": label}
    spec.write_text(json.dumps({**payload, "reach": reach}), "utf-8")
    return Watch(spec, out, token)


@dataclass(frozen=True)
class Written:
    """What a run's tracer wrote: its records, each split into its fields (the run's token
    taken off), how many lines lacked the token, and what its end line said changed in the
    tracer (None: no end line, the run ended first)."""

    records: list[list[str]]
    forged: int
    ended: list[str] | None


def read_written(found: Watch) -> Written | None:
    """The tracer's file of one run (its spec removed); None where there is none: the run
    never started its tracer."""
    found.spec.unlink(missing_ok=True)
    try:
        text = found.out.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
    records, forged, ended = [], 0, None
    for line in text.splitlines():
        token, _, rest = line.partition("\t")
        parts = rest.split("\t")
        if token != found.token:
            forged += 1
        elif parts[0] == END and len(parts) == 2:
            try:
                ended = [str(what) for what in json.loads(parts[1])]
            except (ValueError, TypeError):  # written with the token, not by the tracer
                forged += 1
        else:
            records.append(parts)
    return Written(records, forged, ended)


@dataclass
class Coverage:
    """Which evidence ran each changed line, and each way of each branch on one (by source
    path), and what went wrong in runs."""

    hits: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    # `LINE:OFFSET` (a branch there) and `LINE:OFFSET:f|j` (a way it went) -> evidence
    branches: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # Runs whose hits were forged, or whose tracer the patch's code alone (a case, the
    # oracle's worker) removed or replaced: `evidence: what`.
    tampered: list[str] = field(default_factory=list)
    # Runs of tests whose tracer was removed or replaced: by a test or by the patch's code,
    # which share the process; what ran after it is not counted (it looks unrun).
    lost: list[str] = field(default_factory=list)
    runs: int = 0  # traced runs read
    unfinished: int = 0  # of them, runs that ended before the tracer's last line

    def add(self, source: str, where: str, evidence: str) -> None:
        """One record: `where` is a line, a branch, or a way a branch went."""
        if where.isdigit():
            ran = self.hits.setdefault(source, {}).setdefault(int(where), [])
        else:
            ran = self.branches.setdefault(source, {}).setdefault(where, [])
        if evidence not in ran:
            ran.append(evidence)

    def merge(self, other: Coverage) -> None:
        for source, where, evidence in records({**other.as_dict(), "runs": 0}):
            self.add(source, where, evidence)
        self.tampered += other.tampered
        self.lost += other.lost
        self.runs += other.runs
        self.unfinished += other.unfinished

    def one_way(self, source: str, counted: Callable[[Sequence[str]], bool]) -> set[int]:
        """The lines holding a branch that `counted` evidence took one way only, or never
        reached (`a and (b if c else d)` with `a` false): the caller leaves out lines it never
        ran at all."""
        ways = self.branches.get(source, {})
        found = set()
        for where in ways:
            if where.count(":") == 1:
                taken = [way for way in "fj" if counted(ways.get(f"{where}:{way}", []))]
                if len(taken) < 2:
                    found.add(int(where.split(":")[0]))
        return found

    def as_dict(self) -> dict[str, Any]:
        return {
            "hits": {
                source: {str(n): ran for n, ran in sorted(lines.items())}
                for source, lines in self.hits.items()
            },
            "branches": self.branches,
            "tampered": self.tampered,
            "lost": self.lost,
            "runs": self.runs,
            "unfinished": self.unfinished,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Coverage:
        found = cls(runs=int(data["runs"]), unfinished=int(data["unfinished"]))
        found.tampered = [str(t) for t in data["tampered"]]
        found.lost = [str(t) for t in data.get("lost") or []]
        for source, where, evidence in records(data):
            found.add(source, where, evidence)
        return found


def records(data: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """Each (source, line or branch or way, evidence) of a coverage as JSON holds it."""
    for table in (data["hits"], data.get("branches") or {}):
        for source, keyed in table.items():
            for where, ran in keyed.items():
                for evidence in ran:
                    yield str(source), str(where), str(evidence)


TRACER = Path(__file__).resolve().parent.parent / "plugin" / "change_trace.py"


def interpreter(command: Path) -> list[str]:
    """The Python a console script's `#!` line names, with its options ([] for any other
    program: a shell wrapper, a binary, uv's trampoline for a long path)."""
    try:
        with command.open("rb") as script:
            line = script.readline(512)
    except OSError:
        return []
    words = line[2:].decode("utf-8", "replace").split() if line.startswith(b"#!") else []
    named = Path(words[0]).name if words and words[0].startswith("/") else ""
    return words if named.startswith("python") and len(words) <= 2 else []


@dataclass(frozen=True)
class Traced:
    """A command as it runs, traced where it can be: the folder of its own it may write
    besides its others (none where untraced), and what it ran once it ended."""

    cmd: list[str]
    writable: tuple[Path, ...] = ()
    found: Watch | None = None
    trace: Trace | None = None

    def coverage(self) -> Coverage | None:
        return read_trace(self.found, self.trace) if self.found and self.trace else None


def traced_command(
    command: Path, argv: Sequence[str], root: Path, trace: Trace | None
) -> AbstractContextManager[Traced]:
    """`command argv` as it runs traced, from a folder of its own under `root`: its Python
    starts the tracer (a copy there), which runs the console script as that Python would.
    Untraced where nothing is traced or `command` is no Python script: its changed lines then
    show as run by no case."""
    return booted(command, argv, root, lambda folder: watch(folder, trace), trace)


@contextmanager
def booted(
    command: Path,
    argv: Sequence[str],
    root: Path,
    spec: Callable[[Path], Watch | None],
    trace: Trace | None = None,
) -> Iterator[Traced]:
    """`command argv` started by the tracer whose spec `spec` writes into a folder of the
    run's own (None: nothing to trace), where `command` is a Python script."""
    python = interpreter(command)
    if not python:
        yield Traced([str(command), *argv])
        return
    with tempfile.TemporaryDirectory(dir=root) as name:
        folder = Path(name)
        found = spec(folder)
        if found is None:
            yield Traced([str(command), *argv])
            return
        boot = folder / TRACER.name
        shutil.copyfile(TRACER, boot)
        cmd = [*python, str(boot), str(found.spec), str(command), *argv]
        yield Traced(cmd, (folder,), found, trace)


def covered(found: Iterable[Coverage | None]) -> Coverage:
    """The coverage of several runs, as one (a run that was not traced adds nothing)."""
    total = Coverage()
    for one in found:
        if one is not None:
            total.merge(one)
    return total


WHERE = re.compile(r"(\d+)(?::\d+(?::[fj])?)?")


def well_formed(where: str, lines: set[int]) -> bool:
    """A watched line, a branch on one, or a way one went."""
    found = WHERE.fullmatch(where)
    return found is not None and int(found.group(1)) in lines


def read_trace(found: Watch, trace: Trace) -> Coverage:
    """What one traced run wrote. No file (the run never started its tracer) covers nothing;
    a line without the run's token, or naming a line nobody watched, is forged."""
    coverage = Coverage(runs=1, unfinished=1)
    written = read_written(found)
    if written is None:
        return coverage
    label = trace.label
    forged = f"{label}: a line the gate's tracer did not write"
    coverage.tampered += [forged] * written.forged
    removed = [f"{label}: {what}" for what in written.ended or []]
    (coverage.lost if trace.tests else coverage.tampered).extend(removed)
    sources = {row.installed: (row.source, set(row.lines)) for row in trace.changed}
    for parts in written.records:
        if parts[1:] == ["", UNTRACED]:  # a test unset it; the tracer set it again after
            dropped = f"{parts[0]}: the gate's tracer was removed or replaced (set again after)"
            (coverage.lost if trace.tests else coverage.tampered).append(dropped)
            continue
        watched = sources.get(parts[1]) if len(parts) == 3 else None
        if watched is None or not well_formed(parts[2], watched[1]):
            coverage.tampered.append(forged)
            continue
        coverage.add(watched[0], parts[2], parts[0])
    coverage.unfinished = 0 if written.ended is not None else 1
    return coverage
