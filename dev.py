"""Bootstrap: make .venv with pinned nox and uv, then run a nox session of this repository.

    python3 dev.py demo       # bake the example and judge two patches
    python3 dev.py tests      # the template's test suite (extra args go to pytest)
    python3 dev.py adopt PATH # add the gate to an existing repository, on a branch

Needs only Python 3.10+ and git. Every session then runs in its own fresh environment.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PINS = ROOT / "requirements-dev.txt"


def bin_path(name: str) -> Path:
    return VENV / ("Scripts" if os.name == "nt" else "bin") / name


def ensure_venv() -> None:
    stamp = VENV / ".pins"
    want = hashlib.sha256(PINS.read_bytes()).hexdigest()
    if stamp.is_file() and stamp.read_text() == want:
        return
    venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    pip = [
        str(bin_path("python")),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    subprocess.run([*pip, "nox", "uv", "-c", str(PINS)], check=True)
    stamp.write_text(want)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    ensure_venv()
    session, rest = argv[0], argv[1:]
    cmd = [str(bin_path("nox")), "-f", str(ROOT / "noxfile.py"), "-s", session]
    # From where the user stands: nox moves to the noxfile itself and keeps this as invoked_from.
    return subprocess.run([*cmd, "--", *rest] if rest else cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
