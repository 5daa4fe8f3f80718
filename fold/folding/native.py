"""The native reader (``fold._native``): read, attribute and fold a byte range of a step log in
one C++ pass, into the same ``PartialFold`` the polars reference builds.

The pass parses any valid v1 line (any key order, whitespace, unknown keys, escaped and UTF-8
labels), attributes it by the segments ``fold.folding.attribute`` cuts (overlapping windows resolved
by the line's label), and folds it; no Python object is built per line. Lines it does not
fold come back by place, and ``fold.inputs.reader.judge_line`` decides them in file order, so every
error and skipped example is worded by the one exact parser:

- bad lines (not a v1 step): an ``InputError`` naming file and line, or, with skip_bad_lines,
  counted (the first few worded);
- refused lines (a step breaking ``fold.inputs.limits.step_problem``'s rule, handed back with
  the rule's number): a ``RefusedError`` naming the line, worded by ``limits``;
- deferred lines: valid JSON that only the exact parser may judge (a sign on an integer, a
  duplicate key, an escaped key or writer id, a writer id not in the writers' form); they are
  folded by the polars reference and merged. No shipped writer produces them.

The extension is optional: without a compiler at install time, or with the environment
variable ``FOLD_ACCEPTANCE_NATIVE=0``, ``available()`` is false and files go to the polars
reader (``fold.inputs.reader.StepLogReader``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import polars as pl

from fold.folding.accumulate import (
    DURATION_SUMS,
    FIRST_STEP,
    LINE_LISTS,
    PER_REQUEST_SCHEMA,
    REQUEST_KEY,
    SCHEMAS,
    TIME_BINS_PER_LEG,
    PartialFold,
    assemble,
)
from fold.folding.attribute import ATTRIBUTED, UNATTRIBUTED, LegWindows, attribute
from fold.folding.block_fold import partial_fold
from fold.folding.extension import load_extension
from fold.folding.merge import merge_all
from fold.folding.native_rows import (
    frame_of,
    key_columns,
    line_rows_of,
    lookup,
    seed_columns,
    seeds_of,
    series,
    steps_of,
)
from fold.inputs.limits import StepRule
from fold.inputs.reader import (
    MAX_SKIPPED_EXAMPLES,
    ReadCounts,
    judge_line,
    refuse_impossible_step,
    row_frame,
)

_native: Any
_native, STALE = load_extension()
"""The extension (None: not built, or built from other sources) and why it is not used, or
None (``fold.folding.extension``)."""

ENVIRONMENT_SWITCH = "FOLD_ACCEPTANCE_NATIVE"

BYTES_PER_THREAD: int | None = None
"""Bytes of a range per reading thread when a read does not say; None: the extension's own
(8 MiB). The differential fuzzer sets it small, so that its small logs are read on several
threads and the requests a later range continues are read again."""
_DEFERRED, _BAD, _REFUSED = 0, 1, 2
_PER_LINE_GROUPS, _PER_LINE_TRACE = 1, 2  # what fold_range keeps per line beside its sums


def available() -> bool:
    """Whether the extension is built and not switched off by ``FOLD_ACCEPTANCE_NATIVE=0``."""
    return _native is not None and os.environ.get(ENVIRONMENT_SWITCH, "1").strip() != "0"


@dataclass
class RangeRead:
    """What one native pass over ``path[begin:end]`` gave."""

    partial: PartialFold
    consumed: int
    """The offset after the last newline read: the next read starts there."""
    end: int
    """The end of the range read (the file's size when the range was open-ended)."""
    lines: int
    """Newline-ended lines read, whatever became of them."""
    steps: pl.DataFrame | None
    """With ``want_steps``: every folded line's ``w``, ``label``, ``t_ns``, ``proposed`` and
    ``accepted`` (the follower's provisional groups)."""
    attributed_lines: pl.DataFrame | None = None
    """With ``want_lines``: every attributed line's ``leg``, ``w``, ``seq``, ``t_ns``, ``pid``,
    ``proposed``, ``accepted`` and ``emitted`` (null where absent), in file order but for
    lines the exact parser judged (last); for the trace."""
    seeds: pl.DataFrame | None = None
    """With ``keep_seeds``: where the read left each request it met (``native_rows``'
    ``SEED_SCHEMA``), for the next read of the same file to go on from; None when no read may
    go on from this one."""


@dataclass(frozen=True)
class NativeLegs:
    """The leg windows as the extension takes them (see ``fold.folding.attribute``)."""

    arguments: tuple[Any, ...]

    @classmethod
    def of(cls, legs: pl.DataFrame | None, windows: LegWindows | None) -> NativeLegs:
        if legs is None or windows is None or legs.height == 0:
            return cls(([], [-1], [UNATTRIBUTED], [], [], []))
        size = int(legs["index"].max()) + 1
        starts, spans = [0] * size, [1] * size
        for index, start, end in legs.select("index", "start_ns", "end_ns").iter_rows():
            starts[index], spans[index] = start, end - start + 1
        return cls(
            (
                windows.points.to_list(),
                windows.segment_leg.fill_null(-1).to_list(),
                windows.segment_status.to_list(),
                list(windows.label_leg.iter_rows()),
                starts,
                spans,
            )
        )


def read_range(
    path: str,
    legs: pl.DataFrame | None,
    windows: LegWindows | None,
    native_legs: NativeLegs,
    counts: ReadCounts,
    *,
    begin: int = 0,
    end: int = -1,
    first_line: int = 1,
    skip_bad_lines: bool = False,
    want_steps: bool = False,
    want_lines: bool = False,
    block: int | None = None,
    bytes_per_thread: int | None = None,
    seeds: pl.DataFrame | None = None,
    keep_seeds: bool = False,
    tally_drafts: bool = False,
) -> RangeRead | None:
    """Fold the whole lines of ``path[begin:end]``; what reading met goes into ``counts``.

    ``seeds``: where earlier reads of the file left its requests (``RangeRead.seeds``): each
    request goes on from there, so that the rows of reads in pieces add up. ``keep_seeds``:
    hand back where this read leaves them. ``tally_drafts``: count the drafted lines by
    (proposed, accepted) too (``PartialFold.draft_tally``), for the steps by draft position.

    A last line without its newline is left unread (``consumed`` stops before it): the caller
    counts it torn when the file is complete, or reads it again once its newline arrives.
    Raises the exact parser's ``InputError`` or ``RefusedError`` for the first line in file
    order that calls for one. None when the pass cannot take the range (a sum beyond 64 bits,
    or more than a million deferred lines): the caller reads it with the polars reader.
    """
    share = bytes_per_thread if bytes_per_thread is not None else BYTES_PER_THREAD
    extra = {
        name: value
        for name, value in (("block", block), ("bytes_per_thread", share))
        if value is not None
    }
    per_line = _PER_LINE_GROUPS if want_steps else _PER_LINE_TRACE if want_lines else 0
    raw = _native.fold_range(
        path,
        begin,
        end,
        skip_bad_lines,
        per_line,
        *native_legs.arguments,
        TIME_BINS_PER_LEG,
        **extra,
        seeds=None if seeds is None or not seeds.height else seed_columns(seeds),
        keep_seeds=keep_seeds,
        tally_drafts=tally_drafts,
    )
    try:
        if raw["overflow"]:
            return None
        met = ReadCounts()
        rows = _judge_handed_back(path, raw, met, first_line, skip_bad_lines)
        if raw["stopped"]:
            # The pass stopped at a line the exact parser does not reject: the parser is the
            # authority, and the polars reader reads the range.
            return None
        counts.torn_lines += met.torn_lines
        counts.skipped_lines += met.skipped_lines
        room = max(0, MAX_SKIPPED_EXAMPLES - len(counts.skipped_examples))
        counts.skipped_examples.extend(met.skipped_examples[:room])
        partial = _partial(path, raw)
        steps = steps_of(raw["steps_by_line"]) if want_steps else None
        lines = _attributed_lines(raw) if want_lines else None
        if rows:
            frame = row_frame(rows)
            if windows is not None and legs is not None and legs.height:
                partial = merge_all([partial, partial_fold(frame, windows, legs, path)])
                if lines is not None:
                    attributed = attribute(frame, windows).filter(pl.col("status") == ATTRIBUTED)
                    lines = pl.concat([lines, attributed.select(lines.columns).cast(lines.schema)])
            else:
                partial = merge_all([partial, _unattributed_fold(frame, path)])
            if steps is not None:
                steps = pl.concat([steps, frame.select(steps.columns)])
        left = seeds_of(raw, partial) if keep_seeds else None
        return RangeRead(
            partial, raw["consumed"], raw["size"], raw["lines"], steps, lines, seeds=left
        )
    finally:
        # The columns the partial fold did not take go with the result, and back to the
        # system: glibc would keep them for allocations that after the read are mostly polars'.
        del raw
        _native.release_memory()


_LINES_SCHEMA = {
    "leg": pl.Int64,
    "w": pl.String,
    "seq": pl.UInt64,
    "sid": pl.String,
    "t_ns": pl.Int64,
    "pid": pl.Int64,
    "proposed": pl.Int64,
    "accepted": pl.Int64,
    "emitted": pl.Int64,
}


def _attributed_lines(raw: dict[str, Any]) -> pl.DataFrame:
    """The pass's attributed lines (``trace_lines``) with writer ids and null for no emitted."""
    columns = raw["trace_lines"]
    writers = pl.Series("w", raw["writer_ids"], dtype=pl.String)
    frame = pl.DataFrame([series(name, columns[name]) for name in _LINES_SCHEMA])
    return frame.with_columns(
        pl.lit(writers).gather(pl.col("w")).alias("w"),
        _string_ids(raw),
        pl.when(pl.col("emitted") >= 0).then(pl.col("emitted")).alias("emitted"),
    ).cast(_LINES_SCHEMA)


def _string_ids(raw: dict[str, Any]) -> pl.Expr:
    """The ``sid`` column from the pass's indices into its string ids (-1: an integer id)."""
    ids = pl.Series("sid", raw["seq_ids"], dtype=pl.String)
    return lookup(ids, pl.when(pl.col("sid") >= 0).then(pl.col("sid"))).alias("sid")


def _judge_handed_back(
    path: str, raw: dict[str, Any], counts: ReadCounts, first_line: int, skip: bool
) -> list[dict[str, Any]]:
    """The exact parser's verdict on every line the pass handed back, in file order: rows of
    the valid ones; bad lines raised or counted; refusals raised."""
    counts.torn_lines += raw["torn"]
    skipped_by_pass = raw["bad"]
    rows: list[dict[str, Any]] = []
    if not raw["events"]:
        counts.skipped_lines += skipped_by_pass
        return rows
    with open(path, "rb") as handle:
        for line, offset, length, kind, rule in raw["events"]:
            number = first_line + line
            row, reason, glued = judge_line(os.pread(handle.fileno(), length, offset))
            if row is None:
                if kind == _BAD:
                    skipped_by_pass -= 1  # counted below, by the exact parser's hand
                counts.bad_line(path, number, reason, skip=skip)
                continue
            if kind == _BAD:
                # The pass and the exact parser disagree: the exact parser is the authority.
                skipped_by_pass -= 1
            counts.torn_lines += glued
            row["line"] = number
            # a refused line's rule is the pass's; limits words it as the reference reader does
            refuse_impossible_step(row, path, StepRule(rule) if kind == _REFUSED else None)
            rows.append(row)
    # Bad lines past the examples the pass handed back are counted, not worded; the examples
    # kept stay the first few in file order.
    counts.skipped_lines += skipped_by_pass
    return rows


def _partial(path: str, raw: dict[str, Any]) -> PartialFold:
    """The pass's tables as a ``PartialFold`` with the polars reference's exact schemas."""
    names = ["leg", "w", "seq", "sid", "lines", "steps", "proposed", "accepted", "emitted",
             "emitted_lines", "max_proposed", "max_n", "sum_n", "pid", *FIRST_STEP]  # fmt: skip
    keys = {"lines": "lines_per_request"}
    writer_of = pl.Series("w", raw["writer_ids"], dtype=pl.String)
    sums_schema = {
        name: dtype for name, dtype in PER_REQUEST_SCHEMA.items() if name not in LINE_LISTS
    }
    columns = [series(name, raw[keys.get(name, name)]) for name in names]
    if raw["durations"] is not None:  # some line carried a duration
        columns += [series(name, raw["durations"][name]) for name in DURATION_SUMS]
        sums_schema |= {name: pl.Int64() for name in DURATION_SUMS}
    per_request = (
        pl.DataFrame(columns)
        .with_columns(
            pl.when(pl.col("leg") >= 0).then(pl.col("leg")).alias("leg"),
            pl.lit(writer_of).gather(pl.col("w")).alias("w"),
            _string_ids(raw),
            *(
                pl.when(pl.col(name) >= 0).then(pl.col(name)).alias(name)  # -1: none
                for name in ("first_draft_ns", "first_verify_ns")
            ),
        )
        .cast(sums_schema)
    )
    # The columns replaced above (leg, writer, string id and first durations as the pass wrote
    # them) go now, not with the function, and back to the system (glibc would keep them): a
    # load test's 10^6 requests, some 40 MiB at the read's peak.
    del columns
    _native.release_memory()
    # The pass puts the attributed requests first, sorted: their times need no copy.
    attributed = raw["attributed_requests"]
    step_times = per_request.head(attributed).select(REQUEST_KEY)
    step_times = step_times.with_columns(
        series(name, raw[name]) for name in ("first_ns", "gaps", "long_gaps")
    )
    native_rows = line_rows_of(path, raw, attributed)
    histogram = frame_of(
        raw,
        {"leg": "hist_leg", "proposed": "hist_proposed", "accepted": "hist_accepted",
         "count": "hist_count"},
    )  # fmt: skip
    bins = frame_of(
        raw,
        {"leg": "bin_leg", "bin": "bin", "steps": "bin_steps", "proposed": "bin_proposed",
         "accepted": "bin_accepted"},
    )  # fmt: skip
    files = pl.DataFrame(
        {
            "path": [path],
            "lines": [raw["folded"]],
            "attributed": [raw["attributed"]],
            "unattributed": [raw["unattributed"]],
            "ambiguous": [raw["ambiguous"]],
        },
        schema=SCHEMAS["files"],
    )
    return assemble(per_request, histogram, bins, files, step_times, native_rows)


def _unattributed_fold(frame: pl.DataFrame, path: str) -> PartialFold:
    """Rows folded with no legs (a follower without an arm record): writers and counts only."""
    legs = pl.DataFrame(
        schema={"index": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "leg": pl.String}
    )
    windows = LegWindows(
        points=pl.Series("points", [], dtype=pl.Int64),
        segment_leg=pl.Series("leg", [None], dtype=pl.Int64),
        segment_status=pl.Series("status", [UNATTRIBUTED], dtype=pl.Int8),
        label_leg=pl.DataFrame(
            schema={"segment": pl.Int64, "label": pl.String, "resolved_leg": pl.Int64}
        ),
    )
    return partial_fold(frame, windows, legs, path)


def collect_lines(
    path: str,
    begin: int,
    end: int,
    native_legs: NativeLegs,
    requests: pl.DataFrame,
    *,
    spans: tuple[list[int], list[int]] | None = None,
) -> pl.DataFrame:
    """The lines of ``path[begin:end]`` the native pass folds into ``requests``
    (``REQUEST_KEY``), read again: per line its request (row in ``requests``), ``t_ns`` and
    packed ``tokens``, in file order. ``spans``: per request, the first and the end offset of
    the bytes its lines are taken from. An ``OSError`` when the file cannot be read, or changed
    under the read."""
    raw = _native.collect_lines(
        path, begin, end, *native_legs.arguments[:4], *key_columns(requests), *(spans or ()),
    )  # fmt: skip
    if not raw["complete"]:
        raise OSError("it is shorter than when it was read")
    return pl.DataFrame([series(name, raw[name]) for name in ("request", "t_ns", "tokens")])


def cadence(
    step_times: pl.DataFrame,
    starts: list[int],
    ends: list[int],
    stall_factor: float,
    groups: list[tuple[int, ...]],
) -> tuple[pl.DataFrame, list[tuple[int, int, int, int, int, int] | None]]:
    """Each request's cadence from its step intervals (``step_times``' ``leg`` and
    ``fold.folding.step_intervals.COLUMNS``, the lists read in place), in the extension: its
    figures in nanoseconds (columns as ``fold._native.cadence`` names them), and the pooled
    intervals of each of ``groups`` (``fold.folding.cadence.Pooled``)."""
    legs = step_times["leg"]
    # int64s without nulls go over as a buffer, not as 10^6 Python ints converted one by one
    plain = legs.dtype == pl.Int64 and not legs.null_count()
    leg_values = legs.to_numpy() if plain else legs.to_list()
    firsts = step_times["first_ns"].fill_null(-1).to_numpy()  # times are never negative
    columns, pooled = _native.cadence(
        firsts,
        step_times["gaps"].__arrow_c_stream__(),
        step_times["long_gaps"].__arrow_c_stream__(),
        leg_values,
        starts,
        ends,
        stall_factor,
        groups,
    )
    frame = pl.DataFrame([series(name, capsules) for name, capsules in columns.items()])
    # The per-thread sorting room is freed by now, but glibc keeps it: on a load test's 10^6
    # requests some 100 MiB that the stages after, allocating through polars, never reuse.
    _native.release_memory()
    return frame, pooled


def release_memory() -> None:
    """Hand back to the system what the extension's freed columns held (glibc keeps it for
    its own next allocations, which the fold's later stages, allocating through polars and
    numpy's larger arrays, mostly never make); nothing without the extension."""
    if available():
        _native.release_memory()


def resample_sums(values: Any, key: int, first_row: int, out: Any) -> None:
    """The bootstrap's stage-2 resamples ``first_row`` ... of one leg, drawn and summed in one
    pass: ``out[r, c]`` is the sum of ``values[i, c]`` over the requests ``i`` drawn for
    resample ``first_row + r`` from the leg's stream ``key`` (int64 values and out,
    C-contiguous). The draws are ``fold.folding.request_redraws.request_draws``'s, which the
    tests check."""
    _native.resample_sums(values, key, first_row, out)
