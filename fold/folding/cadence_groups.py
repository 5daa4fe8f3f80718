"""The cadence of a group of legs (a leg, the warm fold, all legs) from its requests' rows
(``fold.folding.cadence.Cadence.requests``): their sums, the median of each request figure
over them, and the group's pooled intervals. Definitions: ``fold.folding.cadence``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

DURATIONS = ("first_step_s", "decode_s", "tail_s")
INTERVALS = ("interval_median_s", "interval_p90_s", "interval_p99_s", "interval_max_s")
REQUEST_FIGURES = (*DURATIONS, *INTERVALS, "stalls", "stall_s", "decode_steps_per_s")
SHARES = ("before_first_step", "decode", "stalls", "tail")
_NS = 1e9

Pooled = tuple[int, int, int, int, int, int] | None
"""The pooled intervals of the requests of some legs: (count, the two middle values, the
nearest ranks 90 and 99, the largest), in nanoseconds; None without any."""


def group_figures(
    requests: pl.DataFrame, groups: Sequence[Sequence[int]], pooled: Sequence[Pooled]
) -> list[dict[str, Any]]:
    """Each group's figures (``groups``: sorted lists of legs, ``pooled``: their pooled
    intervals) from the requests' rows (KEY and ``RAW_SCHEMA``, sorted by KEY).

    The groups of one leg are summed in one pass over the table, the others one filter
    each: no request is copied once per group it belongs to (a load test's million requests
    sit in their leg's group, the warm legs' and all legs')."""
    singles = sorted({legs[0] for legs in groups if len(legs) == 1})
    by_leg: dict[int, dict[str, Any]] = {}
    if singles:
        frame = (
            requests.lazy()
            .filter(pl.col("leg").is_in(singles))
            .group_by("leg")
            .agg(_group_sums())
            .collect()
        )
        by_leg = {row["leg"]: row for row in frame.iter_rows(named=True)}
    sums = [
        by_leg.get(legs[0])
        if len(legs) == 1
        else requests.lazy()
        .filter(pl.col("leg").is_in(legs))
        .select(_group_sums())
        .collect()
        .row(0, named=True)
        for legs in groups
    ]
    medians = group_medians(requests, groups)
    return [
        _group_figures(found, median, intervals)
        for found, median, intervals in zip(sums, medians, pooled, strict=True)
    ]


def group_medians(
    requests: pl.DataFrame, groups: Sequence[Sequence[int]]
) -> list[dict[str, float | None]]:
    """Per group, the median of each request figure (``REQUEST_FIGURES``) over its requests
    that have it, as polars' ``median`` gives it (the mean of the middle two as ``low +
    (high - low) / 2``; the tests hold the two equal).

    A figure at a time, each group's rows selected from it: polars made every figure of
    every group's requests at once (a load test's 10^6 requests: 0.6 s alone, 1.35 s beside
    the bootstrap, and that stage's peak 64 MiB higher)."""
    if requests["leg"].null_count():  # in no leg, so in no group
        requests = requests.filter(pl.col("leg").is_not_null())
    legs = requests["leg"].to_numpy()
    # The rows are in key order, leg first: a leg's rows are one run of them.
    if np.any(legs[1:] < legs[:-1]):
        raise ValueError("the cadence's requests must be sorted by leg")
    runs = {int(leg): slice(int(start), int(end)) for leg, start, end in equal_runs(legs)}
    every = set(runs)
    chosen: list[slice | np.ndarray | None] = []
    for group in groups:
        inside = [leg for leg in group if leg in runs]
        if not inside:
            chosen.append(None)
        elif set(inside) == every:
            chosen.append(slice(None))
        elif len(inside) == 1:
            chosen.append(runs[inside[0]])
        else:
            chosen.append(np.isin(legs, inside))
    figures = {expression.meta.output_name(): expression for expression in _request_columns()}
    medians: list[dict[str, float | None]] = [{} for _ in groups]
    for name in REQUEST_FIGURES:
        # Nulls become NaN here, and NaN is never a figure's value (no figure divides by 0).
        column = requests.select(figures[name].cast(pl.Float64)).to_series().to_numpy()
        for found, rows in zip(medians, chosen, strict=True):
            found[name] = None if rows is None else _median(column[rows])
    return medians


def equal_runs(values: np.ndarray) -> list[tuple[int, int, int]]:
    """(value, first place, place after its last) of each run of equal values, in order."""
    if values.size == 0:
        return []
    starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))
    ends = np.concatenate([starts[1:], [values.size]])
    return list(zip(values[starts].tolist(), starts.tolist(), ends.tolist(), strict=True))


