"""What a step and a counter may be, whatever source they come from, and how a value past a
limit is refused.

Every reader (the hook's log in both readers, the engine's trace, the arm record's counters,
the oracles' counters, other runs of ours through the same readers) checks its values here, so
one value is refused in one wording wherever it comes from::

    <where>: <field> <value> <the limit>: <what to do>

``<where>`` is ``file:line``, ``file: leg N (run r)`` or an oracle file's place. Each rule has
one error class, so one exit code (``docs/command.md``): one value outside its field's range
(a count, a request id, a duration) is malformed, InputError; values that cannot be true
together (a step's counts, a sum) are refused, RefusedError. The native reader's constants
(``fold/inputs/native_src/fold_pass.h``) and the instrument's (``instrument/dflash_step_log.h``)
are held to these by the tests, and so is its numbering of the step's rule (``StepRule``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeGuard

from fold.errors import InputError, RefusedError

MAX_STEP_TOKENS = 2**16
"""The most tokens one step of one request may propose or emit (instrument/FORMAT.md). No
drafter verifies anywhere near this many in one forward; a larger count is a garbage value (an
unsigned -1, an uninitialised counter). Bounding it bounds what grows with it: the histogram
and per-position rates have at most this many + 1 entries, and a sum of step counts cannot
pass 2^63 before 2^47 steps."""

MAX_COUNT = 2**63 - 1
"""The largest count, and the largest sum of counts: every figure is written as a signed
64-bit integer (the JSON, polars' Int64, the native reader's sums). Sums are taken exactly
(Python integers) and refused when they pass this, never wrapped or rounded."""

MAX_STEP_NS = 2**63 - 1
"""The longest duration a step's ``draft_ns`` or ``verify_ns`` may carry (FORMAT.md: every
integer but ``seq`` is below 2^63). A larger one is a negative difference of unsigned clock
readings, wrapped; the C++ hook drops such a row instead of writing it."""

MAX_REQUEST_ID = 2**64 - 1
"""The largest integer request id (FORMAT.md: ``seq`` may use the whole unsigned 64-bit
range); a request named by a string has no limit here but its length in the hook's format."""

MAX_WINDOW_SECONDS = (MAX_STEP_NS - 1_000_000) / 1e9
"""The longest leg an oracle may give in seconds: every leg's window is kept in integer
nanoseconds (at most 2^63 - 1 of them), with a millisecond to spare for the slack at its ends
(``fold.inputs.arm.WINDOW_SLACK_NS``)."""

MAX_DIGITS = len(str(MAX_REQUEST_ID))
"""Digits of the longest integer any limit allows: a longer decimal is past every limit and is
refused before it is converted (Python will not convert a number of more than 4300 digits)."""

LAST_EPOCH_SECOND = MAX_STEP_NS // 1_000_000_000
"""Step times are nanoseconds since the epoch below 2^63 (FORMAT.md: every integer but seq), so
a leg's times in seconds are before this one (in 2262)."""

STEP_CAP_WORDS = f"exceeds {MAX_STEP_TOKENS}, the most tokens one step may carry (FORMAT.md)"
COUNT_WORDS = "is past 2^63 - 1, the largest count (FORMAT.md)"
NEGATIVE_WORDS = "is negative: counts, request ids and durations are unsigned (FORMAT.md)"
SUM_WORDS = "takes the sum past 2^63 - 1, the largest count (FORMAT.md)"
TOTAL_WORDS = "is a sum past 2^63 - 1, the largest count (FORMAT.md)"
REQUEST_ID_WORDS = "is past 2^64 - 1, the largest integer request id (FORMAT.md)"
DURATION_WORDS = "is past 2^63 - 1 ns, the longest step duration (FORMAT.md)"
WINDOW_WORDS = "is past 2^63 - 1 ns, the longest leg window (FORMAT.md)"
RUN_WORDS = "is below 1: runs count from 1, the cold one first"


def is_int(value: object) -> TypeGuard[int]:
    """An integer that is not a bool (JSON's ``true`` reads as Python's 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_count(value: object) -> TypeGuard[int]:
    """A count: an integer that is not a bool and not negative (its size is checked apart, by
    ``count_problem``, with the words of the 2^63 limit)."""
    return is_int(value) and value >= 0


def is_number(value: object) -> TypeGuard[int | float]:
    """An integer or a float (finite or not: callers that need finite say so)."""
    return is_int(value) or isinstance(value, float)


def is_finite_number(value: object) -> TypeGuard[int | float]:
    """A number that is neither infinite nor NaN (a bool is not a number)."""
    return is_number(value) and math.isfinite(value)


def past_64_bits(value: object) -> bool:
    """A float orjson made of an integer literal too large for 64 bits (it reads such a
    literal as a float): past every count and id, refused by the field's own words."""
    return isinstance(value, float) and value.is_integer() and abs(value) >= 2**63


def in_orjson_int_range(value: int) -> bool:
    """Whether orjson reads this integer literal as an int (signed or unsigned 64 bits)."""
    return -(2**63) <= value < 2**64


def past_every_limit(decimal: str) -> bool:
    """Whether a decimal (a sign aside) has more digits than any limit allows: it is past every
    one, whatever its digits, and is refused before it is converted."""
    return len(decimal.lstrip("-")) > MAX_DIGITS


def is_epoch_seconds(seconds: float) -> bool:
    """Seconds since the epoch whose nanoseconds a step time can hold (1970 to 2262)."""
    return 0 <= seconds < LAST_EPOCH_SECOND


