"""String request ids (FORMAT.md: ``seq`` may be a JSON string): both readers keep such
requests apart exactly as integer ones, and agree, on one thread or split across many.

Expectations are counted by hand from the lines written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from native_switch import native_switch
from polars.testing import assert_frame_equal
from strategies import BASE_US
from test_native import assert_both_ways_agree, assert_same_partials, folded

import fold.folding.native
from fold.api import fold_acceptance
from fold.errors import InputError
from fold.folding.logfile import Legs
from fold.inputs.arm import arm_from_document
from fold.inputs.reader import ReadCounts
from fold.inputs.steplog import StepLogWriter

W1, W2 = "00000000000000a1", "00000000000000b2"
LEG = {"run": 2, "secs": 0.5, "tok_s": 100.0, "prompt_tokens": 10, "finish_reason": "stop"}


def legs(count: int = 2) -> list[dict]:
    return [
        {**LEG, "completion_tokens": 20, "generate_start_unix": (BASE_US + 1_000_000 * k) / 1e6,
         "generate_end_unix": (BASE_US + 1_000_000 * k + 500_000) / 1e6}
        for k in range(count)
    ]  # fmt: skip


def t_ns(leg: int, step: int) -> int:
    return (BASE_US + 1_000_000 * leg + 1000 + step) * 1000


def line(w: str, n: int, t: int, seq: object, proposed: int, accepted: int) -> bytes:
    seq_text = json.dumps(seq, ensure_ascii=False)
    return (
        f'{{"v":1,"w":"{w}","n":{n},"t_ns":{t},"pid":1,"seq":{seq_text},'
        f'"proposed":{proposed},"accepted":{accepted}}}\n'
    ).encode()


def requests_of(result) -> list[list[tuple]]:
    return [
        [(r["w"], r["seq"], r["steps"], r["proposed"], r["accepted"]) for r in leg["requests"]]
        for leg in result.legs
    ]


def test_string_ids_are_requests_of_their_own_both_ways(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    lines = [
        line(W1, 0, t_ns(0, 0), "cmpl-b", 7, 3),
        line(W1, 1, t_ns(0, 1), 7, 7, 1),  # the integer 7
        line(W1, 2, t_ns(0, 2), "7", 7, 5),  # the string "7": another request
        line(W1, 3, t_ns(0, 3), "cmpl-b", 7, 2),
        line(W2, 0, t_ns(0, 4), "cmpl-b", 4, 4),  # same id, another writer: another request
        line(W1, 4, t_ns(0, 5), "cmpl-a", 7, 0),
        line(W1, 5, t_ns(1, 0), "cmpl-b", 6, 6),  # same id, next leg: its own there
        line(W1, 6, t_ns(1, 1), 'q"\\é', 2, 1),
    ]
    # The same id written with escapes by another writer's shape: the same request.
    lines.append(
        f'{{"seq":"q\\"\\\\\\u00e9","v":1,"w":"{W1}","n":7,"t_ns":{t_ns(1, 2)},"pid":1,'
        f'"proposed":3,"accepted":3}}\n'.encode()
    )
    log.write_bytes(b"".join(lines))
    arm = arm_from_document(legs())
    assert_both_ways_agree(arm, [str(log)])
    expected = [
        # per writer: integer ids first, then string ids by their bytes
        [(W1, 7, 1, 7, 1), (W1, "7", 1, 7, 5), (W1, "cmpl-a", 1, 7, 0), (W1, "cmpl-b", 2, 14, 5),
         (W2, "cmpl-b", 1, 4, 4)],
        [(W1, "cmpl-b", 1, 6, 6), (W1, 'q"\\é', 2, 5, 4)],
    ]  # fmt: skip
    for native in (True, False):
        with native_switch(native):
            result = fold_acceptance(arm, [str(log)], resamples=0)
        assert requests_of(result) == expected
        assert result.legs[0]["requests"][1]["seq"] == "7"
    with native_switch(True):
        native_json = fold_acceptance(arm, [str(log)], resamples=50).to_json()
    with native_switch(False):
        assert fold_acceptance(arm, [str(log)], resamples=50).to_json() == native_json


def test_the_writer_s_string_ids_fold_per_request(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    with StepLogWriter(log) as writer:
        for step in range(6):
            writer.record(f"cmpl-{step % 3}", 5, step % 3, t_ns=t_ns(0, step))
        writer.record(2, 5, 5, t_ns=t_ns(0, 9))
    arm = arm_from_document(legs(1))
    for native in (True, False):
        with native_switch(native):
            result = fold_acceptance(arm, [str(log)], resamples=0)
        rows = [(r["seq"], r["steps"], r["accepted"]) for r in result.legs[0]["requests"]]
        assert rows == [(2, 1, 5), ("cmpl-0", 2, 0), ("cmpl-1", 2, 2), ("cmpl-2", 2, 4)]
        assert result.legs[0]["requests"][0]["cadence"]["lines"] == 1
        assert result.legs[0]["requests"][1]["cadence"]["lines"] == 2


@pytest.mark.parametrize("bytes_per_thread", [1, 300, 5000])
def test_string_ids_merge_across_threads(tmp_path: Path, bytes_per_thread: int):
    """Each thread numbers the ids it meets; merged, one request per id, as in one pass."""
    log = tmp_path / "steps.jsonl"
    lines = [
        line(W1 if i % 3 else W2, i, t_ns(i % 2, i), f"r{i % 11}" if i % 4 else i % 5, 4, i % 5)
        for i in range(600)
    ]
    log.write_bytes(b"".join(lines))
    arm = arm_from_document(legs())
    index = Legs.of(arm.legs)
    split = fold.folding.native.read_range(
        str(log), arm.legs, index.windows, index.native, ReadCounts(),
        block=256, bytes_per_thread=bytes_per_thread, tally_drafts=True,
    )  # fmt: skip
    assert split is not None
    reference = folded(arm, [str(log)], native=False)[0]
    assert_same_partials(split.partial, reference, arm)
    # Integer ids (i % 4 == 0) fall in leg 0 only: 2 writers x 5; string ids in both legs:
    # 2 legs x 2 writers x 11 (every residue is met within 132 lines).
    assert reference.requests.height == 2 * 5 + 2 * 2 * 11


def test_trace_lines_carry_string_ids_both_ways(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(
        line(W1, 0, t_ns(0, 0), "a", 3, 1) + line(W1, 1, t_ns(0, 1), 3, 3, 2)
        + line(W1, 2, t_ns(0, 2), "a", 3, 3)
    )  # fmt: skip
    arm = arm_from_document(legs(1))
    index = Legs.of(arm.legs)
    read = fold.folding.native.read_range(
        str(log), arm.legs, index.windows, index.native, ReadCounts(), want_lines=True
    )
    assert read is not None and read.attributed_lines is not None
    assert read.attributed_lines.select("seq", "sid").rows() == [(0, "a"), (3, None), (0, "a")]


def test_a_seq_that_is_neither_is_a_bad_line_both_ways(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(
        line(W1, 0, t_ns(0, 0), "a", 3, 1) + line(W1, 1, t_ns(0, 1), ["a"], 3, 2)
    )  # fmt: skip
    arm = arm_from_document(legs(1))
    for native in (True, False):
        with native_switch(native), pytest.raises(InputError) as error:
            fold_acceptance(arm, [str(log)], resamples=0)
        assert "steps.jsonl:2: field 'seq' [\"a\"] is not an integer or a string" in str(
            error.value
        )


def test_step_times_of_string_ids_are_the_reference_s(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(
        line(W1, 0, t_ns(0, 5), "b", 3, 1) + line(W1, 1, t_ns(0, 1), 0, 3, 2)
        + line(W1, 2, t_ns(0, 3), "b", 3, 3)
    )  # fmt: skip
    arm = arm_from_document(legs(1))
    native = folded(arm, [str(log)], native=True)[0]
    reference = folded(arm, [str(log)], native=False)[0]
    # Each request's first time and the intervals after it in time order ("b": 3, then 5).
    assert native.step_times.rows() == [
        (0, W1, 0, None, t_ns(0, 1), [], []),
        (0, W1, 0, "b", t_ns(0, 3), [t_ns(0, 5) - t_ns(0, 3)], []),
    ]
    assert_frame_equal(native.step_times, reference.step_times)
    # "b" came out of time order: its lines are read again and held (row 1); the other
    # stands as the pass folded it.
    assert native.line_spans.select("request", "unordered").rows() == [(0, False)]
    assert native.held_lines["request"].to_list() == [1]
    assert_same_partials(native, reference, arm)
