"""Following growing logs: the follower's final fold equals a one-shot fold of the same files.

Every test runs twice: with the native reader, and with the polars reader it falls back to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal
from rich.console import Console

from fold.api import fold_acceptance
from fold.cli import main
from fold.errors import InputError, RefusedError
from fold.folding.follow import Follower, FollowView, run_follow
from fold.inputs.steplog import format_line
from fold.present.live import live_view

BASE_S = 1_800_000_000


@pytest.fixture(autouse=True, params=["native", "polars"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("FOLD_ACCEPTANCE_NATIVE", "1" if request.param == "native" else "0")
    return request.param


NS = 1_000_000_000
LEG_SECONDS = 10


def leg(run: int, index: int, label: str | None = None) -> dict:
    start = BASE_S + LEG_SECONDS * index
    record = {
        "run": run,
        "finish_reason": "length",
        "prompt_tokens": 5,
        "completion_tokens": 100,
        "secs": 5.0,
        "tok_s": 20.0 + index,
        "generate_start_unix": start,
        "generate_end_unix": start + 5,
    }
    if label is not None:
        record["leg"] = label
    return record


def write_arm(path: Path, legs: int = 3) -> str:
    path.write_text(json.dumps({"legs": [leg(i + 1, i, f"L{i}") for i in range(legs)]}))
    return str(path)


def line(i: int, writer: str = "00000000000000aa", leg_index: int | None = None) -> bytes:
    """Step ``i`` of a writer: legs of 20 steps, 0.1 s apart, in each leg's window."""
    index = i // 20 if leg_index is None else leg_index
    t_ns = (BASE_S + LEG_SECONDS * index) * NS + (i % 20) * NS // 10 + 1_000
    proposed = 4 if i % 7 else 0
    accepted = (i * 3) % 5 if proposed else 0
    return format_line(
        writer_id=writer,
        n=i,
        t_ns=t_ns,
        pid=7,
        seq=i // 5,
        proposed=proposed,
        accepted=accepted,
        emitted=accepted + 1,
        leg=f"L{index}",
    )


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def one_shot(arm: str, logs: list[str]) -> dict:
    return fold_acceptance(arm, logs).to_json()


