"""Our engine's own counters: the fold checked against them leg by leg, and folded from them
alone. Records are written as vllm.cpp's gate writes them (``tests/vllmcpp.py``); every
expectation below is worked out by hand from the example's steps.

The example, 2 prompts x 3 runs, k = 4 drafts a step, max_tokens 12 (accepted per step):

  leg 0 p0 r1 [1,2,0,3,0]  S 5  P 20 A 6   1.000 s  tok/s 12.0
  leg 1 p0 r2 [3,3,2]      S 3  P 12 A 8   0.800 s  tok/s 15.0
  leg 2 p0 r3 [2,2,2,1]    S 4  P 16 A 7   0.750 s  tok/s 16.0
  leg 3 p1 r1 [0]*11       S 11 P 44 A 0   1.500 s  tok/s 8.0
  leg 4 p1 r2 [4,4,1]      S 3  P 12 A 9   0.600 s  tok/s 20.0 (last step cut to 1 token)
  leg 5 p1 r3 [1,1,1,1,1,0] S 6 P 24 A 5   0.960 s  tok/s 12.5

warm (legs 1, 2, 4, 5): S 16, P 64, A 29: A/P = 29/64 = 0.453125, 1 + A/S = 1 + 29/16 = 2.8125,
completion/S = 48/16 = 3.0, tok/s = median(15, 16, 20, 12.5) = 15.5, steps/s = 16 / 3.11.
all: S 32, P 128, A 35: A/P = 35/128 = 0.2734375, 1 + A/S = 1 + 35/32 = 2.09375,
completion/S = 72/32 = 2.25, tok/s = median of all six = (12.5 + 15) / 2 = 13.75.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import orjson
import pytest
from vllmcpp import EXAMPLE, MAX_TOKENS, K, Leg, canonical, record, refold, step_log, write_pair

from fold.api import fold_acceptance
from fold.cli import main
from fold.errors import InputError, RefusedError

FIXTURES = Path(__file__).parent.parent / "fixtures"
VLLM_GATE = str(FIXTURES / "oracles" / "vllm-gate-arm.json")
VLLM_BENCH = str(FIXTURES / "oracles" / "vllm-bench-serve.json")

LEGS = [  # S, P, A, tok/s, secs
    (5, 20, 6, 12.0, 1.000),
    (3, 12, 8, 15.0, 0.800),
    (4, 16, 7, 16.0, 0.750),
    (11, 44, 0, 8.0, 1.500),
    (3, 12, 9, 20.0, 0.600),
    (6, 24, 5, 12.5, 0.960),
]
LEG_4 = 'leg 4 (run 2 of prompt 1, "Prompt 1: write about topic 1.")'


def example() -> dict:
    return record(EXAMPLE, max_tokens=MAX_TOKENS, k=K)


def example_log(document: dict) -> bytes:
    return step_log(EXAMPLE, document, max_tokens=MAX_TOKENS)


def pair(tmp_path: Path, document: dict, *, log: bool = True) -> list[str]:
    """The arm record and (unless ``log`` is False) the example's step log, as paths."""
    arm, steps = write_pair(tmp_path, document, example_log(example()) if log else None)
    return [arm] if steps is None else [arm, steps]


def fold(tmp_path: Path, document: dict, *, log: bool = True, **options):
    paths = pair(tmp_path, document, log=log)
    return fold_acceptance(paths[0], paths[1:], **options)


