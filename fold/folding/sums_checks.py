"""What a sums file's rows may hold (``fold.folding.from_sums`` reads them): every invariant the
merge and the figures assume of a partial fold, checked before a row is folded, so that a
damaged or hand-made file is refused with its place and reason instead of folding into wrong
figures or failing inside them.

A rule is a condition every row meets. A value out of its range (a count below 0, a bucket past
the last) is malformed (``InputError``, exit 2); values that cannot be true together (a request's
position rows that do not add up to its S, P and A) are refused (``RefusedError``, exit 1), as
the step log's own rules are (``fold.inputs.limits``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from fold.errors import FoldError, InputError, RefusedError
from fold.folding.accumulate import DURATION_SUMS
from fold.folding.by_position import MAX_BUCKETS
from fold.folding.packed_tokens import TOKEN_BITS, TOKEN_MASK
from fold.folding.request_positions import POSITION_LISTS
from fold.folding.step_intervals import COLUMNS as STEP_INTERVALS
from fold.folding.step_intervals import LONG, decoded
from fold.inputs.limits import (
    count_in_range,
    counts_possible,
    duration_in_range,
    step_possible,
    step_tokens_in_range,
)
from fold.inputs.sums_file import REDO


@dataclass(frozen=True)
class Rule:
    holds: pl.Expr
    """True where a row keeps the rule (null counts as broken)."""
    words: str
    kind: type[FoldError] = InputError


def _count(column: str, least: int = 0) -> pl.Expr:
    return count_in_range(pl.col(column), least)


def _field(name: str) -> pl.Expr:
    return pl.element().struct.field(name)


def _list_all(column: str, condition: pl.Expr) -> pl.Expr:
    """Every element of the list ``column`` meets ``condition`` (on ``pl.element()``); an
    element the condition is null for (a null element, a null field) does not."""
    return pl.col(column).list.eval(condition.fill_null(False).not_()).list.any().not_()


def _field_sum(column: str, name: str) -> pl.Expr:
    return pl.col(column).list.eval(pl.element().struct.field(name).cast(pl.Int128)).list.sum()


def _field_increases(column: str, name: str) -> pl.Expr:
    values = pl.element().struct.field(name)
    return _list_all(column, values.diff().fill_null(1) > 0)


def _token(shift: int) -> pl.Expr:
    return (pl.element() // (1 << shift)) % (1 << TOKEN_BITS)


def _held_sum(shift: int) -> pl.Expr:
    """The sum of one packed count over a request's held lines (0: proposed, 17: accepted)."""
    return pl.col("held_tokens").list.eval(_token(shift).cast(pl.Int128)).list.sum()


HELD = pl.col("held_t_ns").is_not_null()
NOT_NULL = (
    "leg",
    "w",
    *("lines", "steps", "proposed", "accepted"),
    *("first_ns", "gaps", "long_gaps", "position_rows", "length_rows"),
    *POSITION_LISTS,
)
LISTS = (
    "gaps",
    "long_gaps",
    "held_t_ns",
    "held_tokens",
    "position_rows",
    "length_rows",
    *POSITION_LISTS,
)
"""The list columns: an element of one is never null (a held request's lists are null whole)."""
LAST_NS = (
    pl.col("first_ns").cast(pl.Int128)
    + pl.col("gaps").list.eval(pl.element().filter(pl.element() < LONG).cast(pl.Int128)).list.sum()
    + pl.col("long_gaps").list.eval(pl.element().cast(pl.Int128)).list.sum()
)
_DURATIONS_PRESENT = pl.col("timed_steps").is_not_null()


