"""Each request's rows by output position and by draft length: what those figures take from a
request's lines in (t_ns, counts) order, made once per fold, before any figure.

The native pass folds them line by line as it reads (``PartialFold.position_rows``,
``length_rows``), keeping no line: a file holds each writer's lines in time order, so a request's
lines reach the pass in the order the definitions put them in. Those rows stand for a request
when one read of one file met all its lines in order (``line_spans``: one piece not continued
from an earlier read, none out of order) and no line of it went another way (``held_lines``).
Any other request (its lines out of order, in two files, some deferred to the exact parser, or
read by the polars reference) is made again from its lines: read back from the bytes they span
(``fold.folding.native.collect_lines``) beside those held, put in order, and folded by the
reference definitions (``fold.folding.by_position``, ``fold.folding.step_lengths``). Reads of
one file in pieces (a follower's polls) continue each request from where the last left it, so
their rows add up and nothing is read again.

The steps by draft position (the sums file's lists) need only counts, in any order: the pass
counts a request's drafted lines by (proposed, accepted) as it reads them, when asked to
(``PartialFold.draft_tally``), and the lines held are counted from their tokens; no line is
read again for them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from fold.errors import InputError
from fold.folding import native
from fold.folding.accumulate import REQUEST_KEY, SCHEMAS, PartialFold
from fold.folding.by_position import ordered_bucket_sums
from fold.folding.packed_tokens import TOKEN_BITS, TOKEN_MASK
from fold.folding.request_rows import beside
from fold.folding.step_intervals import decoded
from fold.folding.step_lengths import ordered_length_sums

BUCKETS = {
    "request": pl.UInt32(),
    "bucket": pl.Int64(),
    "steps": pl.Int64(),
    "proposed": pl.Int64(),
    "accepted": pl.Int64(),
}
LENGTHS = {
    "request": pl.UInt32(),
    "length": pl.Int64(),
    "intervals": pl.Int64(),
    "ns": pl.Int128(),
}
DRAFT_COUNTS = {
    "request": pl.UInt32(),
    "proposed": pl.Int64(),
    "accepted": pl.Int64(),
    "count": pl.Int64(),
}


@dataclass(frozen=True)
class LineRows:
    """Per request, by its row in the partial's ``step_times`` (``request``): its drafted
    lines' S, P and A per bucket of output position (``buckets``, sorted by request and
    bucket), and per draft length the intervals to its drafted lines and their sum
    (``lengths``). Every request with lines has its rows here, however its lines were read."""

    buckets: pl.DataFrame
    lengths: pl.DataFrame


def line_rows(partial: PartialFold, legs: native.NativeLegs) -> LineRows:
    """The rows of every request of ``partial`` (see the module), reading back the lines of
    those the pass could not fold in order; ``legs``: the arm's legs as the pass took them."""
    if _all_standing(partial):  # one read of one file, in order: the pass's rows as they are
        return LineRows(partial.position_rows.cast(BUCKETS), partial.length_rows.cast(LENGTHS))
    standing = _standing(partial)
    kept = partial.position_rows.filter(pl.col("request").is_in(standing.implode()))
    lengths = partial.length_rows.filter(pl.col("request").is_in(standing.implode()))
    every = pl.Series("request", range(partial.step_times.height), dtype=pl.UInt32)
    again = every.filter(~every.is_in(standing.implode()))
    if again.len():
        lines = _lines_again(partial, again, legs)
        kept = pl.concat([kept.cast(BUCKETS), ordered_bucket_sums(lines).cast(BUCKETS)])
        lengths = pl.concat([lengths.cast(LENGTHS), ordered_length_sums(lines).cast(LENGTHS)])
    buckets = (
        kept.group_by("request", "bucket")
        .agg(pl.col("steps", "proposed", "accepted").sum())
        .sort("request", "bucket")
    )
    lengths = (
        lengths.group_by("request", "length")
        .agg(pl.col("intervals").sum(), pl.col("ns").sum())
        .sort("request", "length")
    )
    return LineRows(buckets.cast(BUCKETS), lengths.cast(LENGTHS))