def refused(capsys, *argv: str) -> str:
    assert main([*argv, "--bootstrap", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fold-acceptance: refused: ")
    return " ".join(err.split())


# --------------------------------------------------------------------------------------------
# The record is written as the gate writes it
# --------------------------------------------------------------------------------------------


def test_the_record_has_the_gates_layout(tmp_path):
    arm, _ = write_pair(tmp_path, example())
    raw = Path(arm).read_bytes()
    document = json.loads(raw)
    assert raw == (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()
    assert set(document) == {
        "artifacts", "binary", "build", "clock", "clock_error", "cold_discard_cause",
        "cold_legs_discarded", "contention", "env", "legs", "metrics", "models", "prompts",
        "spec_acceptance", "speculative_config", "warm_legs", "workload",
    }  # fmt: skip
    assert set(document["legs"][0]) == {
        "run", "finish_reason", "prompt_tokens", "completion_tokens", "secs", "tok_s",
        "generate_start_unix", "generate_end_unix", "spec_drafts_proposed",
        "spec_drafts_accepted", "spec_drafted_request_steps",
    }  # fmt: skip
    assert [leg["run"] for leg in document["legs"]] == [1, 2, 3, 1, 2, 3]
    assert all(leg["completion_tokens"] == MAX_TOKENS for leg in document["legs"])
    block = document["spec_acceptance"]
    assert (block["drafted_request_steps"], block["drafts_proposed"]) == (16, 64)
    assert (block["drafts_accepted"], block["warm_legs"]) == (29, 4)
    assert block["mean_acceptance_length"] == (29 + 16) / 16
    assert [entry["run"] for entry in block["per_leg"]] == [2, 3, 2, 3]
    assert document["metrics"]["output_throughput_tok_s"] == 15.5


# --------------------------------------------------------------------------------------------
# Both ways give the hand-computed figures
# --------------------------------------------------------------------------------------------


def _assert_hand_figures(result) -> None:
    for figures, (steps, proposed, accepted, tok_s, secs) in zip(result.legs, LEGS, strict=True):
        assert (figures["steps"], figures["proposed"], figures["accepted"]) == (
            steps, proposed, accepted
        )  # fmt: skip
        assert figures["accept_rate"] == accepted / proposed
        assert figures["mean_acceptance_length"] == 1 + accepted / steps
        assert figures["completion_tokens_per_step"] == 12 / steps
        assert figures["tok_s"] == tok_s
        assert math.isclose(figures["step_rate"], steps / secs, rel_tol=1e-9)
    warm, every = result.warm, result.all
    assert list(warm["legs"]) == [1, 2, 4, 5] and list(every["legs"]) == [0, 1, 2, 3, 4, 5]
    assert (warm["steps"], warm["proposed"], warm["accepted"]) == (16, 64, 29)
    assert (warm["accept_rate"], warm["mean_acceptance_length"]) == (0.453125, 2.8125)
    assert warm["completion_tokens_per_step"] == 3.0
    assert warm["output_throughput_tok_s"] == 15.5
    assert math.isclose(warm["step_rate"], 16 / 3.11, rel_tol=1e-9)
    assert (every["steps"], every["proposed"], every["accepted"]) == (32, 128, 35)
    assert (every["accept_rate"], every["mean_acceptance_length"]) == (0.2734375, 2.09375)
    assert every["completion_tokens_per_step"] == 2.25
    assert every["output_throughput_tok_s"] == 13.75


def test_with_its_log_the_fold_is_checked_against_the_counters_leg_by_leg(tmp_path):
    result = fold(tmp_path, example(), resamples=0)
    _assert_hand_figures(result)
    assert list(result.warm["histogram"]) == [1, 7, 4, 2, 2]  # by hand from the warm legs' steps
    check = result.counter_check
    assert check["legs_checked"] == check["legs_with_counters"] == check["legs"] == 6
    assert check["spec_acceptance"] == "equal"
    assert check["summary"] == (
        "checked against the engine's own counters, leg by leg: S, P and A equal on all 6 "
        "legs; its spec_acceptance equals the warm fold"
    )
    assert result.to_json()["step_source"] == "step_log"


def test_without_a_log_the_counters_are_folded(tmp_path):
    result = fold(tmp_path, example(), log=False, resamples=0)
    _assert_hand_figures(result)
    assert result.counter_check["legs_checked"] == 0
    assert result.counter_check["spec_acceptance"] == "equal"
    assert "folded from the record's counters alone" in result.counter_check["summary"]


def test_counters_only_json_says_null_where_steps_are_needed(tmp_path, capsys):
    arm = pair(tmp_path, example(), log=False)[0]
    assert main([arm, "--json", "-"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert document["step_source"] == "record_counters"
    for leg in document["legs"]:
        for key in ("per_position", "per_position_of_proposed", "histogram", "windows",
                    "request_count", "lowest_request", "cadence", "lines", "emitted",
                    "emitted_consistent"):  # fmt: skip
            assert leg[key] is None, key
    for name in ("warm", "all"):
        assert document[name]["per_position"] is None
        assert document[name]["per_position_of_proposed"] is None
        assert document[name]["histogram"] is None
        assert document[name]["cadence"] is None
        assert document[name]["accept_rate_ci"] is not None  # the intervals over legs
    for key in ("unattributed_steps", "ambiguous_steps", "torn_lines", "skipped_lines",
                "lost_lines"):  # fmt: skip
        assert document[key] is None, key
    assert document["files"] == [] and document["writers"] == []
    sources = document["sources"]
    assert sources["steps"].startswith("the record's counters")
    for key in ("per_position", "per_position_of_proposed", "histogram", "windows", "cadence",
                "emitted", "timeline"):  # fmt: skip
        assert sources[key] == "needs a step log"
    assert document["counter_check"]["spec_acceptance"] == "equal"


def test_counters_only_table_names_its_source_and_what_needs_a_log(tmp_path, capsys):
    arm = pair(tmp_path, example(), log=False)[0]
    assert main([arm, "--bootstrap", "0", "--details"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Acceptance per leg (shape within a leg: needs a step log)" in out
    assert "S, P, A per leg from the record's counters" in out
    assert "warm per-position acceptance (accepted > i)/S: needs a step log" in out
    assert (
        "warm per-position, of steps that drafted it (accepted > i)/(proposed > i): "
        "needs a step log" in out
    )
    assert "warm histogram, steps accepting exactly j: needs a step log" in out
    assert "step cadence: needs a step log" in out
    assert "lines: no step log given" in out
    assert "warm 4 16 64 29 45.3% 2.81 15.500 3.00" in out
    assert "all 6 32 128 35 27.3% 2.09 13.750 2.25" in out


def test_the_step_log_table_says_it_was_checked(tmp_path, capsys):
    assert main([*pair(tmp_path, example()), "--bootstrap", "0", "--details"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "engine counters: checked against the engine's own counters, leg by leg: S, P and A "
        "equal on all 6 legs; its spec_acceptance equals the warm fold"
    ) in out


def test_intervals_are_the_same_both_ways_with_one_request_per_leg(tmp_path):
    with_log = fold(tmp_path, example())
    alone = fold(tmp_path, example(), log=False)
    for name in ("warm", "all"):
        for figure in ("accept_rate", "mean_acceptance_length", "completion_tokens_per_step",
                       "output_throughput_tok_s", "step_rate"):  # fmt: skip
            assert getattr(with_log, name)[f"{figure}_ci"] is not None
            assert getattr(alone, name)[f"{figure}_ci"] == getattr(with_log, name)[f"{figure}_ci"]


def test_the_comparison_is_the_same_both_ways(tmp_path, capsys):
    blocks = []
    for log in (True, False):
        paths = pair(tmp_path, example(), log=log)
        assert main([*paths, "--vs", f"gate={VLLM_GATE}", "--vs", f"bench={VLLM_BENCH}",
                     "--json", "-"]) == 0  # fmt: skip
        blocks.append(orjson.loads(capsys.readouterr().out)["comparison"])
    with_log, alone = blocks
    figures = (
        "output_throughput_tok_s", "steps", "proposed", "accepted", "accept_rate",
        "mean_acceptance_length", "verify_steps_per_s", "completion_tokens_per_step",
    )  # fmt: skip
    for row, other in zip(with_log["rows"], alone["rows"], strict=True):
        assert row["name"] == other["name"]
        for figure in figures:
            assert row[figure] == other[figure], (row["name"], figure)
    assert with_log["rows"][0]["per_position"] == [15, 8, 4, 2]  # warm steps accepting > i
    assert alone["rows"][0]["per_position"] is None
    for name in ("gate", "bench"):
        one, two = with_log["gaps"][name], alone["gaps"][name]
        for key in ("ratio", "acceptance_factor", "speed_factor", "verdict", "ratio_ci",
                    "acceptance_factor_ci", "speed_factor_ci"):  # fmt: skip
            assert one[key] == two[key], (name, key)
    # the gate's vLLM arm spans all legs, so ours is folded over all six: 1 + 35/32
    assert alone["rows"][1]["name"] == "ours (all legs)"
    assert alone["rows"][1]["mean_acceptance_length"] == 2.09375
    assert alone["rows"][0]["sources"]["accepted"] == (
        "record: sum of the legs' spec_drafts_accepted over the warm legs"
    )


def test_counters_only_markdown_and_annotate(tmp_path, capsys):
    arm = pair(tmp_path, example(), log=False)[0]
    out = tmp_path / "annotated.json"
    assert main([arm, "--annotate", str(out), "--markdown", "-", "--bootstrap", "0"]) == 0
    markdown = capsys.readouterr().out
    assert "- logs: none; S, P and A per leg from the record's counters" in markdown
    assert "| warm | 4 | 16 | 64 | 29 | 45.3% | 2.81 | 15.500 | 3.00 |" in markdown
    assert "## Cadence\n\nneeds a step log (the steps' times)." in markdown
    assert "| 4 | 2 | yes | 20.00 | 3 | 12 | 9 | 75.0% | 4.00 | 5.000 | needs a step log |" in (
        markdown
    )
    annotated = json.loads(out.read_text())
    assert annotated["legs"][4]["acceptance"]["accepted"] == 9
    assert annotated["legs"][4]["acceptance"]["histogram"] is None
    assert annotated["acceptance"]["warm"]["accepted"] == 29
    assert annotated["acceptance"]["step_source"] == "record_counters"


def test_the_markdown_with_a_log_says_it_was_checked(tmp_path, capsys):
    assert main([*pair(tmp_path, example()), "--markdown", "-", "--bootstrap", "0"]) == 0
    assert (
        "- engine counters: checked against the engine's own counters, leg by leg: S, P and A "
        "equal on all 6 legs; its spec_acceptance equals the warm fold"
    ) in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# Refusals: each breaks exactly one thing in an otherwise-consistent record
# --------------------------------------------------------------------------------------------


def _engine_counted(field: str, delta: int) -> dict:
    """The record the gate writes when the engine counted ``delta`` more in ``field`` on leg
    4 than the log holds: the leg's counter and the gate's own folds of it move together."""
    document = example()
    document["legs"][4][field] += delta
    return refold(document)


@pytest.mark.parametrize(
    ("field", "letter", "recorded", "logged"),
    [
        ("spec_drafts_accepted", "A", 10, 9),
        ("spec_drafts_proposed", "P", 13, 12),
        ("spec_drafted_request_steps", "S", 4, 3),
    ],
)
def test_a_leg_the_log_disagrees_with_is_refused(tmp_path, capsys, field, letter, recorded, logged):
    paths = pair(tmp_path, _engine_counted(field, 1))
    message = refused(capsys, *paths)
    assert message.startswith(
        f"fold-acceptance: refused: {paths[0]}: the step log disagrees with the engine's own "
        f"counters on {LEG_4}: "
    )
    assert f"{field} = {recorded} in the record, {letter} = {logged} in the step log" in message
    assert "check that the step log comes from this run" in message or "hook" in message


def test_the_same_leg_without_a_log_folds_its_counters(tmp_path):
    result = fold(tmp_path, _engine_counted("spec_drafts_accepted", 1), log=False, resamples=0)
    assert result.legs[4]["accepted"] == 10
    assert result.warm["accepted"] == 30


def test_a_log_counting_the_bonus_token_is_told_so(tmp_path, capsys):
    # the engine counts A += sampled - 1; a hook given `sampled` logs A + S on every leg
    # (leg 4 accepts 3 a step here, so that A + 1 <= P on every step)
    prompts = copy.deepcopy(EXAMPLE)
    prompts[1][1].accepted = [3, 3, 3]
    document = record(prompts, max_tokens=MAX_TOKENS, k=K)
    arm, _ = write_pair(tmp_path, document)
    lines = []
    for line in step_log(prompts, document, max_tokens=MAX_TOKENS).splitlines(keepends=True):
        row = json.loads(line)
        row["accepted"] += 1
        lines.append(line.replace(b'"accepted":%d' % (row["accepted"] - 1),
                                  b'"accepted":%d' % row["accepted"]))  # fmt: skip
    steps = tmp_path / "bonus.jsonl"
    steps.write_bytes(b"".join(lines))
    message = refused(capsys, arm, str(steps))
    assert "leg 0 (run 1 of prompt 0" in message
    assert "spec_drafts_accepted = 6 in the record, A = 11 in the step log" in message
    assert "(5 more legs disagree: 1, 2, 3, 4, 5)" in message
    assert "the hook counts the bonus token as accepted" in message


def test_a_log_from_another_run_is_told_so(tmp_path, capsys):
    other = copy.deepcopy(EXAMPLE)
    for prompt in other:
        for leg in prompt:
            leg.accepted = leg.accepted[:-1]
    document = example()
    arm, _ = write_pair(tmp_path, document)
    steps = tmp_path / "other.jsonl"
    steps.write_bytes(step_log(other, document, max_tokens=MAX_TOKENS))
    message = refused(capsys, arm, str(steps))
    assert "No leg agrees: the step log most likely comes from another run" in message


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("drafts_accepted", 30, "drafts_accepted is 30 in the record, A = 29 here"),
        ("drafts_proposed", 65, "drafts_proposed is 65 in the record, P = 64 here"),
        ("drafted_request_steps", 17, "drafted_request_steps is 17 in the record, S = 16 here"),
        ("accept_rate", 0.453126, "accept_rate is 0.453126 in the record, A/P = 0.453125 here"),
        ("mean_acceptance_length", 2.8126, "mean_acceptance_length is 2.8126 in the record, "
         "1 + A/S = 2.8125 here"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("log", [True, False])
def test_a_spec_acceptance_unlike_the_warm_fold_is_refused(
    tmp_path, capsys, key, value, words, log
):
    document = example()
    document["spec_acceptance"][key] = value
    message = refused(capsys, *pair(tmp_path, document, log=log))
    source = "the step log" if log else "the legs' counters"
    assert (
        f"spec_acceptance disagrees with the warm fold ({source}, over the legs selected by "
        f"'run > 1'): {words}"
    ) in message


def test_ratios_within_1e_9_agree(tmp_path):
    document = example()
    document["spec_acceptance"]["accept_rate"] += 1e-12
    document["spec_acceptance"]["per_leg"][0]["mean_acceptance_length"] -= 1e-12
    assert fold(tmp_path, document, resamples=0).counter_check["spec_acceptance"] == ("equal")


def test_spec_acceptance_warm_legs_unlike_the_fold_is_refused(tmp_path, capsys):
    document = example()
    document["spec_acceptance"]["warm_legs"] = 5
    message = refused(capsys, *pair(tmp_path, document))
    assert "spec_acceptance.warm_legs is 5 in the record, but the warm fold" in message
    assert "has 4 legs" in message


def test_a_per_leg_entry_unlike_its_leg_is_refused(tmp_path, capsys):
    document = example()
    document["spec_acceptance"]["per_leg"][2]["drafts_proposed"] = 13
    message = refused(capsys, *pair(tmp_path, document))
    assert (
        f"spec_acceptance.per_leg[2] (the record's figures of {LEG_4}, warm leg 3 of 4) "
        "disagrees with the leg's fold from the step log: drafts_proposed is 13 in the record, "
        "P = 12 here"
    ) in message


def test_a_per_leg_entry_of_another_run_is_refused(tmp_path, capsys):
    document = example()
    document["spec_acceptance"]["per_leg"][0]["run"] = 3
    message = refused(capsys, *pair(tmp_path, document, log=False))
    assert "run is 3 in the record, but the leg's run is 2" in message


def test_a_per_leg_list_short_of_the_warm_legs_is_refused(tmp_path, capsys):
    document = example()
    del document["spec_acceptance"]["per_leg"][-1]
    message = refused(capsys, *pair(tmp_path, document))
    assert "spec_acceptance.per_leg has 3 entries in the record" in message


@pytest.mark.parametrize("log", [True, False])
@pytest.mark.parametrize(
    "dropped",
    ["spec_drafts_proposed", "spec_drafts_accepted", "spec_drafted_request_steps"],
)
def test_a_leg_with_two_of_the_three_counters_is_refused(tmp_path, capsys, dropped, log):
    document = example()
    del document["legs"][4][dropped]
    message = refused(capsys, *pair(tmp_path, document, log=log))
    assert f"{LEG_4} carries" in message
    assert f"but not {dropped}: the engine's gate writes all three counters on a leg or none" in (
        message
    )


def test_a_counter_that_is_not_a_count_is_an_input_error(tmp_path, capsys):
    document = example()
    document["legs"][1]["spec_drafts_accepted"] = "8"
    assert main([*pair(tmp_path, document)]) == 2
    assert "leg 1 (run 2 of prompt 0" in capsys.readouterr().err


def test_impossible_counters_are_refused(tmp_path, capsys):
    document = example()
    document["legs"][1]["spec_drafts_accepted"] = 13  # P is 12
    message = refused(capsys, *pair(tmp_path, refold(document), log=False))
    assert "'spec_drafts_accepted' 13 exceeds 'spec_drafts_proposed' 12, more draft" in message


def test_a_warm_leg_without_drafts_is_refused_without_a_log(tmp_path, capsys):
    document = example()
    for field in ("spec_drafts_proposed", "spec_drafts_accepted", "spec_drafted_request_steps"):
        document["legs"][5][field] = 0
    message = refused(capsys, *pair(tmp_path, refold(document), log=False))
    assert "1 warm leg(s) have spec_drafted_request_steps = 0 in the record: leg 5" in message
    assert "not a 0% acceptance" in message


def test_a_record_with_neither_counters_nor_a_log_is_refused_with_what_to_add(tmp_path, capsys):
    document = record(EXAMPLE, max_tokens=MAX_TOKENS, k=K, counters=False)
    assert document["spec_acceptance"] is None
    message = refused(capsys, *pair(tmp_path, document, log=False))
    assert "no step log was given and no leg of the arm record carries the engine's counters" in (
        message
    )
    assert "give the step log (DFLASH_STEP_LOG) as the second argument" in message


def test_some_legs_without_counters_and_no_log_is_refused_naming_them(tmp_path, capsys):
    document = example()
    for index in (0, 3):
        for field in ("spec_drafts_proposed", "spec_drafts_accepted",
                      "spec_drafted_request_steps"):  # fmt: skip
            del document["legs"][index][field]
    message = refused(capsys, *pair(tmp_path, document, log=False))
    assert "2 of 6 legs carry no counters: leg 0 (run 1 of prompt 0" in message
    assert "leg 3 (run 1 of prompt 1" in message


def test_with_a_log_legs_without_counters_are_said_unchecked(tmp_path):
    document = example()
    for field in ("spec_drafts_proposed", "spec_drafts_accepted", "spec_drafted_request_steps"):
        del document["legs"][0][field]
    check = fold(tmp_path, document, resamples=0).counter_check
    assert (check["legs_checked"], check["legs_with_counters"]) == (5, 5)
    assert "equal on the 5 legs that carry them; 1 of 6 legs carry none" in check["summary"]


# --------------------------------------------------------------------------------------------
# Records without the block, or without counters
# --------------------------------------------------------------------------------------------


def test_counters_on_the_legs_and_spec_acceptance_null(tmp_path, capsys):
    document = example()
    document["spec_acceptance"] = None
    result = fold(tmp_path, document, resamples=0)
    _assert_hand_figures(result)
    assert result.counter_check["legs_checked"] == 6
    assert result.counter_check["spec_acceptance"] == "null"
    assert (
        "its spec_acceptance is null, so the pooled block was not checked"
        in (result.counter_check["summary"])
    )
    alone = fold(tmp_path, document, log=False, resamples=0)
    _assert_hand_figures(alone)
    # and a leg the log disagrees with is still refused
    message = refused(capsys, *pair(tmp_path, {**_engine_counted("spec_drafts_accepted", 1),
                                               "spec_acceptance": None}))  # fmt: skip
    assert LEG_4 in message


def test_a_record_without_counters_folds_its_log_as_before_and_says_so(tmp_path, capsys):
    without = record(EXAMPLE, max_tokens=MAX_TOKENS, k=K, counters=False)
    result = fold(tmp_path, without, resamples=0)
    _assert_hand_figures(result)
    assert result.counter_check["legs_checked"] == 0
    assert result.counter_check["summary"] == (
        "not checked against the engine's own counters: the record's legs carry none "
        "(spec_drafted_request_steps, spec_drafts_proposed, spec_drafts_accepted); its "
        "spec_acceptance is null, so the pooled block was not checked"
    )
    assert main([*pair(tmp_path, without), "--bootstrap", "0", "--details"]) == 0
    assert "not checked against the engine's own counters" in capsys.readouterr().out


def test_the_toy_gates_record_has_no_block_and_no_counters(capsys):
    arm = str(FIXTURES / "our-arm.json")
    assert main([arm, str(FIXTURES / "steps.jsonl"), "--json", "-"]) == 0
    check = orjson.loads(capsys.readouterr().out)["counter_check"]
    assert check["legs_with_counters"] == 0
    assert check["spec_acceptance"] == "absent"


def test_a_prompt_is_not_named_when_runs_do_not_restart_per_prompt(tmp_path, capsys):
    document = _engine_counted("spec_drafts_accepted", 1)
    del document["workload"]["repeat"]
    message = refused(capsys, *pair(tmp_path, document))
    assert "on leg 4 (run 2):" in message


def test_a_long_prompt_is_shortened_in_messages(tmp_path, capsys):
    document = _engine_counted("spec_drafts_accepted", 1)
    document["prompts"][1] = "Explain, step by step and with examples,\nhow a B-tree splits a node."
    message = refused(capsys, *pair(tmp_path, document))
    assert 'leg 4 (run 2 of prompt 1, "Explain, step by step and with examples…")' in message


# --------------------------------------------------------------------------------------------
# What needs a log
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", [["--follow"], ["--trace", "run.json"]])
def test_follow_and_trace_need_a_log(tmp_path, capsys, flag):
    arm = pair(tmp_path, example(), log=False)[0]
    assert main([arm, *flag]) == 2
    assert f"{flag[0]} needs a step log" in capsys.readouterr().err


def test_the_library_folds_counters_with_no_logs(tmp_path):
    arm = pair(tmp_path, example(), log=False)[0]
    result = fold_acceptance(arm, [], resamples=0)
    assert result.fold.step_source == "record_counters"
    assert result.warm["accepted"] == 29
    with pytest.raises(RefusedError):
        fold_acceptance(arm, [], predicate="run > 2", resamples=0)  # the record folds run > 1


def test_a_malformed_block_is_an_input_error(tmp_path):
    document = example()
    document["spec_acceptance"]["drafts_accepted"] = 29.5
    arm = pair(tmp_path, document, log=False)[0]
    with pytest.raises(
        InputError, match=r"spec_acceptance: drafts_accepted 29.5 is not an integer"
    ):
        fold_acceptance(arm, [], resamples=0)


def test_canonical_helper_sorts_keys():
    assert canonical({"b": 1, "a": [1, 2]}) == b'{"a":[1,2],"b":1}\n'


def test_steps_attributed_to_the_wrong_leg_are_told_so(tmp_path, capsys):
    # the log holds prompt 0's runs 2 and 3 swapped: each leg's log counts are the other's
    swapped = copy.deepcopy(EXAMPLE)
    swapped[0][1], swapped[0][2] = swapped[0][2], swapped[0][1]
    document = example()
    arm, _ = write_pair(tmp_path, document)
    steps = tmp_path / "swapped.jsonl"
    steps.write_bytes(step_log(swapped, document, max_tokens=MAX_TOKENS))
    message = refused(capsys, arm, str(steps))
    assert "on leg 1 (run 2 of prompt 0" in message
    assert "spec_drafted_request_steps = 3 in the record, S = 4 in the step log" in message
    assert "(1 more leg disagrees: 2)" in message
    assert "The log's counts for this leg are exactly the counters of leg 2 (run 3" in message


def test_a_block_without_leg_counters_is_still_held_to_the_logs_warm_fold(tmp_path, capsys):
    block = example()["spec_acceptance"]
    document = record(EXAMPLE, max_tokens=MAX_TOKENS, k=K, counters=False)
    document["spec_acceptance"] = copy.deepcopy(block)
    check = fold(tmp_path, document, resamples=0).counter_check
    assert (check["legs_with_counters"], check["spec_acceptance"]) == (0, "equal")
    document["spec_acceptance"]["drafts_accepted"] = 28
    message = refused(capsys, *pair(tmp_path, document))
    assert "drafts_accepted is 28 in the record, A = 29 here" in message


def test_a_hook_summing_steps_into_one_call_is_told_so(tmp_path, capsys):
    # leg 1's three steps (4 drafts each, accepting 3, 3, 2) written as one call: 12 and 8
    merged = copy.deepcopy(EXAMPLE)
    merged[0][1] = Leg([8], 0.800, 12)
    document = example()
    arm, _ = write_pair(tmp_path, document)
    steps = tmp_path / "merged.jsonl"
    steps.write_bytes(step_log(merged, document, max_tokens=MAX_TOKENS))
    message = refused(capsys, arm, str(steps))
    assert "on leg 1 (run 2 of prompt 0" in message
    assert "spec_drafted_request_steps = 3 in the record, S = 1 in the step log." in message
    assert "P and A agree but S does not: the hook sums a forward's requests" in message


def test_counters_only_json_has_no_conditional_rates_either(tmp_path):
    result = fold(tmp_path, example(), log=False, resamples=0)
    assert result.warm["per_position_conditional"] is None
    assert all(leg["per_position_conditional"] is None for leg in result.legs)
    with_log = fold(tmp_path, example(), resamples=0)
    # warm steps accepting > i: 15, 8, 4, 2 of 16 -> conditional 15/16, 8/15, 4/8, 2/4
    assert list(with_log.warm["per_position_conditional"]) == [15 / 16, 8 / 15, 4 / 8, 2 / 4]
