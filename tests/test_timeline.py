"""The --trace file against the Chrome trace-event format, on the hand-built run.

``cadence_logs.stall_and_pace_run``: a cold leg with one line of writer b2; leg 1 with one
request of writer a1 (62 lines, a 2 s stall from 5 s to 7 s after the leg start); leg 2 with
two requests of writer a1 (101 and 71 lines). 235 lines in legs in all.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from cadence_logs import MS, T0_NS, S, stall_and_pace_run

from fold.api import fold_acceptance
from fold.cli import main
from fold.folding.timeline_lines import attributed_lines
from fold.inputs.arm import load_arm
from fold.present.timeline import build_timeline, group_size

ROOT = Path(__file__).resolve().parents[1]

PHASES = {"X", "M", "C"}
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def check_trace_event_format(document: dict[str, Any]) -> None:
    """The JSON object format: traceEvents, a display unit, and each event's required keys."""
    assert set(document) == {"traceEvents", "displayTimeUnit", "otherData"}
    assert document["displayTimeUnit"] in ("ms", "ns")
    for event in document["traceEvents"]:
        assert event["ph"] in PHASES, event
        assert isinstance(event["name"], str) and event["name"]
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        if event["ph"] == "M":
            assert event["name"] in METADATA
            assert set(event["args"]) in ({"name"}, {"sort_index"})
            continue
        assert isinstance(event["ts"], float) and math.isfinite(event["ts"])
        if event["ph"] == "X":
            assert isinstance(event["dur"], float) and event["dur"] >= 0
        if event["ph"] == "C":
            assert event["args"] and all(
                isinstance(value, (int, float)) for value in event["args"].values()
            )


@pytest.fixture
def run(tmp_path: Path) -> tuple[str, str]:
    return stall_and_pace_run(tmp_path)


def trace_of(run: tuple[str, str], **options: Any) -> dict[str, Any]:
    arm, log = run
    result = fold_acceptance(arm, [log])
    document = build_timeline(result.to_json(), attributed_lines(load_arm(arm), [log]), **options)
    # What a browser gets is the serialized file.
    return json.loads(json.dumps(document))


def slices(document: dict[str, Any], *names: str) -> list[dict[str, Any]]:
    return [e for e in document["traceEvents"] if e["ph"] == "X" and e["name"] in names]


def test_one_slice_per_step_in_microseconds_on_the_logs_clock(run):
    document = trace_of(run)
    check_trace_event_format(document)
    steps = slices(document, "verify", "stall")
    assert len(steps) == 235
    assert document["otherData"]["aggregated"] is False
    assert document["otherData"]["steps_per_slice"] == 1
    # Each slice ends at its step's t_ns (microseconds; a double near 1.76e15 us holds 0.25 us).
    ends = sorted(event["ts"] + event["dur"] for event in steps)
    leg1_first = (T0_NS + 3 * S) / 1000
    assert leg1_first in ends
    assert all(event["args"]["proposed"] in (0, 4) for event in steps)
    assert all(set(event["args"]) >= {"proposed", "accepted", "emitted"} for event in steps)
    (stall,) = slices(document, "stall")
    assert stall["ts"] == pytest.approx((T0_NS + 5 * S) / 1000, abs=1)
    assert stall["dur"] == pytest.approx(2 * S / 1000, abs=1)
    # A request's first step in a leg is a zero-length slice after its start-up.
    startup = [e for e in slices(document, "before first step") if e["args"]["leg"] == 1]
    assert startup[0]["dur"] == pytest.approx(3 * S / 1000, abs=1)


def test_tracks_per_request_grouped_by_writer(run):
    document = trace_of(run)
    names = {
        (e["pid"], e["tid"], e["name"]): e["args"]["name"]
        for e in document["traceEvents"]
        if e["ph"] == "M" and "name" in e["args"]
    }
    processes = {pid: name for (pid, _, kind), name in names.items() if kind == "process_name"}
    assert sorted(processes.values()) == [
        "gate",
        "writer 00000000000000a1 (pid 161)",
        "writer 00000000000000b2 (pid 178)",
    ]
    writer_a = next(pid for pid, name in processes.items() if "a1" in name)
    threads = {name for (pid, _, kind), name in names.items() if kind == "thread_name"}
    assert {"request 1", "request 2", "request 7", "legs"} == threads
    by_track: dict[tuple[int, int], int] = {}
    for event in slices(document, "verify", "stall"):
        by_track[(event["pid"], event["tid"])] = by_track.get((event["pid"], event["tid"]), 0) + 1
    # writer a1: seq 1 has 62 lines in leg 1 and 101 in leg 2, seq 2 has 71
    assert sorted(count for (pid, _), count in by_track.items() if pid == writer_a) == [71, 163]


