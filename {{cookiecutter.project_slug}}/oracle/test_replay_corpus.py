"""Replay oracle: each hand-derived cart in fixtures/carts.jsonl (see carts.md) prices exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from _gate.plugin.subject import Subject

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "carts.jsonl"


def load_corpus(path: Path = CORPUS) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# Loaded at import so each cart becomes its own test id.
ROWS = load_corpus()


def test_corpus_is_present_and_ids_are_unique() -> None:
    assert ROWS, f"{CORPUS} has no carts"
    ids = [row["id"] for row in ROWS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_cart_prices_as_recorded(subject: Subject, row: dict[str, Any]) -> None:
    assert subject.stack_discounts(row["subtotal_cents"], row["coupons"]) == row["expected_cents"]
