"""Each request's steps by draft position, for the sums file: per position i (from 0), the
steps that accepted more than i draft tokens and the steps that proposed more than i.

A leg's per-position rates are sums of these over its requests divided by S
(``fold.inputs.acceptance.per_position``: steps with accepted > i, over S) or by the steps that
drafted position i (``per_position_of_proposed``), so a union of sums files gives them by a
``GROUP BY`` (``docs/sums.md``). A request's lists are as long as its largest proposal; they
sum to its A and its P (each step counts once at every position below its count).

They are made from each request's lines counted by (proposed, accepted)
(``fold.folding.line_rows.draft_counts``: the native pass counts them as it reads, when asked
to, and the lines held are counted from their tokens), so only when a fold is asked for them
(``--sums``): the counts and a list per request are memory the other figures do not need.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from fold.folding.accumulate import REQUEST_KEY, at_request_places

POSITION_LISTS = ("accepted_past", "proposed_past")
"""The two lists, by position: steps with accepted > i, steps with proposed > i."""


def request_positions(step_times: pl.DataFrame, counted: pl.DataFrame) -> pl.DataFrame:
    """``REQUEST_KEY`` and each request's ``POSITION_LISTS`` (Int64 lists), a row per request
    of ``step_times``, from its lines counted by (proposed, accepted) (``counted``: ``request``,
    its row in ``step_times``, ``proposed``, ``accepted``, ``count``)."""
    requests = step_times.height
    row = counted["request"].cast(pl.Int64).to_numpy()
    count = counted["count"].cast(pl.Int64).to_numpy()
    length = np.zeros(requests, dtype=np.int64)
    np.maximum.at(length, row, counted["proposed"].cast(pl.Int64).to_numpy())
    offsets = np.zeros(requests + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    owner = np.repeat(np.arange(requests, dtype=np.uint32), length)
    lists = pl.DataFrame({"r": owner}).with_columns(
        pl.Series(
            column, past_positions(offsets, row, counted[by].cast(pl.Int64).to_numpy(), count)
        )
        for column, by in zip(POSITION_LISTS, ("accepted", "proposed"), strict=True)
    )
    lists = (
        lists.set_sorted("r")
        .group_by("r", maintain_order=True)
        .agg(*POSITION_LISTS)
        .rename({"r": "request"})
    )
    empty = pl.lit([], dtype=pl.List(pl.Int64))
    # A request that drafted nothing has no group: its lists are empty.
    placed = at_request_places(requests, lists).select(
        pl.col(name).fill_null(empty) for name in POSITION_LISTS
    )
    return step_times.select(*REQUEST_KEY).hstack(placed.get_columns())


def past_positions(
    offsets: np.ndarray, group: np.ndarray, by: np.ndarray, count: np.ndarray
) -> np.ndarray:
    """Per group's positions laid end to end (group g's from ``offsets[g]``), the lines whose
    ``by`` exceeds the position: each (group, by, count) adds its lines from the group's first
    position up to its ``by``, as a difference array summed once. A group's additions end
    within its own span (``by`` is at most its span's length), so the running sum is back at
    zero where the next group begins. The groups are requests here, legs for the sums file's
    histogram (``fold.folding.sums_agreement``)."""
    difference = np.zeros(offsets[-1] + 1, dtype=np.int64)
    np.add.at(difference, offsets[group], count)
    np.subtract.at(difference, offsets[group] + by, count)
    return np.cumsum(difference[:-1])
