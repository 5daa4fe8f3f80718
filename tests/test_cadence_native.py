"""The native cadence (``fold._native.cadence`` through ``fold.folding.cadence.fold_cadence``)
gives the same figures as the polars reference (``polars_cadence``), exactly, per request and for
any group of legs; and both match the definitions computed by hand.

The extension is imported at the top: when it was not built, this module fails, it is not
skipped.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from native_switch import native_switch
from polars.testing import assert_frame_equal
from pytest import approx
from strategies import scaled

from fold import _native  # noqa: F401  fails here when the extension was not built
from fold.folding import native, step_intervals
from fold.folding.accumulate import keys_increase
from fold.folding.cadence import KEY, Cadence, fold_cadence, polars_cadence
from fold.folding.step_intervals import encode
from fold.inputs.arm import WINDOW_SLACK_NS

SECOND = 1_000_000_000
LEG_SECONDS = 10


def close(expected: float) -> Any:
    return approx(expected, rel=1e-12)


def legs_frame(count: int) -> pl.DataFrame:
    """``count`` legs of LEG_SECONDS each, one after the other, widened by the band as the arm
    widens them."""
    starts = [(1 + 2 * LEG_SECONDS * index) * SECOND for index in range(count)]
    return pl.DataFrame(
        {
            "index": list(range(count)),
            "start_ns": [start - WINDOW_SLACK_NS for start in starts],
            "end_ns": [start + LEG_SECONDS * SECOND + WINDOW_SLACK_NS for start in starts],
        },
        schema={"index": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )


def step_times(rows: list[tuple[int, str, int, list[int]]]) -> pl.DataFrame:
    """A partial fold's step times of requests with integer ids (``sid`` null), as its step
    intervals."""
    return encode(
        pl.DataFrame(
            rows,
            schema={"leg": pl.Int64, "w": pl.String, "seq": pl.UInt64, "t_ns": pl.List(pl.Int64)},
            orient="row",
        ).select("leg", "w", "seq", pl.lit(None, dtype=pl.String).alias("sid"), "t_ns")
    )


def both(
    times: pl.DataFrame, legs: pl.DataFrame, stall_factor: float, groups: list[list[int]]
) -> tuple[Cadence, Cadence]:
    with native_switch(True):
        native = fold_cadence(times, legs, stall_factor, groups)
    with native_switch(False):
        reference = fold_cadence(times, legs, stall_factor, groups)
    return native, reference


def assert_same(native: Cadence, reference: Cadence, groups: list[list[int]]) -> None:
    assert_frame_equal(native.requests, reference.requests, check_exact=True)
    assert native.groups(groups) == reference.groups(groups)


@st.composite
def cadence_logs(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame, list[list[int]], float]:
    """Requests in legs with concurrent requests, batches sharing a time, single steps, stalls,
    steps in the band around the window, legs without requests, times out of order and
    requests split over rows (as unmerged partial folds hold them)."""
    leg_count = draw(st.integers(1, 4))
    legs = legs_frame(leg_count)
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    rows: list[tuple[int, str, int, list[int]]] = []
    for leg, start, end in legs.select("index", "start_ns", "end_ns").iter_rows():
        requests = draw(st.integers(0, 4))  # 0: a leg without requests
        for request in range(requests):
            lines = draw(st.integers(1, 40))
            # Paces whose intervals sit at 32 bits' edge too (LONG itself: 2^32 - 1).
            pace = draw(
                st.sampled_from([0, 1, 999, 20_000_000, 50_000_000, 2**32 - 2, 2**32 - 1, 2**32])
            )
            # Start in the band before the window, at it, or well inside.
            t = draw(
                st.sampled_from([start, start + 1, start + 2 * WINDOW_SLACK_NS, start + SECOND])
            )
            times = []
            for _ in range(lines):
                times.append(min(t, end))
                stall = rng.random() < 0.1
                t += pace * (rng.choice([5, 40]) if stall else 1) + rng.choice([0, 0, 1, 17])
            if draw(st.booleans()):
                times[-1] = end - rng.randrange(0, 2 * WINDOW_SLACK_NS + 1)  # the end band
            writer = f"{request % 2:016x}"
            if draw(st.booleans()):
                rng.shuffle(times)
            cut = draw(st.integers(0, len(times)))
            parts = [times[:cut], times[cut:]] if 0 < cut < len(times) else [times]
            rows.extend((leg, writer, request, part) for part in parts)
    rng.shuffle(rows)
    indices = list(range(leg_count))
    groups = [[leg] for leg in indices] + [indices, indices[1:], [], indices + indices]
    factor = draw(st.sampled_from([1.0, 1.5, 4.0, 10.0]))
    return step_times(rows), legs, groups, factor


@scaled(0.5)
@given(cadence_logs())
def test_native_cadence_equals_the_polars_reference(case) -> None:
    times, legs, groups, factor = case
    native, reference = both(times, legs, factor, groups)
    assert_same(native, reference, groups)


@scaled(0.5)
@given(cadence_logs())
def test_rows_already_one_per_request_in_key_order_give_the_same_figures(case) -> None:
    """A partial fold's own rows (one per request, in key order) skip the merge and the sort;
    the figures are the same as from the reference, which always sorts."""
    times, legs, groups, factor = case
    merged = step_intervals.merged(times, KEY)
    assert keys_increase(merged)
    native, reference = both(merged, legs, factor, groups)
    assert_same(native, reference, groups)
    assert_same(native, both(times, legs, factor, groups)[1], groups)


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row's KEY as polars sorts it: each field nulls first (str order is UTF-8 byte order)."""
    return tuple((value is not None, value if value is not None else 0) for value in row)