def shown(value: Any) -> str:
    """A value as a message shows it: a long decimal shortened to its first digits and its
    length, so a message never grows with the value."""
    text = str(value)
    if len(text) > 2 * MAX_DIGITS:
        return f"{text[:MAX_DIGITS]}... ({len(text)} digits)"
    return text


def refusal(where: str, field: str, value: Any, limit: str, what_to_do: str) -> str:
    """The one wording of a value past a limit."""
    return f"{where}: {field} {shown(value)} {limit}: {what_to_do}"


# -- one value: a count, a request id, a duration --------------------------------------------
#
# A value outside its field's range is malformed wherever it is read (InputError, exit 2): the
# formats write these as unsigned decimals within 64 bits, so a sign or a 20-digit count is not
# a value of the field at all, and mending the input is the fix. A count's -1 written by a
# writer that counts with signed integers and the same -1 written unsigned (2^64 - 1, past
# 2^63 - 1) then exit alike.


def count_problem(value: int) -> str | None:
    """The limit words when a count is outside 0 .. 2^63 - 1, else None."""
    return NEGATIVE_WORDS if value < 0 else COUNT_WORDS if value > MAX_COUNT else None


def duration_problem(value: int) -> str | None:
    """The limit words when a step duration is outside 0 .. 2^63 - 1 ns, else None."""
    return NEGATIVE_WORDS if value < 0 else DURATION_WORDS if value > MAX_STEP_NS else None


def run_problem(value: int) -> str | None:
    """The limit words when a run number is outside 1 .. 2^63 - 1, else None: a count that
    starts at 1."""
    return count_problem(value) or (RUN_WORDS if value < 1 else None)


def window_problem(seconds: float) -> str | None:
    """The limit words when a leg's seconds are past ``MAX_WINDOW_SECONDS``, else None (a
    negative or zero one is no duration at all, refused by its reader as not positive)."""
    return WINDOW_WORDS if seconds > MAX_WINDOW_SECONDS else None


def request_id_problem(value: int) -> str | None:
    """The limit words when an integer request id is outside 0 .. 2^64 - 1, else None."""
    return NEGATIVE_WORDS if value < 0 else REQUEST_ID_WORDS if value > MAX_REQUEST_ID else None


class OutOfRange(InputError):
    """A count, a request id or a duration outside its field's range: malformed (exit 2).
    ``reason`` is its field, value and limit without the place and what to do: the line readers
    name the line themselves and may skip it (``--skip-bad-lines``)."""

    def __init__(self, where: str, field: str, value: Any, words: str, what_to_do: str) -> None:
        self.reason = f"{field} {shown(value)} {words}"
        super().__init__(refusal(where, field, value, words, what_to_do))


def _check_range(
    problem: Callable[[int], str | None],
    place: tuple[str, str],
    value: int,
    what_to_do: str,
    written: str | None = None,
) -> None:
    """OutOfRange when ``problem`` finds ``value`` outside its range; ``place`` is (where,
    field) and ``written`` the value as the input wrote it, when that is not ``value``."""
    words = problem(value)
    if words is not None:
        where, field = place
        raise OutOfRange(where, field, value if written is None else written, words, what_to_do)


def check_count(where: str, field: str, value: int, what_to_do: str) -> None:
    """OutOfRange (an InputError) when a count is outside 0 .. 2^63 - 1 (``count_problem``)."""
    _check_range(count_problem, (where, field), value, what_to_do)


def check_request_id(where: str, field: str, value: int, what_to_do: str) -> None:
    """OutOfRange (an InputError, as a count's) when an integer request id is outside
    0 .. 2^64 - 1 (``request_id_problem``)."""
    _check_range(request_id_problem, (where, field), value, what_to_do)


def check_run(where: str, field: str, value: int, what_to_do: str) -> None:
    """OutOfRange (an InputError, as a count's) when a run number is outside 1 .. 2^63 - 1
    (``run_problem``)."""
    _check_range(run_problem, (where, field), value, what_to_do)


def check_window(where: str, field: str, seconds: float, what_to_do: str) -> None:
    """OutOfRange (an InputError, as a duration's) when a leg's seconds do not fit its window
    in integer nanoseconds (``window_problem``)."""
    words = window_problem(seconds)
    if words is not None:
        raise OutOfRange(where, field, seconds, words, what_to_do)


def check_duration(where: str, field: str, value: int, what_to_do: str) -> None:
    """OutOfRange (an InputError, as a count's) when a step duration is outside
    0 .. 2^63 - 1 ns (``duration_problem``)."""
    _check_range(duration_problem, (where, field), value, what_to_do)


def _decimal(text: str, past: int) -> int:
    """A decimal's value; its length decides first, so a decimal of any size is read at once:
    one past every limit is ``past``, and a negative of any length is negative."""
    value = past if past_every_limit(text) else int(text)
    if text.startswith("-") and value != 0:
        value = min(value, -1)
    return value


def decimal_count(text: str, where: str, field: str, what_to_do: str) -> int:
    """A count printed as a decimal, checked as ``check_count`` checks it (a sign, which no
    engine prints, makes it negative) and refused showing the decimal as written."""
    value = _decimal(text, MAX_COUNT + 1)
    _check_range(count_problem, (where, field), value, what_to_do, text)
    return value


def decimal_request_id(text: str, where: str, field: str, what_to_do: str) -> int:
    """An integer request id printed as a decimal, checked as ``check_request_id`` checks it
    and refused showing the decimal as written."""
    value = _decimal(text, MAX_REQUEST_ID + 1)
    _check_range(request_id_problem, (where, field), value, what_to_do, text)
    return value


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
