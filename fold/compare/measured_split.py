"""The gap split by measurement, where a run of the oracle at our acceptance was given.

The model (``fold.compare.gap``) splits ``r = T_ours / T_base`` into the ratio of acceptance
lengths and the ratio of verify steps/s, taking the oracle's steps/s as unchanged at our
acceptance. A *matched* run M of the same engine, inside our interval of 1 + A/S
(``fold.compare.matched_arms``), makes the split a measurement:

    r = T_ours / T_base = (T_ours / T_M) x (T_M / T_base)

the speed factor (ours against the oracle at the same acceptance) times the acceptance factor
(what running at our acceptance instead of its own does to the oracle's throughput), exactly.
Each factor's interval comes from the three arms' resamples, drawn as the gap's are (each arm
on its own stream, paired draw by draw; an arm known by totals enters every draw at its value)
over one population of ours: the one the ordinary run's gap pairs. The verdict (its words,
shares of the log-gap and lever) is the measured split's, by the rules of
``fold.compare.verdict``; the modelled split stays beside it with the model's error, measured
speed factor over modelled (drawn pair by pair: ``T_base L_ours / (T_M L_base)``), and the
model test of the matched check.

Every gap says what its split rests on (``fold.compare.gap.SplitBasis``): measured against the
ordinary run (``matched run``, or ``matched run on the command line's word`` when only
``:matched`` says so, as for SGLang's environment variable); measured for the matched run's own
gap, whose whole gap is speed (``run at our acceptance``: with no ordinary run, the measured
speed factor is all there is); or modelled, with why (``no matched run``, ``matched run did not
match`` and by how much, ``matched run not checked``, ``tok/s of another kind``). A measured
factor divides one arm's tok/s by another's; where the matched or the ordinary run's tok/s is
of another kind than ours (one request's generation speed, ``ArmFigures.tok_s_kind``), the
factor, its share and the verdict drawn from it would mix the two, so no measured split is
formed: the gap stays modelled, its r carrying the two kinds' caveat. Nothing here prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from fold.compare.arm_draws import (
    Side,
    basis_code,
    model_error_draws,
    resampled_basis,
    resampled_names,
    tok_draws,
)
from fold.compare.gap import (
    AT_OUR_ACCEPTANCE,
    AT_OUR_ACCEPTANCE_WORD,
    DID_NOT_MATCH,
    MATCHED_RUN,
    MATCHED_RUN_WORD,
    MODELLED_BASIS,
    NO_SHARE_BELOW,
    NOT_CHECKED,
    OTHER_TOK_S,
    UNIT_TEXT,
    GapSplit,
    MeasuredSplit,
    SplitBasis,
    gap_text,
)
from fold.compare.matched_arms import NOT_MATCHED, STATUS_TEXT, MatchedCheck
from fold.compare.verdict import (
    ACCEPTANCE,
    AT_OUR_ACCEPTANCE_SPEED,
    NO_GAP,
    NOT_DISTINGUISHABLE,
    SPEED,
    SPEED_NOT_DISTINGUISHABLE,
    WITHIN_TOLERANCE,
    Words,
    direction,
    judge,
    pct,
    tol_text,
)
from fold.folding.uncertainty import Interval, percentile_interval, ratio
from fold.inputs.populations import POPULATION_TEXT, WARM_LEGS

THREE_ARMS = "three arms"
COMMAND_LINE = "command line"


def split_bases(
    checks: Mapping[str, MatchedCheck | None],
    sides: Mapping[str, Side],
    paired: Mapping[str, Side],
    splits: Mapping[str, GapSplit],
    tolerance: float,
) -> dict[str, SplitBasis]:
    """What each oracle's gap rests on. ``sides`` holds every oracle by name, ``paired`` the
    side of ours each gap pairs, ``splits`` each gap's modelled split. An ordinary run with
    several matched runs is measured through the first given that matched."""
    found: dict[str, SplitBasis] = {}
    for name, check in checks.items():
        if check is None:
            continue
        found[name] = _own(check, sides, paired, tolerance)
        base = check.base
        if base is None:
            continue
        earlier = found.get(base)
        if earlier is not None and (earlier.measured is not None or not check.matched):
            continue  # the first matched run that matched measures the ordinary run
        found[base] = _through(check, sides, paired, splits, tolerance)
    return {name: found.get(name, MODELLED_BASIS) for name in checks}


def _word(check: MatchedCheck) -> str:
    if check.declared != COMMAND_LINE:
        return ""
    return (
        f"; {check.oracle} is matched on the command line's word (its record carries no "
        "synthetic setting), so its measured acceptance is the only evidence it ran at ours"
    )


def _ran_at(check: MatchedCheck) -> str:
    assert check.oracle_length is not None
    return f"its 1 + A/S {check.oracle_length:.3f} inside ours {_ours(check)}"


def _ours(check: MatchedCheck) -> str:
    return _with(check.ours_length, check.ours_length_ci)


def _missed(check: MatchedCheck) -> str | None:
    """Why a matched run measures nothing: it missed our acceptance (by how much), or it
    could not be checked; None when it matched."""
    if check.status == NOT_MATCHED:
        assert check.oracle_length is not None and check.length_difference is not None
        assert check.ours_length is not None
        how = "above" if check.length_difference > 0 else "below"
        outside = (
            f", {check.beyond_interval:.3f} outside it" if check.beyond_interval is not None else ""
        )
        return (
            f"the matched run {check.oracle} did not match: its 1 + A/S "
            f"{check.oracle_length:.3f} is {abs(check.length_difference):.3f} "
            f"({abs(check.length_difference) / check.ours_length:.1%}) {how} our warm "
            f"{_ours(check)}{outside}"
        )
    if not check.matched or check.measured_speed_factor is None:
        return (
            f"the matched run {check.oracle} was not checked ({STATUS_TEXT[check.status]}), so it "
            "measures nothing"
        )
    return None


def _other_kinds(mine: Side, *others: Side) -> SplitBasis | None:
    """No measured split where an arm's tok/s is another kind than ours: every measured factor
    and share would divide one kind by the other."""
    kinds: dict[str, list[str]] = {}
    for side in others:
        kind = side.row.tok_s_kind
        if kind is not None and kind != mine.row.tok_s_kind:
            kinds.setdefault(kind, []).append(f"{side.row.name}'s")
    if not kinds:
        return None
    said = "; ".join(
        f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} {kind}"
        for kind, names in kinds.items()
    )
    return SplitBasis(
        OTHER_TOK_S,
        f"modelled: the tok/s are of two kinds ({said}; ours a leg's completion tokens over its "
        "wall time), so no factor is measured from them and the model stands; give the arms "
        "with their legs (the gate's arm record) to measure the split",
        None,
    )


def _own(
    check: MatchedCheck, sides: Mapping[str, Side], paired: Mapping[str, Side], tolerance: float
) -> SplitBasis:
    """The matched run's own gap: all speed when it ran at our acceptance."""
    missed = _missed(check)
    if missed is not None:
        reason = DID_NOT_MATCH if check.status == NOT_MATCHED else NOT_CHECKED
        return SplitBasis(reason, f"modelled: {missed}; its gap is split as any oracle's", None)
    name = check.oracle
    mine, side = paired[name], sides[name]
    refused = _other_kinds(mine, side)
    if refused is not None:
        return refused
    t_o, t_m = mine.row.output_throughput_tok_s, side.row.output_throughput_tok_s
    assert t_o is not None and t_m
    draws = tok_draws(mine, side)
    r = t_o / t_m
    r_ci = None if draws is None else percentile_interval(ratio(draws[0], draws[1]))
    resampled = resampled_names((mine, side))
    every = r_ci is not None and len(resampled) == 2
    basis = "both arms" if every else resampled_basis(resampled, (mine, side))
    code = basis_code(every, resampled)
    r_text = f"{r:.3f}" if r_ci is None else _with(r, r_ci)
    if r_ci is not None and not every and r_ci[0] <= 1 <= r_ci[1]:
        # the tolerance would claim a speed gap the spread we have does not support
        dominant, kind = NO_GAP, NOT_DISTINGUISHABLE
        verdict = (
            f"measured: {name} ran at our acceptance and the throughput ratio {r_text} is not "
            f"told apart from 1 on the spread of {', '.join(resampled)} ({basis}): no speed gap"
        )
    elif (r_ci is not None and every and r_ci[0] <= 1 <= r_ci[1]) or (
        not every and (abs(r - 1) <= tolerance or abs(math.log(r)) <= NO_SHARE_BELOW)
    ):
        dominant, kind = NO_GAP, NOT_DISTINGUISHABLE if every else WITHIN_TOLERANCE
        verdict = (
            f"measured: {name} ran at our acceptance and the throughput ratio {r_text} is "
            f"within {'its 95% interval' if every else tol_text(tolerance)} of 1: no speed gap"
        )
    else:
        dominant, kind = SPEED, AT_OUR_ACCEPTANCE_SPEED
        verdict = (
            f"measured: {name} ran at our acceptance, so the gap to it is speed: ours is "
            f"{direction(r, 'faster', 'slower')} (ratio {r_text})"
        )
    shared = abs(math.log(r)) > NO_SHARE_BELOW
    measured = MeasuredSplit(
        matched=name,
        base=None,
        population=mine.row.population or WARM_LEGS,
        ratio=r,
        ratio_ci=r_ci,
        speed_factor=r,
        speed_factor_ci=r_ci,
        acceptance_factor=1.0,  # the matched run over itself
        acceptance_factor_ci=None,
        speed_share=1.0 if shared else None,
        acceptance_share=0.0 if shared else None,
        resampled=resampled,
        basis=code,
        basis_text=basis,
        modelled_speed_factor=None,
        modelled_speed_factor_ci=None,
        model_error=None,
        model_error_ci=None,
        model_test=None,
        dominant=dominant,
        verdict_kind=kind,
        verdict=verdict,
    )
    alone = (
        ""
        if check.base is not None
        else "; no ordinary run of the engine is given, so the measured speed factor is all "
        "there is: add it with --vs NAME=PATH to split that gap by measurement"
    )
    text = (
        f"measured: {name} ran at our acceptance ({_ran_at(check)}), so the gap to it is the "
        f"measured speed factor, over our {POPULATION_TEXT[measured.population]}"
        f"{alone}{_word(check)}"
    )
    reason = AT_OUR_ACCEPTANCE_WORD if check.declared == COMMAND_LINE else AT_OUR_ACCEPTANCE
    return SplitBasis(reason, text, measured)


