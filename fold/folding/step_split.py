"""Our step time split into drafting, verifying and the rest, per leg and over the warm legs.

A step line may carry ``draft_ns`` and ``verify_ns`` (``instrument/FORMAT.md``): how long the
forward that produced it spent drafting and in the target's verify forward. The step time is the
cadence's (``fold.folding.cadence``): the interval between a request's consecutive steps, so a
group's mean step time is its requests' decode time (first step to last) over their intervals
(steps after each request's first): the inverse of the cadence's pooled decode steps/s.

A request's decode window holds the parts of all its steps but the first (whose drafting and
verify come before its first step's time), so its time in a part is estimated as the part's mean
over the request's steps after its first that carried it, times the request's intervals (the
first line: ``fold.folding.accumulate.FIRST_STEP``). Per group (a leg, the warm legs), over its
requests with at least two steps and at least one step after the first carrying a duration:

* ``step_s``: the summed decode time over the summed intervals;
* ``draft_s``, ``verify_s``: each part's estimated time over the summed intervals; a part is
  measured in a group only when every one of its requests carried it (``measured``);
* ``rest_s``: ``step_s`` less the measured parts, what a step spends outside them (sampling, the
  engine's bookkeeping, the hook, and any part not measured). The parts add up to ``step_s`` by
  construction; what the data must satisfy is that the measured parts fit in the step:
  ``rest_s >= -tolerance_s``, ``tolerance_s = TOLERANCE_SHARE * step_s + TOLERANCE_NS``
  (``adds_up``). Where each request's parts fit in each of its intervals, they do.
* ``*_share``: each part over ``step_s``.

Every figure is a ratio of per-request sums, so its 95% interval comes from the fold's bootstrap
(``fold.folding.uncertainty``: legs redrawn, then the requests within each), and the rest and the
shares are taken resample by resample from the same draws. A leg with one request has no
interval (nothing to redraw below the leg).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from fold.folding.accumulate import REQUEST_KEY
from fold.folding.frozen import freeze_fields
from fold.folding.leg_figures import frozen
from fold.folding.request_rows import beside
from fold.folding.uncertainty import DEFAULT_SEED, Replicates, bootstrap, percentile_interval
from fold.inputs.leg_sums import Leg

TOLERANCE_SHARE = 0.001
"""The parts may exceed the step time by this share of it: the step times are the log's
``t_ns`` (``CLOCK_REALTIME``, which NTP may slew by up to 500 ppm) and the parts a monotonic
clock's, so the two clocks' rates may differ by 0.05%; twice that is allowed."""
TOLERANCE_NS = 1_000
"""And by this many nanoseconds per step: the clocks are read at different instants, each to a
resolution of well under a microsecond."""

PARTS = ("draft", "verify")
TIMED_SUMS = ("draft_steps", "draft_ns", "verify_steps", "verify_ns")
"""The partial fold's per-request sums of the durations: the steps that carried each key and
the key's sum."""
SUMS = ("decode_steps", "decode_ns", *TIMED_SUMS, "draft_inside", "verify_inside",
        "draft_in_decode_ns", "verify_in_decode_ns")  # fmt: skip
"""A request's sums the split is built from: the cadence's ``decode_*``, the durations', the
steps after its first that carried each part (``*_inside``), and each part's estimated time
inside the decode window."""
FIGURES = ("step_s", "draft_s", "verify_s", "rest_s", "draft_share", "verify_share", "rest_share")
_NS = 1e9


@dataclass(frozen=True)
class StepSplits:
    """The split of every leg (by arm index; None where no step carried a duration) and of the
    warm legs together (None likewise)."""

    legs: Mapping[int, Mapping[str, Any] | None]
    warm: Mapping[str, Any] | None
    replicates: Mapping[str, Replicates] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        freeze_fields(self, ("legs", "warm", "replicates"))

    def leg_json(self, index: int) -> dict[str, Any] | None:
        """The ``step_split`` block of leg ``index`` (null without durations)."""
        found = self.legs.get(index)
        return None if found is None else _json(found)

    def warm_json(self) -> dict[str, Any] | None:
        """The ``step_split`` block of the warm fold (null without durations)."""
        return None if self.warm is None else _json(self.warm)


def _json(figures: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: list(value) if isinstance(value, tuple) else value for name, value in figures.items()
    }


NO_SPLIT = StepSplits(legs={}, warm=None)
"""The split of a fold whose steps carried no duration (or have no times at all)."""


def from_fold(
    requests: pl.DataFrame,
    cadence_requests: pl.DataFrame,
    leg_indices: Sequence[int],
    warm_legs: Sequence[int],
    resamples: int = 0,
    seed: int = DEFAULT_SEED,
) -> StepSplits:
    """The split of a fold from its partial fold's per-request sums and its cadence's;
    ``NO_SPLIT`` when no request carries a duration."""
    if not all(name in requests.columns for name in TIMED_SUMS):
        return NO_SPLIT
    table = split_requests(requests, cadence_requests)
    if table.height == 0:
        return NO_SPLIT
    return fold_step_split(
        table, leg_indices, warm_legs, resamples, seed, everyone=cadence_requests
    )


