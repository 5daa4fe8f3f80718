"""The sums file (``--sums PATH``): the fold's requests and its partial as Parquet, a row per
request of every leg, with the format's name and the fold's small tables in the file's
metadata (``docs/sums.md``, ``fold.folding.host_sums``)."""

from __future__ import annotations

import io

import polars as pl

from fold.errors import InputError
from fold.folding.host_sums import SumsFile
from fold.inputs.sums_file import DIGEST_KEY, data_digest


def sums_parquet(sums: SumsFile | None) -> bytes:
    """The sums file's bytes."""
    if sums is None:
        raise InputError(
            "--sums writes each request's sums, and this fold has no requests: its counts came "
            "from the arm record's counters; name the step log(s) after the arm record"
        )
    return parquet_with_digest(sums.table, sums.parquet_metadata())


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