def _through(
    check: MatchedCheck,
    sides: Mapping[str, Side],
    paired: Mapping[str, Side],
    splits: Mapping[str, GapSplit],
    tolerance: float,
) -> SplitBasis:
    """The ordinary run's gap, split through the matched run when it matched."""
    assert check.base is not None
    base, name = check.base, check.oracle
    missed = _missed(check)
    mine, side, ordinary = paired[base], sides[name], sides[base]
    t_o = mine.row.output_throughput_tok_s
    t_m, t_b = side.row.output_throughput_tok_s, ordinary.row.output_throughput_tok_s
    if missed is None and not (t_o and t_m and t_b):
        missed = f"{base} has no tok/s, so the gap to it cannot be measured"
    if missed is not None:
        reason = DID_NOT_MATCH if check.status == NOT_MATCHED else NOT_CHECKED
        return SplitBasis(reason, f"modelled: {missed}; the model stands", None)
    refused = _other_kinds(mine, side, ordinary)
    if refused is not None:
        return refused
    assert t_o and t_m and t_b
    split = splits[base]
    r, msf, maf = t_o / t_b, t_o / t_m, t_m / t_b
    arms = (mine, side, ordinary)
    resampled = resampled_names(arms)
    intervals = errors = None
    draws = tok_draws(mine, side, ordinary)
    if draws is not None:
        d_o, d_m, d_b = draws
        # a ratio of two arms both known by totals has no spread: its draws are one value, a
        # zero-width "interval" that is no measurement of one
        ratio_intervals = [
            percentile_interval(ratio(top, bottom))
            if {top_side.row.name, bottom_side.row.name} & set(resampled)
            else None
            for (top, top_side), (bottom, bottom_side) in (
                ((d_o, mine), (d_b, ordinary)),
                ((d_m, side), (d_b, ordinary)),
                ((d_o, mine), (d_m, side)),
            )
        ]
        intervals = (ratio_intervals[0], ratio_intervals[1], ratio_intervals[2])
        errors = model_error_draws(mine, ordinary, split, d_o, d_m, d_b)
    every = intervals is not None and len(resampled) == 3
    log_r = math.log(r)
    shares = (
        (None, None)
        if abs(log_r) <= NO_SHARE_BELOW
        else (math.log(maf) / log_r + 0.0, math.log(msf) / log_r + 0.0)
    )
    dominant, kind, verdict = judge(
        base, r, maf, msf, tolerance,
        intervals if every and intervals is not None else None,
        gap_text(mine.row.name, base, r), (), _measured_words(name, base), NO_SHARE_BELOW,
    )  # fmt: skip
    if not every and intervals is not None and intervals[2] is not None:
        held = _spread_held(name, base, r, maf, msf, intervals[2], resampled, arms)
        if held is not None:
            dominant, kind, verdict = ACCEPTANCE, SPEED_NOT_DISTINGUISHABLE, held
    modelled = split.speed_factor
    error = None if modelled is None or not modelled else msf / modelled
    error_ci = None if errors is None else percentile_interval(errors)
    if error is not None:
        # T_b L_o / (T_m L_b): our tok/s cancels, so with m and the ordinary run by totals
        # the interval is our 1 + A/S's spread alone, and says so
        alone = (
            f", its interval from our {UNIT_TEXT[split.unit]} alone ({name}, {base} by totals)"
            if error_ci is not None and not {name, base} & set(resampled)
            else ""
        )
        verdict += (
            f"; the model's error {_with(error, error_ci)} (measured speed factor over the "
            f"modelled {modelled:.3f}{alone})"
        )
    r_ci, maf_ci, msf_ci = (None, None, None) if intervals is None else intervals
    measured = MeasuredSplit(
        matched=name,
        base=base,
        population=mine.row.population or WARM_LEGS,
        ratio=r,
        ratio_ci=r_ci,
        speed_factor=msf,
        speed_factor_ci=msf_ci,
        acceptance_factor=maf,
        acceptance_factor_ci=maf_ci,
        speed_share=shares[1],
        acceptance_share=shares[0],
        resampled=resampled,
        basis=basis_code(every, resampled),
        basis_text=THREE_ARMS if every else resampled_basis(resampled, arms),
        modelled_speed_factor=modelled,
        modelled_speed_factor_ci=None if split.intervals is None else split.intervals.speed_factor,
        model_error=error,
        model_error_ci=error_ci,
        model_test=check.status,
        dominant=dominant or NO_GAP,
        verdict_kind=kind,
        verdict=verdict,
    )
    text = (
        f"measured: {name} is {base} run at our acceptance ({_ran_at(check)}), so r = speed "
        f"{msf:.3f} (ours over {name}) x acceptance {maf:.3f} ({name} over {base}), over our "
        f"{POPULATION_TEXT[measured.population]}; intervals from "
        f"{measured.basis_text}{_word(check)}"
    )
    reason = MATCHED_RUN_WORD if check.declared == COMMAND_LINE else MATCHED_RUN
    return SplitBasis(reason, text, measured)


