"""The native reader (``fold._native`` through ``fold.folding.native``) against the polars
reference.

The extension is imported at the top: when it was not built, this module fails (CI builds it
with the package), it is not skipped. Every comparison folds the same files twice, once as is
and once with ``FOLD_ACCEPTANCE_NATIVE=0`` (``StepLogReader`` and ``partial_fold``), and checks
every table of the partial fold, every count and every error.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from native_switch import native_switch
from polars.testing import assert_frame_equal
from reference import arm_legs, attribute, parse_step
from strategies import BAD_LINES as SHARED_BAD_LINES
from strategies import (
    BASE_US,
    DURATIONS,
    HUGE_NUMBERS,
    LABELS,
    LARGE_DURATIONS,
    LARGE_EMITTED,
    LARGE_PROPOSALS,
    canonical_line,
    leg_bounds_ns,
    timestamps,
)
from strategies import ONE_SECOND_LEG as LEG

import fold.folding.accumulate
import fold.folding.logfile
import fold.folding.merge
import fold.folding.native
import fold.folding.timeline_lines
from fold import _native  # fails here when the extension was not built
from fold.api import LogFold, fold_acceptance
from fold.errors import InputError, RefusedError
from fold.folding.accumulate import PartialFold
from fold.folding.line_rows import draft_counts, line_rows
from fold.folding.logfile import Legs
from fold.folding.step_intervals import decoded, encode
from fold.inputs import limits
from fold.inputs.arm import arm_from_document, load_arm
from fold.inputs.reader import ReadCounts

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
TABLES = ("legs", "histogram", "requests", "bins", "writers", "step_times", "files", "durations")
SWITCH = fold.folding.native.ENVIRONMENT_SWITCH


def outcome(arm: Any, paths: list[str], *, native: bool, **options: Any) -> Any:
    """The public fold's JSON, or the error it stopped with, with the native reader on or off."""
    with native_switch(native):
        try:
            return fold_acceptance(arm, paths, **options).to_json()
        except (InputError, RefusedError) as error:
            return (type(error).__name__, str(error))


def folded(arm: Any, paths: list[str], *, native: bool, **options: Any) -> Any:
    """(partial fold, read counts) of the files, or the error, with the native reader on/off."""
    with native_switch(native):
        fold = LogFold(arm, tally_drafts=True)
        try:
            for path in paths:
                fold.add_file(path, **options)
        except (InputError, RefusedError) as error:
            return (type(error).__name__, str(error))
        return fold.partial, fold.read_counts


def assert_same_partials(native: PartialFold, reference: PartialFold, arm: Any) -> None:
    """Every table the two readers share, and the rows by output position, per draft length
    and by draft position that each makes from its lines (the native pass's, folded as it
    read; the reference's, from the lines it held)."""
    for name in TABLES:
        # Step intervals are one encoding of a request's times (its times sorted): equal too.
        left, right = getattr(native, name), getattr(reference, name)
        assert_frame_equal(left, right, check_row_order=name != "files")
    legs = Legs.of(arm.legs).native
    with native_switch(True):
        native_rows = line_rows(native, legs)
        native_counts = draft_counts(native)
    reference_rows = line_rows(reference, legs)
    assert_frame_equal(native_rows.buckets, reference_rows.buckets)
    assert_frame_equal(native_rows.lengths, reference_rows.lengths)
    assert_frame_equal(summed(native_counts), summed(draft_counts(reference)))


def summed(counts: pl.DataFrame) -> pl.DataFrame:
    """Drafted lines counted by (request, proposed, accepted), each combination once."""
    keys = ["request", "proposed", "accepted"]
    return counts.group_by(keys).agg(pl.col("count").sum()).sort(keys)


def assert_both_ways_agree(arm: Any, paths: list[str], **options: Any) -> Any:
    native = folded(arm, paths, native=True, **options)
    reference = folded(arm, paths, native=False, **options)
    if isinstance(reference, tuple) and isinstance(reference[0], str):
        assert native == reference
        return native
    assert not isinstance(native[0], str), native
    assert_same_partials(native[0], reference[0], arm)
    assert native[1] == reference[1]
    return native


def raw_read(path: Path, arm: Any, **options: Any) -> dict[str, Any]:
    """The extension's own result for the whole file (events, counts), without Python's part."""
    legs = Legs.of(arm.legs)
    extra = {
        name: options.pop(name)
        for name in ("block", "bytes_per_thread", "threads")
        if name in options
    }
    return _native.fold_range(
        str(path), 0, -1, options.get("skip_bad", True), False, *legs.native.arguments, 512,
        **extra,
    )  # fmt: skip


# -- the fixtures ------------------------------------------------------------------------------


@pytest.mark.parametrize("directory", [FIXTURES, FIXTURES / "gate-example"])
def test_fixtures_fold_the_same_both_ways(directory: Path):
    arm = load_arm(directory / "our-arm.json")
    log = str(directory / "steps.jsonl")
    assert_both_ways_agree(arm, [log])
    assert outcome(arm, [log], native=True) == outcome(arm, [log], native=False)


