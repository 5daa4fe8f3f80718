"""Partial folds: the sums a fold needs, kept so that two partial folds merge into one.

A partial fold holds counts and sums keyed by leg (and by request, histogram bucket (proposed,
accepted), time bin, writer, file), and per request the times of its attributed lines as their
intervals (``step_times``: 4 bytes a line, ``fold.folding.step_intervals``, for the step
cadence). What the figures by output position and
per draft length take from a request's lines in order is folded as the native pass reads them
(``position_rows``, ``length_rows``, with the bytes the lines span in ``line_spans``); the
polars reference keeps each line's time and counts instead (``held_lines``), and
``fold.folding.line_rows`` makes both into the same rows. Asked to, the native pass also
counts each request's drafted lines by (proposed, accepted) (``draft_tally``). Folding a
log in blocks, in any order, split across any files, and merging the partials gives exactly the
fold of the whole log; this is what lets the fold follow a growing file and run on both cores.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from fold.folding.step_intervals import COLUMNS as STEP_INTERVALS
from fold.folding.step_intervals import encode
from fold.folding.writers import sum_mod_64
from fold.inputs import limits

MERGE_EVERY = 16
"""Partials are merged a batch of this many at a time: fewer re-sorts, memory still bounded."""

REQUEST_KEY = ["leg", "w", "sid", "seq"]
"""A request in a leg: its writer and its id, an integer ``seq`` or a string ``sid`` (then
``seq`` is 0). In this order, with nulls first: a writer's integer ids in their order, then
its string ids by their bytes."""


def request_id(seq: int, sid: str | None) -> int | str:
    """The request's id as the log wrote it: 7 and "7" stay two requests."""
    return seq if sid is None else sid


# Each leg's window is cut into this many equal time bins; windows of steps are built from them.
TIME_BINS_PER_LEG = 512

DURATION_SUMS = ("timed_steps", "draft_steps", "verify_steps", "draft_ns", "verify_ns")
"""A request's step durations (FORMAT.md's optional ``draft_ns`` and ``verify_ns``): the lines
that carried both keys, the lines that carried each, and each key's sum in nanoseconds. Lines,
not only drafted steps: a forward that verified no draft still took its time. The two counts
differ when a writer times one part only; a part's mean is its sum over its own count."""

FIRST_STEP = ("first_t_ns", "first_n", "first_draft_ns", "first_verify_ns")
"""A request's first line, by (``t_ns``, ``n``, then its durations, a missing one first), and
its durations (null where it carried none): the first step's drafting and verifying come before
the request's decode window, so the step split leaves them out (``fold.folding.step_split``).
Merged by taking the first of the two, not by adding."""

