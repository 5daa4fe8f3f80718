"""Another k from the recorded run: the figures had every draft been cut at k' tokens.

From a fold's own sums: the drafted steps counted by (leg, proposed, accepted), which every
fold keeps (``PartialFold.histogram``), and, where the log holds steps of several draft
lengths, the step time per draft length (``fold.folding.step_lengths``). A step that proposed
P and accepted A is counted, cut at k', as proposing min(P, k') and accepting min(A, k').

The assumption, said wherever the figures are shown (``ASSUMPTION``): a chain drafter whose
first k' tokens are the ones it drafted, so the target accepts the same prefix of them; and the
steps that follow alike (the same contexts, the same acceptance), which a shorter draft does not
guarantee: it takes more steps for the same output, and those steps see other contexts.

The model of steps and time (``STEP_MODEL``): the drafted steps emitted S + A tokens; at k'
the same output needs (S + A) / (1 + A'/S) steps; a step cut to length p takes the log's mean
step time at proposed = p; the modelled decode rate is tokens per step over the mean modelled
step time, and the modelled tok/s scales the warm fold's measured tok/s by that rate's ratio
to the recorded mix's. Intervals: the project's bootstrap (``fold.folding.uncertainty``) over
the legs; each leg is one unit, since the cut figures are summed per leg.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fold.folding.accumulate import PartialFold
from fold.folding.step_lengths import StepTimes
from fold.folding.uncertainty import DEFAULT_SEED, ratio_replicates, reach
from fold.inputs import acceptance
from fold.inputs.acceptance import TRIPLE, Counts
from fold.inputs.leg_sums import Leg

ASSUMPTION = (
    "every draft cut at k' tokens (accepted = min(A, k'), proposed = min(P, k')), a chain "
    "drafter whose first k' tokens would be the same, and the steps that follow alike (the "
    "same requests then take more steps for the same output)"
)
STEP_MODEL = (
    "steps needed = output tokens of the drafted steps (S + A) / tokens per step at k'; a step "
    "cut to p tokens takes the log's mean step time at proposed = p (the interval from the "
    "request's previous step); modelled tok/s = the warm tok/s x (tokens per step / mean step "
    "time at k') / (the same at the recorded lengths)"
)
INTERVALS = "bootstrap over the warm legs (each leg one unit): 95% percentile"
MAX_CUT_K = 64
"""Rows for k' = 1 .. this (and the recorded k): past it a row per k' says nothing a reader
uses, and a log may carry drafts of up to 2^16 tokens."""

Joint = Mapping[int, Mapping[tuple[int, int], int]]
"""Per leg: drafted steps counted by (proposed, accepted)."""


@dataclass(frozen=True, slots=True)
class StepTime:
    """The log's step time at one draft length: intervals ending at a step with this
    ``proposed`` (from the same request's previous step), their count and sum."""

    proposed: int
    intervals: int
    total_ns: int

    @property
    def mean_s(self) -> float:
        return self.total_ns / self.intervals / 1e9

    def to_json(self) -> dict[str, Any]:
        return {"proposed": self.proposed, "intervals": self.intervals, "mean_s": self.mean_s}


@dataclass(frozen=True, slots=True)
class CutRow:
    """The figures at one k'."""

    k: int
    recorded: bool
    """k' is the largest draft length: the fold's own figures."""
    counts: Counts
    per_position: tuple[float, ...]
    steps_needed: float | None
    accept_rate_ci: tuple[float, float] | None
    tokens_per_step_ci: tuple[float, float] | None
    step_time_s: float | None
    decode_tok_s: float | None
    modelled_tok_s: float | None
    unmeasured_lengths: tuple[int, ...]
    """Draft lengths this k' cuts steps to that have no step time in the log."""

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "recorded": self.recorded,
            "steps": self.counts.steps,
            "proposed": self.counts.proposed,
            "accepted": self.counts.accepted,
            "accept_rate": self.counts.accept_rate,
            "accept_rate_ci": _pair(self.accept_rate_ci),
            "accept_rate_reach": reach(self.counts.accept_rate, self.accept_rate_ci),
            # 1 + A/S at this k' (the format's name for it)
            "tokens_per_step": self.counts.mean_acceptance_length,
            "tokens_per_step_ci": _pair(self.tokens_per_step_ci),
            "tokens_per_step_reach": reach(
                self.counts.mean_acceptance_length, self.tokens_per_step_ci
            ),
            "per_position": list(self.per_position),
            "steps_needed": self.steps_needed,
            "step_time_s": self.step_time_s,
            "decode_tok_s": self.decode_tok_s,
            "modelled_tok_s": self.modelled_tok_s,
            "unmeasured_lengths": list(self.unmeasured_lengths),
        }


FEW_STEPS = 30
"""A draft length timed over fewer steps than this: the tok/s of a k' that cuts steps to it
rests on few (``few_steps_lengths``)."""


