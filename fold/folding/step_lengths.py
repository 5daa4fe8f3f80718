"""The step time per draft length: how long a step that proposed p tokens took, from the log.

A step's time is the interval from the same request's previous line in its leg to this one
(``fold.folding.cadence``'s intervals), every attributed line counting as a forward, and the
interval goes to the draft length of the step it ends at: the forward that drafted and
verified that step. A request's first line has no interval. Lines of one request with the
same ``t_ns`` are ordered by their proposed (the interval between them is 0 either way).

The native pass sums them per request and draft length as it reads each request's lines in
order; ``ordered_length_sums`` is the same definition over lines in any order (sorted only when
they are not in order), and ``fold.folding.line_rows`` makes every request's rows from one or
the other; the figure pools them over the legs asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from fold.folding.packed_tokens import TOKEN_BITS

_PROPOSED_MASK = (1 << TOKEN_BITS) - 1

StepTimes = dict[int, tuple[int, int]]
"""Per draft length (a step's proposed, > 0): (intervals, their sum in nanoseconds)."""


_EXACT_BOUND = 2**62

LENGTH_SUMS = {"request": pl.UInt32, "length": pl.Int64, "intervals": pl.Int64, "ns": pl.Int128}


def step_time_by_length(
    lengths: pl.DataFrame, step_times: pl.DataFrame, legs: Sequence[int]
) -> StepTimes:
    """Per draft length, the intervals ending at a drafted step of the legs ``legs``, from every
    request's rows (``fold.folding.line_rows.LineRows.lengths``, by row of ``step_times``)."""
    leg_of = step_times["leg"]
    chosen = lengths.with_columns(leg_of.gather(lengths["request"]).alias("leg")).filter(
        pl.col("leg").is_in(list(legs))
    )
    pooled = (
        chosen.group_by("length")
        .agg(pl.col("intervals").sum(), pl.col("ns").cast(pl.Int128).sum())
        .filter(pl.col("intervals") > 0)
        .sort("length")
    )
    return {
        int(length): (int(intervals), int(ns))
        for length, intervals, ns in pooled.select("length", "intervals", "ns").iter_rows()
    }


def ordered_length_sums(lines: pl.DataFrame) -> pl.DataFrame:
    """Per request (``request``) and draft length: the intervals to its drafted lines and their
    sum, from each request's lines (``t_ns`` and packed ``tokens`` lists, in any order): its
    lines in (time, proposed) order (sorted only when some are not), each interval counted under
    its later line's proposed."""
    if not lines.height:
        return pl.DataFrame(schema=LENGTH_SUMS)
    counts = lines["t_ns"].list.len().to_numpy().astype(np.int64)
    times = lines["t_ns"].explode().drop_nulls().to_numpy().astype(np.int64)
    tokens = lines["tokens"].explode().drop_nulls().to_numpy().astype(np.int64)
    proposals = tokens & _PROPOSED_MASK
    request = np.repeat(lines["request"].to_numpy().astype(np.int64), counts)
    if not _in_order(request, times, proposals):
        order = np.lexsort((proposals, times, request))
        request, times, proposals = request[order], times[order], proposals[order]
    follows = request[1:] == request[:-1]
    drafted = follows & (proposals[1:] > 0)
    owner, to = request[1:][drafted], proposals[1:][drafted]
    later, earlier = times[1:][drafted], times[:-1][drafted]
    if not owner.size:
        return pl.DataFrame(schema=LENGTH_SUMS)
    key = owner * (_PROPOSED_MASK + 1) + to
    order = np.argsort(key, kind="stable")
    key, later, earlier = key[order], later[order], earlier[order]
    runs = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    if np.abs(later).max() < _EXACT_BOUND and np.abs(earlier).max() < _EXACT_BOUND:
        # Each gap, and each request's sum of them (at most its last time less its first),
        # fits in 64 bits.
        totals = np.add.reduceat(later - earlier, runs).tolist()
    else:  # times near the int64 limits: Python's integers, exactly
        gaps = [int(b) - int(a) for a, b in zip(earlier.tolist(), later.tolist(), strict=True)]
        ends = [*runs.tolist()[1:], len(gaps)]
        totals = [sum(gaps[start:stop]) for start, stop in zip(runs.tolist(), ends, strict=True)]
    return pl.DataFrame(
        {
            "request": key[runs] // (_PROPOSED_MASK + 1),
            "length": key[runs] % (_PROPOSED_MASK + 1),
            "intervals": np.diff(np.r_[runs, key.size]),
            "ns": pl.Series(totals, dtype=pl.Int128),
        },
        schema=LENGTH_SUMS,
    )


def _in_order(request: np.ndarray, times: np.ndarray, proposals: np.ndarray) -> bool:
    """Whether each request's lines are already in (time, proposed) order."""
    same = request[1:] == request[:-1]
    later, earlier = times[1:], times[:-1]
    ordered = (later > earlier) | ((later == earlier) & (proposals[1:] >= proposals[:-1]))
    return bool(np.all(ordered | ~same))
