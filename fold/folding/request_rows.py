"""A leg's requests as one table: a row per request, a column per sum.

A serving load test folds 10^6 requests; a dict of figures per request (and a read-only view
of each, and a dict of its cadence) made the figures by request most of such a fold's time and
memory. The rows are kept as columns instead: the request's sums (S, P, A, its lines), its
cadence in whole nanoseconds as the cadence computed it, and its step durations. The figures
over requests (the spread, the lowest, the flags) read the columns; a mapping per request (the
JSON's row, with the cadence in seconds) is made only for a reader that asks for one, or for
the JSON. The same table, every leg's, is the sums file (``sums_table``, ``docs/sums.md``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, overload

import numpy as np
import polars as pl

from fold.folding.accumulate import DURATION_SUMS, REQUEST_KEY
from fold.folding.request_positions import POSITION_LISTS

_NS = 1e9
_ROWS_AT_ONCE = 50_000
"""Rows made into mappings a part at a time by an iteration: one part's dicts at once."""

SUMS = ("lines", "steps", "proposed", "accepted")
FIRST_DURATIONS = ("first_draft_ns", "first_verify_ns")
"""The durations of the request's first line (``fold.folding.accumulate.FIRST_STEP``): they
come before its decode window, so the step split leaves them out."""
CADENCE_NS = {
    "cadence_lines": pl.Int64,
    "intervals": pl.Int64,
    "first_step_ns": pl.Int64,
    "decode_ns": pl.Int64,
    "tail_ns": pl.Int64,
    "window_ns": pl.Int64,
    "interval_median_ns": pl.Float64,
    "interval_p90_ns": pl.Int64,
    "interval_p99_ns": pl.Int64,
    "interval_max_ns": pl.Int64,
    "stalls": pl.Int64,
    "stall_ns": pl.Float64,
}
"""A request's cadence as ``fold.folding.cadence`` computes it (its ``RAW_SCHEMA``): whole
nanoseconds, but for the median (the mean of the middle two) and the stalls' time beyond it,
which are halves; null where the figure has no value."""
_FROM_CADENCE = {
    "median_ns": "interval_median_ns",
    "p90_ns": "interval_p90_ns",
    "p99_ns": "interval_p99_ns",
    "max_ns": "interval_max_ns",
}
SCHEMA: dict[str, pl.DataType] = {
    "w": pl.String(),
    "seq": pl.UInt64(),
    "sid": pl.String(),
    **{name: pl.Int64() for name in SUMS},
    "accept_rate": pl.Float64(),
    "mean_acceptance_length": pl.Float64(),
    "timed": pl.Boolean(),
    **{name: dtype() for name, dtype in CADENCE_NS.items()},
    **{name: pl.Int64() for name in (*DURATION_SUMS, *FIRST_DURATIONS)},
    **{name: pl.List(pl.Int64()) for name in POSITION_LISTS},
}
"""A leg's request table. ``seq`` and ``sid`` hold the id as ``fold.folding.accumulate`` keys
it; ``timed``: the steps had times (else no cadence at all: the JSON's None); the steps by draft
position are null unless the fold was asked for them (``fold.folding.request_positions``)."""

CADENCE_JSON = (
    "lines",
    "intervals",
    "first_step_s",
    "decode_s",
    "tail_s",
    "interval_median_s",
    "interval_p90_s",
    "interval_p99_s",
    "interval_max_s",
    "stalls",
    "stall_s",
    "decode_steps_per_s",
)
"""A request's cadence in the JSON's order (``fold.folding.cadence``'s figures, in seconds)."""
ROW = ("w", "seq", *SUMS, "accept_rate", "mean_acceptance_length", "cadence")
"""A request's keys in the JSON's order."""


def _ratios() -> list[pl.Expr]:
    """A/P and 1 + A/S, each None without its denominator: ``fold.inputs.acceptance``'s
    definitions, with the same float operations (counts below 2^53 convert exactly)."""
    return [
        pl.when(pl.col("proposed") > 0)
        .then(pl.col("accepted") / pl.col("proposed"))
        .alias("accept_rate"),
        pl.when(pl.col("steps") > 0)
        .then(1 + pl.col("accepted") / pl.col("steps"))
        .alias("mean_acceptance_length"),
    ]


