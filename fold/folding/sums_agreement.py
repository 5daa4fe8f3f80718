"""What a sums file's parts must say alike, beyond each part's own rules
(``fold.folding.sums_checks`` for a row, ``fold.folding.small_tables`` for a table): each is a
record of the same lines, kept two ways, so a file damaged in one of them is refused where
the fold from it, or an engine's query over it, would take the damaged one.

- A leg's steps by draft position, summed over its rows (what ``docs/sums.md``'s queries read),
  are what its histogram says: per position i, the steps that proposed more than i tokens and
  those that accepted more than i.
- A leg's intervals to drafted lines of one draft length (its rows' length rows) are at most
  its histogram's steps that proposed that length: each such line but a request's first gives
  one interval.
- Every row's writer is one of the writers, which read at least the row's lines and a line
  numbered at least its first line's ``n``.
- A row's step times (where the steps have times) lie in its leg's window, as attribution put
  them there (``fold.folding.attribute``: closed windows); its run is the arm record's run of
  that leg, and its warm flag one for the whole leg.

And once the union is folded (``check_cadence``): each row's cadence columns are the cadence
the fold makes of the row's intervals over its leg's window, but for the stalls, which depend on
the host's ``--stall-factor`` (not in the file).

A file made to lie consistently in every part cannot be caught, as a log cannot; these catch
damage to one part.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from fold.errors import RefusedError
from fold.folding.accumulate import REQUEST_KEY, empty_table
from fold.folding.request_positions import POSITION_LISTS, past_positions
from fold.folding.request_rows import CADENCE_NS, beside, request_tables, sums_table
from fold.folding.sums_checks import LAST_NS
from fold.inputs.sums_file import REDO


def check_agreement(
    path: str,
    rows: pl.DataFrame,
    tables: dict[str, pl.DataFrame],
    arm_legs: pl.DataFrame,
    timed: bool,
) -> None:
    """``rows`` (the file's, each row already checked) against its small ``tables`` and the
    arm's legs (``index``, ``run``, ``start_ns``, ``end_ns``); the first disagreement refused."""
    _positions_as_histogram(path, rows, tables["histogram"])
    _lengths_within_histogram(path, rows, tables["histogram"])
    _writers_hold_rows(path, rows, tables["writers"])
    _rows_in_legs(path, rows, arm_legs, timed)


def _refused(path: str, what: str) -> RefusedError:
    return RefusedError(f"{path}: {what}; {REDO}")


def _positions_as_histogram(path: str, rows: pl.DataFrame, histogram: pl.DataFrame) -> None:
    proposed = POSITION_LISTS[1]
    legs = sorted(set(rows["leg"].to_list()) | set(histogram["leg"].to_list()))
    place = {leg: index for index, leg in enumerate(legs)}
    # Each leg's positions laid end to end, as long as its longest list or proposal.
    longest = np.zeros(len(legs), dtype=np.int64)
    row_legs = rows["leg"].replace_strict(place, return_dtype=pl.Int64).to_numpy()
    np.maximum.at(longest, row_legs, rows[proposed].list.len().cast(pl.Int64).to_numpy())
    hist_legs = histogram["leg"].replace_strict(place, return_dtype=pl.Int64).to_numpy()
    np.maximum.at(longest, hist_legs, histogram["proposed"].to_numpy())
    offsets = np.zeros(len(legs) + 1, dtype=np.int64)
    np.cumsum(longest, out=offsets[1:])
    # The rows' lists summed by (leg, position): as long as the lists the file holds.
    lengths = rows[proposed].list.len().cast(pl.Int64).to_numpy()
    starts = np.repeat(offsets[row_legs], lengths) + _within(lengths)
    # int64 holds every sum: the rows' rules keep each list within its S, whose sum per leg
    # the legs table holds to 2^63 - 1.
    by_rows = [np.zeros(offsets[-1], dtype=np.int64) for _ in POSITION_LISTS]
    for total, name in zip(by_rows, POSITION_LISTS, strict=True):
        np.add.at(total, starts, rows[name].explode().drop_nulls().cast(pl.Int64).to_numpy())
    # The histogram's steps past each position, as running sums: a cost per position, not per
    # entry and position (entries of 2^16 proposed tokens each are allowed).
    by_histogram = [
        past_positions(
            offsets, hist_legs, histogram[column].to_numpy(), histogram["count"].to_numpy()
        )
        for column in ("accepted", "proposed")
    ]
    if not all(np.array_equal(a, b) for a, b in zip(by_rows, by_histogram, strict=True)):
        raise _refused(
            path,
            "its rows' steps by draft position (accepted_past, proposed_past, summed per leg) "
            "are not what the metadata's histogram says",
        )


def _within(lengths: np.ndarray) -> np.ndarray:
    """Each list's positions 0 .. length - 1, the lists end to end."""
    ends = np.cumsum(lengths)
    return np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - lengths, lengths)


