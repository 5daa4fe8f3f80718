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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fold.gap import DEFAULT_TOLERANCE, GapAttribution
from fold.result import NEEDS_STEP_LOG, FoldResult

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

    def to_json(self) -> dict[str, Any]:
        return {
            "oracle": self.oracle,
            "leg_factor": _finite(self.leg_factor),
            "decode_factor": _finite(self.decode_factor),
            "steady_factor": _finite(self.steady_factor),
            "shares": self.shares,
            "parts": self.parts,
            "oracle_lacks": list(self.oracle_lacks),
        }


def split_speed(
    gap: GapAttribution,
    cadence: dict[str, Any] | None,
    oracle_kind: str,
    tolerance: float = DEFAULT_TOLERANCE,
    no_times: str = f"{NEEDS_STEP_LOG} (the steps' times)",
) -> SpeedSplit:
    """Split ``gap``'s speed factor with our warm ``cadence`` (``FoldResult.warm["cadence"]``;
    None when our steps have no times: ``no_times`` says why)."""
    shares = (cadence or {}).get("shares") or dict.fromkeys(("before_first_step", "stalls", "tail"))
    first, stalls, tail = shares["before_first_step"], shares["stalls"], shares["tail"]
    ours = {"before_first_step": first, "stalls": stalls, "tail": tail}
    who = gap.oracle if oracle_kind == gap.oracle else f"{gap.oracle} ({oracle_kind})"
    lacks = [
        f"{who} records no per-step times: its time before the first step, its stalls and "
        "its tail are not known, so its steps/s is over whole legs"
    ]
    if cadence is None:
        lacks.append(
            f"our time before the first step, in stalls and in the tail {no_times}: the speed "
            "factor is over whole legs on our side too"
        )
    sf = gap.speed_factor
    if sf is None or first is None or stalls is None or tail is None:
        if sf is None:
            lacks.append(f"no speed factor against {gap.oracle}: {'; '.join(gap.missing)}")
        return SpeedSplit(gap.oracle, sf, None, None, ours, None, tuple(lacks))
    decoding = 1 - first - tail
    steady = decoding - stalls
    decode_factor = sf / decoding if decoding > 0 else None
    steady_factor = sf / steady if steady > 0 else None
    parts = None
    if steady_factor is not None and abs(sf - 1) > tolerance:
        log_sf = math.log(sf)
        outside = first + stalls + tail
        outside_part = math.log(steady) / log_sf
        parts = {
            "steps": math.log(steady_factor) / log_sf,
            **{
                name: (outside_part * share / outside if outside > 0 else 0.0)
                for name, share in ours.items()
            },
        }
    return SpeedSplit(gap.oracle, sf, decode_factor, steady_factor, ours, parts, tuple(lacks))


def split_speeds(
    result: FoldResult,
    gaps: dict[str, GapAttribution],
    kinds: dict[str, str],
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, SpeedSplit]:
    """Every oracle's split; also adds them to ``result.oracles`` (the JSON) as ``speed``."""
    splits = {
        name: split_speed(
            gap, result.warm["cadence"], kinds[name], tolerance, no_times=result.no_times()
        )
        for name, gap in gaps.items()
    }
    if result.oracles is not None:
        result.oracles["speed"] = {name: split.to_json() for name, split in splits.items()}
    return splits


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
