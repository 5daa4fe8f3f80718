"""Each request's rows by output position and draft length as the native pass folds them while
it reads (no line kept), against the definitions worked out here from the lines written, and
against the polars reference: on one thread or many (a request a later range continues is read
again), in pieces that go on from each other (a follower's reads, with seeds), across files, out
of time order, with ties in time, string ids and deferred lines.

The definitions (``docs/per-request.md``, ``docs/another-k.md``): a request's lines in
(t_ns, counts) order; a drafted line's bucket is the bit length of the tokens emitted before it
(emitted, else accepted + 1) less 7, at least 0; the interval from the previous line goes to a
drafted line's proposed (lines of one time in proposed order).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from native_switch import native_switch
from strategies import BASE_US

import fold.folding.line_rows
import fold.folding.logfile
import fold.folding.native
import fold.folding.native_rows
from fold import _native  # fails here when the extension was not built
from fold.api import LogFold
from fold.errors import InputError
from fold.folding.accumulate import PartialFold
from fold.folding.line_rows import LineRows, draft_counts, line_rows
from fold.folding.logfile import Legs, LogFile
from fold.folding.merge import merge_all
from fold.folding.native import NativeLegs
from fold.inputs.arm import arm_from_document

WRITERS = ["00000000000000a1", "00000000000000b2", "00000000000000c3"]
LEG = {"run": 2, "secs": 1.0, "tok_s": 100.0, "prompt_tokens": 10, "finish_reason": "stop"}
TOKEN_BITS = 17


def legs(count: int = 2) -> list[dict[str, Any]]:
    return [
        {**LEG, "completion_tokens": 20, "generate_start_unix": (BASE_US + 2_000_000 * k) / 1e6,
         "generate_end_unix": (BASE_US + 2_000_000 * k + 1_000_000) / 1e6}
        for k in range(count)
    ]  # fmt: skip


def t_ns(leg: int, offset: int) -> int:
    return (BASE_US + 2_000_000 * leg) * 1000 + 1000 + offset


# A line: (writer, request id, leg, time offset, proposed, accepted, emitted or None).
Line = tuple[str, object, int, int, int, int, int | None]


@st.composite
def request_lines(draw: st.DrawFn) -> list[Line]:
    writer = draw(st.sampled_from(WRITERS))
    request = draw(st.integers(0, 3) | st.sampled_from(["r", "s", "é"]))
    leg = draw(st.integers(0, 1))
    count = draw(st.integers(1, 30))
    # Times mostly rising, many ties (their order is the definitions'), some far apart.
    gaps = draw(
        st.lists(st.sampled_from([0, 0, 1, 7, 1000, 50_000]), min_size=count, max_size=count)
    )
    lines = []
    at = draw(st.integers(0, 1000))
    for gap in gaps:
        at += gap
        proposed = draw(st.sampled_from([0, 2, 4, 4, 4, 7]))
        accepted = draw(st.integers(0, proposed))
        # Large emitted counts reach the buckets past 128 within a few lines.
        emitted = draw(st.none() | st.integers(0, 8) | st.integers(100, 300))
        lines.append((writer, request, leg, at, proposed, accepted, emitted))
    return lines


@st.composite
def logs(draw: st.DrawFn) -> list[Line]:
    """Requests' lines interleaved as writers append them; some requests' lines shuffled (out of
    time order), some lines repeated in time."""
    requests = draw(st.lists(request_lines(), min_size=1, max_size=6))
    order: list[Line] = []
    for lines in requests:
        if draw(st.booleans()) and len(lines) > 1 and draw(st.integers(0, 4)) == 0:
            lines = draw(st.permutations(lines))
        order.extend(lines)
    # Writers interleave: a stable shuffle keyed by a drawn rank keeps each request's order.
    ranks = draw(st.lists(st.integers(0, 5), min_size=len(order), max_size=len(order)))
    return [line for _, _, line in sorted(zip(ranks, range(len(order)), order, strict=True))]


def encoded(line: Line, n: int) -> bytes:
    writer, request, leg, offset, proposed, accepted, emitted = line
    row: dict[str, Any] = {
        "v": 1, "w": writer, "n": n, "t_ns": t_ns(leg, offset), "pid": 1, "seq": request,
        "proposed": proposed, "accepted": accepted,
    }  # fmt: skip
    if emitted is not None:
        row["emitted"] = emitted
    return json.dumps(row, ensure_ascii=False).encode() + b"\n"


def by_definition(lines: list[Line]) -> tuple[set[tuple], set[tuple]]:
    """(request, bucket, S, P, A) and (request, length, intervals, ns) of every request."""
    requests: dict[tuple, list[tuple[int, int, int, int, int | None]]] = defaultdict(list)
    for writer, request, leg, offset, proposed, accepted, emitted in lines:
        requests[(leg, writer, request)].append(
            (t_ns(leg, offset), proposed, accepted, emitted)  # type: ignore[arg-type]
        )
    buckets: dict[tuple, list[int]] = {}
    lengths: dict[tuple, list[int]] = {}
    for key, steps in requests.items():
        packed = [
            (t, p + (a << TOKEN_BITS) + ((0 if e is None else e + 1) << 2 * TOKEN_BITS), p, a, e)
            for t, p, a, e in steps
        ]
        before = 0
        for _, _, p, a, e in sorted(packed):
            if p:
                found = buckets.setdefault((*key, max(0, before.bit_length() - 7)), [0, 0, 0])
                found[0] += 1
                found[1] += p
                found[2] += a
            before += a + 1 if e is None else e
        in_time = sorted((t, p) for t, _, p, _, _ in packed)
        for (earlier, _), (later, p) in pairwise(in_time):
            if p:
                found = lengths.setdefault((*key, p), [0, 0])
                found[0] += 1
                found[1] += later - earlier
    return (
        {(*key, *sums) for key, sums in buckets.items()},
        {(*key, *sums) for key, sums in lengths.items()},
    )


def keyed(rows: LineRows, step_times: pl.DataFrame) -> tuple[set[tuple], set[tuple]]:
    keys = [
        (row["leg"], row["w"], row["seq"] if row["sid"] is None else row["sid"])
        for row in step_times.iter_rows(named=True)
    ]
    return (
        {(*keys[r], b, s, p, a) for r, b, s, p, a in rows.buckets.iter_rows()},
        {(*keys[r], k, i, ns) for r, k, i, ns in rows.lengths.iter_rows()},
    )


def folded(paths: list[str], *, native: bool = True) -> tuple[PartialFold, NativeLegs]:
    """The partial fold of the files over ``legs()`` (a ``LogFold``'s), and the legs as the
    pass takes them."""
    arm = arm_from_document(legs())
    with native_switch(native):
        fold = LogFold(arm, tally_drafts=True)
        for path in paths:
            fold.add_file(path)
    return fold.partial, Legs.of(arm.legs).native


def folded_rows(paths: list[str], *, native: bool) -> tuple[set[tuple], set[tuple]]:
    partial, index = folded(paths, native=native)
    with native_switch(native):
        rows = line_rows(partial, index)
    return keyed(rows, partial.step_times)


def write(path: Path, lines: list[Line]) -> str:
    path.write_bytes(b"".join(encoded(line, n) for n, line in enumerate(lines)))
    return str(path)


@settings(max_examples=150, deadline=None)
@given(logs())
def test_one_file_both_ways_against_the_definition(tmp_path_factory, lines):
    log = write(tmp_path_factory.mktemp("rows") / "steps.jsonl", lines)
    wanted = by_definition(lines)
    assert folded_rows([log], native=True) == wanted
    assert folded_rows([log], native=False) == wanted
    # Requests read back each on their own (however close their bytes): the same rows.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fold.folding.line_rows, "READ_BACK_GAP", -1)
        assert folded_rows([log], native=True) == wanted


@settings(max_examples=100, deadline=None)
@given(logs(), st.integers(1, 60), st.sampled_from([64, 200, 1000]))
def test_ranges_on_many_threads_fold_the_same_rows(tmp_path_factory, lines, threads, block):
    """A range continued by a later one is read again from where it left the request: the rows
    are those of one thread, whatever the cut; the drafted lines' counts add up across the
    ranges to one thread's."""
    log = write(tmp_path_factory.mktemp("rows") / "steps.jsonl", lines)
    arm = arm_from_document(legs())
    arguments = Legs.of(arm.legs).native.arguments

    def rows(**options: int) -> list[Any]:
        raw = _native.fold_range(
            log, 0, -1, False, 0, *arguments, 512, tally_drafts=True, **options
        )
        names = ("bucket_row", "bucket", "bucket_steps", "bucket_proposed", "bucket_accepted",
                 "length_row", "length", "length_intervals", "length_ns", "unordered")  # fmt: skip
        column = fold.folding.native_rows.series
        parts = ("row", "proposed", "accepted", "count")
        tally = zip(*(column(name, raw[f"tally_{name}"]).to_list() for name in parts), strict=True)
        return [*(column(name, raw[name]).to_list() for name in names), sorted(tally)]

    one = rows()
    assert rows(block=block, bytes_per_thread=1, threads=min(threads, 8)) == one


@settings(max_examples=80, deadline=None)
@given(logs(), st.integers(1, 40))
def test_a_file_read_in_pieces_goes_on_from_each_piece(tmp_path_factory, lines, chunk):
    """A follower's reads: each goes on from where the last left its requests, so the pieces'
    rows add up to the whole file's, and a file whose lines are in order is never read again."""
    log = write(tmp_path_factory.mktemp("rows") / "steps.jsonl", lines)
    arm = arm_from_document(legs())
    index = Legs.of(arm.legs)
    pieces = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fold.folding.logfile, "FOLLOW_CHUNK_BYTES", chunk * 40)
        reader = LogFile(log, keep_seeds=True)
        for partial, _ in reader.read_available(index, want_steps=True):
            pieces.append(partial)
        reader.finish()
    partial = merge_all(pieces)
    spans = partial.line_spans.group_by("request").agg(
        pl.col("unseeded").sum(), pl.col("unordered").any()
    )
    assert (spans["unseeded"] == 1).all()  # every piece after a request's first went on
    if not spans["unordered"].any():
        with pytest.MonkeyPatch.context() as patch:

            def no_reading(*_: Any, **__: Any) -> None:
                raise AssertionError("a line was read again")

            patch.setattr(fold.folding.native, "collect_lines", no_reading)
            rows = line_rows(partial, index.native)
    else:
        rows = line_rows(partial, index.native)
    assert keyed(rows, partial.step_times) == by_definition(lines)