key_rows = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.integers(0, 2)),
        st.one_of(
            st.none(),
            st.sampled_from(["0000000000000001", "00000000000000ff", "ffffffffffffffff"]),
        ),
        st.one_of(
            st.none(),
            st.sampled_from(
                ["", "a", "ab", "b", "é", "\u00ff", "\u0800", "\uffff", "\U0001f600", "\x00", "z"]
            ),
        ),
        st.one_of(st.none(), st.integers(0, 2**64 - 1), st.integers(0, 3)),
    ),
    max_size=8,
)


@given(key_rows, st.booleans())
def test_the_key_order_check_agrees_with_a_sort_written_out(rows, sort_first) -> None:
    if sort_first:
        rows = sorted(rows, key=_sort_key)
    frame = pl.DataFrame(
        rows,
        schema={"leg": pl.Int64, "w": pl.String, "sid": pl.String, "seq": pl.UInt64},
        orient="row",
    ).select(KEY)
    keys = [_sort_key(row) for row in frame.iter_rows()]
    expected = all(before < after for before, after in itertools.pairwise(keys))
    assert keys_increase(frame) is expected
    # The same, from polars' own sort: in order and no key twice.
    by_polars = frame.equals(frame.sort(KEY)) and not frame.is_duplicated().any()
    assert expected is by_polars


