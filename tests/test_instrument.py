"""The C++ instrument (instrument/dflash_step_log.h) against FORMAT.md and its own spec.

The drivers in tests/cpp/ are built by the session fixtures of conftest.py: plain, under TSan
(the concurrency test) and under ASan+UBSan (the other behaviours). The values a driver writes are
a fixed function of ``seq`` (``row_for``, mirrored here), so every line read back is checked.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from conftest import CPP, INSTRUMENT, WARNINGS, compile_cxx

from fold.inputs import limits
from fold.inputs.reader import StepLogReader
from fold.inputs.steplog import format_line

V1_TYPES = {
    "v": int,
    "w": str,
    "n": int,
    "t_ns": int,
    "pid": int,
    "seq": (int, str),
    "proposed": int,
    "accepted": int,
}
OPTIONAL_TYPES = {"emitted": int, "draft_ns": int, "verify_ns": int, "leg": str}
SANITIZER_ENV = {
    "ASAN_OPTIONS": "abort_on_error=0:exitcode=86",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    "TSAN_OPTIONS": "halt_on_error=1:exitcode=66",
}


def row_for(seq: int) -> tuple[int, int, int]:
    """(proposed, accepted, emitted) the driver writes for ``seq``."""
    proposed = seq % 9
    accepted = (seq // 9) % (proposed + 1)
    emitted = accepted + 1 - (seq // 7) % 2
    return proposed, accepted, emitted


def driver_env(**values: str | bytes) -> dict[str, str | bytes]:
    env: dict[str, str | bytes] = {
        k: v for k, v in os.environ.items() if not k.startswith("DFLASH_STEP_")
    }
    env.update(SANITIZER_ENV)
    env.update(values)
    return env


def run(binary: Path, *args: object, env: dict, cwd: Path | None = None, timeout: float = 120):
    """Runs a driver; returns (fields of its last stdout line, stderr lines). Fails on exit != 0."""
    proc = subprocess.run(
        [str(binary), *map(str, args)],
        env=env,
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
    )
    stderr = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, f"exit {proc.returncode}\n{stderr}"
    assert "Sanitizer" not in stderr, stderr
    last = proc.stdout.decode().strip().splitlines()[-1]
    fields = dict(item.split("=", 1) for item in last.split())
    return fields, stderr.splitlines()


def parse_lines(path: Path) -> tuple[list[tuple[bytes, dict]], bytes]:
    """All complete lines as (bytes, object), checked against v1; and the torn tail, if any."""
    data = path.read_bytes()
    *complete, tail = data.split(b"\n")
    lines = []
    for raw in complete:
        obj = orjson.loads(raw)
        for key, kind in V1_TYPES.items():
            assert type(obj[key]) in (kind if isinstance(kind, tuple) else (kind,)), (key, raw)
        for key, kind in OPTIONAL_TYPES.items():
            if key in obj:
                assert type(obj[key]) is kind, (key, raw)
        assert set(obj) <= set(V1_TYPES) | set(OPTIONAL_TYPES), raw
        assert obj["v"] == 1
        assert len(obj["w"]) == 16 and all(c in "0123456789abcdef" for c in obj["w"]), raw
        assert 0 <= obj["accepted"] <= obj["proposed"], raw
        lines.append((raw + b"\n", obj))
    return lines, tail


def seq_of(obj: dict) -> int:
    """The driver's seq of a line: the integer, or the one a string id ``r<seq>`` names."""
    seq = obj["seq"]
    if isinstance(seq, str):
        assert seq.startswith("r") and seq[1:].isdigit(), obj
        return int(seq[1:])
    return seq


def check_rows(objs: list[dict]) -> None:
    for obj in objs:
        proposed, accepted, emitted = row_for(seq_of(obj))
        assert (obj["proposed"], obj["accepted"]) == (proposed, accepted), obj
        if "emitted" in obj:
            assert obj["emitted"] == emitted, obj


def by_writer(objs: list[dict]) -> dict[str, list[dict]]:
    writers: dict[str, list[dict]] = {}
    for obj in objs:
        writers.setdefault(obj["w"], []).append(obj)
    return writers


def assert_no_gaps(objs: list[dict]) -> None:
    assert sorted(o["n"] for o in objs) == list(range(len(objs)))


def assert_same_bytes_as_python(raw: bytes, obj: dict, leg: str | None) -> None:
    """The line equals fold.inputs.steplog.format_line given the same writer id, n, time and pid."""
    expected = format_line(
        writer_id=obj["w"],
        n=obj["n"],
        t_ns=obj["t_ns"],
        pid=obj["pid"],
        seq=obj["seq"],
        proposed=obj["proposed"],
        accepted=obj["accepted"],
        emitted=obj.get("emitted"),
        leg=leg,
        draft_ns=obj.get("draft_ns"),
        verify_ns=obj.get("verify_ns"),
    )
    assert raw == expected


