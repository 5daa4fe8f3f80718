"""The speed factor one level deeper: slower steps, or time outside the decode loop.

The speed factor ``sf`` (``fold.compare.gap``) compares verify steps per second of leg time. Our leg
time (request-seconds of the warm legs, ``fold.folding.cadence``) splits into the shares ``f``
before the first step, ``t`` in the tail, ``s`` in stalls, and steady decoding ``1 - f - s - t``.
So:

* over decode windows, ``sf_decode = sf / (1 - f - t)``: our steps per decode-second against
  the oracle's steps per leg-second;
* over steady decoding, ``sf_steady = sf / (1 - f - s - t)``;
* ``log sf = log sf_steady + log(1 - f - s - t)``: the first term is the steps' own speed, the
  second the time spent outside steady decoding, shared among start-up, stalls and tail in
  proportion to their time. Each part's share of ``log sf`` is reported; they sum to 1.

No oracle format records per-step times, so an oracle's steps/s is always over its whole legs:
its own start-up and tail count as its steps' time. ``sf_decode`` therefore compares our decode
loop with the oracle's whole legs, and is an upper bound on the step-for-step factor. The split
says so in ``oracle_lacks``.

Against another run of ours both sides have their steps' times, so the deeper factors are
measured, not bounded: ``sf_decode`` is the ratio of the two runs' decode steps/s (each request's
steps after its first over its decode seconds, pooled: ``fold.folding.cadence``) and ``sf_steady``
that of their steady rates (decode steps/s x ``d / (d - s)``, ``d`` the decode share). Then
``log sf = log sf_steady + log(1 - f - s - t) - log(1 - f' - s' - t') + rest`` (primes: the
other run): each side's time outside steady decoding is shared among its start-up, stalls and
tail as before, a part being ours less the other's (``sides`` keeps both), and ``rest`` is what
is left between the speed factor (from median tok/s and pooled 1 + A/S) and the steps' own
times; it is a part of its own, never folded into another.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fold.compare.gap import DEFAULT_TOLERANCE, GapAttribution
from fold.folding.frozen import freeze_fields
from fold.folding.result import NEEDS_STEP_LOG, FoldResult
from fold.inputs.oracles import OURS_KIND

PARTS = ("steps", "before_first_step", "stalls", "tail")


@dataclass(frozen=True)
class SpeedSplit:
    oracle: str
    leg_factor: float | None
    decode_factor: float | None
    steady_factor: float | None
    shares: Mapping[str, float | None]
    """Of our warm leg time: before_first_step, stalls, tail."""
    parts: Mapping[str, float] | None
    """Shares of log(leg_factor); None when speed is within tolerance or not recorded."""
    oracle_lacks: tuple[str, ...]
    other_shares: Mapping[str, float | None] | None = None
    """The other side's shares, when it is a run of ours with step times; None for an oracle."""
    sides: Mapping[str, Mapping[str, float]] | None = None
    """With ``other_shares``: each side's part of ``parts`` (ours, and the other's with the
    opposite sign), for start-up, stalls and tail; they add up to ``parts``."""

    def __post_init__(self) -> None:
        freeze_fields(self, ("shares", "parts", "other_shares", "sides"))

    def part_factors(self) -> dict[str, float | None] | None:
        """Each part as a factor: the parts are shares of log(leg factor), so a part's factor
        is leg_factor ** share, and the factors multiply back to the leg factor."""
        lf = self.leg_factor
        if self.parts is None or lf is None or not lf > 0:
            return None
        return {
            name: None if share is None else _finite(lf**share)
            for name, share in self.parts.items()
        }

    def parts_by_share(self) -> list[str] | None:
        """The parts' names, the largest share first (ties keep the parts' order): the order
        the presenters word them in; None with ``parts``."""
        parts = self.parts
        if parts is None:
            return None
        return sorted(parts, key=lambda name: -parts[name])

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "oracle": self.oracle,
            "leg_factor": _finite(self.leg_factor),
            "decode_factor": _finite(self.decode_factor),
            "steady_factor": _finite(self.steady_factor),
            "shares": self.shares,
            "parts": self.parts,
            "part_factors": self.part_factors(),
            "parts_by_share": self.parts_by_share(),
            "oracle_lacks": list(self.oracle_lacks),
        }
        if self.other_shares is not None:
            document["other_shares"] = self.other_shares
            document["sides"] = self.sides
        return document


