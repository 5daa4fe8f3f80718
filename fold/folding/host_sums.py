"""The sums file a fold writes (``--sums``, format ``fold-acceptance-sums/3``, docs/sums.md):
a row per request of every leg with its figures' columns, for an engine that reads Parquet,
and beside them what the fold itself kept of the request (``CARRIED``), with the fold's small
tables in the file's metadata. That is the host's whole partial fold once every file is read:
``fold.folding.from_sums`` folds many hosts' files into the document the fold of their logs
gives, reading no log.

The file is made before the document (``host_sums``), from the partial and the lines' figures,
so that a host whose own fold is refused (a warm leg it served no step of, counters that count
every host) still writes its part of the union.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import orjson
import polars as pl

from fold.errors import RefusedError
from fold.folding.accumulate import REQUEST_KEY, PartialFold, at_request_places
from fold.folding.line_figures import LineFigures
from fold.folding.request_rows import FILE_SCHEMA as FIGURE_COLUMNS
from fold.folding.request_rows import beside, request_tables, sums_table
from fold.folding.result import untimed
from fold.folding.step_intervals import COLUMNS as STEP_INTERVALS
from fold.inputs.reader import ReadCounts
from fold.inputs.sums_file import DIGEST_KEY, PARTIAL_KEY, SUMS_FORMAT, SUMS_FORMAT_KEY, data_digest

POSITION_ROW = pl.Struct(
    {"bucket": pl.Int64(), "steps": pl.Int64(), "proposed": pl.Int64(), "accepted": pl.Int64()}
)
LENGTH_ROW = pl.Struct({"length": pl.Int64(), "intervals": pl.Int64(), "ns": pl.Int64()})
CARRIED: dict[str, pl.DataType] = {
    "first_t_ns": pl.Int64(),
    "first_n": pl.Int64(),
    **STEP_INTERVALS,
    "held_t_ns": pl.List(pl.Int64()),
    "held_tokens": pl.List(pl.Int64()),
    "position_rows": pl.List(POSITION_ROW),
    "length_rows": pl.List(LENGTH_ROW),
}
"""What the fold keeps of a request besides its figures' columns: its first line (by
``t_ns``, then ``n``), its step times as intervals, and either the rows the native pass folded
from its lines in order (``position_rows``, ``length_rows``) or, where the read could not,
its lines themselves (``held_t_ns``, ``held_tokens``; null otherwise)."""
FILE_SCHEMA: dict[str, pl.DataType] = {**FIGURE_COLUMNS, **CARRIED}
SMALL_TABLES = ("legs", "histogram", "bins", "writers", "files")
"""The partial fold's tables kept per leg, bin, writer or file: in the metadata."""
ARM_LEGS = ("index", "start_ns", "end_ns", "leg")
"""What of the arm record the read depends on (which leg a line falls in, its time bin): a
file is folded only over an arm with the same."""


@dataclass(frozen=True)
class SumsFile:
    """The sums file's rows (``FILE_SCHEMA``) and its key-value metadata."""

    table: pl.DataFrame
    metadata: tuple[tuple[str, str], ...]

    def parquet_metadata(self) -> dict[str, str]:
        return dict(self.metadata)

    def parquet(self) -> bytes:
        """The file's bytes: its rows, its metadata and the digest of its pages."""
        return parquet_with_digest(self.table, self.parquet_metadata())


