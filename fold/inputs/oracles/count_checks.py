"""What an oracle's counts and ratios must hold before figures are made of them
(``fold.inputs.oracles.figures.arm_from_counts``): each a count or a finite rate, and the
counts true together, within the rounding of counts an engine printed rounded.

A value that is no count or no finite rate is an input error; counts that contradict each
other are refused (``docs/command.md``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from fold.errors import InputError, RefusedError
from fold.inputs import limits
from fold.inputs.acceptance import TRIPLE

ORACLE_COUNT_WHAT_TO_DO = "check the oracle's counters"
NOT_ONE_RUN = "the counters do not come from one run of one server; take them again"
ENGINE_MISCOUNTS = "the engine miscounts, or the output is not its own as written; take it again"


def count_labels(names: Mapping[str, str]) -> dict[str, str]:
    """How the input names its S, P, A and per-position counts in messages, by default the
    reference units'."""
    return {
        "steps": names.get("steps", "drafts (S)"),
        "proposed": names.get("proposed", "draft tokens (P)"),
        "accepted": names.get("accepted", "accepted tokens (A)"),
        "per_position": names.get("per_position", "per-position accepted counts"),
    }


def check_counts(counts: Mapping[str, int | None], label: Mapping[str, str], where: str) -> None:
    """S, P and A (``counts`` by ``steps``, ``proposed``, ``accepted``): each absent or a count,
    and below 2^63 as a sum (each count was read within 64 bits by its reader, but an oracle's
    are often sums over its requests or legs, taken exactly)."""
    for key in TRIPLE:
        value = counts[key]
        if value is None:
            continue
        if not limits.is_count(value):  # a sum may pass 2^63 - 1: check_total refuses it below
            limits.count(where, label[key], value, ORACLE_COUNT_WHAT_TO_DO)
        limits.check_total(where, label[key], value, ORACLE_COUNT_WHAT_TO_DO)


def check_rates(
    rates: Mapping[str, float | None], names: Mapping[str, str], tok_s_source: str, where: str
) -> None:
    """The given throughput and ratios (``rates`` by ``tok_s``, ``completion_tokens_per_step``,
    ``mean_acceptance_length``, ``accept_rate``; the throughput named by where it came from):
    each absent or finite, positive but the acceptance rate; and 1 + A/S at least 1."""
    mean_acceptance_length = rates["mean_acceptance_length"]
    for what, number, positive in (
        (f"tok/s ({tok_s_source})", rates["tok_s"], True),
        (names.get("completion_tokens_per_step", "accept length"),
         rates["completion_tokens_per_step"], True),
        (names.get("mean_acceptance_length", "mean acceptance length"), mean_acceptance_length,
         True),
        (names.get("accept_rate", "acceptance rate"), rates["accept_rate"], False),
    ):  # fmt: skip
        if number is not None and not math.isfinite(number):
            raise limits.WrongKind(where, what, number, "a finite number", "fix the input")
        if number is not None and (number < 0 or (positive and not number)):
            raise InputError(
                f"{where}: {what} = {number!r} must be a finite "
                f"{'positive' if positive else 'non-negative'} number; fix the input or leave "
                "it out"
            )
    if rates["accept_rate"] is not None:
        check_accept_rate(where, names.get("accept_rate", "acceptance rate"),
                          rates["accept_rate"], ENGINE_MISCOUNTS)  # fmt: skip
    if mean_acceptance_length is not None:
        check_acceptance_length(
            where,
            names.get("mean_acceptance_length", "mean acceptance length"),
            mean_acceptance_length,
        )


def check_accept_rate(where: str, field: str, rate: float, what_to_do: str) -> None:
    """RefusedError for an A/P above 1: more draft tokens accepted than proposed, the step
    rule as a ratio (``limits.check_accepted`` against an A/P of 1)."""
    limits.check_accepted(where, (("an A/P of", 1), (field, rate)), what_to_do)


def check_acceptance_length(where: str, field: str, length: float) -> None:
    """RefusedError for an acceptance length below 1: every verify step emits at least one
    token, in 1 + A/S and in SGLang's per-request unit (completion tokens per verify step,
    the prefill token counted) alike."""
    if length < 1:
        raise RefusedError(
            f"{where}: {field} = {length} is below 1: every verify step emits at least one "
            "token, so this is not 1 + A/S"
        )


