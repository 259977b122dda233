"""The judgment: what the judge resolves once and every step gets, inline as this object, or as
one JSON file (`--judgment FILE`) when the step runs as a process.

It holds the base and head commits and their worktrees, the diff between them with renames,
judge.yaml parsed with every default (`config.Config`), whether a code owner reviewed the
patch (ORACLE_REVIEW=1, read here and nowhere else), the environments of the builds, and the
oracle ref's files. No step re-parses judge.yaml, re-resolves a ref or re-runs the diff when
it has a judgment; a step run by hand derives the same values from its own flags.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate.core.config import Config
from _gate.core.protocol import FailClosed, Report
from _gate.core.reports import Names, write_json
from _gate.core.seal import Seal
from _gate.plugin.shard import WHOLE, Shard

REVIEW = "ORACLE_REVIEW"
Change = tuple[str, tuple[str, ...]]  # (git status letter and score, its path or two)


# Files at the root that configure pytest: a patch that changes one changes how tests run.
PYTEST_CONFIG = ("conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")


def test_input(name: str, tests: Sequence[str]) -> bool:
    """Whether the file `name` is in a test folder or file of `tests`, or configures pytest."""
    entries = [entry.rstrip("/") for entry in (*tests, *PYTEST_CONFIG)]
    return any(name == entry or name.startswith(f"{entry}/") for entry in entries)


def touches_tests(changes: Sequence[Change], tests: Sequence[str]) -> bool:
    """Whether the diff touches a test folder or file of `tests`, or pytest's configuration."""
    return any(test_input(name, tests) for _, names in changes for name in names)


def review_requested() -> bool:
    """Whether a code owner approved the patch's protected paths: ORACLE_REVIEW=1."""
    return os.environ.get(REVIEW) == "1"


@dataclass(frozen=True)
class Kept:
    """Where a step keeps what it ran on the parent's build alone, and the two builds' digests
    that key it (no folder: it keeps and reuses nothing)."""

    folder: Path | None = None
    parent_build: str = ""
    patch_build: str = ""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Kept:
        """By hand: `--cache`, `--parent-build`, `--patch-build` (reuse.add_cache_args)."""
        return cls(args.cache, args.parent_build, args.patch_build)


@dataclass(frozen=True)
class ChangedFile:
    """One package file the patch changed, as the patch's build installs it."""

    installed: str  # its path in the patch's build (where the tracer sees it run)
    source: str  # its path in the patch's tree (what the summary names)
    lines: tuple[int, ...]  # the changed lines that hold code

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> ChangedFile:
        return cls(str(row["installed"]), str(row["source"]), tuple(int(n) for n in row["lines"]))


@dataclass(frozen=True)
class ChangedFunctions:
    """What a parent's test must call to reach the patch's change (safe test selection,
    _gate/runs/reach.py): each base function the patch changed, as `installed path:first
    line` on the parent's build; or why any test can reach it (`everything`)."""

    modules: Mapping[str, str]  # the parent's package modules: the path frames name -> installed
    functions: tuple[str, ...]
    everything: str = ""

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> ChangedFunctions:
        modules = {str(k): str(v) for k, v in row["modules"].items()}
        return cls(modules, tuple(str(f) for f in row["functions"]), str(row["everything"]))


@dataclass(frozen=True)
class Builds:
    """The two builds under judgment, and the oracle's own environment holding neither (None
    where the base has no property oracle to run in it)."""

    parent: Path
    patch: Path
    oracle: Path | None = None
    oracle_seal: Seal | None = (
        None  # the oracle env's digest, taken when built (_gate/core/seal.py)
    )
    same: bool = False  # the patch's build is the parent's, file for file (_gate/runs/reuse.py)
    parent_build: str = ""  # the parent build's digest, which keys its kept runs
    patch_build: str = ""  # the patch's: its runs are kept for a judgment whose base it becomes
    cache: Path | None = None  # where those are kept; None when the patch ran unconfined
    # What a step took beside the patch's build (its contract's `beside_build`), sealed.
    beside: Mapping[str, Seal] = field(default_factory=dict)
    # The package files the patch changed, with their lines of code: what each run of the
    # patch's code traces (_gate/plugin/change_trace.py).
    changed: tuple[ChangedFile, ...] = ()
    # The base's functions the patch changed: which parent tests can reach it (None: not known,
    # every test runs).
    functions: ChangedFunctions | None = None

    @property
    def kept(self) -> Kept:
        """Where a step keeps what it ran on the parent's build alone, and its keys."""
        return Kept(self.cache, self.parent_build, self.patch_build)