def hold_unsure(partial: PartialFold, legs: native.NativeLegs) -> PartialFold:
    """``partial`` with the lines of every request whose pass rows do not stand read back now
    and held (``held_lines``), their spans and pass rows dropped: a fold that goes on reading
    (a follower's, a ``LogFold`` given more files) makes them from lines it holds, whatever
    becomes of the files later (removed, rewritten). A log the hook wrote has none."""
    if _all_standing(partial):
        return partial
    standing = _standing(partial)
    unsure = partial.line_spans.filter(~pl.col("request").is_in(standing.implode()))
    if not unsure.height:
        return partial
    again = unsure["request"].unique().sort()
    lines = _lines_again(partial, again, legs)
    held = pl.concat(
        [partial.held_lines.filter(~pl.col("request").is_in(again.implode())), lines]
    ).sort("request")

    def kept(table: pl.DataFrame) -> pl.DataFrame:
        return table.filter(~pl.col("request").is_in(again.implode()))

    return replace(
        partial,
        held_lines=held.cast(SCHEMAS["held_lines"]),
        line_spans=kept(partial.line_spans),
        position_rows=kept(partial.position_rows),
        length_rows=kept(partial.length_rows),
        draft_tally=kept(partial.draft_tally),  # its lines are held now: counted from there
    )


def draft_counts(partial: PartialFold) -> pl.DataFrame:
    """Per request (its row in ``step_times``) and (proposed, accepted), its drafted lines:
    those held, and those the native pass counted as it read (``draft_tally``, where the read
    was asked to count them), in no order, a combination possibly in several rows (reads in
    pieces), whose counts add. Every drafted line is one or the other, or the partial was read
    without counting: a ``ValueError``, since its counts would be short."""
    counted = pl.concat(
        [
            _held_counts(partial.held_lines).cast(DRAFT_COUNTS),
            partial.draft_tally.cast(DRAFT_COUNTS),
        ]
    )
    # Each request's S is its drafted lines: the counts must add up to it.
    steps = np.zeros(partial.step_times.height, dtype=np.int64)
    np.add.at(steps, counted["request"].to_numpy(), counted["count"].to_numpy())
    expected = beside(
        partial.step_times.select(REQUEST_KEY), partial.requests.select(*REQUEST_KEY, "steps")
    )["steps"]
    if not (expected.is_null() | (expected == pl.Series(steps))).all():
        raise ValueError(
            "the drafted lines counted by (proposed, accepted) do not add up to each "
            "request's S: the steps by draft position count the lines as they are read, so a "
            "fold read without counting cannot give them (read with the sums asked for from "
            "the start: fold_acceptance(..., sums=True), LogFold(..., tally_drafts=True)); "
            "otherwise a line was counted twice"
        )
    return counted


def _all_standing(partial: PartialFold) -> bool:
    """Whether every request's native rows stand, each named once (the rows of a fold of one
    file read at once, whose lines came in order: as a table, not request by request)."""
    spans = partial.line_spans
    return (
        partial.held_lines.height == 0
        and spans.height == partial.step_times.height
        and _each_once(spans["request"])
        and bool((spans["unseeded"] == 1).all())
        and not spans["unordered"].any()
    )


def _each_once(requests: pl.Series) -> bool:
    """Whether no request is named twice. A read names them in increasing order, which one
    comparison of neighbours shows (hashing a load test's 10^6 of them took 40 ms a call)."""
    values = requests.to_numpy()
    if bool(np.all(values[1:] > values[:-1])):
        return True
    return bool(requests.is_unique().all())


def _standing(partial: PartialFold) -> pl.Series:
    """The requests whose native rows stand: one piece of one read (not continued from an
    earlier read), none out of order, and no held line."""
    spans = partial.line_spans
    pieces = spans.group_by("request").agg(pl.col("unseeded").sum(), pl.col("unordered").any())
    standing = pieces.filter((pl.col("unseeded") == 1) & ~pl.col("unordered"))["request"]
    return standing.filter(~standing.is_in(partial.held_lines["request"].implode()))


