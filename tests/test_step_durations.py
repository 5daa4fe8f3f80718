"""The steps' optional durations (``draft_ns``, ``verify_ns``; instrument/FORMAT.md) through
both readers into the per-request and per-leg sums.

Expectations are summed here from the rows written, one line at a time; the native reader and
the polars reference must both give them, and refuse the same logs in the same words.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from native_switch import native_switch
from strategies import BASE_US, DURATIONS, LARGE_DURATIONS, ns

from fold.api import LogFold, fold_acceptance
from fold.errors import InputError, RefusedError
from fold.folding.step_durations import NO_DURATIONS, DurationSums
from fold.inputs.arm import arm_from_document, load_arm
from fold.inputs.steplog import StepLogWriter, format_line

ROOT = Path(__file__).resolve().parents[1]
SUMS = ("timed_steps", "draft_steps", "verify_steps", "draft_ns", "verify_ns")


def leg(start_us: int, run: int = 2, label: str | None = None) -> dict[str, Any]:
    found = {
        "run": run,
        "secs": 1.0,
        "tok_s": 100.0,
        "prompt_tokens": 10,
        "completion_tokens": 20,
        "finish_reason": "stop",
        "generate_start_unix": start_us / 1e6,
        "generate_end_unix": (start_us + 10**6) / 1e6,
    }
    if label is not None:
        found["leg"] = label
    return found


TWO_LEGS = [leg(BASE_US), leg(BASE_US + 2 * 10**6)]


def by_hand(rows: list[dict[str, Any]]) -> dict[int, dict[tuple[str, Any], dict[str, int]]]:
    """Per leg and request (writer, id): the sums from their definition, line by line."""
    legs: dict[int, dict[tuple[str, Any], dict[str, int]]] = {}
    for row in rows:
        draft, verify = row.get("draft_ns"), row.get("verify_ns")
        if draft is None and verify is None:
            continue
        sums = legs.setdefault(row["leg_index"], {}).setdefault(
            (row["w"], row["seq"]), dict.fromkeys(SUMS, 0)
        )
        sums["timed_steps"] += draft is not None and verify is not None
        sums["draft_steps"] += draft is not None
        sums["verify_steps"] += verify is not None
        sums["draft_ns"] += draft or 0
        sums["verify_ns"] += verify or 0
    return legs


def fold_both_ways(arm: Any, log: Path, **options: Any) -> list[Any]:
    found = []
    for native in (True, False):
        with native_switch(native):
            try:
                found.append(fold_acceptance(arm, [str(log)], **options))
            except (InputError, RefusedError) as error:
                found.append((type(error).__name__, str(error)))
    return found


@st.composite
def timed_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Steps of two writers in two legs, each key present or not on each line; the first line
    of each leg drafts (the fold refuses a warm leg without a step)."""
    rows = []
    writers = ["00000000000000a1", "00000000000000b2"]
    for i in range(draw(st.integers(2, 40))):
        index = i if i < 2 else draw(st.integers(0, 1))
        proposed = draw(st.integers(1 if i < 2 else 0, 5))
        rows.append(
            {
                "w": draw(st.sampled_from(writers)),
                "n": i,
                "t_ns": ns(BASE_US + index * 2 * 10**6) + draw(st.integers(0, 10**9)),
                "seq": draw(st.sampled_from([0, 1, 2, "cmpl-a", "7"])),
                "proposed": proposed,
                "accepted": draw(st.integers(0, proposed)),
                "draft_ns": draw(DURATIONS),
                "verify_ns": draw(DURATIONS),
                "leg_index": index,
            }
        )
    return rows


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_bytes(
        b"".join(
            format_line(
                writer_id=row["w"], n=row["n"], t_ns=row["t_ns"], pid=1, seq=row["seq"],
                proposed=row["proposed"], accepted=row["accepted"],
                draft_ns=row["draft_ns"], verify_ns=row["verify_ns"],
            )
            for row in rows
        )
    )  # fmt: skip


