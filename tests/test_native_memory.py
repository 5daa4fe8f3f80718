"""The native reader where memory is short: out of memory on a reading thread is reported,
never the end of the process, and a table that outgrows the room reserved for it folds the
same as one that did not."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import CPP, ROOT, compile_cxx
from strategies import BASE_US
from strategies import ONE_SECOND_LEG as LEG
from test_native import assert_both_ways_agree, lists, raw_read, raw_times

from fold import _native  # noqa: F401  fails here when the extension was not built
from fold.inputs.arm import arm_from_document


def test_out_of_memory_on_a_reading_thread_is_reported_not_fatal(tmp_path: Path) -> None:
    program = tmp_path / "export_out_of_memory"
    include = sysconfig.get_paths()["include"]
    compile_cxx(
        ["-std=c++17", "-O1", "-pthread", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
         f"-I{ROOT / 'fold'}", f"-I{include}", str(CPP / "export_out_of_memory.cc"),
         "-o", str(program)]
    )  # fmt: skip
    # A 256 KiB stack lets the second range's thread start under the address-space limit the
    # program sets; its counters (1.6 MB) then cannot be had.
    # Not under a sanitizer the suite itself may be run with: its allocator runs out first.
    environment = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    run = subprocess.run(
        ["bash", "-c", f"ulimit -s 256 && exec {program}"],
        capture_output=True,
        text=True,
        env=environment,
    )
    assert (run.returncode, run.stdout.strip()) == (0, "out of memory, reported"), run.stderr


def test_placed_lines_pages_go_back_and_every_line_lands(tmp_path: Path) -> None:
    """The pages the export hands back are exactly the used-up whole pages of a line array
    (mincore), two merged ranges of several passes each, on threads of their own whatever
    the cores, put every line at its place with its time (kept as 32-bit intervals: their
    edges, and times kept whole, included), the requests' columns take every entry's values
    at its rank before its page goes, with the rows by position and length, a file read on
    two ranges leaves the merged one without its own tables, and the rows are cut into
    threads' shares by their work (tests/cpp/used_pages.cc; the merged read needs two cores)."""
    program = tmp_path / "used_pages"
    include = sysconfig.get_paths()["include"]
    compile_cxx(
        ["-std=c++17", "-O1", "-pthread", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
         f"-I{ROOT / 'fold'}", f"-I{include}", str(CPP / "used_pages.cc"), "-o", str(program)]
    )  # fmt: skip
    run = subprocess.run([str(program)], capture_output=True, text=True)
    if run.stdout.strip() == "pages and lines as placed; one core: no merged read":
        pytest.skip("all but the merged read passed: a read on two ranges needs two cores")
    assert (run.returncode, run.stdout.strip()) == (0, "pages and lines as placed"), run.stdout


