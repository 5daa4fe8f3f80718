"""The writers' check of their line counter (``fold.inputs.limits.counter_adds_up``) against
its definition, by enumeration: a writer's lines, with n up to max_n summing to sum_n, are its
counter's with some missing exactly when some set of that many distinct counts, max_n among
them, has that sum."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from fold.inputs.limits import counter_adds_up

WRAP = 2**64


def _by_definition(lines: int, max_n: int, sum_n: int) -> bool:
    return any(
        (sum(chosen) + max_n) % WRAP == sum_n % WRAP
        for chosen in itertools.combinations(range(max_n), lines - 1)
    )


def test_every_count_and_sum_of_small_counters_is_judged_as_defined():
    for max_n in range(0, 9):
        for lines in range(1, max_n + 2):
            for sum_n in range(0, (max_n + 1) * lines + 1):
                assert counter_adds_up(lines, max_n, sum_n) == _by_definition(
                    lines, max_n, sum_n
                ), (lines, max_n, sum_n)


@given(st.data())
def test_lines_without_a_repeat_are_never_refused(data):
    # any set of distinct counts: the sum wraps at 2^64 as the native pass's does
    max_n = data.draw(st.integers(0, 2**63 - 1))
    others = data.draw(st.sets(st.integers(0, max(0, max_n - 1)), max_size=30))
    chosen = {n for n in others if n < max_n} | {max_n}
    assert counter_adds_up(len(chosen), max_n, sum(chosen) % WRAP)


@given(st.data())
def test_one_repeat_in_place_of_one_loss_is_always_found(data):
    max_n = data.draw(st.integers(1, 2**63 - 1))
    lost = data.draw(st.integers(0, max_n - 1))  # max_n itself was read: it is the max
    repeated = data.draw(st.integers(0, max_n).filter(lambda n: n != lost))
    whole = max_n * (max_n + 1) // 2
    assert not counter_adds_up(max_n + 1, max_n, (whole - lost + repeated) % WRAP)


@given(st.data())
def test_a_long_counter_with_a_few_lost_wraps_its_sum_and_is_never_refused(data):
    """Past about 2^32.5 lines a writer's sum of n wraps at 2^64 (as the native pass's does): a few
    lost lines of a long counter must still add up, modulo 2^64."""
    max_n = data.draw(st.integers(2**33, 2**63 - 1))
    lost = data.draw(st.sets(st.integers(0, max_n - 1), max_size=5))
    whole = max_n * (max_n + 1) // 2
    assert whole >= WRAP  # the sum the writer's lines make has wrapped
    assert counter_adds_up(max_n + 1 - len(lost), max_n, (whole - sum(lost)) % WRAP)
