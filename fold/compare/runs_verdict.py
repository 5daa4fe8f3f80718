"""The verdict between two runs of our own engine, in the words of a change: each factor rose
or fell, by how much, with its interval. It is made where the gap's figures are
(``fold.compare.gap.attribute_gap`` with ``of_ours``), once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from fold.compare.gap_intervals import SplitIntervals
from fold.folding.frozen import frozen
from fold.folding.uncertainty import Interval

# what changed between two runs of ours (RunsComparison.changes), a code per part
ROSE, FELL, FASTER, SLOWER, UNCHANGED = "rose", "fell", "faster", "slower", "unchanged"
CHANGES = {
    "acceptance": (ROSE, FELL, UNCHANGED),
    "steps": (FASTER, SLOWER, UNCHANGED),
    "net": (FASTER, SLOWER, UNCHANGED),
}
"""Each part of the verdict and the codes it takes (acceptance and steps are None when the
change cannot be split)."""


class RunsVerdict(NamedTuple):
    """The verdict between two runs of ours: each part's code (``CHANGES``) and the sentence."""

    changes: Mapping[str, str | None]
    text: str


def plain_verdict(
    ratio: float,
    acceptance_factor: float | None,
    speed_factor: float | None,
    intervals: SplitIntervals | None,
    missing: Sequence[str],
    tolerance: float,
) -> RunsVerdict:
    """'acceptance fell 3.1% [2.0, 4.2]; steps are 9.0% faster [7.1, 10.8]; net 5.6% faster
    [3.9, 7.4]': each factor as a change, with its 95% interval when both runs were resampled
    (beyond 2x either way as a multiple: "steps are 3.20x slower").

    A change is "unchanged" when its interval holds 0 (with intervals) or when it is within the
    tolerance (without)."""
    found = intervals if intervals is not None and intervals.from_both_arms else None
    parts = []
    changes: dict[str, str | None] = {"acceptance": None, "steps": None}
    if acceptance_factor is not None and speed_factor is not None:
        changes["acceptance"], text = _change(
            "acceptance",
            acceptance_factor,
            None if found is None else found.acceptance_factor,
            tolerance,
            ("rose", "fell"),
        )
        parts.append(text)
        changes["steps"], text = _change(
            "steps",
            speed_factor,
            None if found is None else found.speed_factor,
            tolerance,
            ("faster",),
        )
        parts.append(text)
    else:
        parts.append("; ".join(missing) + ": the change cannot be split")
    interval = None if found is None else found.ratio
    changes["net"], text = _change("net", ratio, interval, tolerance, ("faster",))
    parts.append(text)
    return RunsVerdict(frozen(changes), "; ".join(parts))


def _change(
    what: str,
    factor: float,
    interval: Interval | None,
    tolerance: float,
    words: tuple[str, ...],
) -> tuple[str, str]:
    """The part's code and its words."""
    change = factor - 1
    magnitude = abs(change)
    if interval is not None:
        low, high = interval[0] - 1, interval[1] - 1
        same = low <= 0 <= high
        bounds = sorted((abs(low), abs(high))) if not same else [low, high]
        shown = (
            f" [{_signed(low)}, {_signed(high)}]"
            if same
            else f" [{bounds[0] * 100:.1f}, {bounds[1] * 100:.1f}]"
        )
    else:
        same = magnitude <= tolerance
        shown = f" (tolerance {tolerance * 100:g}%)" if same else ""
    if same:
        unchanged = {"acceptance": "acceptance unchanged", "steps": "step speed unchanged",
                     "net": "no net change"}[what]  # fmt: skip
        return UNCHANGED, f"{unchanged}: {_signed(change)}{shown}"
    code = CHANGES[what][0 if change > 0 else 1]
    if not 0.5 <= factor <= 2:
        return code, _times(what, factor, interval, words)
    if what == "acceptance":
        return (
            code,
            f"acceptance {words[0] if change > 0 else words[1]} {magnitude * 100:.1f}%{shown}",
        )
    direction = "faster" if change > 0 else "slower"
    if what == "steps":
        return code, f"steps are {magnitude * 100:.1f}% {direction}{shown}"
    return code, f"net {magnitude * 100:.1f}% {direction}{shown}"


def _times(what: str, factor: float, interval: Interval | None, words: tuple[str, ...]) -> str:
    """A change of more than 2x either way as a multiple ("3.2x slower"): as a percentage a
    fall would crowd under 100% and say nothing of its size."""
    up = factor > 1
    times = factor if up else 1 / factor
    shown = ""
    if interval is not None and interval[0] > 0:
        ends = sorted(end if up else 1 / end for end in interval)
        shown = f" [{ends[0]:.2f}, {ends[1]:.2f}]"
    if what == "acceptance":
        return f"acceptance {words[0] if up else words[1]} {times:.2f}x{shown}"
    direction = "faster" if up else "slower"
    if what == "steps":
        return f"steps are {times:.2f}x {direction}{shown}"
    return f"net {times:.2f}x {direction}{shown}"


def _signed(change: float) -> str:
    return f"{change * 100:+.1f}%"
