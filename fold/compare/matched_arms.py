"""An oracle run at our acceptance: the speed side of the split measured, not modelled.

The split of the gap to an oracle (``fold.compare.gap``) models the oracle at our acceptance:
its verify-step time is taken not to change when it accepts as we do, so the speed factor is
the ratio of verify steps per second, ``sf = (T_ours / L_ours) / (T_base / L_base)`` (T: tok/s,
L: 1 + A/S; ``base`` is the oracle's ordinary run). A *matched* arm is the same engine run at
our acceptance (vLLM's ``rejection_sample_method: "synthetic"``): its tok/s measures the factor
directly, ``sf_measured = T_ours / T_matched``. This module checks, per matched arm:

1. that the run did accept as we did: its measured 1 + A/S inside the 95% interval of our warm
   fold's (within ``--tolerance`` of ours when there is no interval, ``--bootstrap 0`` or one
   leg). The setting is made from our warm fold, so the warm fold is what it is held to, whatever
   population the gap pairs it with. What the setting aims at (one plus the sum of its rates) is
   shown beside: the verdict goes by what the run measured, not by what it was told;
2. the measured speed factor and its interval (ours against the matched arm's legs, as the
   gap's ratio is drawn: ``fold.compare.gap_intervals``) beside the modelled one, the speed
   factor of the split against the ordinary run of the same engine (``matched@BASE``, or the
   only unmatched arm of that engine given); both over one population of ours, the one the
   ordinary run's split pairs (warm legs, or all legs when the oracle's counters cover all of
   its legs), named in the check;
3. the model itself: that the oracle's verify steps/s does not change when its acceptance
   changes. The matched run's steps/s (its tok/s over its *own* measured 1 + A/S) is set
   against the ordinary run's, ``(T_matched / L_matched) / (T_base / L_base)``, drawn from the
   two oracle arms' own resamples (an arm known by totals enters every draw at its value;
   neither resampled: no interval). Ours does not enter: the run's acceptance only needs to be
   inside our interval for the verdict to speak of our acceptance, and any acceptance inside
   it is the run's own, not ours. Where the ratio's 95% interval leaves out 1 (beyond
   ``--tolerance`` without one), the model does not hold for this pair.

A run that did not match is never used to test the model: its tok/s is at another acceptance.
Nothing here prints; ``fold.present.matched_arms`` words it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fold.compare.arm_draws import (
    ACCEPTANCE_BASIS_TEXT,
    LENGTH,
    Side,
    acceptance_match,
    drawn_basis_text,
    measured_factor,
    step_rates,
)
from fold.compare.gap import GapAttribution, GapSplit
from fold.errors import InputError
from fold.folding.uncertainty import Interval, percentile_interval
from fold.inputs.oracles import ArmFigures
from fold.inputs.populations import POPULATION_TEXT, WARM_LEGS

# MatchedCheck.status values, codes (its verdict says it in words; STATUS_TEXT in short)
MODEL_HOLDS = "model_holds"
MODEL_FAILS = "model_does_not_hold"
NO_MODEL = "no_ordinary_run"
NOT_MATCHED = "run_did_not_match"
UNKNOWN = "acceptance_not_recorded"
NO_SPEED = "tok_s_not_recorded"
STATUS_TEXT = {
    MODEL_HOLDS: "model holds",
    MODEL_FAILS: "model does not hold",
    NO_MODEL: "no ordinary run to model from",
    NOT_MATCHED: "run did not match",
    UNKNOWN: "acceptance not recorded",
    NO_SPEED: "tok/s not recorded",
}
STATUSES = (MODEL_HOLDS, MODEL_FAILS, NO_MODEL, NOT_MATCHED, UNKNOWN, NO_SPEED)


@dataclass(frozen=True)
class MatchedCheck:
    oracle: str
    declared: str
    """Why the arm is taken as matched: "record" (its speculative config is synthetic),
    "command line" (``:matched``) or "record and command line"."""
    setting: dict[str, Any] | None
    base: str | None
    ours_length: float | None
    ours_length_ci: Interval | None
    oracle_length: float | None
    configured_length: float | None
    matched: bool | None
    """The run's 1 + A/S inside our warm interval (or tolerance); None when not recorded."""
    match_basis: str
    """What the match goes by, a code: ``our_interval`` or ``tolerance``."""
    length_difference: float | None
    """oracle - ours, in 1 + A/S."""
    beyond_interval: float | None
    """How far outside our interval the run's 1 + A/S is (0 inside); None without one."""
    population: str
    """The population of ours both speed factors are over (warm legs or all legs)."""
    measured_speed_factor: float | None
    measured_speed_factor_ci: Interval | None
    measured_basis: str | None
    modelled_speed_factor: float | None
    modelled_speed_factor_ci: Interval | None
    oracle_steps_per_s: float | None
    base_steps_per_s: float | None
    step_rate_ratio: float | None
    """The matched run's verify steps/s over the ordinary run's: 1 where the model holds."""
    step_rate_ratio_ci: Interval | None
    step_rate_basis: str | None
    model_holds: bool | None
    status: str
    notes: tuple[str, ...]
    kinds: str = ""
    """Which of its ratios divide two kinds of tok/s (``ArmFigures.tok_s_kind``); "": none."""

    @property
    def verdict(self) -> str:
        """One line: did the run match, and does the model hold (the status in words)."""
        return verdict(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "oracle": self.oracle,
            "declared": self.declared,
            "setting": self.setting,
            "base": self.base,
            "acceptance": {
                "ours": _finite(self.ours_length),
                "ours_ci": _pair(self.ours_length_ci),
                "oracle": _finite(self.oracle_length),
                "configured": _finite(self.configured_length),
                "difference": _finite(self.length_difference),
                "beyond_interval": _finite(self.beyond_interval),
                "matched": self.matched,
                "basis": self.match_basis,
                "basis_text": ACCEPTANCE_BASIS_TEXT[self.match_basis],
            },
            "population": self.population,
            "measured_speed_factor": _finite(self.measured_speed_factor),
            "measured_speed_factor_ci": _pair(self.measured_speed_factor_ci),
            "measured_basis": self.measured_basis,
            "measured_basis_text": drawn_basis_text(self.measured_basis, self.oracle, self.base),
            "modelled_speed_factor": _finite(self.modelled_speed_factor),
            "modelled_speed_factor_ci": _pair(self.modelled_speed_factor_ci),
            "steps_per_s": {
                "oracle": _finite(self.oracle_steps_per_s),
                "base": _finite(self.base_steps_per_s),
            },
            "step_rate_ratio": _finite(self.step_rate_ratio),
            "step_rate_ratio_ci": _pair(self.step_rate_ratio_ci),
            "step_rate_basis": self.step_rate_basis,
            "step_rate_basis_text": drawn_basis_text(self.step_rate_basis, self.oracle, self.base),
            "model_holds": self.model_holds,
            "status": self.status,
            "verdict": self.verdict,
            "notes": list(self.notes),
        }


