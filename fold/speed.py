"""The speed factor one level deeper: slower steps, or time outside the decode loop.

The speed factor ``sf`` (``fold.gap``) compares verify steps per second of leg time. Our leg
time (request-seconds of the warm legs, ``fold.cadence``) splits into the shares ``f`` before
the first step, ``t`` in the tail, ``s`` in stalls, and steady decoding ``1 - f - s - t``. So:

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

Against another run of ours both sides have shares (``f'``, ``s'``, ``t'`` for the other), so
both factors are measured on both sides: ``sf_decode = sf (1 - f' - t') / (1 - f - t)`` and
``sf_steady = sf (1 - f' - s' - t') / (1 - f - s - t)``, and
``log sf = log sf_steady + log(1 - f - s - t) - log(1 - f' - s' - t')``: each side's time outside
steady decoding is shared among its start-up, stalls and tail as before, and a part's share is
ours less the other's (``sides`` keeps both). With the other's shares all 0 this is the split
against an oracle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fold.gap import DEFAULT_TOLERANCE, GapAttribution
from fold.result import FoldResult

PARTS = ("steps", "before_first_step", "stalls", "tail")


@dataclass(frozen=True)
class SpeedSplit:
    oracle: str
    leg_factor: float | None
    decode_factor: float | None
    steady_factor: float | None
    shares: dict[str, float | None]
    """Of our warm leg time: before_first_step, stalls, tail."""
    parts: dict[str, float] | None
    """Shares of log(leg_factor); None when speed is within tolerance or not recorded."""
    oracle_lacks: tuple[str, ...]
    other_shares: dict[str, float | None] | None = None
    """The other side's shares, when it is a run of ours with step times; None for an oracle."""
    sides: dict[str, dict[str, float]] | None = None
    """With ``other_shares``: each side's part of ``parts`` (ours, and the other's with the
    opposite sign), for start-up, stalls and tail; they add up to ``parts``."""

    def to_json(self) -> dict[str, Any]:
        document = {
            "oracle": self.oracle,
            "leg_factor": _finite(self.leg_factor),
            "decode_factor": _finite(self.decode_factor),
            "steady_factor": _finite(self.steady_factor),
            "shares": self.shares,
            "parts": self.parts,
            "oracle_lacks": list(self.oracle_lacks),
        }
        if self.other_shares is not None:
            document["other_shares"] = self.other_shares
            document["sides"] = self.sides
        return document


def split_speed(
    gap: GapAttribution,
    cadence: dict[str, Any],
    oracle_kind: str,
    tolerance: float = DEFAULT_TOLERANCE,
    other_cadence: dict[str, Any] | None = None,
) -> SpeedSplit:
    """Split ``gap``'s speed factor with our warm ``cadence`` (``FoldResult.warm["cadence"]``)
    and, for another run of ours, with its warm cadence too (``other_cadence``)."""
    ours = _outside_shares(cadence)
    theirs = None if other_cadence is None else _outside_shares(other_cadence)
    who = gap.oracle if oracle_kind == gap.oracle else f"{gap.oracle} ({oracle_kind})"
    lacks = []
    if theirs is None:
        lacks.append(
            f"{who} records no per-step times: its time before the first step, its stalls "
            "and its tail are not known, so its steps/s is over whole legs"
        )
    elif None in theirs.values():
        lacks.append(f"{gap.oracle}'s warm legs have no timed steps: its shares are not known")
    sf = gap.speed_factor
    known = None not in ours.values() and (theirs is None or None not in theirs.values())
    if sf is None or not known:
        if sf is None:
            lacks.append(f"no speed factor against {gap.oracle}: {'; '.join(gap.missing)}")
        return SpeedSplit(gap.oracle, sf, None, None, ours, None, tuple(lacks), theirs)
    other = theirs or dict.fromkeys(ours, 0.0)
    decoding = 1 - ours["before_first_step"] - ours["tail"]
    other_decoding = 1 - other["before_first_step"] - other["tail"]
    steady = decoding - ours["stalls"]
    other_steady = other_decoding - other["stalls"]
    decode_factor = sf * other_decoding / decoding if decoding > 0 < other_decoding else None
    steady_factor = sf * other_steady / steady if steady > 0 < other_steady else None
    parts = sides = None
    if steady_factor is not None and abs(sf - 1) > tolerance:
        log_sf = math.log(sf)
        mine = _outside_parts(ours, steady, log_sf)
        their = {name: -part for name, part in _outside_parts(other, other_steady, log_sf).items()}
        parts = {
            "steps": math.log(steady_factor) / log_sf,
            **{name: mine[name] + their[name] for name in ours},
        }
        sides = {"ours": mine, gap.oracle: their} if theirs is not None else None
    return SpeedSplit(
        gap.oracle, sf, decode_factor, steady_factor, ours, parts, tuple(lacks), theirs, sides
    )


def _outside_shares(cadence: dict[str, Any]) -> dict[str, float | None]:
    shares = cadence["shares"]
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
    cadences: dict[str, dict[str, Any]] | None = None,
) -> dict[str, SpeedSplit]:
    """Every oracle's split; also adds them to ``result.oracles`` (the JSON) as ``speed``.
    ``cadences`` holds the warm cadence of each other run of ours."""
    found = cadences or {}
    splits = {
        name: split_speed(gap, result.warm["cadence"], kinds[name], tolerance, found.get(name))
        for name, gap in gaps.items()
    }
    if result.oracles is not None:
        result.oracles["speed"] = {name: split.to_json() for name, split in splits.items()}
    return splits


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
