"""Fill the local wheelhouse the judge installs from, before the judge disconnects.

    python scripts/wheelhouse.py [--requirements scripts/requirements-judge.txt ...] [--dest DIR]

Downloads, with hashes checked, every wheel the hash-pinned requirements files name for this
interpreter and platform (several files are one set: hash-checking needs every dependency
pinned). A marker file per set records the files' digest and the interpreter it was filled
for, so a complete wheelhouse is never downloaded again and the judge can run without a
network. The only step of the gate that reaches the package index.
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


def execute(args: argparse.Namespace) -> Outcome:
    files: list[Path] = args.requirements or [DEFAULT]
    want = stamp(files)
    marker = args.dest / MARKER.format("+".join(path.name for path in files))
    if marker.is_file() and marker.read_text("utf-8") == want:
        return Outcome(PASS, f"wheelhouse {args.dest} is complete", {"dest": str(args.dest)})
    args.dest.mkdir(parents=True, exist_ok=True)
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
        raise FailClosed(
            f"pip download failed: {lines[-1] if lines else code}; "
            "the wheelhouse needs the package index once"
        )
    marker.write_text(want, "utf-8")
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
