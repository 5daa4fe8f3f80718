"""The writers' line counters (the hook's ``n``, instrument/FORMAT.md): how many of each
writer's lines were lost, and the refusal of lines read twice, from the sums a partial fold
keeps per writer (lines, largest ``n``, ``n`` summed modulo 2^64)."""

from __future__ import annotations

from typing import Any

import polars as pl

from fold.errors import RefusedError
from fold.inputs.limits import SUM_N_MODULUS, counter_adds_up


def sum_mod_64(column: str) -> pl.Expr:
    """A column's values (each below 2^64) summed modulo 2^64, as the native pass wraps them:
    the writers' ``sum_n`` never overflows, and still tells a repeated ``n`` (``writer_rows``)."""
    whole = pl.col(column).cast(pl.Int128).sum() % pl.lit(SUM_N_MODULUS, dtype=pl.Int128)
    return whole.cast(pl.UInt64)


def writer_rows(writers: pl.DataFrame, paths: list[str]) -> list[dict[str, Any]]:
    """Each writer's line counts and lost lines, from a partial fold's ``writers``; ``paths``
    (the logs read) name where a refusal looked."""
    rows = []
    where = paths[0] if len(paths) == 1 else f"{len(paths)} logs ({', '.join(paths)})"
    for row in writers.sort("w").iter_rows(named=True):
        sum_n = row.pop("sum_n")
        expected = row["max_n"] + 1
        if row["lines"] > expected:
            raise RefusedError(
                f"{where}: writer {row['w']} (pid {row['pid']}) has {row['lines']} lines but "
                f"counted only {expected}: some lines were read twice. Is one log given twice, "
                "or copied into two files?"
            )
        if not counter_adds_up(row["lines"], row["max_n"], sum_n):
            lost = expected - row["lines"]
            raise RefusedError(
                f"{where}: writer {row['w']} (pid {row['pid']}) has {row['lines']} lines with n "
                f"up to {row['max_n']}, but their n values are not its counter's "
                f"{'with none' if lost == 0 else f'with {lost}'} missing: some n came twice, "
                "so some lines were read twice (and as many more lost). Is part of a log "
                "copied into another?"
            )
        rows.append({**row, "lost": expected - row["lines"]})
    return rows
