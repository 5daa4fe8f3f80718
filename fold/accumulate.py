"""Partial folds: the sums a fold needs, kept so that two partial folds merge into one.

A partial fold holds counts and sums keyed by leg (and by request, histogram bucket, time
bin, writer, file) and each request's step times (for the cadence), never whole steps. Folding
a log in blocks, in any order, split across any files, and merging the partials gives exactly
the fold of the whole log; this is what lets the fold run in bounded memory and follow a
growing file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from fold.attribute import AMBIGUOUS, ATTRIBUTED, UNATTRIBUTED, LegWindows, attribute
from fold.reader import scan_layout

STREAM_BATCH_LINES = 262_144
"""Lines per batch the streaming scan hands over: a few tens of MiB of columns."""
MERGE_EVERY = 16
"""Partials are merged a batch of this many at a time: fewer re-sorts, memory still bounded."""

# Each leg's window is cut into this many equal time bins; windows of steps are built from them.
TIME_BINS_PER_LEG = 512

_LEG_SUMS = {
    "lines": pl.Int64,
    "steps": pl.Int64,
    "proposed": pl.Int64,
    "accepted": pl.Int64,
    "emitted": pl.Int64,
    "emitted_lines": pl.Int64,
    "max_proposed": pl.Int64,
}
_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "legs": {"leg": pl.Int64(), **{name: dtype() for name, dtype in _LEG_SUMS.items()}},
    "histogram": {"leg": pl.Int64(), "accepted": pl.Int64(), "count": pl.Int64()},
    "requests": {
        "leg": pl.Int64(),
        "w": pl.String(),
        "seq": pl.UInt64(),
        "lines": pl.Int64(),
        "steps": pl.Int64(),
        "proposed": pl.Int64(),
        "accepted": pl.Int64(),
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
    },
    "files": {
        "path": pl.String(),
        "lines": pl.Int64(),
        "attributed": pl.Int64(),
        "unattributed": pl.Int64(),
        "ambiguous": pl.Int64(),
    },
    # Every attributed line's time, per request (proposed = 0 lines included, in any order):
    # the step cadence needs the intervals between a request's steps, which no sum keeps.
    "step_times": {
        "leg": pl.Int64(),
        "w": pl.String(),
        "seq": pl.UInt64(),
        "t_ns": pl.List(pl.Int64()),
    },
}
# The per-request sums every fold path produces before ``_assemble`` splits them into the
# request, leg and writer tables (the writers' columns ride along per request).
PER_REQUEST_SCHEMA: dict[str, pl.DataType] = {
    **_SCHEMAS["requests"],
    "emitted": pl.Int64(),
    "emitted_lines": pl.Int64(),
    "max_proposed": pl.Int64(),
    "max_n": pl.Int64(),
    "pid": pl.Int64(),
}
# How each non-key column merges: counts add up, maxima take the max.
_MAX_COLUMNS = {"max_proposed", "max_n", "pid"}
_KEYS = {
    "legs": ["leg"],
    "histogram": ["leg", "accepted"],
    "requests": ["leg", "w", "seq"],
    "bins": ["leg", "bin"],
    "writers": ["w"],
    "files": ["path"],
    "step_times": ["leg", "w", "seq"],
}


def _empty(name: str) -> pl.DataFrame:
    return pl.DataFrame(schema=_SCHEMAS[name])


@dataclass
class PartialFold:
    legs: pl.DataFrame = field(default_factory=lambda: _empty("legs"))
    histogram: pl.DataFrame = field(default_factory=lambda: _empty("histogram"))
    requests: pl.DataFrame = field(default_factory=lambda: _empty("requests"))
    bins: pl.DataFrame = field(default_factory=lambda: _empty("bins"))
    writers: pl.DataFrame = field(default_factory=lambda: _empty("writers"))
    files: pl.DataFrame = field(default_factory=lambda: _empty("files"))
    step_times: pl.DataFrame = field(default_factory=lambda: _empty("step_times"))

    def merge(self, other: PartialFold) -> PartialFold:
        return merge_all([self, other])


def merge_all(partials: list[PartialFold]) -> PartialFold:
    """One partial fold of many: one concat and one group-by per table, whatever their number.

    Folding a large log merges its blocks' partials a batch at a time with this, rather than
    one at a time (each merge re-sorts the tables gathered so far).
    """
    return PartialFold(
        **{name: _merge(name, [getattr(partial, name) for partial in partials]) for name in _KEYS}
    )


def _merge(name: str, tables: list[pl.DataFrame]) -> pl.DataFrame:
    tables = [table for table in tables if table.height]
    if not tables:
        return _empty(name)
    if len(tables) == 1:
        return tables[0]
    keys = _KEYS[name]
    values = [column for column in _SCHEMAS[name] if column not in keys]
    return (
        pl.concat(tables)
        .group_by(keys)
        .agg(_merged(column) for column in values)
        .sort(keys)
        .select(list(_SCHEMAS[name]))
    )


def _merged(column: str) -> pl.Expr:
    if column in _MAX_COLUMNS:
        return pl.col(column).max()
    if column == "t_ns":  # lists of times: one list per key with all of them
        return pl.col(column).list.explode(keep_nulls=False, empty_as_null=False)
    return pl.col(column).sum()


def partial_fold(
    steps: pl.DataFrame, windows: LegWindows, legs: pl.DataFrame, path: str
) -> PartialFold:
    """The partial fold of one parsed block of ``path`` (see ``fold.reader``).

    One group-by over (leg, writer, request) carries every per-line sum; the writers' and the
    legs' tables are folded from its (much smaller) result. The histogram and the time bins are
    the only other passes over the steps, and polars runs the three at once.
    """
    attributed = attribute(steps, windows)
    status = attributed["status"]
    files = pl.DataFrame(
        {
            "path": [path],
            "lines": [attributed.height],
            "attributed": [int((status == ATTRIBUTED).sum())],
            "unattributed": [int((status == UNATTRIBUTED).sum())],
            "ambiguous": [int((status == AMBIGUOUS).sum())],
        },
        schema=_SCHEMAS["files"],
    )
    queries = _fold_queries(attributed.lazy(), legs)
    step_times = (
        attributed.lazy()
        .filter(pl.col("leg").is_not_null())
        .group_by("leg", "w", "seq")
        .agg(pl.col("t_ns"))
        .sort("leg", "w", "seq")
        .select(list(_SCHEMAS["step_times"]))
    )
    *sums, times = pl.collect_all([*queries, step_times])
    folded = _assemble(*sums, files)
    folded.step_times = times
    return folded


def fold_file(
    path: str,
    windows: LegWindows,
    legs: pl.DataFrame,
    progress: Callable[[int], None] | None = None,
) -> PartialFold | None:
    """The partial fold of a whole file, parsed by polars' streaming engine, in bounded memory.

    The file is scanned as the writers' layout (``fold.reader.scan_layout``) and handed over
    in batches of ``STREAM_BATCH_LINES``; each batch is folded like a block and the partials
    are merged a batch at a time. None when the file needs the block way (``StepLogReader``):
    a line not in the layout, a count no engine can produce (the block way's refusal names the
    line), or a last line without its newline. ``progress`` gets estimated bytes per batch.
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            head = handle.read(1 << 16)
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                return None
    except OSError:
        return None  # empty, or unreadable: the block way names the problem
    bytes_per_line = len(head) / max(1, head.count(b"\n"))
    batches = scan_layout(path).collect_batches(chunk_size=STREAM_BATCH_LINES)
    folded = PartialFold()
    pending: list[PartialFold] = []
    reported = 0
    try:
        for batch in batches:
            if not batch["layout_ok"].all() or _impossible(batch):
                return None
            pending.append(partial_fold(batch.drop("layout_ok"), windows, legs, path))
            if len(pending) >= MERGE_EVERY:
                folded, pending = merge_all([folded, *pending]), []
            if progress is not None:
                estimate = min(size - reported, round(batch.height * bytes_per_line))
                progress(estimate)
                reported += estimate
    except pl.exceptions.PolarsError:
        return None  # a strict cast failed, a line had too many fields, or bad UTF-8
    finally:
        stop = getattr(batches, "stop", None)
        if stop is not None:
            stop()
    if progress is not None and size > reported:
        progress(size - reported)
    return merge_all([folded, *pending])