def request_tables(
    requests: pl.DataFrame,
    cadence: pl.DataFrame | None,
    durations: pl.DataFrame,
    draft_positions: pl.DataFrame | None = None,
) -> dict[int, RequestRows]:
    """Each leg's requests (a partial fold's ``requests``: ``REQUEST_KEY`` and ``SUMS``) with
    their ratios, their cadence (``fold.folding.cadence.Cadence.requests``; None when the
    steps have no times), their step durations (a partial fold's ``durations``) and, when
    given, their steps by draft position (``fold.folding.request_positions``), in
    ``REQUEST_KEY`` order."""
    table = requests.sort(REQUEST_KEY).with_columns(_ratios())
    if cadence is None:
        table = table.with_columns(pl.lit(False).alias("timed"))
    else:
        table = beside(table, cadence.rename({"lines": "cadence_lines"})).with_columns(
            pl.lit(True).alias("timed"),
            # A request the cadence did not see has no line and no interval in the window.
            pl.col("cadence_lines", "intervals").fill_null(0),
        )
    table = table.rename({k: v for k, v in _FROM_CADENCE.items() if k in table.columns})
    # A column no table brought is null, as a left join with no match makes it (below).
    if durations.height:
        table = beside(table, durations)
    if draft_positions is not None:
        table = beside(table, draft_positions)
    whole = table.select(
        "leg",
        *(
            pl.col(name).cast(dtype)
            if name in table.columns
            else pl.lit(None, dtype=dtype).alias(name)
            for name, dtype in SCHEMA.items()
        ),
    )
    del table
    # Sorted by leg first, so each leg's rows are one slice of the whole, shared, not copied;
    # the leg column dropped once, not from each slice: a polars call gives up the GIL and
    # waits to take it back from the bootstrap's thread (26-56 ms over 50 legs in a fold).
    counts = whole.group_by("leg", maintain_order=True).len().rows()
    whole = whole.drop("leg")
    tables: dict[int, RequestRows] = {}
    start = 0
    for leg, count in counts:
        tables[leg] = RequestRows(whole.slice(start, count))
        start += count
    return tables


def beside(table: pl.DataFrame, other: pl.DataFrame) -> pl.DataFrame:
    """``other``'s columns beside ``table``'s rows by ``REQUEST_KEY``, null where it has no
    row (a left join). Most often ``other`` has the very rows of ``table`` in its order (the
    cadence of every request, from step_times' rows): then its columns are put beside as they
    are, which a join over 10^6 requests takes ten times longer to find out. An empty
    ``table`` (a log without durations) takes ``other``'s columns empty: a join would still
    hash every row of ``other`` (160 MB over a load test's 10^6 requests)."""
    if table.height == 0:
        return table.hstack(other.drop(REQUEST_KEY).clear())
    if same_keys(table, other):
        return table.hstack(other.drop(REQUEST_KEY))
    return table.join(other, on=REQUEST_KEY, how="left", nulls_equal=True, maintain_order="left")


def same_keys(table: pl.DataFrame, other: pl.DataFrame) -> bool:
    """Whether ``other``'s rows are ``table``'s requests in ``table``'s order (``REQUEST_KEY``
    of the same types, value for value, nulls alike). The types are compared too: polars'
    ``equals`` finds an unsigned and a signed column, or an integer and a float column, equal
    where their values are, and a join would not match them."""
    keys, others = table.select(REQUEST_KEY), other.select(REQUEST_KEY)
    return keys.schema == others.schema and keys.equals(others)