def check_together(
    counts: Mapping[str, int | None],
    slack: Mapping[str, float],
    label: Mapping[str, str],
    where: str,
) -> None:
    """S, P and A true together: not within their rounding of 0, A at most P, a step for any
    token and a token for every step; with ``slack`` (the largest error of a rounded count),
    refused only when no counts within it could be."""
    steps, proposed, accepted = counts["steps"], counts["proposed"], counts["accepted"]

    def low(key: str, value: int) -> float:
        return value - slack.get(key, 0.0)

    def high(key: str, value: int) -> float:
        return value + slack.get(key, 0.0)

    for key, value in (("steps", steps), ("proposed", proposed)):
        if value is not None and key in slack and value <= slack[key]:
            raise RefusedError(
                f"{where}: {label[key]} = {value} ± {slack[key]:g}: the counters are printed "
                "rounded and this difference is within their rounding, so no ratio over it "
                "can be had; measure a longer run (or read per-request figures)"
            )
    if (
        accepted is not None
        and proposed is not None
        and limits.accepted_above_proposed(high("proposed", proposed), low("accepted", accepted))
    ):
        totals = ((label["proposed"], proposed), (label["accepted"], accepted))
        limits.check_accepted(where, totals, NOT_ONE_RUN)
    if steps == 0 or (steps is None and proposed == 0):
        _refuse_no_steps(steps, proposed, accepted, label, where)
    if (
        steps is not None
        and proposed is not None
        and high("proposed", proposed) < low("steps", steps)
    ):
        raise RefusedError(
            f"{where}: {label['proposed']} = {proposed} is less than {label['steps']} = {steps}: "
            f"every counted step carries at least one draft token; {NOT_ONE_RUN}"
        )


def _refuse_no_steps(
    steps: int | None,
    proposed: int | None,
    accepted: int | None,
    label: Mapping[str, str],
    where: str,
) -> None:
    """Counts of an arm that made no speculative step: tokens without drafts, or nothing."""
    nonzero = [
        f"{label[key]} = {value}"
        for key, value in (("proposed", proposed), ("accepted", accepted))
        if value
    ]
    if nonzero:
        raise RefusedError(
            f"{where}: {label['steps']} = 0 but {', '.join(nonzero)}: tokens without drafts "
            f"are impossible; {NOT_ONE_RUN}"
        )
    zero = label["steps"] if steps == 0 else label["proposed"]
    raise RefusedError(
        f"{where}: {zero} = 0: the arm made no speculative step, so it has no "
        "acceptance to compare (scrapes swapped, taken from an idle server, or "
        "speculative decoding off); drop the acceptance counters to compare tok/s only"
    )


def checked_per_position(
    per_position: Sequence[int] | None,
    counts: Mapping[str, int | None],
    slack: Mapping[str, float],
    label: Mapping[str, str],
    where: str,
) -> tuple[int, ...] | None:
    """The steps that accepted each draft position, as a tuple: counts, none above S, summing
    to A (within their rounding)."""
    if per_position is None:
        return None
    steps, accepted = counts["steps"], counts["accepted"]
    per_pos = tuple(per_position)
    pp_label = label["per_position"]
    for i, count in enumerate(per_pos):
        limits.count(where, f"{pp_label}[{i}]", count, ORACLE_COUNT_WHAT_TO_DO)
        if steps is not None and count > steps + slack.get("steps", 0.0):
            raise RefusedError(
                f"{where}: {pp_label}[{i}] = {count} exceeds {label['steps']} = {steps}: "
                f"a position cannot be accepted in more steps than there were; {NOT_ONE_RUN}"
            )
    if accepted is not None and abs(sum(per_pos) - accepted) > slack.get("accepted", 0.0):
        raise RefusedError(
            f"{where}: {pp_label} sum to {sum(per_pos)} but {label['accepted']} = "
            f"{accepted}; {NOT_ONE_RUN}"
        )
    return per_pos