@dataclass(frozen=True, slots=True)
class AnotherK:
    """Every k' from 1 to the largest draft length, with what they rest on."""

    legs: tuple[int, ...]
    largest_k: int
    draft_lengths: tuple[tuple[int, int], ...]
    """(proposed, drafted steps) for each draft length the legs' steps carry."""
    step_times: tuple[StepTime, ...] | None
    """Per draft length its step time, or None: not measured (``step_time_note`` says why)."""
    step_time_note: str
    rows: tuple[CutRow, ...]
    resamples: int

    def row(self, k: int) -> CutRow:
        (found,) = (row for row in self.rows if row.k == k)
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "assumption": ASSUMPTION,
            "step_model": STEP_MODEL,
            "intervals": INTERVALS if self.resamples else None,
            "legs": list(self.legs),
            "largest_k": self.largest_k,
            "draft_lengths": [
                {"proposed": proposed, "steps": steps} for proposed, steps in self.draft_lengths
            ],
            "step_times": (
                None if self.step_times is None else [time.to_json() for time in self.step_times]
            ),
            "step_time_note": self.step_time_note,
            "rows": [row.to_json() for row in self.rows],
            "few_steps_lengths": [
                time.proposed for time in self.step_times or () if time.intervals < FEW_STEPS
            ],
            "unmeasured_lengths": sorted({k for row in self.rows for k in row.unmeasured_lengths}),
        }


def joint_of_rows(
    rows: Iterable[tuple[int, int, int, int]],
) -> dict[int, dict[tuple[int, int], int]]:
    """Per leg, drafted steps by (proposed, accepted), from (leg, proposed, accepted, count)
    rows (``PartialFold.histogram``); a pair met twice adds up."""
    joint: dict[int, dict[tuple[int, int], int]] = defaultdict(lambda: defaultdict(int))
    for leg, proposed, accepted, count in rows:
        if proposed > 0:
            joint[leg][(proposed, accepted)] += count
    return {leg: dict(counts) for leg, counts in joint.items()}


def cut_sums(counts: Mapping[tuple[int, int], int], k: int) -> tuple[int, int, int]:
    """(S, P', A') of drafted steps counted by (proposed, accepted), each draft cut at k."""
    steps = proposed = accepted = 0
    for (p, a), count in counts.items():
        steps += count
        proposed += min(p, k) * count
        accepted += min(a, k) * count
    return steps, proposed, accepted


def another_k(
    joint: Joint,
    legs: Sequence[int],
    *,
    step_times: Mapping[int, tuple[int, int]] | None = None,
    tok_s: float | None = None,
    resamples: int = 0,
    seed: int = DEFAULT_SEED,
) -> AnotherK | None:
    """The figures at every k' for the legs ``legs`` (a fold's warm legs), None when they
    drafted nothing.

    ``step_times``: per draft length, (intervals, their nanoseconds) over the same legs (see
    ``fold.folding.step_lengths``), or None when the log has no times. ``tok_s``: the legs'
    measured output tok/s, which the modelled tok/s scales. ``resamples`` above 0 draws
    intervals with ``seed``."""
    legs = tuple(legs)
    pooled: dict[tuple[int, int], int] = defaultdict(int)
    for leg in legs:
        for pair, count in joint.get(leg, {}).items():
            pooled[pair] += count
    pooled = {pair: count for pair, count in pooled.items() if count}
    if not pooled:
        return None
    by_length: dict[int, int] = defaultdict(int)
    for (proposed, _accepted), count in pooled.items():
        by_length[proposed] += count
    largest = max(by_length)
    times, note = _measured(by_length, step_times)
    recorded_rate = _decode_rate(pooled, largest, times)[2]
    shown = cut_lengths(largest)
    intervals = _intervals(joint, legs, shown, resamples, seed)
    rows = []
    for k in shown:
        counts = Counts(*cut_sums(pooled, k))
        steps, accepted = counts.steps, counts.accepted
        histogram = [0] * (k + 1)
        for (_p, a), count in pooled.items():
            histogram[min(a, k)] += count
        step_time, unmeasured, rate = _decode_rate(pooled, k, times)
        output = steps + sum(a * count for (_p, a), count in pooled.items())
        # (S + A) / (1 + A'/S), as one division of integers: exactly S at the recorded k.
        needed = output * steps / (steps + accepted) if steps else None
        modelled = None
        if rate is not None and recorded_rate and tok_s is not None:
            modelled = tok_s * rate / recorded_rate
        rows.append(
            CutRow(
                k=k,
                recorded=k == largest,
                counts=counts,
                per_position=tuple(acceptance.per_position(histogram, steps)),
                steps_needed=needed,
                accept_rate_ci=intervals.get((k, "accept_rate")),
                tokens_per_step_ci=intervals.get((k, "mean_acceptance_length")),
                step_time_s=step_time,
                decode_tok_s=rate,
                modelled_tok_s=modelled,
                unmeasured_lengths=unmeasured,
            )
        )
    return AnotherK(
        legs=legs,
        largest_k=largest,
        draft_lengths=tuple(sorted(by_length.items())),
        step_times=times,
        step_time_note=note,
        rows=tuple(rows),
        resamples=resamples,
    )


