"""One value: what a count, a request id, a duration, a run or a leg's window may be, and the
kind each field's value must be; how one outside its range or of the wrong kind is refused
(InputError, exit 2). The package's docstring (``fold.inputs.limits``) says how these are used.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeGuard

from fold.errors import InputError

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

SUM_N_MODULUS = 2**64
"""A writer's lines' ``n`` are summed modulo this (the native reader's unsigned 64-bit
sum, which wraps): the sum is only compared, with its count and largest ``n``, to tell a
repeated ``n`` (``fold.folding.writers``), so it may wrap where a figure's sum may not."""

MAX_WINDOW_SECONDS = (MAX_STEP_NS - 1_000_000) / 1e9
"""The longest leg an oracle may give in seconds: every leg's window is kept in integer
nanoseconds (at most 2^63 - 1 of them), with a millisecond to spare for the slack at its ends
(``fold.inputs.arm.WINDOW_SLACK_NS``)."""

MAX_DIGITS = len(str(MAX_REQUEST_ID))
"""Digits of the longest integer any limit allows: a longer decimal is past every limit and is
refused before it is converted (Python will not convert a number of more than 4300 digits)."""

_DECIMAL = re.compile(r"-?[0-9]+")
_PRINTED_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
"""A number as C's printf and Python's repr print one, in ASCII digits: ``float()`` alone also
takes ``1_0.0`` and other scripts' digits, which no engine prints."""
"""A decimal as engines print counts (with a sign, which only a miscount carries)."""

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
    """A float orjson may have made of an integer literal too large for 64 bits (it reads an
    integer literal from -2^63 to 2^64 - 1 as an int, and one beyond as a float): past every
    count and id, refused by the field's own words. A whole float within that range was
    written as a float (``1e19``, ``3.0``): a value of the wrong kind where an integer belongs."""
    return isinstance(value, float) and value.is_integer() and (value >= 2**64 or value < -(2**63))


def holds_past_64_bits(document: Any) -> bool:
    """Whether a parsed document holds a ``past_64_bits`` float anywhere (``exact_integers``)."""
    return any(past_64_bits(value) for value in _parts(document))


def exact_integers(text: str | bytes, parsed: Any) -> Any:
    """``parsed`` (orjson's reading of ``text``), or, where orjson made a float of an integer
    literal past 64 bits, ``text`` read again with every integer literal exact: a message then
    shows such a value with the digits its input wrote (``99999999999999999999``), not a
    float's (``100000000000000000000``). The value is refused either way; only its words
    change. A text the standard library cannot read as orjson did is left as orjson read it."""
    try:
        return strict_json(text)
    except (ValueError, RecursionError):
        return parsed


def strict_json(text: str | bytes, *, integer: Callable[[str], Any] | None = None) -> Any:
    """``text`` read by the standard library, as strict as orjson (UTF-8 only, no NaN or
    Infinity, no unpaired surrogate) but with JSON's numbers unbounded: a float beyond a
    double's range infinite, and every integer literal exact, or as ``integer`` makes it (a
    reader that must read as orjson does gives orjson's ranges). ValueError (or RecursionError)
    when it is not JSON."""
    document = json.loads(
        text.decode("utf-8") if isinstance(text, bytes) else text,
        parse_int=integer or _exact_int,
        parse_constant=_no_json_constant,
    )
    if has_lone_surrogate(document):
        raise ValueError("an unpaired surrogate is not UTF-8")
    return document


def has_lone_surrogate(document: Any) -> bool:
    """Whether a parsed document holds an unpaired surrogate (which UTF-8 cannot encode, and
    orjson refuses), in a key or a string at any depth."""
    return any(
        isinstance(part, str) and any("\ud800" <= char <= "\udfff" for char in part)
        for part in _parts(document)
    )


def _parts(document: Any) -> Iterator[Any]:
    """Every key and every value of a parsed document that is neither an object nor a list.
    Walked with a stack of its own, not by recursion: orjson reads a value nested 1,024 deep,
    far past what Python's recursion allows a walk that calls itself."""
    pending = [document]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        else:
            yield value


def _exact_int(text: str) -> int | float:
    # Python converts at most 4300 digits; a longer literal is beyond a double too (inf), as
    # orjson's fallback reads it, and is shown shortened either way.
    return int(text) if len(text) <= 4000 else float(text)


def _no_json_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


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


def json_shown(value: Any) -> str:
    """A parsed value as its input spelled it (``true``, ``"4"``, ``2.5``, ``null``), shortened
    as ``shown`` shortens: a message about a value of the wrong kind shows which kind it was."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and not math.isfinite(value):
        return "a number beyond a double's range"
    if is_int(value):
        return shown(value)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > 2 * MAX_DIGITS:
        return f"{text[: 2 * MAX_DIGITS]}... ({len(text)} characters)"
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


class WrongKind(InputError):
    """A value of the wrong kind for its field (a string, a fraction, a bool, an object where
    an integer belongs; not a finite number where a number does): malformed (exit 2), in one
    wording from every reader, the value spelled as its input spelled it. ``reason`` is as
    ``OutOfRange``'s, for the line readers."""

    def __init__(
        self, where: str, field: str, value: Any, wanted: str, what_to_do: str,
        written: str | None = None,
    ) -> None:  # fmt: skip
        self.reason = kind_reason(field, value, wanted, written)
        super().__init__(f"{where}: {self.reason}: {what_to_do}")


