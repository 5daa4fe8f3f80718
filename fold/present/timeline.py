"""The timeline: the fold's run as Chrome trace-event JSON (Perfetto UI, chrome://tracing).

Layout: one process per writer, one thread (track) per request (``seq``) under it; one complete
("X") slice per verify step, from the request's previous step to this one (a request's first
step in a leg is a zero-length slice after a "before first step" slice from the leg's start),
with ``proposed``, ``accepted`` and ``emitted`` in its args. Stalls
(``fold.folding.cadence``) are named
"stall". A "gate" process holds the leg windows (named warm or cold) and a counter of the
acceptance rate per window of steps, in each leg's time order.

Timestamps are the step log's own ``t_ns`` (the gate's legs are on the same clock), written as
microseconds. Beyond ``slice_limit`` steps, each slice covers the fewest consecutive steps of
one request that keep the slices within the limit (``group_size``; args hold their sums and the
stalls among them), so a log of millions of steps still gives a file a browser opens; the
acceptance windows widen by the same rule. ``otherData`` in the file says whether and how it
was aggregated, and whether the limit was met (a slice per request at least).

The timeline is a function of the fold's JSON document (the legs, their windows and figures,
the stall factor) and of the attributed step lines, which are inputs, not figures: they come
from ``fold.folding.timeline_lines``, which reads the logs again (the fold keeps no per-step rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from fold.folding.accumulate import request_id
from fold.folding.cadence import KEY, with_intervals
from fold.folding.timeline_lines import TraceLines
from fold.present.output import write_atomically

TRACE_FORMAT = "fold-acceptance-trace/1"
DEFAULT_SLICE_LIMIT = 200_000
"""Step slices at most; a browser opens such a file (tens of MB) without trouble."""
GATE_PID = 1
STEP = "verify"
STALL = "stall"
STARTUP = "before first step"


@dataclass(frozen=True)
class TimelineSummary:
    path: str
    steps: int
    step_slices: int
    steps_per_slice: int


def timeline(
    document: dict[str, Any],
    lines: TraceLines,
    *,
    slice_limit: int = DEFAULT_SLICE_LIMIT,
) -> bytes:
    """The timeline's bytes: ``build_timeline`` as JSON."""
    return orjson.dumps(build_timeline(document, lines, slice_limit=slice_limit))


def write_timeline(
    path: str | Path,
    document: dict[str, Any],
    lines: TraceLines,
    *,
    slice_limit: int = DEFAULT_SLICE_LIMIT,
) -> TimelineSummary:
    data = timeline(document, lines, slice_limit=slice_limit)
    write_atomically(path, data)
    meta = orjson.loads(data)["otherData"]
    return TimelineSummary(str(path), meta["steps"], meta["step_slices"], meta["steps_per_slice"])


def build_timeline(
    document: dict[str, Any],
    attributed: TraceLines,
    *,
    slice_limit: int = DEFAULT_SLICE_LIMIT,
) -> dict[str, Any]:
    """The trace-event document for the fold's JSON ``document``, whose attributed step lines
    are ``attributed`` (``fold.folding.timeline_lines.attributed_lines``)."""
    if slice_limit < 1:
        raise ValueError("slice_limit must be at least 1")
    lines, pids, paths = attributed.lines, attributed.pids, attributed.paths
    steps = lines.height
    per_slice = group_size(lines.group_by(KEY).len()["len"], slice_limit)
    window = document["window_steps"]
    drafted = lines.filter(pl.col("proposed") > 0).group_by("leg").len()["len"]
    width = window * group_size((drafted + window - 1) // window, slice_limit)
    writers, requests = _tracks(pids, lines)
    events: list[dict[str, Any]] = []
    events.extend(_track_names(writers, requests))
    events.extend(_gate(document["legs"]))
    # A leg at a time: a request's intervals never cross legs, and the working set of sorting
    # and slicing stays one leg's, not the whole log's.
    for leg in sorted(lines["leg"].unique().to_list()):
        part = with_intervals(lines.filter(pl.col("leg") == leg), document["stall_factor"])
        events.extend(_step_slices(part, per_slice, writers, requests))
        events.extend(_startup_slices(part, document["legs"], writers, requests))
        events.extend(_acceptance_counter(part, width))
    step_slices = sum(1 for event in events if event["name"] in (STEP, STALL))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "format": TRACE_FORMAT,
            "clock": "the step log's t_ns (the gate's legs on the same clock), in microseconds",
            "arm": attributed.arm,
            "logs": paths,
            "predicate": document["predicate"],
            "stall_factor": document["stall_factor"],
            "steps": steps,
            "step_slices": step_slices,
            "aggregated": per_slice > 1,
            "steps_per_slice": per_slice,
            "slice_limit": slice_limit,
            # Each request needs a slice of its own: more requests than the limit exceed it.
            "slice_limit_met": step_slices <= slice_limit,
            "left_out": {
                "unattributed_steps": document["unattributed_steps"],
                "ambiguous_steps": document["ambiguous_steps"],
            },
        },
    }


