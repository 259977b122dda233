"""Environments kept between judgments (the baked docs/reuse.md): the oracle's and the parent's.

Building an environment is most of the build step, and two of the three a judgment builds do
not depend on the patch. The oracle environment holds the pinned tools only: it depends on
scripts/requirements-judge.txt, the gate's code and the interpreter. The parent's holds those
and the build of the base commit: its tree and the git metadata a version may be read from.
Each is built once per set of those inputs and kept in the folder of kept runs (reuse.py),
under its rule: only when the patch's code runs confined, never for a judgment that runs it
unconfined or with --fresh. The patch's environment is kept under the key it has as a base
(`parent_env_key` of the head commit): the parent's of a judgment whose base it becomes, built
by the same backend from the same commit as that judgment's own build would be. The tools that
build a base outside a judgment (`nox -s case`, `nox -s record`: `base_env`) build it as a
judgment builds its parent, and use and keep it under the same key.

A kept environment is held to what it held when built: before each use its entries' stats are
compared with those kept with its digest (seal.digest: every file, bytecode included), and
where one differs (a cache restored by copying) its digest is taken again and compared with
the one taken then (seal.py says why the stats suffice). An environment that differs is not
used, and the judgment builds a fresh one of its own (the kept one is left for whoever changed
it to see; delete the folder to build it again). One lock per key: a second judgment waits for
the first's build instead of building it twice.

The cache holds at most $ORACLE_CACHE_ENVS environments (default 8): each use marks one used
(its folder's mtime), and each judgment, as its builds start, deletes the least recently used
of the others beyond that number less its own (the oracle's, the parent's and the patch's
keys, kept or not yet): beside the builds, where a core is idle, rather than after them. A
judgment holds a shared lock on the folder of each environment it uses until it ends, and a
deletion takes the key's lock and that folder's alone without waiting: an environment a
judgment builds or uses is never deleted under it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from _gate.core.seal import Sealed, changes, taken
from _gate.runs import manifest
from _gate.runs.bytecode import write_bytecode
from _gate.runs.envs import bin_dir, build_env, build_variables
from _gate.runs.git import git
from _gate.runs.reuse import (
    cache_folder,
    cache_key,
    files_digest,
    keep,
    kept,
    last_used,
    whole_number,
)
from _gate.runs.sandbox import confines

try:
    import fcntl
except ImportError:  # not POSIX: nothing is kept
    fcntl = None  # type: ignore[assignment]

Build = Callable[[Path], Path]  # builds an environment at the folder given; returns its python
KEPT, BUILT, CHANGED = "kept", "built", "changed"  # how kept_env came by an environment
LIMIT_ENV, LIMIT_DEFAULT = "ORACLE_CACHE_ENVS", 8  # environments the cache holds at most


class Cache(NamedTuple):
    """Where environments are kept, how many at most, and the locks of those a judgment uses
    (released when the judgment closes `held`)."""

    folder: Path
    limit: int
    held: contextlib.ExitStack


def env_limit() -> int:
    """$ORACLE_CACHE_ENVS: how many environments the cache holds at most."""
    return whole_number(LIMIT_ENV, LIMIT_DEFAULT, "environments")


class Env(NamedTuple):
    python: Path
    sealed: Sealed  # its digest and stats, as kept_env took or checked them (seal.seal's)
    came: str  # KEPT, BUILT or CHANGED


def oracle_env_key(requirements: Path) -> str:
    """What the oracle environment depends on, beside the gate's code and the interpreter."""
    pins = files_digest(requirements.parent, [requirements.name])
    return cache_key("oracle-env", requirements=pins)


def parent_env_key(repo: Path, commit: str, requirements: Path) -> str:
    """What the parent's environment depends on: the commit (its tree), the tags a version may
    be read from (`git describe`), the pins, and the variables a build backend sees."""
    described = git(repo, "describe", "--tags", "--long", "--always", "--abbrev=40", commit)
    variables = build_variables()
    return cache_key(
        "parent-env",
        commit=commit,
        described=described,
        requirements=files_digest(requirements.parent, [requirements.name]),
        variables=variables,
    )


def base_build(
    tree: Path, wheelhouse: Path, requirements: Path, donor: Callable[[], Path | None]
) -> Build:
    """How a base's environment is built, whoever keeps it: `tree`'s build beside the pinned
    tools, with bytecode (copied from the environment `donor()` names where the same)."""

    def build(dest: Path) -> Path:
        python = build_env(tree, dest, wheelhouse, requirements)
        write_bytecode(dest, donor())
        return python

    return build