def row_rules(legs: Sequence[int], timed: bool) -> list[Rule]:
    """The rules a row keeps, in the order they are checked (a later rule may assume the
    earlier: a list's sum is taken once its elements are in range). ``timed``: the steps carry
    times (the hook's log; the engine's trace numbers them instead, and has no first line)."""
    first = pl.col("first_t_ns").is_not_null() & pl.col("first_n").is_not_null()
    untimed = pl.col("first_t_ns").is_null() & pl.col("first_n").is_null()
    positions = "position_rows"
    lengths = "length_rows"
    return [
        *(Rule(pl.col(name).is_not_null(), f"{name} is null") for name in NOT_NULL),
        *(
            # A list null whole (a request not held has no held lines) holds no null.
            Rule(
                _list_all(name, pl.element().is_not_null()).fill_null(True), f"{name} holds a null"
            )
            for name in LISTS
        ),
        Rule(
            pl.col("seq").is_null() != pl.col("sid").is_null(),
            "the request has both an integer id (seq) and a string id (sid), or neither",
        ),
        Rule(pl.col("leg").is_in(list(legs)), "the leg is not one of the arm record's legs"),
        Rule(_count("lines", 1), "lines is not between 1 and 2^63 - 1"),
        Rule(_count("steps"), "steps (S) is not between 0 and 2^63 - 1"),
        Rule(_count("proposed"), "proposed (P) is not between 0 and 2^63 - 1"),
        Rule(_count("accepted"), "accepted (A) is not between 0 and 2^63 - 1"),
        Rule(
            first if timed else untimed,
            "first_t_ns and first_n are null, or set where the steps have no times",
        ),
        Rule(
            ~first | _count("first_n"),
            "first_n is not between 0 and 2^63 - 1",
        ),
        Rule(
            ~first | duration_in_range(pl.col("first_t_ns")),
            "first_t_ns is not between 0 and 2^63 - 1",
        ),
        Rule(duration_in_range(pl.col("first_ns")), "first_ns is not between 0 and 2^63 - 1"),
        Rule(
            pl.col("steps") <= pl.col("lines"),
            "steps (S) exceed its lines",
            RefusedError,
        ),
        Rule(
            counts_possible(pl.col("steps"), pl.col("proposed"), pl.col("accepted")),
            "S, P and A cannot be true together (S <= P <= S x 2^16, A <= P)",
            RefusedError,
        ),
        Rule(
            ~first | (pl.col("first_ns") == pl.col("first_t_ns")),
            "first_ns is not first_t_ns",
            RefusedError,
        ),
        Rule(
            pl.col("gaps").list.len() == pl.col("lines") - 1,
            "its intervals (gaps) are not one fewer than its lines",
            RefusedError,
        ),
        Rule(_list_all("long_gaps", pl.element() >= LONG), "a long interval is under 2^32 - 1"),
        Rule(
            pl.col("gaps").list.eval(pl.element() == LONG).list.sum()
            == pl.col("long_gaps").list.len(),
            "its long intervals (long_gaps) are not the gaps written 2^32 - 1",
            RefusedError,
        ),
        Rule(duration_in_range(LAST_NS), "its last step time is past 2^63 - 1 ns", RefusedError),
        Rule(
            pl.col("held_t_ns").is_null() == pl.col("held_tokens").is_null(),
            "held_t_ns and held_tokens are not both null or both lists",
            RefusedError,
        ),
        Rule(
            ~HELD
            | (
                (pl.col("held_t_ns").list.len() == pl.col("lines"))
                & (pl.col("held_tokens").list.len() == pl.col("lines"))
            ),
            "its held lines are not as many as its lines",
            RefusedError,
        ),
        Rule(
            ~HELD | ((pl.col(positions).list.len() == 0) & (pl.col(lengths).list.len() == 0)),
            "it has both held lines and rows folded from its lines",
            RefusedError,
        ),
        Rule(
            ~HELD
            | _list_all(
                "held_tokens",
                pl.element().is_between(0, (1 << (3 * TOKEN_BITS)) - 1)
                & step_tokens_in_range(_token(0))
                & step_possible(_token(0), _token(TOKEN_BITS))
                & (
                    (_token(2 * TOKEN_BITS) == 0) | step_tokens_in_range(_token(2 * TOKEN_BITS) - 1)
                ),
            ),
            "a held line's counts are out of range (packed as fold.folding.packed_tokens)",
        ),
        Rule(
            ~HELD
            | (
                (_held_sum(0) == pl.col("proposed"))
                & (_held_sum(TOKEN_BITS) == pl.col("accepted"))
                & (
                    pl.col("held_tokens").list.eval((pl.element() & TOKEN_MASK) > 0).list.sum()
                    == pl.col("steps")
                )
            ),
            "its held lines' counts do not add up to its S, P and A",
            RefusedError,
        ),
        Rule(
            _list_all(positions, _field("bucket").is_between(0, MAX_BUCKETS - 1))
            & _list_all(positions, count_in_range(_field("steps"), 1))
            & _list_all(positions, count_in_range(_field("proposed"), 1))
            & _list_all(positions, count_in_range(_field("accepted"))),
            f"a position row is out of range (bucket 0 to {MAX_BUCKETS - 1}, counts from 0)",
        ),
        Rule(
            _list_all(
                positions, counts_possible(_field("steps"), _field("proposed"), _field("accepted"))
            ),
            "a position row's S, P and A cannot be true together (S <= P <= S x 2^16, A <= P)",
            RefusedError,
        ),
        Rule(
            _field_increases(positions, "bucket"),
            "its position rows' buckets do not increase",
            RefusedError,
        ),
        Rule(
            HELD
            | (
                (_field_sum(positions, "steps") == pl.col("steps"))
                & (_field_sum(positions, "proposed") == pl.col("proposed"))
                & (_field_sum(positions, "accepted") == pl.col("accepted"))
            ),
            "its position rows do not add up to its S, P and A",
            RefusedError,
        ),
        Rule(
            _list_all(lengths, step_tokens_in_range(_field("length"), 1))
            & _list_all(lengths, count_in_range(_field("intervals"), 1))
            & _list_all(lengths, duration_in_range(_field("ns"))),
            "a length row is out of range (length 1 to 2^16, intervals from 1, ns from 0)",
        ),
        Rule(
            _field_increases(lengths, "length"),
            "its length rows' lengths do not increase",
            RefusedError,
        ),
        Rule(
            (_field_sum(lengths, "intervals") <= pl.col("steps"))
            & (_field_sum(lengths, "intervals") <= pl.col("lines") - 1)
            & (_field_sum(lengths, "ns") <= LAST_NS - pl.col("first_ns")),
            "its length rows hold more intervals or time than its steps span",
            RefusedError,
        ),
        *_position_list_rules(),
        *_duration_rules(),
    ]