class RequestRows(Sequence[Mapping[str, Any]]):
    """A leg's requests (``SCHEMA``), read as a sequence of read-only mappings (``ROW``'s
    keys; ``seq`` is the id as the log wrote it, an integer or a string) or by column. Nothing
    changes them after they are made: the table is never handed out, only copies."""

    __slots__ = ("_table",)

    def __init__(self, table: pl.DataFrame) -> None:
        self._table = table

    def __len__(self) -> int:
        return self._table.height

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(_mappings(self._table[index]))
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return next(_mappings(self._table.slice(index % len(self), 1)))

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        for start in range(0, len(self), _ROWS_AT_ONCE):
            yield from _mappings(self._table.slice(start, _ROWS_AT_ONCE))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RequestRows):
            return self._table.equals(other._table)
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(
                dict(a) == dict(b) for a, b in zip(self, other, strict=True)
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RequestRows({len(self)} requests)"

    def column(self, name: str) -> np.ndarray:
        """A copy of one numeric column of ``SCHEMA`` (a null is NaN)."""
        return self._table[name].to_numpy().copy()

    def table(self) -> pl.DataFrame:
        """A copy of the table (``SCHEMA``): changing it changes nothing here."""
        return self._table.clone()

    def ids(self, rows: Sequence[int]) -> list[tuple[str, int | str]]:
        """The (writer, id as the log wrote it) of the requests at ``rows``, in that order:
        only those become Python values (a load test's leg holds 18,000 requests, of which
        the lowest figures name a handful)."""
        picked = self._table.select("w", "seq", "sid")[list(rows)]
        return [(w, seq if sid is None else sid) for w, seq, sid in picked.iter_rows()]

    def to_json(self) -> list[dict[str, Any]]:
        """Each request as a plain dict (``ROW``), the cadence a dict in seconds or None."""
        return _json_rows(self._table)


EMPTY = RequestRows(pl.DataFrame(schema=SCHEMA))


def _mappings(part: pl.DataFrame) -> Iterator[Mapping[str, Any]]:
    for row in _json_rows(part):
        if row["cadence"] is not None:
            row["cadence"] = MappingProxyType(row["cadence"])
        yield MappingProxyType(row)


def _seconds(table: pl.DataFrame, column: str) -> np.ndarray:
    """``column``'s nanoseconds in seconds (NaN for null), divided as Python divides (numpy's
    true division; polars multiplies by the reciprocal, which can differ in the last digit)."""
    return table[column].cast(pl.Float64).to_numpy() / _NS


def _cadence_rows(table: pl.DataFrame) -> list[dict[str, Any] | None]:
    """Each request's cadence in seconds (``CADENCE_JSON``), with the arithmetic of the
    cadence's per-request figures; None where the steps have no times."""
    decode_s = _seconds(table, "decode_ns")
    decoding = (table["decode_ns"] > 0).fill_null(False).to_numpy()
    rate = np.full(table.height, np.nan)
    np.divide(table["intervals"].cast(pl.Float64).to_numpy(), decode_s, out=rate, where=decoding)
    columns: list[list[Any]] = [
        table["cadence_lines"].to_list(),
        table["intervals"].to_list(),
        *(_nulls(_seconds(table, name)) for name in _SECONDS),
        table["stalls"].to_list(),
        _nulls(_seconds(table, "stall_ns")),
        _nulls(rate),
    ]
    return [
        dict(zip(CADENCE_JSON, row, strict=True)) if timed else None
        for timed, row in zip(table["timed"].to_list(), zip(*columns, strict=True), strict=True)
    ]


_SECONDS = (
    "first_step_ns",
    "decode_ns",
    "tail_ns",
    "interval_median_ns",
    "interval_p90_ns",
    "interval_p99_ns",
    "interval_max_ns",
)


def _nulls(values: np.ndarray) -> list[float | None]:
    # Not through a polars Series: made from numpy, one imports numpy.ma (20 ms of a fold's
    # start-up, docs/performance.md), and this is the only such Series a plain fold makes.
    found: list[float | None] = values.tolist()
    for place in np.flatnonzero(np.isnan(values)).tolist():
        found[place] = None
    return found


def _json_rows(table: pl.DataFrame) -> list[dict[str, Any]]:
    ids = table["seq"].to_list()
    if table["sid"].null_count() < table.height:
        ids = [seq if sid is None else sid for seq, sid in zip(ids, table["sid"], strict=True)]
    # Rows from whole columns: a load test's 10^6 requests in one pass, not row by row.
    values = [table[name].to_list() for name in ("w", *SUMS, "accept_rate",
                                                 "mean_acceptance_length")]  # fmt: skip
    cadences: list[Any] = _cadence_rows(table) if table["timed"].any() else [None] * table.height
    return [
        {
            "w": w,
            "seq": seq,
            "lines": lines,
            "steps": steps,
            "proposed": proposed,
            "accepted": accepted,
            "accept_rate": rate,
            "mean_acceptance_length": length,
            "cadence": found,
        }
        for w, seq, lines, steps, proposed, accepted, rate, length, found in zip(
            values[0], ids, *values[1:], cadences, strict=True
        )
    ]


SUMS_FORMAT = "fold-acceptance-sums/2"
"""The sums file's format, in its Parquet key-value metadata under ``SUMS_FORMAT_KEY``."""
SUMS_FORMAT_KEY = "fold-acceptance.format"
FILE_SCHEMA: dict[str, pl.DataType] = {
    "leg": pl.Int64(),
    "run": pl.Int64(),
    "warm": pl.Boolean(),
    "w": pl.String(),
    "seq": pl.UInt64(),
    "sid": pl.String(),
    **{name: pl.Int64() for name in SUMS},
    **{name: dtype() for name, dtype in CADENCE_NS.items()},
    **{name: pl.Int64() for name in (*DURATION_SUMS, *FIRST_DURATIONS)},
    **{name: pl.List(pl.Int64()) for name in POSITION_LISTS},
}
"""The sums file's columns (``docs/sums.md``): a row per request of every leg with steps.
``seq`` is an integer id and ``sid`` null, or ``sid`` a string id and ``seq`` null; the cadence
is null where the steps had no times, the durations where no line carried them."""


def sums_table(legs: Sequence[tuple[int, int, bool, RequestRows]]) -> pl.DataFrame:
    """Every leg's requests (each leg as its index, run, warm and rows) in ``FILE_SCHEMA``."""
    frames = [
        rows.table().with_columns(
            pl.lit(leg, dtype=pl.Int64).alias("leg"),
            pl.lit(run, dtype=pl.Int64).alias("run"),
            pl.lit(warm).alias("warm"),
            pl.when(pl.col("sid").is_null()).then(pl.col("seq")).alias("seq"),
            *(pl.when(pl.col("timed")).then(pl.col(name)).alias(name) for name in CADENCE_NS),
        )
        for leg, run, warm, rows in legs
    ]
    if not frames:
        return pl.DataFrame(schema=FILE_SCHEMA)
    return pl.concat(frames).select(list(FILE_SCHEMA)).cast(FILE_SCHEMA)