_LEG_SUMS = {
    "lines": pl.Int64,
    "steps": pl.Int64,
    "proposed": pl.Int64,
    "accepted": pl.Int64,
    "emitted": pl.Int64,
    "emitted_lines": pl.Int64,
    "max_proposed": pl.Int64,
}
SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "legs": {"leg": pl.Int64(), **{name: dtype() for name, dtype in _LEG_SUMS.items()}},
    "histogram": {
        "leg": pl.Int64(),
        "proposed": pl.Int64(),
        "accepted": pl.Int64(),
        "count": pl.Int64(),
    },
    "requests": {
        "leg": pl.Int64(),
        "w": pl.String(),
        "seq": pl.UInt64(),
        "sid": pl.String(),
        "lines": pl.Int64(),
        "steps": pl.Int64(),
        "proposed": pl.Int64(),
        "accepted": pl.Int64(),
        **{name: pl.Int64() for name in FIRST_STEP},
    },
    "bins": {
        "leg": pl.Int64(),
        "bin": pl.Int64(),
        "steps": pl.Int64(),
        "proposed": pl.Int64(),
        "accepted": pl.Int64(),
    },
    "writers": {
        "w": pl.String(),
        "pid": pl.Int64(),
        "lines": pl.Int64(),
        "max_n": pl.Int64(),
        "sum_n": pl.UInt64(),
    },
    "step_times": {
        "leg": pl.Int64(),
        "w": pl.String(),
        "seq": pl.UInt64(),
        "sid": pl.String(),
        **STEP_INTERVALS,
    },
    "held_lines": {
        "request": pl.UInt32(),
        "t_ns": pl.List(pl.Int64()),
        "tokens": pl.List(pl.Int64()),
    },
    "position_rows": {
        "request": pl.UInt32(),
        "bucket": pl.Int64(),
        "steps": pl.Int64(),
        "proposed": pl.Int64(),
        "accepted": pl.Int64(),
    },
    "length_rows": {
        "request": pl.UInt32(),
        "length": pl.Int64(),
        "intervals": pl.Int64(),
        "ns": pl.Int128(),
    },
    "draft_tally": {
        "request": pl.UInt32(),
        "proposed": pl.Int64(),
        "accepted": pl.Int64(),
        "count": pl.Int64(),
    },
    "line_spans": {
        "request": pl.UInt32(),
        "path": pl.Categorical(),
        "first_offset": pl.Int64(),
        "last_end": pl.Int64(),
        "unseeded": pl.Int64(),
        "unordered": pl.Boolean(),
    },
    "files": {
        "path": pl.String(),
        "lines": pl.Int64(),
        "attributed": pl.Int64(),
        "unattributed": pl.Int64(),
        "ambiguous": pl.Int64(),
    },
    "durations": {
        "leg": pl.Int64(),
        "w": pl.String(),
        "seq": pl.UInt64(),
        "sid": pl.String(),
        **{name: pl.Int64() for name in DURATION_SUMS},
    },
}
# The per-request sums every fold path produces before ``assemble`` splits them into the
# request, leg and writer tables (the writers' columns ride along per request).
PER_REQUEST_SCHEMA: dict[str, pl.DataType] = {
    **SCHEMAS["requests"],
    "emitted": pl.Int64(),
    "emitted_lines": pl.Int64(),
    "max_proposed": pl.Int64(),
    "max_n": pl.Int64(),
    "sum_n": pl.UInt64(),
    "pid": pl.Int64(),
    "t_ns": pl.List(pl.Int64()),
    "tokens": pl.List(pl.Int64()),
}
LINE_LISTS = ("t_ns", "tokens")
"""The per-request lists of ``held_lines``, a value per attributed line, aligned: merged by
concatenation, so their order is arbitrary but the same in both."""

TABLE_KEYS = {
    "legs": ["leg"],
    "histogram": ["leg", "proposed", "accepted"],
    "requests": REQUEST_KEY,
    "bins": ["leg", "bin"],
    "writers": ["w"],
    "step_times": REQUEST_KEY,
    "held_lines": ["request"],
    "position_rows": ["request", "bucket"],
    "length_rows": ["request", "length"],
    "draft_tally": ["request", "proposed", "accepted"],
    "line_spans": ["request", "path"],
    "files": ["path"],
    "durations": REQUEST_KEY,
}


def empty_table(name: str) -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMAS[name])


