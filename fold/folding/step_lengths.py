"""The step time per draft length: how long a step that proposed p tokens took, from the log.

A step's time is the interval from the same request's previous line in its leg to this one
(``fold.folding.cadence``'s intervals), every attributed line counting as a forward, and the
interval goes to the draft length of the step it ends at: the forward that drafted and
verified that step. A request's first line has no interval. Lines of one request with the
same ``t_ns`` are ordered by their proposed (the interval between them is 0 either way).

Both fold paths keep each line's proposed beside its time (``PartialFold.step_times``,
``t_proposed``); this is the one definition that groups them.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from fold.folding.accumulate import REQUEST_KEY

StepTimes = dict[int, tuple[int, int]]
"""Per draft length (a step's proposed, > 0): (intervals, their sum in nanoseconds)."""


def step_time_by_length(step_times: pl.DataFrame, legs: Sequence[int]) -> StepTimes:
    """Per draft length, the intervals ending at a drafted step of the legs ``legs``."""
    lines = (
        step_times.filter(pl.col("leg").is_in(list(legs)))
        .select(*REQUEST_KEY, "t_ns", "t_proposed")
        .explode("t_ns", "t_proposed")
        .drop_nulls("t_ns")
        .sort([*REQUEST_KEY, "t_ns", "t_proposed"])
    )
    # eq_missing: a null string id (an integer request) equals the null before it.
    same = pl.all_horizontal(
        pl.col(name).eq_missing(pl.col(name).shift()) for name in REQUEST_KEY
    ).fill_null(False)
    grouped = (
        lines.with_columns(
            pl.when(same).then(pl.col("t_ns") - pl.col("t_ns").shift()).alias("interval_ns")
        )
        .filter(pl.col("interval_ns").is_not_null() & (pl.col("t_proposed") > 0))
        .group_by("t_proposed")
        .agg(pl.len().cast(pl.Int64).alias("intervals"), pl.col("interval_ns").sum())
        .sort("t_proposed")
    )
    return {
        proposed: (intervals, total)
        for proposed, intervals, total in grouped.select(
            "t_proposed", "intervals", "interval_ns"
        ).iter_rows()
    }
