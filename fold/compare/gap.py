"""The throughput gap to an oracle, split into an acceptance factor and a step-speed factor.

With ``r = ours tok/s / oracle tok/s`` and mean acceptance lengths ``L`` (``1 + A/S``):

* acceptance factor ``af = L_ours / L_oracle``;
* speed factor ``sf = r / af``, which is the ratio of verify steps per second
  (``tok/s / L``), so ``af * sf == r`` exactly;
* each factor's share of the log-gap is ``log(factor) / log(r)``; the two shares sum to 1.
  When ``|log r| <= 1e-9`` there is no gap to share and both shares are None. A negative
  share means the factor works against the gap (it is offset by the other one).

Verdict rules, tried in this order (``tol`` is ``--tolerance``, default 2%):

1. tok/s not recorded for either arm: no ratio, nothing attributed;
2. ``|r - 1| <= tol``: "no gap beyond tolerance";
3. mean acceptance length not recorded for either arm: the gap is split in SGLang's unit
   (completion tokens per verify step) when both arms have that, else stated, not split;
4. ``|af - 1| <= tol``: "acceptance within x% of ORACLE: the gap is execution speed";
5. ``|sf - 1| <= tol``: "verify-step speed within x% of ORACLE: the gap is acceptance";
6. otherwise the factor with the larger ``|log|`` (the larger share) is named as the dominant
   one, with both shares.

When both arms were resampled (``fold.compare.gap_intervals``), rules 2 and 4 to 6 read from the 95%
intervals instead of the tolerance, in the unit of the split (the rules: ``fold.compare.verdict``).

These factors are the *model*: the speed factor takes the oracle's verify steps/s as the same
at our acceptance. Where a run of the oracle at our acceptance measured the split
(``fold.compare.measured_split``), the gap's ``basis`` holds the measured one and the verdict
is its; the factors here stay the model's, shown beside it.

Nothing here prints; ``fold.present.comparison`` turns the results into lines.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from fold.compare.gap_intervals import SplitIntervals, intervals_json
from fold.compare.runs_verdict import plain_verdict
from fold.compare.verdict import ACCEPTANCE as ACCEPTANCE  # the dominant levers, named here too
from fold.compare.verdict import CANNOT_MEASURE, Judged, direction, judge, model_words
from fold.compare.verdict import NO_GAP as NO_GAP
from fold.compare.verdict import SPEED as SPEED
from fold.errors import InputError
from fold.folding.uncertainty import Interval
from fold.inputs.defaults import DEFAULT_TOLERANCE
from fold.inputs.limits import is_number
from fold.inputs.oracles import ArmFigures

NO_SHARE_BELOW = 1e-9
"""|log r| at or under which r is taken as exactly 1 for the shares: the log-gap is float noise."""

# GapAttribution.unit values (codes): the length the acceptance factor divides, named as the
# ArmFigures attribute it is; UNIT_TEXT says each in words
MEAN_LENGTH_UNIT = "mean_acceptance_length"
SGLANG_UNIT = "completion_tokens_per_step"
UNIT_TEXT = {
    MEAN_LENGTH_UNIT: "1 + A/S",
    SGLANG_UNIT: "completion tokens per verify step (SGLang's unit)",
}


# GapAttribution.split values: what the verdict's split rests on
MEASURED = "measured"
MODELLED = "modelled"
SPLITS = (MEASURED, MODELLED)

# GapAttribution.split_reason values, codes (``fold.compare.measured_split`` says which holds;
# the gap's split_text says it in words)
MATCHED_RUN = "matched_run"
MATCHED_RUN_WORD = "matched_run_on_the_command_line"
AT_OUR_ACCEPTANCE = "at_our_acceptance"
AT_OUR_ACCEPTANCE_WORD = "at_our_acceptance_on_the_command_line"
NO_MATCHED_RUN = "no_matched_run"
DID_NOT_MATCH = "matched_run_did_not_match"
NOT_CHECKED = "matched_run_not_checked"
OTHER_TOK_S = "other_tok_s"
SPLIT_REASONS = {
    MATCHED_RUN: MEASURED,
    MATCHED_RUN_WORD: MEASURED,
    AT_OUR_ACCEPTANCE: MEASURED,
    AT_OUR_ACCEPTANCE_WORD: MEASURED,
    NO_MATCHED_RUN: MODELLED,
    DID_NOT_MATCH: MODELLED,
    NOT_CHECKED: MODELLED,
    OTHER_TOK_S: MODELLED,
}
"""Every reason, and the split it gives."""
MODEL_TEXT = (
    "modelled: the speed factor takes the oracle's verify steps/s as the same at our "
    "acceptance; no run of it at our acceptance was given to measure it"
)


@dataclass(frozen=True)
class MeasuredSplit:
    """``r = speed_factor x acceptance_factor`` through the matched run ``matched``; for the
    matched run's own gap (``base`` None) the acceptance factor is 1 and r is the speed."""

    matched: str
    base: str | None
    population: str
    ratio: float
    ratio_ci: Interval | None
    speed_factor: float
    speed_factor_ci: Interval | None
    acceptance_factor: float
    acceptance_factor_ci: Interval | None
    speed_share: float | None
    acceptance_share: float | None
    resampled: tuple[str, ...]
    """The arms whose resamples the intervals rest on (the others by totals)."""
    basis: str
    """Which arms the intervals rest on: a code of ``arm_draws.INTERVAL_BASES``."""
    basis_text: str
    """The same in words: "three arms", or which arms were resampled."""
    modelled_speed_factor: float | None
    modelled_speed_factor_ci: Interval | None
    model_error: float | None
    """Measured speed factor over modelled: 1 where the model was right."""
    model_error_ci: Interval | None
    model_test: str | None
    """The matched check's status (``model holds``, ...); None for the matched run's own gap."""
    dominant: str
    verdict_kind: str
    """What the verdict found, a code of ``fold.compare.verdict.VERDICT_KINDS``."""
    verdict: str

    def to_json(self) -> dict[str, Any]:
        return {
            "matched": self.matched,
            "base": self.base,
            "population": self.population,
            "ratio": self.ratio,
            "ratio_ci": _pair(self.ratio_ci),
            "speed_factor": self.speed_factor,
            "speed_factor_ci": _pair(self.speed_factor_ci),
            "acceptance_factor": self.acceptance_factor,
            "acceptance_factor_ci": _pair(self.acceptance_factor_ci),
            "speed_share": self.speed_share,
            "acceptance_share": self.acceptance_share,
            "resampled": list(self.resampled),
            "basis": self.basis,
            "basis_text": self.basis_text,
            "modelled_speed_factor": _finite(self.modelled_speed_factor),
            "modelled_speed_factor_ci": _pair(self.modelled_speed_factor_ci),
            "model_error": _finite(self.model_error),
            "model_error_ci": _pair(self.model_error_ci),
            "model_test": self.model_test,
        }