def test_the_switch_turns_the_native_reader_off(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(SWITCH, "0")
    assert not fold.folding.native.available()
    monkeypatch.setenv(SWITCH, "1")
    assert fold.folding.native.available()


# -- lines in any valid v1 shape ----------------------------------------------------------------

SPACES = st.sampled_from(["", "", " ", "  ", "\t", " \t "])
JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
ODD_LABELS = st.sampled_from(
    ["wärm", 'run "b"', "back\\slash", "tab\there", "nl\nx", "ctl\x01", "snow☃", "emoji😀", "}",
     '","leg":"x', "ü" * 3, ""]
) | st.text(max_size=6)  # fmt: skip


@dataclass(frozen=True)
class RawNumber:
    """A number literal written as it is: one no double holds, which json.dumps cannot write."""

    literal: bytes


# String request ids (FORMAT.md): "7" beside the integer 7, escapes, UTF-8, the empty id.
STRING_IDS = st.sampled_from(
    ["7", "cmpl-a1", "cmpl-a2", 'q"\\\t', "é\u2028漢", "", "nul\x00in", "\U0001f642"]
)


@st.composite
def v1_line(draw: st.DrawFn, row: dict[str, Any]) -> bytes:
    """``row`` as some writer might write it: any key order, whitespace between tokens, unknown
    keys with nested values, labels escaped or raw UTF-8, absent optionals as null or missing."""
    items = [(key, value) for key, value in row.items() if value is not None]
    for key in ("emitted", "draft_ns", "verify_ns", "leg"):
        if row.get(key) is None and draw(st.booleans()):
            items.append((key, None))
    for _ in range(draw(st.integers(0, 2))):
        value = draw(JSON_VALUES | st.sampled_from(HUGE_NUMBERS).map(RawNumber))
        items.append((draw(st.sampled_from(["future", "x", "meta", "ü"])), value))
    items = list({key: value for key, value in items}.items())  # one value per key
    items = draw(st.permutations(items))
    ascii_only = draw(st.booleans())
    parts = []
    for key, value in items:
        if isinstance(value, RawNumber):
            encoded = value.literal.decode()
        else:
            encoded = json.dumps(value, ensure_ascii=ascii_only)
        parts.append(
            f"{draw(SPACES)}{json.dumps(key, ensure_ascii=ascii_only)}{draw(SPACES)}:"
            f"{draw(SPACES)}{encoded}{draw(SPACES)}"
        )
    text = draw(SPACES) + "{" + ",".join(parts) + "}" + draw(st.sampled_from(["", " ", "\r"]))
    return text.encode("utf-8")


# The shared malformed lines, and ones only a JSON reader written by hand can get wrong.
BAD_LINES = [
    *SHARED_BAD_LINES,
    b'{"v":1,"w":"00000000000000ff","n":0,"t_ns":1,"pid":1,"seq":1,"proposed":1,"accepted":0,',
    b'{"v":1,"w":"00000000000000ff","n":1.5,"t_ns":1,"pid":1,"seq":1,"proposed":1,"accepted":0}',
    b'{"v":1,"w":"00000000000000ff","n":0,"t_ns":1,"pid":1,"seq":1,"proposed":1,"accepted":0,'
    b'"leg":"\xc3"}',
]


@st.composite
def disjoint_or_overlapping_legs(draw: st.DrawFn) -> list[dict[str, Any]]:
    legs = []
    start = BASE_US + draw(st.integers(0, 10**6))
    for index in range(draw(st.integers(1, 4))):
        end = start + draw(st.sampled_from([0, 1, 2]) | st.integers(0, 100))
        leg = {
            "run": 1 if index == 0 else draw(st.sampled_from([1, 2, 3])),
            "secs": (end - start) / 1e6,
            "tok_s": 100.0 + index,
            "prompt_tokens": 10,
            "completion_tokens": 20,
            "finish_reason": "stop",
            "generate_start_unix": start / 1e6,
            "generate_end_unix": end / 1e6,
        }
        if draw(st.booleans()):
            leg["leg"] = draw(st.sampled_from([*LABELS, "wärm", 'run "b"']))
        legs.append(leg)
        start = end + draw(st.sampled_from([-20, 0, 1, 2, 3]) | st.integers(2, 50))
    return legs


@st.composite
def any_shape_logs(draw: st.DrawFn, legs: list[dict[str, Any]]) -> bytes:
    """Valid v1 lines in any shape, with (sometimes) bad lines, a glued torn fragment, a torn
    tail, and lost lines."""
    writers = draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=3, unique=True))
    counters = dict.fromkeys(writers, 0)
    labels = [leg.get("leg") for leg in legs if leg.get("leg")] + ["elsewhere"]
    lines = []
    for _ in range(draw(st.integers(1, 30))):
        w = draw(st.sampled_from(writers))
        proposed = draw(
            st.sampled_from([0, 0, 1, 3, 7]) | st.integers(0, 16)
            if draw(st.integers(0, 40))
            else st.sampled_from(LARGE_PROPOSALS)
        )
        accepted = draw(st.integers(0, proposed))
        row = {
            "v": 1,
            "w": f"{w:016x}",
            "n": counters[w] + draw(st.sampled_from([0, 0, 0, 1])),
            "t_ns": draw(timestamps(legs)),
            "pid": draw(st.sampled_from([1, 4242, 2**63 - 1])),
            "seq": draw(st.sampled_from([0, 1, 7, 2**63, 2**64 - 1]) | STRING_IDS),
            "proposed": proposed,
            "accepted": accepted,
            "emitted": draw(
                st.none() | st.integers(0, accepted + 1)
                if draw(st.integers(0, 40))
                else st.sampled_from(LARGE_EMITTED)
            ),
            "draft_ns": draw(DURATIONS if draw(st.integers(0, 40)) else LONGEST),
            "verify_ns": draw(DURATIONS if draw(st.integers(0, 40)) else LONGEST),
            "leg": draw(st.none() | st.sampled_from(labels) | ODD_LABELS),
        }
        counters[w] = row["n"] + 1
        line = canonical_line(row) if draw(st.integers(0, 3)) == 0 else draw(v1_line(row))
        if draw(st.integers(0, 12)) == 0:
            torn = canonical_line(row)
            line = torn[: draw(st.integers(1, len(torn) - 1))] + canonical_line(row)
        lines.append(line + b"\n")
    for _ in range(draw(st.integers(0, 2))):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(BAD_LINES)) + b"\n")
    tail = draw(st.sampled_from([b"", b"", b'{"v":1,"w":"0']))
    return b"".join(lines) + tail


