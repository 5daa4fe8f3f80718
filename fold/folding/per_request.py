"""Per request: the pooled and the per-request-mean A/P and 1 + A/S, each named; the spread of
per-request acceptance; the requests that accepted least, by id.

Computed from a fold's own per-request sums (each leg's ``requests``), so the same function
serves any arm whose legs carry requests. A request with no drafted step (every line proposed
0) has no acceptance: it is counted (``requests_without_drafts``) and takes no part in the
means, the spread or the lowest. Definitions: ``docs/per-request.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fold.folding.leg_figures import Named, PooledFigures, frozen
from fold.folding.uncertainty import percentile_interval, ratio, resampled_sums
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
    pooled: Named,
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
    # Only requests at or below the LOWEST_SHOWN-th lowest A/P can be among the lowest: the
    # full order's first ones are the first of theirs, sorted by the whole key.
    candidates = drafted
    if len(drafted) > LOWEST_SHOWN:
        cut = np.partition(rates, LOWEST_SHOWN - 1)[LOWEST_SHOWN - 1]
        candidates = [drafted[i] for i in np.flatnonzero(rates <= cut)]
    lowest = sorted(
        candidates,
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
    """The per-request means' 95% intervals from the project's two-stage bootstrap
    (``resampled_sums``): a mean of per-request ratios is a ratio of sums, each request's
    ratio over a count of 1 (0 over 0 for a request without drafts)."""
    if not resamples:
        return None, None
    # Ratios in integer units of 1/2^32 (A/P <= 1) and 1/2^24 (A/S <= 2^16): the extension
    # draws and sums integer columns in one pass, several times faster than floats, and the
    # rounding moves a mean by under 1e-7. Floats where the sums could pass 2^62.
    scales = (2.0**32, 2.0**24)
    exact = sum(len(rows) for _, rows in legs) * 2**40 < 2**62
    arm = []
    for _, rows in legs:
        drafted = np.array([row["proposed"] > 0 for row in rows], dtype=bool)
        accepted = np.array([row["accepted"] for row in rows], dtype=np.float64)
        proposed = np.array([max(1, row["proposed"]) for row in rows], dtype=np.float64)
        steps = np.array([max(1, row["steps"]) for row in rows], dtype=np.float64)
        arm.append(
            Leg(
                requests={
                    name: np.rint(values * scale).astype(np.int64) if exact else values * scale
                    for name, values, scale in (
                        ("rate", np.where(drafted, accepted / proposed, 0.0), scales[0]),
                        ("length", np.where(drafted, accepted / steps, 0.0), scales[1]),
                    )
                }
                | {"counted": drafted.astype(np.int64)}
            )
        )
    sums = resampled_sums(arm, resamples, seed)
    if sums is None:
        return None, None
    rate = percentile_interval(ratio(sums["rate"] / scales[0], sums["counted"]))
    length = percentile_interval(1 + ratio(sums["length"] / scales[1], sums["counted"]))
    return (
        None if rate is None else [rate[0], rate[1]],
        None if length is None else [length[0], length[1]],
    )


def with_request_figures(
    fold: PooledFigures,
    legs: Sequence[Mapping[str, Any]],
    positions: Mapping[str, Any] | None,
    resamples: int,
    seed: int,
) -> PooledFigures:
    """``fold`` with its figures per request, from the legs' drafts (``index`` and
    ``requests``), and by output position (``fold.folding.by_position.fold_positions``)."""
    by_index = {leg["index"]: leg for leg in legs}
    chosen = [(index, by_index[index]["requests"]) for index in fold.legs]
    spread = per_request(chosen, fold, resamples, seed)
    return replace(
        fold,
        per_request=None if spread is None else frozen(spread),
        by_output_position=None if positions is None else frozen(dict(positions)),
    )