def split_requests(requests: pl.DataFrame, cadence_requests: pl.DataFrame) -> pl.DataFrame:
    """One row per request that has at least two steps and a step carrying a duration: KEY and
    ``SUMS``, sorted by KEY.

    ``requests``: the partial fold's per-request duration sums (``PartialFold.durations``,
    ``TIMED_SUMS`` among them) with the first line's ``first_draft_ns`` and
    ``first_verify_ns`` (``PartialFold.requests``); ``cadence_requests``: the cadence's
    (``intervals``, ``decode_ns``)."""
    decode = cadence_requests.select(
        *REQUEST_KEY, pl.col("intervals").alias("decode_steps"), "decode_ns"
    )
    # The first step's parts come before the decode window (its time is the window's start):
    # each part's mean is over the steps after it that carried the part.
    inside = {
        part: pl.col(f"{part}_steps") - pl.col(f"first_{part}_ns").is_not_null().cast(pl.Int64)
        for part in PARTS
    }
    inside_ns = {
        part: pl.col(f"{part}_ns") - pl.col(f"first_{part}_ns").fill_null(0) for part in PARTS
    }
    # Beside, not joined: the durations' rows are most often the cadence's, and a request
    # without a cadence row (null decode_steps) fails the filter below as an inner join would.
    return (
        beside(
            requests.select(*REQUEST_KEY, *TIMED_SUMS, "first_draft_ns", "first_verify_ns"),
            decode,
        )
        .with_columns(pl.col("decode_steps", "decode_ns", *TIMED_SUMS).cast(pl.Int64))
        .with_columns(inside[part].alias(f"{part}_inside") for part in PARTS)
        .filter(
            ((pl.col("draft_inside") > 0) | (pl.col("verify_inside") > 0))
            & (pl.col("decode_steps") > 0)
        )
        .with_columns(
            pl.when(pl.col(f"{part}_inside") > 0)
            # in floats: a sum near 2^63 times the intervals would overflow an integer
            .then(
                inside_ns[part].cast(pl.Float64) * pl.col("decode_steps") / pl.col(f"{part}_inside")
            )
            .otherwise(0.0)
            .alias(f"{part}_in_decode_ns")
            for part in PARTS
        )
        .select(*REQUEST_KEY, *SUMS)
        .sort(REQUEST_KEY)
    )


def group_split(
    sums: Mapping[str, float], requests: int, every: Mapping[str, bool]
) -> dict[str, Any] | None:
    """A group's figures from its requests' summed ``SUMS`` (None without a request), ``every``
    telling for each part whether every request carried it; ``fold_step_split`` adds the
    intervals."""
    if requests == 0:
        return None
    intervals = sums["decode_steps"]
    step_ns = sums["decode_ns"] / intervals
    means = {
        part: sums[f"{part}_in_decode_ns"] / intervals if every[part] else None for part in PARTS
    }
    rest_ns = step_ns - sum(mean for mean in means.values() if mean is not None)
    tolerance_ns = TOLERANCE_SHARE * step_ns + TOLERANCE_NS
    figures: dict[str, Any] = {
        "requests": requests,
        "intervals": int(intervals),
        "draft_steps": int(sums["draft_steps"]),
        "verify_steps": int(sums["verify_steps"]),
        "timed_steps": int(max(sums["draft_steps"], sums["verify_steps"])),
        "measured": [part for part in PARTS if every[part]],
        "step_s": step_ns / _NS,
        "draft_s": None if means["draft"] is None else means["draft"] / _NS,
        "verify_s": None if means["verify"] is None else means["verify"] / _NS,
        "rest_s": rest_ns / _NS,
    }
    for part, value in (*means.items(), ("rest", rest_ns)):
        figures[f"{part}_share"] = None if value is None or step_ns <= 0 else value / step_ns
    figures["tolerance_s"] = tolerance_ns / _NS
    figures["adds_up"] = rest_ns >= -tolerance_ns
    figures["parts_by_share"] = by_share(
        {part: figures[f"{part}_share"] for part in (*PARTS, "rest")}
    )
    return figures


def by_share(shares: Mapping[str, float | None]) -> list[str]:
    """The parts with a share, the largest first (ties keep the order given): the order the
    presenters show them in."""
    shown = {part: share for part, share in shares.items() if share is not None}
    return sorted(shown, key=lambda part: -shown[part])