@given(legs=disjoint_or_overlapping_legs(), data=st.data())
def test_any_v1_shape_folds_as_the_reference(tmp_path_factory, legs, data):
    """Every table, count, skipped example and error equals the polars reference's, for lines
    in random key orders and spacing, unknown nested keys, escaped and UTF-8 labels, glued
    fragments, torn tails and bad lines, over windows apart or overlapping."""
    log_bytes = data.draw(any_shape_logs(legs), label="log")
    skip = data.draw(st.booleans(), label="skip bad lines")
    log = tmp_path_factory.mktemp("native") / "steps.jsonl"
    log.write_bytes(log_bytes)
    note(log_bytes.decode("utf-8", "replace"))
    arm = arm_from_document({"legs": legs})
    assert_both_ways_agree(arm, [str(log)], skip_bad_lines=skip)
    # Small blocks and one thread per few hundred bytes: the same sums, lines and events.
    whole = raw_read(log, arm)
    split = raw_read(log, arm, block=64, bytes_per_thread=200)
    if whole["overflow"] or split["overflow"]:
        return  # a sum past 64 bits stops a pass where it met it: the polars reader reads it
    for key in ("lines", "folded", "attributed", "unattributed", "ambiguous", "torn", "bad"):
        assert split[key] == whole[key], key
    assert [event[0] for event in split["events"]] == [event[0] for event in whole["events"]]


def test_writers_layout_and_common_shapes_take_no_detour(tmp_path: Path):
    """Lines any JSON writer produces are folded by the pass itself: nothing handed back."""
    row = json.loads(GOOD)
    shapes = [
        GOOD,
        json.dumps(row).encode() + b"\n",  # ": " and ", " spacing
        json.dumps(dict(reversed(list(row.items())))).encode() + b"\n",
        json.dumps({**row, "leg": "wärm"}, ensure_ascii=False).encode() + b"\n",
        json.dumps({**row, "leg": "wärm"}).encode() + b"\n",  # \u00e4
        json.dumps({**row, "leg": 'run "b"'}).encode() + b"\n",
        json.dumps({**row, "leg": "😀"}).encode() + b"\n",  # a surrogate pair
        json.dumps({**row, "extra": {"a": [1, 2.5e-7, None, "x\\y"], "b": True}}).encode() + b"\n",
        json.dumps({**row, "emitted": None, "leg": None}).encode() + b"\n",
        # numbers no double holds, in keys the format does not know: valid, and ignored
        *(GOOD.replace(b'"v":1,', b'"v":1,"x":' + huge + b",") for huge in HUGE_NUMBERS),
        GOOD.replace(b"}\n", b"}\r\n"),
        # the steps' durations: the writers' layout, one key alone, and another order
        TIMED,
        GOOD.replace(b'"emitted":4,', b'"emitted":4,"verify_ns":0,'),
        json.dumps({**json.loads(TIMED), "draft_ns": None}).encode() + b"\n",
        json.dumps(dict(reversed(list(json.loads(TIMED).items())))).encode() + b"\n",
    ]
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(shapes))
    arm = arm_from_document([LEG])
    raw = raw_read(log, arm)
    assert raw["events"] == [] and raw["folded"] == len(shapes)
    assert_both_ways_agree(arm, [str(log)])


HIGH = {0xC3: "é".encode(), 0xE2: "€".encode(), 0xF0: "😀".encode()}


def test_every_byte_at_every_place_of_a_writer_id_is_judged_as_the_reference(tmp_path: Path):
    """The pass reads a writer id's sixteen digits eight at a time: each byte that may stand
    in a JSON string, at each place, makes an id of the writers' form, folded by the pass, or
    another string, handed back to the exact reader; either way the line folds as the
    reference folds it, and the ids keep their values (the writers' table names them)."""
    rng = random.Random(16)
    writers = []
    for place in range(16):
        # Bytes from 0x80 up stand for the first byte of a character of two to four.
        for byte in [*range(0x20, 0x80), 0xC3, 0xE2, 0xF0]:
            if chr(byte) in '"\\':
                continue
            digits = bytearray(f"{rng.getrandbits(64):016x}".encode())
            digits[place : place + 1] = HIGH.get(byte, bytes([byte]))
            writers.append(digits.decode())
    # Ids of every digit at every place, the edges of the range, and ids one digit too long
    # (sixteen digits of the form, then more) or short.
    writers += [f"{rng.getrandbits(64):016x}" for _ in range(200)]
    writers += ["0" * 16, "f" * 16, "0123456789abcdef", "fedcba9876543210"]
    writers += ["0123456789abcdef0", "fedcba9876543210f", "0123456789abcdef\u00e9", "abcdef"]
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(good_line(w=w, n=n) + b"\n" for n, w in enumerate(writers)))
    arm = arm_from_document([LEG])
    in_form = sum(re.fullmatch("[0-9a-f]{16}", w) is not None for w in writers)
    assert in_form == 16 * 16 + 204  # per place, the sixteen lowercase digits; no long one
    raw = raw_read(log, arm)
    # Every other id is valid JSON handed back whole (deferred, kind 0), never called bad.
    assert raw["folded"] == in_form
    assert [event[3] for event in raw["events"]] == [0] * (len(writers) - in_form)
    partial, _ = assert_both_ways_agree(arm, [str(log)])
    assert sorted(partial.writers["w"]) == sorted(set(writers))


LONGEST = st.sampled_from(LARGE_DURATIONS)

# -- lines handed back -------------------------------------------------------------------------

GOOD = (
    b'{"v":1,"w":"5f0c1a2b3c4d5e6f","n":0,"t_ns":1764450000000001000,"pid":4242,"seq":7,'
    b'"proposed":7,"accepted":3,"emitted":4,"leg":"warm"}\n'
)


def good_line(**changes: Any) -> bytes:
    row = json.loads(GOOD)
    row.update(changes)
    return canonical_line({key: value for key, value in row.items() if value is not None})


