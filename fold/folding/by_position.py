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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from fold.folding.accumulate import REQUEST_KEY as KEY
from fold.folding.frozen import freeze_fields
from fold.folding.packed_tokens import TOKEN_BITS, TOKEN_MASK
from fold.folding.uncertainty import Replicates, percentile_interval, ratio
from fold.inputs.acceptance import TRIPLE, Counts

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


@dataclass(frozen=True)
class Positions:
    """The figures by output position of a fold's warm legs before their intervals: what the
    fold's one bootstrap (``fold.folding.uncertainty.fold_replicates``) needs to draw them
    with the pooled figures, and the figures themselves (``position_figures``)."""

    position: str
    totals: tuple[tuple[int, int, int, int], ...]
    """Per bucket: its requests, and its drafted lines' S, P and A."""
    long_requests: Mapping[str, Any] | None
    columns: pl.DataFrame
    """A row per request of ``step_times`` (its key, ``REQUEST_KEY``), and per bucket b its
    drafted lines' S, P and A (``bucket_columns(b)``); 0 outside the warm legs."""

    def __post_init__(self) -> None:
        freeze_fields(self, ("long_requests",))

    @property
    def count(self) -> int:
        return len(self.totals)

    def bucket_names(self) -> tuple[str, ...]:
        return tuple(name for b in range(self.count) for name in bucket_columns(b))


def bucket_columns(bucket: int) -> tuple[str, str, str]:
    """The names of bucket ``bucket``'s S, P and A in ``Positions.columns`` and the bootstrap."""
    return (f"steps {bucket}", f"proposed {bucket}", f"accepted {bucket}")


def fold_positions(
    buckets: pl.DataFrame,
    step_times: pl.DataFrame,
    legs: Sequence[int],
    position: str = POSITION,
) -> Positions | None:
    """The figures by output position of ``legs`` from every request's bucket sums
    (``fold.folding.line_rows.LineRows.buckets``, by row of ``step_times``), their intervals
    not yet drawn; None without a drafted step. ``position`` says what a step's position
    counts (``ORACLE_POSITION`` for an oracle's recorded steps)."""
    leg_of = step_times["leg"]
    chosen = buckets.with_columns(leg_of.gather(buckets["request"]).alias("leg")).filter(
        pl.col("leg").is_in(list(legs))
    )
    if chosen.height == 0:
        return None
    count = int(chosen["bucket"].max()) + 1
    totals = (
        chosen.group_by("bucket")
        .agg(
            pl.len().cast(pl.Int64).alias("requests"),
            pl.col(*TRIPLE).sum(),
        )
        .sort("bucket")
    )
    found = {row[0]: row[1:] for row in totals.iter_rows()}
    return Positions(
        position,
        tuple(found.get(bucket, (0, 0, 0, 0)) for bucket in range(count)),
        _long_requests(chosen, count),
        _columns(chosen, step_times, count),
    )


def _columns(chosen: pl.DataFrame, step_times: pl.DataFrame, count: int) -> pl.DataFrame:
    """``Positions.columns``: the keys are step_times' own (no copy; the cadence's rows hold
    them too), and the sums 4 bytes each where every one fits (a load test's 10^6 requests:
    12 MB a bucket). Made in polars: a Series made from numpy imports numpy.ma (20 ms of a
    small fold's start)."""
    size = step_times.height
    columns = []
    for bucket in range(count):
        rows = chosen.filter(pl.col("bucket") == bucket)
        for name, column in zip(TRIPLE, bucket_columns(bucket), strict=True):
            fits = rows.height == 0 or rows[name].max() < 2**31
            kind = pl.Int32 if fits else pl.Int64
            zeros = pl.zeros(size, dtype=kind, eager=True).alias(column)
            columns.append(zeros.scatter(rows["request"], rows[name].cast(kind)))
    return step_times.select(KEY).with_columns(columns)


def position_figures(positions: Positions, sums: Mapping[str, np.ndarray] | None) -> dict[str, Any]:
    """The figures by output position with their intervals, from each bucket column's sum in
    every resample of the warm legs (``sums``; None without intervals)."""
    replicates = None
    if sums is not None:
        replicates = [
            Replicates(
                len(sums[steps]),
                {
                    "accept_rate": ratio(sums[accepted], sums[proposed]),
                    "mean_acceptance_length": 1 + ratio(sums[accepted], sums[steps]),
                },
            )
            for steps, proposed, accepted in map(bucket_columns, range(positions.count))
        ]
    lows = edges(positions.count + 1)
    buckets = []
    for bucket, (requests, steps, proposed, accepted) in enumerate(positions.totals):
        counts = Counts(steps, proposed, accepted)
        drawn = replicates[bucket] if replicates else None
        buckets.append(
            {
                "from": lows[bucket],
                "to": lows[bucket + 1],
                "requests": requests,
                **counts,
                "accept_rate_ci": _interval(drawn, "accept_rate"),
                "mean_acceptance_length": counts.mean_acceptance_length,
                "mean_acceptance_length_ci": _interval(drawn, "mean_acceptance_length"),
            }
        )
    slope, slope_ci = _slope(buckets, replicates)
    caveat = None if slope_ci is None or slope_ci[1] >= 0 else POOLED_FALL
    return {
        "position": positions.position,
        # each bucket holds positions from its edge up to the next, exclusive
        "edges": lows,
        "buckets": buckets,
        "slope": slope,
        "slope_ci": slope_ci,
        "falling": None if slope_ci is None else slope_ci[1] < 0,
        "falling_when": FALLING,
        "caveat": caveat,
        "caveat_text": None if caveat is None else CAVEAT_TEXT[caveat],
        "long_requests": None if positions.long_requests is None else dict(positions.long_requests),
    }


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