def leg_as_written(raw: bytes) -> str:
    """FORMAT.md's reading of DFLASH_STEP_LEG: valid UTF-8 kept, each other byte one U+FFFD."""
    out, i = [], 0
    while i < len(raw):
        lead = raw[i]
        length = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        try:
            out.append(raw[i : i + length].decode("utf-8", "strict"))
            i += length
        except UnicodeDecodeError:
            out.append("\ufffd")
            i += 1
    return "".join(out)


@pytest.fixture(scope="module")
def plain(step_log_drivers) -> Path:
    return step_log_drivers["plain"][0]


@pytest.fixture(scope="module")
def asan(step_log_drivers) -> Path:
    return step_log_drivers["asan"][0]


@pytest.fixture(scope="module")
def tsan(step_log_drivers) -> Path:
    return step_log_drivers["tsan"][0]


# --- builds -------------------------------------------------------------------------------------


def test_builds_are_warning_free(step_log_drivers, instrument_lib, cpp_build_dir):
    for variant, (binary, stderr) in step_log_drivers.items():
        assert binary.exists(), variant
        assert stderr == "", (variant, stderr)
    assert instrument_lib.exists()
    # Stricter flags than the contract asks, on the header alone.
    extra = ["-Wshadow", "-Wconversion", "-Wsign-conversion", "-Wold-style-cast"]
    out = cpp_build_dir / "strict.o"
    source = CPP / "step_log_lib.cc"
    assert (
        compile_cxx([*WARNINGS, *extra, f"-I{INSTRUMENT}", "-c", str(source), "-o", str(out)]) == ""
    )
    assert out.exists()


def test_header_declares_the_c_api_to_c(cpp_build_dir, instrument_lib, tmp_path):
    obj = cpp_build_dir / "c_api_check.o"
    flags = ["-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", f"-I{INSTRUMENT}"]
    compile_cxx([*flags, "-c", str(CPP / "c_api_check.c"), "-o", str(obj)], compiler="gcc")
    binary = cpp_build_dir / "c_api_check"
    compile_cxx(
        [str(obj), str(instrument_lib), f"-Wl,-rpath,{instrument_lib.parent}", "-o", str(binary)]
    )
    log = tmp_path / "c.jsonl"
    subprocess.run([str(binary)], env=driver_env(DFLASH_STEP_LOG=str(log)), check=True)
    lines, tail = parse_lines(log)
    assert tail == b""
    assert [(o["seq"], o["proposed"], o["accepted"], o.get("emitted")) for _, o in lines] == [
        (1, 4, 2, 3),
        (2, 4, 2, None),
        ("cmpl-3", 4, 1, None),
        ("cmpl-4", 3, 3, 4),
        ("", 2, 0, None),
        (5, 4, 3, 4),
        (6, 2, 1, 2),
        ("cmpl-7", 3, 0, 1),
    ]
    assert [(o.get("draft_ns"), o.get("verify_ns")) for _, o in lines[5:]] == [
        (81234, 402211),
        (None, 0),
        (17, None),
    ]
    assert b'"emitted":4,"draft_ns":81234,"verify_ns":402211}' in lines[5][0]
    # The null ids and the 2^63 duration took an n and count in dropped() (the exit status
    # says 3).
    assert sorted(o["n"] for _, o in lines) == [0, 1, 2, 3, 5, 6, 7, 8]


# --- disabled and enabled -----------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, ""])
def test_disabled_creates_nothing_and_counts_nothing(asan, tmp_path, value):
    env = driver_env(DFLASH_STEP_LEG="ignored") if value is None else driver_env(DFLASH_STEP_LOG="")
    fields, stderr = run(asan, "rows", 0, 500, env=env, cwd=tmp_path)
    assert fields["enabled"] == "0"
    assert fields["dropped"] == "0"
    assert stderr == []
    assert list(tmp_path.iterdir()) == []


