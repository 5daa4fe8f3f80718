"""Writers -> file -> reader -> fold, for the Python writer and the compiled C++ instrument.

Hypothesis draws a sequence of steps (integer and string request ids); a writer appends them
(the C++ one through its C entry points, by ctypes, in a fresh subprocess per example since it
reads DFLASH_STEP_LOG once per process); the file is folded over one leg that spans the run, and
the fold must give back the drawn counts. The two writers' lines must be byte-identical for the
same values, and both must equal the layout of FORMAT.md as the standard library's JSON encoder
writes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import canonical_line, scaled

from fold.api import fold_acceptance
from fold.errors import RefusedError
from fold.folding.document import Document
from fold.inputs.arm import arm_from_document
from fold.inputs.steplog import StepLogWriter, format_line

# Labels an environment variable can carry: no NUL, no lone surrogates.
labels = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)


@st.composite
def step_rows(draw: st.DrawFn, *, invalid: bool = False) -> list[tuple[int, int, int, int | None]]:
    """(seq, proposed, accepted, emitted) rows; with ``invalid``, some with accepted > proposed."""
    rows = []
    for _ in range(draw(st.integers(0, 25))):
        proposed = draw(st.integers(0, 8))
        accepted = draw(st.integers(0, proposed))
        if invalid and draw(st.integers(0, 9)) == 0:
            accepted = proposed + draw(st.integers(1, 3))
        emitted = draw(st.none() | st.integers(0, accepted + 1))
        seq = draw(st.integers(0, 2**63 - 1) | st.integers(0, 5) | labels | st.sampled_from("ab"))
        rows.append((seq, proposed, accepted, emitted))
    return rows


def by_id(seq: int | str) -> tuple[bool, int | str]:
    """Integer ids, then string ids: two kinds that never compare with each other."""
    return isinstance(seq, str), seq


def expected_counts(rows: list[tuple[int, int, int, int | None]]) -> dict[str, Any]:
    valid = [row for row in rows if row[2] <= row[1]]
    drafted = [row for row in valid if row[1] > 0]
    most = max((row[1] for row in drafted), default=0)
    histogram = (
        [sum(1 for row in drafted if row[2] == j) for j in range(most + 1)] if drafted else []
    )
    with_emitted = [row[3] for row in valid if row[3] is not None]
    return {
        "lines": len(valid),
        "steps": len(drafted),
        "proposed": sum(row[1] for row in valid),
        "accepted": sum(row[2] for row in valid),
        "histogram": histogram,
        "emitted": sum(with_emitted) if with_emitted else None,
        "emitted_lines": len(with_emitted),
        "requests": sorted({row[0] for row in valid}, key=by_id),
    }


def fold_one_leg(path: str, start_ns: int, end_ns: int, label: str | None) -> Document:
    """Fold ``path`` over two legs with the same window, told apart by their labels only when
    the lines carry one; the leg labelled like the lines must get all of them."""
    start_us, end_us = start_ns // 1000 - 1_000_000, end_ns // 1000 + 1_000_000
    legs = [
        {
            "run": 2,
            "secs": (end_us - start_us) / 1e6,
            "tok_s": 10.0,
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "finish_reason": "stop",
            "generate_start_unix": start_us / 1e6,
            "generate_end_unix": end_us / 1e6,
        }
    ]
    if label:
        legs.append({**legs[0], "run": 1, "leg": label + "-other"})
        legs[0]["leg"] = label
    return fold_acceptance(arm_from_document(legs), [path], resamples=0)


def check_fold(path: str, span: tuple[int, int], label: str | None, rows: list, dropped: int):
    expected = expected_counts(rows)
    if expected["steps"] == 0:
        with pytest.raises(RefusedError):  # a warm leg without a drafted step
            fold_one_leg(path, *span, label)
        return
    document = fold_one_leg(path, *span, label)
    result = document.to_json()
    leg = result["legs"][0]
    for key in ("lines", "steps", "proposed", "accepted", "histogram", "emitted", "emitted_lines"):
        assert leg[key] == expected[key], key
    requests = document.legs[0]["requests"]
    assert sorted((r["seq"] for r in requests), key=by_id) == expected["requests"]
    assert leg["request_count"] == len(expected["requests"])
    assert result["ambiguous_steps"] == result["unattributed_steps"] == 0
    assert result["torn_lines"] == result["skipped_lines"] == 0
    # A lost line shows as a gap in n: one after the writer's last written line leaves none.
    last_written = max(i for i, row in enumerate(rows) if row[2] <= row[1])
    assert result["lost_lines"] == sum(1 for row in rows[:last_written] if row[2] > row[1])
    assert result["lost_lines"] <= dropped


@scaled(0.5)
@given(
    w=st.integers(0, 2**64 - 1),
    n=st.integers(0, 2**63 - 1),
    t_ns=st.integers(0, 2**63 - 1),
    pid=st.integers(0, 2**31),
    seq=st.integers(0, 2**63 - 1),
    proposed=st.integers(0, 2**32 - 1),
    data=st.data(),
    label=st.none() | labels,
)
def test_python_layout_is_format_md(w, n, t_ns, pid, seq, proposed, data, label) -> None:
    """format_line writes FORMAT.md's layout: the standard JSON encoder's bytes, keys in order."""
    accepted = data.draw(st.integers(0, proposed))
    emitted = data.draw(st.none() | st.integers(0, accepted + 1))
    values = dict(n=n, t_ns=t_ns, pid=pid, seq=seq, proposed=proposed, accepted=accepted)
    line = format_line(writer_id=f"{w:016x}", emitted=emitted, leg=label, **values)
    row = {"v": 1, "w": f"{w:016x}", **values, "emitted": emitted, "leg": label}
    assert line == canonical_line(row) + b"\n"
    assert orjson.loads(line) == {key: value for key, value in row.items() if value is not None}


@scaled(0.5)
@given(rows=step_rows(), label=st.none() | labels)
def test_python_writer_round_trip(rows, label) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "py.jsonl")
        start = time.time_ns()
        with StepLogWriter(path, leg=label) as writer:
            for seq, proposed, accepted, emitted in rows:
                writer.record(seq, proposed, accepted, emitted)
        check_fold(path, (start, time.time_ns()), label, rows, 0)


DRIVER = """
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
lib.dflash_step_log_record.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32]
lib.dflash_step_log_record_emitted.argtypes = [ctypes.c_uint64] + [ctypes.c_uint32] * 3
lib.dflash_step_log_record_id.argtypes = [ctypes.c_char_p, ctypes.c_size_t] + [ctypes.c_uint32] * 2
lib.dflash_step_log_record_id_emitted.argtypes = (
    [ctypes.c_char_p, ctypes.c_size_t] + [ctypes.c_uint32] * 3
)
lib.dflash_step_log_dropped.restype = ctypes.c_uint64
assert lib.dflash_step_log_enabled() == 1
for seq, proposed, accepted, emitted in json.loads(sys.stdin.read()):
    if isinstance(seq, str):
        name = seq.encode()
        if emitted is None:
            lib.dflash_step_log_record_id(name, len(name), proposed, accepted)
        else:
            lib.dflash_step_log_record_id_emitted(name, len(name), proposed, accepted, emitted)
    elif emitted is None:
        lib.dflash_step_log_record(seq, proposed, accepted)
    else:
        lib.dflash_step_log_record_emitted(seq, proposed, accepted, emitted)
