"""Lock the bytes of every file under fixtures/ by SHA-256, or verify a tree against a lock.

    python scripts/fixtures_lock.py --write            # a human, after an intended fixture change
    python scripts/fixtures_lock.py --check            # the judge: drift blocks

The lock is JSON, `{"fixtures/path": "sha256 hex"}`, sorted, one row per regular file.
Exit codes: 0 the tree matches the lock (or --write succeeded), 1 drift (a file added, removed
or changed), 2 fail closed (lock missing or malformed, a symlink under fixtures/).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from _gate.core.context import Judgment
from _gate.core.protocol import BLOCK, EXIT_CODES_HELP, PASS, FailClosed, Outcome, add_report_arg
from _gate.runs.entry import Contract, Earlier

CHUNK = 1 << 20


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def build(root: Path, folder: str = "fixtures") -> dict[str, str]:
    """Digest every regular file under root/folder, keyed by its POSIX path from root."""
    rows: dict[str, str] = {}
    base = root / folder
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            # A link's target can change without its bytes changing: refuse rather than guess.
            raise FailClosed(f"{rel}: symlinks are not allowed under {folder}/; commit the file")
        if path.is_file():
            rows[rel] = digest(path)
    return rows


def read_lock(lock: Path) -> dict[str, str]:
    try:
        data = json.loads(lock.read_bytes())
    except FileNotFoundError:
        raise FailClosed(f"{lock}: file is missing; run `nox -s lock` and commit it") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise FailClosed(f"{lock}: not valid JSON ({exc}); regenerate with `nox -s lock`") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and len(v) == 64 for k, v in data.items()
    ):
        raise FailClosed(f"{lock}: expected an object of path -> sha256; run `nox -s lock`")
    return data


def render(rows: dict[str, str]) -> str:
    return json.dumps(dict(sorted(rows.items())), indent=2) + "\n"


def compare(expected: dict[str, str], actual: dict[str, str]) -> dict[str, list[str]]:
    return {
        "missing": sorted(set(expected) - set(actual)),
        "added": sorted(set(actual) - set(expected)),
        "changed": sorted(k for k in expected.keys() & actual.keys() if expected[k] != actual[k]),
    }


def drifted(root: Path) -> dict[str, list[str]]:
    return compare(read_lock(root / "fixtures.lock"), build(root))


@dataclass(frozen=True)
class Inputs:
    """What the fixtures-lock step decides on."""

    root: Path  # the tree holding fixtures/
    lock: Path
    write: bool  # write the lock instead of checking it (by hand only)
    base_root: Path | None  # a tree whose own lock must hold first (the base)
    base_label: str  # how messages name it
    base_branch: str  # where its lock is fixed


def inputs(j: Judgment) -> Inputs:
    lock = j.evidence_tree / "fixtures.lock"
    label = f"the base commit {j.base[:12]}"
    return Inputs(j.patch, lock, False, j.parent, label, j.config.base_branch)


def from_args(args: argparse.Namespace) -> Inputs:
    return Inputs(
        args.root, args.lock, args.write, args.base_root, args.base_label, args.base_branch
    )


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    actual = build(given.root)
    lock = given.lock
    if given.write:
        lock.write_text(render(actual), "utf-8")
        return Outcome(PASS, f"wrote {len(actual)} digests to {lock}", {"files": actual})
    if given.base_root and any(drifted(given.base_root).values()):
        raise FailClosed(
            f"{given.base_label}: its fixtures do not match its own fixtures.lock; run `nox -s "
            f"lock` on {given.base_branch} and commit, then rebase the patch onto it (`git "
            f"rebase {given.base_branch}`): the judge compares with the merge base, not the "
            "branch's tip"
        )
    drift = compare(read_lock(lock), actual)
    evidence = {"lock": str(lock), "root": str(given.root), **drift}
    if any(drift.values()):
        parts = [f"{len(v)} {k}" for k, v in drift.items() if v]
        first = next(v[0] for v in drift.values() if v)
        return Outcome(
            BLOCK,
            f"fixtures drifted from the lock ({', '.join(parts)}; first: {first}); "
            "a fixture change is a contract change: a human runs `nox -s lock` under review",
            evidence,
        )
    return Outcome(PASS, f"{len(actual)} fixture files match {lock.name}", evidence)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the lock from the tree")
    mode.add_argument("--check", action="store_true", help="verify the tree (the default)")
    p.add_argument("--root", type=Path, default=Path("."), help="tree holding fixtures/")
    p.add_argument("--lock", type=Path, default=Path("fixtures.lock"), help="lock file")
    p.add_argument("--base-root", type=Path, help="with --check: first verify this tree's own lock")
    p.add_argument("--base-label", default="the base", help="how messages name --base-root")
    p.add_argument("--base-branch", default="the base branch", help="where its lock is fixed")
    add_report_arg(p, "fixtures-lock")
    return p


STEP = Contract("fixtures-lock", parser, from_args, inputs, decide)
