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
intervals instead of the tolerance (:func:`_verdict_from_intervals`), in the unit of the split.

Nothing here prints; ``fold.present.comparison`` turns the results into lines.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from fold.compare.gap_intervals import SplitIntervals
from fold.errors import InputError
from fold.inputs.defaults import DEFAULT_TOLERANCE
from fold.inputs.oracles import ArmFigures

NO_SHARE_BELOW = 1e-9
"""|log r| at or under which r is taken as exactly 1 for the shares: the log-gap is float noise."""

# GapAttribution.dominant values
ACCEPTANCE = "acceptance"
SPEED = "speed"
NO_GAP = "none"

# GapAttribution.unit values: the length the acceptance factor divides
MEAN_LENGTH_UNIT = "1 + A/S"
SGLANG_UNIT = "completion tokens per verify step (SGLang's unit)"


@dataclass(frozen=True)
class GapAttribution:
    """``ours`` against one ``oracle``; a factor that cannot be had is None (not recorded)."""

    ours: str
    oracle: str
    tolerance: float
    ratio: float | None
    acceptance_factor: float | None
    speed_factor: float | None
    acceptance_share: float | None
    speed_share: float | None
    dominant: str | None  # "acceptance", "speed", "none" (within tolerance) or None (unsplit)
    verdict: str
    missing: tuple[str, ...] = ()  # why a figure above is None
    unit: str = MEAN_LENGTH_UNIT
    intervals: SplitIntervals | None = None  # 95% intervals of r and the factors, if any

    def to_json(self) -> dict[str, Any]:
        """A plain dict for the ``oracles`` block; None where undefined, never NaN."""
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
            "verdict": self.verdict,
            "missing": list(self.missing),
            "unit": self.unit,
            **_interval_json(self.intervals),
        }


def _interval_json(intervals: SplitIntervals | None) -> dict[str, Any]:
    found = {
        "ratio_ci": None if intervals is None else intervals.ratio,
        "acceptance_factor_ci": None if intervals is None else intervals.acceptance_factor,
        "speed_factor_ci": None if intervals is None else intervals.speed_factor,
    }
    document: dict[str, Any] = {
        key: None if value is None else [value[0], value[1]] for key, value in found.items()
    }
    document["ci_basis"] = {} if intervals is None else dict(intervals.basis)
    return document


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def check_tolerance(tolerance: float, *, where: str = "--tolerance") -> float:
    """The tolerance as a fraction (0.02 = 2%); InputError unless 0 <= tolerance < 1."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)):
        raise InputError(f"{where}: {tolerance!r} is not a number; give a fraction such as 0.02")
    if not math.isfinite(tolerance) or not 0 <= tolerance < 1:
        raise InputError(
            f"{where}: {tolerance!r} is outside [0, 1); give a fraction such as 0.02 for 2%"
        )
    return float(tolerance)


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _tol_text(tolerance: float) -> str:
    return f"tolerance {tolerance * 100:g}%"


def _direction(factor: float, more: str, less: str) -> str:
    """A factor as "4.3% faster"; past 2x either way as a multiple ("8.69x faster"), as the
    verdicts on two runs of ours say it: past 100% a percentage reads badly, and a fall crowds
    under 100%."""
    if factor > 2 or 0 < factor < 0.5:
        return f"{max(factor, 1 / factor):.2f}x {more if factor >= 1 else less}"
    return f"{_pct(abs(factor - 1))} {more if factor >= 1 else less}"


def length_unit(ours: ArmFigures, oracle: ArmFigures) -> str:
    """The length the acceptance factor divides: 1 + A/S when both arms have it, else SGLang's
    unit when both have that (tok/s = completion tokens per step x steps/s holds there too)."""
    if ours.mean_acceptance_length is not None and oracle.mean_acceptance_length is not None:
        return MEAN_LENGTH_UNIT
    if ours.completion_tokens_per_step and oracle.completion_tokens_per_step:
        return SGLANG_UNIT
    return MEAN_LENGTH_UNIT


LENGTH_FIGURES = {
    MEAN_LENGTH_UNIT: "mean_acceptance_length",
    SGLANG_UNIT: "completion_tokens_per_step",
}
"""The figure (``ArmFigures`` attribute) each unit's acceptance factor divides."""


