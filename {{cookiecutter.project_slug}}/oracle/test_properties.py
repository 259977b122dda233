"""Property oracles for discounts: laws that must hold for every input, not just examples.

Deterministic and bounded (fixed seed, no example database, no deadline) so the
oracle gives the same verdict on every run and writes nothing to the tree.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from {{ cookiecutter.package_name }}.discounts import (
    Coupon,
    apply_discount,
    invert_discount,
    stack_discounts,
)

ORACLE = settings(max_examples=150, derandomize=True, deadline=None, database=None)

MAX_CENTS = 10_000_000
cents = st.integers(min_value=0, max_value=MAX_CENTS)
bps = st.integers(min_value=0, max_value=10_000)
percent = st.builds(
    Coupon,
    st.just("percent"),
    bps,
    st.none() | st.integers(min_value=0, max_value=MAX_CENTS),
)
fixed = st.builds(Coupon, st.just("fixed"), cents)
coupon_lists = st.lists(percent | fixed, max_size=6)


@ORACLE
@given(cents, coupon_lists)
def test_total_stays_between_zero_and_subtotal(subtotal: int, coupons: list[Coupon]) -> None:
    assert 0 <= stack_discounts(subtotal, coupons) <= subtotal


@ORACLE
@given(cents, coupon_lists, coupon_lists)
def test_stacking_is_sequential_composition(
    subtotal: int, first: list[Coupon], then: list[Coupon]
) -> None:
    # The order law: a stack is its prefix applied first, then the rest on what is left.
    once = stack_discounts(subtotal, first + then)
    assert once == stack_discounts(stack_discounts(subtotal, first), then)


@ORACLE
@given(cents, coupon_lists, percent | fixed, st.integers(min_value=0, max_value=6))
def test_adding_a_coupon_never_raises_the_total(
    subtotal: int, coupons: list[Coupon], extra: Coupon, position: int
) -> None:
    # Anywhere in the stack, not only at the end: every cut is monotone in what is left.
    index = min(position, len(coupons))
    more = [*coupons[:index], extra, *coupons[index:]]
    assert stack_discounts(subtotal, more) <= stack_discounts(subtotal, coupons)


@ORACLE
@given(cents, bps)
def test_invert_is_a_right_inverse_below_the_amount(amount: int, rate: int) -> None:
    discounted = apply_discount(amount, rate)
    back = invert_discount(discounted, rate)
    assert apply_discount(back, rate) == discounted
    assert back <= amount


@ORACLE
@given(cents, st.integers(min_value=0, max_value=5000))
def test_round_trip_loses_at_most_one_cent_up_to_half_off(amount: int, rate: int) -> None:
    assert amount - invert_discount(apply_discount(amount, rate), rate) <= 1


@ORACLE
@given(cents, st.integers(min_value=0, max_value=9999))
def test_invert_finds_the_smallest_preimage_of_any_value(discounted: int, rate: int) -> None:
    # Below 100 % every non-negative value is reachable, and nothing smaller reaches it.
    back = invert_discount(discounted, rate)
    assert apply_discount(back, rate) == discounted
    assert back == 0 or apply_discount(back - 1, rate) < discounted
