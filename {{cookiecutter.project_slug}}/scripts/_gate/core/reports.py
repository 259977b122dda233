"""JSON reports: written atomically with `schema_version` first, and with the judgment's
temporary folders written by their names (`base:`, `head:`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2  # of every JSON report: raised when a field changes meaning or goes away


# JSON {absolute path: name}, set by the judge: reports write its worktrees as `base:PATH` and
# `head:PATH`, never as the temporary folders they are (see `named`).
PATH_NAMES = "ORACLE_PATH_NAMES"


def write_json(path: Path, payload: object) -> None:
    """Write atomically so a killed run never leaves half a report behind.

    Indented for people when small; a large report (an inventory of thousands of tests) stays
    compact, since indenting disables the C encoder and costs seconds.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, sort_keys=True, default=str)
    if len(text) < 1 << 20:
        text = json.dumps(payload, indent=2, sort_keys=True, default=str)
    if path.exists() and not path.is_file():  # --report /dev/null: written, never replaced
        path.write_text(text + "\n", "utf-8")
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n", "utf-8")
    tmp.replace(path)


def write_report(path: Path, payload: dict[str, Any]) -> None:
    """A JSON report, as every script writes one: `schema_version` first."""
    write_json(path, {"schema_version": SCHEMA_VERSION, **payload})


def path_names() -> list[tuple[str, str]]:
    """The names the judge gave its folders ($ORACLE_PATH_NAMES)."""
    try:
        names = json.loads(os.environ.get(PATH_NAMES) or "{}")
    except ValueError:
        return []
    return [(str(k), str(v)) for k, v in names.items()] if isinstance(names, dict) else []


def named(value: Any, names: Sequence[tuple[str, str]] | None = None) -> Any:
    """`value` (strings, and lists and mappings of them) with every path under a named folder
    written from its name: `PATH/x` as `NAME` + `x` (`base:` + `oracle/cases.yaml`), `PATH`
    alone as `NAME` (or `.` for the empty name, the repository's own)."""
    pairs = sorted(path_names() if names is None else names, key=lambda p: -len(p[0]))
    if not pairs:
        return value
    # The longest path first, so a folder's own name wins over its parent's. A path ends at a
    # slash, or where no name continues it (a full stop does when a letter follows it).
    ends = r"(?:/|(?![\w-]|\.\w))"
    pattern = re.compile("|".join(re.escape(path) + ends for path, _ in pairs))
    lookup = dict(pairs)

    def name(match: re.Match[str]) -> str:
        text = match.group()
        label = lookup[text.removesuffix("/")]
        return label if text.endswith("/") else label or "."

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return pattern.sub(name, item) if "/" in item else item
        if isinstance(item, dict):
            return {walk(k): walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(value)
