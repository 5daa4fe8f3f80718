"""Per request: the pooled and the per-request-mean A/P and 1 + A/S, each named; the spread of
per-request acceptance; the requests that accepted least, by id.

Computed from a fold's own per-request sums (each leg's ``requests``), so the same function
serves any arm whose legs carry requests. A request with no drafted step (every line proposed
0) has no acceptance: it is counted (``requests_without_drafts``) and takes no part in the
means, the spread or the lowest. Definitions: ``docs/per-request.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fold.folding.cadence_groups import equal_runs
from fold.folding.leg_figures import Named, PooledFigures, frozen
from fold.folding.quantiles import linear_quantiles
from fold.folding.request_rows import RequestRows
from fold.folding.uncertainty import percentile_interval, ratio
from fold.inputs.acceptance import TRIPLE, Counts

LOWEST_SHOWN = 10
PERCENTILES = (10, 25, 50, 75, 90)
"""The spread's percentiles (numpy's default, linear between order statistics), beside the
minimum and the maximum."""
POOLED = "pooled: sums over every request, then the ratio (what engines report)"
MEAN = "per-request mean: each request's ratio, then their mean (every request weighs alike)"


def per_request(
    legs: Sequence[tuple[int, RequestRows]],
    pooled: Named,
    resamples: int,
    seed: int,
    drawn: MeanDraws | None = None,
) -> dict[str, Any] | None:
    """The per-request figures of ``legs`` (each a leg index and its requests' table, read by
    column); ``pooled`` holds the fold's own pooled figures and intervals (``accept_rate``,
    ``accept_rate_ci``, ...), shown as they are. None when the legs have no request.
    ``drawn``: the means' resampled sums, drawn by the fold's bootstrap (``MeanDraws``)."""
    columns = [
        {name: requests.column(name).astype(np.int64, copy=False) for name in TRIPLE}
        for _, requests in legs
    ]
    sizes = [len(found["steps"]) for found in columns]
    if not any(sizes):
        return None
    mean_rate, mean_length = _means(columns, resamples, seed, drawn)
    steps, proposed, accepted = (
        np.concatenate([found[name] for found in columns]) for name in TRIPLE
    )
    # Each leg's rows, once concatenated, are held once (10^6 requests: 24 MB a copy).
    del columns
    # Where each request is: its leg's place in ``legs`` (``starts``: where each leg's rows
    # begin), and its row in that leg; worked out only for the few candidates below.
    starts = np.cumsum([0, *sizes])
    drafted = np.flatnonzero(proposed > 0)
    rates = accepted[drafted] / proposed[drafted]
    lengths = 1 + accepted[drafted] / steps[drafted]
    # Only requests at or below the LOWEST_SHOWN-th lowest A/P can be among the lowest: the
    # full order's first ones are the first of theirs, sorted by the whole key.
    candidates = np.arange(len(drafted))
    if len(drafted) > LOWEST_SHOWN:
        cut = np.partition(rates, LOWEST_SHOWN - 1)[LOWEST_SHOWN - 1]
        candidates = np.flatnonzero(rates <= cut)
    at = drafted[candidates]
    place = np.searchsorted(starts, at, side="right") - 1
    row = at - starts[place]
    # The candidates' ids, a gather for each run of them in one leg (they come in row order:
    # one run a leg).
    ids: list[tuple[str, Any]] = []
    for leg_place, start, end in equal_runs(place):
        ids.extend(legs[leg_place][1].ids(row[start:end].tolist()))
    chosen = [(int(a), legs[int(p)][0], *found) for a, p, found in zip(at, place, ids, strict=True)]
    lowest = sorted(
        chosen,
        key=lambda item: (
            accepted[item[0]] / proposed[item[0]],
            -proposed[item[0]],
            item[1],
            item[2],
            str(item[3]),
        ),
    )[:LOWEST_SHOWN]
    return {
        "requests": len(steps),
        "requests_without_drafts": len(steps) - len(drafted),
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
                "w": w,
                "seq": seq,
                **(counts := Counts(int(steps[at]), int(proposed[at]), int(accepted[at]))),
                "mean_acceptance_length": counts.mean_acceptance_length,
            }
            for at, leg, w, seq in lowest
        ],
    }


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def _spread(values: np.ndarray) -> dict[str, float] | None:
    if not values.size:
        return None
    found = linear_quantiles(values, [p / 100 for p in PERCENTILES])
    return {
        "min": float(values.min()),
        **{f"p{p}": float(value) for p, value in zip(PERCENTILES, found, strict=True)},
        "max": float(values.max()),
    }


MEAN_COLUMNS = ("rate", "length", "counted")
"""The per-request columns whose resampled sums give the means' intervals."""


