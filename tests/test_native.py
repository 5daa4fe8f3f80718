"""The native fold (``fold._native`` through ``fold.native``) against the polars paths.

The extension is imported at the top: when it was not built, this module fails (CI builds it
with the package), it is not skipped. Every comparison runs the same public fold twice, once
as is and once with ``FOLD_ACCEPTANCE_NATIVE=0``, and checks that the native pass really took
the file (or really declined it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from strategies import BASE_US, LABELS, canonical_line, leg_bounds_ns, timestamps

import fold.native
from fold import _native
from fold.accumulate import TIME_BINS_PER_LEG, fold_file
from fold.api import fold_acceptance
from fold.arm import arm_from_document, load_arm
from fold.attribute import leg_windows
from fold.errors import InputError, RefusedError

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
TABLES = ("legs", "histogram", "requests", "bins", "writers", "files")
SWITCH = fold.native.ENVIRONMENT_SWITCH


def outcome(arm: Any, paths: list[str], *, native: bool, **options: Any) -> Any:
    """The public fold's JSON, or the error it stopped with, with the native path on or off."""
    saved = os.environ.get(SWITCH)
    os.environ[SWITCH] = "1" if native else "0"
    try:
        return fold_acceptance(arm, paths, **options).to_json()
    except (InputError, RefusedError) as error:
        return (type(error).__name__, str(error))
    finally:
        if saved is None:
            del os.environ[SWITCH]
        else:
            os.environ[SWITCH] = saved


def assert_same_partials(path: str, legs: Any) -> None:
    """The native partial fold, table by table, equals the streaming scan's."""
    native = fold.native.fold_file_native(path, legs)
    assert native is not None, "the native pass declined a file in the writers' layout"
    scanned = fold_file(path, leg_windows(legs), legs)
    assert scanned is not None
    for name in TABLES:
        assert_frame_equal(getattr(native, name), getattr(scanned, name))


def native_raw(path: str | Path, legs: Any, *extra: int) -> Any:
    return _native.fold_layout_file(
        str(path), legs["start_ns"].to_list(), legs["end_ns"].to_list(), TIME_BINS_PER_LEG, *extra
    )


# -- the fixtures ------------------------------------------------------------------------------


@pytest.mark.parametrize("directory", [FIXTURES, FIXTURES / "gate-example"])
def test_fixtures_fold_the_same_both_ways(directory: Path):
    arm = directory / "our-arm.json"
    log = str(directory / "steps.jsonl")
    assert_same_partials(log, load_arm(arm).legs)
    assert outcome(arm, [log], native=True) == outcome(arm, [log], native=False)


def test_the_switch_turns_the_native_path_off(monkeypatch: pytest.MonkeyPatch):
    legs = load_arm(FIXTURES / "our-arm.json").legs
    log = str(FIXTURES / "steps.jsonl")
    monkeypatch.setenv(SWITCH, "0")
    assert fold.native.fold_file_native(log, legs) is None
    monkeypatch.setenv(SWITCH, "1")
    assert fold.native.fold_file_native(log, legs) is not None


# -- generated logs ----------------------------------------------------------------------------