@settings(max_examples=80, deadline=None)
@given(logs(), st.data())
def test_requests_split_across_files_are_read_back_from_each(tmp_path_factory, lines, data):
    """Lines of one request in two files: neither read holds all of it, so its rows are made
    from its lines read back from both, in order."""
    cut = data.draw(st.integers(0, len(lines)), label="cut")
    folder = tmp_path_factory.mktemp("rows")
    first = write(folder / "a.jsonl", lines[:cut])
    second = write(folder / "b.jsonl", lines[cut:])
    wanted = by_definition(lines)
    assert folded_rows([first, second], native=True) == wanted
    assert folded_rows([second, first], native=True) == wanted
    assert folded_rows([first, second], native=False) == wanted


def test_a_deferred_line_in_a_request_is_held_and_the_rest_read_back(tmp_path: Path):
    """A line only the exact parser may judge (a duplicate key) is folded by the polars
    reference beside the pass: its request is made from both, in order."""
    lines: list[Line] = [(WRITERS[0], 1, 0, k * 10, 4, k % 5, None) for k in range(5)]
    body = [encoded(line, n) for n, line in enumerate(lines)]
    body[2] = body[2].replace(b'"accepted": 2', b'"accepted": 0, "accepted": 2')
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(body))
    partial, index = folded([str(log)])
    assert partial.held_lines.height == 1  # the deferred line's request
    assert keyed(line_rows(partial, index), partial.step_times) == by_definition(lines)


