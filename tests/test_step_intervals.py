"""A request's step times as its step intervals (``fold.folding.step_intervals``): written from
times and read back by the Python side, against the definition written out here; pooled per
request; made by the native read straight from its lines, whatever its threads, equal to the
reference's; and refused by the native cadence when they are not as written.

The extension is imported at the top: when it was not built, this module fails, it is not
skipped.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import canonical_line, scaled
from test_native import assert_both_ways_agree, folded, raw_read, raw_times

from fold import _native  # noqa: F401  fails here when the extension was not built
from fold.folding import native
from fold.folding.step_intervals import COLUMNS, LONG, decoded, encode, merged
from fold.inputs.arm import arm_from_document

START_S = 1764450000
START_NS = START_S * 1_000_000_000
TOP = 2**63 - 1

# Steps from one time to the next: those at 32 bits' edge (LONG itself is 2^32 - 1), zero,
# small, and large ones.
STEPS = st.one_of(
    st.sampled_from([0, 1, LONG - 1, LONG, LONG + 1, 2 * LONG]),
    st.integers(0, 3 * LONG),
)


def by_definition(times: list[int]) -> tuple[int | None, list[int], list[int]]:
    """The encoding written out: the earliest time, each interval in time order (LONG when it
    does not fit under LONG), and the intervals of LONG or more whole."""
    ordered = sorted(times)
    intervals = [after - before for before, after in pairwise(ordered)]
    return (
        ordered[0] if ordered else None,
        [min(interval, LONG) for interval in intervals],
        [interval for interval in intervals if interval >= LONG],
    )


@st.composite
def request_times(draw: st.DrawFn) -> list[int]:
    """A request's times in any order, from anywhere in [0, 2^63): near 0, near the top, or
    stepping by the edge values."""
    base = draw(st.one_of(st.integers(0, TOP), st.sampled_from([0, 1, TOP, TOP - 4 * LONG])))
    count = draw(st.integers(0, 12))
    times = [base]
    for _ in range(count):
        step = draw(STEPS)
        times.append(
            min(TOP, times[-1] + step) if draw(st.booleans()) else max(0, times[-1] - step)
        )
    if draw(st.booleans()):
        times = draw(st.permutations(times))
    return times if draw(st.integers(0, 9)) else []


def frame(rows: list[list[int]]) -> pl.DataFrame:
    return pl.DataFrame({"t_ns": rows}, schema={"t_ns": pl.List(pl.Int64)})


@given(st.lists(request_times(), max_size=8))
def test_times_are_written_by_the_definition_and_read_back_sorted(rows) -> None:
    encoded = encode(frame(rows))
    assert encoded.schema == pl.Schema(COLUMNS)
    assert encoded.rows() == [by_definition(times) for times in rows]
    assert decoded(encoded).to_list() == [sorted(times) for times in rows]


def test_by_hand() -> None:
    """Times 5, 3, 3 + 2^33 and 1: from 1, intervals 2, 2 and 2^33 - 2 (past 32 bits); a
    request of one line has no interval, and one of none no first time."""
    encoded = encode(frame([[5, 3, 3 + 2**33, 1], [7], []]))
    assert encoded.rows() == [(1, [2, 2, LONG], [2**33 - 2]), (7, [], []), (None, [], [])]
    assert decoded(encoded).to_list() == [[1, 3, 5, 3 + 2**33], [7], []]


@given(st.lists(st.tuples(st.integers(0, 3), request_times()), max_size=10))
def test_rows_of_one_key_pool_their_times(rows) -> None:
    keyed = encode(
        pl.DataFrame(
            {"key": [key for key, _ in rows], "t_ns": [times for _, times in rows]},
            schema={"key": pl.Int64, "t_ns": pl.List(pl.Int64)},
        )
    )
    pooled: dict[int, list[int]] = {}
    for key, times in rows:
        pooled.setdefault(key, []).extend(times)
    found = merged(keyed, ["key"])
    assert found["key"].to_list() == sorted(pooled)
    assert decoded(found).to_list() == [sorted(pooled[key]) for key in sorted(pooled)]
    assert found.drop("key").rows() == [by_definition(pooled[key]) for key in sorted(pooled)]


def test_decoding_refuses_what_was_not_written_so() -> None:
    with pytest.raises(ValueError, match="one per LONG"):
        decoded(pl.DataFrame({"first_ns": [1], "gaps": [[LONG]], "long_gaps": [[]]}, COLUMNS))
    with pytest.raises(ValueError, match="without a first time"):
        decoded(pl.DataFrame({"first_ns": [None], "gaps": [[1]], "long_gaps": [[]]}, COLUMNS))


# -- the native read ----------------------------------------------------------------------------

# One leg of 200 s: room for intervals past 32 bits (4.3 s).
LONG_LEG = {
    "run": 1,
    "secs": 200.0,
    "tok_s": 10.0,
    "prompt_tokens": 1,
    "completion_tokens": 4,
    "finish_reason": "stop",
    "generate_start_unix": float(START_S),
    "generate_end_unix": float(START_S + 200),
}


def line(writer: int, n: int, t_ns: int, seq: int) -> bytes:
    row = {"v": 1, "w": f"{writer:016x}", "n": n, "t_ns": t_ns, "pid": 1, "seq": seq}
    return canonical_line({**row, "proposed": 3, "accepted": n % 4}) + b"\n"


def assert_intervals_read(log: Path, times: dict[Any, list[int]], split: dict[str, int]) -> None:
    """The log folded over LONG_LEG, read whole and in the ranges ``split`` asks for: each
    request's (by key, sorted) intervals are the definition's of its ``times``, and the
    reference's."""
    arm = arm_from_document([LONG_LEG])
    expected = [sorted(times[key]) for key in sorted(times)]
    for options in ({}, split):
        assert raw_times(raw_read(log, arm, **options)) == expected
    partial = assert_both_ways_agree(arm, [str(log)])[0]
    assert partial.step_times.select(list(COLUMNS)).rows() == [
        by_definition(times[key]) for key in sorted(times)
    ]


