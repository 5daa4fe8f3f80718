"""Hand-computed cases for every figure of the fold, and the refusals around it."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import orjson
import pytest
from native_switch import native_switch

from fold.api import LogFold, fold_acceptance
from fold.errors import InputError, RefusedError
from fold.inputs.arm import arm_from_document
from fold.inputs.steplog import format_line
from fold.present.fold_lines import distribution_lines

BASE_S = 1_800_000_000  # epoch seconds of the first leg's start
NS = 1_000_000_000
WRITER = "00000000000000aa"


def leg(run: int, start_s: float, end_s: float, completion_tokens: int = 10, **extra):
    secs = end_s - start_s
    return {
        "run": run,
        "finish_reason": "length",
        "prompt_tokens": 5,
        "completion_tokens": completion_tokens,
        "secs": secs,
        "tok_s": extra.pop("tok_s", completion_tokens / secs),
        "generate_start_unix": BASE_S + start_s,
        "generate_end_unix": BASE_S + end_s,
        **extra,
    }


def ns(seconds: float) -> int:
    return BASE_S * NS + round(seconds * NS)


def step(t_ns: int, proposed: int, accepted: int, n: int, **fields) -> bytes:
    return format_line(
        writer_id=fields.pop("w", WRITER),
        n=n,
        t_ns=t_ns,
        pid=fields.pop("pid", 1),
        seq=fields.pop("seq", 0),
        proposed=proposed,
        accepted=accepted,
        **fields,
    )


def write(path: Path, lines: list[bytes], tail: bytes = b"") -> str:
    path.write_bytes(b"".join(lines) + tail)
    return str(path)


def arm(legs, **top):
    return arm_from_document({"legs": legs, **top}, "arm.json")


def by_index(result):
    return {figures["index"]: figures for figures in result.legs}


def test_every_formula_on_one_leg(tmp_path):
    # proposed/accepted: (4,2) (4,4) (4,0) and a step without draft (0,0) that S ignores.
    counts = [(4, 2), (4, 4), (4, 0), (0, 0)]
    lines = [step(ns(1 + i), p, a, i) for i, (p, a) in enumerate(counts)]
    record = arm([leg(1, 0, 10), leg(2, 0.5, 0.6)])  # leg 1 is warm but lies inside leg 0
    with pytest.raises(RefusedError):
        fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)])

    record = arm([leg(2, 0, 10, completion_tokens=10)])
    result = fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)])
    figures = result.legs[0]
    assert (figures["steps"], figures["proposed"], figures["accepted"]) == (3, 12, 6)
    assert figures["lines"] == 4
    assert figures["accept_rate"] == pytest.approx(6 / 12)
    assert figures["mean_acceptance_length"] == pytest.approx(1 + 6 / 3)
    assert figures["completion_tokens_per_step"] == pytest.approx(10 / 3)
    # Steps accepting exactly 0, 1, 2, 3, 4 draft tokens.
    assert list(figures["histogram"]) == [1, 0, 1, 0, 1]
    # Position i accepted when accepted > i: {2,4,0} -> i=0: 2 of 3, i=1: 2, i=2: 1, i=3: 1.
    assert figures["per_position"] == pytest.approx([2 / 3, 2 / 3, 1 / 3, 1 / 3])
    assert figures["step_rate"] == 3 / 10  # over the window as recorded, 10 s
    assert result.warm["mean_acceptance_length"] == pytest.approx(3.0)
    assert result.warm["output_throughput_tok_s"] == pytest.approx(1.0)


@pytest.mark.parametrize("native", [True, False], ids=["native", "polars"])
def test_per_position_of_the_steps_that_drafted_it(tmp_path, native):
    # Steps proposing 4, 4, 2 and accepting 3, 1, 2. Position i accepted by the steps with
    # accepted > i: 3, 2, 1, 0 of them; drafted by the steps with proposed > i: 3, 3, 2, 2.
    lines = [step(ns(1 + i), p, a, i) for i, (p, a) in enumerate([(4, 3), (4, 1), (2, 2)])]
    record = arm([leg(2, 0, 10)])
    with native_switch(native):
        result = fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)])
    for figures in (result.legs[0], result.warm, result.all):
        assert list(figures["per_position"]) == [3 / 3, 2 / 3, 1 / 3, 0 / 3]
        assert list(figures["per_position_of_proposed"]) == [1.0, 2 / 3, 1 / 2, 0 / 2]
        assert list(figures["histogram"]) == [0, 1, 1, 1, 0]  # summed over the proposals
    document = result.to_json()
    assert document["warm"]["per_position_of_proposed"] == [1.0, 2 / 3, 1 / 2, 0.0]
    assert document["sources"]["per_position_of_proposed"] == "step log"
    table = " ".join(distribution_lines(result.to_json()).plain.split())
    assert "(accepted > i)/S: 0:100.0% 1:66.7% 2:33.3% 3:0.0%" in table
    assert (
        "warm per-position, of steps that drafted it (accepted > i)/(proposed > i): "
        "0:100.0% 1:66.7% 2:50.0% 3:0.0%" in table
    )


@pytest.mark.parametrize("native", [True, False], ids=["native", "polars"])
def test_with_one_proposal_per_step_both_per_position_rates_are_equal(tmp_path, native):
    counts = [(5, 0), (5, 5), (5, 2), (0, 0), (5, 3), (5, 1), (5, 2)]
    lines = [step(ns(1 + i), p, a, i) for i, (p, a) in enumerate(counts)]
    with native_switch(native):
        result = fold_acceptance(arm([leg(2, 0, 10)]), [write(tmp_path / "s.jsonl", lines)])
    # Six drafted steps accepting 0, 5, 2, 3, 1, 2: more than i accepted by 5, 4, 2, 1, 1.
    assert list(result.warm["per_position"]) == [5 / 6, 4 / 6, 2 / 6, 1 / 6, 1 / 6]
    assert result.warm["per_position_of_proposed"] == result.warm["per_position"]


def test_pooled_figures_are_ratios_of_sums_not_means_of_ratios(tmp_path):
    lines = [step(ns(1), 10, 10, 0)] + [step(ns(11 + i * 0.1), 2, 0, 1 + i) for i in range(9)]
    record = arm([leg(2, 0, 10, tok_s=5.0), leg(3, 10.5, 20, tok_s=7.0), leg(4, 21, 22, tok_s=9.0)])
    lines.append(step(ns(21.5), 4, 1, 10))
    result = fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)])
    # A = 10 + 0 + 1, P = 10 + 18 + 4, S = 1 + 9 + 1.
    assert result.warm["accept_rate"] == pytest.approx(11 / 32)
    assert result.warm["mean_acceptance_length"] == pytest.approx(1 + 11 / 11)
    mean_of_ratios = statistics.mean([1.0, 0.0, 0.25])
    assert result.warm["accept_rate"] != pytest.approx(mean_of_ratios)
    assert result.warm["output_throughput_tok_s"] == 7.0  # the median tok/s of the warm legs
    assert list(result.warm["histogram"]) == [9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1]


def test_window_edges(tmp_path):
    record = arm([leg(2, 0, 1), leg(2, 2, 3)])
    # The recorded microseconds are known to +-500 ns; the window takes in that band.
    start0, end0, start1, end1 = ns(0) - 500, ns(1) + 500, ns(2) - 500, ns(3) + 500
    lines = [
        step(start0 - 1, 1, 1, 0),  # before the first leg
        step(start0, 1, 1, 1),  # exactly at a start: inside
        step(end0, 1, 1, 2),  # exactly at an end: inside
        step(end0 + 1, 1, 1, 3),  # between legs
        step(start1 - 1, 1, 1, 4),  # between legs
        step(start1, 1, 0, 5),
        step(end1, 1, 0, 6),
        step(end1 + 1, 1, 1, 7),  # after the last leg
    ]
    result = fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)])
    legs = by_index(result)
    assert (legs[0]["steps"], legs[0]["accepted"]) == (2, 2)
    assert (legs[1]["steps"], legs[1]["accepted"]) == (2, 0)
    assert result.fold.unattributed_steps == 4
    assert result.fold.files[0]["lines"] == 8


def test_microsecond_rounding_of_leg_times(tmp_path):
    # 0.1 + 0.2 style float noise must not move a window edge off its microsecond.
    record = arm_from_document(
        {"legs": [leg(2, 0, 1) | {"generate_start_unix": 1800000000.000001}]}, "arm.json"
    )
    assert record.legs["start_ns"][0] == 1_800_000_000_000_001_000 - 500


def test_overlapping_windows_use_the_label_or_are_ambiguous(tmp_path):
    record = arm([leg(2, 0, 10, leg="a"), leg(2, 5, 15, leg="b")])
    lines = [
        step(ns(7), 4, 4, 0, leg="b"),  # in both windows, label says b
        step(ns(7), 4, 3, 1),  # in both windows, no label: ambiguous
        step(ns(7), 4, 2, 2, leg="c"),  # a label no overlapping leg has: ambiguous
        step(ns(2), 4, 1, 3),  # only in a
        step(ns(12), 4, 0, 4, leg="a"),  # only in b: windows decide, not labels
    ]
    result = fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)])
    legs = by_index(result)
    assert (legs[0]["steps"], legs[0]["accepted"]) == (1, 1)
    assert (legs[1]["steps"], legs[1]["accepted"]) == (2, 4)
    assert result.fold.ambiguous_steps == 2


def test_overlap_without_labels_on_the_legs_is_ambiguous(tmp_path):
    record = arm([leg(2, 0, 10), leg(2, 5, 15)])
    lines = [step(ns(1), 1, 1, 0), step(ns(12), 1, 1, 1), step(ns(7), 1, 1, 2, leg="x")]
    result = fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)])
    assert result.fold.ambiguous_steps == 1
    assert [figures["steps"] for figures in result.legs] == [1, 1]


def test_torn_tail_is_counted_not_parsed(tmp_path):
    record = arm([leg(2, 0, 10)])
    path = write(tmp_path / "s.jsonl", [step(ns(1), 2, 1, 0)], tail=b'{"v":1,"w":"00')
    result = fold_acceptance(record, [path])
    assert result.fold.torn_lines == 1
    assert result.legs[0]["steps"] == 1


def test_torn_fragment_glued_to_the_next_line(tmp_path):
    record = arm([leg(2, 0, 10)])
    fragment = step(ns(2), 2, 2, 1)[:30]
    lines = [step(ns(1), 2, 1, 0), fragment + step(ns(3), 2, 0, 2)]
    result = fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)])
    assert result.fold.torn_lines == 1
    assert (result.legs[0]["steps"], result.legs[0]["accepted"]) == (2, 1)
    assert result.fold.lost_lines == 1  # the torn line's n is missing


@pytest.mark.parametrize("block_bytes", [64, 1 << 20])
def test_malformed_middle_line_names_file_and_line(tmp_path, block_bytes):
    record = arm([leg(2, 0, 10)])
    lines = [step(ns(1), 2, 1, 0), b'{"v":1,"w":"x", oops\n', step(ns(2), 2, 2, 1)]
    path = write(tmp_path / "s.jsonl", lines)
    with pytest.raises(InputError, match=r"s\.jsonl:2: not valid JSON"):
        fold_acceptance(record, [path], block_bytes=block_bytes)
    result = fold_acceptance(record, [path], skip_bad_lines=True, block_bytes=block_bytes)
    assert result.fold.skipped_lines == 1
    assert result.fold.skipped_examples[0].line == 2
    assert result.legs[0]["steps"] == 2


HEAD = b'{"v":1,"w":"a","n":0,"t_ns":1,"pid":1,"seq":1,'


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (HEAD + b'"proposed":"3","accepted":1}\n', "'proposed' \"3\" is not an integer"),
        (HEAD + b'"proposed":3.0,"accepted":1}\n', "'proposed' 3.0 is not an integer"),
        (HEAD + b'"accepted":1}\n', "'proposed' is missing or null, not an integer"),
        (HEAD.replace(b'"a"', b"7") + b'"proposed":3,"accepted":1}\n', "'w' 7 is not a string"),
        (HEAD.replace(b":1,", b":2,", 1) + b'"proposed":3,"accepted":1}\n', "format version 2"),
        (b"\n", "empty line"),
        (b"[1]\n", "not an object"),
    ],
)
def test_malformed_lines_are_named(tmp_path, line, message):
    record = arm([leg(2, 0, 10)])
    path = write(tmp_path / "s.jsonl", [step(ns(1), 2, 1, 0), line])
    with pytest.raises(InputError, match=message) as raised:
        fold_acceptance(record, [path])
    assert "s.jsonl:2:" in str(raised.value)


def test_impossible_counts_are_refused_with_file_and_line(tmp_path):
    record = arm([leg(2, 0, 10)])
    path = write(tmp_path / "s.jsonl", [step(ns(1), 2, 1, 0), step(ns(2), 2, 3, 1)])
    with pytest.raises(RefusedError) as raised:
        fold_acceptance(record, [path], skip_bad_lines=True)  # never skipped
    assert str(raised.value) == (
        f"{path}:2: 'accepted' 3 exceeds 'proposed' 2, more draft tokens accepted than proposed: "
        "the engine's instrumentation is miscounting; no acceptance can be computed from this log"
    )


@pytest.mark.parametrize(
    ("proposed", "accepted", "field"), [(-1, 0, "proposed"), (2, -1, "accepted")]
)
def test_a_negative_count_is_a_malformed_line(tmp_path, proposed, accepted, field):
    """FORMAT.md writes every integer unsigned: a sign makes the line bad, as 2^63 does."""
    record = arm([leg(2, 0, 10)])
    bad = step(ns(2), 0, 0, 1).replace(b'"proposed":0', f'"proposed":{proposed}'.encode())
    bad = bad.replace(b'"accepted":0', f'"accepted":{accepted}'.encode())
    path = write(tmp_path / "s.jsonl", [step(ns(1), 2, 1, 0), bad])
    with pytest.raises(InputError) as raised:
        fold_acceptance(record, [path])
    assert str(raised.value).startswith(
        f"{path}:2: field '{field}' -1 is negative: counts, request ids and durations are "
        "unsigned (FORMAT.md); fix or remove the line"
    )
    document = fold_acceptance(record, [path], skip_bad_lines=True)
    assert (document.fold.skipped_lines, document.fold.skipped_examples[0].line) == (1, 2)


def test_warm_leg_without_steps_is_refused(tmp_path):
    record = arm([leg(2, 0, 10), leg(2, 20, 30)])
    path = write(tmp_path / "s.jsonl", [step(ns(1), 2, 1, 0), step(ns(25), 0, 0, 1)])
    with pytest.raises(RefusedError, match="leg 1"):
        fold_acceptance(record, [path])


def test_empty_log_is_refused(tmp_path):
    record = arm([leg(2, 0, 10)])
    with pytest.raises(RefusedError, match="no verify step"):
        fold_acceptance(record, [write(tmp_path / "s.jsonl", [])])


def test_cold_leg_with_zero_proposals_has_undefined_rates(tmp_path):
    record = arm([leg(1, 0, 10), leg(2, 20, 30)])
    path = write(tmp_path / "s.jsonl", [step(ns(1), 0, 0, 0), step(ns(21), 3, 1, 1)])
    result = fold_acceptance(record, [path])
    cold = result.legs[0]
    assert (cold["lines"], cold["steps"], cold["accept_rate"]) == (1, 0, None)
    assert cold["mean_acceptance_length"] is None
    assert list(cold["per_position"]) == [] and list(cold["histogram"]) == []
    document = orjson.loads(orjson.dumps(result.to_json()))
    assert document["legs"][0]["accept_rate"] is None


def test_recorded_throughput_must_come_out_of_the_predicate(tmp_path):
    legs = [leg(1, 0, 1, tok_s=100.0), leg(2, 2, 3, tok_s=10.0), leg(3, 4, 5, tok_s=12.0)]
    lines = [step(ns(t), 2, 1, i) for i, t in enumerate((0.5, 2.5, 4.5))]
    path = write(tmp_path / "s.jsonl", lines)
    good = arm(legs, metrics={"output_throughput_tok_s": 11.0}, warm_legs=2, cold_legs_discarded=1)
    assert fold_acceptance(good, [path]).warm["output_throughput_tok_s"] == 11.0
    # The median of all three legs (12.0) is not what the gate recorded.
    with pytest.raises(RefusedError, match=r"legs selected by .run >= 1. is 12;"):
        fold_acceptance(good, [path], predicate="run >= 1")
    wrong = arm(legs, metrics={"output_throughput_tok_s": 12.0})
    with pytest.raises(RefusedError, match="median tok_s"):
        fold_acceptance(wrong, [path])
    # The recorded leg counts, as a count or as the warm legs' indices, must come out too.
    for recorded, reason in [
        ({"warm_legs": 3}, "warm_legs is 3 in the record, but 'run > 1' selects 2 legs"),
        ({"warm_legs": [1]}, "warm_legs is [1] in the record, but 'run > 1' selects [1, 2]"),
        ({"cold_legs_discarded": 0}, "cold_legs_discarded is 0 in the record, but 'run > 1' "
         "leaves 1 legs cold"),
    ]:  # fmt: skip
        record = arm(legs, metrics={"output_throughput_tok_s": 11.0}, **recorded)
        with pytest.raises(RefusedError, match=re.escape(reason)):
            fold_acceptance(record, [path])
    listed = arm(legs, metrics={"output_throughput_tok_s": 11.0}, warm_legs=[1, 2])
    assert list(fold_acceptance(listed, [path]).warm["legs"]) == [1, 2]
    # A predicate over another field, agreeing with the record, is accepted.
    other = arm(legs, metrics={"output_throughput_tok_s": 56.0})  # median of 100 and 12
    assert list(fold_acceptance(other, [path], predicate="tok_s > 11").warm["legs"]) == [0, 2]


def test_several_files_and_globs(tmp_path):
    record = arm([leg(2, 0, 10)])
    write(tmp_path / "a.jsonl", [step(ns(1), 4, 1, 0, w="000000000000000a")])
    write(tmp_path / "b.jsonl", [step(ns(2), 4, 3, 0, w="000000000000000b")])
    write(tmp_path / "c.log", [step(ns(3), 4, 4, 0, w="000000000000000c")])
    result = fold_acceptance(
        record, [str(tmp_path / "*.jsonl"), str(tmp_path / "c.log"), str(tmp_path / "a.jsonl")]
    )
    assert (result.legs[0]["steps"], result.legs[0]["accepted"]) == (3, 8)
    assert len(result.fold.files) == 3  # a.jsonl named twice is read once
    with pytest.raises(InputError, match="matches no file"):
        fold_acceptance(record, [str(tmp_path / "*.nothing")])


def test_requests_in_a_concurrent_leg(tmp_path):
    record = arm([leg(2, 0, 10)])
    lines = [step(ns(1 + i * 0.01), 4, 4, i, seq=1) for i in range(40)]
    lines += [step(ns(1 + i * 0.01), 4, 0, 40 + i, seq=2) for i in range(40)]
    result = fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)])
    requests = {request["seq"]: request for request in result.legs[0]["requests"]}
    assert requests[1]["accept_rate"] == 1.0 and requests[2]["accept_rate"] == 0.0
    assert requests[1]["steps"] == requests[2]["steps"] == 40
    assert "request collapse" in result.legs[0]["flags"]


def test_windows_show_a_collapse_within_a_leg(tmp_path):
    record = arm([leg(2, 0, 8)])
    # 8 windows of 4 steps over 8 seconds; the sixth accepts nothing.
    lines = [
        step(ns(second + quarter / 4 + 0.01), 4, 0 if second == 5 else 2, second * 4 + quarter)
        for second in range(8)
        for quarter in range(4)
    ]
    result = fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)], window_steps=4)
    windows = result.legs[0]["windows"]
    assert [window["steps"] for window in windows] == [4] * 8
    assert [window["accept_rate"] for window in windows] == [0.5] * 5 + [0.0] + [0.5] * 2
    assert result.legs[0]["flags"] == ("collapse",)
    steady = [step(ns(i / 4 + 0.01), 4, 2, i) for i in range(32)]
    result = fold_acceptance(record, [write(tmp_path / "t.jsonl", steady)], window_steps=4)
    assert result.legs[0]["flags"] == ()


def test_emitted_is_checked_against_completion_tokens(tmp_path):
    # Two requests: 2 prefill tokens + emitted (3 + 1 + 2) = 8 completion tokens.
    lines = [
        step(ns(1), 2, 2, 0, seq=1, emitted=3),
        step(ns(2), 2, 0, 1, seq=1, emitted=1),
        step(ns(3), 2, 1, 2, seq=2, emitted=2),
    ]
    path = write(tmp_path / "s.jsonl", lines)
    result = fold_acceptance(arm([leg(2, 0, 10, completion_tokens=8)]), [path])
    assert result.legs[0]["emitted_consistent"] is True and result.legs[0]["flags"] == ()
    result = fold_acceptance(arm([leg(2, 0, 10, completion_tokens=9)]), [path])
    assert result.legs[0]["emitted_consistent"] is False
    assert "emitted != completion" in result.legs[0]["flags"]


def test_lost_lines_and_a_log_read_twice(tmp_path):
    record = arm([leg(2, 0, 10)])
    lines = [step(ns(1), 2, 1, 0), step(ns(2), 2, 1, 3)]  # n = 1 and 2 never arrived
    result = fold_acceptance(record, [write(tmp_path / "s.jsonl", lines)])
    assert result.fold.lost_lines == 2
    write(tmp_path / "copy.jsonl", [*lines, step(ns(3), 2, 1, 1)])
    both = [str(tmp_path / "s.jsonl"), str(tmp_path / "copy.jsonl")]
    with pytest.raises(RefusedError, match=r"read twice") as error:
        fold_acceptance(record, both)
    assert str(error.value).startswith(f"2 logs ({', '.join(both)}): writer ")
    # Found by fuzzing --vs-log: one line repeated in one log named no file
    twice = [step(ns(1), 2, 1, 0), step(ns(2), 2, 1, 1), step(ns(2), 2, 1, 1)]
    write(tmp_path / "repeated.jsonl", twice)
    with pytest.raises(RefusedError, match=r"has 3 lines but counted only 2") as error:
        fold_acceptance(record, [str(tmp_path / "repeated.jsonl")])
    assert str(error.value).startswith(f"{tmp_path / 'repeated.jsonl'}: writer ")


def test_arm_record_errors_name_the_leg_and_field():
    with pytest.raises(InputError, match="leg 1: 'tok_s' \"fast\" is not a finite number"):
        arm([leg(1, 0, 1), {**leg(2, 2, 3), "tok_s": "fast"}])
    with pytest.raises(InputError, match="leg 0: 'run' is missing or null, not an integer"):
        arm([{key: value for key, value in leg(1, 0, 1).items() if key != "run"}])
    with pytest.raises(InputError, match=r"ends .* before it starts"):
        arm([leg(1, 5, 1)])
    assert arm_from_document([leg(2, 0, 1)], "list.json").legs.height == 1


def test_partial_folds_merge_to_the_whole(tmp_path):
    record = arm([leg(1, 0, 10), leg(2, 10.5, 20)])
    lines = [step(ns(0.5 + i * 0.9), 4, i % 5, i) for i in range(22)]
    write(tmp_path / "first.jsonl", lines[:9])
    write(tmp_path / "second.jsonl", lines[9:])
    write(tmp_path / "whole.jsonl", lines)
    whole = LogFold(record)
    whole.add_file(str(tmp_path / "whole.jsonl"))
    first, second = LogFold(record), LogFold(record)
    first.add_file(str(tmp_path / "first.jsonl"))
    second.add_file(str(tmp_path / "second.jsonl"))
    merged = first.merge(second).result().to_json()
    expected = whole.result().to_json()
    for key in ("legs", "warm", "all", "lost_lines", "unattributed_steps"):
        assert merged[key] == expected[key]


def test_end_to_end_fixture_matches_the_toy_engines_own_counters():
    fixtures = Path(__file__).parent.parent / "fixtures"
    result = fold_acceptance(fixtures / "our-arm.json", [str(fixtures / "steps.jsonl")])
    document = json.loads((fixtures / "our-arm.json").read_text())
    assert len(result.legs) == len(document["legs"])
    for figures, recorded in zip(result.legs, document["legs"], strict=True):
        counters = recorded["engine_counters"]
        assert figures["steps"] == counters["steps"]
        assert figures["proposed"] == counters["proposed"]
        assert figures["accepted"] == counters["accepted"]
        assert figures["emitted_consistent"] is True
    assert result.fold.unattributed_steps == result.fold.torn_lines == result.fold.lost_lines == 0


def test_request_ids_use_the_whole_unsigned_64_bit_range(tmp_path):
    record = arm([leg(2, 0, 10)])
    big = 2**64 - 1
    lines = [step(ns(1), 4, 1, 0, seq=big), step(ns(2), 4, 3, 1, seq=2**63)]
    lines.append(step(ns(3), 4, 0, 2, seq=big).replace(b'"seq":', b'"seq": '))  # not the layout
    for block_bytes in (64, 1 << 20):
        result = fold_acceptance(
            record, [write(tmp_path / "s.jsonl", lines)], block_bytes=block_bytes
        )
        assert sorted(request["seq"] for request in result.legs[0]["requests"]) == [2**63, big]
    too_big = step(ns(3), 4, 3, 2).replace(b'"seq":0', f'"seq":{2**64}'.encode())
    with pytest.raises(
        InputError,
        match=r"t.jsonl:4: field 'seq' 18446744073709551616 is past 2\^64 - 1, the largest "
        "integer request id",
    ):
        fold_acceptance(record, [write(tmp_path / "t.jsonl", [*lines, too_big])])


@pytest.mark.parametrize("enabled_before", [True, False])
def test_the_fold_leaves_the_cycle_collector_as_it_found_it(tmp_path, monkeypatch, enabled_before):
    """The collector is paused while the figures are built (they hold no cycles) and set back
    after, also when the fold is refused."""
    import gc

    import fold.folding.build

    seen_while_building = []
    building = fold.folding.build._acceptance_drafts

    def spy(*args, **kwargs):
        seen_while_building.append(gc.isenabled())
        return building(*args, **kwargs)

    monkeypatch.setattr(fold.folding.build, "_acceptance_drafts", spy)
    record = arm([leg(2, 0, 10), leg(2, 20, 30)])
    good = write(tmp_path / "good.jsonl", [step(ns(1), 2, 1, 0), step(ns(21), 2, 2, 1)])
    refused = write(tmp_path / "refused.jsonl", [step(ns(1), 2, 1, 0)])
    (gc.enable if enabled_before else gc.disable)()
    try:
        fold_acceptance(record, [good])
        assert gc.isenabled() is enabled_before
        with pytest.raises(RefusedError):
            fold_acceptance(record, [refused])
        assert gc.isenabled() is enabled_before
    finally:
        gc.enable()
    assert seen_while_building == [False, False]


def test_a_repeated_line_is_refused_where_it_makes_up_for_a_lost_one(tmp_path):
    record = arm([leg(2, 0, 10)])
    # n = 2 never arrived and n = 1 came twice: as many lines as the counter gives, so the
    # count alone saw nothing lost and nothing read twice
    lines = [step(ns(1), 2, 1, 0), step(ns(2), 2, 1, 1), step(ns(3), 2, 1, 1), step(ns(4), 2, 1, 3)]
    path = write(tmp_path / "s.jsonl", lines)
    with pytest.raises(RefusedError, match=r"not its counter's with none missing") as error:
        fold_acceptance(record, [path])
    assert str(error.value).startswith(f"{path}: writer {WRITER} (pid ")
    # two lost (n = 0 and 1) and n = 3 twice: the missing values would have to add up to 0
    lines = [step(ns(1), 2, 1, 3), step(ns(2), 2, 1, 3)]
    path = write(tmp_path / "t.jsonl", lines)
    with pytest.raises(RefusedError, match=r"with 2 missing: some n came twice"):
        fold_acceptance(record, [path])
    # the documented limit: n = 1, 3 and 4 lost, 2 twice; the sum leaves 6 for two missing
    # values, as {2, 4} would, so this reads as two lost
    lines = [step(ns(t), 2, 1, n) for t, n in enumerate([0, 2, 2, 5], start=1)]
    result = fold_acceptance(record, [write(tmp_path / "u.jsonl", lines)])
    assert result.fold.lost_lines == 2