def test_a_log_changed_before_its_lines_are_read_again_is_refused(tmp_path: Path):
    """A request out of time order is read again after the read; if the file no longer holds
    the lines first read there (rewritten in between), the fold is refused, naming the file,
    not made from other lines."""
    lines: list[Line] = [(WRITERS[0], 1, 0, offset, 4, 2, None) for offset in (50, 10, 30)]
    log = tmp_path / "steps.jsonl"
    write(log, lines)
    arm = arm_from_document(legs())
    index = Legs.of(arm.legs)
    with native_switch(True):  # one read, as LogFold's: its partial before the lines are held
        partial = merge_all([piece for piece, _ in LogFile(str(log)).read_available(index)])
    assert partial.line_spans["unordered"].to_list() == [True]
    write(log, [(WRITERS[0], 1, 0, offset, 4, 2, None) for offset in (51, 10, 30)])
    with pytest.raises(InputError, match=f"{log}: the step log changed while it was read"):
        line_rows(partial, index.native)
    write(log, lines)  # as it was: read again, the same lines
    rows = line_rows(partial, index.native)
    assert keyed(rows, partial.step_times) == by_definition(lines)


def test_lines_out_of_order_are_held_while_the_file_is_there(tmp_path: Path):
    """A fold that may go on (a ``LogFold``, a follower) reads back the lines of a request it
    could not fold in order as soon as it has read the file: the file removed afterwards, the
    fold is still made, and the same as the reference's."""
    lines: list[Line] = [
        *[(WRITERS[0], 1, 0, offset, 4, 2, 3) for offset in (50, 10, 30)],
        *[(WRITERS[1], 2, 0, offset, 4, 1, None) for offset in (5, 15, 25)],
    ]
    log = tmp_path / "steps.jsonl"
    write(log, lines)
    partial, index = folded([str(log)])
    # the request out of order is held (3 lines), the other stands as the pass folded it
    assert partial.held_lines["t_ns"].list.len().to_list() == [3]
    assert partial.line_spans.height == 1
    log.unlink()
    assert keyed(line_rows(partial, index), partial.step_times) == by_definition(lines)