@dataclass(frozen=True)
class SplitBasis:
    """What a gap's verdict rests on: the split (``measured`` or ``modelled``), why (a
    reason code) and the sentence that says so; ``measured`` holds the measured split."""

    reason: str = NO_MATCHED_RUN
    text: str = MODEL_TEXT
    measured: MeasuredSplit | None = None
    """The measured split, when the split is measured."""

    @property
    def split(self) -> str:
        return SPLIT_REASONS[self.reason]


MODELLED_BASIS = SplitBasis()


@dataclass(frozen=True)
class GapAttribution:
    """``ours`` against one ``oracle``; a factor that cannot be had is None (not recorded).

    ``ratio``, the factors and their shares are always the modelled split (lengths and
    verify steps/s); ``dominant`` and ``verdict`` come from the split ``basis`` names, the
    measured one when a run at our acceptance measured it."""

    ours: str
    oracle: str
    tolerance: float
    ratio: float | None
    acceptance_factor: float | None
    speed_factor: float | None
    acceptance_share: float | None
    speed_share: float | None
    dominant: str | None  # "acceptance", "speed", "none" (within tolerance) or None (unsplit)
    verdict_kind: str  # what the verdict found: a code of fold.compare.verdict.VERDICT_KINDS
    verdict: str
    changes: Mapping[str, str | None] | None = None  # another run of ours: runs_verdict.CHANGES
    missing: tuple[str, ...] = ()  # why a figure above is None
    unit: str = MEAN_LENGTH_UNIT
    intervals: SplitIntervals | None = None  # 95% intervals of r and the factors, if any
    basis: SplitBasis = MODELLED_BASIS

    def to_json(self) -> dict[str, Any]:
        """A plain dict for the ``oracles`` block; None where undefined, never NaN."""
        measured = self.basis.measured
        return {
            "ours": self.ours,
            "oracle": self.oracle,
            "tolerance": self.tolerance,
            "ratio": _finite(self.ratio),
            "acceptance_factor": _finite(self.acceptance_factor),
            "speed_factor": _finite(self.speed_factor),
            "acceptance_share": _finite(self.acceptance_share),
            "speed_share": _finite(self.speed_share),
            "dominant": self.dominant,
            "verdict_kind": self.verdict_kind,
            "verdict": self.verdict,
            "missing": list(self.missing),
            "unit": self.unit,
            "unit_text": UNIT_TEXT[self.unit],
            **intervals_json(self.intervals),
            "split": self.basis.split,
            "split_reason": self.basis.reason,
            "split_text": self.basis.text,
            "measured": None if measured is None else measured.to_json(),
        }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _pair(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [interval[0], interval[1]]


def check_tolerance(tolerance: float, *, where: str = "--tolerance") -> float:
    """The tolerance as a fraction (0.02 = 2%); InputError unless 0 <= tolerance < 1."""
    if not is_number(tolerance):
        raise InputError(f"{where}: {tolerance!r} is not a number; give a fraction such as 0.02")
    if not math.isfinite(tolerance) or not 0 <= tolerance < 1:
        raise InputError(
            f"{where}: {tolerance!r} is outside [0, 1); give a fraction such as 0.02 for 2%"
        )
    return float(tolerance)


def length_unit(ours: ArmFigures, oracle: ArmFigures) -> str:
    """The length the acceptance factor divides: 1 + A/S when both arms have it, else SGLang's
    unit when both have that (tok/s = completion tokens per step x steps/s holds there too)."""
    if ours.mean_acceptance_length is not None and oracle.mean_acceptance_length is not None:
        return MEAN_LENGTH_UNIT
    if ours.completion_tokens_per_step and oracle.completion_tokens_per_step:
        return SGLANG_UNIT
    return MEAN_LENGTH_UNIT


class GapSplit(NamedTuple):
    """The modelled split's figures, before any verdict: r, the factors, their shares, the
    unit, what is missing and the intervals."""

    ratio: float | None
    acceptance_factor: float | None
    speed_factor: float | None
    acceptance_share: float | None
    speed_share: float | None
    unit: str
    missing: tuple[str, ...]
    intervals: SplitIntervals | None


def split_gap(
    ours: ArmFigures, oracle: ArmFigures, intervals: SplitIntervals | None = None
) -> GapSplit:
    """``ours`` tok/s / ``oracle`` tok/s split into acceptance x verify-step speed (the model)."""
    missing: list[str] = []
    for arm in (ours, oracle):
        if arm.output_throughput_tok_s is None:
            missing.append(f"tok/s not recorded for {arm.name}")
    if missing:
        return GapSplit(None, None, None, None, None, MEAN_LENGTH_UNIT, tuple(missing), None)
    assert ours.output_throughput_tok_s is not None and oracle.output_throughput_tok_s is not None
    ratio = ours.output_throughput_tok_s / oracle.output_throughput_tok_s
    for arm in (ours, oracle):
        if arm.mean_acceptance_length is None:
            unit_note = (
                " (only SGLang's own unit is known)"
                if arm.completion_tokens_per_step is not None
                else ""
            )
            missing.append(f"mean acceptance length not recorded for {arm.name}{unit_note}")
    af = sf = share_a = share_s = None
    unit = length_unit(ours, oracle)
    lengths = (ours.mean_acceptance_length, oracle.mean_acceptance_length)
    if unit == SGLANG_UNIT:
        missing = []
        lengths = (ours.completion_tokens_per_step, oracle.completion_tokens_per_step)
    if not missing:
        assert lengths[0] is not None and lengths[1] is not None
        af = lengths[0] / lengths[1]
        sf = ratio / af
        log_r = math.log(ratio)
        # Shares divide by log(r); within rounding noise of r == 1 they would be noise too.
        if abs(log_r) > NO_SHARE_BELOW:
            share_a = math.log(af) / log_r + 0.0  # never -0.0 in the JSON
            share_s = math.log(sf) / log_r + 0.0
    return GapSplit(ratio, af, sf, share_a, share_s, unit, tuple(missing), intervals)


def gap_text(ours: str, oracle: str, ratio: float) -> str:
    """ "ours is 5.71x faster than vllm"."""
    return f"{ours} is {direction(ratio, 'faster', 'slower')} than {oracle}"


def attribute_gap(
    ours: ArmFigures,
    oracle: ArmFigures,
    tolerance: float = DEFAULT_TOLERANCE,
    intervals: SplitIntervals | None = None,
    basis: SplitBasis = MODELLED_BASIS,
    *,
    of_ours: bool = False,
) -> GapAttribution:
    """Split ``ours`` tok/s / ``oracle`` tok/s into acceptance x verify-step speed.

    With ``of_ours`` (the other arm is another run of our engine) the verdict says what changed
    between the runs (``fold.compare.runs_verdict``) instead of who is behind.

    With ``intervals`` resampled on both arms the verdict reads from them
    (``fold.compare.verdict``); otherwise from ``tolerance``. With a measured ``basis`` the
    verdict is the measured split's (``fold.compare.measured_split``), and the factors stay
    the model's.
    """
    tol = check_tolerance(tolerance)
    who = oracle.name
    split = split_gap(ours, oracle, intervals)
    measured = basis.measured
    if split.ratio is None:
        missing = "; ".join(split.missing)
        judged = Judged(None, CANNOT_MEASURE, f"{missing}: the gap to {who} cannot be measured")
    elif measured is not None:
        judged = Judged(measured.dominant, measured.verdict_kind, measured.verdict)
    else:
        both = intervals is not None and intervals.from_both_arms
        judged = judge(
            who,
            split.ratio,
            split.acceptance_factor,
            split.speed_factor,
            tol,
            None
            if not both or intervals is None
            else (intervals.ratio, intervals.acceptance_factor, intervals.speed_factor),
            gap_text(ours.name, who, split.ratio),
            split.missing,
            model_words(who),
            NO_SHARE_BELOW,
        )
    verdict = judged.text
    if measured is None and split.unit != MEAN_LENGTH_UNIT and split.acceptance_factor is not None:
        verdict += f" (split in {UNIT_TEXT[split.unit]})"
    if split.ratio is not None and oracle.tok_s_kind is not None:
        verdict += (
            f"; r compares two kinds of tok/s: {who}'s is {oracle.tok_s_kind}, ours a leg's "
            "completion tokens over its wall time"
        )
    changes = None
    if of_ours and split.ratio is not None:
        changes, verdict = plain_verdict(
            split.ratio,
            split.acceptance_factor,
            split.speed_factor,
            split.intervals,
            split.missing,
            tol,
        )
    return GapAttribution(
        ours=ours.name,
        oracle=who,
        tolerance=tol,
        ratio=split.ratio,
        acceptance_factor=split.acceptance_factor,
        speed_factor=split.speed_factor,
        acceptance_share=split.acceptance_share,
        speed_share=split.speed_share,
        dominant=judged.dominant,
        verdict_kind=judged.kind,
        verdict=verdict,
        changes=changes,
        missing=split.missing,
        unit=split.unit,
        intervals=split.intervals,
        basis=basis,
    )


class StepRateCheck(NamedTuple):
    """Our measured verify-step rate against ``tok/s / mean acceptance length``."""

    expected: float | None  # tok/s / mean acceptance length; None when either is not recorded
    relative_diff: float | None  # measured / expected - 1
    flagged: bool | None  # |relative_diff| > tolerance; None when it cannot be checked


def check_step_rate(
    measured_steps_per_s: float | None,
    tok_s: float | None,
    mean_acceptance_length: float | None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> StepRateCheck:
    """Compare the verify-step rate measured from our steps' timestamps with the derived one.

    A flag means tokens and steps do not account for the wall time alike: prefill, stalls or
    steps without drafts take a share the acceptance x speed split does not see.
    """
    tol = check_tolerance(tolerance)
    if measured_steps_per_s is None or tok_s is None or mean_acceptance_length is None:
        return StepRateCheck(None, None, None)
    for label, value in (
        ("measured verify steps/s", measured_steps_per_s),
        ("tok/s", tok_s),
        ("mean acceptance length", mean_acceptance_length),
    ):
        if not math.isfinite(value) or value < 0:
            raise InputError(f"step-rate check: {label} = {value!r} must be finite and >= 0")
    if tok_s == 0 or mean_acceptance_length == 0:
        return StepRateCheck(None, None, None)
    expected = tok_s / mean_acceptance_length
    diff = measured_steps_per_s / expected - 1
    return StepRateCheck(expected, diff, abs(diff) > tol)


def comparison_block(
    rows: Sequence[ArmFigures],
    gaps: Mapping[str, GapAttribution],
    step_check: StepRateCheck | None = None,
    measured_steps_per_s: float | None = None,
) -> dict[str, Any]:
    """The ``comparison`` block of the JSON document: every row (ours first) and every factor."""
    block: dict[str, Any] = {
        "rows": [row.to_json() for row in rows],
        "gaps": {name: gap.to_json() for name, gap in gaps.items()},
    }
    if step_check is not None:
        block["step_rate_check"] = {
            "measured_steps_per_s": _finite(measured_steps_per_s),
            "expected_steps_per_s": _finite(step_check.expected),
            "relative_diff": _finite(step_check.relative_diff),
            "flagged": step_check.flagged,
        }
    return block
