"""A sums file (``--sums`` writes it, ``--from-sums`` reads it; docs/sums.md) read from disk:
its format's name checked, its rows and its metadata's JSON read, nothing else. What the rows
and tables may hold is checked where they are folded (``fold.folding.from_sums``)."""

from __future__ import annotations

import hashlib
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import polars as pl

from fold.errors import InputError

SUMS_FORMAT = "fold-acceptance-sums/3"
"""The sums file's format, in its Parquet key-value metadata under ``SUMS_FORMAT_KEY``."""
SUMS_FORMAT_KEY = "fold-acceptance.format"
PARTIAL_KEY = "fold-acceptance.partial"
"""The metadata key of the fold's small tables, as JSON."""
DIGEST_KEY = "fold-acceptance.pages-sha256"
"""The metadata key of the SHA-256 of the file's pages (``data_digest``)."""
MAGIC = b"PAR1"
OLDER_FORMATS = ("fold-acceptance-sums/1", "fold-acceptance-sums/2")
REDO = "the file is damaged, or was not written by --sums: write it again on its host"
READ_ERRORS = (OSError, ValueError, pl.exceptions.PolarsError, pl.exceptions.PanicException)
"""What polars' Parquet reader raises on a damaged file: a torn or overwritten page can make
it panic (a ``BaseException``), which is the file's fault, not the fold's."""


@dataclass(frozen=True)
class ReadSums:
    """A sums file as read: its rows and its metadata's JSON object."""

    path: str
    table: pl.DataFrame
    partial: dict[str, Any]


def data_digest(data: bytes) -> str | None:
    """The SHA-256 of a Parquet file's pages (all but its footer), or None when ``data`` does
    not end as a Parquet file does (its footer's length, then ``PAR1``)."""
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        return None
    footer = int.from_bytes(data[-8:-4], "little", signed=True)
    if not 0 < footer <= len(data) - 12:
        return None
    return hashlib.sha256(data[: len(data) - 8 - footer]).hexdigest()


def pages_hold(data: bytes, metadata: dict[str, str]) -> bool:
    """Whether the file's pages are the ones the digest in its ``metadata`` covers: the one
    check before any page is decoded. A file with neither a footer the digest can be found by
    nor a digest fails it (both None)."""
    digest = data_digest(data)
    return digest is not None and digest == metadata.get(DIGEST_KEY)


def read_parquet_sums(path: str) -> ReadSums:
    """The sums file at ``path``; an ``InputError`` naming it when it is not one this version
    reads, or cannot be read. Its pages are held to the digest --sums wrote beside them before
    any is decoded: polars' reader can abort the process on a damaged page (an allocation of
    2^61 bytes), past any error the command could give."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.strerror})") from None
    metadata = _metadata(path, data)
    if not pages_hold(data, metadata):
        raise InputError(
            f"{path}: its pages are not the ones --sums wrote (their digest differs): the file "
            "was cut short or changed after it was written; copy it again from its host"
        )
    try:
        with _native_stderr_quiet():
            table = pl.read_parquet(io.BytesIO(data))
    except READ_ERRORS as error:
        raise InputError(f"{path}: its rows cannot be read ({_first(error)}); {REDO}") from None
    try:
        partial = orjson.loads(metadata[PARTIAL_KEY])
    except (KeyError, orjson.JSONDecodeError) as error:
        raise InputError(
            f"{path}: its metadata key {PARTIAL_KEY} is missing or not JSON ({error}); {REDO}"
        ) from None
    if not isinstance(partial, dict):
        raise InputError(f"{path}: its metadata {PARTIAL_KEY} is not a JSON object; {REDO}")
    return ReadSums(path, table, partial)


@contextmanager
def _native_stderr_quiet() -> Iterator[None]:
    """The process's stderr closed to the Parquet reader while it reads: a damaged file can make
    it panic, which prints the panic and a backtrace from its own threads before the
    ``PanicException`` reaches us; the command names the file and the trouble instead."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _metadata(path: str, data: bytes) -> dict[str, str]:
    try:
        with _native_stderr_quiet():
            metadata = pl.read_parquet_metadata(io.BytesIO(data))
    except READ_ERRORS as error:
        raise InputError(
            f"{path}: not a Parquet file this tool can read ({_first(error)})"
        ) from None
    found = metadata.get(SUMS_FORMAT_KEY)
    if found == SUMS_FORMAT:
        return metadata
    if found in OLDER_FORMATS:
        raise InputError(
            f"{path}: format {found} holds the requests' figures but not the fold's partial "
            f"({SUMS_FORMAT} does): fold its host's log again with this version's --sums"
        )
    raise InputError(
        f"{path}: not a sums file (its metadata {SUMS_FORMAT_KEY} is {found!r}, this version "
        f"reads {SUMS_FORMAT}); --from-sums reads the files --sums writes"
    )


def _first(error: BaseException) -> str:
    if isinstance(error, pl.exceptions.PanicException):
        return "the Parquet reader stopped on a damaged page"
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