@given(rows=timed_rows(), block=st.sampled_from([32 << 20, 200]))
def test_sums_per_request_and_leg_are_the_definitions_both_ways(tmp_path_factory, rows, block):
    log = tmp_path_factory.mktemp("durations") / "steps.jsonl"
    write(log, rows)
    note(log.read_text())
    arm = arm_from_document({"legs": TWO_LEGS})
    expected = by_hand(rows)
    for native in (True, False):
        with native_switch(native):
            fold = LogFold(arm)
            fold.add_file(str(log), block_bytes=block)
            durations = fold.result().fold.durations
        if not expected:
            assert durations is None
            continue
        assert durations is not None
        got = {
            index: {(r["w"], r["seq"]): {name: r[name] for name in SUMS} for r in requests}
            for index, requests in durations.requests.items()
        }
        assert got == expected
        for index in (0, 1):
            totals = {
                name: sum(sums[name] for sums in expected.get(index, {}).values()) for name in SUMS
            }
            assert durations.leg(index) == DurationSums(**totals)
        pooled = durations.pooled([0, 1])
        assert pooled.draft_ns == sum(row["draft_ns"] or 0 for row in rows)
        assert pooled.verify_steps == sum(row["verify_ns"] is not None for row in rows)


def test_a_log_without_durations_has_none_and_folds_as_before():
    arm = load_arm(ROOT / "fixtures" / "our-arm.json")
    log = str(ROOT / "fixtures" / "steps.jsonl")
    for native in (True, False):
        with native_switch(native):
            document = fold_acceptance(arm, [log])
        assert document.fold.durations is None
        text = json.dumps(document.to_json())
        assert "draft_ns" not in text and "verify_ns" not in text and "timed_steps" not in text


