"""Merging partial folds (``merge_all``): folding a log in blocks, in any order, split across
any files, and merging the partials gives exactly the fold of the whole log. Sums add, maxima
take the max, first lines the first, line lists concatenate, a request's step intervals are
made again from its times pooled; the tables that name a request by
its row (``ROW_TABLES``) follow their requests to their rows in the merged step times."""

from __future__ import annotations

import polars as pl

from fold.folding import step_intervals
from fold.folding.accumulate import (
    FIRST_STEP,
    LINE_LISTS,
    REQUEST_KEY,
    SCHEMAS,
    TABLE_KEYS,
    PartialFold,
    checked_durations,
    empty_table,
    first_line,
)
from fold.folding.writers import sum_mod_64

# How each non-key column merges: counts add up, maxima take the max.
_MAX_COLUMNS = {"max_proposed", "max_n", "pid", "unordered", "last_end"}
_MIN_COLUMNS = {"first_offset"}
ROW_TABLES = ("held_lines", "position_rows", "length_rows", "draft_tally", "line_spans")
"""The tables that name a request by its row in the partial's ``step_times`` (``request``):
a row number costs 4 bytes where the request's key (a writer's name and id) costs tens, over
as many rows as a load test has requests."""


def merge_all(partials: list[PartialFold]) -> PartialFold:
    """One partial fold of many: one concat and one group-by per table, whatever their number.

    Folding a large log merges its blocks' partials a batch at a time with this, rather than
    one at a time (each merge re-sorts the tables gathered so far).
    """
    tables = {
        name: _merge(name, [getattr(partial, name) for partial in partials])
        for name in TABLE_KEYS
        if name not in ROW_TABLES and name != "step_times"
    }
    step_times, renumbered = _merge_step_times([partial.step_times for partial in partials])
    for name in ROW_TABLES:
        pieces = [
            getattr(partial, name).with_columns(
                pl.lit(rows).gather(pl.col("request")).alias("request")
            )
            for partial, rows in zip(partials, renumbered, strict=True)
            if rows is not None and getattr(partial, name).height
        ]
        tables[name] = _merge(name, pieces)
    return PartialFold(step_times=step_times, **tables)


def _merge_step_times(
    tables: list[pl.DataFrame],
) -> tuple[pl.DataFrame, list[pl.Series | None]]:
    """The merged step times, and for each table its rows' numbers among them (None for an
    empty table): the row tables follow their requests there."""
    filled = [index for index, table in enumerate(tables) if table.height]
    if not filled:
        return empty_table("step_times"), [None] * len(tables)
    if len(filled) == 1:
        only = tables[filled[0]]
        rows = pl.Series("request", range(only.height), dtype=pl.UInt32)
        return only, [rows if index == filled[0] else None for index in range(len(tables))]
    numbered = pl.concat(
        [
            tables[index].with_columns(
                pl.lit(index, pl.UInt32).alias("piece"),
                pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
            )
            for index in filled
        ]
    )
    places = (
        numbered.group_by(REQUEST_KEY)
        .agg("piece", "row")
        .sort(REQUEST_KEY)
        .with_row_index("request")
        .select("request", "piece", "row")
        .explode("piece", "row")
    )
    merged = step_intervals.merged(numbered.select(list(SCHEMAS["step_times"])), REQUEST_KEY)
    renumbered: list[pl.Series | None] = [None] * len(tables)
    for index in filled:
        mine = places.filter(pl.col("piece") == index).sort("row")
        renumbered[index] = mine["request"]
    return merged.select(list(SCHEMAS["step_times"])), renumbered


def _merge(name: str, tables: list[pl.DataFrame]) -> pl.DataFrame:
    tables = [table for table in tables if table.height]
    if not tables:
        return empty_table(name)
    if len(tables) == 1:
        return tables[0]
    keys = TABLE_KEYS[name]
    values = [column for column in SCHEMAS[name] if column not in keys]
    if name == "durations":  # sums of values up to 2^63 each: exact, then checked
        merged = (
            pl.concat(tables)
            .group_by(keys)
            .agg(
                pl.col(column).cast(pl.Int128).sum() if column.endswith("_ns") else _merged(column)
                for column in values
            )
        )
        return checked_durations(merged).sort(keys).select(list(SCHEMAS[name]))
    return (
        pl.concat(tables)
        .group_by(keys)
        .agg(_merged(column) for column in values)
        .sort(keys)
        .select(list(SCHEMAS[name]))
    )


def _merged(column: str) -> pl.Expr:
    if column in FIRST_STEP:
        return first_line(column)
    if column in _MAX_COLUMNS:
        return pl.col(column).max()
    if column in _MIN_COLUMNS:
        return pl.col(column).min()
    if column == "sum_n":
        return sum_mod_64(column)
    if column in LINE_LISTS:
        return pl.col(column).list.explode(keep_nulls=False, empty_as_null=False)
    return pl.col(column).sum()
