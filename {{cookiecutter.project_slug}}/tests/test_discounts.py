"""Unit tests of coupon stacking and single-rate discounts (amounts in cents)."""

from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}.discounts import (
    Coupon,
    apply_discount,
    invert_discount,
    stack_discounts,
)

TEN_PERCENT = Coupon("percent", 1000)
FIVE_OFF = Coupon("fixed", 500)


def test_percent_with_cap_then_fixed() -> None:
    # 1999 * 1500 // 10000 = 299 (cap 300 not reached) -> 1700; 1700 - 50 = 1650
    coupons = [Coupon("percent", 1500, cap_cents=300), Coupon("fixed", 50)]
    assert stack_discounts(1999, coupons) == 1650


def test_stack_order_matters() -> None:
    # percent first: 10000 - 1000 = 9000, then 9000 - 500 = 8500
    # fixed first:   10000 - 500 = 9500, then 9500 - 9500 * 1000 // 10000 = 8550
    assert stack_discounts(10_000, [TEN_PERCENT, FIVE_OFF]) == 8500
    assert stack_discounts(10_000, [FIVE_OFF, TEN_PERCENT]) == 8550


def test_cap_limits_percent_cut() -> None:
    # 20 % of 10000 is 2000, capped to 500 -> 9500
    assert stack_discounts(10_000, [Coupon("percent", 2000, cap_cents=500)]) == 9500
    # 20 % of 2000 is 400, under the cap -> 1600
    assert stack_discounts(2000, [Coupon("percent", 2000, cap_cents=500)]) == 1600


def test_fixed_never_goes_below_zero() -> None:
    # 1200 - min(1200, 5000) = 0; a second fixed coupon has nothing left to cut
    assert stack_discounts(1200, [Coupon("fixed", 5000)]) == 0
    assert stack_discounts(1000, [Coupon("fixed", 600), Coupon("fixed", 600)]) == 0


def test_no_coupons_keeps_subtotal() -> None:
    assert stack_discounts(2500, []) == 2500


@pytest.mark.parametrize(
    ("subtotal", "coupon", "match"),
    [
        (-1, Coupon("fixed", 0), "subtotal_cents"),
        (100, Coupon("percent", 10_001), "bps"),
        (100, Coupon("percent", -1), "bps"),
        (100, Coupon("fixed", -1), "fixed coupon value"),
        (100, Coupon("percent", 1000, cap_cents=-1), "cap_cents"),
        (100, Coupon("bogo", 1), "unknown coupon kind"),
    ],
    ids=[
        "negative-subtotal",
        "bps-over",
        "bps-under",
        "negative-fixed",
        "negative-cap",
        "kind",
    ],
)
def test_stack_rejects_invalid_input(subtotal: int, coupon: Coupon, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        stack_discounts(subtotal, [coupon])


def test_apply_discount_floors_the_cut() -> None:
    # 999 * 3333 = 3_329_667; // 10000 = 332 -> 999 - 332 = 667
    assert apply_discount(999, 3333) == 667
    # 1 * 5000 // 10000 = 0: half of one cent is not given away
    assert apply_discount(1, 5000) == 1
    assert apply_discount(4321, 10_000) == 0


def test_invert_discount_returns_smallest_preimage() -> None:
    # apply(998, 3333) = 998 - 3_326_334 // 10000 = 998 - 332 = 666, so 999 is the
    # smallest amount giving 667
    assert invert_discount(667, 3333) == 999
    # apply(1, 5000) = 1 and apply(2, 5000) = 2 - 1 = 1: both map to 1, 1 is smallest,
    # so the round trip from 2 loses exactly 1 cent
    assert invert_discount(apply_discount(2, 5000), 5000) == 1
    assert invert_discount(0, 2500) == 0
    assert invert_discount(0, 10_000) == 0


@pytest.mark.parametrize(
    ("discounted", "bps", "match"),
    [
        (-1, 1000, "discounted_cents"),
        (100, -1, "bps"),
        (100, 10_001, "bps"),
        (5, 10_000, "100 %"),
    ],
    ids=["negative-amount", "bps-under", "bps-over", "full-discount-nonzero"],
)
def test_invert_discount_rejects_impossible_input(discounted: int, bps: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        invert_discount(discounted, bps)
