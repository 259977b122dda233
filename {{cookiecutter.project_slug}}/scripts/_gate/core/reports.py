"""JSON reports: written atomically with `schema_version` first, and with the judgment's
temporary folders written by their names (`base:`, `head:`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2  # of every JSON report: raised when a field changes meaning or goes away


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


@dataclass(frozen=True)
class Names:
    """The names the judge gave its folders ({absolute path: name}): reports write its
    worktrees as `base:PATH` and `head:PATH`, never as the temporary folders they are. The
    judgment carries them to every step, inline or a process; a hand run has none."""

    paths: tuple[tuple[str, str], ...] = ()

    def adding(self, path: Path | str, name: str) -> Names:
        return Names((*((p, n) for p, n in self.paths if p != str(path)), (str(path), name)))

    @cached_property
    def pattern(self) -> re.Pattern[str] | None:
        """Every named path, the longest first, so a folder's own name wins over its
        parent's. A path ends at a slash, or where no name continues it (a full stop does
        when a letter follows it)."""
        if not self.paths:
            return None
        ends = r"(?:/|(?![\w-]|\.\w))"
        longest = sorted(self.paths, key=lambda pair: -len(pair[0]))
        return re.compile("|".join(re.escape(path) + ends for path, _ in longest))

    def __call__(self, value: Any) -> Any:
        """`value` (strings, and lists and mappings of them) with every path under a named
        folder written from its name: `PATH/x` as `NAME` + `x` (`base:` + `oracle/cases.yaml`),
        `PATH` alone as `NAME` (or `.` for the empty name, the repository's own)."""
        pattern = self.pattern
        if pattern is None:
            return value
        lookup = dict(self.paths)

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


def spans(lines: Sequence[int]) -> str:
    """`41, 43-45`: lines as a reader counts them."""
    runs: list[list[int]] = []
    for n in lines:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