def split_speed(
    gap: GapAttribution,
    cadence: Mapping[str, Any] | None,
    oracle_kind: str,
    tolerance: float = DEFAULT_TOLERANCE,
    other_cadence: Mapping[str, Any] | None = None,
    no_times: str = f"{NEEDS_STEP_LOG} (the steps' times)",
) -> SpeedSplit:
    """Split ``gap``'s speed factor with our warm ``cadence`` (``FoldResult.warm["cadence"]``;
    None when our steps have no times: ``no_times`` says why) and, for another run of ours
    with a step log, with its warm cadence too (``other_cadence``)."""
    ours = _outside_shares(cadence)
    theirs = None if other_cadence is None else _outside_shares(other_cadence)
    who = gap.oracle if oracle_kind == gap.oracle else f"{gap.oracle} ({oracle_kind})"
    lacks = []
    if theirs is None and oracle_kind == OURS_KIND:
        lacks.append(
            f"{gap.oracle} was folded from its counters, without a step log: its time before "
            "the first step, its stalls and its tail are not known, so its steps/s is over "
            "whole legs"
        )
    elif theirs is None:
        lacks.append(
            f"{who} records no per-step times: its time before the first step, its stalls "
            "and its tail are not known, so its steps/s is over whole legs"
        )
    elif None in theirs.values():
        lacks.append(f"{gap.oracle}'s warm legs have no timed steps: its shares are not known")
    if cadence is None:
        lacks.append(
            f"our time before the first step, in stalls and in the tail {no_times}: the speed "
            "factor is over whole legs on our side too"
        )
    sf = gap.speed_factor
    ours_known = _known(ours)
    theirs_known = None if theirs is None else _known(theirs)
    if sf is None or ours_known is None or (theirs is not None and theirs_known is None):
        if sf is None:
            lacks.append(f"no speed factor against {gap.oracle}: {'; '.join(gap.missing)}")
        return SpeedSplit(gap.oracle, sf, None, None, ours, None, tuple(lacks), theirs)
    if theirs_known is None or cadence is None or other_cadence is None:
        return _against_totals(gap, sf, ours_known, tolerance, tuple(lacks))
    return _against_run(
        gap, sf, (cadence, other_cadence), (ours_known, theirs_known), tolerance, tuple(lacks)
    )


def _known(shares: Mapping[str, float | None]) -> dict[str, float] | None:
    """The shares when every one is known, else None."""
    found = {name: share for name, share in shares.items() if share is not None}
    return found if len(found) == len(shares) else None


def _against_totals(
    gap: GapAttribution,
    sf: float,
    ours: dict[str, float],
    tolerance: float,
    lacks: tuple[str, ...],
) -> SpeedSplit:
    decoding = 1 - ours["before_first_step"] - ours["tail"]
    steady = decoding - ours["stalls"]
    decode_factor = sf / decoding if decoding > 0 else None
    steady_factor = sf / steady if steady > 0 else None
    parts = None
    if steady_factor is not None and abs(sf - 1) > tolerance:
        log_sf = math.log(sf)
        parts = {"steps": math.log(steady_factor) / log_sf, **_outside_parts(ours, steady, log_sf)}
    return SpeedSplit(gap.oracle, sf, decode_factor, steady_factor, ours, parts, lacks)


def _against_run(
    gap: GapAttribution,
    sf: float,
    cadences: tuple[Mapping[str, Any], Mapping[str, Any]],
    shares: tuple[dict[str, float], dict[str, float]],
    tolerance: float,
    lacks: tuple[str, ...],
) -> SpeedSplit:
    """Ours against another run of ours: both ``cadences`` and both sides' known ``shares``."""
    ours, theirs = shares
    rates = [_rates(found) for found in cadences]
    decode_factor = _ratio(rates[0][0], rates[1][0])
    steady_factor = _ratio(rates[0][1], rates[1][1])
    parts = sides = None
    steady = [1 - sum(shares.values()) for shares in (ours, theirs)]
    if steady_factor is not None and abs(sf - 1) > tolerance and min(steady) > 0:
        log_sf = math.log(sf)
        mine = _outside_parts(ours, steady[0], log_sf)
        their = {name: -part for name, part in _outside_parts(theirs, steady[1], log_sf).items()}
        parts = {
            "steps": math.log(steady_factor) / log_sf,
            **{name: mine[name] + their[name] for name in ours},
        }
        parts["rest"] = 1 - sum(parts.values()) + 0.0
        sides = {"ours": mine, gap.oracle: their}
    return SpeedSplit(
        gap.oracle, sf, decode_factor, steady_factor, ours, parts, lacks, theirs, sides
    )


def _rates(cadence: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """A run's pooled decode steps/s and its steady rate (stalls taken out of decode time)."""
    rate = cadence.get("decode_steps_per_s")
    decode, stalls = cadence["shares"]["decode"], cadence["shares"]["stalls"]
    if rate is None or decode is None or stalls is None or decode - stalls <= 0:
        return rate, None
    return rate, rate * decode / (decode - stalls)


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or not denominator else numerator / denominator


def _outside_shares(cadence: Mapping[str, Any] | None) -> dict[str, float | None]:
    shares = (cadence or {}).get("shares") or dict.fromkeys(("before_first_step", "stalls", "tail"))
    return {name: shares[name] for name in ("before_first_step", "stalls", "tail")}


def _outside_parts(shares: dict[str, float], steady: float, log_sf: float) -> dict[str, float]:
    """One side's time outside steady decoding as shares of ``log sf``: ``log(steady)`` shared
    among start-up, stalls and tail in proportion to their time."""
    outside = sum(shares.values())
    return {
        name: (math.log(steady) / log_sf * share / outside if outside > 0 else 0.0) + 0.0
        for name, share in shares.items()
    }


def split_speeds(
    result: FoldResult,
    gaps: dict[str, GapAttribution],
    kinds: dict[str, str],
    tolerance: float = DEFAULT_TOLERANCE,
    cadences: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, SpeedSplit]:
    """Every oracle's split (the comparison's ``speed``). ``cadences`` holds the warm cadence
    of each other run of ours."""
    found = cadences or {}
    splits = {
        name: split_speed(
            gap,
            result.warm["cadence"],
            kinds[name],
            tolerance,
            found.get(name),
            no_times=result.no_times(),
        )
        for name, gap in gaps.items()
    }
    return splits


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
