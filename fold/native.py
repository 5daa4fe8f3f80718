"""The optional native fold of a step log in the writers' exact layout (``fold._native``).

``fold_file_native`` folds a whole file in one C++ pass (no per-line Python object, the GIL
released, the file split across the cores) into the same ``PartialFold`` the polars paths
build, or returns None to hand the file to them. It declines anything but the common case: a
file that is empty or whose last line is torn; a line that is not exactly the writers' layout
(FORMAT.md: key order, no spaces, plain unsigned integers without leading zeros, a label of
printable ASCII without quote or backslash); ``accepted > proposed``; an integer or a sum out
of range; leg windows that overlap (steps in them are resolved by their labels, in Python).
The polars paths then give the exact errors and counts.

The extension is optional: without a compiler at install time, or with the environment
variable ``FOLD_ACCEPTANCE_NATIVE=0``, every file goes to the polars paths.
"""

from __future__ import annotations

import array
import os

import polars as pl

from fold.accumulate import (
    _SCHEMAS,
    PER_REQUEST_SCHEMA,
    TIME_BINS_PER_LEG,
    PartialFold,
    _assemble,
)

try:
    from fold import _native
except ImportError:  # built without a compiler or Python headers: the polars paths remain
    _native = None

ENVIRONMENT_SWITCH = "FOLD_ACCEPTANCE_NATIVE"


def available() -> bool:
    """Whether the extension is built and not switched off by ``FOLD_ACCEPTANCE_NATIVE=0``."""
    return _native is not None and os.environ.get(ENVIRONMENT_SWITCH, "1").strip() != "0"


def fold_file_native(path: str, legs: pl.DataFrame) -> PartialFold | None:
    """The partial fold of the whole file ``path`` over ``legs``, or None (see the module)."""
    if not available() or legs.height == 0:
        return None
    raw = _native.fold_layout_file(
        path,
        legs["start_ns"].cast(pl.Int64).to_list(),
        legs["end_ns"].cast(pl.Int64).to_list(),
        TIME_BINS_PER_LEG,
    )
    if raw is None:
        return None
    return partial_from_native(raw, path, legs["index"].cast(pl.Int64).to_list())


def partial_from_native(raw: tuple, path: str, leg_indices: list[int]) -> PartialFold:
    """The native sums as a ``PartialFold`` with the polars paths' exact schemas.

    Columns arrive as the bytes of 64-bit integers and become polars columns without a
    Python object per row. Legs arrive as positions in the window lists (``len(leg_indices)``
    for none) and writers as indices into the list of writer ids; both are gathered here.
    """
    (lines, attributed, unattributed), writer_ids, requests, histogram, bins = raw
    leg_of = pl.Series("leg", [*leg_indices, None], dtype=pl.Int64)
    writer_of = pl.Series("w", writer_ids, dtype=pl.String)
    columns = {
        name: _series(name, data, dtype)
        for (name, dtype), data in zip(PER_REQUEST_SCHEMA.items(), requests, strict=True)
    }
    columns["leg"] = leg_of.gather(columns["leg"])
    columns["w"] = writer_of.gather(columns["w"])
    per_request = pl.DataFrame(columns)
    files = pl.DataFrame(
        {
            "path": [path],
            "lines": [lines],
            "attributed": [attributed],
            "unattributed": [unattributed],
            "ambiguous": [0],
        },
        schema=_SCHEMAS["files"],
    )
    return _assemble(
        per_request.select(list(PER_REQUEST_SCHEMA)).cast(PER_REQUEST_SCHEMA),
        _frame(histogram, _SCHEMAS["histogram"], leg_of),
        _frame(bins, _SCHEMAS["bins"], leg_of),
        files,
    )


def _series(name: str, data: bytes, dtype: pl.DataType) -> pl.Series:
    """The column ``name`` from the bytes of its 64-bit values (``w``: writer indices)."""
    unsigned = dtype == pl.UInt64
    values = array.array("Q" if unsigned else "q")
    values.frombytes(data)
    return pl.Series(name, values, dtype=pl.UInt64 if unsigned else pl.Int64)


def _frame(columns: tuple, schema: dict[str, pl.DataType], leg_of: pl.Series) -> pl.DataFrame:
    series = [
        _series(name, data, dtype)
        for (name, dtype), data in zip(schema.items(), columns, strict=True)
    ]
    series[0] = leg_of.gather(series[0])
    return pl.DataFrame(series)
