"""A sums file's small tables (its metadata's legs, histogram, time bins, writers, files and
what reading met), checked against its rows before they are folded: each table is as the
partial fold keeps it (its columns and types, each key once, each value in range), and each
adds up to the rows it sums (a leg's S, P and A, its histogram's and its time bins'; the files'
attributed lines). A table that does not is refused: a figure from it would be wrong.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from fold.errors import InputError, RefusedError
from fold.folding.accumulate import SCHEMAS, TABLE_KEYS, TIME_BINS_PER_LEG
from fold.folding.host_sums import SMALL_TABLES
from fold.inputs.limits import (
    count_in_range,
    count_problem,
    counts_possible,
    is_count,
    step_possible,
    step_tokens_in_range,
)
from fold.inputs.reader import MAX_SKIPPED_EXAMPLES, ReadCounts, SkippedLine
from fold.inputs.sums_file import REDO

TRIPLE_SUMS = ("steps", "proposed", "accepted")
KINDS = ("step log", "engine trace")
_COUNTS: dict[str, dict[str, int]] = {
    "legs": dict.fromkeys(
        ("lines", "steps", "proposed", "accepted", "emitted", "emitted_lines"), 0
    ),
    "histogram": {"count": 1},
    "bins": dict.fromkeys(TRIPLE_SUMS, 0),
    "writers": {"pid": 0, "lines": 1, "max_n": 0},
    "files": dict.fromkeys(("lines", "attributed", "unattributed", "ambiguous"), 0),
}
"""Each small table's counts, and the least each may be (its most is a count's)."""
_TOKENS: dict[str, dict[str, int]] = {
    "legs": {"max_proposed": 0},
    "histogram": {"proposed": 1, "accepted": 0},
}
"""Each small table's step token counts, and the least each may be."""


def check_small_tables(
    path: str, partial: dict[str, Any], rows: pl.DataFrame
) -> dict[str, pl.DataFrame]:
    """The metadata's small tables, each checked alone and against ``rows`` (the file's)."""
    tables = {name: _table(path, name, partial.get(name)) for name in SMALL_TABLES}
    legs = tables["legs"]
    by_rows = rows.group_by("leg").agg(pl.col("lines", *TRIPLE_SUMS).cast(pl.Int128).sum())
    _same_sums(path, "legs", legs, by_rows, ("lines", *TRIPLE_SUMS), "its rows")
    drafted = legs.filter(pl.col("steps") > 0)
    histogram = (
        tables["histogram"]
        .group_by("leg")
        .agg(
            pl.col("count").cast(pl.Int128).sum().alias("steps"),
            (pl.col("count").cast(pl.Int128) * pl.col("proposed")).sum().alias("proposed"),
            (pl.col("count").cast(pl.Int128) * pl.col("accepted")).sum().alias("accepted"),
            pl.col("proposed").max().cast(pl.Int128).alias("max_proposed"),
        )
    )
    _same_sums(path, "legs", drafted, histogram, (*TRIPLE_SUMS, "max_proposed"), "its histogram")
    known = legs["leg"].implode()
    if not (
        tables["histogram"]["leg"].is_in(known).all() and tables["bins"]["leg"].is_in(known).all()
    ):
        raise RefusedError(
            f"{path}: its histogram or bins name a leg its legs table does not; {REDO}"
        )
    each_bin = tables["bins"].select(
        counts_possible(pl.col("steps"), pl.col("proposed"), pl.col("accepted"))
        | ((pl.col("steps") == 0) & (pl.col("proposed") == 0) & (pl.col("accepted") == 0))
    )
    if not each_bin.to_series().all():
        raise RefusedError(
            f"{path}: a time bin's S, P and A cannot be true together "
            f"(S <= P <= S x 2^16, A <= P); {REDO}"
        )
    bins = tables["bins"].group_by("leg").agg(pl.col(*TRIPLE_SUMS).cast(pl.Int128).sum())
    _same_sums(path, "legs", drafted, bins.filter(pl.col("steps") > 0), TRIPLE_SUMS, "its bins")
    if (
        not legs.filter(
            (pl.col("emitted_lines") <= pl.col("lines"))
            & ((pl.col("steps") > 0) | (pl.col("max_proposed") == 0))
        ).height
        == legs.height
    ):
        raise RefusedError(f"{path}: a leg's emitted lines or largest draft cannot be; {REDO}")
    files = tables["files"]
    if files.filter(
        pl.col("lines").cast(pl.Int128)
        != pl.sum_horizontal(pl.col("attributed", "unattributed", "ambiguous").cast(pl.Int128))
    ).height:
        raise RefusedError(
            f"{path}: a file's lines are not its attributed, unattributed and ambiguous lines; "
            f"{REDO}"
        )
    attributed = int(files["attributed"].cast(pl.Int128).sum())
    if attributed != int(rows["lines"].cast(pl.Int128).sum()):
        raise RefusedError(
            f"{path}: its files' attributed lines ({attributed}) are not its rows' lines; {REDO}"
        )
    if int(tables["writers"]["lines"].cast(pl.Int128).sum()) != int(
        files["lines"].cast(pl.Int128).sum()
    ):
        raise RefusedError(f"{path}: its writers' lines are not its files' lines; {REDO}")
    return tables