@st.composite
def disjoint_legs(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Legs whose widened windows are apart (a gap of 2 us or more between recorded ends)."""
    legs = []
    start = BASE_US + draw(st.integers(0, 10**6))
    for index in range(draw(st.integers(1, 5))):
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
            leg["leg"] = draw(st.sampled_from(LABELS))
        legs.append(leg)
        start = end + draw(st.sampled_from([2, 3]) | st.integers(2, 50))
    return draw(st.permutations(legs))


@st.composite
def layout_logs(draw: st.DrawFn, legs: list[dict[str, Any]]) -> bytes:
    """Lines in the writers' exact layout: several writers, big seqs, emitted and labels or
    not, zero proposals, steps on window edges (+-1 ns), inside, between, before and after."""
    writers = draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=4, unique=True))
    counters = dict.fromkeys(writers, 0)
    lines = []
    for _ in range(draw(st.integers(1, 40))):
        w = draw(st.sampled_from(writers))
        proposed = draw(st.sampled_from([0, 0, 1, 3, 7, 2**40]) | st.integers(0, 64))
        accepted = draw(st.integers(0, proposed))
        row = {
            "v": 1,
            "w": f"{w:016x}",
            "n": counters[w] + draw(st.sampled_from([0, 0, 0, 1, 2**62])),
            "t_ns": draw(timestamps(legs)),
            "pid": draw(st.sampled_from([1, 4242, 2**63 - 1])),
            "seq": draw(st.sampled_from([0, 1, 7, 2**63 - 1, 2**63, 2**64 - 1])),
            "proposed": proposed,
            "accepted": accepted,
            "emitted": draw(st.none() | st.integers(0, accepted + 1) | st.just(2**40)),
            "leg": draw(st.none() | st.sampled_from([*LABELS, "", "with space", "x/y:z"])),
        }
        counters[w] += 1
        lines.append(canonical_line(row) + b"\n")
    return b"".join(lines)


@given(legs=disjoint_legs(), data=st.data())
def test_generated_logs_fold_the_same_both_ways(tmp_path_factory, legs, data):
    log_bytes = data.draw(layout_logs(legs))
    directory = tmp_path_factory.mktemp("native")
    log = directory / "steps.jsonl"
    log.write_bytes(log_bytes)
    note(log_bytes.decode())
    arm = arm_from_document({"legs": legs})
    assert_same_partials(str(log), arm.legs)
    # Split on two threads and read in small blocks: the same sums.
    assert native_raw(log, arm.legs, 256, 1) == native_raw(log, arm.legs)
    if max(json.loads(line)["proposed"] for line in log_bytes.splitlines()) > 64:
        return  # the result lists per-position rates up to the largest proposal: too long
    assert outcome(arm, [str(log)], native=True, predicate="run >= 1") == outcome(
        arm, [str(log)], native=False, predicate="run >= 1"
    )


def test_a_file_split_across_threads_and_blocks_folds_the_same(tmp_path: Path):
    legs = [
        {
            "run": 2,
            "secs": 0.001,
            "tok_s": 10.0,
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "finish_reason": "stop",
            "generate_start_unix": (BASE_US + 1000 * k) / 1e6,
            "generate_end_unix": (BASE_US + 1000 * k + 900) / 1e6,
        }
        for k in range(4)
    ]
    arm = arm_from_document(legs)
    rows = []
    for i in range(3000):
        writer = i % 5
        proposed = i % 8
        rows.append(
            canonical_line(
                {
                    "v": 1,
                    "w": f"{writer * 0x1111111111111111:016x}",
                    "n": i // 5,
                    "t_ns": (BASE_US - 100) * 1000 + i * 1700,
                    "pid": 100 + writer,
                    "seq": i % 7,
                    "proposed": proposed,
                    "accepted": proposed // 2,
                    "emitted": None if i % 3 else proposed // 2 + 1,
                    "leg": "warm" if i % 2 else None,
                }
            )
            + b"\n"
        )
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(rows))
    whole = native_raw(log, arm.legs)
    assert whole is not None
    for block, bytes_per_thread in [(200, 1), (1000, 30_000), (4096, 100_000), (1 << 20, 1)]:
        assert native_raw(log, arm.legs, block, bytes_per_thread) == whole
    assert native_raw(log, arm.legs, 100) is None  # a line longer than a block
    assert_same_partials(str(log), arm.legs)


# -- declines ----------------------------------------------------------------------------------

GOOD = (
    b'{"v":1,"w":"5f0c1a2b3c4d5e6f","n":0,"t_ns":1764450000000001000,"pid":4242,"seq":7,'
    b'"proposed":7,"accepted":3,"emitted":4,"leg":"warm"}\n'
)
LEG = {
    "run": 2,
    "secs": 1.0,
    "tok_s": 10.0,
    "prompt_tokens": 1,
    "completion_tokens": 4,
    "finish_reason": "stop",
    "generate_start_unix": 1764450000.0,
    "generate_end_unix": 1764450001.0,
}


def good_line(**changes: Any) -> bytes:
    row = json.loads(GOOD)
    row.update(changes)
    return canonical_line({key: value for key, value in row.items() if value is not None})


DECLINED = {
    "empty file": b"",
    "torn last line": GOOD + GOOD[:40],
    "a space": GOOD + GOOD.replace(b'"n":0', b'"n": 1'),
    "other key order": GOOD
    + GOOD.replace(b'"n":0,"t_ns"', b'"t_ns"').replace(b'"pid"', b'"n":1,"pid"'),
    "escaped label": GOOD + good_line(n=1, leg='say "hi"') + b"\n",
    "control byte in label": GOOD + good_line(n=1).replace(b"warm", b"wa\x01rm") + b"\n",
    "non-ASCII label": GOOD + good_line(n=1, leg="wärm") + b"\n",
    "leading zero": GOOD + GOOD.replace(b'"pid":4242', b'"pid":04242'),
    "negative number": GOOD + GOOD.replace(b'"proposed":7', b'"proposed":-7'),
    "a float": GOOD + GOOD.replace(b'"emitted":4', b'"emitted":4.0'),
    "exponent": GOOD + GOOD.replace(b'"emitted":4', b'"emitted":4e0'),
    "accepted > proposed": GOOD + good_line(n=1, accepted=8) + b"\n",
    "n = 2^63": GOOD + good_line(n=2**63) + b"\n",
    "seq = 2^64": GOOD + good_line(n=1, seq=2**64) + b"\n",
    "a 21-digit seq": GOOD + good_line(n=1).replace(b'"seq":7', b'"seq":' + b"1" * 21) + b"\n",
    "emitted = 2^63": GOOD + good_line(n=1, emitted=2**63) + b"\n",
    "a sum beyond 64 bits": good_line(proposed=2**62 * 3 // 2, accepted=0)
    + b"\n"
    + good_line(n=1, proposed=2**62 * 3 // 2, accepted=0)
    + b"\n",
    "uppercase writer id": GOOD + GOOD.replace(b"5f0c1a2b3c4d5e6f", b"5F0C1A2B3C4D5E6F"),
    "version 2": GOOD + GOOD.replace(b'"v":1', b'"v":2'),
    "an extra key": GOOD + GOOD.replace(b'"warm"}', b'"warm","x":1}'),
    "an empty line": GOOD + b"\n",
    "CRLF": GOOD.replace(b"}\n", b"}\r\n"),
}


@pytest.mark.parametrize("name", list(DECLINED))
def test_declines_what_is_not_the_common_case(tmp_path: Path, name: str):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(DECLINED[name])
    arm = arm_from_document([LEG])
    assert native_raw(log, arm.legs) is None
    if name == "a sum beyond 64 bits":
        return  # the result would list per-position rates up to a proposal of 2^62
    # The public fold still gives the block path's figures or its exact error.
    both = [outcome(arm, [str(log)], native=native, skip_bad_lines=True) for native in (1, 0)]
    assert both[0] == both[1]


def test_the_good_line_is_taken(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(GOOD + good_line(n=1, seq=2**64 - 1, emitted=None, leg=None) + b"\n")
    arm = arm_from_document([LEG])
    assert native_raw(log, arm.legs) is not None
    assert_same_partials(str(log), arm.legs)


def test_declined_files_keep_the_exact_errors_and_counts(tmp_path: Path):
    arm = arm_from_document([LEG])
    refused = tmp_path / "refused.jsonl"
    refused.write_bytes(DECLINED["accepted > proposed"])
    with pytest.raises(RefusedError, match=r"refused\.jsonl:2: 'accepted' exceeds 'proposed'"):
        fold_acceptance(arm, [str(refused)])
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(DECLINED["torn last line"])
    result = fold_acceptance(arm, [str(torn)]).to_json()
    assert result["torn_lines"] == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(DECLINED["an empty line"])
    with pytest.raises(InputError, match=r"bad\.jsonl:2: empty line"):
        fold_acceptance(arm, [str(bad)])


def test_declines_overlapping_windows(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(GOOD)
    one = {"generate_start_unix": 1764450000.0, "generate_end_unix": 1764450001.0}
    # Windows widened by 500 ns: recorded ends 1 us apart share one nanosecond.
    touching = {"generate_start_unix": 1764450001.000001, "generate_end_unix": 1764450002.0}
    apart = {"generate_start_unix": 1764450001.000002, "generate_end_unix": 1764450002.0}
    for second, taken in [(touching, False), (apart, True), (one, False)]:
        arm = arm_from_document([{**LEG, **one}, {**LEG, **second}])
        assert (native_raw(log, arm.legs) is not None) is taken
        assert outcome(arm, [str(log)], native=True) == outcome(arm, [str(log)], native=False)


def test_window_edges_are_closed(tmp_path: Path):
    arm = arm_from_document([LEG])
    start, end = leg_bounds_ns(LEG)
    times = [start - 1, start, start + 1, end - 1, end, end + 1]
    log = tmp_path / "steps.jsonl"
    log.write_bytes(
        b"".join(good_line(n=n, t_ns=t) + b"\n" for n, t in enumerate(times)),
    )
    (lines, attributed, unattributed), *_ = native_raw(log, arm.legs)
    assert (lines, attributed, unattributed) == (6, 4, 2)
    assert_same_partials(str(log), arm.legs)