def group_size(counts: pl.Series, limit: int) -> int:
    """The fewest items per group such that groups of consecutive items, cut separately in
    each of ``counts``, number at most ``limit`` (1 when every item fits). When even one group
    per count is too many, the largest count: one group each, over the limit."""
    if int(counts.sum()) <= limit:
        return 1
    largest = int(counts.max())
    low = max(1, math.ceil(int(counts.sum()) / limit))
    high = largest
    if int(((counts + high - 1) // high).sum()) > limit:
        return largest
    while low < high:
        middle = (low + high) // 2
        if int(((counts + middle - 1) // middle).sum()) <= limit:
            high = middle
        else:
            low = middle + 1
    return low


def _tracks(
    pids: dict[str, int], lines: pl.DataFrame
) -> tuple[dict[str, tuple[int, int]], dict[tuple[str, int | str], int]]:
    """Trace pids per writer (after the gate's, with the log's pid) and tids per (writer,
    request id)."""
    writers = {w: (number, pids[w]) for number, w in enumerate(sorted(pids), start=GATE_PID + 1)}
    requests: dict[tuple[str, int | str], int] = {}
    counters: dict[str, int] = {}
    pairs = lines.select(pl.col("w").cast(pl.String), "seq", "sid").unique()
    for w, seq, sid in pairs.sort("w", "sid", "seq").iter_rows():
        counters[w] = counters.get(w, 0) + 1
        requests[(w, request_id(seq, sid))] = counters[w]
    return writers, requests


def _track_names(
    writers: dict[str, tuple[int, int]], requests: dict[tuple[str, int | str], int]
) -> list[dict[str, Any]]:
    events = [
        _meta("process_name", GATE_PID, 0, "gate"),
        _meta("process_sort_index", GATE_PID, 0, None, sort_index=0),
    ]
    for w, (number, pid) in writers.items():
        events.append(_meta("process_name", number, 0, f"writer {w} (pid {pid})"))
        events.append(_meta("process_sort_index", number, 0, None, sort_index=number))
    for (w, seq), tid in requests.items():
        events.append(_meta("thread_name", writers[w][0], tid, f"request {seq}"))
        events.append(_meta("thread_sort_index", writers[w][0], tid, None, sort_index=tid))
    return events


def _meta(
    name: str, pid: int, tid: int, label: str | None, sort_index: int | None = None
) -> dict[str, Any]:
    args = {"name": label} if sort_index is None else {"sort_index": sort_index}
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _step_slices(
    lines: pl.DataFrame,
    per_slice: int,
    writers: dict[str, tuple[int, int]],
    requests: dict[tuple[str, int | str], int],
) -> list[dict[str, Any]]:
    # A step's slice runs from the request's previous step (its interval) to its own time.
    chunks = (
        lines.with_columns(
            (pl.int_range(pl.len()).over(KEY) // per_slice).alias("chunk"),
            (pl.col("t_ns") - pl.col("interval_ns").fill_null(0)).alias("from_ns"),
        )
        .group_by([*KEY, "chunk"], maintain_order=True)
        .agg(
            pl.col("from_ns").first(),
            pl.col("t_ns").last(),
            pl.len().alias("steps"),
            pl.col("proposed").sum(),
            pl.col("accepted").sum(),
            pl.when(pl.col("emitted").null_count() == 0).then(pl.col("emitted").sum()),
            pl.col("stall").fill_null(False).sum().alias("stalls"),
            pl.col("interval_ns").max().alias("longest_ns"),
        )
    )
    events = []
    for row in chunks.iter_rows(named=True):
        args: dict[str, Any] = {
            "leg": row["leg"],
            "proposed": row["proposed"],
            "accepted": row["accepted"],
            "emitted": row["emitted"],
        }
        if per_slice > 1:
            args = {"steps": row["steps"], **args, "stalls": row["stalls"]}
        elif row["longest_ns"] is not None:
            args["interval_ms"] = row["longest_ns"] / 1e6
        events.append(
            {
                "name": STALL if row["stalls"] else STEP,
                "cat": "step",
                "ph": "X",
                "ts": row["from_ns"] / 1000,
                "dur": (row["t_ns"] - row["from_ns"]) / 1000,
                "pid": writers[row["w"]][0],
                "tid": requests[(row["w"], request_id(row["seq"], row["sid"]))],
                "args": args,
            }
        )
    return events


def _startup_slices(
    lines: pl.DataFrame,
    legs: list[dict[str, Any]],
    writers: dict[str, tuple[int, int]],
    requests: dict[tuple[str, int | str], int],
) -> list[dict[str, Any]]:
    starts = {leg["index"]: leg["window_start_ns"] for leg in legs}
    firsts = lines.group_by(KEY).agg(pl.col("t_ns").min()).sort(KEY)
    events = []
    for leg, w, seq, sid, first in firsts.select("leg", "w", "seq", "sid", "t_ns").iter_rows():
        start = starts[leg]
        if first <= start:
            continue
        events.append(
            {
                "name": STARTUP,
                "cat": "cadence",
                "ph": "X",
                "ts": start / 1000,
                "dur": (first - start) / 1000,
                "pid": writers[w][0],
                "tid": requests[(w, request_id(seq, sid))],
                "args": {"leg": leg},
            }
        )
    return events


def _gate(legs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leg windows on lanes of the gate process: a leg overlapping another gets its own lane."""
    windows = {leg["index"]: (leg["window_start_ns"], leg["window_end_ns"]) for leg in legs}
    lane_ends: list[int] = []
    events = []
    for leg in sorted(legs, key=lambda leg: windows[leg["index"]]):
        start, end = windows[leg["index"]]
        lane = next((i for i, last in enumerate(lane_ends) if last <= start), len(lane_ends))
        if lane == len(lane_ends):
            lane_ends.append(end)
            name = "legs" if lane == 0 else f"legs (lane {lane + 1})"
            events.append(_meta("thread_name", GATE_PID, lane + 1, name))
        lane_ends[lane] = end
        events.append(
            {
                "name": f"leg {leg['index']} {'warm' if leg['warm'] else 'cold'}",
                "cat": "leg",
                "ph": "X",
                "ts": start / 1000,
                "dur": (end - start) / 1000,
                "pid": GATE_PID,
                "tid": lane + 1,
                "args": {
                    "index": leg["index"],
                    "run": leg["run"],
                    "warm": leg["warm"],
                    "label": leg["label"],
                    "tok_s": leg["tok_s"],
                    "steps": leg["steps"],
                    "accept_rate": leg["accept_rate"],
                    "mean_acceptance_length": leg["mean_acceptance_length"],
                    "flags": leg["flags"],
                },
            }
        )
    return events


def _acceptance_counter(lines: pl.DataFrame, width: int) -> list[dict[str, Any]]:
    """A/P per window of ``width`` consecutive verify steps (proposed > 0) of each leg, in
    time order."""
    drafted = lines.filter(pl.col("proposed") > 0)
    windows = (
        drafted.sort("leg", "t_ns", maintain_order=True)
        .with_columns((pl.int_range(pl.len()).over("leg") // width).alias("window"))
        .group_by("leg", "window", maintain_order=True)
        .agg(pl.col("t_ns").first(), pl.col("proposed").sum(), pl.col("accepted").sum())
    )
    name = f"acceptance % (windows of {width} steps)"
    return [
        {
            "name": name,
            "ph": "C",
            "ts": t_ns / 1000,
            "pid": GATE_PID,
            "tid": 0,
            "args": {"A/P": round(100 * accepted / proposed, 3)},
        }
        for _leg, _window, t_ns, proposed, accepted in windows.iter_rows()
    ]
