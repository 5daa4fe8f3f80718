"""Step cadence: where a request's time in a leg goes, from the times of its steps.

Every line attributed to a leg counts, ``proposed = 0`` included: such a line is still a forward
of the target model that took its time in the decode loop, and leaving it out would make its
time look like a stall. Times are the log's ``t_ns``; a leg's window is the generate window as
recorded (``start_ns``/``end_ns`` without the attribution band).

Per request (writer, seq) in a leg:

* ``first_step_s``: leg start to the request's first step; ``decode_s``: first to last step;
  ``tail_s``: last step to leg end. A step inside the half-microsecond band around the window
  counts as at its edge, so the three fill the window exactly.
* the intervals between consecutive steps: ``interval_median_s`` (the mean of the middle two for
  an even count), ``interval_p90_s``, ``interval_p99_s`` (nearest rank: the smallest interval
  with at least 90% / 99% of them at or below it) and ``interval_max_s``;
* ``stalls``: intervals longer than ``stall_factor`` times the request's median interval, and
  ``stall_s``: their time beyond that median, summed. A request whose median interval is 0 (a
  clock too coarse for its steps) cannot be judged: both are None;
* ``decode_steps_per_s``: intervals (steps after the first) divided by ``decode_s``.

A group of requests (a leg, the warm fold) reports the median of each figure over its requests
(``median``) and pooled figures: durations are the mean per request (the sum over requests over
their number), intervals are over all the requests' intervals together, ``stalls`` is the total,
``decode_steps_per_s`` is all intervals over all decode seconds, and ``shares`` divides the
summed durations by the summed leg windows (request-seconds) of the requests in timed legs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import polars as pl

from fold.errors import InputError
from fold.folding import native, step_intervals
from fold.folding.accumulate import REQUEST_KEY, keys_increase
from fold.folding.cadence_groups import Pooled, group_figures
from fold.inputs.arm import WINDOW_SLACK_NS
from fold.inputs.defaults import DEFAULT_STALL_FACTOR
from fold.inputs.limits import is_number

KEY = REQUEST_KEY


def check_stall_factor(factor: float) -> float:
    if not is_number(factor):
        raise InputError(f"--stall-factor: {factor!r} is not a number; give one such as 4")
    if not math.isfinite(factor) or factor < 1:
        raise InputError(
            f"--stall-factor: {factor!r} must be a finite number of at least 1 (a stall is an "
            "interval longer than this many times its request's median interval)"
        )
    return float(factor)


def with_intervals(lines: pl.DataFrame, stall_factor: float) -> pl.DataFrame:
    """``lines`` (``leg``, ``w``, ``seq``, ``t_ns`` and any other columns) in time order per
    request, with ``interval_ns`` (null on a request's first line), the request's ``median_ns``
    and ``stall`` (null where the request cannot be judged).

    The per-line form of the definitions ``fold_cadence`` applies per request, for the trace,
    which marks each stalled step; the tests check that both find the same stalls.
    """
    ordered = lines.sort([*KEY, "t_ns"], maintain_order=True)
    # Sorted by request, a line continues its request when its key equals the line's before;
    # one integer request number then stands for the three-column key.
    # eq_missing: a null string id (an integer request) equals the null before it.
    same = pl.all_horizontal(
        pl.col(name).eq_missing(pl.col(name).shift()) for name in KEY
    ).fill_null(False)
    return (
        ordered.with_columns(
            pl.when(same).then(pl.col("t_ns") - pl.col("t_ns").shift()).alias("interval_ns"),
            (~same).cum_sum().alias("request"),
        )
        .with_columns(pl.col("interval_ns").median().over("request").alias("median_ns"))
        .with_columns(
            pl.when(pl.col("median_ns") > 0)
            .then(pl.col("interval_ns") > stall_factor * pl.col("median_ns"))
            .alias("stall")
        )
        .drop("request")
    )


RAW_SCHEMA = {
    "lines": pl.Int64,
    "intervals": pl.Int64,
    "first_step_ns": pl.Int64,
    "decode_ns": pl.Int64,
    "tail_ns": pl.Int64,
    "window_ns": pl.Int64,
    "median_ns": pl.Float64,
    "p90_ns": pl.Int64,
    "p99_ns": pl.Int64,
    "max_ns": pl.Int64,
    "stalls": pl.Int64,
    "stall_ns": pl.Float64,
}
"""A request's figures in nanoseconds, as both paths compute them (null where none)."""


def group_key(legs: Iterable[int]) -> tuple[int, ...]:
    """A group of legs as the cadence keys its pooled intervals: sorted, each leg once."""
    return tuple(sorted(set(legs)))


@dataclass(frozen=True)
class Cadence:
    """The cadence of every request of a fold, and of the groups of its legs it was asked for."""

    stall_factor: float
    requests: pl.DataFrame
    """One row per request: KEY and ``RAW_SCHEMA``, sorted by KEY."""
    pooled: Mapping[tuple[int, ...], Pooled] = field(repr=False)
    """By group (``group_key``): its requests' intervals pooled. Worked out with the requests'
    figures, while the step times are at hand: the intervals themselves are not kept."""

    def pooled_intervals(self, legs: Iterable[int]) -> Pooled:
        key = group_key(legs)
        if key not in self.pooled:
            raise KeyError(f"the cadence was not asked to pool the intervals of legs {key}")
        return self.pooled[key]

    def groups(self, groups: list[Iterable[int]]) -> list[dict[str, Any]]:
        """Median and pooled figures over the requests of each group of legs
        (``fold.folding.cadence_groups``)."""
        chosen = [sorted(set(legs)) for legs in groups]
        pooled = [self.pooled_intervals(legs) for legs in chosen]
        return group_figures(self.requests, chosen, pooled)


def fold_cadence(
    step_times: pl.DataFrame,
    legs: pl.DataFrame,
    stall_factor: float = DEFAULT_STALL_FACTOR,
    groups: Sequence[Iterable[int]] = (),
) -> Cadence:
    """The cadence from a partial fold's ``step_times`` and the arm's legs (``index``,
    ``start_ns``, ``end_ns``, widened by the attribution band), with the pooled intervals of
    each of ``groups`` (lists of leg indices).

    The native extension computes each request's figures and pools intervals by selection;
    without it (or switched off), ``polars_cadence`` does, the reference the tests hold it to.
    """
    stall_factor = check_stall_factor(stall_factor)
    # A partial fold's rows are one per request in key order (``PartialFold.step_times``);
    # only rows that are not (a test's, an unmerged fold's) pay for merging and sorting, which
    # on a load test's 10^6 requests cost 0.12 s and a copy of the figures.
    in_order = keys_increase(step_times)
    if not in_order:
        step_times = _one_row_per_request(step_times)
    if not native.available():
        return polars_cadence(step_times, legs, stall_factor, groups)
    keys = [group_key(group) for group in groups]
    size = int(legs["index"].max()) + 1 if legs.height else 0
    starts, ends = [0] * size, [0] * size
    for index, start, end in legs.select("index", "start_ns", "end_ns").iter_rows():
        starts[index], ends[index] = start + WINDOW_SLACK_NS, end - WINDOW_SLACK_NS
    raw, pooled = native.cadence(step_times, starts, ends, stall_factor, keys)
    requests = pl.concat([step_times.select(KEY), raw], how="horizontal")
    # The keys are step times' own columns until a filter copies them: a row without times
    # (none from a partial fold) is rare, and a load test's 10^6 keys are some 40 MiB.
    if (raw["lines"] == 0).any():
        requests = requests.filter(pl.col("lines") > 0)
    requests = (
        requests.with_columns(
            pl.when(pl.col("median2_ns") >= 0).then(pl.col("median2_ns") / 2).alias("median_ns"),
            *(
                pl.when(pl.col(name) >= 0).then(pl.col(name)).alias(name)
                for name in ("p90_ns", "p99_ns", "max_ns")
            ),
            pl.when(pl.col("judged") == 1).then(pl.col("stalls")).alias("stalls"),
            pl.when(pl.col("judged") == 1).then(pl.col("stall2_ns") / 2).alias("stall_ns"),
        )
        .select(*KEY, *RAW_SCHEMA)
        .cast(RAW_SCHEMA)
    )
    if not in_order:
        requests = requests.sort(KEY)
    return Cadence(stall_factor, requests, MappingProxyType(dict(zip(keys, pooled, strict=True))))


def polars_cadence(
    step_times: pl.DataFrame,
    legs: pl.DataFrame,
    stall_factor: float,
    groups: Sequence[Iterable[int]] = (),
) -> Cadence:
    """The reference: list operations per request, a request's times sorted within its own
    list, never across the whole log, and no group-by over millions of lines."""
    gaps = pl.col("t_ns").list.sort().list.diff().list.slice(1).list.sort()
    count = pl.col("gaps").list.len()
    step_times = step_times.select(*KEY, step_intervals.decoded(step_times).alias("t_ns"))
    per_request = (
        step_times.select(
            *KEY,
            pl.col("t_ns").list.len().cast(pl.Int64).alias("lines"),
            pl.col("t_ns").list.min().alias("first_ns"),
            pl.col("t_ns").list.max().alias("last_ns"),
            gaps.alias("gaps"),
        )
        .filter(pl.col("lines") > 0)
        .sort(KEY)
        .with_columns(
            count.cast(pl.Int64).alias("intervals"),
            pl.col("gaps").list.median().alias("median_ns"),
            pl.col("gaps").list.last().alias("max_ns"),
            *(
                pl.col("gaps")
                .list.get((count * percent + 99) // 100 - 1, null_on_oob=True)
                .alias(f"p{percent}_ns")
                for percent in (90, 99)
            ),
        )
        .with_columns((pl.col("median_ns") > 0).fill_null(False).alias("judged"))
    )
    intervals = (
        per_request.select(
            pl.int_range(pl.len()).alias("row"), "leg", "gaps", "median_ns", "judged"
        )
        .explode("gaps", empty_as_null=False)
        .rename({"gaps": "interval_ns"})
    )
    stalled = intervals.filter(
        pl.col("judged") & (pl.col("interval_ns") > stall_factor * pl.col("median_ns"))
    )
    stalls = stalled.group_by("row").agg(
        pl.len().cast(pl.Int64).alias("stalls"),
        (pl.col("interval_ns") - pl.col("median_ns")).sum().alias("stall_ns"),
    )
    windows = legs.select(
        pl.col("index").cast(pl.Int64).alias("leg"),
        (pl.col("start_ns") + WINDOW_SLACK_NS).cast(pl.Int64).alias("start"),
        (pl.col("end_ns") - WINDOW_SLACK_NS).cast(pl.Int64).alias("end"),
    )
    # A step in the attribution band around the recorded window counts as at its edge, so the
    # three durations fill the window exactly.
    first = pl.min_horizontal(pl.max_horizontal("first_ns", "start"), "end")
    last = pl.max_horizontal(pl.min_horizontal("last_ns", "end"), "start")
    requests = (
        per_request.drop("gaps")
        .with_row_index("row")
        .with_columns(pl.col("row").cast(pl.Int64))
        .join(stalls, on="row", how="left")
        .join(windows, on="leg", how="left")
        .with_columns(
            pl.max_horizontal(first - pl.col("start"), 0).alias("first_step_ns"),
            pl.max_horizontal(last - first, 0).alias("decode_ns"),
            pl.max_horizontal(pl.col("end") - last, 0).alias("tail_ns"),
            (pl.col("end") - pl.col("start")).alias("window_ns"),
            pl.when("judged").then(pl.col("stalls").fill_null(0)).alias("stalls"),
            pl.when("judged").then(pl.col("stall_ns").fill_null(0.0)).alias("stall_ns"),
        )
        .select(*KEY, *RAW_SCHEMA)
        .cast(RAW_SCHEMA)
        .sort(KEY)
    )
    by_leg = {
        key[0]: frame["interval_ns"].drop_nulls()
        for key, frame in intervals.select("leg", "interval_ns")
        .partition_by("leg", as_dict=True)
        .items()
    }

    def pooled(legs: tuple[int, ...]) -> Pooled:
        parts = [by_leg[leg] for leg in legs if leg in by_leg]
        ordered = pl.concat(parts).sort() if parts else pl.Series([], dtype=pl.Int64)
        count = ordered.len()
        if count == 0:
            return None
        return (
            count,
            ordered[(count - 1) // 2],
            ordered[count // 2],
            ordered[(count * 90 + 99) // 100 - 1],
            ordered[(count * 99 + 99) // 100 - 1],
            ordered[-1],
        )

    keys = [group_key(group) for group in groups]
    return Cadence(stall_factor, requests, MappingProxyType({key: pooled(key) for key in keys}))


def _one_row_per_request(step_times: pl.DataFrame) -> pl.DataFrame:
    """A merged partial fold has one row per request; pool each request's times if not."""
    return step_intervals.merged(step_times, KEY)
