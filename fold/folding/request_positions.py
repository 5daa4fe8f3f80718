"""Each request's steps by draft position, for the sums file: per position i (from 0), the
steps that accepted more than i draft tokens and the steps that proposed more than i.

A leg's per-position rates are sums of these over its requests divided by S
(``fold.inputs.acceptance.per_position``: steps with accepted > i, over S) or by the steps that
drafted position i (``per_position_of_proposed``), so a union of sums files gives them by a
``GROUP BY`` (``docs/sums.md``). A request's lists are as long as its largest proposal; they
sum to its A and its P (each step counts once at every position below its count).

They are made from each request's lines counted by (proposed, accepted)
(``fold.folding.line_rows.draft_counts``: the lines the native pass read are counted again
from their bytes), so only when a fold is asked for them (``--sums``): a list per request is
memory, and the count a pass over the log, that the other figures do not need.
"""

from __future__ import annotations

import polars as pl

from fold.folding.accumulate import REQUEST_KEY

POSITION_LISTS = ("accepted_past", "proposed_past")
"""The two lists, by position: steps with accepted > i, steps with proposed > i."""


def request_positions(step_times: pl.DataFrame, counted: pl.DataFrame) -> pl.DataFrame:
    """``REQUEST_KEY`` and each request's ``POSITION_LISTS`` (Int64 lists), a row per request
    of ``step_times``, from its lines counted by (proposed, accepted) (``counted``: ``request``,
    its row in ``step_times``, ``proposed``, ``accepted``, ``count``)."""
    numbered = step_times.select(*REQUEST_KEY).with_row_index("r")
    counts = counted.select(
        pl.col("request").cast(pl.UInt32).alias("r"),
        "proposed",
        "accepted",
        pl.col("count").alias("len"),
    )
    lengths = counts.group_by("r").agg(pl.col("proposed").max().alias("length"))
    positions = lengths.select("r", pl.int_ranges(0, "length").alias("i")).explode("i")
    positions = positions.drop_nulls("i")
    for column, by in zip(POSITION_LISTS, ("accepted", "proposed"), strict=True):
        past = (
            counts.select("r", pl.int_ranges(0, by).alias("i"), "len")
            .explode("i")
            .drop_nulls("i")
            .group_by("r", "i")
            .agg(pl.col("len").sum().alias(column))
        )
        positions = positions.join(past, on=["r", "i"], how="left")
    lists = (
        positions.with_columns(pl.col(*POSITION_LISTS).fill_null(0).cast(pl.Int64))
        .sort("r", "i")
        .group_by("r", maintain_order=True)
        .agg(*POSITION_LISTS)
    )
    empty = pl.lit([], dtype=pl.List(pl.Int64))
    return (
        numbered.join(lists, on="r", how="left")
        .sort("r")
        .select(*REQUEST_KEY, *(pl.col(name).fill_null(empty) for name in POSITION_LISTS))
    )
