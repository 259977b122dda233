"""Safe test selection: the parent's tests that can reach the patch's change, measured on the
parent's build in the world a perturbed rerun uses (docs/perturbation.md).

A test that called none of the base functions the patch changed (_gate/change/scopes.py) runs
the same code on the patch's build: its run can differ only once it runs a changed line, and
every changed line runs in a changed function. Tests share their process, and what changed code
leaves behind (a module's state, a file) can change any test after it; none before. So the
crossrun's perturbed run of the patch runs the test files from the first one (in the order the
parent's run ran them) that called a changed function there on the parent's build, or started a
process, to the last; the files before it run exactly as on the parent. The parent's run under
the same perturbation records the calls (the reach tracer, _gate/plugin/change_trace.py: each
function of the parent's package a test file called, and whether it started a process, whose
code no tracer sees); it is kept with the other kept runs (_gate/runs/reuse.py), by the
parent's build and tests and the world, never measured on the patch's code.

A case is a process of its own: its perturbed run on the patch is left out where the
recording's run of it there called no changed function and started no process.

Every test file runs when selection cannot be sure: a change outside any function, or to a
file that is not Python, to the dependencies or the entry points (ChangedFunctions.everything);
a changed function called while collecting or by a fixture shared across files (`package`,
`session`); a run that left no result, or whose tracer was removed or replaced outside any
test file's tests (a test file that did it is a file that reaches the change: what it ran after
that is unknown), or that wrote a line without the run's token. $ORACLE_SELECT=off turns
selection off.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate.core.context import ChangedFunctions
from _gate.core.protocol import FailClosed
from _gate.plugin.change_trace import SHARED, UNTRACED
from _gate.runs.traced import Traced, Watch, booted, read_written, write_spec

LABEL = "reach"
PROCESS = "process"  # a test started a process: its children run code no tracer sees
# What a test file may reach without a changed function in its record: a process it started,
# the tracer unset in one of its tests (the tracer set again after it).
UNKNOWN = frozenset({PROCESS, UNTRACED})
SELECT_ENV = "ORACLE_SELECT"


def selecting() -> bool:
    """$ORACLE_SELECT: `on` (or unset) selects the tests a perturbed rerun runs, `off` runs
    every test there; anything else fails closed."""
    value = os.environ.get(SELECT_ENV, "").strip().lower()
    if value not in ("", "on", "off"):
        raise FailClosed(
            f"${SELECT_ENV}={value!r}: expected `on` or `off` (safe test selection of the "
            "perturbed reruns); set one of them, or unset it"
        )
    return value != "off"


def watch_reach(folder: Path, modules: Mapping[str, str]) -> Watch:
    """The reach tracer's spec for one run of the parent's build, in `folder` (`modules`:
    the parent's package modules, the path frames name -> as installed)."""
    return write_spec(folder, {path: [] for path in modules}, LABEL, reach=True)


@dataclass
class Reached:
    """Which functions of the parent's package each test file called (`file`: a node id's
    part before `::`), which were called outside any one file's tests, and why the record
    cannot be used ("" when it can)."""

    files: dict[str, set[str]] = field(default_factory=dict)
    outside: set[str] = field(default_factory=set)
    broken: str = ""
    order: list[str] = field(default_factory=list)  # every test file, as the run ran them
    kept: bool = False  # read from the cache: an earlier judgment on this base took it

    def as_dict(self) -> dict[str, Any]:
        files = {name: sorted(keys) for name, keys in sorted(self.files.items())}
        outside = sorted(self.outside)
        return {"files": files, "outside": outside, "broken": self.broken, "order": self.order}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reached:
        files = {str(name): {str(k) for k in keys} for name, keys in data["files"].items()}
        order = [str(name) for name in data["order"]]
        return cls(files, {str(k) for k in data["outside"]}, str(data["broken"]), order)

    @classmethod
    def readable(cls, data: Mapping[str, Any] | None) -> Reached | None:
        """A record kept by an earlier judgment; None where there is none this code wrote."""
        try:
            found = None if data is None else cls.from_dict(data)
        except (KeyError, TypeError, AttributeError):
            return None
        if found is not None:
            found.kept = True
        return found


def read_reach(found: Watch, modules: Mapping[str, str]) -> Reached:
    """What the reach tracer of one run wrote: calls as `installed path:first line`."""
    written = read_written(found)
    if written is None:
        return Reached(broken="the parent's run never started the reach tracer")
    if written.forged or any(len(parts) != 3 for parts in written.records):
        return Reached(broken="a line the reach tracer did not write")
    if written.ended:
        return Reached(broken=f"the reach tracer: {written.ended[0]}")
    reached, prefix = Reached(), f"{LABEL} "
    for evidence, path, where in written.records:
        key = where if where in UNKNOWN else f"{modules.get(path, path)}:{where[1:]}"
        node = evidence.removeprefix(prefix) if evidence.startswith(prefix) else ""
        if not node or node.endswith(f" {SHARED}"):
            reached.outside.add(key)
        else:
            reached.files.setdefault(node.split("::", 1)[0], set()).add(key)
    if UNTRACED in reached.outside:
        reached.broken = "the reach tracer was unset while collecting or between tests"
    if written.ended is None:
        reached.broken = "the parent's run ended before the reach tracer's last line"
    return reached


def reached_command(
    command: Path, argv: Sequence[str], root: Path, modules: Mapping[str, str]
) -> AbstractContextManager[Traced]:
    """A case's command on the parent's build, started by the reach tracer (`modules`: the
    parent's package modules, the path frames name -> as installed)."""
    return booted(command, argv, root, lambda folder: watch_reach(folder, modules))


def calls(reached: Reached) -> list[str] | None:
    """Every function a run called and whether it started a process (None: the record is
    broken): a case is one process, so none is outside it."""
    if reached.broken:
        return None
    return sorted(reached.outside.union(*reached.files.values()))


def case_reaches(functions: ChangedFunctions | None, called: object) -> bool:
    """Whether a case whose perturbed run on the parent's build `called` these functions (as
    its recording holds them; anything but a list: not recorded) can reach the change."""
    if functions is None or functions.everything or not isinstance(called, list):
        return True
    return bool(set(called) & UNKNOWN.union(functions.functions))


@dataclass(frozen=True)
class Selection:
    """The test files a perturbed rerun runs (None: every one), and why."""

    files: tuple[str, ...] | None
    why: str
    reasons: Mapping[str, list[str]] = field(default_factory=dict)  # file -> what it called
    kept: bool = False  # the parent's record was kept by an earlier judgment

    def evidence(self) -> dict[str, Any]:
        chosen = None if self.files is None else list(self.files)
        said = {"selected": chosen, "why": self.why, "reasons": dict(self.reasons)}
        return {**said, "kept": self.kept}

    def holds(self, node: str) -> bool:
        return self.files is None or node.split("::", 1)[0] in self.files


def everything(why: str, kept: bool = False) -> Selection:
    return Selection(None, f"every test: {why}", kept=kept)


def run_order(nodes: Iterable[str]) -> list[str]:
    """The test files of a run's node ids, in the order it ran them."""
    return list(dict.fromkeys(node.split("::", 1)[0] for node in nodes))


def select(
    functions: ChangedFunctions | None, reached: Reached | None, present: Iterable[str]
) -> Selection:
    """The test files that can reach the change, from the parent's record of `reached`: from
    the first that called a changed function, started a process or unset the tracer, to the
    last. `present`:
    the files of the tests' copy (a node id's file the copy lacks cannot be named to
    pytest)."""
    if functions is None:
        return everything("the changed functions are not known (a run by hand)")
    if functions.everything:
        return everything(functions.everything)
    if reached is None or reached.broken:
        why = reached.broken if reached else "no record of the parent's calls"
        return everything(why, reached is not None and reached.kept)
    changed = set(functions.functions)
    if reached.outside & changed:
        first = sorted(reached.outside & changed)[0]
        return everything(f"{first} ran while collecting or in a fixture shared across files")
    reaching = changed | UNKNOWN
    reasons = {
        name: sorted(keys & reaching)
        for name, keys in sorted(reached.files.items())
        if keys & reaching
    }
    if not reasons:
        why = "no test called a changed function or started a process there"
        return Selection((), why, kept=reached.kept)
    unordered = sorted(set(reasons) - set(reached.order))
    if unordered:
        return everything(f"{unordered[0]} reached the change and has no outcome on the parent")
    chosen = tuple(reached.order[min(reached.order.index(name) for name in reasons) :])
    missing = sorted(set(chosen) - set(present))
    if missing:
        return everything(f"{missing[0]}, a file of the parent's run, is no file of the tests")
    first = next(name for name in chosen if name in reasons)
    what = f"{len(chosen)} of {len(reached.order)} test files, from {first} (the first that"
    why = f"{what} called a changed function, started a process or unset the tracer)"
    return Selection(chosen, why, reasons, reached.kept)
