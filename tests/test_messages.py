"""What the first real engine run found: the emitted convention, the ambiguity refusal's wording
and figures in messages rounded for people. Expectations are worked out by hand."""

from __future__ import annotations

import json

import pytest
from test_fold import arm, leg, ns, step, write

from fold.api import fold_acceptance
from fold.cli import main
from fold.errors import RefusedError
from fold.folding.follow import Follower
from fold.wording import figure, figures_apart


def one_request_legs(completions: list[int]) -> list[dict]:
    """Legs 10 s apart, warm from the second on."""
    return [
        leg(1 if i == 0 else 2, 10 * i, 10 * i + 5, completion_tokens=c)
        for i, c in enumerate(completions)
    ]


def emitted_lines(legs: int, emitted: list[int]) -> list[bytes]:
    """In each leg, one request (seq = leg index) whose steps emit ``emitted`` tokens."""
    lines, n = [], 0
    for index in range(legs):
        for j, tokens in enumerate(emitted):
            lines.append(step(ns(10 * index + 1 + j), 4, tokens - 1, n, seq=index, emitted=tokens))
            n += 1
    return lines


# Each leg's steps emit 3 + 2 + 4 = 9 tokens for one request.
EMITTED = [3, 2, 4]
STATED = {"per_request": 1, "source": "stated", "source_text": "stated"}


def test_an_engine_without_a_prefill_token_is_learned_from_the_arm(tmp_path):
    # speculative-simple: completion_tokens = sum(emitted) = 9 on every leg, so k = 0.
    path = write(tmp_path / "s.jsonl", emitted_lines(3, EMITTED))
    result = fold_acceptance(arm(one_request_legs([9, 9, 9])), [path])
    assert result.fold.prefill_tokens == {
        "per_request": 0,
        "source": "learned_from_the_arm",
        "source_text": "learned from the arm",
        "legs": {"0": 3, "1": 0},
    }
    assert all(figures["flags"] == () for figures in result.legs)
    assert [figures["expected_completion_tokens"] for figures in result.legs] == [9, 9, 9]


def test_a_server_with_a_prefill_token_is_learned_from_the_arm(tmp_path):
    path = write(tmp_path / "s.jsonl", emitted_lines(3, EMITTED))
    result = fold_acceptance(arm(one_request_legs([10, 10, 10])), [path])
    assert result.fold.prefill_tokens["per_request"] == 1
    assert result.fold.prefill_tokens["legs"] == {"0": 0, "1": 3}
    assert all(figures["flags"] == () for figures in result.legs)