@dataclass
class PartialFold:
    legs: pl.DataFrame = field(default_factory=lambda: empty_table("legs"))
    histogram: pl.DataFrame = field(default_factory=lambda: empty_table("histogram"))
    requests: pl.DataFrame = field(default_factory=lambda: empty_table("requests"))
    bins: pl.DataFrame = field(default_factory=lambda: empty_table("bins"))
    writers: pl.DataFrame = field(default_factory=lambda: empty_table("writers"))
    step_times: pl.DataFrame = field(default_factory=lambda: empty_table("step_times"))
    """Per request (leg, writer, seq): the t_ns of every line attributed to it, proposed = 0
    included, as its first time and the intervals between them in time order
    (``fold.folding.step_intervals``). One row per request, the rows sorted by
    ``REQUEST_KEY`` (nulls first, as polars sorts): every path that makes or merges them does,
    and the bootstrap by output position takes its requests' order from the rows
    (``tests/test_step_times_order.py`` holds every path to it)."""
    held_lines: pl.DataFrame = field(default_factory=lambda: empty_table("held_lines"))
    """Per request (its row in ``step_times``), the lines the polars reference read (each
    line's time, and its counts packed as ``packed_tokens`` packs them, in the same order): a
    native pass keeps none."""
    position_rows: pl.DataFrame = field(default_factory=lambda: empty_table("position_rows"))
    """Per request and bucket of output position, its drafted lines' S, P and A, as the native
    pass folded them in file order (``fold.folding.line_rows`` says when they stand)."""
    length_rows: pl.DataFrame = field(default_factory=lambda: empty_table("length_rows"))
    """Per request and draft length, the intervals to its drafted lines and their sum, as the
    native pass folded them."""
    draft_tally: pl.DataFrame = field(default_factory=lambda: empty_table("draft_tally"))
    """Per request and (proposed, accepted), the drafted lines the native pass met, where the
    read was asked to count them (the sums file's steps by draft position): a request's lines
    held (``held_lines``) are not among them."""
    line_spans: pl.DataFrame = field(default_factory=lambda: empty_table("line_spans"))
    """Per request and file the native pass read: the bytes its lines span (from the first's
    start to the last's end), how many reads met it without continuing it from an earlier
    read of the file (``unseeded``), and whether a line came out of (t_ns, counts) order."""
    files: pl.DataFrame = field(default_factory=lambda: empty_table("files"))
    durations: pl.DataFrame = field(default_factory=lambda: empty_table("durations"))
    """Per request in a leg that carried a duration on any line: ``DURATION_SUMS``. Empty
    for a log without durations (every log before them), so those fold as they did."""


def first_line(column: str) -> pl.Expr:
    """``column`` of a request's first line (``FIRST_STEP``'s order) among lines or partial
    folds' first lines: the same column names in both."""
    return pl.col(column).sort_by(list(FIRST_STEP), nulls_last=False).first()


def checked_durations(per_request: pl.DataFrame) -> pl.DataFrame:
    """The per-request duration sums (exact, Int128) as Int64, or RefusedError naming the
    first request in a leg whose sum passes 2^63 - 1 (its lines' durations are each allowed,
    their sum is not). A request in no leg keeps no durations: its sums are not checked."""
    if "draft_ns" not in per_request.columns:
        return per_request
    in_legs = per_request.filter(pl.col("leg").is_not_null())
    for name in ("draft_ns", "verify_ns"):
        past = in_legs.filter(limits.past_total(pl.col(name))).sort(REQUEST_KEY)
        if past.height:
            row = past.row(0, named=True)
            limits.check_total(
                f"leg {row['leg']}, request {request_id(row['seq'], row['sid'])!r} of "
                f"writer {row['w']}",
                f"'{name}'",
                row[name],
                "the engine's step timing is wrong (a step of anywhere near 2^63 ns is "
                "garbage); fix where the hook is given the step's durations",
            )
    # Past 2^63 - 1 only in no leg, where the sums are dropped: null, not an overflow.
    return per_request.with_columns(pl.col("draft_ns", "verify_ns").cast(pl.Int64, strict=False))


