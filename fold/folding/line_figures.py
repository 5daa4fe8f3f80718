"""The figures that read each attributed line, computed together and before any other.

Three of a fold's figures need more of a request's lines than sums: the step cadence (every
request's and every leg's intervals, from ``PartialFold.step_times``: each attributed line's
time), and the figures by output position and the step time per draft length of the warm
legs, from each request's rows in line order (``fold.folding.line_rows``). Every other figure
is sums. ``line_figures`` computes the three first, so a fold that owns its partial can let the
times go before the rest of the result is built: they (4 bytes a line) are then never held
beside the result's own work (the per-request drafts, the bootstrap's draws), which is where a
large fold's memory used to peak (``docs/performance.md``). Nothing after them reads a line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from fold.folding import native
from fold.folding.accumulate import PartialFold
from fold.folding.attribute import leg_windows
from fold.folding.by_position import Positions, fold_positions
from fold.folding.cadence import Cadence, fold_cadence
from fold.folding.line_rows import draft_counts, line_rows
from fold.folding.request_positions import request_positions
from fold.folding.step_lengths import StepTimes, step_time_by_length


@dataclass(frozen=True)
class LineFigures:
    """What a fold takes from its attributed lines."""

    cadence: Cadence
    """Every request's cadence and any legs' pooled intervals (none without times: empty)."""
    positions: Positions | None
    """The warm legs' figures by output position (``fold_positions``), before the fold's
    bootstrap draws their intervals with the pooled figures'."""
    step_lengths: StepTimes | None
    """The warm legs' step time per draft length; None where the steps have no times."""
    draft_positions: pl.DataFrame | None = None
    """Each request's steps by draft position (``request_positions``), when asked for."""


def line_figures(
    partial: PartialFold,
    arm_legs: pl.DataFrame,
    warm_legs: Sequence[int],
    *,
    stall_factor: float,
    position: str,
    no_times: str | None,
    draft_positions: bool = False,
) -> LineFigures:
    """The three figures of the partial's lines over the arm's legs (``index``, ``start_ns``,
    ``end_ns``); ``warm_legs`` in the arm's order (the bootstrap's). ``no_times``: why the
    steps have no times (then no cadence and no step time per length), or None. ``position``:
    what a step's position counts, for the figures by position. ``draft_positions``: also
    each request's steps by draft position (for the sums file)."""
    # One after another, the positions first: what they keep is a few integers a request
    # (their intervals are drawn later, by the fold's one bootstrap), where the cadence's
    # working memory is large.
    step_times = partial.step_times
    legs = native.NativeLegs.of(arm_legs, leg_windows(arm_legs)) if arm_legs.height else None
    rows = line_rows(partial, legs or native.NativeLegs.of(None, None))
    by_position = fold_positions(rows.buckets, step_times, warm_legs, position)
    # Steps in order without times (an oracle's, numbered) give no cadence: none is made.
    timed = step_times if no_times is None else step_times.clear()
    # The groups the result pools: each leg, the warm legs, all legs.
    every_leg = arm_legs["index"].to_list()
    groups = [[leg] for leg in every_leg] + [list(warm_legs), every_leg]
    cadence = fold_cadence(timed, arm_legs, stall_factor, groups)
    lengths = (
        None if no_times is not None else step_time_by_length(rows.lengths, step_times, warm_legs)
    )
    by_request = None
    if draft_positions:
        counted = draft_counts(partial)
        by_request = request_positions(step_times, counted)
    return LineFigures(cadence, by_position, lengths, by_request)