def attribute_gap(
    ours: ArmFigures,
    oracle: ArmFigures,
    tolerance: float = DEFAULT_TOLERANCE,
    intervals: SplitIntervals | None = None,
) -> GapAttribution:
    """Split ``ours`` tok/s / ``oracle`` tok/s into acceptance x verify-step speed.

    With ``intervals`` resampled on both arms the verdict reads from them (see
    :func:`_verdict_from_intervals`); otherwise from ``tolerance``.
    """
    tol = check_tolerance(tolerance)
    who = oracle.name
    missing: list[str] = []
    for arm in (ours, oracle):
        if arm.output_throughput_tok_s is None:
            missing.append(f"tok/s not recorded for {arm.name}")
    if missing:
        return GapAttribution(
            ours=ours.name,
            oracle=who,
            tolerance=tol,
            ratio=None,
            acceptance_factor=None,
            speed_factor=None,
            acceptance_share=None,
            speed_share=None,
            dominant=None,
            verdict=f"{'; '.join(missing)}: the gap to {who} cannot be measured",
            missing=tuple(missing),
        )
    assert ours.output_throughput_tok_s is not None and oracle.output_throughput_tok_s is not None
    ratio = ours.output_throughput_tok_s / oracle.output_throughput_tok_s
    gap_text = f"{ours.name} is {_direction(ratio, 'faster', 'slower')} than {who}"

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

    dominant: str | None
    if intervals is not None and intervals.from_both_arms and intervals.ratio is not None:
        dominant, verdict = _verdict_from_intervals(
            who, ratio, af, sf, share_a, share_s, intervals, gap_text, missing
        )
    elif abs(ratio - 1) <= tol or abs(math.log(ratio)) <= NO_SHARE_BELOW:
        # r within float noise of 1 has no gap to share out, even at a tolerance of 0
        dominant = NO_GAP
        verdict = (
            f"throughput within {_pct(abs(ratio - 1))} of {who} ({_tol_text(tol)}): "
            "no gap beyond tolerance"
        )
    elif af is None or sf is None:
        dominant = None
        verdict = f"{gap_text}; {'; '.join(missing)}: the gap cannot be split"
    elif abs(af - 1) <= tol:
        dominant = SPEED
        verdict = (
            f"acceptance within {_pct(abs(af - 1))} of {who} ({_tol_text(tol)}): "
            "the gap is execution speed"
        )
    elif abs(sf - 1) <= tol:
        dominant = ACCEPTANCE
        verdict = (
            f"verify-step speed within {_pct(abs(sf - 1))} of {who} ({_tol_text(tol)}): "
            "the gap is acceptance"
        )
    else:
        assert share_a is not None and share_s is not None
        dominant = ACCEPTANCE if abs(math.log(af)) >= abs(math.log(sf)) else SPEED
        acc_text = f"acceptance length {_direction(af, 'longer', 'shorter')}"
        spd_text = f"verify steps {_direction(sf, 'faster', 'slower')}"
        if dominant == ACCEPTANCE:
            main, main_share, other, other_share = acc_text, share_a, spd_text, share_s
        else:
            main, main_share, other, other_share = spd_text, share_s, acc_text, share_a
        other_role = "offsets" if other_share < 0 else "explains"
        verdict = (
            f"{gap_text}, mostly {dominant} ({_tol_text(tol)}): {main} explains "
            f"{round(main_share * 100)}% of the log-gap; {other} {other_role} "
            f"{round(abs(other_share) * 100)}%"
        )
    if unit != MEAN_LENGTH_UNIT and af is not None:
        verdict += f" (split in {unit})"
    return GapAttribution(
        ours=ours.name,
        oracle=who,
        tolerance=tol,
        ratio=ratio,
        acceptance_factor=af,
        speed_factor=sf,
        acceptance_share=share_a,
        speed_share=share_s,
        dominant=dominant,
        verdict=verdict,
        missing=tuple(missing),
        unit=unit,
        intervals=intervals,
    )


def _contains_one(interval: tuple[float, float]) -> bool:
    return interval[0] <= 1 <= interval[1]


def _with_interval(value: float, interval: tuple[float, float]) -> str:
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def _verdict_from_intervals(
    who: str,
    ratio: float,
    af: float | None,
    sf: float | None,
    share_a: float | None,
    share_s: float | None,
    intervals: SplitIntervals,
    gap_text: str,
    missing: list[str],
) -> tuple[str | None, str]:
    """The verdict when both arms have legs: a factor whose 95% interval holds 1 is not
    distinguishable from the oracle's; the tolerance plays no part.

    Rules, in order: r's interval holds 1: no gap; no split: the gap is stated; only the
    acceptance factor's interval holds 1: the gap is speed; only the speed factor's: the gap is
    acceptance; otherwise the factor with the larger share is named.
    """
    assert intervals.ratio is not None
    r_text = f"throughput ratio {_with_interval(ratio, intervals.ratio)}"
    if _contains_one(intervals.ratio):
        return NO_GAP, f"{r_text}: not distinguishable from {who} (95% intervals, both arms)"
    if af is None or sf is None or intervals.acceptance_factor is None:
        return None, f"{gap_text} ({r_text}); {'; '.join(missing)}: the gap cannot be split"
    assert intervals.speed_factor is not None
    acc_text = f"acceptance factor {_with_interval(af, intervals.acceptance_factor)}"
    spd_text = f"speed factor {_with_interval(sf, intervals.speed_factor)}"
    acceptance_equal = _contains_one(intervals.acceptance_factor)
    speed_equal = _contains_one(intervals.speed_factor)
    if acceptance_equal and not speed_equal:
        return SPEED, f"{acc_text}: not distinguishable from {who}; {spd_text}: the gap is speed"
    if speed_equal and not acceptance_equal:
        return (
            ACCEPTANCE,
            f"{spd_text}: not distinguishable from {who}; {acc_text}: the gap is acceptance",
        )
    dominant = ACCEPTANCE if abs(math.log(af)) >= abs(math.log(sf)) else SPEED
    assert share_a is not None and share_s is not None
    share = share_a if dominant == ACCEPTANCE else share_s
    if acceptance_equal and speed_equal:
        return dominant, (
            f"{gap_text}, but neither {acc_text} nor {spd_text} alone is distinguishable from "
            f"{who}; {dominant} has the larger share ({round(share * 100)}% of the log-gap)"
        )
    return dominant, (
        f"{gap_text}: {acc_text} and {spd_text} both differ from {who}; mostly {dominant} "
        f"({round(share * 100)}% of the log-gap)"
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
