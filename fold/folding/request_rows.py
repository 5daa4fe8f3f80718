"""A leg's requests as one table: a row per request, a column per figure.

A serving load test folds 10^6 requests; a dict of figures per request (and a read-only view
of each, and a dict of its cadence) made the figures by request most of such a fold's time and
memory. The rows are kept as columns instead, read as columns by the figures over requests
(the spread, the lowest, the flags), and made into one mapping per request only for a reader
that asks for them one at a time, or for the JSON.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, overload

import numpy as np
import polars as pl

from fold.folding.accumulate import REQUEST_KEY

_NS = 1e9
_ROWS_AT_ONCE = 50_000
"""Rows made into mappings a part at a time by an iteration: one part's dicts at once."""

SUMS = ("lines", "steps", "proposed", "accepted")
CADENCE = (
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


def _seconds(table: pl.DataFrame, column: str) -> pl.Series:
    """``column``'s nanoseconds in seconds, divided as Python divides (numpy's true division;
    polars multiplies by the reciprocal, which can differ in the last digit)."""
    return pl.Series(table[column].cast(pl.Float64).to_numpy() / _NS, nan_to_null=True)


def _cadence_struct(table: pl.DataFrame) -> pl.Series:
    """A request's cadence in seconds from ``fold.folding.cadence.RAW_SCHEMA``'s nanoseconds,
    with the arithmetic of its per-request figures; a request the cadence did not see (no
    line in its window) has 0 lines, 0 intervals and no figure."""
    decode_s = _seconds(table, "decode_ns")
    decoding = (table["decode_ns"] > 0).fill_null(False).to_numpy()
    intervals = table["c_intervals"].cast(pl.Float64).to_numpy()
    rate = np.full(table.height, np.nan)
    np.divide(intervals, decode_s.to_numpy(), out=rate, where=decoding)
    columns = {
        "lines": table["c_lines"].fill_null(0),
        "intervals": table["c_intervals"].fill_null(0),
        "first_step_s": _seconds(table, "first_step_ns"),
        "decode_s": decode_s,
        "tail_s": _seconds(table, "tail_ns"),
        "interval_median_s": _seconds(table, "median_ns"),
        "interval_p90_s": _seconds(table, "p90_ns"),
        "interval_p99_s": _seconds(table, "p99_ns"),
        "interval_max_s": _seconds(table, "max_ns"),
        "stalls": table["stalls"],
        "stall_s": _seconds(table, "stall_ns"),
        "decode_steps_per_s": pl.Series(rate, nan_to_null=True),
    }
    return pl.DataFrame({name: column.alias(name) for name, column in columns.items()}).select(
        pl.struct(CADENCE).alias("cadence")
    )["cadence"]


def request_tables(requests: pl.DataFrame, cadence: pl.DataFrame | None) -> dict[int, RequestRows]:
    """Each leg's requests (a partial fold's ``requests``: ``REQUEST_KEY`` and ``SUMS``) with
    their ratios and, from ``cadence`` (``fold.folding.cadence.Cadence.requests``; None when
    the steps have no times), their cadence; in ``REQUEST_KEY`` order."""
    table = requests.sort(REQUEST_KEY).with_columns(_ratios())
    if cadence is None:
        table = table.with_columns(pl.lit(None, dtype=_CADENCE_TYPE).alias("cadence"))
    else:
        timed = cadence.rename({"lines": "c_lines", "intervals": "c_intervals"})
        table = table.join(
            timed, on=REQUEST_KEY, how="left", nulls_equal=True, maintain_order="left"
        )
        table = table.with_columns(_cadence_struct(table).cast(_CADENCE_TYPE))
    table = table.select("leg", "w", "seq", "sid", *SUMS, "accept_rate", "mean_acceptance_length",
                         "cadence")  # fmt: skip
    return {
        key[0]: RequestRows(frame.drop("leg"))
        for key, frame in table.partition_by("leg", as_dict=True, maintain_order=True).items()
    }


_CADENCE_TYPE = pl.Struct(
    {name: pl.Int64 if name in ("lines", "intervals", "stalls") else pl.Float64 for name in CADENCE}
)


class RequestRows(Sequence[Mapping[str, Any]]):
    """A leg's requests, read as a sequence of read-only mappings (``ROW``'s keys; ``seq`` is
    the id as the log wrote it, an integer or a string) or by column. Nothing changes them
    after they are made: the table is never handed out, only copies of its columns."""

    __slots__ = ("_table",)

    def __init__(self, table: pl.DataFrame) -> None:
        self._table = table

    @staticmethod
    def empty() -> RequestRows:
        return EMPTY

    def __len__(self) -> int:
        return self._table.height

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self._rows(self._table[index]))
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return next(self._rows(self._table.slice(index % len(self), 1)))

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        for start in range(0, len(self), _ROWS_AT_ONCE):
            yield from self._rows(self._table.slice(start, _ROWS_AT_ONCE))

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
        """A copy of one numeric column (``SUMS``, ``accept_rate``, ``mean_acceptance_length``;
        a ratio's None is NaN)."""
        return self._table[name].to_numpy().copy()

    def ids(self) -> list[tuple[str, int | str]]:
        """Each request's (writer, id as the log wrote it), in order."""
        return [
            (w, seq if sid is None else sid)
            for w, seq, sid in self._table.select("w", "seq", "sid").iter_rows()
        ]

    def to_json(self) -> list[dict[str, Any]]:
        """Each request as a plain dict (``ROW``), the cadence a dict or None."""
        table = self._table
        ids = table["seq"].to_list()
        if table["sid"].null_count() < table.height:
            ids = [seq if sid is None else sid for seq, sid in zip(ids, table["sid"], strict=True)]
        # Rows from whole columns: a load test's 10^6 requests in one pass, not row by row.
        values = [table[name].to_list() for name in ("w", *SUMS, "accept_rate",
                                                     "mean_acceptance_length")]  # fmt: skip
        cadence = table["cadence"]
        if cadence.null_count() == table.height:
            cadences: list[Any] = [None] * table.height
        else:
            parts = cadence.struct.unnest()
            present = cadence.is_not_null().to_list()
            cadences = [
                dict(zip(CADENCE, row, strict=True)) if here else None
                for here, row in zip(
                    present,
                    zip(*(parts[name].to_list() for name in CADENCE), strict=True),
                    strict=True,
                )
            ]
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

    @staticmethod
    def _rows(part: pl.DataFrame) -> Iterator[Mapping[str, Any]]:
        for row in RequestRows(part).to_json():
            if row["cadence"] is not None:
                row["cadence"] = MappingProxyType(row["cadence"])
            yield MappingProxyType(row)


EMPTY = RequestRows(
    pl.DataFrame(
        schema={
            "w": pl.String,
            "seq": pl.UInt64,
            "sid": pl.String,
            **dict.fromkeys(SUMS, pl.Int64),
            "accept_rate": pl.Float64,
            "mean_acceptance_length": pl.Float64,
            "cadence": _CADENCE_TYPE,
        }
    )
)
