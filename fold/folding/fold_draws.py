"""The fold's one bootstrap: the warm and all-legs folds' pooled figures, and the warm fold's
figures by output position and per-request means, drawn in the same resamples. (The step split
and the figures had drafts been cut at another k draw their own, from the same seed.)

The pooled figures (A/P, 1 + A/S, decode steps/s) draw the legs, then the requests within each
drawn leg (``fold.folding.uncertainty``). The figures by output position and the per-request
means of the warm legs are ratios of other per-request columns: those columns are drawn beside
the pooled figures' own, in the very same resamples (``Replicates.sums``). So each pairs with
the pooled figures resample by resample, and a load test's 10^6 requests are drawn once where
two bootstraps drew them twice (``docs/decisions.md``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from fold.folding.accumulate import REQUEST_KEY, PartialFold, keys_increase
from fold.folding.by_position import Positions
from fold.folding.cadence import Cadence
from fold.folding.leg_figures import bootstrap_leg
from fold.folding.per_request import MEAN_COLUMNS, MeanDraws, mean_columns
from fold.folding.request_rows import beside
from fold.folding.uncertainty import Replicates, fold_replicates
from fold.folding.warm import ThroughputCheck
from fold.inputs.acceptance import TRIPLE

POOLED_SUMS = (*TRIPLE, "decode_steps", "decode_ns")
"""Per request, what the pooled figures are ratios of."""


def fold_draws(
    arm_legs: pl.DataFrame,
    partial: PartialFold,
    check: ThroughputCheck,
    cadence: Cadence,
    positions: Positions | None,
    resamples: int,
    seed: int,
) -> tuple[dict[str, Replicates], MeanDraws | None]:
    """The warm and all-legs folds' replicates (none for 0 resamples), from the same sums as
    the legs' figures: per request S, P, A and its cadence's decode steps and nanoseconds (a
    request without cadence decodes nothing). The warm fold's carry the sums of the warm
    requests' bucket columns (``positions``) and ``MEAN_COLUMNS``, and the means' sums are
    also handed out as ``MeanDraws``, with the S, P and A they were made from."""
    if not resamples:
        return {}, None
    decode = cadence.requests.select(
        *REQUEST_KEY, pl.col("intervals").alias("decode_steps"), "decode_ns"
    )
    # The cadence's rows and the positions' are the requests' rows most often: put beside,
    # not joined.
    ordered = beside(partial.requests.select(*REQUEST_KEY, *TRIPLE), decode)
    buckets = () if positions is None else positions.bucket_names()
    if positions is not None:
        ordered = beside(ordered, positions.columns)
    ordered = ordered.with_columns(pl.col("decode_steps", "decode_ns", *buckets).fill_null(0))
    # In key order already most often (a partial fold's requests are): then not sorted, a
    # copy of every column; and the legs' parts carry only what is drawn, not the keys.
    if not keys_increase(ordered):
        ordered = ordered.sort(REQUEST_KEY)
    ordered = ordered.select("leg", *POOLED_SUMS, *buckets)
    requests = {key[0]: frame for key, frame in ordered.partition_by("leg", as_dict=True).items()}
    del ordered
    steps_in_leg = dict(partial.legs.select("leg", "steps").iter_rows())
    warm_set = set(check.warm_legs)
    empty = pl.DataFrame(schema=dict.fromkeys((*POOLED_SUMS, *buckets), pl.Int64))
    arm = list(arm_legs.iter_rows(named=True))
    frames = [requests.pop(leg["index"], empty) for leg in arm]
    warm = [leg["index"] in warm_set for leg in arm]
    counts = [
        {name: frame[name].to_numpy() for name in TRIPLE}  # Int64: the frame's own memory
        for frame, is_warm in zip(frames, warm, strict=True)
        if is_warm
    ]
    means = iter(mean_columns(counts))
    legs = []
    del requests  # legs of the log that the record does not have
    for leg, frame, is_warm in zip(arm, frames, warm, strict=True):
        columns: dict[str, np.ndarray] = {name: frame[name].to_numpy() for name in POOLED_SUMS}
        if is_warm:
            columns |= {name: frame[name].to_numpy() for name in buckets} | next(means)
        legs.append(bootstrap_leg(leg, columns, steps_in_leg.get(leg["index"], 0)))
    replicates = fold_replicates(legs, warm, resamples, seed, warm_sums=(*buckets, *MEAN_COLUMNS))
    sums = replicates["warm"].sums
    drawn = {name: sums[name] for name in MEAN_COLUMNS} if sums else None
    return replicates, MeanDraws(tuple(counts), resamples, seed, drawn)


def position_sums(replicates: Mapping[str, Replicates], positions: Positions) -> dict | None:
    """The bucket columns' sums in every resample of the warm fold, or None where none were
    drawn (no resamples, or fewer than two requests)."""
    warm = replicates.get("warm")
    if warm is None or not warm.sums:
        return None
    return {name: warm.sums[name] for name in positions.bucket_names()}
