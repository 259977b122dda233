"""The oracle's only door into the code under test. It runs in the subject worker, never in pytest.

Each public function takes and returns JSON values (numbers, strings, lists, dicts, None) and
builds the domain objects itself, so that the property oracles, which run in a process where
the package is not importable, can state their laws on plain data. An exception crosses back
by type name and message: a builtin type (ValueError, ...) is raised again as itself.
"""

from __future__ import annotations

from typing import Any

from {{ cookiecutter.package_name }} import discounts, orders


def _coupon(data: dict[str, Any]) -> discounts.Coupon:
    return discounts.Coupon(data["kind"], data["value"], data.get("cap_cents"))


def stack_discounts(subtotal_cents: int, coupons: list[dict[str, Any]]) -> int:
    return discounts.stack_discounts(subtotal_cents, [_coupon(c) for c in coupons])


def apply_discount(amount_cents: int, bps: int) -> int:
    return discounts.apply_discount(amount_cents, bps)


def invert_discount(discounted_cents: int, bps: int) -> int:
    return discounts.invert_discount(discounted_cents, bps)


def quote_cart(text: str) -> dict[str, Any]:
    """The quote of a cart's JSON text, or the rejection: {"error": [code, message]}."""
    try:
        return {"quote": dict(orders.quote(orders.load_cart(text)))}
    except orders.OrderError as exc:
        return {"error": [exc.code, exc.message]}
