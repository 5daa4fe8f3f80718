"""The gap as a waterfall: each factor of the throughput ratio a bar standing where the product
of the factors before it left off, then the ratio itself from 1 (the gap chart).

The bars, in order: acceptance; the speed split's parts as factors (``part_factors``: slower
or faster steps, start-up, stalls, tail, and ``rest`` against a run of ours) or, without a
split, the speed factor whole; then the ratio ``r``. A factor bar runs from the running
product ``level`` (1 before the first) to ``level x factor``; the ratio's bar from 1 to ``r``.
An interval is drawn at the bar's top, scaled by the level it stands on (the ratio's by 1).
A bar without a factor (not recorded) keeps its place and is not drawn, and the level passes
it unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fold.folding.frozen import freeze_fields

SPEED_PARTS = ("steps", "before_first_step", "stalls", "tail", "rest")
"""The speed split's parts in the order the waterfall stands them."""


@dataclass(frozen=True)
class Bar:
    part: str
    """A code: ``acceptance``, ``slower_steps`` or ``faster_steps``, ``before_first_step``,
    ``stalls``, ``tail``, ``rest``, ``speed`` (the factor whole) or ``ratio``."""
    factor: float | None
    kind: str | None
    """``total`` (the ratio), ``gain`` (a factor of at least 1) or ``cost`` (below 1); None
    with ``factor``."""
    bottom: float | None
    """The bar's lower end; None with ``factor``."""
    height: float | None
    """Its length up from ``bottom``."""
    top: float | None
    """Its end away from the level it started at: where the whisker is centred."""
    whisker: tuple[float, float] | None
    """The interval as distances below and above ``top``; None without an interval."""

    def __post_init__(self) -> None:
        freeze_fields(self, ("whisker",))

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "factor": self.factor,
            "kind": self.kind,
            "bottom": self.bottom,
            "height": self.height,
            "top": self.top,
            "whisker": None if self.whisker is None else list(self.whisker),
        }


@dataclass(frozen=True)
class Waterfall:
    bars: tuple[Bar, ...]
    axis: tuple[float, float]
    """The lowest and highest of 1, every drawn bar's ends and every whisker's ends, those
    positive and finite: the log axis's span."""

    def __post_init__(self) -> None:
        freeze_fields(self, ("bars", "axis"))

    def to_json(self) -> dict[str, Any]:
        return {"bars": [bar.to_json() for bar in self.bars], "axis": list(self.axis)}


def _factors(
    gap: Mapping[str, Any], speed: Mapping[str, Any] | None
) -> list[tuple[str, float | None, Any]]:
    """(part, factor, interval) for each bar, in order."""
    found: list[tuple[str, float | None, Any]] = [
        ("acceptance", gap.get("acceptance_factor"), gap.get("acceptance_factor_ci"))
    ]
    factors = (speed or {}).get("part_factors")
    if factors:
        for key in SPEED_PARTS:
            if key == "rest" and key not in factors:
                continue  # only against a run of ours with step times (fold.compare.speed)
            factor = factors.get(key)
            part = key
            if key == "steps":
                part = "faster_steps" if factor is not None and factor > 1 else "slower_steps"
            found.append((part, factor, None))
    else:
        found.append(("speed", gap.get("speed_factor"), gap.get("speed_factor_ci")))
    found.append(("ratio", gap.get("ratio"), gap.get("ratio_ci")))
    return found


def waterfall(gap: Mapping[str, Any], speed: Mapping[str, Any] | None) -> Waterfall:
    """The bars of ``gap`` (its JSON form) with its speed split's (None without one)."""
    bars = []
    level = 1.0
    reach = [1.0]
    for part, factor, interval in _factors(gap, speed):
        if factor is None:
            bars.append(Bar(part, None, None, None, None, None, None))
            continue
        total = part == "ratio"
        kind = "total" if total else ("gain" if factor >= 1 else "cost")
        low, high = (1.0, factor) if total else (level, level * factor)
        whisker = None
        if interval:
            scale = 1.0 if total else level
            whisker = (high - scale * interval[0], scale * interval[1] - high)
            reach += [low, high, scale * interval[0], scale * interval[1]]
        else:
            reach += [low, high]
        bottom = min(low, high)
        bars.append(Bar(part, factor, kind, bottom, max(low, high) - bottom, high, whisker))
        if not total:
            level *= factor
    shown = [value for value in reach if value > 0 and math.isfinite(value)]
    return Waterfall(tuple(bars), (min(shown), max(shown)))
