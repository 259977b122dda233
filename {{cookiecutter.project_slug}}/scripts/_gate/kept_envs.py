"""Environments kept between judgments (the baked docs/reuse.md): the oracle's and the parent's.

Building an environment is most of the build step, and two of the three a judgment builds do
not depend on the patch. The oracle environment holds the pinned tools only: it depends on
scripts/requirements-judge.txt, the gate's code and the interpreter. The parent's holds those
and the build of the base commit: its tree and the git metadata a version may be read from.
Each is built once per set of those inputs and kept in the folder of kept runs (reuse.py),
under its rule: only when the patch's code runs confined, never for a judgment that runs it
unconfined or with --fresh. The patch's environment is kept under the key it has as a base
(`parent_env_key` of the head commit): the parent's of a judgment whose base it becomes, built
by the same backend from the same commit as that judgment's own build would be.

A kept environment is held to what it held when built: before each use its entries' stats are
compared with those kept with its digest (seal.digest: every file, bytecode included), and
where one differs (a cache restored by copying) its digest is taken again and compared with
the one taken then (seal.py says why the stats suffice). An environment that differs is not
used, and the judgment builds a fresh one of its own (the kept one is left for whoever changed
it to see; delete the folder to build it again). One lock per key: a second judgment waits for
the first's build instead of building it twice.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from _gate.envs import BUILD_PASS_THROUGH, bin_dir
from _gate.git import git
from _gate.reuse import cache_key, files_digest, keep, kept
from _gate.seal import Sealed, changes, taken

try:
    import fcntl
except ImportError:  # not POSIX: nothing is kept
    fcntl = None  # type: ignore[assignment]

Build = Callable[[Path], Path]  # builds an environment at the folder given; returns its python
KEPT, BUILT, CHANGED = "kept", "built", "changed"  # how kept_env came by an environment


class Env(NamedTuple):
    python: Path
    came: str  # KEPT, BUILT or CHANGED
    sealed: Sealed | None  # its digest and stats where kept_env took them (seal.seal's)


def oracle_env_key(requirements: Path) -> str:
    """What the oracle environment depends on, beside the gate's code and the interpreter."""
    pins = files_digest(requirements.parent, [requirements.name])
    return cache_key("oracle-env", requirements=pins)


def parent_env_key(repo: Path, commit: str, requirements: Path) -> str:
    """What the parent's environment depends on: the commit (its tree), the tags a version may
    be read from (`git describe`), the pins, and the variables a build backend sees."""
    described = git(repo, "describe", "--tags", "--long", "--always", "--abbrev=40", commit)
    variables = {key: os.environ.get(key) for key in BUILD_PASS_THROUGH}
    return cache_key(
        "parent-env",
        commit=commit,
        described=described,
        requirements=files_digest(requirements.parent, [requirements.name]),
        variables=variables,
    )


def kept_env(folder: Path | None, key: str, fresh: Path, build: Build) -> Env:
    """The environment `build` makes, and how it came: KEPT (built by an earlier judgment
    under `key` in `folder`, its files as built), BUILT (by this one, and kept when there is
    a folder), or CHANGED (the kept one changed since it was built: built at `fresh` instead,
    as when nothing is kept)."""
    if folder is None or fcntl is None:
        return Env(build(fresh), BUILT, None)
    home = kept_home(folder, key)
    with locked(home.with_suffix(".lock")):
        env = home / "env"
        was = kept(home, "digest") or {}
        if isinstance(was.get("files"), dict):
            built = Sealed(was["files"], was.get("stats") or {})
            found, checked = changes(env, built)
            if found:
                return Env(build(fresh), CHANGED, None)  # not ours to trust, nor to delete
            if checked != built:
                keep(home, "digest", checked._asdict())  # its content as built: its stats now
            return Env(bin_dir(env) / "python", KEPT, checked)
        shutil.rmtree(home, ignore_errors=True)  # a build that did not finish
        python = build(env)
        sealed = taken(env)
        keep(home, "digest", sealed._asdict())
        return Env(python, BUILT, sealed)


def kept_home(folder: Path, key: str) -> Path:
    """A short folder name: an installer writes a script's interpreter path into its first
    line only while it fits a shebang (127 bytes), and wraps it in /bin/sh past that; two
    builds whose scripts differ so would not be the same build (seal.build_digest)."""
    return folder / "envs" / key[:16]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