@dataclass(frozen=True)
class OracleRef:
    """The protected oracle ref's files, copied out (never read from the branch); `unreadable`
    says why there are none (no such ref)."""

    quarantine: Path | None = None
    ledger: Path | None = None
    strength: Path | None = None
    unreadable: str = ""


@dataclass(frozen=True)
class Judgment:
    """One judgment, as every step sees it."""

    repo: Path
    reports: Path
    base: str
    head: str
    parent: Path  # the base's worktree: the gate's files come from here
    patch: Path  # the head's worktree
    config: Config
    review: bool
    changes: tuple[Change, ...]
    shard: Shard = WHOLE
    builds: Builds | None = None
    oracle_ref: OracleRef = OracleRef()
    names: Names = field(default_factory=Names)  # its folders, as reports name them

    @property
    def leads(self) -> bool:
        """Whether this run holds the steps that are not split across shards."""
        return self.shard.index == 1

    @property
    def evidence_tree(self) -> Path:
        """Where the oracle's evidence files come from: the base's, or the patch's once a code
        owner reviewed its edits to them (ORACLE_REVIEW=1)."""
        return self.patch if self.review else self.parent

    @property
    def built(self) -> Builds:
        if self.builds is None:
            raise FailClosed("this step needs the builds, and the judgment has none")
        return self.builds

    def command(self, side: str) -> Path:
        """The console script judge.yaml names, in the parent's or the patch's build."""
        python = self.built.parent if side == "parent" else self.built.patch
        return python.with_name(self.config.command)  # the build's bin folder holds both

    def evolve(self, **changes: Any) -> Judgment:
        return dataclasses.replace(self, **changes)


def write_judgment(path: Path, judgment: Judgment, earlier: Mapping[str, Report]) -> None:
    data = dataclasses.asdict(judgment)
    data["earlier"] = {name: report.payload() for name, report in earlier.items()}
    write_json(path, data)


def load_judgment(path: Path) -> tuple[Judgment, dict[str, Report]]:
    """The judgment file the judge wrote for a step it runs as a process."""
    try:
        return from_json(json.loads(path.read_bytes()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FailClosed(f"{path}: not a judgment file ({exc}); it is the judge's own") from None


def from_json(data: dict[str, Any]) -> tuple[Judgment, dict[str, Report]]:
    settings: dict[str, Any] = {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in data["config"].items()
    }
    built, ref = data["builds"], data["oracle_ref"]
    judgment = Judgment(
        repo=Path(data["repo"]),
        reports=Path(data["reports"]),
        base=str(data["base"]),
        head=str(data["head"]),
        parent=Path(data["parent"]),
        patch=Path(data["patch"]),
        config=Config(**settings),
        review=bool(data["review"]),
        changes=tuple((str(status), tuple(paths)) for status, paths in data["changes"]),
        shard=Shard(**data["shard"]),
        builds=builds_from(built) if built else None,
        oracle_ref=OracleRef(
            quarantine=optional_path(ref["quarantine"]),
            ledger=optional_path(ref["ledger"]),
            strength=optional_path(ref["strength"]),
            unreadable=str(ref["unreadable"]),
        ),
        names=Names(tuple((str(path), str(name)) for path, name in data["names"]["paths"])),
    )
    earlier = {name: Report.from_payload(row) for name, row in data["earlier"].items()}
    return judgment, earlier


def builds_from(built: dict[str, Any]) -> Builds:
    return Builds(
        parent=Path(built["parent"]),
        patch=Path(built["patch"]),
        oracle=optional_path(built["oracle"]),
        oracle_seal=sealed_file(built["oracle_seal"]),
        same=bool(built["same"]),
        parent_build=str(built["parent_build"]),
        patch_build=str(built["patch_build"]),
        cache=optional_path(built["cache"]),
        beside={name: sealed(row) for name, row in built["beside"].items()},
        changed=tuple(ChangedFile.from_dict(row) for row in built["changed"]),
        functions=ChangedFunctions.from_dict(built["functions"]) if built["functions"] else None,
    )


def sealed(row: dict[str, str]) -> Seal:
    """A seal as the judgment file holds it."""
    return Seal(Path(row["file"]), str(row["sha256"]))


def sealed_file(row: dict[str, str] | None) -> Seal | None:
    return sealed(row) if row else None


def optional_path(value: str | None) -> Path | None:
    return Path(value) if value else None
