"""The step time per draft length: how long a step that proposed p tokens took, from the log.

A step's time is the interval from the same request's previous line in its leg to this one
(``fold.folding.cadence``'s intervals), every attributed line counting as a forward, and the
interval goes to the draft length of the step it ends at: the forward that drafted and
verified that step. A request's first line has no interval. Lines of one request with the
same ``t_ns`` are ordered by their proposed (the interval between them is 0 either way).

Both fold paths keep each line's counts beside its time (``PartialFold.step_times``,
``tokens``, packed by ``fold.folding.accumulate.packed_tokens``: proposed in the low bits);
this is the one definition that groups them, run by the extension in one
pass over the lists (a request's lines are usually in time order already, as a writer
appends them; a request is sorted only when they are not), or by numpy over flat arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from fold.folding import native
from fold.folding.accumulate import TOKEN_BITS

_PROPOSED_MASK = (1 << TOKEN_BITS) - 1

StepTimes = dict[int, tuple[int, int]]
"""Per draft length (a step's proposed, > 0): (intervals, their sum in nanoseconds)."""

_EXACT_IN_FLOAT = 2**53


def step_time_by_length(step_times: pl.DataFrame, legs: Sequence[int]) -> StepTimes:
    """Per draft length, the intervals ending at a drafted step of the legs ``legs``: in the
    extension when it is built (and not switched off), else ``reference_step_lengths``, which
    the tests hold it to."""
    marked = step_times["leg"].is_in(list(legs)).fill_null(False)
    if not marked.any():
        return {}
    if native.available():
        # Read where they are, the chosen rows marked: a filter would copy the legs' lines.
        chosen = marked.cast(pl.Int64).to_numpy()
        return native.step_lengths(step_times["t_ns"], step_times["tokens"], chosen)
    return reference_step_lengths(step_times.filter(marked))


def reference_step_lengths(chosen: pl.DataFrame) -> StepTimes:
    """The same over flat arrays with numpy: every request's lines in (time, proposed) order
    (sorted only when some are not), each interval counted under its later line's proposed."""
    if not chosen.height:
        return {}
    counts = chosen["t_ns"].list.len().to_numpy().astype(np.int64)
    times = chosen["t_ns"].explode().drop_nulls().to_numpy().astype(np.int64)
    tokens = chosen["tokens"].explode().drop_nulls().to_numpy().astype(np.int64)
    proposals = tokens & _PROPOSED_MASK
    request = np.repeat(np.arange(counts.size), counts)
    if not _in_order(request, times, proposals):
        order = np.lexsort((proposals, times, request))
        request, times, proposals = request[order], times[order], proposals[order]
    follows = request[1:] == request[:-1]
    to = proposals[1:][follows]
    gaps = (times[1:] - times[:-1])[follows]
    drafted = to > 0
    to, gaps = to[drafted], gaps[drafted]
    if not to.size:
        return {}
    intervals = np.bincount(to)
    lengths = np.flatnonzero(intervals)
    if int(gaps.max()) * to.size < _EXACT_IN_FLOAT:
        # Every partial sum is a whole number below 2^53: the float sums are exact.
        sums = np.bincount(to, weights=gaps)
        totals = {int(p): int(sums[p]) for p in lengths}
    else:  # sums past 2^53 (times far apart): Python's integers, exactly
        totals = dict.fromkeys(map(int, lengths), 0)
        for p, gap in zip(to.tolist(), gaps.tolist(), strict=True):
            totals[p] += gap
    return {int(p): (int(intervals[p]), totals[int(p)]) for p in lengths}


def _in_order(request: np.ndarray, times: np.ndarray, proposals: np.ndarray) -> bool:
    """Whether each request's lines are already in (time, proposed) order."""
    same = request[1:] == request[:-1]
    step = times[1:] - times[:-1]
    ordered = (step > 0) | ((step == 0) & (proposals[1:] >= proposals[:-1]))
    return bool(np.all(ordered | ~same))
