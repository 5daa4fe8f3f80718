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
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median
from typing import Any

import polars as pl

from fold.arm import WINDOW_SLACK_NS
from fold.errors import InputError

DEFAULT_STALL_FACTOR = 4.0
KEY = ["leg", "w", "seq"]
DURATIONS = ("first_step_s", "decode_s", "tail_s")
INTERVALS = ("interval_median_s", "interval_p90_s", "interval_p99_s", "interval_max_s")
REQUEST_FIGURES = (*DURATIONS, *INTERVALS, "stalls", "stall_s", "decode_steps_per_s")
SHARES = ("before_first_step", "decode", "stalls", "tail")
_NS = 1e9


def check_stall_factor(factor: float) -> float:
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
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
    same = pl.all_horizontal(pl.col(name) == pl.col(name).shift() for name in KEY).fill_null(False)
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


@dataclass(frozen=True)
class Cadence:
    """The cadence of every request of a fold, and of any group of its legs."""

    stall_factor: float
    requests: pl.DataFrame
    """One row per request: KEY, ``window_ns``, ``lines``, ``intervals`` and the figures."""
    intervals: pl.DataFrame
    """Every interval: ``leg``, ``interval_ns``."""

    def request(self, leg: int, w: str, seq: int) -> dict[str, Any]:
        return self._by_request.get((leg, w, seq)) or _no_request()

    @property
    def _by_request(self) -> dict[tuple[int, str, int], dict[str, Any]]:
        return self._cached(
            "_request_cache",
            lambda: {
                (row.pop("leg"), row.pop("w"), row.pop("seq")): _request_figures(row)
                for row in self.requests.iter_rows(named=True)
            },
        )

    def group(self, legs: Iterable[int]) -> dict[str, Any]:
        """Median and pooled figures over the requests of ``legs``."""
        chosen = sorted(set(legs))
        by_leg = self._by_leg
        keys = [key for leg in chosen for key in by_leg.get(leg, ())]
        figures = [self._by_request[key] for key in keys]
        windows = [self._windows[key] for key in keys]
        parts = self._intervals_by_leg
        intervals = pl.concat(
            [parts[leg] for leg in chosen if leg in parts]
            or [pl.Series("interval_ns", [], dtype=pl.Int64)]
        )
        count = len(figures)
        lines = sum(figure["lines"] for figure in figures)
        interval_count = sum(figure["intervals"] for figure in figures)
        decode_total = sum(figure["decode_s"] for figure in figures)
        judged = [figure for figure in figures if figure["stalls"] is not None]
        pooled: dict[str, Any] = {
            name: sum(figure[name] for figure in figures) / count if count else None
            for name in DURATIONS
        }
        pooled.update(_interval_figures(intervals))
        pooled["stalls"] = sum(figure["stalls"] for figure in judged) if judged else None
        pooled["stall_s"] = (
            sum(figure["stall_s"] for figure in judged) / len(judged) if judged else None
        )
        pooled["decode_steps_per_s"] = interval_count / decode_total if decode_total > 0 else None
        return {
            "requests": count,
            "lines": lines,
            "intervals": interval_count,
            **pooled,
            "shares": _shares(windows, figures),
            "median": {
                name: _median([figure[name] for figure in figures]) for name in REQUEST_FIGURES
            },
        }

    def _cached(self, name: str, build: Any) -> Any:
        value = self.__dict__.get(name)
        if value is None:
            value = build()
            object.__setattr__(self, name, value)
        return value

    @property
    def _by_leg(self) -> dict[int, list[tuple[int, str, int]]]:
        def build() -> dict[int, list[tuple[int, str, int]]]:
            grouped: dict[int, list[tuple[int, str, int]]] = {}
            for key in self.requests.select(KEY).iter_rows():
                grouped.setdefault(key[0], []).append(key)
            return grouped

        return self._cached("_leg_cache", build)

    @property
    def _windows(self) -> dict[tuple[int, str, int], int]:
        return self._cached(
            "_window_cache",
            lambda: {
                (leg, w, seq): window
                for leg, w, seq, window in self.requests.select(*KEY, "window_ns").iter_rows()
            },
        )

    @property
    def _intervals_by_leg(self) -> dict[int, pl.Series]:
        return self._cached(
            "_interval_cache",
            lambda: {
                key[0]: frame["interval_ns"]
                for key, frame in self.intervals.partition_by("leg", as_dict=True).items()
            },
        )