# Valid JSON that only the exact parser judges: folded (or refused) as the reference does.
# The writers' layout with the optional durations (FORMAT.md).
TIMED = GOOD.replace(b'"emitted":4,', b'"emitted":4,"draft_ns":81234,"verify_ns":402211,')
DEFERRED = {
    "negative pid": GOOD.replace(b'"pid":4242', b'"pid":-4242'),
    "minus zero": GOOD.replace(b'"n":0', b'"n":-0'),
    "duplicate key": GOOD.replace(b'"n":0', b'"n":"x","n":0'),
    "escaped key": GOOD.replace(b'"pid"', b'"p\\u0069d"'),
    "uppercase writer id": GOOD.replace(b"5f0c1a2b3c4d5e6f", b"5F0C1A2B3C4D5E6F"),
    "short writer id": GOOD.replace(b"5f0c1a2b3c4d5e6f", b"w1"),
    "negative count": GOOD.replace(b'"proposed":7', b'"proposed":-7'),
    "negative draft_ns": TIMED.replace(b'"draft_ns":81234', b'"draft_ns":-81234'),
    "negative verify_ns": TIMED.replace(b'"verify_ns":402211', b'"verify_ns":-1'),
}
# Not a v1 step: the same error (or skipped count and example) as the exact parser's.
BAD = {
    "leading zero": GOOD.replace(b'"pid":4242', b'"pid":04242'),
    "a float": GOOD.replace(b'"emitted":4', b'"emitted":4.0'),
    "exponent": GOOD.replace(b'"emitted":4', b'"emitted":4e0'),
    "n = 2^63": good_line(n=2**63) + b"\n",
    "seq = 2^64": good_line(seq=2**64) + b"\n",
    "a 21-digit seq": GOOD.replace(b'"seq":7', b'"seq":' + b"1" * 21),
    "version 2": GOOD.replace(b'"v":1', b'"v":2'),
    "v as a string": GOOD.replace(b'"v":1', b'"v":"1"'),
    "missing field": GOOD.replace(b'"pid":4242,', b""),
    "label a number": GOOD.replace(b'"warm"', b"5"),
    "an empty line": b"\n",
    "trailing comma": GOOD.replace(b"}\n", b",}\n"),
    "garbage after": GOOD.replace(b"}\n", b"}x\n"),
    "bad UTF-8": GOOD.replace(b"warm", b"w\xe2\x82rm"),
    "raw control character": GOOD.replace(b"warm", b"wa\x01rm"),
    "label opening with bad UTF-8": GOOD.replace(b'"warm"', b'"\xffwarm"'),
    "label opening with a control character": GOOD.replace(b'"warm"', b'"\x01warm"'),
    "bad escape": GOOD.replace(b"warm", b"wa\\qrm"),
    "unknown key, bad value": GOOD.replace(b'"v":1,', b'"v":1,"x":[1,],'),
    "draft_ns a float": TIMED.replace(b'"draft_ns":81234', b'"draft_ns":81234.0'),
    "draft_ns an exponent": TIMED.replace(b'"draft_ns":81234', b'"draft_ns":8e4'),
    "verify_ns a string": TIMED.replace(b'"verify_ns":402211', b'"verify_ns":"402211"'),
    "verify_ns true": TIMED.replace(b'"verify_ns":402211', b'"verify_ns":true'),
    "draft_ns = 2^63": TIMED.replace(b'"draft_ns":81234', b'"draft_ns":9223372036854775808'),
    "verify_ns = 2^64 - 1": TIMED.replace(b"402211", b"18446744073709551615"),
    "draft_ns of 30 digits": TIMED.replace(b'"draft_ns":81234', b'"draft_ns":' + b"9" * 30),
    "draft_ns an object": TIMED.replace(b'"draft_ns":81234', b'"draft_ns":{"ns":1}'),
}


@pytest.mark.parametrize("name", list(DEFERRED))
def test_deferred_lines_are_decided_by_the_exact_parser(tmp_path: Path, name: str):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(GOOD + DEFERRED[name] + good_line(n=2) + b"\n")
    arm = arm_from_document([LEG])
    assert [event[3] for event in raw_read(log, arm)["events"]] == [0]
    for skip in (False, True):
        assert_both_ways_agree(arm, [str(log)], skip_bad_lines=skip)


@pytest.mark.parametrize("name", list(BAD))
def test_bad_lines_are_worded_as_the_exact_parser_words_them(tmp_path: Path, name: str):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(GOOD + BAD[name] + good_line(n=2) + b"\n")
    arm = arm_from_document([LEG])
    raw = raw_read(log, arm)
    assert raw["bad"] == 1
    with native_switch(True), pytest.raises(InputError, match=r"steps\.jsonl:2: ") as error:
        fold_acceptance(arm, [str(log)])
    assert outcome(arm, [str(log)], native=False) == ("InputError", str(error.value))
    partial, counts = assert_both_ways_agree(arm, [str(log)], skip_bad_lines=True)
    assert counts[str(log)].skipped_lines == 1
    assert counts[str(log)].skipped_examples[0].line == 2
    assert partial.files["lines"].to_list() == [2]


