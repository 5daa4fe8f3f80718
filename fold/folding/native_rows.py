"""The native pass's columns as polars takes them (``series``, ``lookup``, the follower's
steps), and what the pass folds of each request's lines in order (``fold.folding.line_rows``):
its rows by output position and draft length, the bytes its lines span, and where a read
leaves it for the next read of the file to go on from (seeds)."""

from __future__ import annotations

from typing import Any

import polars as pl

from fold.folding.accumulate import REQUEST_KEY, SCHEMAS, PartialFold


class ArrowColumn:
    """A column handed over by the extension (Arrow PyCapsule interface): polars takes its
    buffers without a copy."""

    def __init__(self, capsules: tuple[object, object]) -> None:
        self._capsules = capsules

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        return self._capsules


def series(name: str, capsules: tuple[object, object]) -> pl.Series:
    return pl.Series(ArrowColumn(capsules)).alias(name)


def frame_of(raw: dict[str, Any], columns: dict[str, str]) -> pl.DataFrame:
    """The result's columns ``columns`` (name in the frame: key in ``raw``) as one frame."""
    return pl.DataFrame([series(name, raw[key]) for name, key in columns.items()])


SEED_SCHEMA = {
    "leg": pl.Int64(),
    "w": pl.String(),
    "seq": pl.UInt64(),
    "sid": pl.String(),
    "last_t": pl.Int64(),
    "last_packed": pl.Int64(),
    "emitted_before": pl.Int64(),
    "bucket": pl.Int64(),
    "unordered": pl.Int64(),
}


def seeds_of(raw: dict[str, Any], partial: PartialFold) -> pl.DataFrame | None:
    """Where the read left each attributed request it met natively (``SEED_SCHEMA``); None
    when lines the exact parser folded joined the read's (its rows no longer match the
    pass's): no read may go on from there."""
    attributed = raw["attributed_requests"]
    state = raw["seeds"]
    keys = partial.step_times.select(REQUEST_KEY)
    if partial.step_times.height != attributed or partial.held_lines.height:
        return None
    return pl.concat(
        [
            keys,
            pl.DataFrame(
                [
                    *(series(name, state[name]) for name in ("last_t", "last_packed")),
                    *(series(name, state[name]) for name in ("emitted_before", "bucket")),
                    partial.line_spans["unordered"].cast(pl.Int64),
                ]
            ),
        ],
        how="horizontal",
    ).cast(SEED_SCHEMA)


def writer_bits(requests: pl.DataFrame) -> pl.Series:
    """Each request's writer as the extension keys it: its 16 hex digits' 64 bits, as int64
    (null for a writer not in that form, which the pass never folds)."""
    writer = requests["w"].str.to_integer(base=16, dtype=pl.UInt64, strict=False)
    return writer.cast(pl.Int64, wrap_numerical=True)


def key_columns(requests: pl.DataFrame) -> tuple[Any, ...]:
    """Requests (``REQUEST_KEY``, every writer in the pass's form) named as the extension
    takes them: writer and integer id as int64 bits, the string id or None, the leg."""
    return (
        writer_bits(requests).to_numpy(),
        requests["seq"].fill_null(0).cast(pl.Int64, wrap_numerical=True).to_numpy(),
        requests["sid"].to_list(),
        requests["leg"].cast(pl.Int64).to_numpy(),
    )


def seed_columns(seeds: pl.DataFrame) -> tuple[Any, ...]:
    """``seeds`` as the extension takes them."""
    known = seeds.filter(writer_bits(seeds).is_not_null())  # a writer never folded: no seed
    return (
        *key_columns(known),
        *(known[name].to_numpy() for name in ("last_t", "last_packed", "emitted_before")),
        known["bucket"].to_numpy(),
        known["unordered"].to_numpy(),
    )


def line_rows_of(path: str, raw: dict[str, Any], attributed: int) -> dict[str, pl.DataFrame]:
    """The pass's rows by output position and draft length, its drafted lines counted by
    (proposed, accepted) where it was asked to, and each attributed request's span of bytes,
    naming requests by their row in the step times."""
    positions = frame_of(
        raw,
        {
            "request": "bucket_row",
            "bucket": "bucket",
            "steps": "bucket_steps",
            "proposed": "bucket_proposed",
            "accepted": "bucket_accepted",
        },
    )
    lengths = frame_of(
        raw,
        {"request": "length_row", "length": "length", "intervals": "length_intervals",
         "ns": "length_ns"},
    )  # fmt: skip
    spans = pl.DataFrame(
        [
            series("first_offset", raw["first_offset"]).head(attributed),
            series("last_end", raw["last_end"]).head(attributed),
            (1 - series("unseeded", raw["seeded"]).head(attributed)).alias("unseeded"),
            series("unordered", raw["unordered"]).head(attributed).cast(pl.Boolean),
        ]
    ).with_row_index("request")
    tally = frame_of(
        raw,
        {"request": "tally_row", "proposed": "tally_proposed", "accepted": "tally_accepted",
         "count": "tally_count"},
    )  # fmt: skip
    return {
        "position_rows": positions.cast(SCHEMAS["position_rows"]),
        "length_rows": lengths.cast(SCHEMAS["length_rows"]),
        "draft_tally": tally.cast(SCHEMAS["draft_tally"]),
        "line_spans": spans.with_columns(pl.lit(path, pl.Categorical).alias("path"))
        .select(list(SCHEMAS["line_spans"]))
        .cast(SCHEMAS["line_spans"]),
    }


_STEPS_SCHEMA = {
    "w": pl.String(),
    "label": pl.String(),
    "t_ns": pl.Int64(),
    "proposed": pl.Int64(),
    "accepted": pl.Int64(),
}


def steps_of(raw: dict[str, Any] | None) -> pl.DataFrame:
    if raw is None:
        return pl.DataFrame(schema=_STEPS_SCHEMA)
    key = series("key", raw["key"])
    labels = pl.Series("label", raw["labels"], dtype=pl.String)
    writers = pl.Series("w", raw["writers"], dtype=pl.String)
    frame = pl.DataFrame(
        [
            key,
            series("t_ns", raw["t_ns"]),
            series("proposed", raw["proposed"]),
            series("accepted", raw["accepted"]),
        ]
    )
    # Labelled steps carry their label's index, unlabelled ones -1 - their writer's.
    return frame.select(
        lookup(writers, pl.when(pl.col("key") < 0).then(-1 - pl.col("key"))).alias("w"),
        lookup(labels, pl.when(pl.col("key") >= 0).then(pl.col("key"))).alias("label"),
        "t_ns",
        "proposed",
        "accepted",
    ).cast(_STEPS_SCHEMA)


def lookup(values: pl.Series, index: pl.Expr) -> pl.Expr:
    if values.len() == 0:
        return pl.lit(None, dtype=pl.String)
    return (
        pl.lit(values)
        .gather(index.fill_null(0))
        .alias("x")
        .pipe(lambda found: pl.when(index.is_not_null()).then(found))
    )
