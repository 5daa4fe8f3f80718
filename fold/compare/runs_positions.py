"""Two runs of ours side by side per draft position and per histogram bar: each run's warm
share, the difference, and its 95% interval from redrawing each run's warm legs exactly as its
own fold drew them."""

from __future__ import annotations

from typing import Any

import numpy as np

from fold.folding.result import FoldResult
from fold.folding.uncertainty import bootstrap, percentile_interval, reach
from fold.inputs.acceptance import accepted_at_position
from fold.inputs.leg_sums import Leg


def side_by_side(
    ours: FoldResult, other: FoldResult, which: str, resamples: int, seeds: list[int | None]
) -> list[dict[str, Any]] | None:
    """The warm per-position rates (or histogram shares) of both runs and their difference,
    each difference with a 95% interval from redrawing each run's warm legs; None when a run
    was folded from its counters alone (these need a step log)."""
    if ours.warm[which] is None or other.warm[which] is None:
        return None
    counts_a, steps_a = _leg_counts(ours, which)
    counts_b, steps_b = _leg_counts(other, which)
    size = max(len(ours.warm[which]), len(other.warm[which]))
    rows = []
    for position in range(size):
        # a position past a run's largest draft was never proposed there: not recorded, not 0
        a = _pooled(ours, counts_a, steps_a, position) if position < len(ours.warm[which]) else None
        b = (
            _pooled(other, counts_b, steps_b, position)
            if position < len(other.warm[which])
            else None
        )
        interval = None
        seed_a, seed_b = seeds
        if (
            resamples
            and a is not None
            and b is not None
            and seed_a is not None
            and seed_b is not None
        ):
            drawn_a = _replicates(ours, counts_a, steps_a, position, resamples, seed_a)
            drawn_b = _replicates(other, counts_b, steps_b, position, resamples, seed_b)
            if drawn_a is not None and drawn_b is not None:
                interval = percentile_interval(drawn_a - drawn_b)
        rows.append(
            {
                ("position" if which == "per_position" else "accepted"): position,
                "ours": a,
                "other": b,
                "difference": None if a is None or b is None else a - b,
                "difference_ci": None if interval is None else [interval[0], interval[1]],
                "difference_reach": reach(None if a is None or b is None else a - b, interval),
            }
        )
    return rows


def _leg_counts(result: FoldResult, which: str) -> tuple[list[list[int]], list[int]]:
    """Per leg (all legs, in order) the counts behind ``which`` and the leg's S."""
    counts = []
    for leg in result.legs:
        histogram = leg["histogram"]
        counts.append(accepted_at_position(histogram) if which == "per_position" else histogram)
    return counts, [leg["steps"] for leg in result.legs]


def _pooled(
    result: FoldResult, counts: list[list[int]], steps: list[int], position: int
) -> float | None:
    """The warm fold's share at ``position``: a ratio of sums, as the fold pools it."""
    warm = result.warm["legs"]
    total = sum(steps[leg] for leg in warm)
    return sum(_at(counts[leg], position) for leg in warm) / total if total else None


def _replicates(
    result: FoldResult,
    counts: list[list[int]],
    steps: list[int],
    position: int,
    resamples: int,
    seed: int,
) -> np.ndarray | None:
    """The warm share at ``position`` in every resample: the warm legs redrawn exactly as the
    fold's first stage draws them (the same seed draws the same legs)."""
    legs = [
        Leg(values={"completion_tokens": _at(leg, position), "steps": leg_steps})
        for leg, leg_steps in zip(counts, steps, strict=True)
    ]
    warm = result.warm["legs"]
    # a per-leg ratio of sums over legs with steps: the bootstrap's completion tokens per
    # step, fed the counts at this position in place of completion tokens
    drawn = bootstrap(legs, {"warm": warm}, resamples, seed)["warm"]
    return drawn.figures.get("completion_tokens_per_step")


def _at(counts: list[int], position: int) -> int:
    return counts[position] if position < len(counts) else 0
