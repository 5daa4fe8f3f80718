"""A follow of any log, appended in any pieces, is the one-shot fold of the whole log.

``tests/test_follow.py`` holds the follower to the one-shot fold on logs chosen by hand; this
draws the logs the other property tests draw (writers interleaved, lines out of time order,
torn fragments, bad lines), cuts each at drawn offsets (inside lines too), and follows it with
a poll after each piece, with either reader and at a block of a hundred bytes or the
follower's own. The outcome is compared whole: the document's JSON, or the error's type and
message. A follow that read lines twice across polls refused a valid log here before it
was fixed (663e851); ``fuzz/follow.py`` throws raw bytes at the same comparison.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import event, example, given
from hypothesis import strategies as st
from native_switch import native_switch
from strategies import fold_cases, scaled

from fold.api import fold_acceptance
from fold.errors import FoldError
from fold.folding.follow import DEFAULT_FOLLOW_BLOCK_BYTES, Follower
from fold.inputs.steplog import format_line


def _outcome(fold: Any) -> tuple[str, Any]:
    try:
        return "json", fold().to_json()
    except FoldError as error:
        return "error", (type(error).__name__, str(error))


def _follow_and_fold(
    arm: Path, log: Path, data: bytes, cuts: list[int], native: bool, block: int, **options: Any
) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """(followed, whole): the outcome of a follow of ``data`` appended to ``log`` in pieces cut
    at ``cuts``, a poll after each, and of the one-shot fold of the whole of it."""
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    log.write_bytes(data)
    with native_switch(native):
        whole = _outcome(
            lambda: fold_acceptance(str(arm), [str(log)], block_bytes=block, resamples=0, **options)
        )

        def follow() -> Any:
            log.write_bytes(b"")
            follower = Follower(str(arm), [str(log)], block_bytes=block, resamples=0, **options)
            for piece in pieces:
                with open(log, "ab") as handle:
                    handle.write(piece)
                follower.poll()
            return follower.finish()

        return _outcome(follow), whole


@scaled(0.25)
@given(
    fold_cases(),
    st.lists(st.floats(0, 1, exclude_max=True), max_size=5),
    st.booleans(),
    st.sampled_from([97, DEFAULT_FOLLOW_BLOCK_BYTES]),
)
def test_a_log_followed_in_pieces_folds_as_the_whole_log(
    tmp_path_factory, case, cut_at, native, block
):
    directory = tmp_path_factory.mktemp("pieces")
    arm = directory / "arm.json"
    arm.write_text(json.dumps(case.document))
    data = case.log.data()
    cuts = sorted({int(place * len(data)) for place in cut_at} - {0})
    options = {"predicate": case.predicate.sql, "skip_bad_lines": case.skip_bad_lines}
    followed, whole = _follow_and_fold(
        arm, directory / "steps.jsonl", data, cuts, native, block, **options
    )
    event(f"{len(cuts) + 1} pieces, outcome: {whole[0]}")
    assert followed == whole


BASE_S = 1_800_000_000


@st.composite
def interleaved_logs(draw: st.DrawFn) -> tuple[list[bytes], list[int]]:
    """Lines of a few writers' requests, all in the warm leg of the test's arm: each request's
    lines in time order but, in about half of them, one line written before the one it came
    after (its lines out of time order, which a fold reads back); the requests' lines
    interleaved as a server interleaves them; cuts between lines."""
    requests: list[list[bytes]] = []
    for writer in range(draw(st.integers(1, 3))):
        w = f"{writer + 0xA1:016x}"
        for seq in range(draw(st.integers(1, 3))):
            count = draw(st.integers(1, 5))
            times = sorted(draw(st.lists(st.integers(0, 4 * 10**9), min_size=count,
                                         max_size=count)))  # fmt: skip
            if count > 1 and draw(st.booleans()):
                at = draw(st.integers(1, count - 1))
                times[at - 1], times[at] = times[at], times[at - 1]
            accepted = [draw(st.integers(0, 3)) for _ in times]
            start = (BASE_S + 10) * 10**9
            requests.append(
                [
                    format_line(
                        writer_id=w, n=0, t_ns=start + t, pid=7, seq=seq, proposed=3, accepted=a
                    )
                    for t, a in zip(times, accepted, strict=True)
                ]
            )
    # A writer's n counts its lines in the order it wrote them: numbered once interleaved.
    order = draw(st.permutations([index for index, lines in enumerate(requests) for _ in lines]))
    taken = [0] * len(requests)
    written: dict[bytes, int] = {}
    lines = []
    for index in order:
        line = requests[index][taken[index]]
        taken[index] += 1
        writer = line[line.index(b'"w":"') + 5 :][:16]
        n = written.get(writer, 0)
        written[writer] = n + 1
        lines.append(line.replace(b'"n":0,', b'"n":%d,' % n, 1))
    ends = list(range(1, len(lines)))
    cut_after = draw(st.lists(st.sampled_from(ends), max_size=4, unique=True)) if ends else []
    return lines, sorted(cut_after)


def _leg(run: int, start: int) -> dict[str, Any]:
    return {"run": run, "finish_reason": "length", "prompt_tokens": 5, "completion_tokens": 100,
            "secs": 5.0, "tok_s": 20.0, "generate_start_unix": start,
            "generate_end_unix": start + 5}  # fmt: skip


def _step(writer: int, n: int, seconds: float, seq: int) -> bytes:
    t_ns = (BASE_S + 10) * 10**9 + round(seconds * 10**9)
    w = f"{writer:016x}"
    return format_line(writer_id=w, n=n, t_ns=t_ns, pid=7, seq=seq, proposed=3, accepted=n % 4)


# Two requests, each with a line before the one it came after, the second poll's read-back
# group starting among the first request's lines held from the first poll (663e851).
READ_BACK_TWICE = (
    [_step(0xA1, 0, 3.0, 1), _step(0xA2, 0, 4.0, 0), _step(0xA1, 1, 2.0, 1),
     _step(0xA2, 1, 4.5, 0), _step(0xA2, 2, 4.4, 0), _step(0xA1, 2, 2.1, 1)],
    [3],
)  # fmt: skip


@scaled(0.5)
@given(interleaved_logs(), st.booleans(), st.sampled_from([97, DEFAULT_FOLLOW_BLOCK_BYTES]))
@example(READ_BACK_TWICE, True, DEFAULT_FOLLOW_BLOCK_BYTES)
def test_requests_out_of_order_followed_across_polls_fold_as_the_whole_log(
    tmp_path_factory, drawn, native, block
):
    """The shape the fold reads back (a request's lines out of time order) spread over polls:
    the drawn logs above are mostly other shapes, and a follow that took a request's held
    lines a second time when a later read-back group's bytes covered them went unseen there."""
    lines, cut_after = drawn
    directory = tmp_path_factory.mktemp("interleaved")
    arm = directory / "arm.json"
    arm.write_text(json.dumps({"legs": [_leg(1, BASE_S), _leg(2, BASE_S + 10)]}))
    data = b"".join(lines)
    cuts = [len(b"".join(lines[:after])) for after in cut_after]
    followed, whole = _follow_and_fold(arm, directory / "steps.jsonl", data, cuts, native, block)
    event(f"{len(cuts) + 1} pieces, outcome: {whole[0]}")
    assert followed == whole
