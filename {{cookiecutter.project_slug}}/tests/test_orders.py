"""Unit tests of cart parsing, quoting and the idempotent order store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}.orders import (
    OrderError,
    load_cart,
    parse_cart,
    put_order,
    quote,
)

CART = {
    "items": [
        {"sku": "MUG", "qty": 2, "price_cents": 999},
        {"sku": "PEN", "qty": 1, "price_cents": 1},
    ],
    "coupons": [
        {"kind": "percent", "bps": 1500, "cap_cents": 300},
        {"kind": "fixed", "cents": 50},
    ],
}


def test_quote_sums_lines_and_stacks_coupons() -> None:
    # subtotal 2 * 999 + 1 = 1999; 1999 * 1500 // 10000 = 299 -> 1700; -50 -> 1650
    assert quote(parse_cart(CART)) == {
        "items": 2,
        "subtotal_cents": 1999,
        "discount_cents": 349,
        "total_cents": 1650,
    }


def test_coupons_are_optional() -> None:
    # 3 * 250 = 750, nothing off
    cart = parse_cart({"items": [{"sku": "A", "qty": 3, "price_cents": 250}]})
    assert quote(cart)["total_cents"] == 750


def test_empty_cart_is_rejected() -> None:
    with pytest.raises(OrderError) as caught:
        parse_cart({"items": []})
    assert caught.value.code == "CART_EMPTY"


@pytest.mark.parametrize(
    ("cart", "message"),
    [
        (
            {"items": [{"sku": "A", "qty": 0, "price_cents": 1}]},
            "items[0].qty must be an integer >= 1",
        ),
        (
            {"items": [{"sku": "A", "qty": True, "price_cents": 1}]},
            "items[0].qty must be an integer >= 1",
        ),
        (
            {"items": [{"sku": "A", "qty": 1, "price_cents": 1.5}]},
            "items[0].price_cents must be an integer >= 0",
        ),
        (
            {
                "items": [{"sku": "A", "qty": 1, "price_cents": 1}],
                "coupons": [{"kind": "bogo"}],
            },
            'coupons[0].kind must be "percent" or "fixed"',
        ),
    ],
    ids=["qty-zero", "qty-bool", "price-float", "coupon-kind"],
)
def test_bad_cart_names_the_field(cart: dict[str, object], message: str) -> None:
    with pytest.raises(OrderError) as caught:
        parse_cart(cart)
    assert (caught.value.code, caught.value.message) == ("BAD_CART", message)


@pytest.mark.parametrize(
    "text", ['{"items": [', "[]", b"\xff"], ids=["truncated", "array", "not-utf8"]
)
def test_unparseable_cart_is_bad_json(text: str | bytes) -> None:
    with pytest.raises(OrderError) as caught:
        load_cart(text)
    assert caught.value.code == "BAD_JSON"


def test_put_order_is_idempotent(tmp_path: Path) -> None:
    order, created = put_order(tmp_path, "ord_1", parse_cart(CART))
    assert created is True
    assert order == {
        "id": "ord_1",
        "items": 2,
        "subtotal_cents": 1999,
        "discount_cents": 349,
        "total_cents": 1650,
    }
    stored = tmp_path / "ord_1.json"
    before = (stored.read_bytes(), stored.stat().st_mtime_ns)

    again, created = put_order(tmp_path, "ord_1", parse_cart(CART))

    assert (again, created) == (order, False)
    assert (stored.read_bytes(), stored.stat().st_mtime_ns) == before
    assert json.loads(before[0]) == order


def test_put_order_conflict_keeps_stored_order(tmp_path: Path) -> None:
    put_order(tmp_path, "ord_1", parse_cart(CART))
    before = (tmp_path / "ord_1.json").read_bytes()
    other = parse_cart({"items": [{"sku": "MUG", "qty": 1, "price_cents": 999}]})

    with pytest.raises(OrderError) as caught:
        put_order(tmp_path, "ord_1", other)

    assert caught.value.code == "ORDER_CONFLICT"
    assert (tmp_path / "ord_1.json").read_bytes() == before


@pytest.mark.parametrize("order_id", ["", "../escape", "a" * 65, "sp ace"])
def test_put_order_rejects_bad_id(tmp_path: Path, order_id: str) -> None:
    with pytest.raises(OrderError) as caught:
        put_order(tmp_path / "store", order_id, parse_cart(CART))
    assert caught.value.code == "BAD_ID"
    assert not (tmp_path / "store").exists()
