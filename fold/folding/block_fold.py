"""The polars reference's fold of one parsed block of step lines into a partial fold
(``partial_fold``), and the per-request sums it takes from lines, which the engine's trace
folds with too: what the native pass computes in the extension, written once in polars as the
judge the two readers are held to (``tests/test_native.py``)."""

from __future__ import annotations

from typing import TypeVar

import polars as pl

from fold.folding.accumulate import (
    FIRST_STEP,
    REQUEST_KEY,
    SCHEMAS,
    TIME_BINS_PER_LEG,
    PartialFold,
    assemble,
    checked_durations,
)
from fold.folding.attribute import AMBIGUOUS, ATTRIBUTED, UNATTRIBUTED, LegWindows, attribute
from fold.folding.packed_tokens import packed_tokens
from fold.folding.writers import sum_mod_64


def partial_fold(
    steps: pl.DataFrame, windows: LegWindows, legs: pl.DataFrame, path: str
) -> PartialFold:
    """The partial fold of one parsed block of ``path`` (see ``fold.inputs.reader``).

    One group-by over (leg, writer, request) carries every per-line sum; the writers' and the
    legs' tables are folded from its (much smaller) result. The histogram and the time bins are
    the only other passes over the steps, and polars runs the three at once.
    """
    attributed = attribute(steps, windows)
    status = attributed["status"]
    files = pl.DataFrame(
        {
            "path": [path],
            "lines": [attributed.height],
            "attributed": [int((status == ATTRIBUTED).sum())],
            "unattributed": [int((status == UNATTRIBUTED).sum())],
            "ambiguous": [int((status == AMBIGUOUS).sum())],
        },
        schema=SCHEMAS["files"],
    )
    per_request, histogram, bins = pl.collect_all(_fold_queries(attributed.lazy(), legs))
    return assemble(checked_durations(per_request), histogram, bins, files)


Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)
DRAFTED = pl.col("proposed") > 0
"""A verify step in S: a line that carried at least one draft token."""


def request_sums() -> list[pl.Expr]:
    """A request's sums over its lines (lines, S, P, A, emitted) and what the writers' checks
    take from them (the largest proposal, line counter and pid)."""
    return [
        pl.len().cast(pl.Int64).alias("lines"),
        DRAFTED.sum().cast(pl.Int64).alias("steps"),
        pl.col("proposed").sum(),
        pl.col("accepted").sum(),
        pl.col("emitted").sum().cast(pl.Int64),
        pl.col("emitted").is_not_null().sum().cast(pl.Int64).alias("emitted_lines"),
        pl.col("proposed").max().alias("max_proposed"),
        pl.col("n").max().alias("max_n"),
        sum_mod_64("n").alias("sum_n"),
        pl.col("pid").max(),
    ]


def duration_sums() -> list[pl.Expr]:
    """A request's ``DURATION_SUMS`` over its lines (the parsed steps' ``draft_ns`` and
    ``verify_ns``, null where not measured)."""
    draft, verify = pl.col("draft_ns").is_not_null(), pl.col("verify_ns").is_not_null()
    return [
        (draft & verify).sum().cast(pl.Int64).alias("timed_steps"),
        draft.sum().cast(pl.Int64).alias("draft_steps"),
        verify.sum().cast(pl.Int64).alias("verify_steps"),
        # Exact (each value may be near 2^63): checked_durations refuses a sum past 2^63 - 1.
        pl.col("draft_ns").cast(pl.Int128).sum(),
        pl.col("verify_ns").cast(pl.Int128).sum(),
    ]


def first_step() -> list[pl.Expr]:
    """A request's ``FIRST_STEP`` from its lines (``t_ns``, ``n``, ``draft_ns``,
    ``verify_ns``)."""
    order = ["t_ns", "n", "draft_ns", "verify_ns"]
    return [
        pl.col(line).sort_by(order, nulls_last=False).first().cast(pl.Int64).alias(first)
        for line, first in zip(order, FIRST_STEP, strict=True)
    ]


def step_histogram(drafted: Frame) -> Frame:
    """Drafted steps counted by leg and (proposed, accepted) pair: only the pairs seen."""
    return drafted.group_by("leg", "proposed", "accepted").agg(
        pl.len().cast(pl.Int64).alias("count")
    )


def _fold_queries(attributed: pl.LazyFrame, legs: pl.DataFrame) -> list[pl.LazyFrame]:
    """Per request (with the writers' figures), histogram and time-bin sums of steps."""
    # A step has a leg exactly when it is ATTRIBUTED; the others group under a null leg, which
    # counts for the writers only.
    per_request = attributed.group_by(*REQUEST_KEY).agg(
        *request_sums(), *duration_sums(), *first_step(), pl.col("t_ns"), packed_tokens()
    )
    drafted = attributed.filter(pl.col("leg").is_not_null() & DRAFTED)
    # A gather by leg index finds each step's window (no join).
    start = pl.lit(_by_index(legs, "start_ns")).gather(pl.col("leg"))
    end = pl.lit(_by_index(legs, "end_ns")).gather(pl.col("leg"))
    histogram = step_histogram(drafted)
    bins = drafted.group_by(
        "leg",
        ((pl.col("t_ns") - start) * TIME_BINS_PER_LEG // (end - start + 1)).alias("bin"),
    ).agg(
        pl.len().cast(pl.Int64).alias("steps"),
        pl.col("proposed").sum(),
        pl.col("accepted").sum(),
    )
    return [per_request, histogram, bins]


def _by_index(legs: pl.DataFrame, column: str) -> pl.Series:
    """``legs[column]`` placed at each leg's index (indices are record positions, 0-based)."""
    size = int(legs["index"].max()) + 1 if legs.height else 0
    return pl.Series(column, [0] * size, dtype=pl.Int64).scatter(
        legs["index"], legs[column].cast(pl.Int64)
    )