@st.composite
def long_leg_logs(draw: st.DrawFn) -> tuple[bytes, dict[tuple[int, int], list[int]]]:
    """Requests of two writers stepping by the edge values inside the leg, their lines
    interleaved, some out of time order; with each request's times (the definition's input)."""
    times: dict[tuple[int, int], list[int]] = {}
    for writer in range(2):
        for seq in range(draw(st.integers(1, 3))):
            t = START_NS + draw(st.integers(0, 10**9))
            own = [t]
            for _ in range(draw(st.integers(0, 30))):
                t = min(START_NS + 199 * 10**9, t + draw(STEPS))
                own.append(t)
            if draw(st.booleans()):
                own = draw(st.permutations(own))
            times[(writer, seq)] = own
    order = [key for key, own in times.items() for _ in own]
    order = draw(st.permutations(order))
    taken = {key: 0 for key in times}
    counters = [0, 0]
    lines = []
    for writer, seq in order:
        t = times[(writer, seq)][taken[(writer, seq)]]
        taken[(writer, seq)] += 1
        lines.append(line(writer, counters[writer], t, seq))
        counters[writer] += 1
    return b"".join(lines), times


@scaled(0.5)
@given(long_leg_logs())
def test_the_native_read_writes_each_request_s_intervals_whatever_its_threads(
    tmp_path_factory, case
) -> None:
    """Read in one range and in ranges of a few lines each (requests met by several threads,
    each thread's first line of a request kept whole until the ranges are put together): each
    request's intervals are the definition's, and the reference's."""
    log_bytes, times = case
    log = tmp_path_factory.mktemp("intervals") / "steps.jsonl"
    log.write_bytes(log_bytes)
    assert_intervals_read(log, times, {"block": 64, "bytes_per_thread": 1, "threads": 8})


def test_a_request_split_across_files_is_one_request(tmp_path: Path) -> None:
    """Its lines in two files, the later file's times before the earlier's and 2^33 ns apart:
    pooled into one row, in time order."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(line(1, 0, START_NS + 2**33, 5) + line(1, 1, START_NS + 2**33 + 7, 5))
    second.write_bytes(line(1, 2, START_NS, 5))
    arm = arm_from_document([LONG_LEG])
    partial: Any = folded(arm, [str(first), str(second)], native=True)[0]
    assert partial.step_times.select(list(COLUMNS)).rows() == [(START_NS, [LONG, 7], [2**33])]


# -- the native cadence's own checks --------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "gaps", "longs", "why"),
    [
        (0, [LONG], [], "a LONG without its long interval"),
        (0, [1], [LONG], "a long interval without its LONG"),
        (0, [LONG], [LONG - 1], "a long interval that fits 32 bits"),
        (TOP - 1, [2], [], "a last time past 2^63 - 1"),
        (-1, [1], [], "intervals without a first time"),
    ],
)
def test_the_native_cadence_refuses_intervals_not_so_written(first, gaps, longs, why) -> None:
    step_times = pl.DataFrame(
        {"leg": [0], "first_ns": [first], "gaps": [gaps], "long_gaps": [longs]},
        {"leg": pl.Int64, **COLUMNS},
    )
    with pytest.raises(ValueError, match="not well formed"):
        native.cadence(step_times, [0], [10**18], 4.0, [(0,)])


@pytest.mark.parametrize("requests", [3, 300, 17_000])
def test_busy_blocks_name_their_requests_in_more_bytes(tmp_path: Path, requests: int) -> None:
    """Requests interleaved line by line, so one block of the read's lines names 3 requests
    (their places in a byte), 300 (past 256: two bytes) or 17,000 (past 16,384: four bytes,
    the places themselves); two lines each, the second before the first for every seventh.
    Each request's intervals are the definition's, read whole and in ranges, and the
    reference's."""
    times = {
        seq: [START_NS + seq * 1000 + 5, START_NS + seq * 1000 + (1 if seq % 7 == 0 else 9)]
        for seq in range(requests)
    }
    log = tmp_path / "steps.jsonl"
    log.write_bytes(
        b"".join(line(1, i * requests + seq, times[seq][i], seq) for i in range(2) for seq in times)
    )
    assert_intervals_read(log, times, {"block": 4096, "bytes_per_thread": 1, "threads": 3})
