"""The verdict on a split of the throughput gap, r = acceptance factor x speed factor.

One set of rules for every split, modelled (``fold.compare.gap``: lengths and verify steps/s)
or measured (``fold.compare.measured_split``: through a run of the oracle at our acceptance);
only the words for the two factors differ (:class:`Words`). ``tol`` is ``--tolerance``.

Without intervals on every arm, tried in this order:

1. ``|r - 1| <= tol``: "no gap beyond tolerance";
2. a factor not had: the gap is stated, not split;
3. ``|af - 1| <= tol``: the gap is execution speed;
4. ``|sf - 1| <= tol``: the gap is acceptance;
5. otherwise the factor with the larger ``|log|`` (the larger share) is named, with both shares.

With every arm resampled, the rules read from the 95% intervals instead: r's interval holds 1:
no gap; only the acceptance factor's holds 1: the gap is speed; only the speed factor's: the
gap is acceptance; otherwise the factor with the larger share is named.

Nothing here prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from fold.folding.uncertainty import Interval

# the dominant lever (GapAttribution.dominant)
ACCEPTANCE = "acceptance"
SPEED = "speed"
NO_GAP = "none"

# what the verdict found (GapAttribution.verdict_kind), codes; the gap's verdict says it in words
WITHIN_TOLERANCE = "within_tolerance"  # |r - 1| within the tolerance: no gap
NOT_DISTINGUISHABLE = "not_distinguishable"  # r's 95% interval holds 1: no gap
ACCEPTANCE_WITHIN_TOLERANCE = "acceptance_within_tolerance"  # the gap is speed
SPEED_WITHIN_TOLERANCE = "speed_within_tolerance"  # the gap is acceptance
ACCEPTANCE_NOT_DISTINGUISHABLE = "acceptance_not_distinguishable"  # the gap is speed
SPEED_NOT_DISTINGUISHABLE = "speed_not_distinguishable"  # the gap is acceptance
LARGER_SHARE = "larger_share"  # both factors past the tolerance: the larger share is named
BOTH_DIFFER = "both_differ"  # both factors' intervals exclude 1: the larger share is named
NEITHER_ALONE = "neither_alone"  # r differs, neither factor's interval alone does
AT_OUR_ACCEPTANCE_SPEED = "speed_at_our_acceptance"  # a run at our acceptance: all speed
CANNOT_SPLIT = "cannot_split"  # a factor is not recorded: the gap is stated, not split
CANNOT_MEASURE = "cannot_measure"  # a tok/s is not recorded: no gap at all
VERDICT_KINDS = (
    WITHIN_TOLERANCE,
    NOT_DISTINGUISHABLE,
    ACCEPTANCE_WITHIN_TOLERANCE,
    SPEED_WITHIN_TOLERANCE,
    ACCEPTANCE_NOT_DISTINGUISHABLE,
    SPEED_NOT_DISTINGUISHABLE,
    LARGER_SHARE,
    BOTH_DIFFER,
    NEITHER_ALONE,
    AT_OUR_ACCEPTANCE_SPEED,
    CANNOT_SPLIT,
    CANNOT_MEASURE,
)
"""Every kind of verdict on a gap, a code each; ``judge`` returns one beside its sentence."""


class Judged(NamedTuple):
    """A verdict: the dominant lever (None: unsplit), what was found (a ``VERDICT_KINDS``
    code) and the sentence that says it."""

    dominant: str | None
    kind: str
    text: str


def pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def tol_text(tolerance: float) -> str:
    return f"tolerance {tolerance * 100:g}%"


def direction(factor: float, more: str, less: str) -> str:
    """A factor as "4.3% faster"; past 2x either way as a multiple ("8.69x faster"), as the
    verdicts on two runs of ours say it: past 100% a percentage reads badly, and a fall crowds
    under 100%."""
    if factor > 2 or 0 < factor < 0.5:
        return f"{max(factor, 1 / factor):.2f}x {more if factor >= 1 else less}"
    return f"{pct(abs(factor - 1))} {more if factor >= 1 else less}"


def contains_one(interval: Interval) -> bool:
    return interval[0] <= 1 <= interval[1]


def with_interval(value: float, interval: Interval) -> str:
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


@dataclass(frozen=True)
class Words:
    """How a split names its factors. ``acceptance(af)`` and ``speed(sf)`` say a factor
    apart from 1 ("acceptance length 3.38x longer"); the ``*_equal`` ones a factor within
    the tolerance ("acceptance within 1.2% of vllm"); ``acceptance_label`` and
    ``speed_label`` name a factor beside its interval; ``how`` says what the split rests on,
    leading the verdict ("measured with m"; empty for the model); ``arms`` which arms'
    resamples the intervals come from."""

    acceptance: Callable[[float], str]
    speed: Callable[[float], str]
    acceptance_equal: Callable[[float], str]
    speed_equal: Callable[[float], str]
    acceptance_label: str = "acceptance factor"
    speed_label: str = "speed factor"
    how: str = ""
    arms: str = "both arms"
    reference: str | None = None
    """What a factor whose interval holds 1 is not told from (None: the oracle)."""


def model_words(who: str) -> Words:
    """The modelled split's words: the acceptance length and the verify steps' speed."""
    return Words(
        acceptance=lambda af: f"acceptance length {direction(af, 'longer', 'shorter')}",
        speed=lambda sf: f"verify steps {direction(sf, 'faster', 'slower')}",
        acceptance_equal=lambda af: f"acceptance within {pct(abs(af - 1))} of {who}",
        speed_equal=lambda sf: f"verify-step speed within {pct(abs(sf - 1))} of {who}",
    )


def judge(
    who: str,
    ratio: float,
    af: float | None,
    sf: float | None,
    tolerance: float,
    intervals: tuple[Interval | None, Interval | None, Interval | None] | None,
    gap_text: str,
    missing: Sequence[str],
    words: Words,
    no_share_below: float,
) -> Judged:
    """The dominant lever, the verdict's kind and its sentence. ``intervals`` (r, af, sf) is
    given only when every arm the split rests on was resampled; r within ``no_share_below`` of
    1 in log has no gap."""
    if intervals is not None and intervals[0] is not None:
        return _from_intervals(who, ratio, af, sf, intervals, gap_text, missing, words)
    lead = f"{words.how}: " if words.how else ""
    if abs(ratio - 1) <= tolerance or abs(math.log(ratio)) <= no_share_below:
        # r within float noise of 1 has no gap to share out, even at a tolerance of 0
        return Judged(
            NO_GAP,
            WITHIN_TOLERANCE,
            (
                f"{lead}throughput within {pct(abs(ratio - 1))} of {who} ({tol_text(tolerance)}): "
                "no gap beyond tolerance"
            ),
        )
    if af is None or sf is None:
        return Judged(
            None, CANNOT_SPLIT, f"{gap_text}; {'; '.join(missing)}: the gap cannot be split"
        )
    if abs(af - 1) <= tolerance:
        return Judged(
            SPEED,
            ACCEPTANCE_WITHIN_TOLERANCE,
            (
                f"{lead}{words.acceptance_equal(af)} ({tol_text(tolerance)}): the gap is "
                "execution speed"
            ),
        )
    if abs(sf - 1) <= tolerance:
        return Judged(
            ACCEPTANCE,
            SPEED_WITHIN_TOLERANCE,
            f"{lead}{words.speed_equal(sf)} ({tol_text(tolerance)}): the gap is acceptance",
        )
    log_r = math.log(ratio)
    share_a, share_s = math.log(af) / log_r, math.log(sf) / log_r
    dominant = ACCEPTANCE if abs(math.log(af)) >= abs(math.log(sf)) else SPEED
    acc_text, spd_text = words.acceptance(af), words.speed(sf)
    if dominant == ACCEPTANCE:
        main, main_share, other, other_share = acc_text, share_a, spd_text, share_s
    else:
        main, main_share, other, other_share = spd_text, share_s, acc_text, share_a
    other_role = "offsets" if other_share < 0 else "explains"
    return Judged(
        dominant,
        LARGER_SHARE,
        (
            f"{lead}{gap_text}, mostly {dominant} ({tol_text(tolerance)}): {main} explains "
            f"{round(main_share * 100)}% of the log-gap; {other} {other_role} "
            f"{round(abs(other_share) * 100)}%"
        ),
    )


def _from_intervals(
    who: str,
    ratio: float,
    af: float | None,
    sf: float | None,
    intervals: tuple[Interval | None, Interval | None, Interval | None],
    gap_text: str,
    missing: Sequence[str],
    words: Words,
) -> Judged:
    """A factor whose 95% interval holds 1 is not distinguishable from the oracle's; the
    tolerance plays no part."""
    r_ci, af_ci, sf_ci = intervals
    assert r_ci is not None
    lead = f"{words.how}: " if words.how else ""
    r_text = f"throughput ratio {with_interval(ratio, r_ci)}"
    if contains_one(r_ci):
        return Judged(
            NO_GAP,
            NOT_DISTINGUISHABLE,
            f"{lead}{r_text}: not distinguishable from {who} (95% intervals, {words.arms})",
        )
    if af is None or sf is None or af_ci is None or sf_ci is None:
        text = f"{gap_text} ({r_text}); {'; '.join(missing)}: the gap cannot be split"
        return Judged(None, CANNOT_SPLIT, text)
    other = who if words.reference is None else words.reference
    acc_text = f"{words.acceptance_label} {with_interval(af, af_ci)}"
    spd_text = f"{words.speed_label} {with_interval(sf, sf_ci)}"
    acceptance_equal, speed_equal = contains_one(af_ci), contains_one(sf_ci)
    if acceptance_equal and not speed_equal:
        return Judged(
            SPEED,
            ACCEPTANCE_NOT_DISTINGUISHABLE,
            f"{lead}{acc_text}: not distinguishable from {other}; {spd_text}: the gap is speed",
        )
    if speed_equal and not acceptance_equal:
        return Judged(
            ACCEPTANCE,
            SPEED_NOT_DISTINGUISHABLE,
            f"{lead}{spd_text}: not distinguishable from {other}; {acc_text}: the gap is "
            "acceptance",
        )
    dominant = ACCEPTANCE if abs(math.log(af)) >= abs(math.log(sf)) else SPEED
    share = math.log(af if dominant == ACCEPTANCE else sf) / math.log(ratio)
    if acceptance_equal and speed_equal:
        return Judged(
            dominant,
            NEITHER_ALONE,
            (
                f"{lead}{gap_text}, but neither {acc_text} nor {spd_text} alone is "
                f"distinguishable from {other}; {dominant} has the larger share "
                f"({round(share * 100)}% of the log-gap)"
            ),
        )
    return Judged(
        dominant,
        BOTH_DIFFER,
        (
            f"{lead}{gap_text}: {acc_text} and {spd_text} both differ from {other}; mostly "
            f"{dominant} ({round(share * 100)}% of the log-gap)"
        ),
    )
