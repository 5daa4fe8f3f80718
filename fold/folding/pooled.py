"""A set of legs' pooled figures, from the legs' own: ratios of their sums, never a mean of
their ratios, whichever source the legs' counts came from."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fold.folding.leg_figures import Named
from fold.folding.warm import throughput_fold
from fold.inputs import acceptance
from fold.inputs.acceptance import Counts


@dataclass
class Histograms:
    """Per leg, its drafted steps counted by drafts accepted and by drafts proposed: the two
    sums of the fold's (leg, proposed, accepted) table."""

    by_accepted: dict[int, dict[int, int]] = field(default_factory=dict)
    by_proposed: dict[int, dict[int, int]] = field(default_factory=dict)

    @classmethod
    def of_rows(cls, rows: Iterable[tuple[int, int, int, int]]) -> Histograms:
        """From (leg, proposed, accepted, count) rows, one per observed pair."""
        by_accepted: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        by_proposed: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        for leg, proposed, accepted, count in rows:
            by_accepted[leg][accepted] += count
            by_proposed[leg][proposed] += count
        return cls(
            by_accepted={leg: dict(counts) for leg, counts in by_accepted.items()},
            by_proposed={leg: dict(counts) for leg, counts in by_proposed.items()},
        )


def pooled(legs: Sequence[Named], histograms: Histograms) -> dict[str, Any]:
    """Ratios of sums over ``legs``: never a mean of the legs' ratios."""
    counts = Counts.total(map(Counts.of, legs))
    steps = counts.steps
    # Only legs with verify steps: a leg without any has no tokens per step to pool, and its
    # completion tokens over the other legs' steps would inflate their ratio.
    completion = sum(leg["completion_tokens"] for leg in legs if leg["steps"])
    # A leg recorded with no duration has no step rate; pool over the legs that have one.
    timed = [leg for leg in legs if leg["window_secs"] > 0]
    timed_steps = sum(leg["steps"] for leg in timed)
    seconds = sum(leg["window_secs"] for leg in timed)
    steps_by_accepted = _pooled_histogram(legs, histograms.by_accepted)
    steps_by_proposed = _pooled_histogram(legs, histograms.by_proposed)
    per_position = (
        None if steps_by_accepted is None else acceptance.per_position(steps_by_accepted, steps)
    )
    return {
        "legs": [leg["index"] for leg in legs],
        "steps": steps,
        "proposed": counts.proposed,
        "accepted": counts.accepted,
        "completion_tokens_per_step": acceptance.completion_tokens_per_step(completion, steps),
        "output_throughput_tok_s": throughput_fold([leg["tok_s"] for leg in legs]),
        "step_rate": timed_steps / seconds if seconds > 0 else None,
        "per_position": per_position,
        "per_position_conditional": (
            None if per_position is None else acceptance.per_position_conditional(per_position)
        ),
        "per_position_of_proposed": (
            None
            if steps_by_accepted is None or steps_by_proposed is None
            else acceptance.per_position_of_proposed(steps_by_accepted, steps_by_proposed)
        ),
        "histogram": steps_by_accepted,
    }


def _pooled_histogram(
    legs: Sequence[Named], histograms: dict[int, dict[int, int]]
) -> list[int] | None:
    """The legs' histograms (by accepted or by proposed) summed; None when a leg has none (its
    counts came without steps)."""
    if any(leg["histogram"] is None for leg in legs):
        return None
    counts: dict[int, int] = defaultdict(int)
    for leg in legs:
        for value, count in histograms.get(leg["index"], {}).items():
            counts[value] += count
    max_proposed = max((len(leg["histogram"]) - 1 for leg in legs), default=0)
    return acceptance.histogram(dict(counts), max_proposed)
