"""Evidence reused where its inputs did not change (docs/reuse.md).

**The same build.** A patch whose build is the parent's, file for file, runs the parent's code,
so a step that runs both sides runs the parent's once. The judge decides it once, right after
the builds: the wheels install the same files (build provenance's digests), then the two
environments hold the same bytes, the environment's own path and the README copied into
METADATA aside (seal.build_digest). A docs- or CI-only patch, or one that changes only tests,
builds that way; a version from git metadata (hatch-vcs, setuptools-scm) never does, since
every commit has its own. A step given `--same-build` runs the parent's side only and reports
the patch's as `reused (no input changed)`; by hand, without the flag, it runs both. The
crossrun, which runs the base's tests on both builds, runs neither side when the patch also
left those tests and pytest's configuration as they were (crossrun_run.same_tests).

**The parent's side, between judgments.** What a step ran on the parent's build alone (the
crossrun's parent run, the oracle's) depends on its inputs, not on the commit: the files it
read, the build's digest, its settings, the gate's own code and the interpreter. It is kept in
the cache folder (`.oracle/cache/` of the repository, or $ORACLE_CACHE) under a digest of
those inputs, so a new base that changed none of them, or a second patch on the same base,
reuses it. The crossrun keeps the patch's run too, under the patch build's digest: should the
patch land, it is the parent's run of the next judgment. Only the judge writes there, and only
when the patch's code runs confined (it cannot write outside its own temporary folders); a
judgment that runs unconfined neither reads nor writes it. A flaky parent test keeps the
outcome of the run that was kept; delete the folder to run everything again.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import platform
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from _gate.core.protocol import FailClosed, Outcome, say
from _gate.runs.pytest_run import PytestRun

REUSED = "reused (no input changed)"
NOTE = f"; the patch's build is the parent's, file for file: its run {REUSED}"
KEPT = f"; the parent's run {REUSED}, kept from an earlier judgment"
CACHE_ENV = "ORACLE_CACHE"
RUNS_ENV = "ORACLE_CACHE_RUNS"  # how many kept runs the cache holds at most
RUNS_DEFAULT = 256


def cache_folder(repo: Path) -> Path:
    """$ORACLE_CACHE, or .oracle/cache in the repository: absolute, as the environments kept
    there are run from other folders (a relative value is the working directory's, as a shell
    user means it)."""
    return Path(os.environ.get(CACHE_ENV) or repo / ".oracle" / "cache").absolute()


def add_same_build_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--same-build",
        action="store_true",
        help="the two builds hold the same files (the judge checks it): run the parent's "
        f"side only, the patch's is {REUSED}",
    )


def add_cache_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", type=Path, help="folder of parent runs kept between judgments")
    p.add_argument("--parent-build", default="", help="the parent build's digest (their key)")
    p.add_argument(
        "--patch-build", default="", help="the patch build's digest: its runs, kept as a base's"
    )


def noted(outcome: Outcome, same_build: bool, kept_parent: bool = False) -> Outcome:
    """The outcome of a step that ran on both builds, saying which side it reused."""
    if same_build:
        outcome = outcome.noted(NOTE, patch_run=REUSED)
    return outcome.noted(KEPT, parent_run=REUSED) if kept_parent else outcome


def code_files(scripts: Path) -> list[Path]:
    """The gate's own code in a scripts/ folder: its scripts, every module of _gate's floors,
    and the pins of the tools every environment holds."""
    found = (
        *scripts.glob("*.py"),
        *scripts.glob("_gate/**/*.py"),
        *scripts.glob("requirements-*.txt"),
    )
    return sorted(found)


@functools.cache
def code_digest() -> str:
    """The gate's own code and pins, which every kept run depends on."""
    scripts = Path(__file__).resolve().parents[2]
    return files_digest(
        scripts, [path.relative_to(scripts).as_posix() for path in code_files(scripts)]
    )