def _impossible(steps: pl.DataFrame) -> bool:
    return bool(
        steps.select(
            pl.any_horizontal(
                (pl.col(name) < 0).any()
                for name in ("proposed", "accepted", "emitted", "n", "t_ns")
            )
            | (pl.col("accepted") > pl.col("proposed")).any()
        ).item()
    )


def _fold_queries(attributed: pl.LazyFrame, legs: pl.DataFrame) -> list[pl.LazyFrame]:
    """Per request (with the writers' figures), histogram and time-bin sums of steps."""
    # A step has a leg exactly when it is ATTRIBUTED; the others group under a null leg, which
    # counts for the writers only.
    drafted_flag = pl.col("proposed") > 0
    per_request = attributed.group_by("leg", "w", "seq").agg(
        pl.len().cast(pl.Int64).alias("lines"),
        drafted_flag.sum().cast(pl.Int64).alias("steps"),
        pl.col("proposed").sum(),
        pl.col("accepted").sum(),
        pl.col("emitted").sum().cast(pl.Int64),
        pl.col("emitted").is_not_null().sum().cast(pl.Int64).alias("emitted_lines"),
        pl.col("proposed").max().alias("max_proposed"),
        pl.col("n").max().alias("max_n"),
        pl.col("pid").max(),
    )
    drafted = attributed.filter(pl.col("leg").is_not_null() & drafted_flag)
    # A gather by leg index finds each step's window (no join).
    start = pl.lit(_by_index(legs, "start_ns")).gather(pl.col("leg"))
    end = pl.lit(_by_index(legs, "end_ns")).gather(pl.col("leg"))
    histogram = drafted.group_by("leg", "accepted").agg(pl.len().cast(pl.Int64).alias("count"))
    bins = drafted.group_by(
        "leg",
        ((pl.col("t_ns") - start) * TIME_BINS_PER_LEG // (end - start + 1)).alias("bin"),
    ).agg(
        pl.len().cast(pl.Int64).alias("steps"),
        pl.col("proposed").sum(),
        pl.col("accepted").sum(),
    )
    return [per_request, histogram, bins]


def _assemble(
    per_request: pl.DataFrame, histogram: pl.DataFrame, bins: pl.DataFrame, files: pl.DataFrame
) -> PartialFold:
    writers = (
        per_request.group_by("w")
        .agg(pl.col("pid").max(), pl.col("lines").sum(), pl.col("max_n").max())
        .sort("w")
    )
    in_legs = per_request.filter(pl.col("leg").is_not_null())
    leg_sums = (
        in_legs.group_by("leg")
        .agg(
            pl.col("lines", "steps", "proposed", "accepted", "emitted", "emitted_lines").sum(),
            pl.col("max_proposed").max(),
        )
        .sort("leg")
    )
    return PartialFold(
        legs=leg_sums.select(list(_SCHEMAS["legs"])),
        histogram=histogram.sort("leg", "accepted").select(list(_SCHEMAS["histogram"])),
        requests=in_legs.sort("leg", "w", "seq").select(list(_SCHEMAS["requests"])),
        bins=bins.sort("leg", "bin").select(list(_SCHEMAS["bins"])),
        writers=writers.select(list(_SCHEMAS["writers"])),
        files=files,
    )


def _by_index(legs: pl.DataFrame, column: str) -> pl.Series:
    """``legs[column]`` placed at each leg's index (indices are record positions, 0-based)."""
    size = int(legs["index"].max()) + 1
    return pl.Series(column, [0] * size, dtype=pl.Int64).scatter(
        legs["index"], legs[column].cast(pl.Int64)
    )