def test_enabled_lines_are_v1_without_gaps(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    before = time.time_ns()
    fields, stderr = run(asan, "rows", 0, 3000, env=driver_env(DFLASH_STEP_LOG=str(log)))
    after = time.time_ns()
    assert (fields["enabled"], fields["dropped"], stderr) == ("1", "0", [])
    lines, tail = parse_lines(log)
    assert tail == b""
    objs = [o for _, o in lines]
    assert len(objs) == 3000
    assert sorted(o["seq"] for o in objs) == list(range(3000))
    assert [o["n"] for o in objs] == list(range(3000))  # one thread: file order is n order
    assert {o["pid"] for o in objs} == {int(fields["pid"])}
    assert len(by_writer(objs)) == 1
    assert all(before <= o["t_ns"] <= after for o in objs)
    assert [o["t_ns"] for o in objs] == sorted(o["t_ns"] for o in objs)
    assert all("leg" not in o for o in objs)
    assert any("emitted" in o for o in objs) and any("emitted" not in o for o in objs)
    check_rows(objs)
    for raw, obj in lines:
        assert_same_bytes_as_python(raw, obj, None)


def test_extreme_values_are_exact(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    run(asan, "extremes", env=driver_env(DFLASH_STEP_LOG=str(log), DFLASH_STEP_LEG="x"))
    lines, _ = parse_lines(log)
    big = 65536  # the most tokens one step may carry (FORMAT.md): the widest count written
    assert [(o["seq"], o["proposed"], o["accepted"], o.get("emitted")) for _, o in lines] == [
        (2**64 - 1, big, big, big),
        (0, 0, 0, 0),
        (0, 0, 0, None),
        (2**64 - 1, big, big, None),
        (10, big, 0, big),
    ]
    for raw, obj in lines:
        assert_same_bytes_as_python(raw, obj, "x")


def test_counts_past_the_step_cap_are_dropped_not_written(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    fields, stderr = run(asan, "past_cap", env=driver_env(DFLASH_STEP_LOG=str(log)))
    lines, _ = parse_lines(log)
    # Rows 2 to 6 carry a proposed or emitted of 65537 or 2^32 - 1, which readers refuse.
    assert [(o["seq"], o["proposed"], o.get("emitted")) for _, o in lines] == [
        (1, 7, 4),
        (7, 65536, 65536),
    ]
    assert fields["dropped"] == "5"
    assert len({o["n"] for _, o in lines}) == 2
    assert len(stderr) == 1 and "proposed=65537 or emitted=0 past 65536" in stderr[0]
    # What was written folds: the exact reader refuses a log with a count past the cap.
    read = StepLogReader(log)
    assert sum(frame.height for frame in read.read_available()) == 2


def test_the_instrument_cap_is_the_readers_cap():
    header = (INSTRUMENT / "dflash_step_log.h").read_text()
    match = re.search(r"constexpr std::uint32_t kMaxStepTokens = (\d+);", header)
    assert match is not None and int(match.group(1)) == limits.MAX_STEP_TOKENS == 65536


def test_accepted_above_proposed_is_dropped_not_written(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    fields, stderr = run(asan, "invalid", env=driver_env(DFLASH_STEP_LOG=str(log)))
    lines, _ = parse_lines(log)
    assert [o["seq"] for _, o in lines] == [1, 3, 4, 6]
    # Each dropped row took an n: the 4 lines hold 4 of n = 0..5, so readers see 2 missing.
    n_values = {o["n"] for _, o in lines}
    assert len(n_values) == 4 and n_values < set(range(6))
    assert fields["dropped"] == "2"
    assert len(stderr) == 1 and "accepted=4 > proposed=3" in stderr[0]


def test_any_integer_type_is_taken_and_out_of_range_values_are_dropped(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    fields, stderr = run(asan, "types", env=driver_env(DFLASH_STEP_LOG=str(log)))
    lines, _ = parse_lines(log)
    rows = [(o["seq"], o["proposed"], o["accepted"], o.get("emitted")) for _, o in lines]
    assert rows == [(4, 5, 3, 3), (1, 2, 0, None), (5, 5, 1, 2), (7, 2, 2, None)]
    # Four rows did not fit (negative seq, 2^32 proposed, negative accepted, 2^32 emitted):
    # each took an n, so the reader sees them as lost lines, never as false rows.
    assert fields["dropped"] == "4"
    n_values = sorted(o["n"] for _, o in lines)
    assert len(n_values) == 4 and set(n_values) < set(range(8))
    assert len(stderr) == 1 and "negative seq or count" in stderr[0]


def test_call_sites_need_no_casts_under_strict_warnings(cpp_build_dir):
    """What an engine's build may turn on: the header and call sites passing size_t, int, ...

    Compiled with the flags the contract names plus the ones engines such as llama.cpp's
    consumers use, so that `record(seq, draft.size(), ...)` never forces a cast or a warning.
    """
    strict = [
        "-Wconversion",
        "-Wsign-conversion",
        "-Wuseless-cast",
        "-Wzero-as-null-pointer-constant",
        "-Wshadow",
        "-Wold-style-cast",
    ]
    for optimization in ("-O0", "-O2"):
        out = cpp_build_dir / f"types{optimization}.o"
        source = CPP / "step_log_driver.cc"
        args = [*WARNINGS, *strict, optimization, f"-I{INSTRUMENT}", "-c", str(source)]
        assert compile_cxx([*args, "-o", str(out)]) == ""
        assert out.exists()


# --- step durations ---------------------------------------------------------------------------


def test_step_durations_are_written_after_emitted(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    env = driver_env(DFLASH_STEP_LOG=str(log), DFLASH_STEP_LEG="w")
    fields, stderr = run(asan, "timed", env=env)
    lines, tail = parse_lines(log)
    assert tail == b""
    rows = [(o["seq"], o.get("draft_ns"), o.get("verify_ns")) for _, o in lines]
    assert rows[:9] == [
        (1, 81234, 402211),
        ("r2", None, 0),
        (3, 7, None),
        (4, None, None),
        (5, 2**63 - 1, 0),
        (9, 12000, 40),  # 12 us as a chrono duration, 40 as an unsigned
        (10, 100, 200),  # set_times after the rows were added
        ("r11", 100, 200),
        (12, None, None),  # commit() cleared the times
    ]
    # The 150 rows of the last batch, written in three parts, all carry its draft time.
    assert rows[9:] == [(seq, 300, None) for seq in range(100, 250)]
    parts = [o["t_ns"] for _, o in lines[9:]]
    assert [parts.count(t) for t in sorted(set(parts))] == [64, 64, 22]  # one t_ns per write
    check_rows([o for _, o in lines[9:]])
    # 2^63, 2^64 - 2, a negative one, and the two rows of the batch with a 2^63 verify time.
    assert fields["dropped"] == "5"
    # Each took its n: the gaps are where they were issued.
    missing = set(range(len(lines) + 5)) - {o["n"] for _, o in lines}
    assert missing == {5, 6, 7, 12, 13}
    assert len(stderr) == 1 and "draft_ns=9223372036854775808 or verify_ns=0" in stderr[0]
    for raw, obj in lines:
        assert_same_bytes_as_python(raw, obj, "w")
    assert lines[0][0].endswith(b'"emitted":4,"draft_ns":81234,"verify_ns":402211,"leg":"w"}\n')
    assert b'"accepted":3,"draft_ns":100,"verify_ns":200,"leg":"w"}' in lines[7][0]
    # The exact reader folds them: every line read, none refused.
    assert sum(frame.height for frame in StepLogReader(log).read_available()) == len(lines)


@pytest.mark.parametrize("variant", ["plain", "tsan"])
def test_timed_batches_from_threads_keep_their_own_times(step_log_drivers, tmp_path, variant):
    binary = step_log_drivers[variant][0]
    log = tmp_path / "steps.jsonl"
    threads, per_thread = 8, 1000 if variant == "tsan" else 3000
    fields, stderr = run(
        binary, "timed_threads", threads, per_thread, env=driver_env(DFLASH_STEP_LOG=str(log))
    )
    assert (fields["dropped"], stderr) == ("0", [])
    lines, tail = parse_lines(log)
    assert tail == b""
    objs = [o for _, o in lines]
    assert len(objs) == threads * per_thread
    assert_no_gaps(objs)
    check_rows(objs)
    # A single record (every 9th) carries its own seq's times; a batch row its first row's.
    for obj in objs:
        i = obj["seq"] % 1_000_000
        first = obj["seq"] if i % 9 == 0 else obj["seq"] - (i % 9 - 1)
        assert (obj["draft_ns"], obj["verify_ns"]) == (first * 10, first * 10 + 1), obj
    for raw, obj in lines[:200]:
        assert_same_bytes_as_python(raw, obj, None)


def test_python_writer_takes_durations(tmp_path):
    from fold.inputs.steplog import StepLogWriter

    log = tmp_path / "steps.jsonl"
    with StepLogWriter(log, leg="w") as writer:
        writer.record(1, 3, 2, 3, t_ns=5, draft_ns=0, verify_ns=2**63 - 1)
        writer.record("a", 3, 2, t_ns=6, verify_ns=9)
        for bad in (1.5, True):
            with pytest.raises(ValueError, match=r"draft_ns must be an int in 0 \.\. 2\^63 - 1"):
                writer.record(1, 3, 2, 3, draft_ns=bad)  # type: ignore[arg-type]
        for bad, words in (
            (-1, "is negative: counts, request ids and durations are unsigned (FORMAT.md)"),
            (2**63, "is past 2^63 - 1 ns, the longest step duration (FORMAT.md)"),
        ):
            with pytest.raises(ValueError) as error:
                writer.record(1, 3, 2, 3, draft_ns=bad)
            assert str(error.value) == (
                f"StepLogWriter.record: 'draft_ns' {bad} {words}: the caller miscounts; nothing "
                "was written"
            )
    lines, _ = parse_lines(log)
    assert lines[0][0].endswith(
        b'"emitted":3,"draft_ns":0,"verify_ns":9223372036854775807,"leg":"w"}\n'
    )
    assert lines[1][0].endswith(b'"accepted":2,"verify_ns":9,"leg":"w"}\n')
    assert [o["n"] for _, o in lines] == [0, 1]  # a refused call takes no n


# --- string request ids ------------------------------------------------------------------------


def test_string_ids_are_written_as_json_strings(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    fields, stderr = run(asan, "id_rows", 0, 3000, env=driver_env(DFLASH_STEP_LOG=str(log)))
    assert fields["dropped"] == "0" and stderr == []
    lines, tail = parse_lines(log)
    assert tail == b""
    objs = [o for _, o in lines]
    assert [o["seq"] for o in objs] == [f"r{i}" for i in range(3000)]
    assert_no_gaps(objs)
    check_rows(objs)
    for raw, obj in lines:
        assert_same_bytes_as_python(raw, obj, None)


def test_every_kind_of_string_id_and_the_ones_dropped(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    fields, stderr = run(asan, "id_kinds", env=driver_env(DFLASH_STEP_LOG=str(log)))
    lines, tail = parse_lines(log)
    assert tail == b""
    rows = [(o["seq"], o["proposed"], o["accepted"], o.get("emitted")) for _, o in lines]
    longs = []
    for i in range(40):
        name = f"long-{i}-"
        longs.append((name + "y" * (250 - len(name)), 3, i % 4, i % 4 + 1))
    assert rows == [
        ("cmpl-1", 4, 2, None),
        ("cmpl-2", 4, 1, 2),
        ("cmpl-4", 3, 3, None),
        ("cmpl-3", 2, 0, 1),
        ('say "hi"\\\t\x01', 1, 1, None),
        ("nul\x00in", 1, 0, None),
        ("bad \ufffd byte", 2, 1, None),
        ("7", 5, 2, None),
        (7, 5, 1, None),
        ('"' * 128, 1, 0, None),
        *longs,
        (8, 1, 1, None),
        ("after", 2, 2, None),
    ]
    # The escapes are FORMAT.md's, byte for byte: the Python writer's.
    for raw, obj in lines:
        assert_same_bytes_as_python(raw, obj, None)
    assert b'"seq":"say \\"hi\\"\\\\\\t\\u0001"' in lines[4][0]
    # Null, 257 bytes, 258 escaped, null in a batch: each took its n and counts as dropped.
    assert fields["dropped"] == "4"
    n_values = sorted(o["n"] for o in (obj for _, obj in lines))
    assert len(n_values) == len(rows) and set(n_values) < set(range(len(rows) + 4))
    assert len(stderr) == 1 and "string id null or over 256 bytes" in stderr[0]


def test_python_writer_takes_string_ids(tmp_path):
    from fold.inputs.steplog import StepLogWriter

    log = tmp_path / "steps.jsonl"
    with StepLogWriter(log, leg="w") as writer:
        writer.record("cmpl-\u00e9\n", 3, 2, 3, t_ns=5)
        writer.record(9, 3, 1, t_ns=6)
        with pytest.raises(ValueError, match="at most 256 bytes"):
            writer.record('"' * 129, 1, 0)
        with pytest.raises(TypeError, match="int or a str"):
            writer.record(True, 1, 0)  # type: ignore[arg-type]
    lines, _ = parse_lines(log)
    assert [o["seq"] for _, o in lines] == ["cmpl-\u00e9\n", 9]
    assert b'"seq":"cmpl-\xc3\xa9\\n"' in lines[0][0]


# --- leg labels and byte compatibility ----------------------------------------------------------

LEGS = [
    b"warm",
    b'say "hi"',
    b"back\\slash\\",
    b"ctl\x01\x08\t\n\x0b\x0c\r\x1f\x7f end",
    "caf\u00e9 \u6f22\u5b57 \U0001f642".encode(),
    b"bad\xff\xfe bytes",
    b"cut \xe2\x82",  # a truncated 3-byte sequence: two invalid bytes
    b"overlong \xc0\xaf",
    b"surrogate \xed\xa0\x80",
    b"too big \xf4\x90\x80\x80",
    b"tail \xf0\x9f\x99",
]


@pytest.mark.parametrize("leg", LEGS, ids=range(len(LEGS)))
def test_leg_labels_round_trip(plain, tmp_path, leg):
    log = tmp_path / "steps.jsonl"
    run(plain, "rows", 0, 40, env=driver_env(DFLASH_STEP_LOG=str(log), DFLASH_STEP_LEG=leg))
    expected = leg_as_written(leg)
    lines, _ = parse_lines(log)
    assert len(lines) == 40
    for raw, obj in lines:
        assert obj["leg"] == expected
        assert_same_bytes_as_python(raw, obj, expected)


def test_leg_reading_of_invalid_bytes_is_per_byte():
    # The test's own reading must follow FORMAT.md, not Python's "replace" (one U+FFFD per run).
    assert leg_as_written(b"a\xe2\x82b") == "a\ufffd\ufffdb"
    assert leg_as_written(b"\xed\xa0\x80") == "\ufffd" * 3
    assert leg_as_written("é".encode()) == "é"


CTYPES_SCRIPT = """
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
lib.dflash_step_log_enabled.restype = ctypes.c_int
lib.dflash_step_log_dropped.restype = ctypes.c_uint64
lib.dflash_step_log_record.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32]
lib.dflash_step_log_record_emitted.argtypes = [ctypes.c_uint64] + [ctypes.c_uint32] * 3
lib.dflash_step_log_record_timed.argtypes = (
    [ctypes.c_uint64] + [ctypes.c_uint32] * 3 + [ctypes.c_uint64] * 2
)
NO_TIME = 2**64 - 1
for seq in range(200):
    p, a = seq % 9, (seq // 9) % (seq % 9 + 1)
    if seq % 5 == 1:
        draft, verify = (NO_TIME, seq * 7) if seq % 2 else (seq * 1000, seq * 3000 + 1)
        lib.dflash_step_log_record_timed(seq, p, a, a + 1 - (seq // 7) % 2, draft, verify)
    elif seq % 3:
        lib.dflash_step_log_record_emitted(seq, p, a, a + 1 - (seq // 7) % 2)
    else:
        lib.dflash_step_log_record(seq, p, a)
print(os.getpid(), lib.dflash_step_log_enabled(), lib.dflash_step_log_dropped())
"""


def test_ctypes_writer_matches_python_writer_bytes(instrument_lib, tmp_path):
    log = tmp_path / "steps.jsonl"
    leg = 'leg "1"\t\u00e9'
    proc = subprocess.run(
        [sys.executable, "-c", CTYPES_SCRIPT, str(instrument_lib)],
        env=driver_env(DFLASH_STEP_LOG=str(log), DFLASH_STEP_LEG=leg),
        capture_output=True,
        check=True,
        text=True,
    )
    pid, enabled, dropped = map(int, proc.stdout.split())
    assert (enabled, dropped) == (1, 0)
    lines, tail = parse_lines(log)
    assert tail == b""
    assert [o["seq"] for _, o in lines] == list(range(200))
    assert [o["n"] for _, o in lines] == list(range(200))
    check_rows([o for _, o in lines])
    for raw, obj in lines:
        assert obj["pid"] == pid
        seq = obj["seq"]
        assert ("emitted" in obj) == (seq % 3 != 0 or seq % 5 == 1)
        if seq % 5 == 1:
            expected = (None, seq * 7) if seq % 2 else (seq * 1000, seq * 3000 + 1)
        else:
            expected = (None, None)
        assert (obj.get("draft_ns"), obj.get("verify_ns")) == expected
        assert_same_bytes_as_python(raw, obj, leg)


CTYPES_ID_SCRIPT = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.dflash_step_log_dropped.restype = ctypes.c_uint64
lib.dflash_step_log_record_id.argtypes = [ctypes.c_char_p, ctypes.c_size_t] + [ctypes.c_uint32] * 2
lib.dflash_step_log_record_id_emitted.argtypes = (
    [ctypes.c_char_p, ctypes.c_size_t] + [ctypes.c_uint32] * 3
)
lib.dflash_step_log_record_id_timed.argtypes = (
    [ctypes.c_char_p, ctypes.c_size_t] + [ctypes.c_uint32] * 3 + [ctypes.c_uint64] * 2
)
for seq in range(60):
    name = f'cmpl-{seq}-\\u00e9"'.encode()
    p, a = seq % 9, (seq // 9) % (seq % 9 + 1)
    if seq % 4 == 1:
        lib.dflash_step_log_record_id_timed(name, len(name), p, a, a + 1, seq, 2**64 - 1)
    elif seq % 2:
        lib.dflash_step_log_record_id_emitted(name, len(name), p, a, a + 1)
    else:
        lib.dflash_step_log_record_id(name, len(name), p, a)
print(lib.dflash_step_log_dropped())
"""


def test_ctypes_string_ids_match_python_writer_bytes(instrument_lib, tmp_path):
    log = tmp_path / "steps.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", CTYPES_ID_SCRIPT, str(instrument_lib)],
        env=driver_env(DFLASH_STEP_LOG=str(log)),
        capture_output=True,
        check=True,
        text=True,
    )
    assert proc.stdout.split() == ["0"]
    lines, tail = parse_lines(log)
    assert tail == b""
    assert [o["seq"] for _, o in lines] == [f'cmpl-{seq}-\u00e9"' for seq in range(60)]
    for raw, obj in lines:
        seq = int(obj["seq"].split("-")[1])
        assert ("emitted" in obj) == (seq % 2 == 1)
        assert (obj.get("draft_ns"), obj.get("verify_ns")) == (
            (seq, None) if seq % 4 == 1 else (None, None)
        )
        assert_same_bytes_as_python(raw, obj, None)


# --- concurrency --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["threads", "id_threads"])
@pytest.mark.parametrize("variant", ["plain", "tsan"])
def test_threads_and_processes_never_interleave(step_log_drivers, tmp_path, variant, mode):
    binary = step_log_drivers[variant][0]
    log = tmp_path / "steps.jsonl"
    threads, per_thread, processes = 8, 1500 if variant == "tsan" else 2500, 4
    env = driver_env(DFLASH_STEP_LOG=str(log), DFLASH_STEP_LEG="conc")
    procs = [
        subprocess.Popen(
            [str(binary), mode, str(threads), str(per_thread)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(processes)
    ]
    pids = set()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert err == b"", err.decode()
        fields = dict(item.split("=", 1) for item in out.decode().split())
        assert fields["dropped"] == "0"
        pids.add(int(fields["pid"]))
    lines, tail = parse_lines(log)
    assert tail == b""
    objs = [o for _, o in lines]
    assert len(objs) == threads * per_thread * processes
    writers = by_writer(objs)
    assert len(writers) == processes
    expected_seqs = sorted(t * 1_000_000 + i for t in range(threads) for i in range(per_thread))
    for rows in writers.values():
        assert len(rows) == threads * per_thread
        assert_no_gaps(rows)
        assert len({o["pid"] for o in rows}) == 1
        assert sorted(seq_of(o) for o in rows) == expected_seqs
        assert {type(o["seq"]) for o in rows} == {str if mode == "id_threads" else int}
    assert {rows[0]["pid"] for rows in writers.values()} == pids
    check_rows(objs)
    assert all(o["leg"] == "conc" for o in objs)


# --- fork ---------------------------------------------------------------------------------------


def test_fork_child_is_a_new_writer(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    env = driver_env(DFLASH_STEP_LOG=str(log))
    proc = subprocess.run(
        [str(asan), "fork", "100", "70", "50"], env=env, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr.decode()
    reports = [
        dict(i.split("=", 1) for i in ln.split()) for ln in proc.stdout.decode().split("\n") if ln
    ]
    child = next(r for r in reports if r["role"] == "child")
    parent = next(r for r in reports if r["role"] == "parent")
    assert parent["child_status"] == "0"
    assert child["dropped"] == parent["dropped"] == "0"
    lines, tail = parse_lines(log)
    assert tail == b""
    writers = by_writer([o for _, o in lines])
    assert len(writers) == 2
    for rows in writers.values():
        assert_no_gaps(rows)
    by_pid = {rows[0]["pid"]: rows for rows in writers.values()}
    assert set(by_pid) == {int(parent["pid"]), int(child["pid"])}
    parent_rows, child_rows = by_pid[int(parent["pid"])], by_pid[int(child["pid"])]
    assert all(o["pid"] == int(parent["pid"]) for o in parent_rows)
    assert all(o["pid"] == int(child["pid"]) for o in child_rows)
    assert sorted(o["seq"] for o in parent_rows) == [*range(100), *range(2_000_000, 2_000_050)]
    assert sorted(o["seq"] for o in child_rows) == list(range(1_000_000, 1_000_070))
    assert [o["n"] for o in child_rows] == list(range(70))


def test_fork_with_pid_in_path_reopens_own_file(asan, tmp_path):
    env = driver_env(DFLASH_STEP_LOG=str(tmp_path / "log-%p.jsonl"))
    proc = subprocess.run(
        [str(asan), "fork", "10", "20", "5"], env=env, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr.decode()
    reports = [
        dict(i.split("=", 1) for i in ln.split()) for ln in proc.stdout.decode().split("\n") if ln
    ]
    pids = {r["role"]: int(r["pid"]) for r in reports}
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == sorted(f"log-{pid}.jsonl" for pid in pids.values())
    for role, count in (("parent", 15), ("child", 20)):
        lines, _ = parse_lines(tmp_path / f"log-{pids[role]}.jsonl")
        objs = [o for _, o in lines]
        assert len(objs) == count
        assert {o["pid"] for o in objs} == {pids[role]}
        assert len(by_writer(objs)) == 1
        assert_no_gaps(objs)


def test_path_expands_pid_and_hostname(asan, tmp_path):
    env = driver_env(DFLASH_STEP_LOG=str(tmp_path / "s-%h-%p-%x.jsonl"))
    fields, _ = run(asan, "rows", 0, 10, env=env)
    expected = tmp_path / f"s-{socket.gethostname()}-{fields['pid']}-%x.jsonl"
    assert list(tmp_path.iterdir()) == [expected]
    assert len(parse_lines(expected)[0]) == 10


# --- bad environment ----------------------------------------------------------------------------


def test_unopenable_path_warns_once_and_continues(asan, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path = blocker / "steps.jsonl"  # below a regular file: ENOTDIR
    fields, stderr = run(asan, "rows", 0, 500, env=driver_env(DFLASH_STEP_LOG=str(path)))
    assert (fields["enabled"], fields["dropped"]) == ("0", "0")
    assert len(stderr) == 1, stderr
    assert str(path) in stderr[0] and os.strerror(20) in stderr[0]
    assert sorted(tmp_path.iterdir()) == [blocker]


def test_file_size_limit_drops_lines_and_keeps_the_rest(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    limit, issued = 65536, 3000
    fields, stderr = run(asan, "fsize", limit, issued, env=driver_env(DFLASH_STEP_LOG=str(log)))
    assert fields["alive"] == "1"
    assert log.stat().st_size <= limit
    lines, tail = parse_lines(log)
    objs = [o for _, o in lines]
    assert 0 < len(objs) < issued
    assert [o["n"] for o in objs] == list(range(len(objs)))  # nothing before the limit is lost
    check_rows(objs)
    assert b"\n" not in tail and len(tail) < max(len(raw) for raw, _ in lines)
    assert int(fields["dropped"]) == issued - len(objs)
    assert len(stderr) == 1 and "dropped" in stderr[0], stderr


# --- the example engine and gate ----------------------------------------------------------------


def check_arm_against_log(arm: dict, log: Path, prompts: int, repeats: int) -> None:
    """Every leg's engine counters equal the log lines inside its generate window."""
    legs = arm["legs"]
    assert len(legs) == prompts * repeats
    warm = [leg for leg in legs if leg["run"] > 1]
    assert arm["warm_legs"] == len(warm)
    assert arm["cold_legs_discarded"] == len(legs) - len(warm)
    tok_s = sorted(leg["tok_s"] for leg in warm)
    assert arm["metrics"]["output_throughput_tok_s"] == pytest.approx(
        (tok_s[(len(tok_s) - 1) // 2] + tok_s[len(tok_s) // 2]) / 2
    )
    lines, tail = parse_lines(log)
    assert tail == b""
    objs = [o for _, o in lines]
    for writer in by_writer(objs).values():
        assert_no_gaps(writer)
    claimed = 0
    for leg in legs:
        start = round(leg["generate_start_unix"] * 1e6) * 1000
        end = round(leg["generate_end_unix"] * 1e6) * 1000
        assert leg["secs"] == pytest.approx((end - start) / 1e9, abs=2e-6)
        assert leg["tok_s"] == pytest.approx(leg["completion_tokens"] / leg["secs"], rel=1e-3)
        # The stamps are rounded to the microsecond: widen the window by half of one.
        rows = [o for o in objs if start - 500 <= o["t_ns"] <= end + 500 and o["leg"] == leg["leg"]]
        claimed += len(rows)
        counters = leg["engine_counters"]
        assert counters["rows"] == len(rows)
        assert counters["steps"] == sum(1 for o in rows if o["proposed"] > 0)
        assert counters["proposed"] == sum(o["proposed"] for o in rows)
        assert counters["accepted"] == sum(o["accepted"] for o in rows)
        assert counters["emitted"] == sum(o["emitted"] for o in rows)
        assert len({o["seq"] for o in rows}) == counters["requests"]
        assert leg["completion_tokens"] == counters["requests"] + counters["emitted"]
        assert counters["dropped"] == 0
    assert claimed == len(objs)  # legs never overlap and no line falls outside them
    assert any(o["emitted"] < o["accepted"] + 1 for o in objs)  # some steps cut by EOS/length


def test_gate_runs_the_toy_engine_end_to_end(toy_engine, tmp_path):
    gate = INSTRUMENT.parent / "examples" / "gate.py"
    command = [sys.executable, str(gate), "--prompts", "2", "--repeats", "3"]
    command += ["--concurrency", "4", "--seed", "3", "--out-dir", str(tmp_path)]
    subprocess.run([*command, "--engine", str(toy_engine)], check=True, env=driver_env())
    arm = orjson.loads((tmp_path / "our-arm.json").read_bytes())
    check_arm_against_log(arm, tmp_path / "steps.jsonl", prompts=2, repeats=3)
    assert {leg["leg"] for leg in arm["legs"]} == {"prompt-0", "prompt-1"}


def test_recorded_fixtures_are_consistent():
    fixtures = INSTRUMENT.parent / "fixtures"
    arm = orjson.loads((fixtures / "our-arm.json").read_bytes())
    check_arm_against_log(arm, fixtures / "steps.jsonl", prompts=3, repeats=3)
    assert (fixtures / "steps.jsonl").stat().st_size < 1_000_000


def test_fsync_mode_writes_the_same_lines(asan, tmp_path):
    log = tmp_path / "steps.jsonl"
    env = driver_env(DFLASH_STEP_LOG=str(log), DFLASH_STEP_LOG_FSYNC="1")
    fields, stderr = run(asan, "rows", 0, 200, env=env)
    assert (fields["dropped"], stderr) == ("0", [])
    lines, tail = parse_lines(log)
    assert tail == b"" and [o["n"] for _, o in lines] == list(range(200))
