"""Partial folds: the sums a fold needs, kept so that two partial folds merge into one.

A partial fold holds only counts and sums keyed by leg (and by request, histogram bucket, time
bin, writer, file), never steps. Folding a log in blocks, in any order, split across any files,
and merging the partials gives exactly the fold of the whole log; this is what lets the fold run
in bounded memory and follow a growing file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from fold.attribute import AMBIGUOUS, ATTRIBUTED, UNATTRIBUTED, LegWindows, attribute

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
        "seq": pl.Int64(),
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

    def merge(self, other: PartialFold) -> PartialFold:
        return PartialFold(
            **{name: _merge(name, getattr(self, name), getattr(other, name)) for name in _KEYS}
        )


def _merge(name: str, left: pl.DataFrame, right: pl.DataFrame) -> pl.DataFrame:
    if right.height == 0:
        return left
    if left.height == 0:
        return right
    keys = _KEYS[name]
    values = [column for column in _SCHEMAS[name] if column not in keys]
    return (
        pl.concat([left, right])
        .group_by(keys)
        .agg(
            pl.col(column).max() if column in _MAX_COLUMNS else pl.col(column).sum()
            for column in values
        )
        .sort(keys)
        .select(list(_SCHEMAS[name]))
    )


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
    # A step has a leg exactly when it is ATTRIBUTED; the others group under a null leg, which
    # counts for the writers only.
    lazy = attributed.lazy()
    drafted_flag = pl.col("proposed") > 0
    per_request = lazy.group_by("leg", "w", "seq").agg(
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
    drafted = lazy.filter(pl.col("leg").is_not_null() & drafted_flag)
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
    per_request, histogram, bins = pl.collect_all([per_request, histogram, bins])
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
