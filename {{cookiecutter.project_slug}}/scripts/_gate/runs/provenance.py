"""Build provenance: what a build's wheel installs is the tree it was built from.

The gate judges a wheel, users run the tree. After a build, every file the wheel installs
(its RECORD) is matched with the tree: a module or data file equals, byte for byte, the tree's
file at the path the build maps it from (one folder per top-level name: `src/shop/` for
`shop/`, the root for a flat layout); a file the tree does not hold is generated (a
`_version.py`, a compiled extension) and listed with its digest. Between parent and patch:
the patch's generated files must be of names the parent generated too, its top-level names
the parent's, and a package is built from the folder it was built from on the parent while
that folder still holds it. A `.pth`, `sitecustomize` or `usercustomize` fails closed.
The wheel's entry points and the names it requires (per extra) are those pyproject.toml's
[project] declares, where it declares them statically (not in `dynamic`); specifiers and
markers are the backend's to spell, so names are compared, not their text.
"""

from __future__ import annotations

import configparser
import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath
from typing import Any

from _gate.core.protocol import FailClosed
from _gate.core.pyproject import PYPROJECT, REQUIREMENT, canonical, extras, own_rows, read, table
from _gate.runs.git import git

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
    """The dist-info of the tree's wheel in `env`: the one installed from a file (PEP 610's
    `direct_url.json`, _gate/runs/envs.py); the tools come by name from the wheelhouse."""
    found = sorted(
        info
        for info in env.glob("lib/python*/site-packages/*.dist-info")
        if (info / "direct_url.json").is_file()
    )
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


def package_modules(info: Path) -> dict[str, str]:
    """The Python modules the wheel of dist-info `info` (project_info) installs: the path
    their frames name -> the path under site-packages."""
    found = (path for path in record_files(info) if path.endswith(".py"))
    return {os.path.realpath(info.parent / path): path for path in found}


def wheel_metadata(info: Path) -> dict[str, str]:
    """The METADATA and entry points of dist-info `info`, by names both builds share."""
    named = ("METADATA", "entry_points.txt")
    return {f"wheel.dist-info/{n}": read_text(info / n) for n in named if (info / n).is_file()}


def refuse_startup_files(paths: Iterable[str]) -> None:
    """A `.pth`, `sitecustomize` or `usercustomize` at the top of site-packages, where the
    interpreter runs them (a package's own `model.pth` is data: nothing runs it)."""
    for path in paths:
        name = PurePosixPath(path)
        if len(name.parts) == 1 and (name.suffix == ".pth" or name.stem in STARTUP):
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
    """Match every file the wheel installs, and its declared metadata, with `tree` (named
    `label` in messages)."""
    installed = record_files(info)
    refuse_startup_files(installed)
    check_metadata(tree, info, label)
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
    sources = {f.path: f.source for f in parent.files}
    for path in sorted(patch.generated - parent.generated):
        if sources.get(path) and (patch_tree / sources[path]).is_file():
            raise FailClosed(
                f"the wheel's {path} is not {label}{sources[path]}, the file the parent's was "
                "built from: the build maps it to other code than the tree holds there"
            )
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


# [project] keys of pyproject.toml and the entry point group each declares.
ENTRY_POINT_KEYS = {"scripts": "console_scripts", "gui-scripts": "gui_scripts"}
SPACE = re.compile(r"\s+")
EXTRA = re.compile(r"""\bextra\s*==\s*['"]([^'"]+)['"]""")


def check_metadata(tree: Path, info: Path, label: str) -> None:
    """The wheel's entry points and required names are the tree's static declarations."""
    project = table(read(tree) or {}, "project")
    if not isinstance(project, Mapping):
        return  # setup.py or setup.cfg declares them: protected files (build_config.py)
    dynamic = set(project.get("dynamic") or ())
    where = f"{label}{PYPROJECT}"
    if not dynamic & {"scripts", "gui-scripts", "entry-points"}:
        same(wheel_entry_points(info), declared_entry_points(project), "entry point", where)
    if not dynamic & {"dependencies", "optional-dependencies"}:
        required, spelled = declared_requires(project)
        same(wheel_requires(info), required, "requirement", where, spelled)


def same(
    wheel: set[str], tree: set[str], what: str, where: str, spelled: Set[str] = frozenset()
) -> None:
    """The wheel holds what the tree declares, and nothing else but the other `spelled`
    forms of a declaration (a self-referencing extra, kept or resolved)."""
    for extra in sorted(wheel - tree - spelled):
        raise FailClosed(f"the wheel declares {what} {extra}, which {where} does not declare")
    for missing in sorted(tree - wheel):
        raise FailClosed(f"the wheel lacks {what} {missing}, which {where} declares")


def declared_entry_points(project: Mapping[str, Any]) -> set[str]:
    groups = {group: project.get(key) for key, group in ENTRY_POINT_KEYS.items()}
    more = project.get("entry-points")
    groups.update(more if isinstance(more, Mapping) else {})
    return {
        entry_point(group, name, str(value))
        for group, points in groups.items()
        if isinstance(points, Mapping)
        for name, value in points.items()
    }


def entry_point(group: str, name: str, value: str) -> str:
    return f"[{group}] {name} = {SPACE.sub('', value)}"


def wheel_entry_points(info: Path) -> set[str]:
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(read_text(info / "entry_points.txt"))
    return {
        entry_point(group, name, value)
        for group in parser.sections()
        for name, value in parser.items(group)
    }


def requirement(text: str, extra: str = "") -> str:
    match = REQUIREMENT.match(text)
    name = canonical(match.group(1)) if match else text.strip()
    return f"{name} (extra {canonical(extra)})" if extra else name


def declared_requires(project: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """The requirements the wheel must hold, and the other spellings it may use instead: an
    extra that names the project itself (`test = ["pkg[index]"]`) is kept as written by
    setuptools and resolved into the rows of `index` by hatchling, so neither form is
    required, and both are allowed."""
    required = {requirement(str(r)) for r in project.get("dependencies") or ()}
    spelled: set[str] = set()
    own = canonical(str(project.get("name") or ""))
    for extra, rows in extras(project).items():
        for row in rows:
            kept = requirement(row, extra)
            if kept.split(" ", 1)[0] != own:
                required.add(kept)
                continue
            spelled |= {kept, *(requirement(r, extra) for r in own_rows([row], project))}
    return required, spelled


def wheel_requires(info: Path) -> set[str]:
    headers = HeaderParser().parsestr(read_text(info / "METADATA"))
    found = set()
    for row in headers.get_all("Requires-Dist") or []:
        extra = EXTRA.search(row.split(";", 1)[1]) if ";" in row else None
        found.add(requirement(row, extra.group(1) if extra else ""))
    return found