print(lib.dflash_step_log_dropped())
"""


def python_line_for(c_line: bytes, label: str | None, directory: str) -> bytes:
    """The Python writer's line for the values of a C++ line (its own w and pid swapped in)."""
    obj = orjson.loads(c_line)
    path = os.path.join(directory, f"py-{obj['n']}.jsonl")
    with StepLogWriter(path, leg=label) as writer:
        writer._next_n = obj["n"]
        writer.record(
            obj["seq"], obj["proposed"], obj["accepted"], obj.get("emitted"), t_ns=obj["t_ns"]
        )
        w = writer.writer_id
    line = Path(path).read_bytes()
    return line.replace(f'"w":"{w}"'.encode(), f'"w":"{obj["w"]}"'.encode(), 1).replace(
        f'"pid":{os.getpid()},'.encode(), f'"pid":{obj["pid"]},'.encode(), 1
    )


@scaled(0.5)
@given(rows=step_rows(invalid=True), label=labels)
def test_cpp_instrument_round_trip(instrument_lib, rows, label) -> None:
    """The C++ writer (C API via ctypes): the fold gives back the drawn counts, a row with
    accepted > proposed is a lost line (and dropped()), and every line is byte-identical to the
    Python writer's line for the same values."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "cpp.jsonl")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DFLASH_STEP_")}
        env["DFLASH_STEP_LOG"] = path
        env["DFLASH_STEP_LEG"] = label
        start = time.time_ns()
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER, str(instrument_lib)],
            input=json.dumps(rows),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        end = time.time_ns()
        assert proc.returncode == 0, proc.stderr
        dropped = int(proc.stdout.split()[-1])
        assert dropped == sum(1 for row in rows if row[2] > row[1])
        if not rows:
            return
        lines = Path(path).read_bytes().splitlines(keepends=True)
        assert len(lines) == len(rows) - dropped
        for line in lines:
            assert line == python_line_for(line, label, directory)
        check_fold(path, (start, end), label, rows, dropped)