def _spread_held(
    name: str,
    base: str,
    r: float,
    maf: float,
    msf: float,
    msf_ci: Interval,
    resampled: tuple[str, ...],
    arms: tuple[Side, ...],
) -> str | None:
    """When not every arm was resampled the verdict reads the tolerance; a speed factor whose
    interval over the arms that were resampled holds 1 is not told apart from 1, whatever the
    tolerance says, so no share of the gap is claimed for it."""
    if not msf_ci[0] <= 1 <= msf_ci[1]:
        return None
    return (
        f"measured with {name}: {gap_text(arms[0].row.name, base, r)}; measured speed factor "
        f"(ours over {name}) {_with(msf, msf_ci)}: not told apart from {name} on the spread of "
        f"{', '.join(resampled)} ({resampled_basis(resampled, arms)}); {name} at our acceptance "
        f"{direction(maf, 'faster', 'slower')} than {base}: the gap is acceptance"
    )


def _measured_words(matched: str, base: str) -> Words:
    same = "at the same acceptance"
    return Words(
        acceptance=lambda af: (
            f"{matched} at our acceptance {direction(af, 'faster', 'slower')} than {base}"
        ),
        speed=lambda sf: f"ours {direction(sf, 'faster', 'slower')} than {matched} {same}",
        acceptance_equal=lambda af: (
            f"{matched} at our acceptance within {pct(abs(af - 1))} of {base}"
        ),
        speed_equal=lambda sf: f"ours within {pct(abs(sf - 1))} of {matched} {same}",
        acceptance_label=f"measured acceptance factor ({matched} over {base})",
        speed_label=f"measured speed factor (ours over {matched})",
        how=f"measured with {matched}",
        arms=THREE_ARMS,
        reference="1",
    )


def _with(value: float | None, interval: Interval | None) -> str:
    if value is None:
        return "not recorded"
    if interval is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"
