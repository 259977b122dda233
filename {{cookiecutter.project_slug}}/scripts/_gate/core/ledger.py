"""The variance ledger (variance-ledger.json on the oracle ref): which tests are frozen, until
when, and the history of every freeze.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate.core.protocol import FailClosed

LEDGER = "variance-ledger.json"


LEDGER_SHAPE = 'expected {"frozen": {test id: row with \'expires\' YYYY-MM-DD}, "history": [event]}'


@dataclass
class Ledger:
    """variance-ledger.json: the live freezes, and why each row came and went."""

    frozen: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    def text(self) -> str:
        data = {
            "frozen": dict(sorted(self.frozen.items())),
            "history": self.history[-HISTORY_LIMIT:],
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def load_ledger(path: Path) -> Ledger:
    try:
        return parse_ledger(path.read_text("utf-8"), str(path))
    except (FileNotFoundError, UnicodeDecodeError):
        raise FailClosed(
            f"{path}: ledger missing or not UTF-8; it lives on the oracle ref"
        ) from None


def parse_ledger(text: str, where: str) -> Ledger:
    try:
        data = json.loads(text or "{}")
    except ValueError as exc:
        raise FailClosed(f"{where}: not valid JSON ({exc}); restore it on the oracle ref") from None
    if isinstance(data, dict) and not data.keys() & {"frozen", "history"}:
        data = {"frozen": data, "history": []}  # `{}` as baked, or an earlier version's rows
    shaped = isinstance(data, dict) and set(data) == {"frozen", "history"}
    frozen, history = (data["frozen"], data["history"]) if shaped else (None, None)
    if not isinstance(frozen, dict) or not isinstance(history, list):
        raise FailClosed(f"{where}: {LEDGER_SHAPE}; restore it on the oracle ref")
    for node, row in frozen.items():
        if not isinstance(row, dict) or not iso_day(row.get("expires")):
            raise FailClosed(f"{where}: frozen row {node!r}: {LEDGER_SHAPE}")
    return Ledger(frozen, history)


def iso_day(value: object) -> bool:
    """A YYYY-MM-DD string: anything else would only fail later, without naming the file."""
    try:
        dt.date.fromisoformat(str(value))
    except ValueError:
        return False
    return isinstance(value, str)


def live(row: dict[str, Any], today: dt.date) -> bool:
    return dt.date.fromisoformat(row["expires"]) >= today


def frozen_ids(ledger: Ledger, today: dt.date) -> set[str]:
    return {node for node, row in ledger.frozen.items() if live(row, today)}


HISTORY_LIMIT = 1000  # events the file keeps; the oracle ref's commits keep every one