def test_writer_process_appending_while_following(tmp_path):
    log = tmp_path / "steps.jsonl"
    arm = write_arm(tmp_path / "arm.json")
    writer = textwrap.dedent(
        f"""
        import os, sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_follow import line
        fd = os.open({str(log)!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        for i in range(60):
            data = line(i)
            if i % 9 == 4:  # a line written in two parts: the follower must hold the first
                os.write(fd, data[:30]); time.sleep(0.02); os.write(fd, data[30:])
            else:
                os.write(fd, data)
            time.sleep(0.005)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", writer])
    follower = Follower(arm, [str(log)], block_bytes=256)
    views: list[FollowView] = []
    try:
        while process.poll() is None:
            views.append(follower.poll())
            assert views[-1].status is None or "not foldable" in views[-1].status
    finally:
        process.wait(timeout=30)
    outcome = run_follow(follower, interval=0.1, idle_seconds=0.3)
    assert outcome.reason == "idle"
    assert outcome.result.to_json() == one_shot(arm, [str(log)])
    assert outcome.result.fold.torn_lines == 0
    assert outcome.result.legs[0]["steps"] > 0
    # Every intermediate view held unfinished lines back instead of counting them torn.
    assert all(view.result is None or view.result.fold.torn_lines == 0 for view in views), (
        "a partial line was counted as torn while the writer ran"
    )


def test_requests_out_of_order_across_polls_fold_as_one_read(tmp_path):
    """Two requests, each with a line earlier than the one before it: the first's lines are
    read back and held after the first poll; after the second, the other's span starts among
    the first's held lines and both are read back together. Each takes only its own span's
    lines from those bytes (the first's held ones were taken twice, and the follow refused a
    valid log as changed while read), and the fold is the one-shot fold."""
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"")
    arm = write_arm(tmp_path / "arm.json", legs=2)

    def step(writer: str, n: int, seconds: float, seq: int) -> bytes:
        """A step ``seconds`` into the second leg's window (the first leg, cold, has none)."""
        t_ns = (BASE_S + LEG_SECONDS) * NS + round(seconds * NS)
        return format_line(
            writer_id=writer, n=n, t_ns=t_ns, pid=7, seq=seq, proposed=3, accepted=n % 4
        )

    first, other = "00000000000000a1", "00000000000000a2"
    polls = [
        step(first, 0, 3.0, 1) + step(other, 0, 4.0, 0) + step(first, 1, 2.0, 1),
        step(other, 1, 4.5, 0) + step(other, 2, 4.4, 0) + step(first, 2, 2.1, 1),
    ]
    follower = Follower(arm, [str(log)], sums=True)
    for piece in polls:
        append(log, piece)
        follower.poll()
    found = follower.finish()
    assert found.to_json() == one_shot(arm, [str(log)])
    # The steps by draft position are counted from the same lines read back (the sums file's).
    whole = fold_acceptance(arm, [str(log)], sums=True)
    assert_frame_equal(found.fold.sums_table(), whole.fold.sums_table())


def test_partial_line_is_held_then_counted_once_whole(tmp_path):
    log = tmp_path / "steps.jsonl"
    arm = write_arm(tmp_path / "arm.json")
    log.write_bytes(line(0) + line(1)[:25])
    follower = Follower(arm, [str(log)])
    view = follower.poll()
    assert view.lines == 1
    assert view.held_bytes == 25
    assert view.result is None and "warm leg" in view.status  # legs 1, 2 have no steps yet
    assert follower.poll().new_bytes == 0
    append(log, line(1)[25:] + b"".join(line(i) for i in range(2, 59)))
    view = follower.poll()
    assert (view.lines, view.held_bytes) == (59, 0)
    assert view.result is not None and view.result.fold.torn_lines == 0
    append(log, line(59)[:10])  # the writer dies mid-line: torn only at the end
    assert follower.poll().result.fold.torn_lines == 0
    result = follower.finish()
    assert result.fold.torn_lines == 1
    assert result.to_json() == one_shot(arm, [str(log)])


def test_torn_lines_glued_to_the_next_before_the_record_appears(tmp_path):
    """A torn fragment glued to the line after it, read while there is no record yet (the
    follower reads without legs): the line goes to the exact parser, which keeps it whole and
    counts the fragment. Without legs, its fold failed as "this is a bug"; it is held, and
    folded over the legs once the record appears."""
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(line(i) for i in range(20)) + line(20)[:12] + line(21))
    follower = Follower(str(tmp_path / "arm.json"), [str(log)])
    view = follower.poll()
    assert view.result is None and "waiting for" in view.status
    assert view.lines == 21
    arm = write_arm(tmp_path / "arm.json")
    append(log, b"".join(line(i) for i in range(22, 60)))
    result = follower.finish()
    assert result.fold.torn_lines == 1
    assert result.to_json() == one_shot(arm, [str(log)])


def test_truncated_file_is_read_again_with_a_notice(tmp_path):
    log = tmp_path / "steps.jsonl"
    arm = write_arm(tmp_path / "arm.json")
    log.write_bytes(b"".join(line(i) for i in range(40)))
    follower = Follower(arm, [str(log)])
    assert follower.poll().lines == 40
    log.write_bytes(b"".join(line(i) for i in range(10)))  # truncated in place, same inode
    view = follower.poll()
    assert any("truncated" in notice.message for notice in view.notices)
    assert view.lines == 10
    append(log, b"".join(line(i) for i in range(10, 60)))
    assert follower.finish().to_json() == one_shot(arm, [str(log)])


