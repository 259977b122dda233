"""Replay oracle: each hand-derived cart in fixtures/carts.jsonl (see carts.md) prices exactly."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}.discounts import (
    Coupon,
    stack_discounts,
)

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "carts.jsonl"


@dataclass(frozen=True)
class Row:
    id: str
    subtotal_cents: int
    coupons: tuple[Coupon, ...]
    expected_cents: int


def _row(line: str) -> Row:
    data = json.loads(line)
    coupons = tuple(Coupon(c["kind"], c["value"], c.get("cap_cents")) for c in data["coupons"])
    return Row(data["id"], data["subtotal_cents"], coupons, data["expected_cents"])


def load_corpus(path: Path = CORPUS) -> list[Row]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [_row(line) for line in lines if line.strip()]


# Loaded at import so each cart becomes its own test id.
ROWS = load_corpus()


def test_corpus_is_present_and_ids_are_unique() -> None:
    assert ROWS, f"{CORPUS} has no carts"
    ids = [row.id for row in ROWS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_cart_prices_as_recorded(row: Row) -> None:
    assert stack_discounts(row.subtotal_cents, row.coupons) == row.expected_cents
