"""Coupon stacking and single-rate discounts, in integer cents.

A rate is given in basis points (1 bp = 0.01 %, so 10_000 bp = 100 %).
Every cut is floored: the shop gives away at most a fraction of a cent less
than the exact rate, and the customer never pays a fraction of a cent more
than the exact discounted price rounded up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BPS_FULL = 10_000
PERCENT = "percent"
FIXED = "fixed"


@dataclass(frozen=True)
class Coupon:
    """One coupon of a stack.

    ``kind`` is ``"percent"`` or ``"fixed"``; ``value`` is basis points for a
    percent coupon and cents for a fixed one. ``cap_cents`` bounds the cut of
    a percent coupon and is ignored for fixed coupons.
    """

    kind: str
    value: int
    cap_cents: int | None = None


def stack_discounts(subtotal_cents: int, coupons: Sequence[Coupon]) -> int:
    """Return the total after applying ``coupons`` in order to ``subtotal_cents``.

    Each coupon acts on what the previous ones left, so order is part of the
    contract: a percent coupon before a fixed one cuts more than after it.
    The total never drops below zero. Raises ``ValueError`` on a negative
    subtotal or an invalid coupon (checked before anything is applied, so a
    bad coupon late in the list is reported even if the total already hit 0).
    """
    if subtotal_cents < 0:
        raise ValueError(f"subtotal_cents must be >= 0, got {subtotal_cents}")
    for coupon in coupons:
        _check_coupon(coupon)
    remaining = subtotal_cents
    for coupon in coupons:
        remaining -= _cut(remaining, coupon)
    return remaining


def _check_coupon(coupon: Coupon) -> None:
    if coupon.kind == PERCENT:
        _check_bps(coupon.value)
        if coupon.cap_cents is not None and coupon.cap_cents < 0:
            raise ValueError(f"cap_cents must be >= 0, got {coupon.cap_cents}")
    elif coupon.kind == FIXED:
        if coupon.value < 0:
            raise ValueError(f"fixed coupon value must be >= 0, got {coupon.value}")
    else:
        raise ValueError(f"unknown coupon kind {coupon.kind!r}")


def _cut(remaining: int, coupon: Coupon) -> int:
    if coupon.kind == FIXED:
        # A fixed coupon larger than what is left only zeroes the total.
        return min(remaining, coupon.value)
    cut = remaining * coupon.value // BPS_FULL
    if coupon.cap_cents is not None:
        cut = min(cut, coupon.cap_cents)
    return cut


def _check_bps(bps: int) -> None:
    if not 0 <= bps <= BPS_FULL:
        raise ValueError(f"bps must be within 0..{BPS_FULL}, got {bps}")


def apply_discount(amount_cents: int, bps: int) -> int:
    """Return ``amount_cents`` minus ``bps`` basis points of it, cut floored.

    Raises ``ValueError`` on a negative amount or ``bps`` outside 0..10_000.
    """
    if amount_cents < 0:
        raise ValueError(f"amount_cents must be >= 0, got {amount_cents}")
    _check_bps(bps)
    return amount_cents - amount_cents * bps // BPS_FULL


def invert_discount(discounted_cents: int, bps: int) -> int:
    """Return the smallest amount ``a >= 0`` with ``apply_discount(a, bps) == discounted_cents``.

    Several amounts can share one discounted value, so this is a right
    inverse, not a true one: ``apply_discount(invert_discount(d, b), b) == d``
    always holds, while ``invert_discount(apply_discount(a, b), b)`` may be
    below ``a``. For ``bps <= 5000`` it is at most 1 cent below ``a``, because
    at most two amounts share a discounted value at a rate of 50 % or less.

    At 100 % every amount maps to 0, so only 0 can be inverted (to 0).
    Raises ``ValueError`` on out-of-range input or a value with no preimage.
    """
    if discounted_cents < 0:
        raise ValueError(f"discounted_cents must be >= 0, got {discounted_cents}")
    _check_bps(bps)
    keep = BPS_FULL - bps
    if keep == 0:
        if discounted_cents != 0:
            raise ValueError(f"a 100 % discount only yields 0, not {discounted_cents}")
        return 0
    if discounted_cents == 0:
        return 0
    # apply_discount(a) == ceil(a * keep / 10_000): it never decreases and
    # grows by at most 1 per cent of input (keep <= 10_000), so it hits every
    # d >= 0, and the first a past ceil(...) >= d, i.e. past
    # a * keep > (d - 1) * 10_000, is exactly the smallest preimage.
    amount = (discounted_cents - 1) * BPS_FULL // keep + 1
    if apply_discount(amount, bps) != discounted_cents:
        raise ValueError(f"no amount discounts to {discounted_cents} at {bps} bps")
    return amount