def host_sums(
    arm_legs: pl.DataFrame,
    partial: PartialFold,
    read_counts: Mapping[str, ReadCounts],
    step_source: str,
    lines: LineFigures,
    warm_legs: Collection[int],
) -> SumsFile:
    """The sums file of a fold whose every file is read (its unsure lines held) and whose
    lines' figures are settled, with the steps by draft position among them."""
    timed = untimed(step_source) is None
    rows = request_tables(
        partial.requests,
        lines.cadence.requests if timed else None,
        partial.durations,
        lines.draft_positions,
    )
    runs = dict(zip(arm_legs["index"].to_list(), arm_legs["run"].to_list(), strict=True))
    figures = sums_table(
        [
            (leg, runs[leg], leg in warm_legs, rows[leg])
            for leg in arm_legs["index"].to_list()
            if leg in rows
        ]
    )
    # The figures are copied out of the request tables: those go before the carried columns
    # are made (a load test's 200 MB).
    del rows
    carried = _carried(partial).with_columns(
        pl.when(pl.col("sid").is_null()).then(pl.col("seq")).alias("seq")
    )
    # Both are in REQUEST_KEY order with the same rows on a log's fold, so the carried columns
    # go beside the figures as they are: a join copied every list (about 170 MB of a load
    # test's 10^6 requests).
    table = beside(figures, carried)
    metadata = {
        "arm_legs": {
            name: arm_legs[name].to_list() if name in arm_legs.columns else [None] * arm_legs.height
            for name in ARM_LEGS
        },
        "step_source": step_source,
        **{name: getattr(partial, name).to_dict(as_series=False) for name in SMALL_TABLES},
        "read_counts": {path: _read_counts(counts) for path, counts in read_counts.items()},
    }
    return SumsFile(
        table.select(list(FILE_SCHEMA)).cast(FILE_SCHEMA),
        ((SUMS_FORMAT_KEY, SUMS_FORMAT), (PARTIAL_KEY, orjson.dumps(metadata).decode())),
    )


def _carried(partial: PartialFold) -> pl.DataFrame:
    """A row per request of ``partial`` (its ``step_times``' rows): ``REQUEST_KEY`` and
    ``CARRIED``.

    The per-request tables keyed by ``request`` (a row of ``step_times``) are each made into
    columns of ``step_times``' length and put beside its rows, so that no column is copied by
    a join more than once."""
    count = partial.step_times.height
    first = partial.requests.select(*REQUEST_KEY, "first_t_ns", "first_n")
    held = partial.held_lines.rename({"t_ns": "held_t_ns", "tokens": "held_tokens"})
    positions = (
        partial.position_rows.sort("request", "bucket")
        .group_by("request", maintain_order=True)
        .agg(pl.struct("bucket", "steps", "proposed", "accepted").alias("position_rows"))
    )
    # A request's intervals to its drafted lines of one length sum to at most its last time
    # less its first, so its own sum fits 64 bits (a leg's needs the 128 the table keeps).
    lengths = (
        partial.length_rows.sort("request", "length")
        .group_by("request", maintain_order=True)
        .agg(pl.struct("length", "intervals", pl.col("ns").cast(pl.Int64)).alias("length_rows"))
    )
    keyed = beside(partial.step_times, first)
    return keyed.hstack(
        [
            *at_request_places(count, held).get_columns(),
            *at_request_places(count, positions).get_columns(),
            *at_request_places(count, lengths).get_columns(),
        ]
    ).with_columns(pl.col("position_rows", "length_rows").fill_null([]))


def _read_counts(counts: ReadCounts) -> dict[str, object]:
    return {
        "torn_lines": counts.torn_lines,
        "skipped_lines": counts.skipped_lines,
        "skipped_examples": [[line.line, line.reason] for line in counts.skipped_examples],
        "kind": counts.kind,
        "run_lines": counts.run_lines,
        "other_lines": counts.other_lines,
    }


class RefusedWithSums(RefusedError):
    """A fold refused (exit 1) that was asked for its sums file: the file is still this host's
    part of a union of hosts (``--from-sums``), which is folded and checked whole."""

    def __init__(self, message: str, sums: SumsFile) -> None:
        super().__init__(message)
        self.sums = sums


def parquet_with_digest(table: pl.DataFrame, metadata: dict[str, str]) -> bytes:
    """``table`` as Parquet with ``metadata`` and the digest of its pages beside it: written
    twice, since the footer that holds the digest follows the pages it covers (the pages come
    out the same, the writer being deterministic; held so here)."""
    first = _written(table, metadata)
    digest = data_digest(first)
    second = _written(table, {**metadata, DIGEST_KEY: str(digest)})
    if data_digest(second) != digest:
        raise RuntimeError("the Parquet writer wrote the same table's pages differently")
    return second


def _written(table: pl.DataFrame, metadata: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    table.write_parquet(buffer, metadata=metadata, statistics=True)
    return buffer.getvalue()
