"""pyproject.toml, read as TOML: with `tomllib` (Python 3.11+), else `tomli`, its backport,
which the judge's requirements install on 3.10 (pytest needs it there too)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from _gate.core.protocol import FailClosed

PYPROJECT = "pyproject.toml"


@cache
def toml() -> Any:
    """The TOML reader, imported by name so that either type-checks."""
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise FailClosed(
        "pyproject.toml cannot be read on Python 3.10 without tomli: pip install tomli"
    )


def parsed(text: bytes | None) -> dict[str, Any] | None:
    """pyproject.toml as TOML; {} where there is none, None where it does not parse."""
    if text is None:
        return {}
    try:
        data = toml().loads(text.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and TOMLDecodeError alike
        return None
    return data if isinstance(data, dict) else None


def read(root: Path) -> dict[str, Any] | None:
    """`root`'s pyproject.toml as TOML ({} where there is none or it cannot be read)."""
    try:
        return parsed((root / PYPROJECT).read_bytes())
    except OSError:
        return {}


def table(data: Mapping[str, Any], dotted: str) -> object:
    """The value at a dotted name (`tool.hatch.build`); None where a part of it is missing."""
    found: object = data
    for key in dotted.split("."):
        found = found.get(key) if isinstance(found, Mapping) else None
    return found


# A requirement's distribution name and its extras: `pkg[a, b] >= 1; marker`.
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def canonical(name: str) -> str:
    """A distribution or extra name as packaging compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def extras(project: Mapping[str, Any]) -> dict[str, list[str]]:
    """[project.optional-dependencies], each extra's rows as a string list ({} if none)."""
    raw = project.get("optional-dependencies")
    if not isinstance(raw, Mapping):
        return {}
    return {
        str(name): [row for row in rows if isinstance(row, str)]
        for name, rows in raw.items()
        if isinstance(rows, list)
    }


def own_rows(
    rows: Sequence[str], project: Mapping[str, Any], seen: frozenset[str] = frozenset()
) -> list[str]:
    """`rows` with the project's references to itself resolved as a backend writes them into
    its wheel: `pkg[a,b]` (a common spelling of "this extra includes those") stands for the
    rows of extras a and b, followed through nested references, each extra once; `pkg`
    alone is the project itself, which the judge installs anyway."""
    name = canonical(str(project.get("name") or ""))
    by_name = {canonical(key): value for key, value in extras(project).items()}
    found: list[str] = []
    for row in rows:
        match = REQUIREMENT.match(row)
        if not match or not name or canonical(match.group(1)) != name:
            found.append(row)
            continue
        for extra in (canonical(e) for e in (match.group(2) or "").split(",") if e.strip()):
            if extra not in seen:
                found += own_rows(by_name.get(extra, []), project, seen | {extra})
    return found
