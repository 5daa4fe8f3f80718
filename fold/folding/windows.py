"""The shape of acceptance within a leg: its steps in consecutive windows, and which windows
(or requests) collapse, their A/P far under the leg's median."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from itertools import pairwise

from fold.inputs.acceptance import CountColumns, Counts

# A window (or request) whose acceptance falls under this fraction of its leg's median is a
# collapse: halving is far outside the window-to-window noise of a steady drafter at the
# default window size, and the past collapses this tool was made for went to (near) zero.
COLLAPSE_FRACTION = 0.5
MIN_WINDOWS_FOR_COLLAPSE = 3


def windows_from_bins(bins: Iterable[tuple[int, int, int]], window_steps: int) -> CountColumns:
    """Consecutive windows of at least ``window_steps`` steps, from time-ordered bins.

    ``bins`` are (steps, proposed, accepted) of consecutive equal slices of a leg's window. A
    window closes at the first bin edge where it holds ``window_steps`` steps, so its counts are
    exact and its edges fall on bin edges; the last window may hold fewer steps.
    """
    windows = []
    steps = proposed = accepted = 0
    for bin_steps, bin_proposed, bin_accepted in bins:
        steps += bin_steps
        proposed += bin_proposed
        accepted += bin_accepted
        if steps >= window_steps:
            windows.append(Counts(steps, proposed, accepted))
            steps = proposed = accepted = 0
    if steps:
        windows.append(Counts(steps, proposed, accepted))
    return CountColumns.of(windows)


def collapses(rates: list[float | None], at_least: int = MIN_WINDOWS_FOR_COLLAPSE) -> list[int]:
    """Positions of the rates below COLLAPSE_FRACTION of their median (needs a few to judge)."""
    known = [rate for rate in rates if rate is not None]
    if len(known) < at_least:
        return []
    median = statistics.median(known)
    if median <= 0:
        return []
    return [
        position
        for position, rate in enumerate(rates)
        if rate is not None and rate < COLLAPSE_FRACTION * median
    ]


SHAPE_POOLS = 10
"""Pools in a leg's shape (the terminal's and the markdown's sparkline): one character each."""
CHART_POOLS = 128
"""Pools in the chart of acceptance along a leg: finer than a chart shows, and a page of many
legs stays small."""


def window_pools(windows: Sequence[Counts], most: int) -> CountColumns:
    """At most ``most`` pools of consecutive windows, as even in size as their count allows,
    each with its summed counts: a pool's rate is still an exact ratio of sums, so a collapse
    stays a dip instead of being sampled away."""
    # By column: a Counts a window and one a pool cost 0.09 s of a 50-leg fold's JSON.
    held = windows if isinstance(windows, CountColumns) else CountColumns.of(windows)
    groups = min(most, len(held))
    if not groups:
        return CountColumns((), (), ())
    edges = [group * len(held) // groups for group in range(groups + 1)]
    return CountColumns(
        *(
            tuple(sum(column[start:end]) for start, end in pairwise(edges))
            for column in (held.steps, held.proposed, held.accepted)
        )
    )