def test_replaced_file_is_read_again_with_a_notice(tmp_path):
    log = tmp_path / "steps.jsonl"
    arm = write_arm(tmp_path / "arm.json")
    log.write_bytes(b"".join(line(i) for i in range(30)))
    follower = Follower(arm, [str(log)])
    follower.poll()
    fresh = tmp_path / "fresh.jsonl"
    fresh.write_bytes(b"".join(line(i, writer="00000000000000bb") for i in range(50)))
    os.replace(fresh, log)  # larger than before: only the inode tells
    view = follower.poll()
    assert any("replaced" in notice.message for notice in view.notices)
    assert view.lines == 50
    assert follower.finish().to_json() == one_shot(arm, [str(log)])


def test_glob_picks_up_files_that_appear_later(tmp_path):
    arm = write_arm(tmp_path / "arm.json")
    pattern = str(tmp_path / "host-*.jsonl")
    follower = Follower(arm, [pattern])
    assert follower.poll().files == {}
    (tmp_path / "host-b.jsonl").write_bytes(b"".join(line(i) for i in range(25)))
    follower.poll()
    (tmp_path / "host-a.jsonl").write_bytes(
        b"".join(line(i, writer="00000000000000cc") for i in range(60))
    )
    view = follower.poll()
    assert [notice.path for notice in view.notices] == [str(tmp_path / "host-a.jsonl")]
    assert view.lines == 85
    assert follower.finish().to_json() == one_shot(arm, [pattern])


def test_provisional_groups_until_the_record_appears(tmp_path):
    log = tmp_path / "steps.jsonl"
    arm_path = tmp_path / "our-arm.json"
    log.write_bytes(b"".join(line(i) for i in range(60)))
    follower = Follower(str(arm_path), [str(log)])
    view = follower.poll()
    assert view.result is None
    assert "waiting for" in view.status
    groups = {group.label: group for group in view.provisional}
    assert sorted(groups) == ["L0", "L1", "L2"]
    expected = [line(i) for i in range(20)]
    proposed = sum(json.loads(raw)["proposed"] for raw in expected)
    accepted = sum(json.loads(raw)["accepted"] for raw in expected)
    counts = groups["L0"].counts
    assert (counts.proposed, counts.accepted) == (proposed, accepted)
    assert counts.steps == sum(1 for raw in expected if json.loads(raw)["proposed"])
    assert counts.accept_rate == pytest.approx(accepted / proposed)

    arm_path.write_text('{"legs": [')  # the gate is still writing it
    view = follower.poll()
    assert view.result is None and "not valid JSON" in view.status

    write_arm(arm_path)
    view = follower.poll()
    assert any("appeared" in notice.message for notice in view.notices)
    assert view.result is not None
    assert view.result.to_json() == one_shot(str(arm_path), [str(log)])
    assert follower.finish().to_json() == one_shot(str(arm_path), [str(log)])


