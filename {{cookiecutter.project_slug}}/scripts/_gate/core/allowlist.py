"""The reviewed allowlist (oracle/allowlist.yaml): rows letting one case field, inventory
finding or parent test change, each bound to the base it was reviewed on.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _gate.core.config import load_yaml, require_mapping
from _gate.core.protocol import FailClosed

ALLOWLIST = "oracle/allowlist.yaml"  # reviewed contract changes, read from the evidence tree
ALLOW_FIELDS = ("id", "field", "base", "reason", "reviewer")


BASE_SHA = re.compile(r"[0-9a-f]{7,64}")


INVENTORY = "inventory:"


CROSSRUN = "crossrun"  # a row letting one parent test fail on the patch (scripts/crossrun.py)


HOW = "write rows with `nox -s allow` (scripts/allow.py), which fills it in"


REASON, REVIEWER = "<why the new behaviour is intended>", "@<you>"  # for the reviewer to fill in


def allow_command(case_id: str, field: str) -> str:
    """The command (scripts/allow.py, run on a checkout of the patch's branch) that writes the
    row letting `field` of `case_id` change; quoted for a POSIX shell, placeholders and all."""
    argv = ["nox", "-s", "allow", "--", "--id", case_id, "--field", field]
    return shlex.join([*argv, "--reason", REASON, "--reviewer", REVIEWER])


@dataclasses.dataclass(frozen=True)
class Row:
    """One reviewed exception, for one (case or test, field) and one base."""

    id: str
    field: str
    base: str
    reason: str
    reviewer: str
    where: str = dataclasses.field(default="", compare=False)

    def applies_to(self, base: str) -> bool:
        return base.lower().startswith(self.base)

    def as_dict(self) -> dict[str, str]:
        return {name: str(getattr(self, name)) for name in ALLOW_FIELDS}


def parse_row(raw: Any, where: str) -> Row:
    data = require_mapping(raw, where, ALLOW_FIELDS)
    base = data.get("base")
    if base is None:
        raise FailClosed(
            f"{where}: field 'base' is missing; add `base: \"<sha>\"`, the commit the change "
            f"was reviewed against ({HOW})"
        )
    if not isinstance(base, str) or not BASE_SHA.fullmatch(base.strip().lower()):
        raise FailClosed(
            f"{where}: field 'base' must be a quoted commit sha of at least 7 hex digits, "
            f"got {base!r}; {HOW}"
        )
    for name in ("id", "field", "reason", "reviewer"):
        if data.get(name) is None or not str(data[name]).strip():
            raise FailClosed(f"{where}: field {name!r} is required; a reviewed row names it")
    values = {name: str(data[name]) for name in ("id", "field", "reason", "reviewer")}
    return Row(base=base.strip().lower(), where=where, **values)


def load_allowlist(path: Path) -> list[Row]:
    """Every row of the allowlist, cassette and inventory alike, each validated."""
    raw = require_mapping(load_yaml(path) or {"allow": []}, str(path), ("allow",))
    rows = raw.get("allow") or []
    if not isinstance(rows, list):
        raise FailClosed(f"{path}: field 'allow' must be a list of rows")
    return [parse_row(row, f"{path}: allow row #{i + 1}") for i, row in enumerate(rows)]


def is_cassette_row(row: Row) -> bool:
    """A row of the replay step: not one of the inventory (`inventory:<rule>`) or crossrun."""
    return not row.field.startswith(INVENTORY) and row.field != CROSSRUN


def split_by_base(rows: Sequence[Row], base: str) -> tuple[list[Row], list[Row]]:
    """(rows reviewed against `base`, rows of another base: never applied, only reported)."""
    current = [row for row in rows if row.applies_to(base)]
    return current, [row for row in rows if not row.applies_to(base)]


def other_base_note(rows: Sequence[Row], path: Path | None) -> str:
    if not rows:
        return ""
    what = "row names another base and was" if len(rows) == 1 else "rows name another base and were"
    return (
        f"; {len(rows)} allowlist {what} not applied "
        f"(first: {rows[0].id} {rows[0].field} at {rows[0].base[:12]}): remove them from {path}"
    )