def _table(path: str, name: str, columns: object) -> pl.DataFrame:
    schema = SCHEMAS[name]
    where = f"{path}: the metadata's {name}"
    if not isinstance(columns, dict) or set(columns) != set(schema):
        raise InputError(f"{where} does not have the columns {', '.join(schema)}; {REDO}")
    if not all(isinstance(values, list) for values in columns.values()):  # polars makes a struct
        raise InputError(f"{where}: a column is not a list of values; {REDO}")
    try:
        table = pl.DataFrame(columns, schema=schema, strict=True)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError) as error:
        words = str(error).strip().splitlines()[0] if str(error).strip() else "wrong types"
        raise InputError(f"{where} is not as --sums writes it ({words}); {REDO}") from None
    if table.schema != pl.Schema(schema):
        raise InputError(f"{where} is not as --sums writes it (its types); {REDO}")
    for column in schema:
        if table[column].null_count():
            raise InputError(f"{where}: its column {column} has a null; {REDO}")
    ranges = [
        (column, count_in_range(pl.col(column), least), "a count")
        for column, least in _COUNTS.get(name, {}).items()
    ] + [
        (column, step_tokens_in_range(pl.col(column), least), "a step's tokens")
        for column, least in _TOKENS.get(name, {}).items()
    ]
    if name == "bins":  # a leg's window is cut into this many bins
        ranges.append(("bin", pl.col("bin").is_between(0, TIME_BINS_PER_LEG - 1), "a bin"))
    for column, holds, kind in ranges:
        if not table.select(holds.all()).item():
            raise InputError(f"{where}: a {column} is out of range for {kind}; {REDO}")
    if (
        name == "histogram"
        and not table.select(step_possible(pl.col("proposed"), pl.col("accepted")).all()).item()
    ):
        raise RefusedError(f"{where}: a step accepts more than it proposed; {REDO}")
    if table.select(pl.struct(TABLE_KEYS[name]).is_duplicated().any()).item():
        raise InputError(f"{where} names a {', '.join(TABLE_KEYS[name])} twice; {REDO}")
    return table


def _same_sums(
    path: str,
    name: str,
    table: pl.DataFrame,
    sums: pl.DataFrame,
    columns: tuple[str, ...],
    what: str,
) -> None:
    ours = table.select("leg", *(pl.col(column).cast(pl.Int128) for column in columns))
    theirs = sums.select("leg", *(pl.col(column).cast(pl.Int128) for column in columns))
    if not ours.sort("leg").equals(theirs.sort("leg")):
        raise RefusedError(
            f"{path}: the metadata's {name} do not add up to {what} "
            f"({', '.join(columns)} per leg); {REDO}"
        )


def read_counts_of(path: str, found: object, files: pl.DataFrame) -> dict[str, ReadCounts]:
    """What reading each of the host's logs met, a log per row of its files table."""
    where = f"{path}: the metadata's read_counts"
    # A log with no line (empty, or every line skipped) has read counts and no files row.
    if not isinstance(found, dict) or not set(files["path"].to_list()) <= set(found):
        raise InputError(f"{where} does not name every file its files table names; {REDO}")
    counts: dict[str, ReadCounts] = {}
    for log, value in found.items():
        if not isinstance(value, dict) or set(value) != {
            "torn_lines",
            "skipped_lines",
            "skipped_examples",
            "kind",
            "run_lines",
            "other_lines",
        }:
            raise InputError(f"{where} of {log!r} is not as --sums writes it; {REDO}")
        numbers = [
            value[key] for key in ("torn_lines", "skipped_lines", "run_lines", "other_lines")
        ]
        if not all(_count(number) for number in numbers) or value["kind"] not in KINDS:
            raise InputError(f"{where} of {log!r}: a count or its kind is out of range; {REDO}")
        examples = value["skipped_examples"]
        if (
            not isinstance(examples, list)
            or len(examples) > min(MAX_SKIPPED_EXAMPLES, value["skipped_lines"])
            or not all(
                isinstance(example, list)
                and len(example) == 2
                and _count(example[0])
                and example[0] >= 1
                and isinstance(example[1], str)
                for example in examples
            )
        ):
            raise InputError(f"{where} of {log!r}: its skipped examples are not lines; {REDO}")
        named = named_log(log, path)
        counts[log] = ReadCounts(
            torn_lines=value["torn_lines"],
            skipped_lines=value["skipped_lines"],
            skipped_examples=[SkippedLine(named, line, reason) for line, reason in examples],
            kind=value["kind"],
            run_lines=value["run_lines"],
            other_lines=value["other_lines"],
        )
    return counts


def named_log(log: str, sums_path: str) -> str:
    """A log as a fold from sums files names it: hosts write their logs under the same paths."""
    return f"{log} (in {sums_path})"


def _count(value: object) -> bool:
    return is_count(value) and count_problem(value) is None
