"""An environment the judge builds holds exactly what was installed into it.

The judge makes each environment with the installer alone (_gate/runs/envs.py): the pinned tools
from the wheelhouse, and for a tree its wheel, built by the tree's backend in a throwaway
environment of its own. Once the judge has written its bytecode (_gate/runs/bytecode.py), every
file of the environment must be one of:

- a file the RECORD of an installed distribution lists, holding the digest RECORD gives
  (RECORD lists itself without one);
- a file the installer writes for the virtual environment itself (INSTALLER_FILES: its
  configuration, interpreter links and activation scripts), and no distribution's;
- bytecode under `__pycache__` for a module of site-packages that is one of those (the
  judge's own compile).

Anything else fails closed naming the file: a `sitecustomize.py` or `.pth` that a build, a
run or a copy left there. The digest the judge seals (seal.taken) is taken of an environment
that passed this check, so a kept environment held to its seal is held to this manifest.
"""

from __future__ import annotations

import base64
import csv
import posixpath
import re
from collections.abc import Mapping
from pathlib import Path

from _gate.core.protocol import FailClosed

# What uv's `venv` and Python's `venv` write for an environment itself (paths relative to it).
INSTALLER_FILES = re.compile(
    r"(pyvenv\.cfg|\.gitignore|\.lock|CACHEDIR\.TAG|lib64"
    r"|bin/(python(3(\.\d+)?)?|activate(\.\w+)?|activate_this\.py|Activate\.ps1"
    r"|deactivate\.bat|pydoc\.bat))"
)
SITE = re.compile(r"lib/python[^/]+/site-packages")
BYTECODE = re.compile(r"(?P<folder>(?:.*/)?)__pycache__/(?P<stem>[^/.]+)\.[^/]+\.pyc")


def check(env: Path, files: Mapping[str, str], what: str) -> None:
    """Fail closed on the first file of `env` that the rules above do not account for;
    `files` is its digest (seal.digest), `what` names it in the message."""
    stray = strays(env, files)
    if stray:
        more = f" (and {len(stray) - 1} more)" if len(stray) > 1 else ""
        raise FailClosed(
            f"the {what} environment holds {stray[0]}{more}: nothing but the installer may "
            "write there, and only what an installed distribution lists"
        )


def strays(env: Path, files: Mapping[str, str]) -> list[str]:
    """Each file the manifest does not account for, as `path, which why`, in path order."""
    listed = recorded(env, files)
    found = []
    for path, held in sorted(files.items()):
        if INSTALLER_FILES.fullmatch(path):
            why = "replaces a file of the environment itself" if path in listed else ""
        elif path in listed:
            same = listed[path] == held or unhashed(path, listed)
            why = "" if same else "differs from its RECORD"
        else:
            why = "" if compiled_from(path, files, listed) else "no RECORD lists"
        if why:
            found.append(f"{path}, which {why}")
    return found


def unhashed(path: str, listed: Mapping[str, str]) -> bool:
    """RECORD lists itself (and its signatures) without a digest."""
    folder, _, name = path.rpartition("/")
    return not listed[path] and folder.endswith(".dist-info") and name.startswith("RECORD")


def compiled_from(path: str, files: Mapping[str, str], listed: Mapping[str, str]) -> bool:
    """Whether `path` is bytecode of a module of site-packages that an installed distribution
    lists (the judge compiles those, and nothing else)."""
    match = BYTECODE.fullmatch(path)
    if match is None or not SITE.match(path):
        return False
    source = f"{match['folder']}{match['stem']}.py"
    return source in listed and source in files


def recorded(env: Path, files: Mapping[str, str]) -> dict[str, str]:
    """Every file the installed distributions' RECORDs list, by its path relative to the
    environment, and the SHA-256 (hex) each gives ("" where none)."""
    listed: dict[str, str] = {}
    for path in files:
        folder, _, name = path.rpartition("/")
        site, _, info = folder.rpartition("/")
        if name == "RECORD" and info.endswith(".dist-info") and SITE.fullmatch(site):
            listed.update(rows(env / path, site))
    return listed


def rows(record: Path, site: str) -> dict[str, str]:
    """One RECORD's files (relative to the environment) and their SHA-256 in hex."""
    found: dict[str, str] = {}
    with record.open(encoding="utf-8", newline="") as text:
        for row in csv.reader(text):
            if row and row[0]:
                inside = posixpath.normpath(posixpath.join(site, row[0]))
                found[inside] = hexdigest(row[1] if len(row) > 1 else "")
    return found


def hexdigest(digest: str) -> str:
    """RECORD's `sha256=<urlsafe base64>` as hex; "" for none; another algorithm's as given
    (no installer writes one, and it matches no file)."""
    algorithm, _, value = digest.partition("=")
    if not digest or algorithm != "sha256":
        return digest
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
