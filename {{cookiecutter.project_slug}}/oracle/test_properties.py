"""Property oracles for discounts: laws that must hold for every input, not just examples.

Deterministic and bounded (fixed seed, no example database, no deadline) so the
oracle gives the same verdict on every run and writes nothing to the tree. The code under
test is reached only through `subject` (oracle/adapter.py in a worker process): the laws and
their assertions run here, where the patch's code cannot reach them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hypothesis import given, settings
from hypothesis import strategies as st

if TYPE_CHECKING:
    from _gate.plugin.subject import Subject

ORACLE = settings(max_examples=150, derandomize=True, deadline=None, database=None)

MAX_CENTS = 10_000_000
cents = st.integers(min_value=0, max_value=MAX_CENTS)
bps = st.integers(min_value=0, max_value=10_000)
percent = st.fixed_dictionaries(
    {
        "kind": st.just("percent"),
        "value": bps,
        "cap_cents": st.none() | st.integers(min_value=0, max_value=MAX_CENTS),
    }
)
fixed = st.fixed_dictionaries({"kind": st.just("fixed"), "value": cents})
coupon_lists = st.lists(percent | fixed, max_size=6)
Coupons = list[dict[str, Any]]


@ORACLE
@given(cents, coupon_lists)
def test_total_stays_between_zero_and_subtotal(
    subject: Subject, subtotal: int, coupons: Coupons
) -> None:
    assert 0 <= subject.stack_discounts(subtotal, coupons) <= subtotal


@ORACLE
@given(cents, coupon_lists, coupon_lists)
def test_stacking_is_sequential_composition(
    subject: Subject, subtotal: int, first: Coupons, then: Coupons
) -> None:
    # The order law: a stack is its prefix applied first, then the rest on what is left.
    once = subject.stack_discounts(subtotal, first + then)
    assert once == subject.stack_discounts(subject.stack_discounts(subtotal, first), then)


@ORACLE
@given(cents, coupon_lists, percent | fixed, st.integers(min_value=0, max_value=6))
def test_adding_a_coupon_never_raises_the_total(
    subject: Subject, subtotal: int, coupons: Coupons, extra: dict[str, Any], position: int
) -> None:
    # Anywhere in the stack, not only at the end: every cut is monotone in what is left.
    index = min(position, len(coupons))
    more = [*coupons[:index], extra, *coupons[index:]]
    assert subject.stack_discounts(subtotal, more) <= subject.stack_discounts(subtotal, coupons)


@ORACLE
@given(cents, bps)
def test_invert_is_a_right_inverse_below_the_amount(
    subject: Subject, amount: int, rate: int
) -> None:
    discounted = subject.apply_discount(amount, rate)
    back = subject.invert_discount(discounted, rate)
    assert subject.apply_discount(back, rate) == discounted
    assert back <= amount


@ORACLE
@given(cents, st.integers(min_value=0, max_value=5000))
def test_round_trip_loses_at_most_one_cent_up_to_half_off(
    subject: Subject, amount: int, rate: int
) -> None:
    assert amount - subject.invert_discount(subject.apply_discount(amount, rate), rate) <= 1


@ORACLE
@given(cents, st.integers(min_value=0, max_value=9999))
def test_invert_finds_the_smallest_preimage_of_any_value(
    subject: Subject, discounted: int, rate: int
) -> None:
    # Below 100 % every non-negative value is reachable, and nothing smaller reaches it.
    back = subject.invert_discount(discounted, rate)
    assert subject.apply_discount(back, rate) == discounted
    assert back == 0 or subject.apply_discount(back - 1, rate) < discounted