def _shares(windows: list[int], figures: list[dict[str, Any]]) -> dict[str, Any]:
    """Summed durations over summed leg windows, over the requests of timed legs."""
    timed = [
        (window, figure) for window, figure in zip(windows, figures, strict=True) if window > 0
    ]
    window_s = sum(window for window, _ in timed) / _NS
    if not timed or window_s <= 0:
        return dict.fromkeys(SHARES)
    return {
        "before_first_step": sum(figure["first_step_s"] for _, figure in timed) / window_s,
        "decode": sum(figure["decode_s"] for _, figure in timed) / window_s,
        "stalls": sum(figure["stall_s"] or 0.0 for _, figure in timed) / window_s,
        "tail": sum(figure["tail_s"] for _, figure in timed) / window_s,
    }


def fold_cadence(
    step_times: pl.DataFrame, legs: pl.DataFrame, stall_factor: float = DEFAULT_STALL_FACTOR
) -> Cadence:
    """The cadence from a partial fold's ``step_times`` and the arm's legs (``index``,
    ``start_ns``, ``end_ns``, widened by the attribution band)."""
    stall_factor = check_stall_factor(stall_factor)
    # List operations per request: a request's times are sorted within its own list, never
    # across the whole log, and no group-by over millions of lines is needed.
    gaps = pl.col("t_ns").list.sort().list.diff().list.slice(1).list.sort()
    count = pl.col("gaps").list.len()
    per_request = (
        _one_row_per_request(step_times)
        .select(
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
    requests = (
        per_request.drop("gaps")
        .with_row_index("row")
        .with_columns(pl.col("row").cast(pl.Int64))
        .join(stalls, on="row", how="left")
        .join(windows, on="leg", how="left")
        .with_columns(
            pl.col("stalls").fill_null(0),
            (pl.col("end") - pl.col("start")).alias("window_ns"),
        )
        .drop("row")
        .sort(KEY)
    )
    return Cadence(
        stall_factor=stall_factor,
        requests=requests,
        intervals=intervals.select("leg", "interval_ns"),
    )


def _one_row_per_request(step_times: pl.DataFrame) -> pl.DataFrame:
    """A merged partial fold has one row per request; concatenate the lists if not."""
    if not step_times.select(pl.struct(KEY).is_duplicated().any()).item():
        return step_times
    return step_times.group_by(KEY).agg(
        pl.col("t_ns").list.explode(keep_nulls=False, empty_as_null=False)
    )


def _request_figures(row: dict[str, Any]) -> dict[str, Any]:
    start, end = row["start"], row["end"]
    # A step in the attribution band around the recorded window counts as at its edge, so the
    # three durations fill the window exactly.
    first = min(max(row["first_ns"], start), end)
    last = max(min(row["last_ns"], end), start)
    decode_s = max(0, last - first) / _NS
    judged = bool(row["judged"])
    return {
        "lines": row["lines"],
        "intervals": row["intervals"],
        "first_step_s": max(0, first - start) / _NS,
        "decode_s": decode_s,
        "tail_s": max(0, end - last) / _NS,
        "interval_median_s": _seconds(row["median_ns"]),
        "interval_p90_s": _seconds(row["p90_ns"]),
        "interval_p99_s": _seconds(row["p99_ns"]),
        "interval_max_s": _seconds(row["max_ns"]),
        "stalls": row["stalls"] if judged else None,
        "stall_s": (row["stall_ns"] or 0) / _NS if judged else None,
        "decode_steps_per_s": row["intervals"] / decode_s if decode_s > 0 else None,
    }


def _no_request() -> dict[str, Any]:
    return {"lines": 0, "intervals": 0, **dict.fromkeys(REQUEST_FIGURES)}


def _interval_figures(intervals: pl.Series) -> dict[str, Any]:
    if intervals.len() == 0:
        return dict.fromkeys(INTERVALS)
    ordered = intervals.sort()
    count = ordered.len()
    middle = (ordered[(count - 1) // 2] + ordered[count // 2]) / 2
    return {
        "interval_median_s": middle / _NS,
        "interval_p90_s": ordered[(count * 90 + 99) // 100 - 1] / _NS,
        "interval_p99_s": ordered[(count * 99 + 99) // 100 - 1] / _NS,
        "interval_max_s": ordered[-1] / _NS,
    }


def _seconds(nanoseconds: float | None) -> float | None:
    return None if nanoseconds is None else nanoseconds / _NS


def _median(values: list[Any]) -> float | None:
    present = [value for value in values if value is not None]
    return float(median(present)) if present else None
