"""Per request: the pooled and the per-request-mean A/P and 1 + A/S, each named; the spread of
per-request acceptance; the requests that accepted least, by id.

Computed from a fold's own per-request sums (each leg's ``requests``), so the same function
serves any arm whose legs carry requests. A request with no drafted step (every line proposed
0) has no acceptance: it is counted (``requests_without_drafts``) and takes no part in the
means, the spread or the lowest. Definitions: ``docs/per-request.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from fold.folding.by_position import by_output_position
from fold.folding.leg_figures import PooledFigures, frozen
from fold.folding.uncertainty import bootstrap
from fold.inputs import acceptance
from fold.inputs.leg_sums import Leg

LOWEST_SHOWN = 10
PERCENTILES = (10, 25, 50, 75, 90)
"""The spread's percentiles (numpy's default, linear between order statistics), beside the
minimum and the maximum."""
POOLED = "pooled: sums over every request, then the ratio (what engines report)"
MEAN = "per-request mean: each request's ratio, then their mean (every request weighs alike)"


def per_request(
    legs: Sequence[tuple[int, Sequence[Mapping[str, Any]]]],
    pooled: Mapping[str, Any],
    resamples: int,
    seed: int,
) -> dict[str, Any] | None:
    """The per-request figures of ``legs`` (each a leg index and its requests' sums: ``w``,
    ``seq``, ``steps``, ``proposed``, ``accepted``); ``pooled`` holds the fold's own pooled
    figures and intervals (``accept_rate``, ``accept_rate_ci``, ...), shown as they are. None
    when the legs have no request."""
    rows = [(leg, request) for leg, requests in legs for request in requests]
    if not rows:
        return None
    drafted = [(leg, request) for leg, request in rows if request["proposed"] > 0]
    rates = np.array([request["accepted"] / request["proposed"] for _, request in drafted])
    lengths = np.array([1 + request["accepted"] / request["steps"] for _, request in drafted])
    mean_rate, mean_length = _means(legs, resamples, seed)
    lowest = sorted(
        drafted,
        key=lambda item: (
            item[1]["accepted"] / item[1]["proposed"],
            -item[1]["proposed"],
            item[0],
            item[1]["w"],
            str(item[1]["seq"]),
        ),
    )[:LOWEST_SHOWN]
    return {
        "requests": len(rows),
        "requests_without_drafts": len(rows) - len(drafted),
        "pooled": {
            "means": POOLED,
            "accept_rate": pooled.get("accept_rate"),
            "accept_rate_ci": pooled.get("accept_rate_ci"),
            "mean_acceptance_length": pooled.get("mean_acceptance_length"),
            "mean_acceptance_length_ci": pooled.get("mean_acceptance_length_ci"),
        },
        "per_request_mean": {
            "means": MEAN,
            "accept_rate": _mean(rates),
            "accept_rate_ci": mean_rate,
            "mean_acceptance_length": _mean(lengths),
            "mean_acceptance_length_ci": mean_length,
        },
        "spread": {
            "accept_rate": _spread(rates),
            "mean_acceptance_length": _spread(lengths),
        },
        "lowest": [
            {
                "leg": leg,
                "w": request["w"],
                "seq": request["seq"],
                "steps": request["steps"],
                "proposed": request["proposed"],
                "accepted": request["accepted"],
                "accept_rate": acceptance.accept_rate(request["accepted"], request["proposed"]),
                "mean_acceptance_length": acceptance.mean_acceptance_length(
                    request["accepted"], request["steps"]
                ),
            }
            for leg, request in lowest
        ],
    }


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def _spread(values: np.ndarray) -> dict[str, float] | None:
    if not values.size:
        return None
    found = np.percentile(values, PERCENTILES)
    return {
        "min": float(values.min()),
        **{f"p{p}": float(value) for p, value in zip(PERCENTILES, found, strict=True)},
        "max": float(values.max()),
    }


def _means(
    legs: Sequence[tuple[int, Sequence[Mapping[str, Any]]]], resamples: int, seed: int
) -> tuple[list[float] | None, list[float] | None]:
    """The per-request means' 95% intervals from the project's two-stage bootstrap: a mean of
    per-request ratios is a ratio of sums (each request's ratio over a count of 1, 0 for a
    request without drafts), so the bootstrap's A/P and 1 + A/S draw it as they draw theirs."""
    if not resamples:
        return None, None
    found = []
    for denominator in ("proposed", "steps"):
        arm = []
        for _, requests in legs:
            ratios = [
                request["accepted"] / request[denominator] if request["proposed"] > 0 else 0.0
                for request in requests
            ]
            arm.append(
                Leg(
                    requests={
                        "accepted": np.array(ratios, dtype=np.float64),
                        denominator: np.array(
                            [float(request["proposed"] > 0) for request in requests]
                        ),
                    }
                )
            )
        figure = "accept_rate" if denominator == "proposed" else "mean_acceptance_length"
        drawn = bootstrap(arm, {"fold": list(range(len(arm)))}, resamples, seed)["fold"]
        interval = drawn.interval(figure)
        found.append(None if interval is None else [interval[0], interval[1]])
    return found[0], found[1]


def request_figures(
    legs: Sequence[Mapping[str, Any]],
    step_times: pl.DataFrame | None,
    resamples: int,
    seed: int,
) -> Callable[[PooledFigures], PooledFigures]:
    """What adds to a pooled fold (of the legs its ``legs`` lists) its figures per request and
    by output position, from the legs' drafts (``index`` and ``requests``) and the lines."""
    by_index = {leg["index"]: leg for leg in legs}

    def add(fold: PooledFigures) -> PooledFigures:
        chosen = [(index, by_index[index]["requests"]) for index in fold.legs]
        spread = per_request(chosen, fold, resamples, seed)
        positions = (
            None
            if step_times is None
            else by_output_position(step_times, list(fold.legs), resamples, seed)
        )
        return replace(
            fold,
            per_request=None if spread is None else frozen(spread),
            by_output_position=None if positions is None else frozen(positions),
        )

    return add