def test_legs_on_the_gate_track_with_warm_and_cold(run):
    document = trace_of(run)
    legs = sorted((e for e in document["traceEvents"] if e["name"].startswith("leg ")),
                  key=lambda e: e["ts"])  # fmt: skip
    assert [e["name"] for e in legs] == ["leg 0 cold", "leg 1 warm", "leg 2 warm"]
    assert legs[1]["ts"] == T0_NS / 1000 and legs[1]["dur"] == 10 * S / 1000
    counter = [e for e in document["traceEvents"] if e["ph"] == "C"]
    # 61 + 172 verify steps (proposed > 0) in windows of 32: 2 windows in leg 1, 6 in leg 2,
    # and the cold leg's one step: every step accepted 2 of 4.
    assert len(counter) == 9
    assert {e["args"]["A/P"] for e in counter} == {50.0}
    assert min(e["ts"] for e in counter) == (T0_NS - 30 * S + 500 * MS) / 1000


def test_beyond_the_limit_steps_are_aggregated_and_the_file_says_so(run):
    document = trace_of(run, slice_limit=50)
    check_trace_event_format(document)
    meta = document["otherData"]
    assert meta["aggregated"] is True and meta["steps_per_slice"] == 5  # ceil(235 / 50)
    steps = slices(document, "verify", "stall")
    # per request and leg: ceil(62/5) + ceil(101/5) + ceil(71/5) + ceil(1/5) = 13+21+15+1
    assert len(steps) == 50 == meta["step_slices"]
    assert sum(e["args"]["steps"] for e in steps) == 235
    assert sum(e["args"]["stalls"] for e in steps) == 1
    assert sum(e["args"]["proposed"] for e in steps) == 4 * 234  # one line proposed nothing


def test_the_command_writes_the_trace(run, tmp_path: Path, capsys):
    arm, log = run
    out = tmp_path / "run.trace.json"
    assert main([arm, log, "--trace", str(out)]) == 0
    document = json.loads(out.read_text())
    check_trace_event_format(document)
    assert document["otherData"]["steps"] == 235
    assert main([arm, log, "--trace", str(tmp_path / "no-such-dir" / "t.json")]) == 2
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.parametrize("factor", [1.0, 1.02, 1.1])
def test_the_trace_marks_the_stalls_the_fold_counts(factor: float):
    # The recorded example run at factors low enough that its jitter makes many stalls: the
    # trace's judgement (per line) and the fold's (per request) must agree request by request.
    arm, log = str(ROOT / "fixtures" / "our-arm.json"), str(ROOT / "fixtures" / "steps.jsonl")
    result = fold_acceptance(arm, [log], stall_factor=factor)
    document = build_timeline(result.to_json(), attributed_lines(load_arm(arm), [log]))
    expected = {
        (leg["index"], request["seq"]): request["cadence"]["stalls"] or 0
        for leg in result.legs
        for request in leg["requests"]
    }
    found = dict.fromkeys(expected, 0)
    threads = {
        (e["pid"], e["tid"]): int(e["args"]["name"].split()[1])
        for e in document["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] != 1
    }
    for event in slices(document, "stall"):
        found[(event["args"]["leg"], threads[(event["pid"], event["tid"])])] += 1
    assert sum(found.values()) > 0
    assert found == expected


@pytest.mark.parametrize(
    ("counts", "limit", "expected"),
    [
        ([10, 10, 10], 30, 1),  # all fit
        ([10, 10, 10], 6, 5),  # 2 + 2 + 2
        ([11, 1, 1], 4, 6),  # 4: 3+1+1 = 5 slices, 5: 3+1+1, 6: 2+1+1 = 4
        ([10, 10, 10], 3, 10),  # one slice per request
        ([5, 5, 5, 5], 2, 5),  # four requests cannot fit in two slices: one each
    ],
)
def test_group_size_keeps_slices_within_the_limit(counts, limit, expected):
    assert group_size(pl.Series(counts), limit) == expected


def test_more_requests_than_the_limit_is_said_in_the_file(run):
    document = trace_of(run, slice_limit=3)
    meta = document["otherData"]
    # four (leg, request) tracks of 62, 101, 71 and 1 lines: one slice each, the largest size
    assert meta["steps_per_slice"] == 101 and meta["step_slices"] == 4
    assert meta["slice_limit_met"] is False
    assert trace_of(run)["otherData"]["slice_limit_met"] is True