def test_the_odd_leg_out_is_flagged_with_the_true_sums(tmp_path, capsys):
    # Two legs say 0 prefill tokens, one says neither: learned 0, and that leg is flagged.
    path = write(tmp_path / "s.jsonl", emitted_lines(3, EMITTED))
    arm_path = tmp_path / "arm.json"
    arm_path.write_text(json.dumps({"legs": one_request_legs([9, 9, 11])}))
    assert main([str(arm_path), path]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("emitted != completion") == 1
    # The log's emitted sum is 9 (not 9 + 1): said as it is, then what the convention makes.
    assert "completion_tokens 11, but the log's verify steps emitted 9 over 1 request(s)" in out
    assert "with 0 prefill token(s) per request that makes 9" in out


def test_a_stated_convention_wins_over_the_arm(tmp_path, capsys):
    path = write(tmp_path / "s.jsonl", emitted_lines(2, EMITTED))
    result = fold_acceptance(arm(one_request_legs([9, 9])), [path], prefill_tokens=1)
    assert result.fold.prefill_tokens == STATED
    assert [figures["expected_completion_tokens"] for figures in result.legs] == [10, 10]
    assert all("emitted != completion" in figures["flags"] for figures in result.legs)

    arm_path = tmp_path / "arm.json"
    arm_path.write_text(json.dumps({"legs": one_request_legs([9, 9])}))
    assert main([str(arm_path), path, "--prefill-tokens", "0"]) == 0
    assert "emitted != completion" not in capsys.readouterr().out
    # A follower takes the stated convention too: its final fold is the one-shot fold's.
    out = tmp_path / "followed.json"
    followed = [str(arm_path), path, "--prefill-tokens", "1", "--follow", "--idle", "0.2"]
    assert main([*followed, "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["prefill_tokens"] == STATED
    assert [figures["expected_completion_tokens"] for figures in document["legs"]] == [10, 10]
    assert all("emitted != completion" in figures["flags"] for figures in document["legs"])
    with pytest.raises(SystemExit) as usage:
        main([str(arm_path), path, "--prefill-tokens", "2"])
    assert usage.value.code == 2


def test_a_follower_folds_with_the_stated_convention_as_lines_arrive(tmp_path):
    # The arm says 9 tokens per leg (k = 0 learned); stated k = 1 expects 1 + 9 = 10 and flags.
    lines = emitted_lines(2, EMITTED)
    arm_path = tmp_path / "arm.json"
    arm_path.write_text(json.dumps({"legs": one_request_legs([9, 9])}))
    path = write(tmp_path / "s.jsonl", lines[:3])
    follower = Follower(arm_path, [path], prefill_tokens=1)
    follower.poll()
    with open(path, "ab") as handle:
        handle.write(b"".join(lines[3:]))
    result = follower.finish()
    assert result.fold.prefill_tokens == STATED
    assert [figures["expected_completion_tokens"] for figures in result.legs] == [10, 10]
    learned = Follower(arm_path, [path]).finish()
    assert learned.fold.prefill_tokens["per_request"] == 0
    assert [figures["flags"] for figures in learned.legs] == [(), ()]


def test_ambiguous_steps_are_named_as_the_cause_with_every_leg(tmp_path):
    # Eleven warm legs over the same 10 s (a server's concurrent legs) and no labels: every
    # step is inside all eleven windows, so every one is ambiguous and no leg has a step.
    legs = [leg(2, 0, 10) for _ in range(11)]
    lines = [step(ns(1 + i / 10), 4, 2, i) for i in range(20)]
    with pytest.raises(RefusedError) as refused:
        fold_acceptance(arm(legs), [write(tmp_path / "s.jsonl", lines)])
    message = str(refused.value)
    assert "20 step line(s) are ambiguous" in message
    assert "DFLASH_STEP_LEG" in message and "'leg' field" in message
    assert "clock" not in message  # the clocks are fine: the windows overlap
    assert "11 warm leg(s)" in message
    assert all(f"leg {index} (run 2" in message for index in range(8))
    assert "leg 8 (" not in message and "and 3 more" in message


def test_steps_outside_every_window_still_point_at_the_clock(tmp_path):
    legs = [leg(2, 0, 10), leg(2, 20, 30)]
    lines = [step(ns(1), 4, 2, 0), step(ns(50), 4, 2, 1)]  # leg 1 gets nothing
    with pytest.raises(RefusedError) as refused:
        fold_acceptance(arm(legs), [write(tmp_path / "s.jsonl", lines)])
    message = str(refused.value)
    assert "1 warm leg(s)" in message and "leg 1 (run 2" in message
    assert "1 step line(s) fell outside every leg window" in message and "clock" in message
    assert "ambiguous" not in message


def test_a_throughput_mismatch_is_told_in_rounded_figures(tmp_path):
    # Median of 1362.6755 and 1362.6755 is 1362.6755; the record says 0.1 + 0.2 more.
    legs = [leg(2, 0, 5, tok_s=1362.6755), leg(2, 10, 15, tok_s=1362.6755)]
    lines = [step(ns(1), 4, 2, 0), step(ns(11), 4, 2, 1)]
    recorded = 1362.6755 + (0.1 + 0.2)  # 1362.9755000000001 as a double
    with pytest.raises(RefusedError) as refused:
        fold_acceptance(
            arm(legs, metrics={"output_throughput_tok_s": recorded}),
            [write(tmp_path / "s.jsonl", lines)],
        )
    message = str(refused.value)
    assert "is 1362.9755 in the record" in message
    assert "is 1362.6755" in message
    assert "0000001" not in message and "9999" not in message


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (1362.6754999999998, "1362.6755"),
        (0.1 + 0.2, "0.3"),
        (12.0, "12"),
        (0.000123456789, "0.00012345679"),
        (2_500_000_000.25, "2500000000"),
        (-3.25, "-3.25"),
        (0.0, "0"),
        (None, "none"),
    ],
)
def test_figures_are_rounded_for_people(value, shown):
    assert figure(value) == shown


def test_figures_that_differ_are_shown_differing():
    assert figures_apart(1362.6754999999998, 1362.67549) == ("1362.6755", "1362.67549")
    assert figures_apart(100.0, 100.00000001) == ("100", "100.00000001")
    assert figures_apart(5.0, 5.0) == ("5", "5")


def test_a_record_whose_summary_disagrees_with_its_legs_is_named(tmp_path):
    """Found by fuzzing the arm record (fuzz/regressions/arm/): the refusal said what
    disagreed but not in which record; with another run of ours beside it, two could."""
    path = tmp_path / "our-arm.json"
    legs = [{"run": 1, "finish_reason": "stop", "prompt_tokens": 4, "completion_tokens": 4,
             "secs": 1.0, "tok_s": 4.0, "generate_start_unix": 1764450000.0 + i,
             "generate_end_unix": 1764450001.0 + i} for i in range(2)]  # fmt: skip
    legs[1]["run"] = 2
    for record, said in (
        ({"legs": legs, "cold_legs_discarded": 2**60}, "the recorded throughput fold does not"),
        ({"legs": [legs[0]]}, "no leg is warm under 'run > 1'"),
    ):
        path.write_text(json.dumps(record))
        with pytest.raises(RefusedError) as error:
            fold_acceptance(str(path), [])
        assert str(error.value).startswith(f"{path}: {said}"), str(error.value)
