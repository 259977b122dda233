"""Build provenance: what a build's wheel installs is the tree it was built from.

The gate judges a wheel, users run the tree. After a build, every file the wheel installs
(its RECORD) is matched with the tree: a module or data file equals, byte for byte, the tree's
file at the path the build maps it from (one folder per top-level name: `src/shop/` for
`shop/`, the root for a flat layout); a file the tree does not hold is generated (a
`_version.py`, a compiled extension) and listed with its digest. Between parent and patch:
the patch's generated files must be of names the parent generated too, its top-level names
the parent's, and a package is built from the folder it was built from on the parent while
that folder still holds it. A `.pth`, `sitecustomize` or `usercustomize` fails closed.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from _gate.git import git
from _gate.protocol import FailClosed

# Files that run at every interpreter start in the environment: never from a wheel.
STARTUP = ("sitecustomize", "usercustomize")


@dataclass(frozen=True)
class Installed:
    """One file the wheel installs: its path under site-packages, its digest, and the tree
    path it equals ("" where the tree holds no such file: generated at build time)."""

    path: str
    sha256: str
    source: str

    def row(self) -> dict[str, str]:
        return {"path": self.path, "sha256": self.sha256, "source": self.source}


@dataclass(frozen=True)
class Provenance:
    """A build's wheel against its tree: every installed file, and the folder of the tree
    each top-level name is built from."""

    files: tuple[Installed, ...]
    folders: Mapping[str, str]  # top-level name -> tree folder ("" for the root)

    @property
    def generated(self) -> frozenset[str]:
        return frozenset(f.path for f in self.files if not f.source)

    def evidence(self) -> dict[str, object]:
        return {"files": [f.row() for f in self.files], "folders": dict(self.folders)}


def project_info(env: Path) -> Path:
    """The dist-info of the tree built into `env`: the one installed from a folder (PEP 610's
    `dir_info`); the tools come from the wheelhouse."""
    found = [
        info
        for info in sorted(env.glob("lib/python*/site-packages/*.dist-info"))
        if "dir_info" in read_text(info / "direct_url.json")
    ]
    if len(found) != 1:
        raise FailClosed(f"{env}: {len(found)} distributions built from a tree; expected one")
    return found[0]


def read_text(path: Path) -> str:
    try:
        return path.read_text("utf-8")
    except OSError:
        return ""


def summary(found: Provenance, label: str) -> str:
    """`matches head:src/shop/ (12 files, 1 generated)`."""
    folders = sorted(
        {
            f"{label}{folder}/{top}/" if folder else f"{label}{top}"
            for top, folder in found.folders.items()
        }
    )
    generated = len(found.generated)
    more = f", {generated} generated" if generated else ""
    return f"matches {', '.join(folders)} ({len(found.files)} files{more})"


def record_files(info: Path) -> list[str]:
    """The files a dist-info's RECORD installs under site-packages, but its own metadata and
    what lands outside site-packages (console scripts, which entry points describe)."""
    site = info.parent
    rows = (info / "RECORD").read_text("utf-8").splitlines()
    paths = [row.rsplit(",", 2)[0] for row in rows if row.strip()]
    inside = [p for p in paths if not p.startswith("..") and not p.startswith(f"{info.name}/")]
    return [p for p in inside if (site / p).is_file() and "__pycache__" not in p.split("/")]


def refuse_startup_files(paths: Iterable[str]) -> None:
    for path in paths:
        name = PurePosixPath(path)
        if name.suffix == ".pth" or (len(name.parts) == 1 and name.stem in STARTUP):
            raise FailClosed(
                f"the wheel installs {path}, which runs at every interpreter start; a build "
                "may not ship one (remove it from the package's files)"
            )


def tree_files(tree: Path) -> list[str]:
    listed = git(tree, "ls-files", "-z", check=False)
    if listed:
        return [name for name in listed.split("\0") if name]
    return [p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def folder_of(source: str, path: str) -> str:
    """The tree folder a file of the wheel is mapped from: `src/shop/x.py` for `shop/x.py`
    gives `src`; the root gives ""."""
    return source[: len(source) - len(path)].rstrip("/")


def provenance(tree: Path, info: Path, label: str) -> Provenance:
    """Match every file the wheel installs with `tree` (named `label` in messages)."""
    installed = record_files(info)
    refuse_startup_files(installed)
    sources = tree_files(tree)
    by_suffix: dict[str, list[str]] = {}
    for source in sources:
        by_suffix.setdefault(PurePosixPath(source).name, []).append(source)
    data = {path: (info.parent / path).read_bytes() for path in installed}
    candidates = {
        path: [
            source
            for source in by_suffix.get(PurePosixPath(path).name, ())
            if source == path or source.endswith(f"/{path}")
        ]
        for path in installed
    }
    folders = mapped_folders(tree, data, candidates)
    files = []
    for path in sorted(installed):
        top = path.split("/", 1)[0]
        expected = f"{folders[top]}/{path}" if folders.get(top) else path
        found = digest(data[path])
        if expected in candidates[path]:
            if digest((tree / expected).read_bytes()) != found:
                raise FailClosed(
                    f"the wheel's {path} is not {label}{expected}, the file it is built from; "
                    "the build put other code into the wheel than the tree holds"
                )
            files.append(Installed(path, found, expected))
        else:
            files.append(Installed(path, found, ""))
    return Provenance(tuple(files), folders)


def mapped_folders(
    tree: Path, data: Mapping[str, bytes], candidates: Mapping[str, list[str]]
) -> dict[str, str]:
    """Each top-level name's folder: where most of its files have an identical source (ties
    to the shortest). A build that maps one file from elsewhere is then a mismatch."""
    votes: dict[str, Counter[str]] = {}
    for path, sources in candidates.items():
        top = path.split("/", 1)[0]
        tally = votes.setdefault(top, Counter())
        for source in sources:
            if (tree / source).read_bytes() == data[path]:
                tally[folder_of(source, path)] += 1
    return {
        top: min(tally, key=lambda f: (-tally[f], len(f), f)) if tally else ""
        for top, tally in votes.items()
    }


def compare(parent: Provenance, patch: Provenance, patch_tree: Path, label: str) -> None:
    """The patch's wheel has the parent's kind of origin: no generated file of a name the
    parent did not generate, no top-level name the parent did not install, and each package
    built from its folder on the parent while that folder still holds it."""
    for path in sorted(patch.generated - parent.generated):
        raise FailClosed(
            f"the wheel's {path} has no source in {label.rstrip(':')} and the parent's wheel "
            "generated no such file: a module that appears from nowhere"
        )
    for top in sorted(set(patch.folders) - set(parent.folders)):
        raise FailClosed(
            f"the wheel installs {top}, a top-level name the parent's wheel did not install; "
            "a new top-level package changes the build configuration (review it)"
        )
    for top, folder in sorted(patch.folders.items()):
        before = parent.folders[top]
        if folder != before and (patch_tree / before / top).exists():
            was = f"{before}/{top}" if before else top
            now = f"{folder}/{top}" if folder else top
            raise FailClosed(
                f"the wheel's {top} is built from {label}{now}, the parent's from {was}, "
                f"which still holds it: the build maps the package to other code"
            )
