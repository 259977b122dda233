"""The quarantine (quarantine.yaml on the oracle ref): rows that exclude a test until a date."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _gate.core.config import load_rows
from _gate.core.protocol import FailClosed

ROW_FIELDS = ("id", "until", "reason", "owner")


def parse_day(value: Any, where: str) -> dt.date:
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise FailClosed(f"{where}: 'until' must be a date YYYY-MM-DD, got {value!r}") from None


def load_quarantine(path: Path) -> list[dict[str, Any]]:
    rows = load_rows(path, "quarantine", ROW_FIELDS)
    where = f"{path}: quarantine row"
    return [{**r, "id": str(r["id"]), "until": parse_day(r["until"], where)} for r in rows]


def active_ids(rows: Sequence[dict[str, Any]], today: dt.date) -> set[str]:
    return {row["id"] for row in rows if row["until"] >= today}