def base_env(
    repo: Path,
    commit: str,
    tree: Path,
    fresh: Path,
    *,
    wheelhouse: Path,
    requirements: Path,
    held: contextlib.ExitStack,
) -> Env:
    """`commit`'s environment (its tree checked out at `tree`) for the tools that run a base's
    build outside a judgment (`nox -s case`, `nox -s record`): the one a judgment whose base it
    is keeps, shared both ways; in use until `held` closes. Where the launcher cannot confine
    the build, nothing is kept or reused, as for an unconfined judgment."""
    cache = Cache(cache_folder(repo), env_limit(), held) if confines() else None
    build = base_build(tree, wheelhouse, requirements, lambda: None)
    return kept_env(cache, parent_env_key(repo, commit, requirements), fresh, build)


def kept_env(cache: Cache | None, key: str, fresh: Path, build: Build) -> Env:
    """The environment `build` makes, and how it came: KEPT (built earlier, by a judgment or
    base_env, under `key` in the cache, its files as built), BUILT (by this one, and kept when
    there is a cache), or CHANGED (the kept one changed since it was built: built at `fresh`
    instead, as when nothing is kept). Every environment built is held to its manifest
    (_gate/runs/manifest.py) before its digest is taken: a kept one is held to what it held then."""
    if cache is None or fcntl is None:
        return Env(*made(build, fresh, fresh.name), BUILT)
    home = kept_home(cache.folder, key)
    with locked(home.with_suffix(".lock")):
        env = home / "env"
        was = kept(home, "digest") or {}
        if isinstance(was.get("files"), dict):
            built = Sealed(was["files"], was.get("stats") or {})
            found, checked = changes(env, built)
            if found:  # not ours to trust, nor to delete
                return Env(*made(build, fresh, fresh.name), CHANGED)
            if checked != built:
                keep(home, "digest", checked._asdict())  # its content as built: its stats now
            used(home, cache.held)
            return Env(bin_dir(env) / "python", checked, KEPT)
        shutil.rmtree(home, ignore_errors=True)  # a build that did not finish
        python, sealed = made(build, env, fresh.name)
        keep(home, "digest", sealed._asdict())
        used(home, cache.held)
    return Env(python, sealed, BUILT)


def made(build: Build, dest: Path, name: str) -> tuple[Path, Sealed]:
    """Build at `dest`, take its digest and hold it to its manifest (`name` names the
    environment where it fails); its python and that seal."""
    python = build(dest)
    sealed = taken(dest)
    manifest.check(dest, sealed.files, name)
    return python, sealed


def used(home: Path, held: contextlib.ExitStack) -> None:
    """Mark a kept environment used now, and in use until `held` closes (under its key's
    lock, so that no deletion comes between)."""
    handle = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    held.callback(os.close, handle)
    fcntl.flock(handle, fcntl.LOCK_SH)
    now = time.time_ns()  # not the file system's clock, which moves in ticks of milliseconds
    os.utime(home, ns=(now, now))


def evict(cache: Cache, own: Sequence[str]) -> None:
    """Make room for a judgment's environments, the keys `own`: delete the least recently used
    of the others beyond the cache's limit less those, each one only while no judgment builds
    it (its key's lock) or uses it (its folder's)."""
    folder = cache.folder / "envs"
    if fcntl is None or not folder.is_dir():  # nothing kept
        return
    ours = {kept_home(cache.folder, key).name for key in own}
    homes = [path for path in folder.iterdir() if path.is_dir() and path.name not in ours]
    homes.sort(key=last_used, reverse=True)
    for home in homes[max(0, cache.limit - len(ours)) :]:
        with locked(home.with_suffix(".lock"), wait=False) as mine:
            if mine and unused(home):
                shutil.rmtree(home, ignore_errors=True)
                home.with_suffix(".lock").unlink()


def unused(home: Path) -> bool:
    """Whether no judgment holds `home` in use (used)."""
    try:
        handle = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(handle)
    return True


def kept_home(folder: Path, key: str) -> Path:
    """A short folder name: an installer writes a script's interpreter path into its first
    line only while it fits a shebang (127 bytes), and wraps it in /bin/sh past that; two
    builds whose scripts differ so would not be the same build (seal.build_digest)."""
    return folder / "envs" / key[:16]


@contextlib.contextmanager
def locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """Hold the lock file `path` (False: held elsewhere, and `wait` is False). A deletion
    unlinks the file it holds: a lock taken on a file no longer at `path` is taken again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        with open(path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                yield True
                return
