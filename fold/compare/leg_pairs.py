"""Two runs of ours leg by leg: whether their legs pair, and each pair's differences.

Leg i of one run pairs with leg i of the other when both records allow it: as many legs, the
same run sequence, the same prompt tokens (and ``prompt`` or ``leg`` label where both carry one)
leg by leg, and the same warm legs. A pair's differences are ours less the other's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fold.errors import RefusedError
from fold.folding.leg_figures import Named
from fold.inputs.arm import ArmRecord

PAIR_FIGURES = ("accept_rate", "mean_acceptance_length", "tok_s")
MAX_NAMED = 3


@dataclass(frozen=True)
class Pairing:
    """Whether two runs' legs pair one to one (leg i with leg i), and why not."""

    paired: bool
    reasons: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"paired": self.paired, "reasons": list(self.reasons)}


def pairing(
    ours: ArmRecord,
    other: ArmRecord,
    ours_warm: Sequence[int],
    other_warm: Sequence[int],
    name: str,
) -> Pairing:
    """Leg i of one run pairs with leg i of the other when both records allow it."""
    a, b = ours.legs, other.legs
    if a.height != b.height:
        return Pairing(False, (f"ours has {a.height} legs, {name} {b.height}",))
    reasons = []
    for column, what in (("run", "run"), ("prompt_tokens", "prompt tokens")):
        differ = [i for i, (x, y) in enumerate(zip(a[column], b[column], strict=True)) if x != y]
        if differ:
            reasons.append(
                f"{len(differ)} leg(s) differ in {what}: "
                + ", ".join(
                    f"leg {i} ({a[column][i]} in ours, {b[column][i]} in {name})"
                    for i in differ[:MAX_NAMED]
                )
            )
    for column in ("prompt", "leg"):
        if column in a.columns and column in b.columns:
            differ = [
                i for i, (x, y) in enumerate(zip(a[column], b[column], strict=True))
                if x is not None and y is not None and x != y
            ]  # fmt: skip
            if differ:
                reasons.append(
                    f"{len(differ)} leg(s) carry another '{column}' (first: leg {differ[0]}, "
                    f"{a[column][differ[0]]!r} in ours, {b[column][differ[0]]!r} in {name})"
                )
    if sorted(ours_warm) != sorted(other_warm):
        reasons.append(
            f"the warm predicate picks other legs: {_legs_text(ours_warm)} in ours, "
            f"{_legs_text(other_warm)} in {name}"
        )
    return Pairing(not reasons, tuple(reasons))


def _legs_text(legs: Sequence[int]) -> str:
    shown = ", ".join(map(str, sorted(legs)[:8]))
    return f"legs {shown}{' ...' if len(legs) > 8 else ''} ({len(legs)})"


def require_pairing(found: Pairing, name: str) -> None:
    """Refuse a paired figure of runs whose legs do not pair."""
    if not found.paired:
        raise RefusedError(
            f"--paired: the legs of ours and {name} cannot be paired: "
            + "; ".join(found.reasons)
            + ". Run both with the same prompts, runs and warm predicate, or leave out --paired"
        )


def pair_legs(ours: Sequence[Named], other: Sequence[Named]) -> list[dict[str, Any]]:
    pairs = []
    for a, b in zip(ours, other, strict=True):
        pair: dict[str, Any] = {"index": a["index"], "run": a["run"], "warm": a["warm"]}
        for figure in PAIR_FIGURES:
            x, y = a[figure], b[figure]
            pair[figure] = {
                "ours": x,
                "other": y,
                "difference": None if x is None or y is None else x - y,
            }
        pairs.append(pair)
    return pairs


def pair_summary(pairs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per figure over the warm pairs: the median, smallest and largest difference."""
    summary: dict[str, dict[str, Any]] = {}
    for figure in PAIR_FIGURES:
        values = sorted(
            pair[figure]["difference"] for pair in pairs if pair[figure]["difference"] is not None
        )
        if not values:
            summary[figure] = {"pairs": 0, "median": None, "min": None, "max": None}
            continue
        middle = len(values) // 2
        median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
        summary[figure] = {
            "pairs": len(values),
            "median": median,
            "min": values[0],
            "max": values[-1],
        }
    return summary