def _least_difference(left: pl.Expr, right: pl.Expr) -> pl.Expr:
    """The least ``left[i] - right[i]`` over the positions both lists have (null when none):
    cut to one length, so that lists of two lengths (an earlier rule's) do not stop the
    evaluation of every rule."""
    both = pl.min_horizontal(left.list.len(), right.list.len())
    return (left.list.head(both) - right.list.head(both)).list.min()


def _never_grows(column: str) -> pl.Expr:
    values = pl.col(column)
    return (values.list.slice(1) - values.list.head(values.list.len() - 1)).list.max() <= 0


def _position_list_rules() -> list[Rule]:
    """A request's steps by draft position (``fold.folding.request_positions``): --from-sums
    does not fold them, but an engine reading the file does (its per-position rates)."""
    accepted, proposed = (pl.col(name) for name in POSITION_LISTS)
    longest = proposed.list.len()
    return [
        Rule(
            _list_all("accepted_past", count_in_range(pl.element()))
            & _list_all("proposed_past", count_in_range(pl.element()))
            & step_tokens_in_range(longest),
            "accepted_past or proposed_past holds a count out of range, or is longer than "
            "a step's largest proposal (2^16)",
        ),
        Rule(
            (accepted.list.len() == longest) & ((longest == 0) == (pl.col("steps") == 0)),
            "accepted_past and proposed_past are not as long as each other, or are empty "
            "where it has steps (or not where it has none)",
            RefusedError,
        ),
        Rule(
            (longest == 0)
            | (
                (proposed.list.first() == pl.col("steps"))
                & (proposed.list.last() > 0)
                & (
                    proposed.list.eval(pl.element().cast(pl.Int128)).list.sum()
                    == pl.col("proposed")
                )
                & (
                    accepted.list.eval(pl.element().cast(pl.Int128)).list.sum()
                    == pl.col("accepted")
                )
            ),
            "its steps by draft position (accepted_past, proposed_past) do not add up to its "
            "S, P and A, or run past its largest proposal",
            RefusedError,
        ),
        Rule(
            ((longest <= 1) | (_never_grows("accepted_past") & _never_grows("proposed_past")))
            & ((longest == 0) | (_least_difference(proposed, accepted) >= 0)),
            "its steps by draft position grow with the position, or accept past a position "
            "more often than they drafted it",
            RefusedError,
        ),
        Rule(
            pl.col("length_rows").list.eval(_field("length")).list.max().fill_null(0) <= longest,
            "a length row's draft length is longer than the request's largest proposal "
            "(proposed_past's length)",
            RefusedError,
        ),
    ]