def _measured(
    by_length: Mapping[int, int], step_times: Mapping[int, tuple[int, int]] | None
) -> tuple[tuple[StepTime, ...] | None, str]:
    """The step times the model may use, and what the figures say about them."""
    lengths = sorted(by_length)
    if step_times is None:
        return None, "the steps have no times: step time per k' not measured"
    if len(lengths) == 1:
        return None, (
            f"one draft length in the log (k = {lengths[0]}): the step time at another k' is "
            "not measured; tokens per step only"
        )
    times = tuple(
        StepTime(proposed, intervals, total)
        for proposed, (intervals, total) in sorted(step_times.items())
        if proposed > 0 and intervals > 0
    )
    if not times:
        return None, (
            "no request in the warm legs has two steps: the step time per k' is not measured; "
            "tokens per step only"
        )
    timed = ", ".join(str(time.proposed) for time in times)
    return times, f"measured from the log at draft lengths {timed}"


def _decode_rate(
    pooled: Mapping[tuple[int, int], int], k: int, times: tuple[StepTime, ...] | None
) -> tuple[float | None, tuple[int, ...], float | None]:
    """At k': the mean modelled step time (seconds), the cut lengths without a measured step
    time, and tokens per step over that step time (None where not measured)."""
    if times is None:
        return None, (), None
    mean = {time.proposed: time.mean_s for time in times}
    steps = seconds = accepted = 0.0
    missing = set()
    for (p, a), count in pooled.items():
        length = min(p, k)
        steps += count
        accepted += min(a, k) * count
        if length in mean:
            seconds += mean[length] * count
        else:
            missing.add(length)
    if missing or seconds <= 0:
        return None, tuple(sorted(missing)), None
    step_time = seconds / steps
    return step_time, (), (1 + accepted / steps) / step_time


def cut_lengths(largest: int) -> list[int]:
    """The k' that get a row: 1 .. ``MAX_CUT_K`` below the largest draft, and the largest."""
    return [*range(1, min(largest, MAX_CUT_K + 1)), largest]


_POOLS_AT_ONCE = 64 * 2**20
"""About the most bytes one bootstrap's pools take here (each column holds a value a leg and
resample): past it, the k' are drawn a few at a time (``--bootstrap 100000`` over 55 legs
holds 44 MB a column, so one k' a call, as the same seed draws the same legs in each)."""


def _intervals(
    joint: Joint, legs: tuple[int, ...], shown: list[int], resamples: int, seed: int
) -> dict[tuple[int, str], tuple[float, float]]:
    """Per k' the 95% intervals of A'/P' and 1 + A'/S: the k' are columns of one bootstrap of
    the legs, or of a few with the same seed and legs, which draw the same resamples, so the
    rows pair resample by resample."""
    if not resamples or len(legs) < 2:
        return {}
    column_bytes = 8 * len(legs) * resamples
    at_once = max(1, _POOLS_AT_ONCE // (len(TRIPLE) * column_bytes))
    found: dict[tuple[int, str], tuple[float, float]] = {}
    for first in range(0, len(shown), at_once):
        drawn = shown[first : first + at_once]
        units = []
        for leg in legs:
            columns: dict[str, list[int]] = {}
            for k in drawn:
                for name, value in zip(TRIPLE, cut_sums(joint.get(leg, {}), k), strict=True):
                    columns[f"{name}@{k}"] = [value]
            units.append(Leg(requests=columns))
        ratios: dict[str, tuple[str, str] | tuple[str, str, float]] = {}
        for k in drawn:
            ratios[f"accept_rate@{k}"] = (f"accepted@{k}", f"proposed@{k}")
            ratios[f"mean_acceptance_length@{k}"] = (f"accepted@{k}", f"steps@{k}", 1.0)
        replicates = ratio_replicates(units, ratios, resamples, seed)
        for k in drawn:
            for figure in ("accept_rate", "mean_acceptance_length"):
                interval = replicates.interval(f"{figure}@{k}")
                if interval is not None:
                    found[(k, figure)] = interval
    return found


def _pair(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [interval[0], interval[1]]


def fold_another_k(
    partial: PartialFold,
    warm: Mapping[str, Any],
    resamples: int,
    seed: int,
    step_lengths: StepTimes | None,
) -> AnotherK | None:
    """The warm fold's figures at another k from a partial fold's sums: its (leg, proposed,
    accepted) counts and, when its warm steps carry several draft lengths and times, their
    step time per length (``step_lengths``, the warm legs' ``step_time_by_length``; None
    where the steps have no times). ``warm``: the warm fold's legs and measured tok/s."""
    legs = list(warm["legs"])
    joint = joint_of_rows(
        partial.histogram.select("leg", "proposed", "accepted", "count").iter_rows()
    )
    lengths = {p for leg in legs for (p, _a) in joint.get(leg, {})}
    times = None
    if step_lengths is not None:
        # One length needs no step time per length (the figures say it is not measured).
        times = dict(step_lengths) if len(lengths) > 1 else {}
    return another_k(
        joint,
        legs,
        step_times=times,
        tok_s=warm.get("output_throughput_tok_s"),
        resamples=resamples,
        seed=seed,
    )