def _by_path(spans: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    return [
        (str(path), table)
        for (path,), table in spans.partition_by("path", as_dict=True, maintain_order=True).items()
    ]


def _lines_again(partial: PartialFold, again: pl.Series, legs: native.NativeLegs) -> pl.DataFrame:
    """The lines of the requests ``again`` (rows in ``step_times``), a row per request:
    ``request``, ``t_ns`` and ``tokens`` lists (held lines and lines read back)."""
    held = partial.held_lines.filter(pl.col("request").is_in(again.implode())).explode(
        "t_ns", "tokens"
    )
    parts = [held.drop_nulls("t_ns").select("request", "t_ns", "tokens")]
    spans = partial.line_spans.filter(pl.col("request").is_in(again.implode()))
    for path, named in _by_path(spans):
        parts.append(_read_back(path, named, partial.step_times, legs))
    lines = pl.concat(
        [part.cast({"request": pl.UInt32, "t_ns": pl.Int64, "tokens": pl.Int64}) for part in parts]
    )
    found = lines.group_by("request").agg("t_ns", "tokens").sort("request")
    _check_read_back(found, partial.step_times, again, _paths(spans))
    return found


def _check_read_back(
    found: pl.DataFrame, step_times: pl.DataFrame, again: pl.Series, paths: str
) -> None:
    """Each request's lines read back and held are the lines the read met (their times, as a
    multiset), or the file changed between the two reads: refused, not folded."""
    met = decoded(step_times[again]).to_frame("t_ns")
    read = found.select(pl.col("t_ns").list.sort())
    if found["request"].to_list() != again.to_list() or not met.equals(read):
        raise _changed(paths, "its lines read again for their order are not the lines first read")


def _changed(paths: str, what: str) -> InputError:
    return InputError(
        f"{paths}: the step log changed while it was read: {what} (was it rewritten, or "
        "truncated and written again?); fold it again once its writer is done"
    )


def _paths(spans: pl.DataFrame) -> str:
    return ", ".join(sorted({str(path) for path in spans["path"].unique().to_list()}))


READ_BACK_GAP = 64 << 20
"""Spans of requests read back closer than this many bytes are read in one go; farther ones
apart, so that two requests at either end of a large log do not read all of it again."""


def _read_back(
    path: str,
    spans: pl.DataFrame,
    step_times: pl.DataFrame,
    legs: native.NativeLegs,
) -> pl.DataFrame:
    """The requests' lines read back from the bytes their spans cover in
    ``path``, spans less than ``READ_BACK_GAP`` apart in one read; ``request`` in the result is
    the request's row in ``step_times``, as in ``spans``."""
    ordered = spans.with_row_index("row").sort("first_offset")
    starts = ordered["first_offset"].to_list()
    ends = ordered["last_end"].to_list()
    groups: list[tuple[int, int, list[int]]] = []  # (begin, end, rows of spans)
    for index, (begin, end) in enumerate(zip(starts, ends, strict=True)):
        if groups and begin <= groups[-1][1] + READ_BACK_GAP:
            first, last, members = groups[-1]
            members.append(index)  # in place: a load test's 10^6 spans are one group
            groups[-1] = (first, max(last, end), members)
        else:
            groups.append((begin, end, [index]))
    keys = step_times.select(REQUEST_KEY)[spans["request"]]
    rows = ordered["row"]
    requests = spans["request"]
    parts = []
    for begin, end, members in groups:
        chosen = rows.gather(members)
        # Each request's lines from its own span only: the bytes between spans read together
        # may hold lines of a request a fold goes on reading that it holds already.
        bounds = (
            spans["first_offset"].gather(chosen).to_list(),
            spans["last_end"].gather(chosen).to_list(),
        )
        try:
            found = native.collect_lines(path, begin, end, legs, keys[chosen], spans=bounds)
        except OSError as error:
            raise InputError(
                f"{path}: cannot read the step log again for its requests' lines in order: {error}"
            ) from error
        parts.append(found.with_columns(requests.gather(chosen.gather(found["request"]))))
    return pl.concat(parts)


def _held_counts(held: pl.DataFrame) -> pl.DataFrame:
    lines = held.select("request", "tokens").explode("tokens").drop_nulls("tokens")
    return (
        lines.select(
            "request",
            (pl.col("tokens") & TOKEN_MASK).alias("proposed"),
            ((pl.col("tokens") // (1 << TOKEN_BITS)) & TOKEN_MASK).alias("accepted"),
        )
        .filter(pl.col("proposed") > 0)  # as the pass counts: the drafted lines
        .group_by("request", "proposed", "accepted")
        .len("count")
    )