def test_refusal_names_the_first_impossible_line(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(GOOD + good_line(n=1, accepted=8) + good_line(n=2, accepted=9) + b"\n")
    arm = arm_from_document([LEG])
    for skip in (False, True):
        with native_switch(True), pytest.raises(RefusedError, match=r"steps\.jsonl:2: 'accepted'"):
            fold_acceptance(arm, [str(log)], skip_bad_lines=skip)
        assert outcome(arm, [str(log)], native=True) == outcome(arm, [str(log)], native=False)


# Each part of a step's rule, a line breaking it (and, for the first two, the later parts too:
# the first part broken is the one reported), and the number both readers give it by hand.
RULE_LINES = {
    "accepted above proposed": (good_line(n=1, proposed=70000, accepted=70001, emitted=70002), 1),
    "proposed past the cap": (good_line(n=1, proposed=65537, accepted=0, emitted=70000), 2),
    "emitted past the cap": (good_line(n=1, proposed=7, accepted=3, emitted=65537), 3),
}


@pytest.mark.parametrize("name", list(RULE_LINES))
def test_the_pass_names_the_rule_a_step_breaks_as_limits_does(tmp_path: Path, name: str):
    line, number = RULE_LINES[name]
    log = tmp_path / "steps.jsonl"
    log.write_bytes(GOOD + line + b"\n")
    arm = arm_from_document([LEG])
    assert [event[3:] for event in raw_read(log, arm)["events"]] == [(2, number)]
    row = json.loads(line)
    rule = limits.step_problem(row["proposed"], row["accepted"], row["emitted"])
    assert rule is not None and rule.value == number
    assert outcome(arm, [str(log)], native=True) == outcome(arm, [str(log)], native=False)


def test_the_pass_numbers_the_rules_as_limits_does():
    header = (ROOT / "fold" / "inputs" / "native_src" / "fold_tables.h").read_text()
    body = re.search(r"enum class StepRule[^{]*\{([^}]*)\}", header)
    assert body is not None
    found = dict(re.findall(r"k(\w+) = (\d+)", body.group(1)))
    assert found == {"None": "0", "AcceptedAboveProposed": "1", "ProposedPastCap": "2",
                     "EmittedPastCap": "3"}  # fmt: skip
    assert [(rule.name, rule.value) for rule in limits.StepRule] == [
        ("ACCEPTED_ABOVE_PROPOSED", 1), ("PROPOSED_PAST_CAP", 2), ("EMITTED_PAST_CAP", 3),
    ]  # fmt: skip


def test_many_bad_lines_keep_the_first_examples_across_threads(tmp_path: Path):
    rows = []
    for n in range(2000):
        rows.append(good_line(n=n) + b"\n" if n % 97 else b"oops\n")
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(rows))
    arm = arm_from_document([LEG])
    bad = [n + 1 for n in range(2000) if n % 97 == 0]
    with native_switch(True):
        counts = ReadCounts()
        read = fold.folding.native.read_range(
            str(log), arm.legs, None, Legs.of(arm.legs).native, counts,
            skip_bad_lines=True, block=300, bytes_per_thread=5000,
        )  # fmt: skip
    assert read is not None and read.lines == 2000
    assert counts.skipped_lines == len(bad)
    assert [example.line for example in counts.skipped_examples] == bad[:5]
    _, reference_counts = folded(arm, [str(log)], native=False, skip_bad_lines=True)
    assert counts == reference_counts[str(log)]
    # Without skipping: the first bad line, named, whatever the split.
    with native_switch(True), pytest.raises(InputError, match=r"steps\.jsonl:1: not valid JSON"):
        fold_acceptance(arm, [str(log)])


def test_a_line_longer_than_the_block_is_read_whole(tmp_path: Path):
    long_line = json.dumps({**json.loads(GOOD), "pad": "x" * 5000}).encode() + b"\n"
    log = tmp_path / "steps.jsonl"
    log.write_bytes(GOOD + long_line + good_line(n=2) + b"\n")
    arm = arm_from_document([LEG])
    raw = raw_read(log, arm, block=100, bytes_per_thread=1 << 30)
    assert (raw["folded"], raw["events"]) == (3, [])


def test_a_file_split_across_threads_and_blocks_folds_the_same(tmp_path: Path):
    legs = [
        {**LEG, "generate_start_unix": (BASE_US + 1000 * k) / 1e6,
         "generate_end_unix": (BASE_US + 1000 * k + 900) / 1e6}
        for k in range(4)
    ]  # fmt: skip
    arm = arm_from_document(legs)
    rng = random.Random(5)
    rows = []
    for i in range(3000):
        proposed = i % 8
        row = {"v": 1, "w": f"{(i % 5) * 0x1111111111111111:016x}", "n": i // 5,
               "t_ns": (BASE_US - 100) * 1000 + i * 1700, "pid": 100 + i % 5, "seq": i % 7,
               "proposed": proposed, "accepted": proposed // 2,
               "emitted": None if i % 3 else proposed // 2 + 1,
               "leg": "warm" if i % 2 else None}  # fmt: skip
        items = [(k, v) for k, v in row.items() if v is not None]
        rng.shuffle(items)
        rows.append(json.dumps(dict(items)).encode() + b"\n")
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(rows))
    whole = raw_read(log, arm)
    whole_lists = {name: lists(whole, name) for name in ORDER_ROWS}
    assert sum(map(len, whole_lists["gaps"])) > 0
    assert len(whole_lists["bucket_row"]) > 0 and len(whole_lists["length_row"]) > 0
    for block, bytes_per_thread, threads in [
        (200, 1, 0), (1000, 30_000, 0), (4096, 100_000, 0), (1 << 20, 1, 0), (300, 1, 5),
        (64, 1, 8),
    ]:  # fmt: skip
        split = raw_read(log, arm, block=block, bytes_per_thread=bytes_per_thread, threads=threads)
        for key in ("lines", "folded", "attributed", "unattributed", "torn", "bad", "events"):
            assert split[key] == whole[key], key
        # Each request's step intervals, and its rows by output position and draft length,
        # whatever the threads: a request a later range continued is read again.
        for name in ORDER_ROWS:
            assert lists(split, name) == whole_lists[name], name
    assert_both_ways_agree(arm, [str(log)])


ORDER_ROWS = (
    "first_ns", "gaps", "long_gaps", "bucket_row", "bucket", "bucket_steps", "bucket_proposed",
    "bucket_accepted", "length_row", "length", "length_intervals", "length_ns", "unordered",
)  # fmt: skip


