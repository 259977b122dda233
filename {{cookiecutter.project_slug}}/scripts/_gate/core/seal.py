"""A trusted environment stays as built: the digest of the oracle environment, taken when the
judge built it, and the check each trusted pytest run makes against it, before and after.

The digest is every file under the environment (site-packages with its `.pth` files, any
`sitecustomize`, the bytecode, bin/, pyvenv.cfg), by path relative to it: a SHA-256 of each
regular file's bytes, a symlink's target, or the kind of anything else. Beside it, the seal
keeps what the kernel says of each entry when the digest was taken (`stats`: device, inode,
mode, size, mtime and ctime, to the nanosecond). A check whose entries all still say so needs
no file read: any write, chmod, rename or link changes an inode's ctime to the clock's time,
and only a process that may set the system clock (root) can set a ctime back, as `os.utime`
sets an mtime back. Where an entry says otherwise (a cache restored by copying, or a file
touched), every file is hashed again and compared with the digest: content decides. The
stats are only as good as their ctimes: nothing else may write the environment in the tick
between its build and its seal (the judge builds and seals it before any code of the patch
runs).

Bytecode is in the digest, never left out. A `.pyc` under `__pycache__` is loaded whenever the
source's mtime and size match its header, whatever its code; leaving `__pycache__` out would
let the patch plant one beside an untouched source. So the judge compiles the environment
right after building it (_gate/runs/bytecode.py), before the digest, and trusted runs write no
bytecode (`PYTHONDONTWRITEBYTECODE=1` in pytest_run; the subject worker runs with `-B`): an
honest run leaves the environment byte for byte as built, and any file added, removed or
changed is a difference. A source whose mtime alone was changed only makes Python compile the
(unchanged) source again in memory.

The digest is written beside the environment in the judge's temporary folder (envs/), never
inside it; the judgment carries the file's name and its own SHA-256 (`Seal`), from the judge's
memory: a step, inline or a process, reads the file and checks it against that hash first.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from _gate.core.protocol import FailClosed

Digest = dict[str, str]  # path relative to the environment (POSIX) -> what it holds
Stats = dict[str, str]  # path relative to the environment (POSIX) -> its inode, as lstat says
CHUNK = 1 << 20


@dataclass(frozen=True)
class Seal:
    """A file the judge wrote (an environment's digest, the replay's parent-now runs), and its
    SHA-256 as the judge wrote it."""

    file: Path
    sha256: str


def file_hash(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as data:
        while block := data.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def entry(path: str, mode: int) -> str:
    """What one entry holds: a file's SHA-256, a symlink's target, or the kind of the rest."""
    if stat.S_ISLNK(mode):
        return f"symlink {os.readlink(path)}"
    if stat.S_ISREG(mode):
        return file_hash(path)
    return f"special {stat.S_IFMT(mode):o}"


def walk(env: Path) -> Iterator[tuple[str, str, os.stat_result]]:
    """Every entry under `env` but directories, symlinks not followed (bin/python is one): its
    path relative to `env` (POSIX), its path, its lstat."""
    pending = [str(env)]
    cut = len(pending[0]) + len(os.sep)  # scandir joins each folder and name with os.sep
    while pending:
        folder = pending.pop()
        with os.scandir(folder) as entries:
            for item in entries:
                found = item.stat(follow_symlinks=False)
                if stat.S_ISDIR(found.st_mode):
                    pending.append(item.path)
                    continue
                yield item.path[cut:].replace(os.sep, "/"), item.path, found


def digest(env: Path) -> Digest:
    """What every entry under `env` holds, by its relative path."""
    return dict(sorted((name, entry(path, found.st_mode)) for name, path, found in walk(env)))


def stats(env: Path) -> Stats:
    """What the kernel says of every entry under `env`, by its relative path: no file read."""
    return {
        name: f"{s.st_dev} {s.st_ino} {s.st_mode:o} {s.st_size} {s.st_mtime_ns} {s.st_ctime_ns}"
        for name, _, s in walk(env)
    }


class Sealed(NamedTuple):
    """An environment's digest, and its entries' stats taken just before it."""

    files: Digest
    stats: Stats


def taken(env: Path) -> Sealed:
    """The stats first: an environment whose entries still say what they said then held what
    the digest read after (a file changed meanwhile says otherwise), so `changes` may trust
    them; taken after, they could vouch for a file the digest read before it changed."""
    found = stats(env)
    return Sealed(digest(env), found)


def changes(env: Path, want: Sealed) -> tuple[list[str], Sealed]:
    """What differs between `env` now and `want`: nothing, when every entry's stats are as
    taken with the digest; else each path whose content differs from the digest. And the
    seal to hold it to next: where the content is the digest's, with the stats taken before
    it was read (a copied environment is hashed once, not at every check)."""
    now = stats(env)
    if now == want.stats:
        return [], want
    return differences(want.files, digest(env)), want._replace(stats=now)


# What an installer writes about the install itself, not what it installed: where from (a
# temporary copy of the tree, uv's note of its mtimes) and the hashes of the files the digest
# holds anyway.
INSTALL_RECORDS = ("RECORD", "direct_url.json", "uv_cache.json")


def build_digest(env: Path) -> str:
    """One SHA-256 for a build's environment, equal for two environments that hold the same
    files: every entry as `digest` takes it, but with the environment's own path in a file's
    bytes written `{env}` (the scripts' shebangs, activate), the install records left out, a
    METADATA without its description (the README a backend copies in: documentation, which
    no step's evidence reads; a README edit would otherwise be a new build), and `__pycache__`
    left out (each `.pyc` there is the judge's compile of the source beside it:
    _gate/runs/bytecode.py). Two builds with one digest run the same code, so a step runs it once
    (_gate/runs/reuse.py)."""
    own = os.fsencode(env)
    files: Digest = {}
    for name, path, found in walk(env):
        if "/__pycache__/" in name:
            continue
        parts = name.rsplit("/", 2)
        info = len(parts) > 1 and parts[-2].endswith(".dist-info")
        if info and parts[-1] in INSTALL_RECORDS:
            continue
        if stat.S_ISREG(found.st_mode):
            with open(path, "rb") as data:
                held = data.read().replace(own, b"{env}")
            if info and parts[-1] == "METADATA":
                held = undescribed(held)
            files[name] = hashlib.sha256(held).hexdigest()
        else:
            files[name] = entry(path, found.st_mode)
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode("utf-8")).hexdigest()


def undescribed(metadata: bytes) -> bytes:
    """Core metadata's headers but `Description`, without the body that holds it too."""
    from email.parser import BytesHeaderParser

    headers = BytesHeaderParser().parsebytes(metadata)
    kept = [f"{key}: {value}" for key, value in headers.items() if key.lower() != "description"]
    return "\n".join(kept).encode("utf-8", "surrogateescape")


def seal(env: Path, dest: Path, sealed: Sealed | None = None) -> Seal:
    """Digest `env` into `dest` (outside it); the seal names the file and its SHA-256.
    `sealed`: its digest and stats, where the caller took them a moment ago (kept_envs)."""
    files, found = taken(env) if sealed is None else sealed
    data = json.dumps({"env": str(env), "files": files, "stats": found}, indent=0).encode("utf-8")
    return write_sealed(dest, data)


def write_sealed(dest: Path, data: bytes) -> Seal:
    """Write `data` to `dest`; the seal a reader holds it to (`read_sealed`)."""
    dest.write_bytes(data)
    return Seal(dest, hashlib.sha256(data).hexdigest())


def read_sealed(seal: Seal) -> bytes:
    """The bytes of a sealed file, read once; ValueError where they are not the ones the judge
    wrote (OSError where there are none)."""
    data = seal.file.read_bytes()
    if hashlib.sha256(data).hexdigest() != seal.sha256:
        raise ValueError("its SHA-256 is not the one the judge took when it wrote it")
    return data


def unsealed(seal: Seal) -> Sealed:
    """The digest and stats a seal names, once its file is the one the judge wrote."""
    try:
        doc = json.loads(read_sealed(seal))
        return Sealed(*({str(k): str(v) for k, v in doc[part].items()} for part in Sealed._fields))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FailClosed(
            f"{seal.file}: the oracle environment's digest cannot be read ({exc}); it is the "
            "judge's own file, written when the environment was built"
        ) from None


def differences(want: Mapping[str, str], got: Mapping[str, str]) -> list[str]:
    """Each path added, removed or changed, as `path how`, in path order."""
    how = {name: "added" for name in got.keys() - want.keys()}
    how.update({name: "removed" for name in want.keys() - got.keys()})
    how.update({name: "changed" for name in want.keys() & got.keys() if want[name] != got[name]})
    return [f"{name} {how[name]}" for name in sorted(how)]


def compare(env: Path, want: Sealed, since: str, blame: str) -> Sealed:
    """Fail closed naming the first difference between `env` now and its seal `want`; else
    the seal to hold it to next (`changes`)."""
    found, checked = changes(env, want)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise FailClosed(f"oracle environment changed since {since}: {found[0]}{more}; {blame}")
    return checked


class TrustedEnv:
    """The environment a trusted pytest run uses, checked before and after each run: against
    the judge's seal, or (a step run by hand, with no seal) against the digest taken before
    its first run, which then guards the step's later runs from the earlier ones."""

    def __init__(self, python: Path, seal: Seal | None = None) -> None:
        self.python = python
        self.env = python.parent.parent  # not resolved: bin/python links out of the venv
        self.seal = seal
        self.want: Sealed | None = None
        self.lock = threading.Lock()  # the oracle runs parent and patch side by side

    def check(self) -> None:
        with self.lock:
            if self.want is None and self.seal is None:
                self.want = taken(self.env)
                return
            if self.want is None and self.seal is not None:
                self.want = unsealed(self.seal)
        assert self.want is not None
        if self.seal is not None:
            since, blame = "it was built", "the patch's code wrote into the trusted environment"
        else:
            since, blame = "this step's first run", "a run wrote into the trusted environment"
        self.want = compare(self.env, self.want, since, blame)


def add_seal_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--oracle-digest",
        type=Path,
        help="the oracle env's digest file, written when the judge built it (by hand, without "
        "it: the env as the step's first run finds it)",
    )
    p.add_argument("--oracle-digest-sha256", default="", help="that file's SHA-256")


def seal_of(args: argparse.Namespace) -> Seal | None:
    """The oracle env's seal of a step's flags (`--oracle-digest`); by hand, without it, the
    env as the step's first run finds it."""
    if args.oracle_digest is None:
        return None
    if not args.oracle_digest_sha256:
        raise FailClosed("--oracle-digest needs --oracle-digest-sha256, the file's SHA-256")
    return Seal(args.oracle_digest, args.oracle_digest_sha256)
