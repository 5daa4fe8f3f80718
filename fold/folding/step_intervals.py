"""A request's step times as a partial fold keeps them (``PartialFold.step_times``): its
earliest time (``first_ns``) and the intervals between its times in time order (``gaps``),
32 bits each. An interval of ``LONG`` ns (2^32 - 1, 4.3 s) or more is written ``LONG`` in
``gaps`` and whole, in its order, in ``long_gaps``.

Every figure a fold makes of its step times (the cadence) is made of these intervals and the
first and last times, so nothing is lost: the times are the first and the intervals' running
sums. They cost 4 bytes a line where the times cost 8, which is what a large fold holds after
its read (``docs/performance.md``). The native pass writes them so (``step_export.h``); the
polars reference, the merges and the tests make them from times with ``encoded`` and read
them back with ``decoded``.
"""

from __future__ import annotations

import numpy as np
import polars as pl

LONG = 2**32 - 1
"""The 32-bit value that stands for the next of a request's ``long_gaps``."""

COLUMNS: dict[str, pl.DataType] = {
    "first_ns": pl.Int64(),
    "gaps": pl.List(pl.UInt32()),
    "long_gaps": pl.List(pl.Int64()),
}


def encoded(times: pl.Expr) -> list[pl.Expr]:
    """The ``COLUMNS`` of each row's ``times`` (a list of int64, in any order; an empty list:
    ``first_ns`` null and no intervals)."""
    ordered = times.list.sort()
    intervals = ordered.list.diff().list.slice(1)
    return [
        ordered.list.first().alias("first_ns"),
        intervals.list.eval(pl.element().clip(upper_bound=LONG).cast(pl.UInt32)).alias("gaps"),
        intervals.list.eval(pl.element().filter(pl.element() >= LONG)).alias("long_gaps"),
    ]


def encode(frame: pl.DataFrame, times: str = "t_ns") -> pl.DataFrame:
    """``frame`` with its list column ``times`` replaced by the ``COLUMNS``."""
    return frame.with_columns(*encoded(pl.col(times))).drop(times).cast(COLUMNS)


def decoded(step_times: pl.DataFrame) -> pl.Series:
    """Each row's times in time order (``t_ns``, a list of int64), from its ``COLUMNS``."""
    firsts = step_times["first_ns"]
    counts = step_times["gaps"].list.len().to_numpy().astype(np.int64)
    gaps = step_times["gaps"].explode().drop_nulls().to_numpy().astype(np.uint64)
    longs = step_times["long_gaps"].explode().drop_nulls().to_numpy()
    marked = np.flatnonzero(gaps == LONG)
    if marked.size != longs.size:
        raise ValueError("step intervals: the long intervals are not one per LONG")
    gaps[marked] = longs.astype(np.int64).view(np.uint64)
    present = firsts.is_not_null().to_numpy()
    if np.any(~present & (counts > 0)):
        raise ValueError("step intervals: intervals without a first time")
    lengths = counts + present
    # Each row's values as [first, interval, ...], summed in 64 bits that wrap: a row's times
    # are its running sums less the sums before it, exact whatever the rows before add up to.
    values = np.zeros(int(lengths.sum()), dtype=np.uint64)
    starts = np.cumsum(lengths) - lengths
    heads = starts[present]
    values[heads] = firsts.drop_nulls().to_numpy().astype(np.int64).view(np.uint64)
    body = np.ones(values.size, dtype=bool)
    body[heads] = False
    values[body] = gaps
    sums = np.cumsum(values, dtype=np.uint64)
    before = np.zeros(starts.size, dtype=np.uint64)
    later = starts > 0
    before[later] = sums[starts[later] - 1]
    times = (sums - np.repeat(before, lengths)).view(np.int64)
    rows = np.repeat(np.arange(step_times.height, dtype=np.int64), lengths)
    lists = (
        pl.DataFrame({"row": rows, "t_ns": times}).group_by("row", maintain_order=True).agg("t_ns")
    )
    return (
        pl.DataFrame({"row": np.arange(step_times.height, dtype=np.int64)})
        .join(lists, on="row", how="left", maintain_order="left")
        .select(pl.col("t_ns").fill_null(pl.lit([], dtype=pl.List(pl.Int64))))
        .to_series()
        .cast(pl.List(pl.Int64))
    )


def merged(frame: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """``frame``'s rows (``key`` and the ``COLUMNS``) one per key, each key's times pooled,
    sorted by ``key``: the rows of a key met once are kept as they are."""
    repeated = frame.select(pl.struct(key).is_duplicated()).to_series()
    if not repeated.any():
        return frame.sort(key)
    again = frame.filter(repeated)
    times = again.select(*key).with_columns(decoded(again).alias("t_ns"))
    pooled = times.group_by(key).agg(pl.col("t_ns").explode())
    return pl.concat(
        [frame.filter(~repeated), encode(pooled).select(frame.columns)], how="vertical"
    ).sort(key)