def files_digest(root: Path, names: Iterable[str]) -> str:
    """One SHA-256 of the named files under `root`, their names and bytes."""
    digest = hashlib.sha256()
    for name in names:
        digest.update(f"{name}\0".encode("utf-8", "surrogateescape"))
        digest.update(hashlib.sha256((root / name).read_bytes()).digest())
    return digest.hexdigest()


def cache_key(step: str, **inputs: object) -> str:
    """The digest of everything a kept run depends on."""
    every = {"step": step, "code": code_digest(), "python": sys.version, **inputs}
    every["platform"] = platform.platform()
    return hashlib.sha256(json.dumps(every, sort_keys=True, default=str).encode()).hexdigest()


def kept(folder: Path | None, key: str) -> dict[str, Any] | None:
    """What an earlier judgment kept under `key` ("" or no folder: nothing is kept), marked
    used (`prune` deletes the least recently used). One whose bytes are not those it was
    sealed with is named, deleted and not used: the caller computes it again."""
    if folder is None or not key:
        return None
    path = folder / f"{key}.json"
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    data = unsealed(raw)
    if data is None:
        path.unlink(missing_ok=True)
        say(f"kept: {path} changed since it was written: not used, computed again", error=True)
        return None
    # From the clock, in ns: the file system's clock moves in ticks, and two uses would tie.
    with contextlib.suppress(OSError):
        now = time.time_ns()
        os.utime(path, ns=(now, now))
    return data


def keep(folder: Path | None, key: str, data: dict[str, Any]) -> None:
    """Write whole or not at all (judgments side by side may keep the same key), sealed with
    the digest of its bytes."""
    if folder is None or not key:
        return
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{key}.{os.getpid()}.{threading.get_ident()}"
    body = json.dumps(data).encode("utf-8")
    partial.write_bytes(SEAL + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    os.replace(partial, folder / f"{key}.json")


SEAL = b"sha256:"  # a kept file's first line: the digest of the bytes after it


def unsealed(raw: bytes) -> dict[str, Any] | None:
    """A kept file's data, None unless its bytes are those its seal names (a byte flipped, a
    file cut short, one written by an older gate)."""
    seal, _, body = raw.partition(b"\n")
    if seal != SEAL + hashlib.sha256(body).hexdigest().encode():
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def whole_number(variable: str, default: int, what: str) -> int:
    """A count the user may set in `variable`; anything but a whole number fails closed."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    if not text.isdigit():
        raise FailClosed(
            f"${variable}={text!r}: not a whole number; set it to how many {what} the cache "
            f"may hold (default {default}), or unset it"
        )
    return int(text)


def runs_limit() -> int:
    """$ORACLE_CACHE_RUNS: how many kept runs (the files beside `envs/`) the cache holds."""
    return whole_number(RUNS_ENV, RUNS_DEFAULT, "kept runs")


def prune(folder: Path, limit: int) -> None:
    """Delete the least recently used kept runs beyond `limit` (one is used when kept or
    read); a judgment that then looks for one deleted runs it again."""
    runs = sorted(folder.glob("*.json"), key=last_used, reverse=True)
    for path in runs[limit:]:
        path.unlink(missing_ok=True)


def last_used(path: Path) -> int:
    """When a kept run or environment was last used: its mtime, which each use sets."""
    try:
        return path.stat().st_mtime_ns
    except OSError:  # deleted by another judgment meanwhile
        return 0


def kept_run(cache: Path | None, key: str, root: Path) -> PytestRun | None:
    """A parent's run as an earlier judgment kept it, its paths naming `root` (the folder it
    ran from) of this judgment."""
    data = kept(cache, key)
    if data is None:
        return None
    try:
        run = PytestRun.from_dict(data)
    except (TypeError, KeyError):
        return None  # not one this code wrote: run it again
    return run.renamed(lambda text: text.replace(ROOT, f"{root.resolve()}/"))


def keep_run(cache: Path | None, key: str, root: Path, run: PytestRun) -> None:
    if run.outcomes is None:  # no result is not evidence to keep
        return
    keep(cache, key, run.renamed(lambda t: t.replace(f"{root.resolve()}/", ROOT)).as_dict())


ROOT = "{root}/"
