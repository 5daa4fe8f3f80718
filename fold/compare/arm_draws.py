"""An arm with its resamples, and the draws the matched check and the measured split take from it.

Both ``fold.compare.matched_arms`` and ``fold.compare.measured_split`` draw ratios of tok/s (and
1 + A/S) from the arms' own resamples, paired draw by draw as the gap's are
(``fold.compare.gap_intervals``); an arm known by totals enters every draw at its value. The
draws live here so that the two read them one way, apart from the checks and words built on them,
with the codes for what a matched check's figures rest on (its acceptance match and its ratios'
intervals) and their words.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fold.compare.gap import GapSplit
from fold.compare.gap_intervals import BOTH_ARMS, OURS_ONLY
from fold.folding.uncertainty import Interval, Replicates, percentile_interval, ratio
from fold.inputs.oracles import ArmFigures

LENGTH = "mean_acceptance_length"
TOK_S = "output_throughput_tok_s"
# What a matched check's figures rest on, codes (the JSON's ``basis``, ``measured_basis`` and
# ``step_rate_basis``); ``basis_text`` and ``*_basis_text`` beside them say it in words. Its
# acceptance check goes by our warm interval, or by --tolerance where we have none:
OUR_INTERVAL = "our_interval"
TOLERANCE = "tolerance"
ACCEPTANCE_BASIS_TEXT = {
    OUR_INTERVAL: "our warm 95% interval",
    TOLERANCE: "--tolerance (no interval of ours)",
}
# a ratio's interval is drawn from both arms' resamples, or from one arm's (the other enters
# every draw at its value): ours, the matched run's or the ordinary run's.
MATCHED_ONLY = "matched_run_only"
ORDINARY_ONLY = "ordinary_run_only"
MEASURED_BASES = (BOTH_ARMS, OURS_ONLY)
STEP_RATE_BASES = (BOTH_ARMS, MATCHED_ONLY, ORDINARY_ONLY)


def drawn_basis_text(basis: str | None, matched: str, ordinary: str | None) -> str | None:
    """A ratio's basis in words: the matched run is ``matched``, the ordinary one ``ordinary``."""
    if basis is None:
        return None
    return {
        BOTH_ARMS: "both arms",
        OURS_ONLY: "ours only",
        MATCHED_ONLY: f"{matched}'s legs only",
        ORDINARY_ONLY: f"{ordinary}'s legs only",
    }[basis]


@dataclass(frozen=True)
class Side:
    """One arm as the checks read it: its row and its resamples (None: known by totals)."""

    row: ArmFigures
    replicates: Replicates | None


def acceptance_match(
    ours: float | None,
    oracle: float | None,
    interval: Interval | None,
    tolerance: float,
    bound: float,
) -> tuple[bool | None, str, float | None, float | None]:
    """Whether the run's 1 + A/S matches ours, the basis, oracle - ours, and how far outside
    our interval it is (an oracle printed rounded matches when its bound reaches in)."""
    basis = OUR_INTERVAL if interval is not None else TOLERANCE
    if ours is None or oracle is None:
        return None, basis, None, None
    difference = oracle - ours
    if interval is None:
        return abs(difference) <= tolerance * ours + bound, basis, difference, None
    beyond = max(interval[0] - oracle, oracle - interval[1], 0.0)
    return beyond <= bound, basis, difference, beyond


def measured_factor(ours: Side, side: Side) -> tuple[float | None, np.ndarray | None, str | None]:
    """T_ours / T_matched, and its resamples with what they rest on (a code)."""
    t_ours, t_matched = ours.row.output_throughput_tok_s, side.row.output_throughput_tok_s
    if t_ours is None or not t_matched:
        return None, None, None
    mine = figure_draws(ours.replicates, TOK_S, None, 0)
    if mine is None:
        return t_ours / t_matched, None, None
    theirs = figure_draws(side.replicates, TOK_S, t_matched, mine.size)
    basis = BOTH_ARMS if _resampled(side.replicates, TOK_S) else OURS_ONLY
    assert theirs is not None
    return t_ours / t_matched, ratio(mine, theirs), basis