def is_matched(row: ArmFigures) -> bool:
    """Run at a chosen acceptance: its record's config is synthetic, or ``:matched`` said so."""
    return row.matched_as is not None or (row.speculative is not None and row.speculative.synthetic)


def check_matched_arms(
    ours: Side,
    oracles: Sequence[Side],
    paired: Mapping[str, Side],
    gaps: Mapping[str, GapAttribution | GapSplit],
    tolerance: float,
    runs_of_ours: Sequence[str] = (),
) -> dict[str, MatchedCheck | None]:
    """Every oracle's check (None for one not matched). ``ours`` is our warm fold; ``paired``
    holds, per oracle, the side of ours its gap was drawn against (warm or all legs);
    ``runs_of_ours`` names the ``--vs`` arms that are runs of ours (never a base)."""
    by_name = {side.row.name: side for side in oracles}
    found: dict[str, MatchedCheck | None] = {}
    for side in oracles:
        row = side.row
        if not is_matched(row) or row.name in runs_of_ours:
            found[row.name] = None
            continue
        base, notes = _base(row, oracles, runs_of_ours, by_name)
        found[row.name] = _check(ours, side, base, paired, gaps, tolerance, notes)
    return found


def _base(
    row: ArmFigures,
    oracles: Sequence[Side],
    runs_of_ours: Sequence[str],
    by_name: Mapping[str, Side],
) -> tuple[Side | None, list[str]]:
    """The ordinary run the matched arm is measured against, and what was noted choosing it."""
    named = row.matched_as.base if row.matched_as is not None else None
    if named is not None:
        where = f"--vs {row.name}:matched@{named}"
        side = by_name.get(named)
        if side is None or named in runs_of_ours:
            raise InputError(
                f"{where}: no oracle --vs arm is named {named!r}; give the same engine's "
                f"ordinary run as --vs {named}=PATH"
            )
        if is_matched(side.row):
            raise InputError(
                f"{where}: {named} is itself a matched arm; name the run made without a "
                "synthetic setting"
            )
        if side.row.kind != row.kind:
            raise InputError(
                f"{where}: {named} is {side.row.kind} data and {row.name} {row.kind}: the model "
                "is about one engine's step time, so name that engine's ordinary run"
            )
        return side, []
    candidates = [
        side
        for side in oracles
        if side.row.kind == row.kind
        and not is_matched(side.row)
        and side.row.name not in runs_of_ours
    ]
    if len(candidates) == 1:
        return candidates[0], []
    if not candidates:
        return None, [
            f"no ordinary {row.kind} run is given beside it, so the modelled speed factor "
            f"cannot be tested; add that run with --vs NAME=PATH"
        ]
    names = ", ".join(side.row.name for side in candidates)
    return None, [
        f"several ordinary {row.kind} runs are given ({names}); name the one this run was "
        f"matched against with --vs {row.name}:matched@NAME=PATH to test the model"
    ]


