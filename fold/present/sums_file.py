"""The sums file (``--sums PATH``): the fold's table of requests as Parquet, a row per request
of every leg, with the format's name in the file's metadata (``docs/sums.md``)."""

from __future__ import annotations

import io

from fold.errors import InputError
from fold.folding.document import Document
from fold.folding.request_rows import SUMS_FORMAT, SUMS_FORMAT_KEY


def sums_parquet(document: Document) -> bytes:
    """The document's requests as the bytes of a Parquet file."""
    table = document.fold.sums_table()
    if table is None:
        raise InputError(
            "--sums writes each request's sums, and this fold has no requests: its counts came "
            "from the arm record's counters; name the step log(s) after the arm record"
        )
    buffer = io.BytesIO()
    table.write_parquet(buffer, metadata={SUMS_FORMAT_KEY: SUMS_FORMAT}, statistics=True)
    return buffer.getvalue()
