"""Intervals of the throughput ratio to an oracle and of its split into acceptance and speed.

Each resample of our arm is paired with one of the oracle's (drawn on its own stream by the
same bootstrap, ``fold.folding.uncertainty``), and r, the acceptance factor and the speed factor are
computed in every pair. A figure the oracle knows only as a total is taken as exact there, and
the factor is labelled "ours only". Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fold.folding.frozen import freeze_fields
from fold.folding.uncertainty import (
    Interval,
    Leg,
    Replicates,
    bootstrap,
    percentile_interval,
    ratio,
)

BOTH_ARMS = "both_arms"
OURS_ONLY = "ours_only"


@dataclass(frozen=True)
class SplitIntervals:
    """Intervals of r, the acceptance factor and the speed factor, and what each rests on.

    ``basis[factor]`` is ``BOTH_ARMS`` when the oracle's side was resampled too, and
    ``OURS_ONLY`` when the oracle is known by totals and taken as exact.
    """

    ratio: Interval | None
    acceptance_factor: Interval | None
    speed_factor: Interval | None
    basis: Mapping[str, str]

    def __post_init__(self) -> None:
        freeze_fields(self, ("basis",))

    @property
    def from_both_arms(self) -> bool:
        return bool(self.basis) and all(basis == BOTH_ARMS for basis in self.basis.values())


def intervals_json(intervals: SplitIntervals | None) -> dict[str, Any]:
    """A gap's intervals as its JSON holds them (null without intervals), and their basis."""
    found = {
        "ratio_ci": None if intervals is None else intervals.ratio,
        "acceptance_factor_ci": None if intervals is None else intervals.acceptance_factor,
        "speed_factor_ci": None if intervals is None else intervals.speed_factor,
    }
    document: dict[str, Any] = {
        key: None if value is None else [value[0], value[1]] for key, value in found.items()
    }
    document["ci_basis"] = {} if intervals is None else dict(intervals.basis)
    return document


def arm_replicates(
    legs: Sequence[Leg] | None, resamples: int, seed: int, arm: int
) -> Replicates | None:
    """An oracle arm's replicates over its legs (its own stream: ``arm`` numbers it)."""
    if not legs or resamples < 1:
        return None
    return bootstrap(list(legs), {"legs": list(range(len(legs)))}, resamples, [seed, arm])["legs"]


def verify_steps_per_s(
    replicates: Replicates | None, length_figure: str = "mean_acceptance_length"
) -> np.ndarray | None:
    """tok/s over the length in every resample, as the comparison derives verify steps/s (over
    1 + A/S, or over SGLang's unit when that is all the arm has)."""
    if replicates is None:
        return None
    tok_s = replicates.figures.get("output_throughput_tok_s")
    length = replicates.figures.get(length_figure)
    if tok_s is None or length is None:
        return None
    return ratio(tok_s, length)


def split_intervals(
    ours: Replicates | None,
    oracle: Replicates | None,
    oracle_tok_s: float | None,
    oracle_length: float | None,
    length_figure: str = "mean_acceptance_length",
) -> SplitIntervals | None:
    """Propagate both arms' resamples through r = tok/s ratio, af = length ratio, sf = r / af.

    ``length_figure`` is the length the split divides: ``mean_acceptance_length`` (1 + A/S)
    or, when the split is in SGLang's unit, ``completion_tokens_per_step``; ``oracle_length``
    is the oracle's value of it. The arms are drawn independently. A side the oracle has no
    legs for is its point value. None when our own side has no replicates (no resamples, or a
    single leg).
    """
    if ours is None:
        return None
    basis: dict[str, str] = {}
    found: dict[str, np.ndarray] = {}
    sides = {}
    for figure, point in (
        ("output_throughput_tok_s", oracle_tok_s),
        (length_figure, oracle_length),
    ):
        resampled = None if oracle is None else oracle.figures.get(figure)
        if resampled is not None:
            sides[figure] = (resampled, BOTH_ARMS)
        elif point is not None:
            sides[figure] = (np.full(ours.resamples, float(point)), OURS_ONLY)
    our_tok_s = ours.figures.get("output_throughput_tok_s")
    our_length = ours.figures.get(length_figure)
    if our_tok_s is not None and "output_throughput_tok_s" in sides:
        values, basis["ratio"] = sides["output_throughput_tok_s"]
        found["ratio"] = ratio(our_tok_s, values)
    if our_length is not None and length_figure in sides:
        values, basis["acceptance_factor"] = sides[length_figure]
        found["acceptance_factor"] = ratio(our_length, values)
    if "ratio" in found and "acceptance_factor" in found:
        both = basis["ratio"] == basis["acceptance_factor"] == BOTH_ARMS
        basis["speed_factor"] = BOTH_ARMS if both else OURS_ONLY
        found["speed_factor"] = ratio(found["ratio"], found["acceptance_factor"])
    return SplitIntervals(
        ratio=percentile_interval(found["ratio"]) if "ratio" in found else None,
        acceptance_factor=(
            percentile_interval(found["acceptance_factor"])
            if "acceptance_factor" in found
            else None
        ),
        speed_factor=(
            percentile_interval(found["speed_factor"]) if "speed_factor" in found else None
        ),
        basis=basis,
    )
