"""Fill the local wheelhouse the judge installs from, before the judge disconnects.

    python scripts/wheelhouse.py [--requirements scripts/requirements-judge.txt ...] [--dest DIR]

Downloads, with hashes checked, every wheel the hash-pinned requirements files name for this
interpreter and platform (several files are one set: hash-checking needs every dependency
pinned). A marker file per set records the files' digest and the interpreter it was filled
for, so a complete wheelhouse is never downloaded again and the judge can run without a
network, and the digest of every wheel then: a wheel whose bytes changed since (cut short by a
full disk, a byte flipped) is deleted and fetched again. The only step of the gate that
reaches the package index.
Exit codes: 0 the wheelhouse is complete, 2 fail closed (download failed, file missing).
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from subprocess import DEVNULL

try:
    import fcntl
except ImportError:  # Windows: no lock
    fcntl = None  # type: ignore[assignment]

from _gate.core.protocol import EXIT_CODES_HELP, PASS, FailClosed, Outcome, add_report_arg, say
from _gate.runs.entry import run_main
from _gate.runs.envs import WHEELHOUSE, bin_dir

DEFAULT = Path("scripts/requirements-judge.txt")
MARKER = ".complete-{}"  # one per set of files: the judge's, the strength session's
PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==", re.MULTILINE)  # one pinned package a line
PROGRESS_EVERY = 5.0  # seconds between two progress lines of a download


def stamp(files: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for requirements in files:
        try:
            digest.update(requirements.read_bytes())
        except FileNotFoundError:
            raise FailClosed(
                f"{requirements}: file is missing; restore it from the base branch"
            ) from None
    tag = f"{platform.python_version()} {sys.platform} {platform.machine()}"
    return f"{digest.hexdigest()} {tag}\n"


def pip_python(tmp: Path) -> str:
    """An interpreter with pip: this one if it has pip, else a throwaway venv (ensurepip)."""
    probe = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, check=False
    )
    if probe.returncode == 0:
        return sys.executable
    subprocess.run(
        [sys.executable, "-m", "venv", str(tmp / "venv")], check=True, capture_output=True
    )
    return str(bin_dir(tmp / "venv") / "python")


def downloaded(cmd: Sequence[str], dest: Path, log: Path) -> tuple[int, bytes]:
    """Run pip download, saying every few seconds how many wheels are there: a first fill takes
    a while, and a silent one looks hung. Returns its exit code and its stderr."""
    start = time.monotonic()
    with log.open("wb") as errors, subprocess.Popen(cmd, stdout=DEVNULL, stderr=errors) as proc:
        while True:
            try:
                proc.wait(timeout=PROGRESS_EVERY)
                break
            except subprocess.TimeoutExpired:
                wheels = len(list(dest.glob("*.whl")))
                seconds = time.monotonic() - start
                say(f"wheelhouse: {wheels} wheels in {dest} after {seconds:.0f} s", error=True)
    return proc.returncode, log.read_bytes()


def wheel_rows(dest: Path) -> str:
    """The digest and name of every wheel in `dest`, a line each: a marker's after its stamp."""
    wheels = sorted(dest.glob("*.whl"))
    return "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in wheels)


def damaged(marker: Path, want: str) -> list[str] | None:
    """The wheels a complete set's marker names whose bytes changed since (deleted here, so
    pip fetches them again); None where the set is not complete (no marker, another stamp, a
    marker of an older gate, which named no wheel)."""
    try:
        stamp_line, *rows = marker.read_text("utf-8").splitlines(keepends=True)
    except (OSError, ValueError):
        return None
    if stamp_line != want or not rows:
        return None
    bad = []
    for row in rows:
        digest, _, name = row.rstrip("\n").partition("  ")
        wheel = marker.parent / name
        try:
            same = hashlib.sha256(wheel.read_bytes()).hexdigest() == digest
        except OSError:
            same = False
        if not same:
            bad.append(name)
            wheel.unlink(missing_ok=True)
    if bad:
        marker.unlink()
    return bad


def execute(args: argparse.Namespace) -> Outcome:
    """Check and fill under the wheelhouse's lock: judgments of several checkouts may share one
    ($ORACLE_WHEELHOUSE), and one fills it while the others wait, then find it complete."""
    args.dest.mkdir(parents=True, exist_ok=True)
    with (args.dest.parent / f".{args.dest.name}.lock").open("w") as lock:
        if fcntl is not None:  # not Windows
            fcntl.flock(lock, fcntl.LOCK_EX)
        return filled(args)


def filled(args: argparse.Namespace) -> Outcome:
    files: list[Path] = args.requirements or [DEFAULT]
    want = stamp(files)
    marker = args.dest / MARKER.format("+".join(path.name for path in files))
    bad = damaged(marker, want)
    if bad == []:
        return Outcome(PASS, f"wheelhouse {args.dest} is complete", {"dest": str(args.dest)})
    if bad:
        say(f"wheelhouse: {', '.join(bad)} changed since downloaded: deleted, fetched again", True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            pip_python(Path(tmp)),
            "-m",
            "pip",
            "download",
            "--quiet",
            "--require-hashes",
            "--only-binary=:all:",
            "--dest",
            str(args.dest),
            *(arg for path in files for arg in ("-r", str(path))),
        ]
        pins = sum(len(PIN.findall(path.read_text("utf-8"))) for path in files)
        say(f"wheelhouse: downloading {pins} pinned packages into {args.dest} (once)", error=True)
        code, stderr = downloaded(cmd, args.dest, Path(tmp) / "pip.err")
    if code != 0:
        lines = stderr.decode("utf-8", "backslashreplace").strip().splitlines()
        again = f"{bad[0]} changed since it was downloaded and was deleted; " if bad else ""
        raise FailClosed(
            f"{again}pip download failed: {lines[-1] if lines else code}; the wheelhouse needs "
            "the package index (`nox -s wheelhouse` fills it)"
        )
    marker.write_text(want + wheel_rows(args.dest), "utf-8")
    wheels = sorted(p.name for p in args.dest.glob("*.whl"))
    return Outcome(PASS, f"wheelhouse {args.dest} filled: {len(wheels)} wheels", {"wheels": wheels})


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument(
        "--requirements",
        type=Path,
        action="append",
        help=f"a hash-pinned requirements file; repeat for a set (default {DEFAULT})",
    )
    p.add_argument(
        "--dest",
        type=Path,
        default=WHEELHOUSE,
        help="default $ORACLE_WHEELHOUSE or .oracle/wheelhouse",
    )
    add_report_arg(p, "wheelhouse")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("wheelhouse", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
