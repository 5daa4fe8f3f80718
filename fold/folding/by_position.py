"""Acceptance by output position: each drafted step counted in the bucket of the output tokens
its request had already generated, pooled over requests, with intervals; a falling line flagged.

The position of a step is the sum, over the request's earlier lines (in time order), of the
tokens each emitted: ``emitted`` where the line carries it, else ``accepted + 1`` (the accepted
drafts and the token the target itself produced). The prompt and any token sampled at prefill
are not counted. Lines come from a partial fold's ``step_times`` (every attributed line's time
and packed counts, in any order): ordered by (t_ns, counts), so lines of one request that share
a time are ordered the same whichever block folded them. Definitions: ``docs/per-request.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from fold.folding.accumulate import REQUEST_KEY, TOKEN_BITS, TOKEN_MASK
from fold.folding.uncertainty import Replicates, bootstrap, percentile_interval
from fold.inputs import acceptance
from fold.inputs.leg_sums import Leg

FIRST_EDGE = 128
"""Bucket edges: 0, then 128 doubling (128, 256, 512, ...): fixed, so two runs or two arms
bucket alike, fine where outputs are short and few buckets where they are long."""
MAX_BUCKETS = 48  # 128 * 2^47 tokens: past any output a step log can hold
POSITION = (
    "output tokens the request emitted before the step: the sum of emitted (else accepted + 1) "
    "over its earlier lines, in time order"
)
FALLING = (
    "the slope of A/P against the bucket (one bucket = a doubling of the position), weighted by "
    "each bucket's P, has its 95% interval wholly below 0"
)


def edges(count: int) -> list[int]:
    """The lower edges of the first ``count`` buckets."""
    return [0] + [FIRST_EDGE << j for j in range(count - 1)]


def bucket_of(position: pl.Expr) -> pl.Expr:
    """A position's bucket: 0 below 128, then one more per doubling (exact, no logarithm)."""
    found = pl.lit(0, dtype=pl.Int64)
    for j in range(MAX_BUCKETS - 1):
        found = found + (position >= (FIRST_EDGE << j)).cast(pl.Int64)
    return found