def _lengths_within_histogram(path: str, rows: pl.DataFrame, histogram: pl.DataFrame) -> None:
    intervals = (
        rows.select("leg", "length_rows")
        .explode("length_rows", keep_nulls=False, empty_as_null=False)
        .unnest("length_rows")
        .group_by("leg", pl.col("length").alias("proposed"))
        .agg(pl.col("intervals").cast(pl.Int128).sum())
    )
    steps = histogram.group_by("leg", "proposed").agg(pl.col("count").cast(pl.Int128).sum())
    over = intervals.join(steps, on=["leg", "proposed"], how="left").filter(
        pl.col("count").is_null() | (pl.col("intervals") > pl.col("count"))
    )
    if over.height:
        leg, length = over.sort("leg", "proposed").row(0)[:2]
        raise _refused(
            path,
            f"leg {leg}'s rows hold more intervals to steps of draft length {length} than its "
            "histogram has steps of that length",
        )


def _writers_hold_rows(path: str, rows: pl.DataFrame, writers: pl.DataFrame) -> None:
    by_writer = rows.group_by("w").agg(
        pl.col("lines").cast(pl.Int128).sum().alias("row_lines"),
        pl.col("first_n").max().alias("first_n"),
    )
    joined = by_writer.join(writers.select("w", "lines", "max_n"), on="w", how="left")
    wrong = joined.filter(
        pl.col("lines").is_null()
        | (pl.col("row_lines") > pl.col("lines"))
        | (pl.col("first_n").fill_null(0) > pl.col("max_n"))
    )
    if wrong.height:
        writer = wrong.sort("w")["w"][0]
        raise _refused(
            path,
            f"writer {writer!r} of its rows is not in the metadata's writers, or read fewer "
            "lines than its rows hold, or numbered none as high as a row's first line",
        )


def _rows_in_legs(path: str, rows: pl.DataFrame, arm_legs: pl.DataFrame, timed: bool) -> None:
    legs = arm_legs.select(
        pl.col("index").alias("leg"), pl.col("run").alias("arm_run"), "start_ns", "end_ns"
    )
    # Only what the rules read goes through the join: it copies every column it is given.
    joined = (
        rows.select("leg", "run", "first_ns", "gaps", "long_gaps")
        .with_row_index("row")
        .join(legs, on="leg", how="left", maintain_order="left")
    )
    inside = (pl.col("first_ns") >= pl.col("start_ns")) & (pl.col("end_ns") >= LAST_NS)
    wrong = joined.filter(
        (pl.col("run") != pl.col("arm_run")) | (~inside if timed else pl.lit(False))
    )
    if wrong.height:
        row = wrong.row(0, named=True)
        raise _refused(
            path,
            f"row {row['row'] + 1} (leg {row['leg']}) has another run than the arm record's "
            "leg, or step times outside the leg's window",
        )
    if rows.group_by("leg").agg(pl.col("warm").n_unique()).filter(pl.col("warm") > 1).height:
        raise _refused(path, "a leg's rows are not all warm or all not warm")


CHECKED_CADENCE = tuple(name for name in CADENCE_NS if name not in ("stalls", "stall_ns"))
"""The cadence columns a union holds its files to: all but the stalls (``--stall-factor``'s)."""


def cadence_columns(rows: pl.DataFrame) -> pl.DataFrame:
    """What ``check_cadence`` needs of a file's rows: their key and ``CHECKED_CADENCE``."""
    return rows.select(*REQUEST_KEY, *CHECKED_CADENCE)


def check_cadence(
    files: list[tuple[str, pl.DataFrame]], requests: pl.DataFrame, cadence: pl.DataFrame | None
) -> None:
    """Each file's ``cadence_columns`` (by its path) against the cadence the union's fold made
    (``requests``: the merged partial's; ``cadence``: ``Cadence.requests``, None without
    times), row by row; the first row that differs refused, naming its file."""
    made = sums_table(
        [
            (leg, 0, False, rows)
            for leg, rows in request_tables(requests, cadence, empty_table("durations")).items()
        ]
    ).select(*REQUEST_KEY, *CHECKED_CADENCE)
    made_columns = made.rename({name: f"{name}_made" for name in CHECKED_CADENCE})
    for path, rows in files:
        # One file of the union in its order has the made rows' keys: they go beside its rows
        # with no join (a join over a load test's 10^6 requests held 400 MB more at the peak).
        joined = beside(rows.with_row_index("row"), made_columns)
        differs = joined.filter(
            ~pl.all_horizontal(
                pl.col(name).eq_missing(pl.col(f"{name}_made")) for name in CHECKED_CADENCE
            )
        )
        if differs.height:
            row = differs.sort("row").row(0, named=True)
            name = next(name for name in CHECKED_CADENCE if row[name] != row[f"{name}_made"])
            raise _refused(
                path,
                f"row {row['row'] + 1} (leg {row['leg']}): its {name} is {row[name]}, where its "
                f"intervals over the leg's window give {row[f'{name}_made']}",
            )