def drafted_by_definition(lines: list[Line]) -> Counter:
    """Each request's drafted lines by (proposed, accepted), keyed by (leg, writer, request)."""
    return Counter(
        (leg, writer, request, proposed, accepted)
        for writer, request, leg, _, proposed, accepted, _ in lines
        if proposed > 0
    )


def counted(partial: PartialFold) -> Counter:
    keys = [
        (row["leg"], row["w"], row["seq"] if row["sid"] is None else row["sid"])
        for row in partial.step_times.iter_rows(named=True)
    ]
    found: Counter = Counter()
    for request, proposed, accepted, count in draft_counts(partial).iter_rows():
        found[(*keys[request], proposed, accepted)] += count
    return found


@settings(max_examples=100, deadline=None)
@given(logs(), st.integers(1, 3))
def test_drafted_lines_are_counted_as_they_are_read(tmp_path_factory, lines, files):
    """The steps by draft position take each request's drafted lines by (proposed, accepted):
    the pass counts them as it reads, and the lines it holds (out of order) are counted from
    their tokens, each line once, with the log split across files and the files gone after
    the read (nothing is read again); the reference reader, which holds every line, agrees."""
    folder = tmp_path_factory.mktemp("counts")
    paths = [write(folder / f"steps-{index}.jsonl", lines[index::files]) for index in range(files)]
    partials = [folded(paths, native=native)[0] for native in (True, False)]
    for path in paths:
        Path(path).unlink()
    for partial in partials:
        assert counted(partial) == drafted_by_definition(lines)


def test_counts_asked_of_a_fold_read_without_counting_are_refused(tmp_path: Path):
    """A fold read without counting its drafted lines cannot give them later: refused, since
    its counts would be short, never given short."""
    log = write(
        tmp_path / "steps.jsonl", [(WRITERS[0], 1, 0, offset, 4, 2, None) for offset in (10, 20)]
    )
    arm = arm_from_document(legs())
    with native_switch(True):
        fold = LogFold(arm)
        fold.add_file(log)
    with pytest.raises(ValueError, match="do not add up to each request's S"):
        draft_counts(fold.partial)
    with native_switch(True):
        fold = LogFold(arm, tally_drafts=True)
        fold.add_file(log)
    assert draft_counts(fold.partial).rows() == [(0, 4, 2, 2)]


@pytest.mark.parametrize("native", [True, False])
def test_a_followed_log_removed_stays_in_the_fold_out_of_order_lines_and_all(
    tmp_path: Path, native: bool
):
    """follow.py: a log removed while followed keeps what was read in the fold. Its request
    out of time order was read back and held when it was read, so the fold is the same as
    before the file went, both ways."""
    from fold.folding.follow import Follower

    lines: list[Line] = [
        *[(WRITERS[0], 1, leg, offset, 4, 2, 3) for leg in (0, 1) for offset in (50, 10, 30)],
        *[(WRITERS[1], 2, leg, offset, 4, 1, None) for leg in (0, 1) for offset in (5, 15)],
    ]
    log = tmp_path / "steps.jsonl"
    write(log, lines)
    arm_path = tmp_path / "arm.json"
    arm_path.write_text(json.dumps({"legs": legs()}))
    with native_switch(native):
        follower = Follower(str(arm_path), [str(log)])
        before = follower.poll()
        log.rename(tmp_path / "moved.jsonl")
        after = follower.poll()
        final = follower.finish()
    assert before.result is not None and after.result is not None, after.status
    assert after.result.to_json() == before.result.to_json()
    assert final.to_json()["warm"] == before.result.to_json()["warm"]


@given(st.lists(st.integers(0, 30), max_size=40))
def test_a_request_named_twice_is_seen_in_any_order(requests):
    """Whether every request is named once: the neighbours' comparison on rows in increasing
    order, a hash otherwise; either way the answer is the definition's."""
    series = pl.Series("request", requests, dtype=pl.UInt32)
    assert fold.folding.line_rows._each_once(series) == (len(set(requests)) == len(requests))
    ordered = pl.Series("request", sorted(requests), dtype=pl.UInt32)  # repeats side by side
    assert fold.folding.line_rows._each_once(ordered) == (len(set(requests)) == len(requests))
    assert fold.folding.line_rows._each_once(series.unique().sort())
