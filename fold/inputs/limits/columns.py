"""The limits as polars expressions, for a reader that checks a table's columns at once (a sums
file's rows and small tables, ``fold.folding.sums_checks``): the same limits as ``values`` and
``steps``, true where a value keeps them (null where the value is null)."""

from __future__ import annotations

import polars as pl

from fold.inputs.limits.steps import accepted_above_proposed
from fold.inputs.limits.values import MAX_COUNT, MAX_STEP_NS, MAX_STEP_TOKENS


def count_in_range(column: pl.Expr, least: int = 0) -> pl.Expr:
    """A count (from ``least``) of at most 2^63 - 1."""
    return column.is_between(least, MAX_COUNT)


def duration_in_range(column: pl.Expr) -> pl.Expr:
    """A duration or a time in nanoseconds: 0 to 2^63 - 1."""
    return column.is_between(0, MAX_STEP_NS)


def step_tokens_in_range(column: pl.Expr, least: int = 0) -> pl.Expr:
    """A step's token count (from ``least``): at most 2^16, the most one step may carry."""
    return column.is_between(least, MAX_STEP_TOKENS)


def step_possible(proposed: pl.Expr, accepted: pl.Expr) -> pl.Expr:
    """A step's (or a total's) counts: no more accepted than proposed."""
    return ~accepted_above_proposed(proposed, accepted)


def counts_possible(steps: pl.Expr, proposed: pl.Expr, accepted: pl.Expr) -> pl.Expr:
    """S, P and A of steps that each drafted (``proposed > 0``): S <= P <= S x 2^16, A <= P."""
    wide = pl.Int128
    return (
        (steps <= proposed)
        & (proposed.cast(wide) <= steps.cast(wide) * MAX_STEP_TOKENS)
        & step_possible(proposed, accepted)
    )