def _declared(row: ArmFigures) -> str:
    record = row.speculative is not None and row.speculative.synthetic
    if record and row.matched_as is not None:
        return "record and command line"
    return "record" if record else "command line"


def _check(
    ours: Side,
    side: Side,
    base: Side | None,
    paired: Mapping[str, Side],
    gaps: Mapping[str, GapAttribution | GapSplit],
    tolerance: float,
    notes: list[str],
) -> MatchedCheck:
    row = side.row
    setting = row.speculative if row.speculative is not None and row.speculative.synthetic else None
    if setting is None:
        notes.append(
            f"{row.name}'s record carries no synthetic speculative config: it is taken as "
            "matched on the command line's word, and the acceptance check is the only evidence"
        )
    configured = None if setting is None else setting.expected_mean_acceptance_length
    length_o = ours.row.mean_acceptance_length
    length_m = row.mean_acceptance_length
    interval = None if ours.replicates is None else ours.replicates.interval(LENGTH)
    matched, basis, difference, beyond = acceptance_match(
        length_o, length_m, interval, tolerance, row.mean_acceptance_length_bound or 0.0
    )
    if configured is not None and length_o is not None:
        inside = (
            interval[0] <= configured <= interval[1]
            if interval is not None
            else abs(configured / length_o - 1) <= tolerance
        )
        if not inside:
            notes.append(
                f"the setting aims at 1 + A/S {configured:.3f}, not our warm {length_o:.3f}: "
                "it was not made from this fold; the check goes by what the run measured"
            )
    if (
        configured is not None
        and length_m is not None
        and abs(length_m / configured - 1) > max(tolerance, 1e-9)
    ):
        notes.append(
            f"the run measured 1 + A/S {length_m:.3f} where its setting aims at "
            f"{configured:.3f}: drafts shorter than num_speculative_tokens (a drafter that "
            "proposes fewer tokens) accept fewer than the rates say"
        )
    # one population of ours for both factors: the one the ordinary run's split pairs
    mine = paired[(base or side).row.name]
    measured, measured_draws, measured_basis = measured_factor(mine, side)
    modelled = modelled_ci = holds = None
    rates: tuple[float | None, float | None] = (None, None)
    q = q_ci = q_basis = None
    if base is not None:
        gap = gaps[base.row.name]
        modelled = gap.speed_factor
        modelled_ci = None if gap.intervals is None else gap.intervals.speed_factor
        # a run at another acceptance tests nothing: no ratio is formed
        if matched:
            rates, q, q_ci, q_basis = step_rates(side, base)
    if measured is None:
        status = NO_SPEED
    elif matched is None:
        status = UNKNOWN
    elif not matched:
        status = NOT_MATCHED
    elif base is None:
        status = NO_MODEL
    elif q is None:
        status = NO_MODEL
        notes.append(
            f"{base.row.name} or {row.name} has no tok/s or 1 + A/S, so their steps/s "
            "cannot be set side by side"
        )
    else:
        holds = (q_ci[0] <= 1 <= q_ci[1]) if q_ci is not None else abs(q - 1) <= tolerance
        status = MODEL_HOLDS if holds else MODEL_FAILS
    return MatchedCheck(
        oracle=row.name,
        declared=_declared(row),
        setting=None if setting is None else setting.to_json(),
        base=None if base is None else base.row.name,
        ours_length=length_o,
        ours_length_ci=interval,
        oracle_length=length_m,
        configured_length=configured,
        matched=matched,
        match_basis=basis,
        length_difference=difference,
        beyond_interval=beyond,
        population=mine.row.population or WARM_LEGS,
        measured_speed_factor=measured,
        measured_speed_factor_ci=(
            None if measured_draws is None else percentile_interval(measured_draws)
        ),
        measured_basis=measured_basis,
        modelled_speed_factor=modelled,
        modelled_speed_factor_ci=modelled_ci,
        oracle_steps_per_s=rates[0],
        base_steps_per_s=rates[1],
        step_rate_ratio=q,
        step_rate_ratio_ci=q_ci,
        step_rate_basis=q_basis,
        model_holds=holds,
        status=status,
        notes=tuple(notes),
        kinds=_kinds(mine.row, row, None if base is None else base.row),
    )