class Capsules:
    def __init__(self, pair: Any) -> None:
        self.pair = pair

    def __arrow_c_array__(self, requested_schema: Any = None) -> Any:
        return self.pair


def lists(raw: dict[str, Any], name: str) -> list[list[int]]:
    """A column of the extension's result, as a Python list (its capsules are used up: once per
    result)."""
    return pl.Series(Capsules(raw[name])).to_list()


def raw_times(raw: dict[str, Any]) -> list[list[int]]:
    """Each attributed request's times in time order, from the extension's step intervals
    (their capsules are used up)."""
    intervals = pl.DataFrame(
        [pl.Series(Capsules(raw[name])).alias(name) for name in ("first_ns", "gaps", "long_gaps")]
    )
    return decoded(intervals).to_list()


def test_histogram_buckets_are_per_proposal_and_accepted(tmp_path: Path):
    # One leg: a run of k = 4, then proposals alternating 4 and 2 with the same accepted
    # counts, so a bucket remembered for one proposal must not answer the other.
    arm = arm_from_document([LEG])
    start, _ = leg_bounds_ns(LEG)
    counts = [(4, 1), (4, 1), (4, 3), (2, 1), (4, 1), (2, 1), (2, 2), (4, 0), (0, 0)]
    rows = [
        good_line(n=i, t_ns=start + 1000 + i, proposed=p, accepted=a, emitted=None)
        for i, (p, a) in enumerate(counts)
    ]
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(row + b"\n" for row in rows))
    partial, _ = assert_both_ways_agree(arm, [str(log)])  # the native pass's, equal to polars'
    # (proposed, accepted): (2,1) x2, (2,2), (4,0), (4,1) x3, (4,3); the (0, 0) line drafted none.
    assert partial.histogram.select("proposed", "accepted", "count").rows() == [
        (2, 1, 2), (2, 2, 1), (4, 0, 1), (4, 1, 3), (4, 3, 1),
    ]  # fmt: skip


def test_window_edges_are_closed(tmp_path: Path):
    arm = arm_from_document([LEG])
    start, end = leg_bounds_ns(LEG)
    times = [start - 1, start, start + 1, end - 1, end, end + 1]
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(good_line(n=n, t_ns=t) + b"\n" for n, t in enumerate(times)))
    raw = raw_read(log, arm)
    assert (raw["folded"], raw["attributed"], raw["unattributed"]) == (6, 4, 2)
    assert_both_ways_agree(arm, [str(log)])


# -- step times ---------------------------------------------------------------------------------


@given(legs=disjoint_or_overlapping_legs(), data=st.data())
def test_step_times_hold_every_attributed_line(tmp_path_factory, legs, data):
    """One row per (leg, writer, seq) with the t_ns of each line attributed to it, and per
    request and draft length the intervals to its drafted lines in (time, proposed) order,
    computed here from the reference's parse and attribution, the same both ways."""
    log_bytes = data.draw(any_shape_logs(legs), label="log")
    log = tmp_path_factory.mktemp("times") / "steps.jsonl"
    log.write_bytes(log_bytes)
    arm = arm_from_document({"legs": legs})
    result = folded(arm, [str(log)], native=True, skip_bad_lines=True)
    if isinstance(result[0], str):
        return  # refused (agreement is checked above)
    expected: dict[tuple[int, str, int], list[tuple[int, int]]] = {}
    reference_legs = arm_legs({"legs": legs})
    for raw in log_bytes.split(b"\n")[:-1]:
        step = parse_step(raw)
        if step is None and raw.rfind(b'{"v":') > 0:
            step = parse_step(raw[raw.rfind(b'{"v":') :])
        if step is None:
            continue
        _, leg = attribute(step, reference_legs)
        if leg is not None:
            expected.setdefault((leg, step.w, step.seq), []).append((step.t_ns, step.proposed))
    lengths: dict[tuple[Any, int], list[int]] = {}
    for key, lines in expected.items():
        ordered = sorted(lines)
        for (before, _), (after, proposed) in pairwise(ordered):
            if proposed:
                lengths.setdefault((key, proposed), []).append(after - before)
    index = Legs.of(arm.legs).native
    for native in (True, False):
        partial, _ = folded(arm, [str(log)], native=native, skip_bad_lines=True)
        keys = [
            (row["leg"], row["w"], row["seq"] if row["sid"] is None else row["sid"])
            for row in partial.step_times.iter_rows(named=True)
        ]
        actual = dict(zip(keys, decoded(partial.step_times).to_list(), strict=True))
        assert actual == {key: sorted(t for t, _ in lines) for key, lines in expected.items()}
        with native_switch(native):
            rows = line_rows(partial, index).lengths
        assert {
            (keys[row["request"]], row["length"]): (row["intervals"], row["ns"])
            for row in rows.iter_rows(named=True)
        } == {key: (len(gaps), sum(gaps)) for key, gaps in lengths.items()}


def test_step_times_merge_across_files(tmp_path: Path):
    arm = arm_from_document([LEG])
    start, _ = leg_bounds_ns(LEG)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(good_line(n=0, t_ns=start + 5) + b"\n" + good_line(n=1, t_ns=start + 1)
                      + b"\n")  # fmt: skip
    second.write_bytes(good_line(n=2, t_ns=start + 3, proposed=0, accepted=0) + b"\n")
    partial, _ = folded(arm, [str(first), str(second)], native=True)
    # The request's times pooled from both files and sorted: start + 1, then 2 ns apart.
    assert partial.step_times.rows() == [(0, "5f0c1a2b3c4d5e6f", 7, None, start + 1, [2, 2], [])]
    # The request's lines span both files, the first's out of order: each file's lines were
    # read back and held as it was read, and its rows are made from them in (time, counts)
    # order: start + 1 (at position 0), start + 3 (undrafted, emitted 4), start + 5 (at 8).
    assert partial.line_spans.height == 0
    assert sorted(partial.held_lines["t_ns"].to_list()[0]) == [start + 1, start + 3, start + 5]
    with native_switch(True):
        rows = line_rows(partial, Legs.of(arm.legs).native)
    assert rows.buckets.rows() == [(0, 0, 2, 14, 6)]
    # intervals to drafted lines: start + 3 -> start + 5 (2 ns) under 7; start + 1 has none
    assert rows.lengths.rows() == [(0, 7, 1, 2)]


