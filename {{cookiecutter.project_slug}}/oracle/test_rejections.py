"""Rejections are part of the contract: each invalid input gets its code, and a message that
names what is wrong.

Example oracles, one per rejection the example can make: a cart's JSON through `quote_cart`,
and the discount functions' arguments. They pin the code and what the message must name (the
field, or the value, that is wrong), not its wording: the wording is the CLI's output, which
the cassettes record, and a reviewed allowlist row can change (docs/change-the-contract.md);
an oracle that pinned it too would block that change. And one property: a cart's quote adds
up, and its total is what `stack_discounts` makes of its subtotal.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

if TYPE_CHECKING:
    from _gate.plugin.subject import Subject

LINE = {"sku": "MUG", "qty": 1, "price_cents": 999}


def cart(items: list[Any] | None = None, **more: Any) -> str:
    return json.dumps({"items": [LINE] if items is None else items, **more})


def line(**changed: Any) -> dict[str, Any]:
    return {key: value for key, value in {**LINE, **changed}.items() if value != "-"}


def named(rows: list[tuple[Any, ...]]) -> list[Any]:
    """Table rows as test parameters, each with its first column as its id."""
    return [pytest.param(*row[1:], id=row[0]) for row in rows]


# (id, cart text, code, what the message must name; "" for nothing in particular)
CART_REJECTIONS = [
    ("not-json", '{"items": [', "BAD_JSON", "JSON"),
    ("not-an-object", "[]", "BAD_JSON", "JSON object"),
    # Nesting past the decoder's recursion limit: absurd input, still a clean rejection.
    ("nested-too-deep", "[" * 100_000, "BAD_JSON", "JSON"),
    ("items-not-a-list", '{"items": {}}', "BAD_CART", "items"),
    ("no-items", cart([]), "CART_EMPTY", ""),
    ("coupons-not-a-list", cart(coupons={}), "BAD_CART", "coupons"),
    ("line-not-an-object", cart([1]), "BAD_CART", "items[0]"),
    ("sku-empty", cart([line(sku="")]), "BAD_CART", "items[0].sku"),
    ("sku-missing", cart([line(sku="-")]), "BAD_CART", "items[0].sku"),
    ("qty-zero", cart([line(qty=0)]), "BAD_CART", "items[0].qty"),
    ("qty-true", cart([line(qty=True)]), "BAD_CART", "items[0].qty"),
    ("qty-float", cart([line(qty=1.5)]), "BAD_CART", "items[0].qty"),
    ("price-negative", cart([line(price_cents=-1)]), "BAD_CART", "items[0].price_cents"),
    ("second-line", cart([LINE, line(sku="")]), "BAD_CART", "items[1].sku"),
    ("coupon-not-an-object", cart(coupons=[1]), "BAD_CART", "coupons[0]"),
    ("coupon-kind-unknown", cart(coupons=[{"kind": "bogo"}]), "BAD_CART", "coupons[0].kind"),
    (
        "percent-bps-negative",
        cart(coupons=[{"kind": "percent", "bps": -1}]),
        "BAD_CART",
        "coupons[0].bps",
    ),
    (
        "percent-bps-over-100",
        cart(coupons=[{"kind": "percent", "bps": 10_001}]),
        "BAD_CART",
        "coupons[0].bps",
    ),
    (
        "percent-cap-negative",
        cart(coupons=[{"kind": "percent", "bps": 10, "cap_cents": -1}]),
        "BAD_CART",
        "coupons[0].cap_cents",
    ),
    (
        "fixed-cents-negative",
        cart(coupons=[{"kind": "fixed", "cents": -1}]),
        "BAD_CART",
        "coupons[0].cents",
    ),
    (
        "second-coupon",
        cart(coupons=[{"kind": "fixed", "cents": 1}, {"kind": "fixed"}]),
        "BAD_CART",
        "coupons[1].cents",
    ),
]


@pytest.mark.parametrize(("text", "code", "names"), named(CART_REJECTIONS))
def test_a_bad_cart_is_rejected_with_its_code_naming_the_field(
    subject: Subject, text: str, code: str, names: str
) -> None:
    found, message = subject.quote_cart(text)["error"]
    assert found == code
    assert isinstance(message, str) and message.strip()
    assert names in message


# Edges that must be accepted: the bounds themselves, null and absent optional fields.
CART_EDGES = [
    ("bps-exactly-100", cart(coupons=[{"kind": "percent", "bps": 10_000}]), 999, 0),
    ("cap-null", cart(coupons=[{"kind": "percent", "bps": 5000, "cap_cents": None}]), 999, 500),
    ("cap-zero", cart(coupons=[{"kind": "percent", "bps": 5000, "cap_cents": 0}]), 999, 999),
    ("fixed-zero", cart(coupons=[{"kind": "fixed", "cents": 0}]), 999, 999),
    ("price-zero", cart([line(price_cents=0)]), 0, 0),
]


@pytest.mark.parametrize(("text", "subtotal", "total"), named(CART_EDGES))
def test_a_cart_on_a_bound_is_accepted(
    subject: Subject, text: str, subtotal: int, total: int
) -> None:
    quote = subject.quote_cart(text)["quote"]
    assert (quote["subtotal_cents"], quote["total_cents"]) == (subtotal, total)


# (function, arguments, the wrong value the message must name)
DISCOUNT_REJECTIONS = [
    ("stack_discounts", (-1, []), "-1"),
    ("stack_discounts", (100, [{"kind": "percent", "value": 10, "cap_cents": -2}]), "-2"),
    ("stack_discounts", (100, [{"kind": "fixed", "value": -3}]), "-3"),
    ("stack_discounts", (100, [{"kind": "bogo", "value": 1}]), "bogo"),
    ("stack_discounts", (100, [{"kind": "percent", "value": 10_001}]), "10001"),
    ("apply_discount", (-4, 10), "-4"),
    ("apply_discount", (100, -5), "-5"),
    ("invert_discount", (-6, 10), "-6"),
    ("invert_discount", (7, 10_000), "7"),
]


@pytest.mark.parametrize(("name", "args", "names"), DISCOUNT_REJECTIONS)
def test_bad_discount_arguments_are_rejected_naming_the_value(
    subject: Subject, name: str, args: tuple[Any, ...], names: str
) -> None:
    with pytest.raises(ValueError) as raised:
        getattr(subject, name)(*args)
    assert names in str(raised.value)


def test_only_zero_inverts_at_a_full_discount(subject: Subject) -> None:
    assert subject.invert_discount(0, 10_000) == 0


lines = st.lists(
    st.fixed_dictionaries(
        {
            "sku": st.sampled_from(["MUG", "PEN", "LAMP"]),
            "qty": st.integers(min_value=1, max_value=50),
            "price_cents": st.integers(min_value=0, max_value=100_000),
        }
    ),
    min_size=1,
    max_size=5,
)
coupons = st.lists(
    st.fixed_dictionaries({"kind": st.just("percent"), "bps": st.integers(0, 10_000)})
    | st.fixed_dictionaries({"kind": st.just("fixed"), "cents": st.integers(0, 100_000)}),
    max_size=4,
)


@given(lines, coupons)
def test_a_quote_adds_up_and_its_total_is_the_stacked_discount(
    subject: Subject, items: list[dict[str, Any]], stacked: list[dict[str, Any]]
) -> None:
    quote = subject.quote_cart(json.dumps({"items": items, "coupons": stacked}))["quote"]
    subtotal = sum(item["qty"] * item["price_cents"] for item in items)
    as_discounts = [{"kind": c["kind"], "value": c.get("bps", c.get("cents"))} for c in stacked]
    total = subject.stack_discounts(subtotal, as_discounts)
    assert quote == {
        "items": len(items),
        "subtotal_cents": subtotal,
        "discount_cents": subtotal - total,
        "total_cents": total,
    }