_HEAP_PROBE = """
import ctypes
from fold import _native

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]

def anonymous_mib():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024

before = anonymous_mib()
# 96 MiB in blocks below glibc's mmap threshold, then one block above them that holds the
# heap's top: freed, the 96 MiB are free memory in the middle of the heap, which glibc keeps.
blocks = [libc.malloc(64 * 1024) for _ in range(1536)]
for block in blocks:
    ctypes.memset(block, 1, 64 * 1024)
top = libc.malloc(64)
for block in blocks:
    libc.free(block)
kept = anonymous_mib() - before
_native.release_memory()
print(kept, anonymous_mib() - before)
libc.free(top)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_release_memory_hands_freed_heap_memory_back() -> None:
    """glibc keeps freed memory inside its heap for its own next allocations; the fold's
    stages after the read allocate through polars instead, so the read and the letting go of
    the lines end with release_memory, which hands it back."""
    run = subprocess.run(
        [sys.executable, "-c", _HEAP_PROBE], capture_output=True, text=True, check=True
    )
    kept, after = map(int, run.stdout.split())
    assert kept >= 64 and after <= 8, (kept, after)


def test_a_table_past_its_reserved_room_folds_the_same(tmp_path: Path) -> None:
    """Each line its own request: the reading threads' tables hold more requests than the
    room they reserve (one per 640 bytes), and the first grows past it again when the others
    merge into it. Read on many small ranges, and on two whose second (20,000 requests) hands
    its table's pages back in passes of 2^14 entries as it is merged (fold_pass.h merge_into):
    a page handed back before its entries were merged would read as zeros."""
    arm = arm_from_document([LEG])
    rows = [
        json.dumps(
            {"v": 1, "w": f"{i % 3:016x}", "n": 0, "t_ns": (BASE_US + 10) * 1000 + i,
             "pid": 1, "seq": i, "proposed": 3, "accepted": i % 4},
            separators=(",", ":"),
        ).encode() + b"\n"
        for i in range(40_000)
    ]  # fmt: skip
    log = tmp_path / "steps.jsonl"
    data = b"".join(rows)
    log.write_bytes(data)
    whole = raw_read(log, arm, bytes_per_thread=1 << 30)
    assert whole["attributed"] == 40_000
    # A column's capsule is taken once: polars moves its buffers out.
    whole_times = raw_times(whole)
    whole_rows = {name: lists(whole, name) for name in BUCKET_COLUMNS}
    assert len(whole_times) == 40_000
    for split in (
        raw_read(log, arm, block=4096, bytes_per_thread=1),
        raw_read(log, arm, bytes_per_thread=len(data) // 2 + 1),
    ):
        for key in ("lines", "folded", "attributed", "unattributed", "torn", "bad", "events"):
            assert split[key] == whole[key], key
        assert raw_times(split) == whole_times
        # Each request's rows by output position: one bucket row a request here.
        for name in BUCKET_COLUMNS:
            assert lists(split, name) == whole_rows[name], name
    assert_both_ways_agree(arm, [str(log)])


BUCKET_COLUMNS = ("bucket_row", "bucket_steps", "bucket_proposed", "bucket_accepted")


def test_lines_placed_in_many_passes_keep_every_value(tmp_path: Path) -> None:
    """The export hands the line arrays' pages back as their lines are placed (a pass at a
    time, step_export.h place_lines): every range here has several passes' lines, and every
    request's intervals must still give each of its lines' time. A page handed back before its
    lines were placed would read as zeros."""
    arm = arm_from_document([LEG])
    count = 300_000
    expected: dict[tuple[int, int], list[int]] = {}
    rows = []
    for i in range(count):
        writer, seq = i % 3, (i // 7) % 5
        t_ns = (BASE_US + 10) * 1000 + i
        proposed, accepted = 1 + i % 5, i % 2
        rows.append(
            json.dumps(
                {"v": 1, "w": f"{writer:016x}", "n": i, "t_ns": t_ns, "pid": 1, "seq": seq,
                 "proposed": proposed, "accepted": accepted},
                separators=(",", ":"),
            ).encode() + b"\n"
        )  # fmt: skip
        expected.setdefault((writer, seq), []).append(t_ns)
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(rows))
    raw = raw_read(log, arm, bytes_per_thread=1 << 20)
    assert raw["attributed"] == count
    order = sorted(expected)  # requests in key order: writer, then seq
    assert raw_times(raw) == [expected[key] for key in order]


def test_a_fold_hands_freed_memory_back_after_the_read_and_the_lines(monkeypatch) -> None:
    """The fold calls release_memory where what it freed is freed: in each read, once the
    pass's replaced columns are dropped, and after it (whichever way the read ends); after the
    cadence; and once its lines are let go. Here one read: four calls."""
    import fold._native
    from fold.api import fold_acceptance

    calls = []
    real = fold._native.release_memory
    monkeypatch.setattr(fold._native, "release_memory", lambda: calls.append(1) or real())
    fold_acceptance(ROOT / "fixtures" / "our-arm.json", [str(ROOT / "fixtures" / "steps.jsonl")])
    assert len(calls) == 4
