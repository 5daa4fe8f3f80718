"""Acceptance by output position: each drafted step counted in the bucket of the output tokens
its request had already generated, pooled over requests, with intervals; a falling line flagged.

The position of a step is the sum, over the request's earlier lines (in time order), of the
tokens each emitted: ``emitted`` where the line carries it, else ``accepted + 1`` (the accepted
drafts and the token the target itself produced). The prompt and any token sampled at prefill
are not counted. A request's lines are ordered by (t_ns, counts), so lines of one request that
share a time are ordered the same whichever block folded them; the native pass folds them so
as it reads, and ``ordered_bucket_sums`` is the definition over lines in any order
(``fold.folding.line_rows`` makes every request's rows). Definitions: ``docs/per-request.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from fold.folding.packed_tokens import TOKEN_BITS, TOKEN_MASK
from fold.folding.per_request import MEAN_COLUMNS, MeanDraws, mean_columns
from fold.folding.uncertainty import Replicates, percentile_interval, ratio, resampled_sums
from fold.inputs.acceptance import Counts
from fold.inputs.leg_sums import Leg

FIRST_EDGE = 128
"""Bucket edges: 0, then 128 doubling (128, 256, 512, ...): fixed, so two runs or two arms
bucket alike, fine where outputs are short and few buckets where they are long."""
MAX_BUCKETS = 48  # 128 * 2^47 tokens: past any output a step log can hold
POSITION = (
    "output tokens the request emitted before the step: the sum of emitted (else accepted + 1) "
    "over its earlier lines, in time order"
)
ORACLE_POSITION = (
    "output tokens the request's recorded verify steps emitted before the step (accepted + 1 "
    "each), in the engine's step order; steps the engine kept no record of (none drafted) are "
    "not counted"
)
TRACE_POSITION = (
    "output tokens the request emitted before the step: the sum of emitted over its earlier "
    "traced steps, in the order the engine printed them; steps it does not trace (none "
    "drafted) are not counted"
)
POOLED_FALL = "within_requests_or_request_mix"
"""The caveat a falling pooled line carries: each bucket pools the requests that reached it, so
the fall may be within requests or the long requests accepting less from their start."""
CAVEAT_TEXT = {
    POOLED_FALL: "within requests, or long requests accepting less: --details tells which",
}
"""Each caveat's words, the document's ``caveat_text`` beside its ``caveat``."""
FALLING = (
    "the slope of A/P against the bucket (one bucket = a doubling of the position), weighted by "
    "each bucket's P, has its 95% interval wholly below 0"
)


def edges(count: int) -> list[int]:
    """The lower edges of the first ``count`` buckets."""
    return [0] + [FIRST_EDGE << j for j in range(count - 1)]


LINES_PER_PASS = 1 << 18
"""Requests' lines are put in order this many at a time (whole requests): a fold of 10M lines
never holds them all unpacked at once (some 20 MB of arrays a pass)."""


def ordered_bucket_sums(times: pl.DataFrame) -> pl.DataFrame:
    """Per request (``request``) and bucket of position: S, P and A of its drafted lines, from
    each request's lines (``t_ns`` and packed ``tokens`` lists, in any order), put in order;
    in numpy over flat arrays, whole requests a pass."""
    sizes = times["t_ns"].list.len().to_numpy()
    ends = np.cumsum(sizes)
    parts, first = [], 0
    while first < times.height:
        # Whole requests up to LINES_PER_PASS lines past the first (at least one request).
        last = int(np.searchsorted(ends, ends[first] - sizes[first] + LINES_PER_PASS, "right"))
        last = max(last, first + 1)
        parts.append(_ordered_sums(times.slice(first, last - first)))
        first = last
    if not parts:
        return pl.DataFrame(schema={"request": pl.UInt32, **SUMS_SCHEMA})
    return pl.concat(parts)


SUMS_SCHEMA = {"bucket": pl.Int64, "steps": pl.Int64, "proposed": pl.Int64, "accepted": pl.Int64}


def _ordered_sums(times: pl.DataFrame) -> pl.DataFrame:
    """``ordered_bucket_sums`` of one pass's requests.

    In numpy over the flat lines: a request's lines are contiguous and, as a writer logs them,
    mostly in time order already; only a chunk with a request out of order (or two lines of
    one time) is sorted. Positions only grow along a request, so each (request, bucket) is one
    run of rows and is summed with one ``reduceat``."""
    sizes = times["t_ns"].list.len().to_numpy().astype(np.int64)
    request = np.repeat(times["request"].to_numpy().astype(np.int64), sizes)
    t_ns = times["t_ns"].explode().to_numpy()
    tokens = times["tokens"].explode().to_numpy()
    starts = np.cumsum(sizes) - sizes
    same = request[1:] == request[:-1]
    if np.any(same & (t_ns[1:] <= t_ns[:-1])):
        order = np.lexsort((tokens, t_ns, request))
        t_ns, tokens = t_ns[order], tokens[order]
    proposed = tokens & TOKEN_MASK
    accepted = (tokens >> TOKEN_BITS) & TOKEN_MASK
    emitted_plus_one = tokens >> (2 * TOKEN_BITS)
    gained = np.where(emitted_plus_one > 0, emitted_plus_one - 1, accepted + 1)
    before = np.cumsum(gained) - gained
    before -= np.repeat(before[starts], sizes) if before.size else before
    # A position's bit length (exact: positions stay far below 2^53) less that of 128, less 1.
    bits = np.frexp(before.astype(np.float64))[1]
    bucket = np.maximum(0, bits - (FIRST_EDGE.bit_length() - 1))
    drafted = proposed > 0
    request, bucket = request[drafted], bucket[drafted]
    proposed, accepted = proposed[drafted], accepted[drafted]
    if not request.size:
        return pl.DataFrame(schema={"request": pl.UInt32, **SUMS_SCHEMA})
    key = request * MAX_BUCKETS + bucket
    runs = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    return pl.DataFrame(
        {
            "request": request[runs].astype(np.uint32),
            "bucket": bucket[runs],
            "steps": np.diff(np.r_[runs, key.size]),
            "proposed": np.add.reduceat(proposed, runs),
            "accepted": np.add.reduceat(accepted, runs),
        }
    ).cast(SUMS_SCHEMA)


def fold_positions(
    buckets: pl.DataFrame,
    step_times: pl.DataFrame,
    legs: Sequence[int],
    resamples: int,
    seed: int,
    position: str = POSITION,
) -> tuple[dict[str, Any] | None, MeanDraws | None]:
    """The figures by output position of ``legs`` from every request's bucket sums
    (``fold.folding.line_rows.LineRows.buckets``, by row of ``step_times``); None without a
    drafted step. ``position`` says what a step's position counts (``ORACLE_POSITION`` for an
    oracle's recorded steps). Beside them, the per-request means' resampled sums of the same
    requests (``fold.folding.per_request``), drawn in the same pass: the two bootstraps draw
    the very same requests."""
    leg_of = step_times["leg"]
    chosen = buckets.with_columns(leg_of.gather(buckets["request"]).alias("leg")).filter(
        pl.col("leg").is_in(list(legs))
    )
    return by_output_position(chosen, step_times, legs, resamples, seed, position)


def by_output_position(
    per_request: pl.DataFrame,
    step_times: pl.DataFrame,
    legs: Sequence[int],
    resamples: int,
    seed: int,
    position: str = POSITION,
) -> tuple[dict[str, Any] | None, MeanDraws | None]:
    """The figures by output position of ``legs`` (their order is the bootstrap's) from
    ``bucket_sums`` over these very legs (``per_request``), or None when they have no drafted
    step; and the per-request means' draws made beside them (``fold_positions``)."""
    if per_request.height == 0:
        return None, None
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
    replicates, means = _bucket_replicates(step_times, per_request, legs, count, resamples, seed)
    lows = edges(count + 1)
    buckets = []
    for bucket in range(count):
        row = found.get(bucket, {"requests": 0, "steps": 0, "proposed": 0, "accepted": 0})
        counts = Counts.of(row)
        drawn = replicates[bucket] if replicates else None
        buckets.append(
            {
                "from": lows[bucket],
                "to": lows[bucket + 1],
                "requests": row["requests"],
                **counts,
                "accept_rate_ci": _interval(drawn, "accept_rate"),
                "mean_acceptance_length": counts.mean_acceptance_length,
                "mean_acceptance_length_ci": _interval(drawn, "mean_acceptance_length"),
            }
        )
    slope, slope_ci = _slope(buckets, replicates)
    caveat = None if slope_ci is None or slope_ci[1] >= 0 else POOLED_FALL
    return {
        "position": position,
        # each bucket holds positions from its edge up to the next, exclusive
        "edges": lows,
        "buckets": buckets,
        "slope": slope,
        "slope_ci": slope_ci,
        "falling": None if slope_ci is None else slope_ci[1] < 0,
        "falling_when": FALLING,
        "caveat": caveat,
        "caveat_text": None if caveat is None else CAVEAT_TEXT[caveat],
        "long_requests": _long_requests(per_request, count),
    }, means


def _long_requests(per_request: pl.DataFrame, count: int) -> dict[str, Any] | None:
    """The buckets again over only the requests that reached the last bucket with drafts: one
    set of requests in every bucket, so a fall here is within requests, not a mix of short and
    long ones. None when fewer than two buckets hold drafts (nothing to compare)."""
    drafted = per_request.filter(pl.col("proposed") > 0)
    if drafted.height == 0 or drafted["bucket"].n_unique() < 2:
        return None
    last = int(drafted["bucket"].max())
    reached = drafted.filter(pl.col("bucket") == last)["request"].unique()
    mine = per_request.filter(pl.col("request").is_in(reached.implode()))
    totals = {
        row["bucket"]: row
        for row in mine.group_by("bucket")
        .agg(pl.col("steps", "proposed", "accepted").sum())
        .iter_rows(named=True)
    }
    rates = []
    for bucket in range(min(count, last + 1)):
        rates.append(dict(Counts.of(totals.get(bucket, Counts(0, 0, 0)))))
    return {"requests": reached.len(), "reach_bucket": last, "buckets": rates}


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
) -> tuple[list[Replicates] | None, MeanDraws | None]:
    """Each bucket's A/P and 1 + A/S in every resample, all buckets from one set of draws
    over the legs and their requests (the project's two-stage bootstrap): the buckets'
    figures pair resample by resample. The per-request means' columns of the same requests
    are summed in the same pass (``MeanDraws``): a second bootstrap over 10^6 requests drew
    them all again."""
    if not resamples:
        return None, None
    # The legs' requests in key order, the bootstrap's: step_times holds a row per request,
    # sorted by the request key (``PartialFold.step_times``), so its rows are that order already.
    chosen = np.flatnonzero(step_times["leg"].is_in(list(legs)).fill_null(False).to_numpy())
    dense = {
        name: np.zeros((count, chosen.size), dtype=np.int64)
        for name in ("steps", "proposed", "accepted")
    }
    bucket = per_request["bucket"].to_numpy()
    row = np.searchsorted(chosen, per_request["request"].to_numpy().astype(np.int64))
    for name, values in dense.items():
        values[bucket, row] = per_request[name].to_numpy()
    legs_of_rows = step_times["leg"].to_numpy()[chosen]
    spans = [_span(np.flatnonzero(legs_of_rows == leg)) for leg in legs]
    # A request's S, P and A are its drafted lines', summed over its buckets.
    counts = tuple(
        {name: values[:, span].sum(axis=0) for name, values in dense.items()} for span in spans
    )
    arm = [
        Leg(
            requests={
                f"{name} {b}": values[b, span]
                for name, values in dense.items()
                for b in range(count)
            }
            | means
        )
        for span, means in zip(spans, mean_columns(counts), strict=True)
    ]
    sums = resampled_sums(arm, resamples, seed)
    drawn = MeanDraws(
        counts,
        resamples,
        seed,
        None if sums is None else {name: sums[name] for name in MEAN_COLUMNS},
    )
    if sums is None:
        return None, drawn
    return [
        Replicates(
            resamples,
            {
                "accept_rate": ratio(sums[f"accepted {b}"], sums[f"proposed {b}"]),
                "mean_acceptance_length": 1 + ratio(sums[f"accepted {b}"], sums[f"steps {b}"]),
            },
        )
        for b in range(count)
    ], drawn


def _span(rows: np.ndarray) -> np.ndarray | slice:
    """Rows as a slice when they are consecutive, as a leg's rows in key order are: indexing
    with it takes a view where the rows themselves would copy (24 MB over 10^6 requests)."""
    if rows.size and rows[-1] - rows[0] + 1 == rows.size:
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


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