def _kinds(ours: ArmFigures, matched: ArmFigures, base: ArmFigures | None) -> str:
    """The check's ratios whose arms' tok/s are two kinds: T_o / T_m, and with an ordinary
    run T_o / T_b (the modelled factor) and T_m / T_b (the steps/s set side by side)."""
    pairs: tuple[tuple[str, ArmFigures, ArmFigures], ...] = (
        ("the measured speed factor", ours, matched),
    )
    if base is not None:
        pairs += (("the modelled one", ours, base), ("the steps/s ratio", matched, base))
    mixed = [what for what, top, bottom in pairs if top.tok_s_kind != bottom.tok_s_kind]
    if not mixed:
        return ""
    said = "; ".join(
        f"{arm.name}'s is {arm.tok_s_kind}" for arm in (matched, base) if arm and arm.tok_s_kind
    )
    verb = "divides" if len(mixed) == 1 else "divide"
    return f"{' and '.join(mixed)} {verb} two kinds of tok/s ({said})"


def verdict(check: MatchedCheck) -> str:
    text = _verdict(check)
    return f"{text}; {check.kinds}" if check.kinds else text


def _verdict(check: MatchedCheck) -> str:
    who = check.oracle
    ours = _with_interval(check.ours_length, check.ours_length_ci)
    if check.status == NO_SPEED:
        return (
            f"{who} is a matched arm but tok/s is not recorded for it or for ours: no "
            "measured speed factor"
        )
    if check.status == UNKNOWN:
        return (
            f"{who} is a matched arm but its 1 + A/S is not recorded: whether it ran at our "
            f"acceptance ({ours}) cannot be told, so the model is not tested"
        )
    assert check.oracle_length is not None and check.length_difference is not None
    measured = _with_interval(check.measured_speed_factor, check.measured_speed_factor_ci)
    if check.status == NOT_MATCHED:
        assert check.ours_length is not None
        how = "above" if check.length_difference > 0 else "below"
        relative = abs(check.length_difference) / check.ours_length
        beyond = (
            f", {check.beyond_interval:.3f} outside it" if check.beyond_interval is not None else ""
        )
        return (
            f"{who}: the run did not match: its 1 + A/S {check.oracle_length:.3f} is "
            f"{abs(check.length_difference):.3f} ({relative:.1%}) {how} our warm {ours}"
            f"{beyond}; its speed factor {measured} is at another acceptance and tests "
            "nothing: run it again with the setting from our fold"
        )
    head = f"{who} ran at our acceptance (1 + A/S {check.oracle_length:.3f}, ours {ours})"
    if check.status == NO_MODEL:
        return f"{head}: speed factor measured {measured}; no ordinary run to model it from"
    modelled = _with_interval(check.modelled_speed_factor, check.modelled_speed_factor_ci)
    both = (
        f"speed factor (our {POPULATION_TEXT[check.population]}) measured {measured}, "
        f"modelled {modelled} from {check.base}"
    )
    assert check.oracle_steps_per_s is not None and check.base_steps_per_s is not None
    ratio_text = _with_interval(check.step_rate_ratio, check.step_rate_ratio_ci)
    steps = (
        f"verify steps/s {check.oracle_steps_per_s:.1f} at its 1 + A/S against "
        f"{check.base}'s {check.base_steps_per_s:.1f} (x{ratio_text})"
    )
    if check.status == MODEL_HOLDS:
        return f"{head}: {both}; {steps}: the model holds for this pair"
    return (
        f"{head}: {both}; {steps}: the model does not hold for this pair: {check.base}'s step "
        "time changes with its acceptance"
    )


def _with_interval(value: float | None, interval: Interval | None) -> str:
    if value is None:
        return "not recorded"
    if interval is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _pair(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [interval[0], interval[1]]