def test_progress_reports_the_file_size(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(good_line(n=n) + b"\n" for n in range(100)) + b'{"v":1')
    reported: list[int] = []
    fold_acceptance(arm_from_document([LEG]), [str(log)], progress=reported.append)
    assert sum(reported) == log.stat().st_size


def test_the_extension_compiles_without_warnings():
    compiler = shutil.which("g++")
    assert compiler is not None, "g++ is required to check the native reader's source"
    flags = ["-std=c++17", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-fsyntax-only"]
    include = sysconfig.get_paths()["include"]
    source = str(ROOT / "fold" / "_native.cc")
    result = subprocess.run([compiler, *flags, f"-I{include}", source], capture_output=True)
    assert result.returncode == 0, result.stderr.decode()


def test_without_the_extension_the_polars_reader_folds(tmp_path: Path, monkeypatch):
    """A machine without a compiler installs no fold._native: every file takes the polars
    reader, with the same figures."""
    log = tmp_path / "steps.jsonl"
    log.write_bytes(GOOD + good_line(n=1, t_ns=1764450000500000000) + b"\n" + b'{"v":1')
    arm = arm_from_document([LEG])
    with_native = outcome(arm, [str(log)], native=True)
    monkeypatch.setattr(fold.folding.native, "_native", None)
    assert not fold.folding.native.available()
    assert outcome(arm, [str(log)], native=True) == with_native


def test_the_first_problem_in_file_order_is_named_both_ways(tmp_path: Path):
    """A refused line before a bad one is refused; a bad line before a refused one stops the
    fold with its error; both readers, whatever the block."""
    refused, bad = good_line(n=1, accepted=8) + b"\n", b"not json\n"
    arm = arm_from_document([LEG])
    for body, error in [(refused + bad, "RefusedError"), (bad + refused, "InputError")]:
        log = tmp_path / "steps.jsonl"
        log.write_bytes(GOOD + body)
        for native in (True, False):
            found = outcome(arm, [str(log)], native=native)
            assert found[0] == error and "steps.jsonl:2: " in found[1], (native, found)


def test_following_reads_a_backlog_in_pieces(tmp_path: Path, monkeypatch):
    """The follower's reads are cut at a small size: lines cut across pieces, and a line
    longer than a piece, are read whole, with the same fold as one read."""
    monkeypatch.setattr(fold.folding.logfile, "FOLLOW_CHUNK_BYTES", 100)
    long_line = json.dumps({**json.loads(GOOD), "n": 3, "pad": "x" * 500}).encode() + b"\n"
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(good_line(n=n) + b"\n" for n in range(3)) + long_line + b'{"v"')
    arm = arm_from_document([LEG])
    legs = Legs.of(arm.legs)
    with native_switch(True):
        piecewise = fold.folding.logfile.LogFile(str(log), tally_drafts=True)
        pieces = list(piecewise.read_available(legs, want_steps=True))
        piecewise.finish()
    assert len(pieces) > 3
    assert sum(steps.height for _, steps in pieces) == 4
    assert (piecewise.lines_read, piecewise.counts.torn_lines) == (4, 1)
    merged = fold.folding.merge.merge_all([partial for partial, _ in pieces])
    whole, counts = folded(arm, [str(log)], native=False)
    assert_same_partials(merged, whole, arm)
    assert counts[str(log)] == piecewise.counts


@pytest.mark.parametrize("skip", [False, True])
def test_a_bad_line_in_a_later_thread_is_named_by_its_file_line(tmp_path: Path, skip: bool):
    rows = [good_line(n=n) + b"\n" for n in range(1500)]
    rows[1234] = b'{"v":1,"w":"00000000000000ff"\n'
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(rows))
    arm = arm_from_document([LEG])
    counts = ReadCounts()
    arguments = (str(log), arm.legs, None, Legs.of(arm.legs).native, counts)
    options = {"skip_bad_lines": skip, "block": 500, "bytes_per_thread": 20_000}
    with native_switch(True):
        if not skip:
            with pytest.raises(InputError, match=r"steps\.jsonl:1235: not valid JSON"):
                fold.folding.native.read_range(*arguments, **options)
            return
        read = fold.folding.native.read_range(*arguments, **options)
    assert read is not None and read.lines == 1500
    assert [example.line for example in counts.skipped_examples] == [1235]


def _trace_lines(arm: Any, log: Path, *, native: bool, skip: bool) -> Any:
    """The trace's attributed lines and writers' pids (sorted, to compare), or the error."""
    with native_switch(native):
        try:
            lines, pids = fold.folding.timeline_lines._read(arm, [str(log)], skip)
        except (InputError, RefusedError) as error:
            return (type(error).__name__, str(error))
    return lines.sort(lines.columns), pids