def _median(values: np.ndarray) -> float | None:
    """The median of the values that are not NaN, None without any: the middle one, or
    ``low + (high - low) * 0.5`` of the middle two, as polars computes it."""
    values = values[~np.isnan(values)]
    count = values.size
    if count == 0:
        return None
    middle = np.partition(values, [(count - 1) // 2, count // 2])
    low, high = float(middle[(count - 1) // 2]), float(middle[count // 2])
    return low if low == high else low + (high - low) * 0.5


def _group_sums() -> list[pl.Expr]:
    """A group's count and sums over its requests' rows (nanoseconds)."""
    timed = pl.col("window_ns") > 0
    return [
        pl.len().alias("requests"),
        pl.col("lines", "intervals", "first_step_ns", "decode_ns", "tail_ns").sum(),
        pl.col("stalls").is_not_null().sum().alias("judged"),
        pl.col("stalls").sum(),
        pl.col("stall_ns").sum(),
        timed.sum().alias("timed"),
        *(
            pl.col(name).filter(timed).sum().alias(f"timed_{name}")
            for name in ("window_ns", "first_step_ns", "decode_ns", "tail_ns")
        ),
        pl.col("stall_ns").filter(timed).fill_null(0.0).sum().alias("timed_stall_ns"),
    ]


def _request_columns() -> list[pl.Expr]:
    """The figures of a request, in seconds, in the order the JSON shows them."""
    decode_s = pl.col("decode_ns") / _NS
    return [
        pl.col("lines"),
        pl.col("intervals"),
        (pl.col("first_step_ns") / _NS).alias("first_step_s"),
        decode_s.alias("decode_s"),
        (pl.col("tail_ns") / _NS).alias("tail_s"),
        (pl.col("median_ns") / _NS).alias("interval_median_s"),
        (pl.col("p90_ns") / _NS).alias("interval_p90_s"),
        (pl.col("p99_ns") / _NS).alias("interval_p99_s"),
        (pl.col("max_ns") / _NS).alias("interval_max_s"),
        pl.col("stalls"),
        (pl.col("stall_ns") / _NS).alias("stall_s"),
        pl.when(pl.col("decode_ns") > 0)
        .then(pl.col("intervals") / decode_s)
        .alias("decode_steps_per_s"),
    ]


def _time_split(figures: dict[str, Any]) -> dict[str, float] | None:
    """A request's mean time before its first step, decoding outside stalls, in stalls and
    after its last step, as shares of their sum (the warm legs' time chart); None without
    times."""
    first, decode, tail = figures["first_step_s"], figures["decode_s"], figures["tail_s"]
    if first is None or decode is None or tail is None or not first + decode + tail > 0:
        return None
    total, stalled = first + decode + tail, figures["stall_s"] or 0.0
    return {
        "before_first_step": first / total,
        "decoding": (decode - stalled) / total,
        "stalls": stalled / total,
        "tail": tail / total,
    }


def _group_figures(
    sums: dict[str, Any] | None, medians: dict[str, float | None], pooled: Pooled
) -> dict[str, Any]:
    """A group's figures from its requests' sums and medians and its pooled intervals.

    Durations are summed in whole nanoseconds, so no figure depends on the requests' order."""
    count = sums["requests"] if sums else 0
    if not count or sums is None:
        return {
            "requests": 0,
            "lines": 0,
            "intervals": 0,
            **dict.fromkeys(REQUEST_FIGURES),
            "shares": dict.fromkeys(SHARES),
            "time_split": None,
            "median": dict.fromkeys(REQUEST_FIGURES),
        }
    figures: dict[str, Any] = {
        "requests": count,
        "lines": sums["lines"],
        "intervals": sums["intervals"],
        **{name: sums[name[:-2] + "_ns"] / count / _NS for name in DURATIONS},
        **_interval_figures(pooled),
    }
    judged = sums["judged"]
    figures["stalls"] = sums["stalls"] if judged else None
    figures["stall_s"] = (sums["stall_ns"] or 0.0) / judged / _NS if judged else None
    decode_ns = sums["decode_ns"]
    figures["decode_steps_per_s"] = sums["intervals"] / (decode_ns / _NS) if decode_ns else None
    window_ns = sums["timed_window_ns"]
    if sums["timed"] and window_ns > 0:
        shares = {
            share: sums[f"timed_{name}"] / window_ns
            for share, name in zip(
                SHARES, ("first_step_ns", "decode_ns", "stall_ns", "tail_ns"), strict=True
            )
        }
    else:
        shares = dict.fromkeys(SHARES)
    figures["shares"] = shares
    figures["time_split"] = _time_split(figures)
    figures["median"] = {name: medians[name] for name in REQUEST_FIGURES}
    return figures


def _interval_figures(pooled: Pooled) -> dict[str, Any]:
    if pooled is None:
        return dict.fromkeys(INTERVALS)
    _count, lower, upper, p90, p99, largest = pooled
    return {
        "interval_median_s": (lower + upper) / 2 / _NS,
        "interval_p90_s": p90 / _NS,
        "interval_p99_s": p99 / _NS,
        "interval_max_s": largest / _NS,
    }