def step_rates(
    side: Side, base: Side
) -> tuple[tuple[float | None, float | None], float | None, Interval | None, str | None]:
    """Both oracle runs' verify steps/s (T / L, each over its own 1 + A/S), the matched over
    the ordinary, and that ratio's interval from the two arms' own resamples (a figure known
    by totals enters every draw at its value) with what it rests on (a code)."""
    figures = []
    for arm in (side, base):
        tok, length = arm.row.output_throughput_tok_s, arm.row.mean_acceptance_length
        figures.append((tok, length))
    (t_m, l_m), (t_b, l_b) = figures
    if not (t_m and l_m and t_b and l_b):
        return (None, None), None, None, None
    rate_m, rate_b = t_m / l_m, t_b / l_b
    drawn = [arm for arm in (side, base) if _any_resampled(arm.replicates)]
    if not drawn:
        return (rate_m, rate_b), rate_m / rate_b, None, None
    first = drawn[0].replicates
    # only arms with resamples were drawn, so the first has them
    assert first is not None
    size = next(iter(first.figures.values())).size
    draws = [
        ratio(
            _known_draws(arm.replicates, TOK_S, t, size),
            _known_draws(arm.replicates, LENGTH, length, size),
        )
        for arm, (t, length) in zip((side, base), ((t_m, l_m), (t_b, l_b)), strict=True)
    ]
    alone = MATCHED_ONLY if drawn[0] is side else ORDINARY_ONLY
    basis = BOTH_ARMS if len(drawn) == 2 else alone
    return (
        (rate_m, rate_b),
        rate_m / rate_b,
        percentile_interval(ratio(draws[0], draws[1])),
        basis,
    )


def _any_resampled(replicates: Replicates | None) -> bool:
    return _resampled(replicates, TOK_S) or _resampled(replicates, LENGTH)


def _resampled(replicates: Replicates | None, figure: str) -> bool:
    return replicates is not None and figure in replicates.figures


def _known_draws(replicates: Replicates | None, figure: str, point: float, size: int) -> np.ndarray:
    # the point is known and size > 0 (the caller checked both), so there are draws
    draws = figure_draws(replicates, figure, point, size)
    assert draws is not None
    return draws


def figure_draws(
    replicates: Replicates | None, figure: str, point: float | None, size: int
) -> np.ndarray | None:
    """A figure's resamples, or its point value repeated ``size`` times (known by totals)."""
    if _resampled(replicates, figure):
        assert replicates is not None
        return replicates.figures[figure]
    if point is None or not size:
        return None
    return np.full(size, float(point))


def tok_draws(*sides: Side) -> tuple[np.ndarray, ...] | None:
    """Each side's tok/s resamples, paired draw by draw (totals at their value); None when
    ours, the first, has none."""
    first = figure_draws(sides[0].replicates, TOK_S, None, 0)
    if first is None:
        return None
    found = [first]
    for side in sides[1:]:
        draws = figure_draws(side.replicates, TOK_S, side.row.output_throughput_tok_s, first.size)
        assert draws is not None
        found.append(draws)
    return tuple(found)


def model_error_draws(
    mine: Side,
    ordinary: Side,
    split: GapSplit,
    d_o: np.ndarray,
    d_m: np.ndarray,
    d_b: np.ndarray,
) -> np.ndarray | None:
    """Measured speed factor over modelled in every draw, the modelled one over the same
    draws of ours and the ordinary run (lengths in the unit the gap's split is in)."""
    figure = split.unit  # the unit's code is the figure's name
    l_o = figure_draws(mine.replicates, figure, getattr(mine.row, figure), d_o.size)
    l_b = figure_draws(ordinary.replicates, figure, getattr(ordinary.row, figure), d_o.size)
    if l_o is None or l_b is None:
        return None
    modelled = ratio(ratio(d_o, d_b), ratio(l_o, l_b))
    return ratio(ratio(d_o, d_m), modelled)


def resampled_names(sides: tuple[Side, ...]) -> tuple[str, ...]:
    return tuple(
        side.row.name
        for side in sides
        if side.replicates is not None and TOK_S in side.replicates.figures
    )


EVERY_ARM, SOME_ARMS, NO_ARM = "every_arm", "some_arms", "no_arm"
INTERVAL_BASES = (EVERY_ARM, SOME_ARMS, NO_ARM)
"""What a measured split's intervals rest on: every arm resampled, some (the others by their
totals), or none."""


def basis_code(every: bool, resampled: tuple[str, ...]) -> str:
    """``INTERVAL_BASES``' code for intervals that resample ``resampled`` (``every``: all)."""
    if every:
        return EVERY_ARM
    return SOME_ARMS if resampled else NO_ARM


def resampled_basis(resampled: tuple[str, ...], sides: tuple[Side, ...]) -> str:
    if not resampled:
        return "no arm resampled"
    totals = [side.row.name for side in sides if side.row.name not in resampled]
    return f"{', '.join(resampled)} resampled; {', '.join(totals)} by totals"