def assemble(
    per_request: pl.DataFrame,
    histogram: pl.DataFrame,
    bins: pl.DataFrame,
    files: pl.DataFrame,
    step_times: pl.DataFrame | None = None,
    native_rows: dict[str, pl.DataFrame] | None = None,
) -> PartialFold:
    """The partial fold of per-request sums (``PER_REQUEST_SCHEMA``, and ``DURATION_SUMS``
    when the fold path kept them). The step times come from the per-request ``t_ns`` lists (and
    the held lines with ``tokens`` beside them), or ready-made and sorted (the native pass's,
    uncopied, with its ``native_rows``: ``position_rows``, ``length_rows``, ``draft_tally``,
    ``line_spans``)."""
    writers = (
        per_request.group_by("w")
        .agg(
            pl.col("pid").max(),
            pl.col("lines").sum(),
            pl.col("max_n").max(),
            sum_mod_64("sum_n"),
        )
        .sort("w")
    )
    held_lines = empty_table("held_lines")
    if step_times is None:
        lines = (
            per_request.filter(pl.col("leg").is_not_null())
            .select(*REQUEST_KEY, *LINE_LISTS)
            .sort(REQUEST_KEY)
        )
        step_times = encode(lines.select(*REQUEST_KEY, "t_ns"))
        held_lines = lines.select(*LINE_LISTS).with_row_index("request")
        per_request = per_request.drop(*LINE_LISTS)
        in_legs = per_request.filter(pl.col("leg").is_not_null()).sort(REQUEST_KEY)
    else:
        in_legs = _leading_requests(per_request, step_times.height)
    durations = empty_table("durations")
    if "timed_steps" in in_legs.columns:
        timed = (pl.col("draft_steps") + pl.col("verify_steps")) > 0
        durations = in_legs.filter(timed).sort(REQUEST_KEY).select(list(SCHEMAS["durations"]))
    leg_sums = (
        in_legs.group_by("leg")
        .agg(
            pl.col("lines", "steps", "proposed", "accepted", "emitted", "emitted_lines").sum(),
            pl.col("max_proposed").max(),
        )
        .sort("leg")
    )
    return PartialFold(
        legs=leg_sums.select(list(SCHEMAS["legs"])),
        histogram=histogram.sort(TABLE_KEYS["histogram"]).select(list(SCHEMAS["histogram"])),
        requests=in_legs.select(list(SCHEMAS["requests"])),
        step_times=step_times.select(list(SCHEMAS["step_times"])).cast(SCHEMAS["step_times"]),
        held_lines=held_lines.cast(SCHEMAS["held_lines"]),
        **(native_rows or {}),
        bins=bins.sort("leg", "bin").select(list(SCHEMAS["bins"])),
        writers=writers.select(list(SCHEMAS["writers"])),
        files=files,
        durations=durations,
    )


def _leading_requests(per_request: pl.DataFrame, count: int) -> pl.DataFrame:
    """The requests in legs of a fold whose step times came ready-made (``count`` rows): the
    native pass puts them first, in key order, so they are a slice of its rows. A filter and a
    sort copied every column twice, at the read's peak on a load test's 10^6 requests. The
    slice is checked, and rows in any other order are filtered and sorted as before."""
    leading = per_request.head(count)
    rest = per_request.slice(count)
    if (
        leading["leg"].null_count() == 0
        and rest["leg"].null_count() == rest.height
        and keys_increase(leading)
    ):
        return leading
    return per_request.filter(pl.col("leg").is_not_null()).sort(REQUEST_KEY)


def keys_increase(frame: pl.DataFrame) -> bool:
    """Whether each row's ``REQUEST_KEY`` comes strictly after the row before's, as polars
    sorts them (nulls first): the rows are in key order with no request twice."""
    if frame.height < 2:
        return True

    def after(name: str) -> pl.Expr:
        now, before = pl.col(name), pl.col(name).shift(1)
        return (now.is_not_null() & before.is_null()) | (now > before).fill_null(False)

    def same(name: str) -> pl.Expr:
        return pl.col(name).eq_missing(pl.col(name).shift(1))

    later = pl.lit(False)
    for name in reversed(REQUEST_KEY):
        later = after(name) | same(name) & later
    return bool(frame.select(later.slice(1).all()).item())


def at_request_places(count: int, table: pl.DataFrame) -> pl.DataFrame:
    """``table``'s columns but ``request`` (a request's row in ``step_times``, each at most
    once) as ``count`` rows, each request's values at its row and nulls where it has none:
    the table as it is when it already has every row in order, else a join of the rows'
    places alone (a join of the partial's tables copied every list they carried)."""
    places = pl.DataFrame(
        {"request": pl.int_range(count, dtype=table.schema["request"], eager=True)}
    )
    if table.height == count and table["request"].equals(places["request"]):
        return table.drop("request")
    return places.join(table, on="request", how="left", maintain_order="left").drop("request")