def kind_reason(field: str, value: Any, wanted: str, written: str | None = None) -> str:
    """``WrongKind``'s words without the place and what to do: a line reader names the line
    itself and may skip it (``--skip-bad-lines``). ``written``: the value as printed text."""
    if value is None and written is None:
        return f"{field or 'the value'} is missing or null, not {wanted}"
    spelled = json_shown(value) if written is None else shown(written)
    return f"{field} {spelled} is not {wanted}".lstrip()


def integer(
    where: str,
    field: str,
    value: Any,
    what_to_do: str,
    *,
    whole_floats: bool = False,
    wanted: str = "an integer",
) -> int:
    """A parsed value as an integer, or WrongKind (saying the field wants ``wanted``). An
    integer literal past 64 bits, which orjson reads as a float, is an integer (its range is
    the field's check's to refuse); with ``whole_floats`` so is a finite whole float
    (``310.0``: a counter printed as a float)."""
    if past_64_bits(value) or (
        whole_floats and isinstance(value, float) and math.isfinite(value) and value.is_integer()
    ):
        return int(value)
    if not is_int(value):
        raise WrongKind(where, field, value, wanted, what_to_do)
    return value


def count(
    where: str, field: str, value: Any, what_to_do: str, *, whole_floats: bool = False
) -> int:
    """A parsed value as a count: WrongKind when it is not an integer (``integer``),
    OutOfRange when it is outside 0 .. 2^63 - 1 (``check_count``)."""
    checked = integer(where, field, value, what_to_do, whole_floats=whole_floats)
    check_count(where, field, checked, what_to_do)
    return checked


def run(where: str, field: str, value: Any, what_to_do: str) -> int:
    """A parsed value as a run number: WrongKind when it is not an integer (``integer``),
    OutOfRange when it is outside 1 .. 2^63 - 1 (``check_run``)."""
    checked = integer(where, field, value, what_to_do)
    check_run(where, field, checked, what_to_do)
    return checked


def string(where: str, field: str, value: Any, what_to_do: str) -> str:
    """A parsed value as a string, or WrongKind."""
    if not isinstance(value, str):
        raise WrongKind(where, field, value, "a string", what_to_do)
    return value


def finite_number(where: str, field: str, value: Any, what_to_do: str) -> float:
    """A parsed value as a finite float, or WrongKind (a bool, a string, an infinity)."""
    if is_int(value):
        try:
            return float(value)
        except OverflowError:  # an integer past any float
            raise WrongKind(where, field, value, "a finite number", what_to_do) from None
    if not is_finite_number(value):
        raise WrongKind(where, field, value, "a finite number", what_to_do)
    return float(value)


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


def _decimal(text: str, past: int, place: tuple[str, str], what_to_do: str) -> int:
    """A decimal's value; its length decides first, so a decimal of any size is read at once:
    one past every limit is ``past``, and a negative of any length is negative. Text that is
    no decimal (``868.5``, ``12k``) is WrongKind, shown as written."""
    if not _DECIMAL.fullmatch(text):
        where, field = place
        raise WrongKind(where, field, None, "an integer", what_to_do, written=text)
    value = past if past_every_limit(text) else int(text)
    if text.startswith("-") and value != 0:
        value = min(value, -1)
    return value


def decimal_count(text: str, where: str, field: str, what_to_do: str) -> int:
    """A count printed as a decimal, checked as ``check_count`` checks it (a sign, which no
    engine prints, makes it negative) and refused showing the decimal as written."""
    value = _decimal(text, MAX_COUNT + 1, (where, field), what_to_do)
    _check_range(count_problem, (where, field), value, what_to_do, text)
    return value


def printed_number(text: str, where: str, field: str, what_to_do: str) -> float:
    """A finite number as an engine printed it (``2.35``), or WrongKind shown as written
    (``2.3.5``, ``nan``)."""
    value = float(text) if is_printed_number(text) else math.nan
    if not math.isfinite(value):
        raise WrongKind(where, field, None, "a finite number", what_to_do, written=text)
    return value


def is_printed_number(text: str) -> bool:
    """Whether ``text`` is a finite number as engines print one (``2.35``, ``1.24938e+06``)."""
    return _PRINTED_NUMBER.fullmatch(text) is not None


def decimal_request_id(text: str, where: str, field: str, what_to_do: str) -> int:
    """An integer request id printed as a decimal, checked as ``check_request_id`` checks it
    and refused showing the decimal as written."""
    value = _decimal(text, MAX_REQUEST_ID + 1, (where, field), what_to_do)
    _check_range(request_id_problem, (where, field), value, what_to_do, text)
    return value