@given(legs=disjoint_or_overlapping_legs(), data=st.data())
def test_the_traces_lines_are_the_references(tmp_path_factory, legs, data):
    """The trace takes its lines from the native pass: the same lines, columns and pids as the
    polars reference gives it, and the same whether the pass splits the file or not."""
    log_bytes = data.draw(any_shape_logs(legs), label="log")
    skip = data.draw(st.booleans(), label="skip bad lines")
    log = tmp_path_factory.mktemp("trace") / "steps.jsonl"
    log.write_bytes(log_bytes)
    arm = arm_from_document({"legs": legs})
    native = _trace_lines(arm, log, native=True, skip=skip)
    reference = _trace_lines(arm, log, native=False, skip=skip)
    if isinstance(reference[0], str):
        assert native == reference
        return
    assert_frame_equal(native[0], reference[0])
    assert native[1] == reference[1]
    legs_read = Legs.of(arm.legs)
    split = fold.folding.native.read_range(
        str(log), arm.legs, legs_read.windows, legs_read.native, ReadCounts(),
        skip_bad_lines=skip, want_lines=True, block=64, bytes_per_thread=200,
    )  # fmt: skip
    if split is not None:  # None: more deferred lines than the pass keeps (polars then)
        lines = split.attributed_lines
        assert lines is not None
        assert_frame_equal(lines.select(native[0].columns).cast(native[0].schema).sort(
            native[0].columns), native[0])  # fmt: skip


def _with_extra(n: int, extra: bytes, label: bytes = b'"warm"') -> bytes:
    """GOOD's line n with an unknown key's value ``extra`` after "v", and ``label``."""
    line = good_line(n=n).replace(b'"v":1,', b'"v":1,"host":' + extra + b",", 1)
    return line.replace(b'"warm"', label) + b"\n"


@pytest.mark.parametrize(
    ("then", "bad"),
    [
        (b"12", False),  # the same bytes again: taken as they are
        (b"123", False),  # the remembered 12 is a prefix: the next byte continues the number
        (b"12.5", False),  # valid JSON, not a count: skipped as an unknown value
        (b"12e3", False),
        (b"12x", True),  # what follows the prefix ends no value: bad, as the reference says
        (b"012", True),
        (b'{"a": [1, 2]}', False),
        (b'{"a": [1, 2]', True),
    ],
)
def test_a_repeated_unknown_value_is_judged_as_if_scanned(tmp_path: Path, then: bytes, bad: bool):
    """A writer repeats its metadata on every line, so the pass remembers each unknown key's
    last value and takes the same bytes again without scanning them. Whatever comes after the
    remembered bytes, the line is judged as the exact parser judges it."""
    log = tmp_path / "steps.jsonl"
    first = b'{"a": [1, 2]}' if then.startswith(b"{") else b"12"
    log.write_bytes(_with_extra(0, first) + _with_extra(1, first) + _with_extra(2, then))
    arm = arm_from_document([LEG])
    assert raw_read(log, arm)["bad"] == int(bad)
    _, counts = assert_both_ways_agree(arm, [str(log)], skip_bad_lines=True)
    assert counts[str(log)].skipped_lines == int(bad)


def test_a_repeated_label_keeps_its_escapes(tmp_path: Path):
    """A label remembered with its escapes is unescaped when a window overlap needs it: the
    same steps go to the same legs both ways."""
    overlapping = [
        {**LEG, "leg": 'run "b"', "generate_end_unix": 1764450000.5},
        {**LEG, "leg": "warm", "generate_start_unix": 1764450000.0},
    ]
    lines = [_with_extra(n, b"1", label=b'"run \\"b\\""') for n in range(3)]
    lines += [_with_extra(n, b"1") for n in range(3, 5)]
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(lines))
    arm = arm_from_document(overlapping)
    partial, _ = assert_both_ways_agree(arm, [str(log)])
    assert sorted(partial.legs["leg"].to_list()) == [0, 1]


def test_the_traces_lines_refuse_a_duration_sum_past_64_bits_either_way(tmp_path):
    """Found by the property above: two lines of one request whose draft_ns each fit but whose
    sum does not; the native pass refused it and the polars reader gave the lines."""
    legs = [{"run": 1, "secs": 1.0, "tok_s": 100.0, "prompt_tokens": 10,
             "completion_tokens": 20, "finish_reason": "stop",
             "generate_start_unix": 1764450000.0, "generate_end_unix": 1764450001.0}]  # fmt: skip
    log = tmp_path / "steps.jsonl"
    log.write_text(
        "".join(
            f'{{"v":1,"w":"0000000000006f48","n":{n},"t_ns":{1764450000_500000000 + n},'
            f'"pid":1,"seq":0,"proposed":0,"accepted":0,"draft_ns":{2**62},"verify_ns":0}}\n'
            for n in range(2)
        )
    )
    arm = arm_from_document({"legs": legs})
    native = _trace_lines(arm, log, native=True, skip=False)
    assert native == _trace_lines(arm, log, native=False, skip=False)
    assert (
        native[0] == "RefusedError"
        and "'draft_ns' 9223372036854775808 is a sum past 2^63 - 1" in native[1]
    )


def test_legs_read_the_same_as_a_buffer_or_a_sequence():
    """The legs go to the cadence as an int64 buffer, read in place; any other array (another
    byte order, unsigned) or a list is read item by item, and the figures are the same
    whichever way they came."""
    import numpy as np
    import polars as pl

    from fold.folding import native as native_module

    frame = encode(
        pl.DataFrame(
            {"t_ns": [[10, 30, 20], [5, 6], [7], [1, 2, 4, 8]]},
            schema={"t_ns": pl.List(pl.Int64)},
        )
    )
    # The legs are values, not flags: each way gives the cadence the same legs.
    cadences = []
    for legs in (
        np.array([0, 1, 0, 2], dtype=np.int64),
        [0, 1, 0, 2],
        np.array([0, 1, 0, 2], dtype=">i8"),
        np.array([0, 1, 0, 2], dtype=np.uint64),
    ):
        columns, pooled = native_module._native.cadence(
            frame["first_ns"].to_numpy(),
            frame["gaps"].__arrow_c_stream__(),
            frame["long_gaps"].__arrow_c_stream__(),
            legs,
            [0, 0, 0],
            [100] * 3,
            4.0,
            [(0, 1, 2)],
        )
        found = pl.DataFrame([native_module.series(name, c) for name, c in columns.items()])
        cadences.append((found.rows(), pooled))
    assert all(found == cadences[0] for found in cadences)
