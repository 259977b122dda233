"""Bytecode for an environment, written by the judge once its build is done.

A build runs with no bytecode written (envs.NO_BYTECODE) and so does every run in an
environment (its files stay as sealed): left so, each pytest or CLI process compiles every
module it imports from source again (pytest and hypothesis alone cost about 0.35 s of CPU per
process). So once a build's backend is done, the judge removes any `__pycache__` the build
left, gives each module the bytecode a donor environment holds for a source equal to its own,
byte for byte (the parent's environment for the patch's, the oracle environment for the
parent's: the pinned tools are the same files), and compiles the rest itself.

Each `.pyc` is hash-checked (PEP 552): Python uses it only while its source hashes to what its
header holds, whatever the source's mtime, so a copied one serves in another environment. A
donor's `.pyc` goes only beside a source equal to the donor's, never on the header's word: its
hash is SipHash under a public key, and a patch could write a module that collides with the
parent's. So every `.pyc` in a build's environment is the judge's compile of the source beside
it (or of the same bytes), and seal.build_digest leaves `__pycache__` out: two builds of the
same files are one build, however their bytecode came.
"""

from __future__ import annotations

import filecmp
import shutil
import tempfile
from collections.abc import Iterator
from importlib.util import cache_from_source
from pathlib import Path

from _gate.plugin.patch_env import gate_env
from _gate.runs.sandbox import run_confined

COMPILE_TIMEOUT = 600.0  # seconds for one environment's modules


def libraries(env: Path) -> list[Path]:
    """The folders of an environment whose modules get bytecode."""
    return sorted(env.glob("lib/python*/site-packages"))


def modules(env: Path) -> Iterator[Path]:
    for lib in libraries(env):
        yield from sorted(path for path in lib.rglob("*.py") if path.is_file())


def write_bytecode(env: Path, donor: Path | None = None) -> int:
    """Bytecode for every module of `env`, hash-checked, copied from `donor` (another
    environment) where its source is the same file, compiled otherwise; returns how many
    modules were compiled. A module that does not compile gets none: it fails on import,
    as it would have."""
    for lib in libraries(env):
        for cache in sorted(lib.rglob("__pycache__"), reverse=True):
            if cache.is_dir() and not cache.is_symlink():
                shutil.rmtree(cache, ignore_errors=True)
            else:
                cache.unlink(missing_ok=True)
    rest = [
        path
        for path in modules(env)
        if donor is None or not copied(donor / path.relative_to(env), path)
    ]
    if rest:
        compile_modules(env, rest)
    return len(rest)


def copied(theirs: Path, ours: Path) -> bool:
    """Give `ours` the bytecode of `theirs` where both sources are the same bytes."""
    held = Path(cache_from_source(str(theirs)))
    try:
        if not held.is_file() or not filecmp.cmp(theirs, ours, shallow=False):
            return False
        target = Path(cache_from_source(str(ours)))
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(held, target)
    except OSError:  # no such source there, or no folder for bytecode here: compiled instead
        return False
    return True


def compile_modules(env: Path, paths: list[Path]) -> None:
    """Compile the modules at `paths` with the environment's interpreter, isolated and without
    site (no `.pth` of the environment runs), forced and hash-checked. Compiling runs none of a
    module's code, but the sources are the patch's: confined like its build, writing the
    environment alone (one process: a pool of workers would want /dev/shm)."""
    cmd = [str(env / "bin" / "python"), "-I", "-S", "-m", "compileall", "-q", "-f"]
    cmd += ["--invalidation-mode", "checked-hash", "-i", "-"]
    listed = "".join(f"{path}\n" for path in paths).encode()
    # A module that does not compile (a template of a tool, Python 2 test data) makes the exit
    # code 1; it is left without bytecode, which costs time, never evidence.
    with tempfile.TemporaryDirectory(prefix="oracle-compile-") as tmp:
        scratch = gate_env(Path(tmp), Path(tmp))
        run_confined(cmd, writable=[env], timeout=COMPILE_TIMEOUT, env=scratch, stdin=listed)