def positioned_steps(step_times: pl.DataFrame, legs: Sequence[int]) -> pl.DataFrame:
    """Per drafted line of ``legs``: its request, bucket, proposed and accepted."""
    lines = step_times.filter(pl.col("leg").is_in(list(legs))).explode("t_ns", "tokens")
    lines = lines.filter(pl.col("tokens").is_not_null())
    proposed = pl.col("tokens") % (TOKEN_MASK + 1)
    accepted = (pl.col("tokens") // (1 << TOKEN_BITS)) % (TOKEN_MASK + 1)
    emitted_plus_one = pl.col("tokens") // (1 << (2 * TOKEN_BITS))
    gained = (
        pl.when(emitted_plus_one > 0).then(emitted_plus_one - 1).otherwise(accepted + 1)
    ).alias("gained")
    ordered = lines.with_columns(
        proposed.alias("proposed"), accepted.alias("accepted"), gained
    ).sort([*REQUEST_KEY, "t_ns", "tokens"], nulls_last=False)
    before = pl.col("gained").cum_sum().over(REQUEST_KEY) - pl.col("gained")
    return (
        ordered.with_columns(bucket_of(before).alias("bucket"))
        .filter(pl.col("proposed") > 0)
        .select(*REQUEST_KEY, "bucket", "proposed", "accepted")
    )


def by_output_position(
    step_times: pl.DataFrame, legs: Sequence[int], resamples: int, seed: int
) -> dict[str, Any] | None:
    """The figures by output position of ``legs`` (their order is the bootstrap's), or None
    when the legs have no drafted step."""
    steps = positioned_steps(step_times, legs)
    if steps.height == 0:
        return None
    per_request = steps.group_by(*REQUEST_KEY, "bucket").agg(
        pl.len().cast(pl.Int64).alias("steps"), pl.col("proposed").sum(), pl.col("accepted").sum()
    )
    count = int(per_request["bucket"].max()) + 1
    totals = (
        per_request.group_by("bucket")
        .agg(
            pl.len().cast(pl.Int64).alias("requests"),
            pl.col("steps", "proposed", "accepted").sum(),
        )
        .sort("bucket")
    )
    found = {row["bucket"]: row for row in totals.iter_rows(named=True)}
    replicates = _bucket_replicates(step_times, per_request, legs, count, resamples, seed)
    lows = edges(count + 1)
    buckets = []
    for bucket in range(count):
        row = found.get(bucket, {"requests": 0, "steps": 0, "proposed": 0, "accepted": 0})
        drawn = replicates[bucket] if replicates else None
        buckets.append(
            {
                "from": lows[bucket],
                "to": lows[bucket + 1],
                "requests": row["requests"],
                "steps": row["steps"],
                "proposed": row["proposed"],
                "accepted": row["accepted"],
                "accept_rate": acceptance.accept_rate(row["accepted"], row["proposed"]),
                "accept_rate_ci": _interval(drawn, "accept_rate"),
                "mean_acceptance_length": acceptance.mean_acceptance_length(
                    row["accepted"], row["steps"]
                ),
                "mean_acceptance_length_ci": _interval(drawn, "mean_acceptance_length"),
            }
        )
    slope, slope_ci = _slope(buckets, replicates)
    return {
        "position": POSITION,
        "edges": lows,
        # (each bucket holds positions from its edge up to the next, exclusive)
        "buckets": buckets,
        "slope": slope,
        "slope_ci": slope_ci,
        "falling": None if slope_ci is None else slope_ci[1] < 0,
        "falling_when": FALLING,
    }


def _interval(drawn: Replicates | None, figure: str) -> list[float] | None:
    found = None if drawn is None else drawn.interval(figure)
    return None if found is None else [found[0], found[1]]


def _bucket_replicates(
    step_times: pl.DataFrame,
    per_request: pl.DataFrame,
    legs: Sequence[int],
    count: int,
    resamples: int,
    seed: int,
) -> list[Replicates] | None:
    """Each bucket's replicates, drawn over the legs and their requests with one seed: every
    bucket sees the same draws, so the buckets' figures pair resample by resample."""
    if not resamples:
        return None
    requests = (
        step_times.filter(pl.col("leg").is_in(list(legs)))
        .select(REQUEST_KEY)
        .unique()
        .sort(REQUEST_KEY, nulls_last=False)
        .with_row_index("row")
    )
    placed = per_request.join(requests, on=REQUEST_KEY, nulls_equal=True)
    rows = requests.height
    dense = {
        name: np.zeros((count, rows), dtype=np.int64) for name in ("steps", "proposed", "accepted")
    }
    bucket = placed["bucket"].to_numpy()
    row = placed["row"].to_numpy().astype(np.int64)
    for name, values in dense.items():
        values[bucket, row] = placed[name].to_numpy()
    legs_of_rows = requests["leg"].to_numpy()
    spans = [np.flatnonzero(legs_of_rows == leg) for leg in legs]
    found = []
    for b in range(count):
        arm = [
            Leg(requests={name: values[b, span] for name, values in dense.items()})
            for span in spans
        ]
        found.append(bootstrap(arm, {"fold": list(range(len(arm)))}, resamples, seed)["fold"])
    return found


def _slope(
    buckets: list[dict[str, Any]], replicates: list[Replicates] | None
) -> tuple[float | None, list[float] | None]:
    """The weighted least-squares slope of A/P against the bucket index (weights: each
    bucket's P), and its 95% interval from the buckets' paired replicates."""
    weights = np.array([float(bucket["proposed"]) for bucket in buckets])
    rates = np.array(
        [np.nan if bucket["accept_rate"] is None else bucket["accept_rate"] for bucket in buckets]
    )
    point = _weighted_slope(rates[None, :], weights)[0]
    if replicates is None:
        return (None if np.isnan(point) else float(point)), None
    drawn = np.column_stack(
        [found.figures.get("accept_rate", np.full(found.resamples, np.nan)) for found in replicates]
    )
    interval = percentile_interval(_weighted_slope(drawn, weights))
    return (
        None if np.isnan(point) else float(point),
        None if interval is None else [interval[0], interval[1]],
    )


def _weighted_slope(rates: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of ``rates`` (resamples x buckets), the slope over its defined buckets; NaN with
    fewer than two."""
    x = np.arange(rates.shape[1], dtype=np.float64)
    w = np.where(np.isnan(rates), 0.0, weights[None, :])
    y = np.nan_to_num(rates)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        x_mean = (w * x).sum(axis=1) / total
        y_mean = (w * y).sum(axis=1) / total
        dx = x[None, :] - x_mean[:, None]
        spread = (w * dx * dx).sum(axis=1)
        slope = (w * dx * (y - y_mean[:, None])).sum(axis=1) / spread
    defined = (w > 0).sum(axis=1) >= 2
    return np.where(defined & (spread > 0), slope, np.nan)
