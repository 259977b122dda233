"""Cart parsing, quotes and a tiny idempotent file store for orders.

Cart JSON::

    {"items": [{"sku": "A-1", "qty": 2, "price_cents": 999}],
     "coupons": [{"kind": "percent", "bps": 1500, "cap_cents": 300},
                 {"kind": "fixed", "cents": 50}]}

``coupons`` is optional; coupons apply in the listed order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from .discounts import BPS_FULL, FIXED, PERCENT, Coupon, stack_discounts

_ORDER_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class OrderError(Exception):
    """A rejected cart or order; ``code`` is stable, the message is for humans."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Line:
    sku: str
    qty: int
    price_cents: int


@dataclass(frozen=True)
class Cart:
    lines: tuple[Line, ...]
    coupons: tuple[Coupon, ...] = ()


class Quote(TypedDict):
    items: int
    subtotal_cents: int
    discount_cents: int
    total_cents: int


class StoredOrder(Quote):
    id: str


def load_cart(text: str | bytes) -> Cart:
    """Decode cart JSON (bytes may be any JSON Unicode encoding) and parse it."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        # Position only: decoder wording changes between Python versions and
        # would make recorded CLI output version-dependent.
        where = f"line {exc.lineno} column {exc.colno}"
        raise OrderError("BAD_JSON", f"cart is not valid JSON ({where})") from None
    except UnicodeDecodeError:
        raise OrderError("BAD_JSON", "cart is not valid UTF-8") from None
    except (ValueError, RecursionError):
        # Integers past the int-parsing digit limit, or absurd nesting.
        raise OrderError("BAD_JSON", "cart is not valid JSON") from None
    return parse_cart(raw)


def parse_cart(raw: object) -> Cart:
    """Validate a decoded cart; errors name the offending field."""
    if not isinstance(raw, dict):
        raise OrderError("BAD_JSON", "cart must be a JSON object")
    items = raw.get("items")
    if not isinstance(items, list):
        raise OrderError("BAD_CART", "items must be a list")
    if not items:
        raise OrderError("CART_EMPTY", "cart has no items")
    coupons = raw.get("coupons", [])
    if not isinstance(coupons, list):
        raise OrderError("BAD_CART", "coupons must be a list")
    lines = tuple(_parse_line(f"items[{i}]", item) for i, item in enumerate(items))
    parsed = tuple(_parse_coupon(f"coupons[{i}]", c) for i, c in enumerate(coupons))
    return Cart(lines=lines, coupons=parsed)


def _parse_line(where: str, item: object) -> Line:
    fields = _object(where, item)
    sku = fields.get("sku")
    if not isinstance(sku, str) or not sku:
        raise OrderError("BAD_CART", f"{where}.sku must be a non-empty string")
    qty = _int_at_least(f"{where}.qty", fields.get("qty"), 1)
    price = _int_at_least(f"{where}.price_cents", fields.get("price_cents"), 0)
    return Line(sku=sku, qty=qty, price_cents=price)


def _parse_coupon(where: str, coupon: object) -> Coupon:
    fields = _object(where, coupon)
    kind = fields.get("kind")
    if kind == PERCENT:
        bps = _int_at_least(f"{where}.bps", fields.get("bps"), 0)
        if bps > BPS_FULL:
            raise OrderError("BAD_CART", f"{where}.bps must be an integer in 0..{BPS_FULL}")
        cap = fields.get("cap_cents")
        cap_cents = None if cap is None else _int_at_least(f"{where}.cap_cents", cap, 0)
        return Coupon(PERCENT, bps, cap_cents)
    if kind == FIXED:
        return Coupon(FIXED, _int_at_least(f"{where}.cents", fields.get("cents"), 0))
    raise OrderError("BAD_CART", f'{where}.kind must be "percent" or "fixed"')


def _object(where: str, value: object) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise OrderError("BAD_CART", f"{where} must be an object")
    return value


def _int_at_least(where: str, value: object, low: int) -> int:
    # bool is an int subclass, but `"qty": true` is a client bug, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise OrderError("BAD_CART", f"{where} must be an integer >= {low}")
    return value


def quote(cart: Cart) -> Quote:
    """Price a cart: line count, subtotal, total after coupons, and their difference."""
    subtotal = sum(line.qty * line.price_cents for line in cart.lines)
    total = stack_discounts(subtotal, cart.coupons)
    return Quote(
        items=len(cart.lines),
        subtotal_cents=subtotal,
        discount_cents=subtotal - total,
        total_cents=total,
    )


def canonical_json(order: StoredOrder) -> str:
    """The exact bytes a stored order file holds.

    Indented with a final newline so stored orders (and fixtures copied from
    them) survive editors and whitespace hooks unchanged.
    """
    return json.dumps(order, sort_keys=True, indent=2) + "\n"


def put_order(store_dir: Path, order_id: str, cart: Cart) -> tuple[StoredOrder, bool]:
    """Store the quoted cart as ``store_dir/<order_id>.json``; return it and whether it is new.

    Idempotent: putting the same order again changes nothing and returns
    ``created=False``; a different order under an existing id is an
    ``ORDER_CONFLICT`` and leaves the stored one untouched.
    """
    if not _ORDER_ID.fullmatch(order_id):
        raise OrderError("BAD_ID", "order id must match [A-Za-z0-9_-]{1,64}")
    order = StoredOrder(id=order_id, **quote(cart))
    store_dir.mkdir(parents=True, exist_ok=True)
    path = store_dir / f"{order_id}.json"
    try:
        # Exclusive create: two writers racing on one id cannot both "create".
        with path.open("x", encoding="utf-8", newline="\n") as handle:
            handle.write(canonical_json(order))
    except FileExistsError:
        if _read_stored(path) != order:
            raise OrderError(
                "ORDER_CONFLICT",
                f"order {order_id} already exists with different content",
            ) from None
        return order, False
    return order, True


def _read_stored(path: Path) -> object:
    # Compare decoded content, so a re-indented but equal file is not a conflict;
    # an unreadable file can never equal a new order.
    try:
        return json.loads(path.read_bytes())
    except ValueError:
        return None
