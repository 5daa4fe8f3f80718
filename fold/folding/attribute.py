"""Attributing steps to gate legs by time: each step to the leg whose window holds its t_ns.

Windows are closed intervals ``[start_ns, end_ns]``. The sorted distinct window ends cut the time
line into segments: each end point is a segment of its own and so is each open stretch between
two of them. Every step falls in exactly one segment (one binary search), and a segment is
covered by zero legs (the step is unattributed), one leg, or several (overlapping windows: the
step's ``leg`` label decides when it names exactly one of them, else the step is ambiguous).
No sort of the steps is needed, and no step is ever counted in two legs.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

ATTRIBUTED = 0
UNATTRIBUTED = 1
AMBIGUOUS = 2


@dataclass(frozen=True)
class LegWindows:
    points: pl.Series
    """Sorted distinct window starts and ends (ns)."""
    segment_leg: pl.Series
    """Per segment: the one leg covering it, or null."""
    segment_status: pl.Series
    """Per segment: ATTRIBUTED, UNATTRIBUTED or AMBIGUOUS (before labels are consulted)."""
    label_leg: pl.DataFrame
    """(segment, label) -> leg, for overlapping segments that a leg label resolves."""


def leg_windows(legs: pl.DataFrame) -> LegWindows:
    """Index ``legs`` (columns ``index``, ``start_ns``, ``end_ns``, optional ``leg`` label)."""
    points = (pl.concat([legs["start_ns"], legs["end_ns"]]).unique().sort().alias("points")).cast(
        pl.Int64
    )
    point_count = points.len()
    # Segment 2k+1 is the point points[k]; segment 2k is the open stretch before it.
    covering: list[list[int]] = [[] for _ in range(2 * point_count + 1)]
    first_points = points.search_sorted(legs["start_ns"], side="left").to_list()
    last_points = points.search_sorted(legs["end_ns"], side="left").to_list()
    for leg, first, last in zip(legs["index"].to_list(), first_points, last_points, strict=True):
        for segment in range(2 * first + 1, 2 * last + 2):
            covering[segment].append(leg)

    segment_leg = [legs_here[0] if len(legs_here) == 1 else None for legs_here in covering]
    segment_status = [
        ATTRIBUTED if len(legs_here) == 1 else UNATTRIBUTED if not legs_here else AMBIGUOUS
        for legs_here in covering
    ]
    labels = dict(zip(legs["index"].to_list(), _labels(legs), strict=True))
    resolvable: list[tuple[int, str, int]] = []
    for segment, legs_here in enumerate(covering):
        if len(legs_here) < 2:
            continue
        by_label: dict[str, list[int]] = {}
        for leg in legs_here:
            if labels[leg] is not None:
                by_label.setdefault(labels[leg], []).append(leg)
        resolvable.extend(
            (segment, label, owners[0]) for label, owners in by_label.items() if len(owners) == 1
        )
    return LegWindows(
        points=points,
        segment_leg=pl.Series("leg", segment_leg, dtype=pl.Int64),
        segment_status=pl.Series("status", segment_status, dtype=pl.Int8),
        label_leg=pl.DataFrame(
            resolvable,
            schema={"segment": pl.Int64, "label": pl.String, "resolved_leg": pl.Int64},
            orient="row",
        ),
    )


def _labels(legs: pl.DataFrame) -> list[str | None]:
    if "leg" not in legs.columns:
        return [None] * legs.height
    return legs["leg"].cast(pl.String).to_list()


def attribute(steps: pl.DataFrame, windows: LegWindows) -> pl.DataFrame:
    """``steps`` with ``leg`` (attributed leg index or null) and ``status`` columns added."""
    t_ns = steps["t_ns"]
    last_point = windows.points.len() - 1
    position = windows.points.search_sorted(t_ns, side="left")
    if last_point < 0:  # no legs (a follower without its record yet): one segment, no edge
        at_point = pl.repeat(False, steps.height, eager=True)
    else:
        at_point = (position <= last_point) & (
            windows.points.gather(position.clip(upper_bound=last_point)) == t_ns
        )
    segment = (position.cast(pl.Int64) * 2 + at_point.cast(pl.Int64)).alias("segment")
    attributed = steps.with_columns(
        segment,
        windows.segment_leg.gather(segment).alias("leg"),
        windows.segment_status.gather(segment).alias("status"),
    )
    if windows.label_leg.height and (attributed["status"] == AMBIGUOUS).any():
        attributed = (
            attributed.join(windows.label_leg, on=["segment", "label"], how="left")
            .with_columns(
                pl.coalesce("leg", "resolved_leg").alias("leg"),
                pl.when(pl.col("resolved_leg").is_not_null())
                .then(pl.lit(ATTRIBUTED, dtype=pl.Int8))
                .otherwise(pl.col("status"))
                .alias("status"),
            )
            .drop("resolved_leg")
        )
    return attributed.drop("segment")