def test_lines_in_no_leg_keep_no_durations(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    with StepLogWriter(log) as writer:
        writer.record(1, 3, 2, 3, t_ns=ns(BASE_US) + 10, draft_ns=5, verify_ns=7)
        writer.record(1, 3, 2, 3, t_ns=ns(BASE_US) - 10**9, draft_ns=50, verify_ns=70)
        writer.record(2, 3, 1, t_ns=ns(BASE_US) + 20, verify_ns=9)
    arm = arm_from_document({"legs": [leg(BASE_US)]})
    for native in (True, False):
        with native_switch(native):
            durations = fold_acceptance(arm, [str(log)]).fold.durations
        assert durations.leg(0) == DurationSums(1, 1, 2, 5, 16)
        assert durations.leg(1) == NO_DURATIONS
        assert [dict(r) for r in durations.requests[0]] == [
            {"w": r["w"], "seq": seq, **sums}
            for r, seq, sums in (
                (durations.requests[0][0], 1, dict(zip(SUMS, (1, 1, 1, 5, 7), strict=True))),
                (durations.requests[0][1], 2, dict(zip(SUMS, (0, 0, 1, 0, 9), strict=True))),
            )
        ]


@pytest.mark.parametrize("threads", [False, True])
def test_a_sum_past_2_63_is_refused_both_ways_naming_the_request(tmp_path: Path, threads: bool):
    log = tmp_path / "steps.jsonl"
    rows = [
        {"w": "00000000000000a1", "n": i, "t_ns": ns(BASE_US) + i, "seq": 3, "proposed": 2,
         "accepted": 1, "draft_ns": 1, "verify_ns": LARGE_DURATIONS[i % 2], "leg_index": 0}
        for i in range(3)
    ]  # fmt: skip
    if threads:  # far apart in the file: two threads' partial folds meet in the merge
        filler = [{**rows[0], "n": 3 + i, "seq": 4, "verify_ns": 1} for i in range(70000)]
        rows = [rows[0], *filler, rows[1]]
    write(log, rows)
    arm = arm_from_document({"legs": [leg(BASE_US)]})
    native, reference = fold_both_ways(arm, log)
    assert native == reference
    assert native[0] == "RefusedError"
    assert native[1].startswith("leg 0, request 3 of writer 00000000000000a1: 'verify_ns' ")
    assert "is a sum past 2^63 - 1, the largest count (FORMAT.md)" in native[1]
    assert "fix where the hook" in native[1]


def test_a_leg_whose_sum_passes_2_63_is_refused_naming_the_leg(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    rows = [
        {"w": "00000000000000a1", "n": i, "t_ns": ns(BASE_US) + i, "seq": i, "proposed": 2,
         "accepted": 1, "draft_ns": 2**62, "verify_ns": None, "leg_index": 0}
        for i in range(2)
    ]  # fmt: skip
    write(log, rows)
    arm = arm_from_document({"legs": [leg(BASE_US)]})
    native, reference = fold_both_ways(arm, log)
    assert native == reference
    assert native == (
        "RefusedError",
        f"leg 0: draft_ns {2**62} takes the sum past 2^63 - 1, the largest count (FORMAT.md): "
        "the engine's step timing is wrong (no leg's steps take 2^63 ns); fix where the hook "
        "is given the step's durations",
    )


def test_a_negative_duration_is_a_malformed_line(tmp_path: Path):
    """FORMAT.md writes durations unsigned, as every integer: a sign makes the line bad (and
    ``--skip-bad-lines`` skips it), in both readers and in the words of a negative count."""
    log = tmp_path / "steps.jsonl"
    good = format_line(
        writer_id="00000000000000a1", n=0, t_ns=ns(BASE_US) + 5, pid=1, seq=1, proposed=3,
        accepted=1, emitted=2, draft_ns=10, verify_ns=20,
    )  # fmt: skip
    log.write_bytes(
        good + good.replace(b'"n":0', b'"n":1').replace(b'"verify_ns":20', b'"verify_ns":-20')
    )
    arm = arm_from_document({"legs": [leg(BASE_US)]})
    native, reference = fold_both_ways(arm, log)
    assert native == reference
    assert native == (
        "InputError",
        f"{log}:2: field 'verify_ns' -20 is negative: counts, request ids and durations are "
        "unsigned (FORMAT.md); fix or remove the line, or pass --skip-bad-lines to count it as "
        "skipped and go on",
    )
    native, reference = fold_both_ways(arm, log, skip_bad_lines=True)
    assert native.fold.skipped_lines == reference.fold.skipped_lines == 1
    assert native.fold.warm["steps"] == reference.fold.warm["steps"] == 1


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (b"1.5", "field 'draft_ns' 1.5 is not an integer"),
        (b'"81"', "field 'draft_ns' \"81\" is not an integer"),
        (b"9223372036854775808", "field 'draft_ns' 9223372036854775808 is past 2^63 - 1 ns"),
        (b"1" * 40, "field 'draft_ns' 1111111111111111"),
    ],
)
def test_a_duration_of_the_wrong_type_is_a_bad_line_by_file_and_line(
    tmp_path: Path, value: bytes, words: str
):
    log = tmp_path / "steps.jsonl"
    good = format_line(
        writer_id="00000000000000a1", n=0, t_ns=ns(BASE_US) + 5, pid=1, seq=1, proposed=3,
        accepted=1, draft_ns=10,
    )  # fmt: skip
    log.write_bytes(good + good.replace(b'"n":0', b'"n":1').replace(b":10}", b":" + value + b"}"))
    arm = arm_from_document({"legs": [leg(BASE_US)]})
    native, reference = fold_both_ways(arm, log)
    assert native == reference
    assert native[0] == "InputError" and native[1].startswith(f"{log}:2: {words}")
    native, reference = fold_both_ways(arm, log, skip_bad_lines=True)
    for document in (native, reference):
        assert document.fold.durations.leg(0) == DurationSums(0, 1, 0, 10, 0)
        assert document.fold.skipped_lines == 1
