"""The Python writer: FORMAT.md's layout, escaping, and counting of failed writes."""

from __future__ import annotations

import os

import orjson
import pytest

from fold.inputs.steplog import StepLogWriter, format_line


@pytest.mark.parametrize(
    "label", ["plain", 'quote " and \\ backslash', "tab\tnew\nline\x01\x1f\x7f", "ünï código ✓"]
)
def test_labels_round_trip_through_a_json_parser(label):
    line = format_line(writer_id="0" * 16, n=0, t_ns=1, pid=2, seq=3, proposed=4, accepted=1,
                       leg=label)  # fmt: skip
    assert orjson.loads(line)["leg"] == label
    assert line.count(b" ") == label.count(" ")  # the writer adds no spaces of its own


def test_lone_surrogate_becomes_the_replacement_character():
    line = format_line(writer_id="0" * 16, n=0, t_ns=1, pid=2, seq=3, proposed=4, accepted=1,
                       leg="a\ud800b")  # fmt: skip
    assert orjson.loads(line)["leg"] == "a\ufffdb"


def test_layout_and_key_order():
    line = format_line(writer_id="5f0c1a2b3c4d5e6f", n=0, t_ns=1764450000123456789, pid=4242,
                       seq=7, proposed=7, accepted=3, emitted=4, leg="warm")  # fmt: skip
    assert line == (
        b'{"v":1,"w":"5f0c1a2b3c4d5e6f","n":0,"t_ns":1764450000123456789,"pid":4242,"seq":7,'
        b'"proposed":7,"accepted":3,"emitted":4,"leg":"warm"}\n'
    )


def test_writer_counts_lines_and_refuses_impossible_counts(tmp_path):
    path = tmp_path / "s.jsonl"
    with StepLogWriter(path, leg="x") as writer:
        writer.record(1, 4, 2)
        writer.record(1, 4, 4, emitted=5)
        with pytest.raises(ValueError):
            writer.record(1, 2, 3)
    objects = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [obj["n"] for obj in objects] == [0, 1]
    assert {obj["pid"] for obj in objects} == {os.getpid()}
    assert objects[1]["emitted"] == 5 and "emitted" not in objects[0]
    assert writer.dropped == 0


def test_failed_write_is_counted_not_raised(tmp_path):
    writer = StepLogWriter(tmp_path / "s.jsonl")
    os.close(writer._fd)  # the descriptor goes bad underneath, as on a revoked mount
    writer.record(1, 2, 1)
    assert writer.dropped == 1
    writer._fd = -1
