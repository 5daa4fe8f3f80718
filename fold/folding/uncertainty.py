"""How sure a pooled figure is: 95% percentile intervals from a two-stage bootstrap over legs.

A resample draws the arm's legs with replacement (stage 1) and, inside each drawn leg that has
several requests, draws its requests with replacement (stage 2). Figures built from per-request
sums (A/P, 1 + A/S, decode steps/s) see both stages; figures that exist only per leg (tok/s,
completion tokens per step, the leg-window step rate) see stage 1. The cost is one draw per
request per resample over the per-request sums, never over step lines.

Stage-2 draws of one leg are made once and shared by every selection of legs (the warm fold and
the all-legs fold), which halves the cost of folding both (``fold.folding.request_redraws``).
The same legs, resample count and seed give the same replicates, bit for bit.

The contract an arm reader feeds is :class:`fold.inputs.leg_sums.Leg`: per-request sums and per-leg
values, each absent when the input does not record it. Nothing here prints.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fold.errors import InputError
from fold.folding.frozen import freeze_fields
from fold.folding.quantiles import linear_quantiles, row_medians
from fold.folding.request_redraws import (
    Pools,
    occurrence_rank,
    request_columns,
    request_count,
    stage_two_pools,
)
from fold.inputs.defaults import DEFAULT_RESAMPLES, DEFAULT_SEED
from fold.inputs.leg_sums import Leg
from fold.inputs.limits import is_count

LEVEL = 0.95
MAX_RESAMPLES = 100_000
"""The most resamples ``--bootstrap`` takes: past it, memory and time, not the intervals, grow
(10^8 asked for some 24 GB before the process was killed)."""


@dataclass(frozen=True)
class _RequestRatio:
    numerator: str
    denominator: str
    plus: float = 0.0
    scale: float = 1.0  # decode steps per nanosecond, shown per second


@dataclass(frozen=True)
class _LegRatio:
    numerator: str
    denominator: str
    only_where_positive: str  # legs where this value is 0 take no part (as in the pooled fold)


@dataclass(frozen=True)
class _Median:
    pass


FIGURES: dict[str, Any] = {
    "accept_rate": _RequestRatio("accepted", "proposed"),
    "mean_acceptance_length": _RequestRatio("accepted", "steps", plus=1.0),
    "completion_tokens_per_step": _LegRatio("completion_tokens", "steps", "steps"),
    "output_throughput_tok_s": _Median(),
    "step_rate": _LegRatio("steps", "window_secs", "window_secs"),
    "decode_steps_per_s": _RequestRatio("decode_steps", "decode_ns", scale=1e9),
    # The step split's means (fold.folding.step_split), in seconds per step.
    "step_s": _RequestRatio("decode_ns", "decode_steps", scale=1e-9),
    "draft_s": _RequestRatio("draft_in_decode_ns", "decode_steps", scale=1e-9),
    "verify_s": _RequestRatio("verify_in_decode_ns", "decode_steps", scale=1e-9),
}
"""Every figure an interval is drawn for, defined as in the pooled fold (ratios of sums)."""


Interval = tuple[float, float]


@dataclass(frozen=True)
class Replicates:
    """Each figure's value in every resample (NaN where a resample leaves it undefined)."""

    resamples: int
    figures: Mapping[str, np.ndarray]
    sums: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Each column asked for (``bootstrap``'s ``summed``): its sum over the requests drawn in
    every resample, for figures made of the same draws elsewhere (by position, per request)."""

    def __post_init__(self) -> None:
        freeze_fields(self, ("figures", "sums"))

    def interval(self, figure: str) -> Interval | None:
        values = self.figures.get(figure)
        return None if values is None else percentile_interval(values)

    def intervals(self) -> dict[str, Interval | None]:
        return {name: self.interval(name) for name in self.figures}


def check_resamples(resamples: int, seed: int = DEFAULT_SEED) -> int:
    """The resample count, or InputError: 0 means no intervals; the seed must be >= 0."""
    if not is_count(resamples):
        raise InputError(
            f"--bootstrap {resamples!r}: give a number of resamples (0 for no intervals)"
        )
    if resamples > MAX_RESAMPLES:
        raise InputError(
            f"--bootstrap {resamples}: at most {MAX_RESAMPLES:,} resamples; a 95% interval's "
            f"digits settle long before (the default is {DEFAULT_RESAMPLES:,}), and the "
            "draws' memory and time grow with the count"
        )
    if not is_count(seed):
        raise InputError(f"--seed {seed!r}: give a whole number, 0 or more")
    return resamples


def percentile_interval(values: np.ndarray, level: float = LEVEL) -> Interval | None:
    """The central ``level`` percentile interval; None when most resamples are undefined."""
    defined = values[~np.isnan(values)]
    if defined.size == 0 or defined.size * 2 < values.size:
        return None
    tail = (1 - level) / 2
    low, high = linear_quantiles(defined, [tail, 1 - tail])
    return low, high


def bootstrap(
    legs: Sequence[Leg],
    selections: Mapping[str, Sequence[int]],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int | Sequence[int] = DEFAULT_SEED,
    strata: Mapping[str, Sequence[str]] | None = None,
    figures: Mapping[str, Any] | None = None,
    summed: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Replicates]:
    """Replicates of every figure the legs carry, for each named selection of leg positions.

    A figure gets replicates in a selection only when every selected leg records it and there
    are at least two units to resample at its level (two legs for a per-leg figure, two
    requests for a per-request one): one unit says nothing about the spread.

    ``strata`` names selections drawn as the union of other selections' draws, row by row
    (``{"all": ("warm", "cold")}``): each stratum keeps its size in every resample, and its
    draws are the very ones of the stratum's own selection, so the two pair resample by
    resample. Such a selection's positions must be the strata's, in order.

    ``figures`` replaces :data:`FIGURES` (see :func:`ratio_replicates`). ``summed`` names, per
    selection, request columns whose sums in every resample its replicates also carry
    (``Replicates.sums``), drawn with the rest: none with fewer than two requests, where no
    per-request figure gets replicates either.
    """
    if resamples < 1:
        raise ValueError("the bootstrap needs at least one resample")
    strata = dict(strata or {})
    # One stream for stage 1 and one per leg for stage 2, so legs can be drawn on several
    # threads and the draws still depend only on the seed.
    streams = np.random.SeedSequence(seed).spawn(1 + len(legs))
    rng = np.random.default_rng(streams[0])
    picked_legs: dict[str, np.ndarray] = {}
    for name, chosen in selections.items():
        if name in strata:
            continue
        picks = (
            rng.integers(0, len(chosen), size=(resamples, len(chosen)))
            if len(chosen)
            else np.zeros((resamples, 0), dtype=np.int64)
        )
        picked_legs[name] = np.asarray(chosen, dtype=np.int64)[picks] if len(chosen) else picks
    for name, parts in strata.items():
        if list(selections[name]) != [p for part in parts for p in selections[part]]:
            raise ValueError(f"selection {name!r} is not its strata's positions in order")
        picked_legs[name] = np.hstack([picked_legs[part] for part in parts])
    columns = request_columns(legs)
    pools = stage_two_pools(legs, picked_legs, columns, streams[1:])
    return {
        name: _replicates(
            legs,
            list(selections[name]),
            picked_legs[name],
            pools,
            resamples,
            figures or FIGURES,
            (summed or {}).get(name, ()),
        )
        for name in selections
    }


def _replicates(
    legs: Sequence[Leg],
    chosen: list[int],
    picked: np.ndarray,
    pools: Pools,
    resamples: int,
    definitions: Mapping[str, Any],
    summed: Sequence[str] = (),
) -> Replicates:
    figures: dict[str, np.ndarray] = {}
    if not chosen:
        return Replicates(resamples, figures)
    selected = [legs[position] for position in chosen]
    requests = sum(request_count(leg) for leg in selected)
    slots = None
    if picked.size:
        slots = pools.offsets[picked] + occurrence_rank(picked)
    sums: dict[str, np.ndarray] = {}
    if requests >= 2 and slots is not None:
        sums = {column: pools.sums[column][slots].sum(axis=1) for column in summed}
    for name, figure in definitions.items():
        if isinstance(figure, _RequestRatio):
            needed: tuple[str, ...] = (figure.numerator, figure.denominator)
            if requests < 2 or not all(
                column in leg.requests for leg in selected for column in needed
            ):
                continue
            assert slots is not None
            numerator = pools.sums[figure.numerator][slots].sum(axis=1)
            denominator = pools.sums[figure.denominator][slots].sum(axis=1)
            figures[name] = figure.plus + figure.scale * ratio(numerator, denominator)
        elif isinstance(figure, _LegRatio):
            needed = (figure.numerator, figure.denominator, figure.only_where_positive)
            if len(chosen) < 2 or not all(key in leg.values for leg in selected for key in needed):
                continue
            numerator, denominator = (
                np.array(
                    [
                        leg.values.get(key, 0)
                        if leg.values.get(figure.only_where_positive, 0) > 0
                        else 0
                        for leg in legs
                    ],
                    dtype=np.float64,
                )
                for key in (figure.numerator, figure.denominator)
            )
            figures[name] = ratio(numerator[picked].sum(axis=1), denominator[picked].sum(axis=1))
        elif isinstance(figure, _Median):
            if sum(leg.tok_s is not None for leg in selected) < 2:
                continue
            tok_s = np.array([np.nan if leg.tok_s is None else leg.tok_s for leg in legs])
            figures[name] = _median(tok_s[picked])
    return Replicates(resamples, figures, sums)


def ratio_replicates(
    legs: Sequence[Leg],
    ratios: Mapping[str, tuple[str, str] | tuple[str, str, float]],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int | Sequence[int] = DEFAULT_SEED,
) -> Replicates:
    """Replicates of ratios of per-request sums (``{name: (numerator, denominator)}``, columns
    of the legs' ``requests``, or ``(numerator, denominator, plus)`` for ``plus`` + the ratio,
    as 1 + A/S) over all of ``legs``, drawn as every other figure is: the legs, then the
    requests within each. The same legs, resamples and seed draw the same resamples whatever
    the ratios, so figures drawn in separate calls pair resample by resample."""
    definitions = {name: _RequestRatio(*ratio) for name, ratio in ratios.items()}
    found = bootstrap(legs, {"legs": list(range(len(legs)))}, resamples, seed, figures=definitions)
    return found["legs"]


def _median(drawn: np.ndarray) -> np.ndarray:
    """Each resample's median tok/s; legs without a speed take no part (NaN where none has)."""
    if not np.isnan(drawn).any():
        return row_medians(drawn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resample that drew no timed leg
        return np.nanmedian(drawn, axis=1)


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Elementwise numerator / denominator, NaN where the denominator is 0 (undefined)."""
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


# --------------------------------------------------------------------------------------------
# Our arm: the fold's legs
# --------------------------------------------------------------------------------------------

POOLED_FIGURES = (
    "accept_rate",
    "mean_acceptance_length",
    "completion_tokens_per_step",
    "output_throughput_tok_s",
    "step_rate",
)
"""The pooled figures of a fold that carry an interval (``<figure>_ci`` beside each)."""


METHOD = "percentile; legs redrawn with replacement, then the requests within each drawn leg"


def method_note(resamples: int, seed: int) -> dict[str, Any]:
    """How the intervals were drawn, for the JSON (``resamples`` 0: no intervals)."""
    return {"resamples": resamples, "seed": seed, "level": LEVEL, "method": METHOD}


def fold_replicates(
    legs: Sequence[Leg],
    warm: Sequence[bool],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    warm_sums: Sequence[str] = (),
) -> dict[str, Replicates]:
    """Replicates of the warm fold (``"warm"``) and the all-legs fold (``"all"``) of the fold's
    legs, in the arm's order, ``warm[i]`` telling whether leg i is warm. The warm fold's also
    carry the sums of the request columns ``warm_sums`` (``Replicates.sums``): the figures by
    output position and the per-request means are drawn in the very resamples of the pooled
    figures, not in a bootstrap of their own."""
    warm_positions = [position for position, is_warm in enumerate(warm) if is_warm]
    cold_positions = [position for position, is_warm in enumerate(warm) if not is_warm]
    # The all-legs fold keeps the gate's design (so many cold legs, so many warm) in every
    # resample, and reuses the warm draws: a comparison that takes tok/s from the warm fold
    # and acceptance from all legs then pairs them resample by resample.
    found = bootstrap(
        legs,
        {"warm": warm_positions, "cold": cold_positions, "all": warm_positions + cold_positions},
        resamples,
        seed,
        strata={"all": ("warm", "cold")},
        summed={"warm": tuple(warm_sums)} if warm_sums else None,
    )
    found.pop("cold")
    return found


def interval_fields(replicates: Replicates | None) -> dict[str, list[float] | None]:
    """``<figure>_ci: [low, high]`` (or None) for every pooled figure, for the JSON folds."""
    fields: dict[str, list[float] | None] = {}
    for figure in POOLED_FIGURES:
        found = None if replicates is None else replicates.interval(figure)
        fields[f"{figure}_ci"] = None if found is None else [found[0], found[1]]
    return fields


def decode_interval(replicates: Replicates | None) -> list[float] | None:
    """The 95% interval of the cadence's pooled decode steps/s, as ``[low, high]`` or None."""
    found = None if replicates is None else replicates.interval("decode_steps_per_s")
    return None if found is None else [found[0], found[1]]


# --------------------------------------------------------------------------------------------
# Decode steps per second (per-request cadence)
# --------------------------------------------------------------------------------------------


def decode_steps_per_s(
    legs: Sequence[tuple[Sequence[int], Sequence[float]]],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float | None, Interval | None]:
    """Pooled decode steps/s (sum of steps over sum of seconds) and its interval.

    ``legs`` holds, per leg, each request's decode step count and decode seconds.
    """
    steps = sum(sum(leg_steps) for leg_steps, _ in legs)
    seconds = sum(sum(leg_secs) for _, leg_secs in legs)
    point = steps / seconds if seconds > 0 else None
    replicates = bootstrap(
        [
            Leg(
                requests={
                    "decode_steps": list(leg_steps),
                    "decode_ns": [round(secs * 1e9) for secs in leg_secs],
                }
            )
            for leg_steps, leg_secs in legs
        ],
        {"legs": list(range(len(legs)))},
        resamples,
        seed,
    )["legs"]
    return point, replicates.interval("decode_steps_per_s")


def reach(value: float | None, interval: Sequence[float] | None) -> float | None:
    """What ``±`` shows beside a figure: the larger distance from it to either end of its
    interval (0 when it lies outside), so figure ± reach covers the interval; None without
    the figure or the interval. Written beside each shown interval as ``<figure>_reach``."""
    if value is None or interval is None:
        return None
    return max(value - interval[0], interval[1] - value, 0.0)