def mean_columns(counts: Sequence[Mapping[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Each leg's ``MEAN_COLUMNS`` from its requests' S, P and A (``counts``, a leg each): a
    mean of per-request ratios is a ratio of sums, each request's ratio over a count of 1 (0
    over 0 for a request without drafts)."""
    # Ratios in integer units of 1/2^32 (A/P <= 1) and 1/2^24 (A/S <= 2^16): the extension
    # draws and sums integer columns in one pass, several times faster than floats, and the
    # rounding moves a mean by under 1e-7. Floats where the sums could pass 2^62.
    exact = sum(len(found["steps"]) for found in counts) * 2**40 < 2**62
    columns = []
    for found in counts:
        drafted = found["proposed"] > 0
        accepted = found["accepted"].astype(np.float64)
        proposed = np.maximum(found["proposed"], 1).astype(np.float64)
        steps = np.maximum(found["steps"], 1).astype(np.float64)
        columns.append(
            {
                name: np.rint(values * scale).astype(np.int64) if exact else values * scale
                for name, values, scale in (
                    ("rate", np.where(drafted, accepted / proposed, 0.0), _SCALES[0]),
                    ("length", np.where(drafted, accepted / steps, 0.0), _SCALES[1]),
                )
            }
            | {"counted": drafted.astype(np.int8)}  # 0 or 1: a byte a request
        )
    return columns


_SCALES = (2.0**32, 2.0**24)


@dataclass(frozen=True)
class MeanDraws:
    """The means' columns' sums in every resample of the warm fold, drawn by the fold's one
    bootstrap with the pooled figures' columns (``fold.folding.fold_draws``), and what they
    were made from: taken only for those very requests, resamples and seed."""

    counts: tuple[Mapping[str, np.ndarray], ...]
    """Per leg, its requests' S, P and A in the bootstrap's order."""
    resamples: int
    seed: int
    sums: Mapping[str, np.ndarray] | None
    """``MEAN_COLUMNS``' sums in every resample (None: too few requests to resample)."""

    def made_from(
        self, counts: Sequence[Mapping[str, np.ndarray]], resamples: int, seed: int
    ) -> bool:
        return (
            (self.resamples, self.seed) == (resamples, seed)
            and len(self.counts) == len(counts)
            and all(
                np.array_equal(mine[name], theirs[name])
                for mine, theirs in zip(self.counts, counts, strict=True)
                for name in TRIPLE
            )
        )


def _means(
    legs: Sequence[Mapping[str, np.ndarray]],
    resamples: int,
    seed: int,
    drawn: MeanDraws | None = None,
) -> tuple[list[float] | None, list[float] | None]:
    """The per-request means' 95% intervals, from the sums the fold's bootstrap drew for them
    beside the pooled figures (``drawn``, made from these very requests)."""
    if not resamples:
        return None, None
    if drawn is None or not drawn.made_from(legs, resamples, seed):
        # Drawn anew here, they would be resamples of their own, not the pooled figures'.
        raise ValueError("the per-request means' draws were not made from these requests")
    sums = drawn.sums
    if sums is None:
        return None, None
    rate = percentile_interval(ratio(sums["rate"] / _SCALES[0], sums["counted"]))
    length = percentile_interval(1 + ratio(sums["length"] / _SCALES[1], sums["counted"]))
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
    drawn: MeanDraws | None = None,
) -> PooledFigures:
    """``fold`` with its figures per request, from the legs' drafts (``index`` and
    ``requests``), and by output position (``fold.folding.by_position.fold_positions``, and
    the means' draws it made beside its own, ``drawn``)."""
    by_index = {leg["index"]: leg for leg in legs}
    chosen = [(index, by_index[index]["requests"]) for index in fold.legs]
    spread = per_request(chosen, fold, resamples, seed, drawn)
    return replace(
        fold,
        per_request=None if spread is None else frozen(spread),
        by_output_position=None if positions is None else frozen(dict(positions)),
    )
