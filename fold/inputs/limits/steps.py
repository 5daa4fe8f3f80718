"""Several values: a step's counts, and sums of counts, that cannot be true together
(RefusedError, exit 1). The package's docstring (``fold.inputs.limits``) says how these are used.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from fold.errors import RefusedError
from fold.inputs.limits.values import (
    MAX_COUNT,
    MAX_STEP_TOKENS,
    STEP_CAP_WORDS,
    SUM_N_MODULUS,
    SUM_WORDS,
    TOTAL_WORDS,
    check_count,
    refusal,
    shown,
)

# -- several values: a step, a sum ------------------------------------------------------------
#
# Counts that are each well formed but cannot be true together, or of one step, are refused
# (RefusedError, exit 1): the source miscounts, no figure made from it would be right, and
# ``--skip-bad-lines`` does not skip them.


class StepRule(IntEnum):
    """Which part of a step's rule, ``accepted <= proposed <= 65536`` and ``emitted <= 65536``,
    a step breaks; the first in this order is the one reported. The native reader
    (``native_src/fold_pass.h``, ``StepRule``) reports a line's by the same numbers."""

    ACCEPTED_ABOVE_PROPOSED = 1
    PROPOSED_PAST_CAP = 2
    EMITTED_PAST_CAP = 3


@dataclass(frozen=True)
class StepFields:
    """How a source names a step's three counts in its messages."""

    proposed: str = "'proposed'"
    accepted: str = "'accepted'"
    emitted: str = "'emitted'"


def accepted_above_proposed(proposed: float, accepted: float) -> bool:
    """Whether more draft tokens were accepted than proposed: the one comparison of A against P,
    for a step and for any total of steps (floats: counts widened by their rounding)."""
    return accepted > proposed


def step_problem(proposed: int, accepted: int, emitted: int | None = None) -> StepRule | None:
    """The rule a step's counts break, or None. The counts are counts already (each within
    0 .. 2^63 - 1, ``count_problem``): a negative one is malformed, not an impossible step."""
    if accepted_above_proposed(proposed, accepted):
        return StepRule.ACCEPTED_ABOVE_PROPOSED
    if proposed > MAX_STEP_TOKENS:
        return StepRule.PROPOSED_PAST_CAP
    if emitted is not None and emitted > MAX_STEP_TOKENS:
        return StepRule.EMITTED_PAST_CAP
    return None


def accepted_words(proposed_field: str, proposed: Any) -> str:
    """The limit words of accepted counts above the proposed ones."""
    return f"exceeds {proposed_field} {shown(proposed)}, more draft tokens accepted than proposed"


def step_refusal(
    rule: StepRule,
    where: str,
    counts: tuple[Any, Any, Any],
    what_to_do: str,
    fields: StepFields = StepFields(),
) -> RefusedError:
    """The one refusal of a step that breaks ``rule``; ``counts`` are its (proposed, accepted,
    emitted) as the source wrote them."""
    proposed, accepted, emitted = counts
    if rule is StepRule.ACCEPTED_ABOVE_PROPOSED:
        words = accepted_words(fields.proposed, proposed)
        return RefusedError(refusal(where, fields.accepted, accepted, words, what_to_do))
    if rule is StepRule.PROPOSED_PAST_CAP:
        return step_cap(where, fields.proposed, proposed, what_to_do)
    return step_cap(where, fields.emitted, emitted, what_to_do)


def check_step(
    where: str,
    counts: tuple[int, int, int | None],
    what_to_do: str,
    fields: StepFields = StepFields(),
) -> None:
    """RefusedError (``step_refusal``) when a step's (proposed, accepted, emitted) break the
    step's rule."""
    rule = step_problem(*counts)
    if rule is not None:
        raise step_refusal(rule, where, counts, what_to_do, fields)


def check_accepted(
    where: str, totals: tuple[tuple[str, float], tuple[str, float]], what_to_do: str
) -> None:
    """RefusedError when a total of accepted draft tokens exceeds the total proposed, worded as
    a step's; ``totals`` are ((proposed field, P), (accepted field, A)), or a rate A/P against
    1 (a rate above 1 is more accepted than proposed)."""
    (proposed_field, proposed), (accepted_field, accepted) = totals
    if accepted_above_proposed(proposed, accepted):
        words = accepted_words(proposed_field, proposed)
        raise RefusedError(refusal(where, accepted_field, accepted, words, what_to_do))


def step_cap(where: str, field: str, value: Any, what_to_do: str) -> RefusedError:
    """The refusal of a step's (or a setting's draft length's) token count past the cap.

    Every source refuses it with this error: the value is well formed, but no drafter verifies
    that many tokens in one step, so the input miscounts and the fold cannot stand behind it
    (exit 1, ``docs/command.md``)."""
    return RefusedError(refusal(where, field, value, STEP_CAP_WORDS, what_to_do))


def check_step_tokens(where: str, field: str, value: int, what_to_do: str) -> None:
    """``step_cap`` when a setting's draft length (the tokens each of its steps may propose)
    is past the cap."""
    if value > MAX_STEP_TOKENS:
        raise step_cap(where, field, value, what_to_do)


def check_total(where: str, field: str, value: int, what_to_do: str) -> None:
    """RefusedError when a sum of counts (or of durations), taken whole, is past 2^63 - 1."""
    if past_total(value):
        raise RefusedError(refusal(where, field, value, TOTAL_WORDS, what_to_do))


def past_total(value: Any) -> Any:
    """Whether a sum taken whole is past 2^63 - 1: a bool for an int, and for a column of sums
    (a polars expression) the column of answers, so a table finds its rows that break the rule
    by this one comparison; ``check_total`` refuses the one it names."""
    return value > MAX_COUNT


def check_sums(places: Iterable[tuple[str, str, int]], what_to_do: str) -> dict[str, int]:
    """The exact sum per field of ``(where, field, value)`` counts, in order; RefusedError
    naming the first place whose value takes its field's running sum past 2^63 - 1 (each value
    may be below it, the sum is not)."""
    totals: dict[str, int] = {}
    for where, field, value in places:
        check_count(where, field, value, what_to_do)
        totals[field] = totals.get(field, 0) + value
        if totals[field] > MAX_COUNT:
            raise RefusedError(refusal(where, field, value, SUM_WORDS, what_to_do))
    return totals


def counter_adds_up(lines: int, max_n: int, sum_n: int) -> bool:
    """Whether a writer's ``lines`` lines, with n up to ``max_n`` summing to ``sum_n`` (modulo
    2^64), can be its counter's 0..max_n with ``max_n + 1 - lines`` of them missing (each n at
    most once). It finds repeats the count alone misses, where as many lines repeat as were
    lost: one repeat in place of one loss always changes the sum (more can cancel out). With
    more lost than repeated, it finds them only when no distinct missing counts below max_n
    add up to what the sum leaves (docs/decisions.md)."""
    missing = max_n + 1 - lines
    short = (max_n * (max_n + 1) // 2 - sum_n) % SUM_N_MODULUS  # the missing n's sum, modulo 2^64
    least = missing * (missing - 1) // 2  # 0, 1, ..., missing - 1
    most = missing * max_n - missing * (missing + 1) // 2  # max_n - 1, ..., max_n - missing
    if most - least >= SUM_N_MODULUS:
        return True  # any sum modulo 2^64 could be theirs
    return (short - least) % SUM_N_MODULUS <= most - least
