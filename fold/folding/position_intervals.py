"""95% intervals of the per-position rates, drawn by the fold's bootstrap with legs as units.

A leg's per-position counts exist per leg (its histogram of accepted drafts per step), not
per request, so each leg is one unit: the legs are redrawn, not the requests in them. Each
position's rate is a ratio of sums over the drawn legs, as the pooled fold's is:

- ``per_position``: steps that accepted position i over the steps with a draft (vLLM's
  unconditional unit);
- ``per_position_conditional``: steps that accepted position i over those that accepted
  position i - 1 (position 1: over the steps with a draft).

The all-legs fold keeps the gate's design (so many warm legs, so many cold) in every
resample, as ``fold_replicates`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from fold.folding.uncertainty import Interval, fold_replicates
from fold.inputs import acceptance
from fold.inputs.leg_sums import Leg

KINDS = ("per_position", "per_position_conditional")


def position_intervals(
    histograms: Sequence[Sequence[int]],
    warm: Sequence[bool],
    resamples: int,
    seed: int,
) -> dict[tuple[str, str], list[Interval | None]]:
    """(fold, kind) -> each position's interval (None where it cannot be drawn), for the
    folds ``warm`` and ``all`` of legs given by their histograms (steps by accepted drafts),
    ``warm[i]`` telling whether leg i is warm."""
    counts = [acceptance.accepted_at_position(list(found) or [0]) for found in histograms]
    steps = [sum(found) for found in histograms]
    positions = max((len(found) for found in counts), default=0)
    counts = [found + [0] * (positions - len(found)) for found in counts]
    out: dict[tuple[str, str], list[Interval | None]] = {
        (fold, kind): [] for fold in ("warm", "all") for kind in KINDS
    }
    for position in range(positions):
        before = steps if position == 0 else [found[position - 1] for found in counts]
        for kind, denominator in (("per_position", steps), ("per_position_conditional", before)):
            # The bootstrap's 1 + A/S with A := the steps that accepted this position and
            # S := the denominator: that figure less 1 is the position's rate.
            units = [
                Leg(requests={"accepted": [found[position]], "steps": [below]})
                for found, below in zip(counts, denominator, strict=True)
            ]
            drawn = fold_replicates(units, warm, resamples, seed)
            for fold in ("warm", "all"):
                interval = drawn[fold].interval("mean_acceptance_length")
                out[(fold, kind)].append(
                    None if interval is None else (interval[0] - 1.0, interval[1] - 1.0)
                )
    return out
