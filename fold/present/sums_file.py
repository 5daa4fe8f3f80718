"""The sums file (``--sums PATH``): the fold's requests and its partial as Parquet, a row per
request of every leg, with the format's name and the fold's small tables in the file's
metadata (``docs/sums.md``, ``fold.folding.host_sums``)."""

from __future__ import annotations

from fold.errors import InputError
from fold.folding.host_sums import SumsFile


def sums_parquet(sums: SumsFile | None) -> bytes:
    """The sums file's bytes."""
    if sums is None:
        raise InputError(
            "--sums writes each request's sums, and this fold has no requests: its counts came "
            "from the arm record's counters; name the step log(s) after the arm record"
        )
    return sums.parquet()
