"""What the follower shows before the arm record exists: steps grouped by their ``leg`` label,
or by writer when unlabelled, split where the steps pause for longer than the gap, and summed.
The sums merge block by block, so a growing log is grouped from its new bytes alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from fold.inputs.acceptance import Counts

DEFAULT_GAP_SECONDS = 2.0
"""A pause this long between a group's steps starts a new provisional group."""

_GROUP_SCHEMA: dict[str, pl.DataType] = {
    "key": pl.String(),
    "group": pl.Int64(),
    "lines": pl.Int64(),
    "steps": pl.Int64(),
    "proposed": pl.Int64(),
    "accepted": pl.Int64(),
    "first_ns": pl.Int64(),
    "last_ns": pl.Int64(),
}
_CARRY_SCHEMA: dict[str, pl.DataType] = {
    "key": pl.String(),
    "carry_ns": pl.Int64(),
    "carry_group": pl.Int64(),
}
_LABEL_KEY = "leg:"
_WRITER_KEY = "writer:"


@dataclass(frozen=True)
class ProvisionalGroup:
    """Steps of one label (or one unlabelled writer) without a pause longer than the gap."""

    label: str | None
    writer: str | None
    """The writer id when the steps carry no ``leg`` label, else None."""
    part: int
    """0, 1, ...: the group's place among the groups of the same label or writer."""
    lines: int
    counts: Counts
    first_ns: int
    last_ns: int

    @property
    def seconds(self) -> float:
        return (self.last_ns - self.first_ns) / 1e9

    def to_json(self) -> dict[str, Any]:
        """The group's counts and figures, as the live view shows them."""
        return {
            "label": self.label,
            "writer": self.writer,
            "part": self.part,
            "lines": self.lines,
            "steps": self.counts.steps,
            "proposed": self.counts.proposed,
            "accepted": self.counts.accepted,
            "first_ns": self.first_ns,
            "seconds": self.seconds,
            "accept_rate": self.counts.accept_rate,
            "mean_acceptance_length": self.counts.mean_acceptance_length,
        }


class ProvisionalGroups:
    """Mergeable sums per (label or writer, part), split where steps pause for over ``gap_ns``.

    Blocks are added in file order; each block's steps are ordered by time per key, and the
    last time and part per key carry over to the next block.
    """

    def __init__(self, gap_ns: int) -> None:
        self.gap_ns = gap_ns
        self.table = pl.DataFrame(schema=_GROUP_SCHEMA)
        self._carry = pl.DataFrame(schema=_CARRY_SCHEMA)

    def add(self, steps: pl.DataFrame) -> None:
        if steps.height == 0:
            return
        keyed = (
            steps.select(
                pl.when(pl.col("label").is_not_null())
                .then(pl.lit(_LABEL_KEY) + pl.col("label"))
                .otherwise(pl.lit(_WRITER_KEY) + pl.col("w"))
                .alias("key"),
                "t_ns",
                "proposed",
                "accepted",
            )
            .sort("key", "t_ns")
            .join(self._carry, on="key", how="left")
        )
        previous = pl.col("t_ns").shift(1).over("key")
        first_of_key = pl.int_range(pl.len()).over("key") == 0
        previous = pl.when(first_of_key).then(pl.col("carry_ns")).otherwise(previous)
        starts = ((pl.col("t_ns") - previous) > self.gap_ns).fill_null(False)
        grouped = keyed.with_columns(
            (pl.col("carry_group").fill_null(0) + starts.cast(pl.Int64).cum_sum().over("key"))
            .cast(pl.Int64)
            .alias("group")
        )
        sums = grouped.group_by("key", "group").agg(
            pl.len().cast(pl.Int64).alias("lines"),
            (pl.col("proposed") > 0).sum().cast(pl.Int64).alias("steps"),
            pl.col("proposed").sum(),
            pl.col("accepted").sum(),
            pl.col("t_ns").min().alias("first_ns"),
            pl.col("t_ns").max().alias("last_ns"),
        )
        self.table = (
            pl.concat([self.table, sums.select(list(_GROUP_SCHEMA))])
            .group_by("key", "group")
            .agg(
                pl.col("lines", "steps", "proposed", "accepted").sum(),
                pl.col("first_ns").min(),
                pl.col("last_ns").max(),
            )
            .select(list(_GROUP_SCHEMA))
        )
        last = grouped.group_by("key").agg(
            pl.col("t_ns").max().alias("carry_ns"), pl.col("group").max().alias("carry_group")
        )
        self._carry = (
            pl.concat([self._carry, last.select(list(_CARRY_SCHEMA))])
            .group_by("key")
            .agg(pl.col("carry_ns").max(), pl.col("carry_group").max())
            .select(list(_CARRY_SCHEMA))
        )

    def groups(self) -> list[ProvisionalGroup]:
        groups = []
        for row in self.table.sort("first_ns", "key", "group").iter_rows(named=True):
            key: str = row["key"]
            is_label = key.startswith(_LABEL_KEY)
            groups.append(
                ProvisionalGroup(
                    label=key[len(_LABEL_KEY) :] if is_label else None,
                    writer=None if is_label else key[len(_WRITER_KEY) :],
                    part=row["group"],
                    lines=row["lines"],
                    counts=Counts.of(row),
                    first_ns=row["first_ns"],
                    last_ns=row["last_ns"],
                )
            )
        return groups