def fold_step_split(
    requests: pl.DataFrame,
    leg_indices: Sequence[int],
    warm_legs: Sequence[int],
    resamples: int = 0,
    seed: int = DEFAULT_SEED,
    everyone: pl.DataFrame | None = None,
) -> StepSplits:
    """The split of each leg in ``leg_indices`` (the arm's order) and of the warm legs, from
    ``split_requests``'s table; ``resamples`` above 0 adds the 95% intervals (``<figure>_ci``).

    ``everyone``: the cadence's per-request table (``leg``, ``intervals``, ``decode_ns``), every
    request whether it carried a duration or not (None: the split's own requests). A group's
    split is over its timed requests only; what it leaves out is named (``untimed_legs``,
    ``untimed_requests``) and the cadence's step over all of them kept beside
    (``cadence_step_s``), so the two steps are never taken for one another.

    The warm legs are drawn first, as the fold draws them, so with the fold's seed its warm
    resamples are the very legs and requests the fold's warm intervals drew."""
    by_leg = {key[0]: frame for key, frame in requests.partition_by("leg", as_dict=True).items()}
    empty = requests.clear()
    frames = [by_leg.get(index, empty) for index in leg_indices]
    position = {index: i for i, index in enumerate(leg_indices)}
    warm_positions = [position[index] for index in warm_legs if index in position]
    found: dict[str, Replicates] = {}
    if resamples and requests.height:
        selections = {"warm": warm_positions}
        selections.update({f"leg {index}": [position[index]] for index in leg_indices})
        legs = [Leg(requests={name: frame[name].to_numpy() for name in SUMS}) for frame in frames]
        found = bootstrap(legs, selections, resamples, seed)

    cadence = _cadence_sums(requests if everyone is None else everyone)

    def split(
        chosen: list[pl.DataFrame], name: str, indices: Sequence[int]
    ) -> Mapping[str, Any] | None:
        count = sum(frame.height for frame in chosen)
        # Counts and nanoseconds summed exactly; the parts' estimates (floats) correctly rounded
        # (fsum), so no figure depends on the order or grouping of the requests.
        sums: dict[str, float] = {
            column: sum(int(frame[column].sum()) for frame in chosen)
            for column in SUMS
            if not column.endswith("_in_decode_ns")
        }
        for part in PARTS:
            column = f"{part}_in_decode_ns"
            sums[column] = math.fsum(value for frame in chosen for value in frame[column])
        every = {
            part: all(bool((frame[f"{part}_inside"] > 0).all()) for frame in chosen)
            for part in PARTS
        }
        figures = group_split(sums, count, every)
        if figures is None:
            return None
        everyone_count, everyone_intervals, everyone_ns = (
            sum(cadence.get(index, (0, 0, 0))[i] for index in indices) for i in range(3)
        )
        figures["untimed_requests"] = max(everyone_count - count, 0)
        figures["untimed_legs"] = [
            index
            for index, frame in zip(indices, chosen, strict=True)
            if frame.height == 0 and cadence.get(index, (0, 0, 0))[0] > 0
        ]
        figures["cadence_step_s"] = (
            figures["step_s"] if everyone_count == count else everyone_ns / everyone_intervals / _NS
        )
        figures.update(_intervals(found.get(name), figures["measured"]))
        return frozen({k: tuple(v) if isinstance(v, list) else v for k, v in figures.items()})

    return StepSplits(
        legs={
            index: split([frame], f"leg {index}", [index])
            for index, frame in zip(leg_indices, frames, strict=True)
        },
        warm=split(
            [frames[p] for p in warm_positions],
            "warm",
            [leg_indices[p] for p in warm_positions],
        ),
        replicates=found,
    )


def _cadence_sums(table: pl.DataFrame) -> dict[int, tuple[int, int, int]]:
    """Per leg: (requests with an interval, their intervals, their decode ns)."""
    column = "decode_steps" if "decode_steps" in table.columns else "intervals"
    found = (
        table.filter(pl.col(column) > 0)
        .group_by("leg")
        .agg(pl.len(), pl.col(column).sum(), pl.col("decode_ns").sum())
    )
    return {
        int(leg): (int(n), int(intervals), int(ns)) for leg, n, intervals, ns in found.iter_rows()
    }


def _intervals(
    replicates: Replicates | None, measured: Sequence[str]
) -> dict[str, list[float] | None]:
    """``<figure>_ci`` for every figure: the step's and the measured parts' from the bootstrap's
    ratios, the rest and the shares from the same resamples."""
    values: dict[str, np.ndarray] = {}
    if replicates is not None:
        for name in ("step_s", *(f"{part}_s" for part in measured)):
            if name in replicates.figures:
                values[name] = replicates.figures[name]
    step = values.get("step_s")
    if step is not None:
        if all(f"{part}_s" in values for part in measured):
            values["rest_s"] = step - sum(values[f"{part}_s"] for part in measured)
        with np.errstate(divide="ignore", invalid="ignore"):
            for part in (*PARTS, "rest"):
                if f"{part}_s" in values:
                    values[f"{part}_share"] = np.where(step > 0, values[f"{part}_s"] / step, np.nan)
    out: dict[str, list[float] | None] = {}
    for name in FIGURES:
        found = None if name not in values else percentile_interval(values[name])
        out[f"{name}_ci"] = None if found is None else [found[0], found[1]]
    return out