def test_unlabelled_writer_is_split_at_pauses(tmp_path):
    log = tmp_path / "steps.jsonl"
    lines = [
        format_line(writer_id="00000000000000dd", n=i, t_ns=(BASE_S + 10 * (i // 4)) * NS + i,
                    pid=1, seq=i, proposed=3, accepted=i % 4)
        for i in range(12)
    ]  # fmt: skip
    log.write_bytes(b"".join(lines[:6]))
    follower = Follower(str(tmp_path / "none.json"), [str(log)], block_bytes=200)
    follower.poll()
    append(log, b"".join(lines[6:]))
    groups = follower.poll().provisional
    assert [(group.writer, group.part, group.lines) for group in groups] == [
        ("00000000000000dd", 0, 4),
        ("00000000000000dd", 1, 4),
        ("00000000000000dd", 2, 4),
    ]


def test_record_changes_are_reattributed(tmp_path):
    log = tmp_path / "steps.jsonl"
    arm_path = tmp_path / "arm.json"
    log.write_bytes(b"".join(line(i) for i in range(60)))
    write_arm(arm_path, legs=2)
    follower = Follower(str(arm_path), [str(log)])
    assert len(follower.poll().result.legs) == 2
    write_arm(arm_path, legs=3)
    view = follower.poll()
    assert any("changed" in notice.message for notice in view.notices)
    assert view.result.to_json() == one_shot(str(arm_path), [str(log)])


def test_the_final_fold_takes_the_record_as_it_is_at_the_end(tmp_path):
    """A record that turns refused while following keeps the last good legs for the live view,
    and the final fold is refused as a one-shot fold of it is (exit 1, before any line the read
    stopped at); one that no longer loads ends it with its own error (exit 2)."""
    log = tmp_path / "steps.jsonl"
    arm_path = tmp_path / "arm.json"
    log.write_bytes(b"".join(line(i) for i in range(60)))
    write_arm(arm_path, legs=3)
    follower = Follower(str(arm_path), [str(log)])
    assert follower.poll().result is not None
    cold = json.loads(arm_path.read_text())
    for each in cold["legs"]:
        each["run"] = 1
    arm_path.write_text(json.dumps(cold))
    view = follower.poll()
    assert view.result is not None and "showing its last good legs" in view.status
    with pytest.raises(RefusedError) as followed:
        follower.finish()
    with pytest.raises(RefusedError) as whole:
        one_shot(str(arm_path), [str(log)])
    assert str(followed.value) == str(whole.value) and "no leg is warm" in str(whole.value)
    arm_path.write_text('{"legs": [')
    follower.poll()
    with pytest.raises(InputError):
        follower.finish()


def test_a_refused_record_comes_before_a_line_the_read_stopped_at(tmp_path):
    """A record refused and a line the read refuses: the one-shot fold refuses the record
    before it reads a line, and so does the follow's final fold."""
    log = tmp_path / "steps.jsonl"
    arm_path = tmp_path / "arm.json"
    cold = {"legs": [leg(1, i, f"L{i}") for i in range(3)]}
    arm_path.write_text(json.dumps(cold))
    log.write_bytes(line(0) + b"not a step\n" + line(1))
    follower = Follower(str(arm_path), [str(log)])
    follower.poll()
    with pytest.raises(RefusedError) as followed:
        follower.finish()
    with pytest.raises(RefusedError) as whole:
        one_shot(str(arm_path), [str(log)])
    assert str(followed.value) == str(whole.value) and "no leg is warm" in str(whole.value)


def test_refusal_while_following_is_a_status_and_final_refusal_raises(tmp_path):
    log = tmp_path / "steps.jsonl"
    arm = write_arm(tmp_path / "arm.json")
    log.write_bytes(b"".join(line(i) for i in range(20)))  # only leg 0 (cold) has steps yet
    follower = Follower(arm, [str(log)])
    view = follower.poll()
    assert view.result is None and "not foldable yet" in view.status
    assert view.provisional
    Console(file=open(os.devnull, "w"), width=120).print(live_view(view.to_json()))  # noqa: SIM115
    with pytest.raises(RefusedError):
        follower.finish()


def test_missing_record_at_the_end_is_an_input_error(tmp_path):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(line(0))
    with pytest.raises(InputError, match="no such arm record"):
        Follower(str(tmp_path / "arm.json"), [str(log)]).finish()


def test_run_follow_ends_when_idle_and_on_ctrl_c(tmp_path):
    log = tmp_path / "steps.jsonl"
    arm = write_arm(tmp_path / "arm.json")
    log.write_bytes(b"".join(line(i) for i in range(30)))
    now = [0.0]
    rendered: list[FollowView] = []

    def on_view(view: FollowView) -> None:
        rendered.append(view)
        if len(rendered) == 2:
            append(log, b"".join(line(i) for i in range(30, 60)))

    outcome = run_follow(
        Follower(arm, [str(log)]),
        on_view=on_view,
        interval=0.25,
        idle_seconds=1.0,
        clock=lambda: now[0],
        sleep=lambda seconds: now.__setitem__(0, now[0] + seconds),
    )
    assert outcome.reason == "idle"
    assert [view.new_bytes > 0 for view in rendered[:4]] == [True, False, True, False]
    assert outcome.result.to_json() == one_shot(arm, [str(log)])

    def interrupt(view: FollowView) -> None:
        raise KeyboardInterrupt

    outcome = run_follow(Follower(arm, [str(log)]), on_view=interrupt, sleep=lambda _: None)
    assert outcome.reason == "interrupted"
    assert outcome.result.to_json() == one_shot(arm, [str(log)])
    text = Console(file=open(os.devnull, "w"), width=160)  # noqa: SIM115
    text.print(live_view(rendered[-1].to_json()))


def _later(seconds: float, action) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("at_start", ["absent", "half written"])
def test_the_command_follows_before_the_record_is_written(tmp_path, capsys, at_start):
    """docs/live.md: until the gate writes its record, steps are provisional; the command must
    reach the follower instead of refusing the record it has not read yet. With --vs, the
    other arm is folded against the record once it is there."""
    root = Path(__file__).resolve().parent.parent
    arm, steps = root / "fixtures" / "our-arm.json", root / "fixtures" / "steps.jsonl"
    vllm = root / "fixtures" / "oracles" / "vllm-gate-arm.json"
    late = tmp_path / "our-arm.json"
    if at_start == "half written":
        late.write_bytes(arm.read_bytes()[:200])
    once, followed = tmp_path / "once.json", tmp_path / "followed.json"
    assert main([str(arm), str(steps), "--vs", f"vllm={vllm}", "--json", str(once)]) == 0
    writer = _later(1.0, lambda: late.write_bytes(arm.read_bytes()))
    argv = [str(late), str(steps), "--vs", f"vllm={vllm}", "--follow", "--idle", "2.5"]
    assert main([*argv, "--json", str(followed), "--quiet"]) == 0, capsys.readouterr().err
    writer.join()
    expected, found = json.loads(once.read_text()), json.loads(followed.read_text())
    for document in (expected, found):  # the record's path is the one thing that differs
        document.pop("inputs", None)
    assert found == expected
    assert found["comparison"]["rows"]  # the other arm was folded against the late record


def test_an_output_may_not_name_a_followed_input_not_written_yet(tmp_path, capsys):
    """The record and the logs a follow waits for count as inputs already: an output naming
    one, or matching a followed glob, would be overwritten once it appears or read as a log."""
    root = Path(__file__).resolve().parent.parent
    arm, steps = root / "fixtures" / "our-arm.json", root / "fixtures" / "steps.jsonl"
    late_arm, late_log = tmp_path / "our-arm.json", tmp_path / "steps.jsonl"
    cases = [
        ([str(late_arm), str(steps)], str(late_arm), "the arm record"),
        ([str(arm), str(late_log)], str(late_log), "a step log"),
        ([str(arm), str(tmp_path / "steps-*.jsonl")], str(tmp_path / "steps-a.jsonl"), "matches"),
    ]
    for argv, out, words in cases:
        for flag in ("--json", "--sums"):
            assert main([*argv, "--follow", "--idle", "1", flag, out, "--quiet"]) == 2
            assert words in capsys.readouterr().err
            assert not Path(out).exists()


def test_a_follow_refuses_what_it_can_before_it_starts(tmp_path, capsys):
    """A bad --vs file, or a whole record that is not one, is refused at once, not after a
    follow that may last hours."""
    root = Path(__file__).resolve().parent.parent
    arm, steps = root / "fixtures" / "our-arm.json", root / "fixtures" / "steps.jsonl"
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    started = time.monotonic()
    argv = [str(tmp_path / "not-yet.json"), str(steps), "--follow", "--idle", "30"]
    assert main([*argv, "--vs", f"vllm={bad}", "--quiet"]) == 2
    assert str(bad) in capsys.readouterr().err
    not_a_record = tmp_path / "legs.json"
    not_a_record.write_text('{"legs": 5}')
    assert main([str(not_a_record), str(steps), "--follow", "--idle", "30", "--quiet"]) == 2
    assert str(not_a_record) in capsys.readouterr().err
    assert time.monotonic() - started < 20  # neither waited for the idle 30 s
    assert arm.exists()