def test_the_extension_is_used_when_on(monkeypatch) -> None:
    """The comparison above compares two paths, not one path twice."""
    calls = []
    real = native.cadence

    def counted(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(native, "cadence", counted)
    times = step_times([(0, "a", 1, [2 * SECOND, 2 * SECOND + 10])])
    legs = legs_frame(1)
    with native_switch(True):
        fold_cadence(times, legs, 4.0, [[0]])
    assert len(calls) == 1
    with native_switch(False):
        fold_cadence(times, legs, 4.0, [[0]])
    polars_cadence(times, legs, 4.0, [[0]])
    assert len(calls) == 1


def test_a_group_not_asked_for_is_refused() -> None:
    """The pooled intervals are worked out with the requests' figures, for the groups asked for
    then; a group asked for later has no figures, rather than wrong ones."""
    times = step_times([(0, "a", 1, [2 * SECOND, 2 * SECOND + 10]), (1, "a", 2, [0])])
    for cadence in both(times, legs_frame(2), 4.0, [[1, 0, 0]]):
        assert cadence.pooled_intervals([0, 1]) == (1, 10, 10, 10, 10, 10)
        with pytest.raises(KeyError, match=r"legs \(0,\)"):
            cadence.groups([[0]])


def test_hand_computed_figures_on_both_paths() -> None:
    """Figures worked out by hand (floats to 1e-12). One request stepping every 50 ms with one
    2 s gap, starting 3 s into a 10 s leg, and a second request of one step in the band before
    the window; a second leg without steps."""
    legs = legs_frame(2)
    start = SECOND  # leg 0's recorded start
    times = [start + 3 * SECOND + 50_000_000 * i for i in range(11)]  # 10 intervals of 50 ms
    times += [times[-1] + 2 * SECOND]  # one stall of 2 s
    times += [times[-1] + 50_000_000 * i for i in range(1, 10)]  # 9 more of 50 ms
    rows = [(0, "a", 1, list(reversed(times))), (0, "b", 7, [start - 300])]
    for cadence in both(step_times(rows), legs, 4.0, [[0], [0, 1], [1]]):
        # each request's figures in nanoseconds, as the cadence keeps them
        figures = {(row["w"], row["seq"]): row for row in cadence.requests.iter_rows(named=True)}
        paced = figures[("a", 1)]
        assert paced["leg"] == 0 and paced["lines"] == 21 and paced["intervals"] == 20
        assert paced["first_step_ns"] == 3 * SECOND
        assert paced["decode_ns"] == times[-1] - times[0]
        assert paced["tail_ns"] == start + LEG_SECONDS * SECOND - times[-1]
        assert paced["median_ns"] == 50_000_000
        assert paced["p90_ns"] == 50_000_000  # the 18th of 20: still 50 ms
        assert paced["p99_ns"] == 2 * SECOND and paced["max_ns"] == 2 * SECOND
        assert paced["stalls"] == 1 and paced["stall_ns"] == 2 * SECOND - 50_000_000
        single = figures[("b", 7)]  # in the band: counts as at the window's start
        assert single["first_step_ns"] == 0 and single["decode_ns"] == 0
        assert single["tail_ns"] == LEG_SECONDS * SECOND
        assert single["median_ns"] is None and single["stalls"] is None
        leg, warm, empty = cadence.groups([[0], [0, 1], [1]])
        assert leg == warm
        assert leg["requests"] == 2 and leg["intervals"] == 20 and leg["stalls"] == 1
        assert leg["interval_median_s"] == close(0.05) and leg["interval_max_s"] == 2.0
        assert leg["median"]["first_step_s"] == (3.0 + 0.0) / 2
        assert leg["shares"]["before_first_step"] == close(3.0 / (2 * LEG_SECONDS))
        assert empty["requests"] == 0 and empty["interval_median_s"] is None
        assert empty["shares"] == dict.fromkeys(empty["shares"])


def test_pooled_intervals_of_many_legs_on_a_large_log() -> None:
    """Legs whose intervals spread over many orders of magnitude (radix passes over the whole
    range) and whose requests are not next to each other; the pooled ranks by definition."""
    rng = random.Random(5)
    legs = legs_frame(3)
    rows: list[tuple[int, str, int, list[int]]] = []
    gaps: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for request in range(60):
        leg = request % 3
        t = (1 + 2 * LEG_SECONDS * leg) * SECOND
        times = [t]
        for _ in range(rng.randrange(1, 300)):
            gap = rng.choice([0, 1, rng.randrange(10**3), rng.randrange(10**9)])
            gaps[leg].append(gap)
            times.append(times[-1] + gap)
        rows.append((leg, f"{request:016x}", request, times))
    groups = [[0], [1], [2], [0, 2], [0, 1, 2]]
    native, reference = both(step_times(rows), legs, 4.0, groups)
    assert_same(native, reference, groups)
    for group, figures in zip(groups, native.groups(groups), strict=True):
        ordered = sorted(gap for leg in group for gap in gaps[leg])
        count = len(ordered)
        middle = (ordered[(count - 1) // 2] + ordered[count // 2]) / 2
        assert figures["interval_median_s"] == close(middle / SECOND)
        assert figures["interval_p90_s"] == close(ordered[-(-count * 90 // 100) - 1] / SECOND)
        assert figures["interval_p99_s"] == close(ordered[-(-count * 99 // 100) - 1] / SECOND)
        assert figures["interval_max_s"] == close(ordered[-1] / SECOND)


def test_pooled_ranks_where_intervals_share_their_top_bits() -> None:
    """The native search finds each rank a digit at a time from the top and keeps values only
    once a pass would hold at most 2^18 of them. Large intervals alike but for their lowest
    bits, more of them than it keeps (so every digit is counted), beside a leg where they are
    few (so they are kept and selected), one of zeros only, and one interval near 2^62: each
    group's ranks as the sorted intervals give them."""
    big = 2**40
    many = 2**18 + 10_000
    gaps = {
        0: np.concatenate([big + np.arange(many) % 3, [big - 1, big + 2**11, 7]]),
        1: big + 5 + (np.arange(5_000) % 2) * 2**20,
        2: np.zeros(3, dtype=np.int64),
        3: np.array([2**62 - 1]),
    }
    rows = []
    for leg, leg_gaps in gaps.items():
        # two requests a leg, the intervals split between them, each from time 0
        half = len(leg_gaps) // 2
        for request, part in enumerate([leg_gaps[:half], leg_gaps[half:]]):
            times = np.concatenate([[0], np.cumsum(part, dtype=np.int64)])
            rows.append((leg, f"{request:016x}", request, pl.Series(times, dtype=pl.Int64)))
    frame = pl.DataFrame(
        {
            "leg": [row[0] for row in rows],
            "w": [row[1] for row in rows],
            "seq": [row[2] for row in rows],
            "sid": [None] * len(rows),
            "t_ns": [row[3] for row in rows],
        },
        schema={
            "leg": pl.Int64,
            "w": pl.String,
            "seq": pl.UInt64,
            "sid": pl.String,
            "t_ns": pl.List(pl.Int64),
        },
    ).pipe(encode)
    groups = [[0], [1], [2], [3], [0, 1], [0, 1, 2, 3], [4], []]
    with native_switch(True):
        cadence = fold_cadence(frame, legs_frame(5), 4.0, groups)
    for group in groups:
        none = np.array([], dtype=np.int64)
        pooled = np.sort(np.concatenate([none, *(gaps.get(leg, none) for leg in group)]))
        count = len(pooled)
        expected = None
        if count:
            expected = (
                count,
                int(pooled[(count - 1) // 2]),
                int(pooled[count // 2]),
                int(pooled[-(-count * 90 // 100) - 1]),
                int(pooled[-(-count * 99 // 100) - 1]),
                int(pooled[-1]),
            )
        assert cadence.pooled_intervals(group) == expected, group