def _duration_rules() -> list[Rule]:
    present = [pl.col(name).is_not_null() for name in DURATION_SUMS]
    counts = ("timed_steps", "draft_steps", "verify_steps")
    return [
        Rule(
            pl.all_horizontal(present) | ~pl.any_horizontal(present),
            f"its step durations ({', '.join(DURATION_SUMS)}) are not all null or all set",
            RefusedError,
        ),
        Rule(
            ~_DURATIONS_PRESENT
            | pl.all_horizontal(_count(name) for name in counts)
            & pl.all_horizontal(
                duration_in_range(pl.col(name)) for name in ("draft_ns", "verify_ns")
            ),
            "a step duration count or sum is out of range (0 to 2^63 - 1)",
        ),
        Rule(
            ~_DURATIONS_PRESENT
            | (
                (pl.col("timed_steps") <= pl.min_horizontal("draft_steps", "verify_steps"))
                & (pl.max_horizontal("draft_steps", "verify_steps") <= pl.col("lines"))
            ),
            "its timed steps cannot be true together (timed <= draft, verify <= lines)",
            RefusedError,
        ),
        Rule(
            pl.all_horizontal(
                pl.col(name).is_null() | (_DURATIONS_PRESENT & duration_in_range(pl.col(name)))
                for name in ("first_draft_ns", "first_verify_ns")
            ),
            "its first line's durations are out of range or set without the request's sums",
        ),
        Rule(
            pl.all_horizontal(
                pl.col(first).is_null() | (pl.col(first) <= pl.col(total))
                for first, total in (
                    ("first_draft_ns", "draft_ns"),
                    ("first_verify_ns", "verify_ns"),
                )
            ),
            "its first line's durations exceed the request's sums of them",
            RefusedError,
        ),
    ]


def check_rows(table: pl.DataFrame, legs: Sequence[int], timed: bool, path: str) -> None:
    """``table``'s rows (the sums file's, ``FILE_SCHEMA``) keep every ``row_rules``, and name
    each request of a leg once; else the first broken rule's error, naming its first row."""
    rules = row_rules(legs, timed)
    broken = table.select(
        [(~rule.holds.fill_null(False)).any().alias(str(index)) for index, rule in enumerate(rules)]
    ).row(0)
    for rule, any_broken in zip(rules, broken, strict=True):
        if any_broken:
            row = (
                table.with_row_index("row").filter(~rule.holds.fill_null(False)).row(0, named=True)
            )
            raise rule.kind(f"{_where(path, row)}: {rule.words}; {REDO}")
    held = table.with_row_index("row").filter(HELD)
    if held.height:
        # The times a held request's lines carry are its intervals' times, as a multiset.
        times = decoded(held.select(list(STEP_INTERVALS)))
        differ = held.filter(~(held["held_t_ns"].list.sort() == times).fill_null(False))
        if differ.height:
            raise RefusedError(
                f"{_where(path, differ.row(0, named=True))}: its held lines' times are not "
                f"the times of its intervals; {REDO}"
            )
    twice = table.with_row_index("row").filter(pl.struct("leg", "w", "seq", "sid").is_duplicated())
    if twice.height:
        raise RefusedError(f"{_where(path, twice.row(0, named=True))}: the request has two rows")


def _where(path: str, row: dict) -> str:
    request = row["seq"] if row["sid"] is None else repr(row["sid"])
    return (
        f"{path}: row {row['row'] + 1} (leg {row['leg']}, writer {row['w']!r}, request {request})"
    )
