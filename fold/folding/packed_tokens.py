"""A line's counts packed in one int64: how the held lines (``PartialFold.held_lines``) and the
lines read back keep a line's proposed, accepted and emitted beside its time.

Each count is at most ``fold.inputs.limits.MAX_STEP_TOKENS`` = 2^16 < 2^17, and emitted is
stored + 1 so that 0 means "the line has no emitted" (``fold.folding.by_position`` unpacks
them; the extension packs them as ``line_order.h`` does).
"""

from __future__ import annotations

import polars as pl

TOKEN_BITS = 17
TOKEN_MASK = (1 << TOKEN_BITS) - 1


def packed_tokens() -> pl.Expr:
    """Each line's proposed, accepted and emitted in one int64 (``TOKEN_BITS`` apiece)."""
    emitted = (pl.col("emitted").cast(pl.Int64) + 1).fill_null(0)
    return (
        pl.col("proposed").cast(pl.Int64)
        + pl.col("accepted").cast(pl.Int64) * (1 << TOKEN_BITS)
        + emitted * (1 << (2 * TOKEN_BITS))
    ).alias("tokens")
