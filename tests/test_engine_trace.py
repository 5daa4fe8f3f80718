"""The engine's own trace (vllm-cli stderr with VT_SPEC_TRACE=1) as a step source.

The stderr below is written from the reference's description of what vllm-cli prints
(``vllmcpp-arm.md``): ``[SPECTRACE]`` lines with the spacing as it comes, each leg's three
``vllm-cli: run=r/R`` lines after its steps, other log lines mixed in. Every figure is worked
out by hand in the comments.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_vllmcpp_example import (
    ALL,
    EXAMPLE,
    PER_PROMPT,
    REPEAT,
    WARM,
    WARM_HISTOGRAM,
    WARM_PER_POSITION,
)

from fold.api import fold_acceptance
from fold.cli import main
from fold.errors import InputError, RefusedError
from fold.inputs.engine_trace import looks_like_engine_trace
from fold.present.markdown import markdown_record

# Prompt 0: leg 0 (run 1) steps (k, acc, emitted) (8, 1, 2), (8, 3, 4): S 2, P 16, A 4,
# completion 1 + 6 = 7. Leg 1 (run 2): (8, 0, 1), (8, 8, 9), (8, 2, 2) (cut by max_tokens: emit
# lists 2 of ns=3): S 3, P 24, A 10, completion 1 + 12 = 13.
PROMPT_0 = """\
vllm-cli: loading model /models/qwen3-8b.gguf (drafter: dflash2, k=8)
[SPECTRACE] req=0 pos=8  k=8 ns=2 acc=1 draft=[3177 421 682 ...] emit=[3177 34756]
[SPECTRACE] req=0 pos=10 k=8 ns=4 acc=3 draft=[11 12 13 14 15 16 17 18] emit=[11 12 13 19]
[WARN] sampler: top_k ignored at temperature 0
vllm-cli: run=1/2 finish_reason=length prompt_tokens=31 completion_tokens=7 secs=5.812 tok_s=1.204
vllm-cli: run=1/2 generate_start_unix=1796000123.456789 generate_end_unix=1796000129.268789
vllm-cli: run=1/2 spec_drafts_proposed=16 spec_drafts_accepted=4 spec_drafted_request_steps=2
[SPECTRACE]  req=1  pos=8 k=8   ns=1 acc=0 draft=[5 ...] emit=[5]
[SPECTRACE] req=1 pos=9 k=8 ns=9 acc=8 draft=[1 2 3 4 5 6 7 8] emit=[1 2 3 4 5 6 7 8 9]
[SPECTRACE] req=1 pos=18 k=8 ns=3 acc=2 draft=[21 22 ...] emit=[21 22]
vllm-cli: run=2/2 finish_reason=length prompt_tokens=31 completion_tokens=13 secs=2.000 tok_s=6.500
vllm-cli: run=2/2 generate_start_unix=1796000129.300000 generate_end_unix=1796000131.300000
vllm-cli: run=2/2 spec_drafts_proposed=24 spec_drafts_accepted=10 spec_drafted_request_steps=3
vllm-cli: done
"""
# Prompt 1, another process (req counts from 0 again), CRLF line ends and tabs: leg 2 (run 1)
# (8, 5, 6), (8, 0, 1): S 2, P 16, A 5, completion 8. Leg 3 (run 2): (8, 7, 8), (8, 1, 2),
# (8, 4, 5): S 3, P 24, A 12, completion 16.
PROMPT_1 = """\
vllm-cli: loading model /models/qwen3-8b.gguf (drafter: dflash2, k=8)\r
[SPECTRACE] req=0 pos=40 k=8 ns=6 acc=5 draft=[1 2 3 4 5 6 7 8] emit=[1 2 3 4 5 9]\r
[SPECTRACE]\treq=0\tpos=46 k=8 ns=1 acc=0 draft=[7 ...] emit=[8]\r
vllm-cli: run=1/2 finish_reason=length prompt_tokens=40 completion_tokens=8 secs=2.000 tok_s=4.000\r
vllm-cli: run=1/2 generate_start_unix=1796000140.000000 generate_end_unix=1796000142.000000\r
vllm-cli: run=1/2 spec_drafts_proposed=16 spec_drafts_accepted=5 spec_drafted_request_steps=2\r
[SPECTRACE] req=1 pos=40 k=8 ns=8 acc=7 draft=[1 2 3 4 5 6 7 8] emit=[1 2 3 4 5 6 7 9]\r
[INFO] kv cache: 412 of 2048 blocks in use\r
[SPECTRACE] req=1 pos=48 k=8 ns=2 acc=1 draft=[1 2 ...] emit=[1 3]\r
[SPECTRACE] req=1 pos=50 k=8 ns=5 acc=4 draft=[1 2 3 4 5 ...] emit=[1 2 3 4 6]\r
vllm-cli: run=2/2 finish_reason=length prompt_tokens=40 completion_tokens=16 secs=4.000 tok_s=4.000\r
vllm-cli: run=2/2 generate_start_unix=1796000142.100000 generate_end_unix=1796000146.100000\r
vllm-cli: run=2/2 spec_drafts_proposed=24 spec_drafts_accepted=12 spec_drafted_request_steps=3\r
"""  # noqa: E501
# (S, P, A, completion) per leg, from the comments above.
LEGS = [(2, 16, 4, 7), (3, 24, 10, 13), (2, 16, 5, 8), (3, 24, 12, 16)]
TIMES = [
    ("5.812", "1.204", "1796000123.456789", "1796000129.268789"),
    ("2.000", "6.500", "1796000129.300000", "1796000131.300000"),
    ("2.000", "4.000", "1796000140.000000", "1796000142.000000"),
    ("4.000", "4.000", "1796000142.100000", "1796000146.100000"),
]


def arm_document() -> dict:
    """The gate's record of the same four legs: the run lines' values, parsed as it parses them."""
    legs = []
    for index, ((steps, proposed, accepted, completion), times) in enumerate(
        zip(LEGS, TIMES, strict=True)
    ):
        secs, tok_s, start, end = times
        legs.append(
            {
                "run": index % 2 + 1,
                "finish_reason": "length",
                "prompt_tokens": 31 if index < 2 else 40,
                "completion_tokens": completion,
                "secs": float(secs),
                "tok_s": float(tok_s),
                "generate_start_unix": float(start),
                "generate_end_unix": float(end),
                "spec_drafts_proposed": proposed,
                "spec_drafts_accepted": accepted,
                "spec_drafted_request_steps": steps,
            }
        )
    return {
        "legs": legs,
        "metrics": {"output_throughput_tok_s": (6.5 + 4.0) / 2},  # median of the warm legs
        "workload": {"repeat": 2, "num_prompts": 2, "num_speculative_tokens": 8},
        "warm_legs": 2,
    }


@pytest.fixture
def gate(tmp_path: Path):
    """(arm path, [stderr paths]) as the gate leaves them."""

    def make(prompts: tuple[str, ...] = (PROMPT_0, PROMPT_1), document: dict | None = None):
        arm = tmp_path / "our-arm.json"
        arm.write_text(json.dumps(document or arm_document()))
        paths = []
        for number, text in enumerate(prompts):
            path = tmp_path / f"prompt-{number}.stderr"
            path.write_bytes(text.encode())
            paths.append(str(path))
        return str(arm), paths

    return make


def test_the_trace_folds_to_the_hand_figures(gate):
    arm, paths = gate()
    result = fold_acceptance(arm, paths, resamples=0)
    legs = [(leg["steps"], leg["proposed"], leg["accepted"]) for leg in result.legs]
    assert legs == [(s, p, a) for s, p, a, _ in LEGS]
    warm = result.warm
    # Warm legs 1 and 3: S 6, P 48, A 22.
    assert (warm["steps"], warm["proposed"], warm["accepted"]) == (6, 48, 22)
    assert warm["accept_rate"] == pytest.approx(22 / 48)
    assert warm["mean_acceptance_length"] == pytest.approx(1 + 22 / 6)
    # Warm steps accepted 0, 8, 2 and 7, 1, 4: (accepted > i) for i = 0..7, over S = 6.
    assert warm["per_position"] == pytest.approx([n / 6 for n in (5, 4, 3, 3, 2, 2, 2, 1)])
    assert list(warm["histogram"]) == [1, 1, 1, 0, 1, 0, 0, 1, 1]
    # Requests per file: req 0 in leg 0 and 2, req 1 in legs 1 and 3; each file one writer.
    assert [[(r["w"], r["seq"]) for r in leg["requests"]] for leg in result.legs] == [
        [(paths[0], 0)], [(paths[0], 1)], [(paths[1], 0)], [(paths[1], 1)]
    ]  # fmt: skip
    # emit counted: completion = 1 prefill token + the emitted tokens, on every leg.
    assert result.fold.prefill_tokens["per_request"] == 1
    assert result.fold.prefill_tokens["legs"] == {"0": 0, "1": 4}


def test_every_line_is_accounted(gate):
    arm, paths = gate()
    files = fold_acceptance(arm, paths, resamples=0).to_json()["files"]
    # Prompt 0: 5 steps, 6 run lines, 3 other lines (loading, a warning, "done").
    # Prompt 1: 5 steps, 6 run lines, 2 other lines (loading, kv cache).
    assert [
        (f["kind"], f["lines"], f["attributed"], f["unattributed"], f["run_lines"],
         f["other_lines"], f["skipped"])
        for f in files
    ] == [("engine trace", 5, 5, 0, 6, 3, 0), ("engine trace", 5, 5, 0, 6, 2, 0)]  # fmt: skip


def test_no_time_stamps_means_no_cadence_never_zeros(gate, tmp_path):
    arm, paths = gate()
    result = fold_acceptance(arm, paths, resamples=20)
    document = result.to_json()
    assert document["step_source"] == "engine_trace"
    assert document["steps_timed"] is False
    assert document["no_times_text"] == "needs time stamps: the engine's trace has none"
    assert document["sources"]["cadence"] == "needs time stamps: the engine's trace has none"
    assert document["sources"]["timeline"] == "needs time stamps: the engine's trace has none"
    assert document["sources"]["per_position"] == "the engine's trace (VT_SPEC_TRACE stderr)"
    assert document["sources"]["accepted"] == "the engine's trace (VT_SPEC_TRACE stderr)"
    assert document["warm"]["cadence"] is None and document["all"]["cadence"] is None
    assert all(leg["cadence"] is None for leg in document["legs"])
    assert all(r["cadence"] is None for leg in result.legs for r in leg["requests"])
    assert "needs time stamps: the engine's trace has none" in markdown_record(document)
    # The verify-step rate needs only the leg windows: leg 1 has 3 steps in 2.000 s.
    assert document["legs"][1]["step_rate"] == pytest.approx(1.5)


def test_the_cli_reads_the_trace_and_the_time_axis_says_it_needs_time_stamps(
    gate, tmp_path, capsys
):
    arm, paths = gate()
    assert main([arm, *paths, "--json", str(tmp_path / "out.json"), "--details"]) == 0
    out = capsys.readouterr().out
    assert "step cadence: needs time stamps: the engine's trace has none" in out
    assert "3 other log lines" in out
    assert main([arm, *paths, "--trace", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert "the time axis needs time stamps: the engine's trace has none" in err
    assert not (tmp_path / "t.json").exists()


def test_the_kind_is_told_from_the_content(gate, tmp_path):
    _, paths = gate()
    assert all(looks_like_engine_trace(path) for path in paths)
    hook = tmp_path / "steps.jsonl"
    hook.write_text(
        '{"v":1,"w":"00000000000000a1","n":0,"t_ns":1,"pid":1,"seq":0,"proposed":1,"accepted":0}\n'
    )
    assert not looks_like_engine_trace(str(hook))


def test_the_hook_log_and_the_trace_are_not_folded_together(gate, tmp_path):
    arm, paths = gate()
    hook = tmp_path / "steps.jsonl"
    hook.write_text(
        '{"v":1,"w":"00000000000000a1","n":0,"t_ns":1,"pid":1,"seq":0,"proposed":1,"accepted":0}\n'
    )
    with pytest.raises(InputError, match="fold one source at a time"):
        fold_acceptance(arm, [*paths, str(hook)], resamples=0)


def test_steps_after_the_last_run_line_are_unattributed(gate):
    # A process killed in the middle of its next leg leaves steps with no run lines after them.
    extra = "[SPECTRACE] req=2 pos=8 k=8 ns=3 acc=2 draft=[1 2 3] emit=[1 2 3]\n"
    arm, paths = gate((PROMPT_0 + extra, PROMPT_1))
    result = fold_acceptance(arm, paths, resamples=0)
    assert result.to_json()["files"][0]["unattributed"] == 1
    assert result.fold.unattributed_steps == 1
    assert (result.legs[1]["steps"], result.legs[1]["proposed"]) == (3, 24)


# -- each refusal breaks exactly one thing -------------------------------------------------------


def broken(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "ns=4 acc=3 draft",
            "ns=4 acc=9 draft",
            ":3: 'acc' 9 exceeds 'k' 8, more draft tokens accepted than proposed",
        ),
        ("ns=4 acc=3 draft", "ns=5 acc=3 draft", ":3: ns=5 is not acc + 1 = 4"),
        ("emit=[11 12 13 19]", "emit=[11 12 13 19 20]", ":3: emit lists 5 tokens, more than"),
    ],
)
def test_impossible_counts_are_refused_naming_the_line(gate, old, new, message):
    arm, paths = gate((broken(PROMPT_0, old, new), PROMPT_1))
    with pytest.raises(RefusedError, match=re.escape(message)) as error:
        fold_acceptance(arm, paths, resamples=0, skip_bad_lines=True)  # never skipped
    assert str(error.value).startswith(paths[0] + ":3:")


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("pos=10 k=8 ns=4", "pos=10 k=eight ns=4", "field 'k' eight is not an integer"),
        ("pos=10 k=8 ns=4", "pos=10 ns=4", "no k field"),
        (
            "emit=[11 12 13 19]",
            "emit=[11 12 ...]",
            r"field 'emit' \[11 12 \.\.\.\] is not a list of token ids",
        ),
        ("pos=10 k=8 ns=4", "pos=10 k=8 k=8 ns=4", "field 'k' twice"),
        ("emit=[11 12 13 19]", "emit=[11 12 13 19", "cannot read"),
    ],
)
def test_malformed_trace_lines_are_bad_lines(gate, old, new, reason):
    arm, paths = gate((broken(PROMPT_0, old, new), PROMPT_1))
    with pytest.raises(InputError, match=reason) as error:
        fold_acceptance(arm, paths, resamples=0)
    assert str(error.value).startswith(paths[0] + ":3: malformed [SPECTRACE]")
    assert "--skip-bad-lines" in str(error.value)


def test_a_skipped_trace_line_is_counted_and_the_counters_then_disagree(gate):
    text = broken(PROMPT_0, "pos=10 k=8 ns=4", "pos=10 k=? ns=4")
    # A record without the spec counters: the skipped line is counted, the rest folded.
    document = arm_document()
    for leg in document["legs"]:
        for name in ("spec_drafts_proposed", "spec_drafts_accepted", "spec_drafted_request_steps"):
            del leg[name]
    arm, paths = gate((text, PROMPT_1), document)
    result = fold_acceptance(arm, paths, resamples=0, skip_bad_lines=True)
    assert result.fold.skipped_lines == 1
    assert (result.fold.skipped_examples[0].path, result.fold.skipped_examples[0].line) == (
        paths[0],
        3,
    )
    assert result.legs[0]["steps"] == 1  # the other step of leg 0
    # With the counters, the engine's own record says a step is missing: refused.
    arm, paths = gate((text, PROMPT_1))
    with pytest.raises(RefusedError) as error:
        fold_acceptance(arm, paths, resamples=0, skip_bad_lines=True)
    message = str(error.value)
    assert "the engine's trace disagrees with the engine's own counters on leg 0" in message
    assert "S = 1 in the engine's trace" in message and "no [SPECTRACE] line was skipped" in message


def test_a_trace_record_glued_into_another_line_is_a_bad_line(gate):
    glued = broken(PROMPT_0, "[WARN] sampler", "[WARN] samp[SPECTRACE] req=0 k=8 acc=1 emit=[1]")
    arm, paths = gate((glued, PROMPT_1))
    with pytest.raises(InputError, match=r":4: .*not at the start of its line"):
        fold_acceptance(arm, paths, resamples=0)


def test_files_and_prompts_must_be_one_to_one(gate):
    arm, paths = gate()
    with pytest.raises(RefusedError, match="1 files of the engine's trace for the 2 prompts"):
        fold_acceptance(arm, paths[:1], resamples=0)


def test_files_out_of_prompt_order_are_refused_not_swapped(gate):
    arm, paths = gate((PROMPT_1, PROMPT_0))
    with pytest.raises(RefusedError) as error:
        fold_acceptance(arm, paths, resamples=0)
    text = str(error.value)
    # Prompt 1's first leg prints prompt_tokens=40 on its line 4; leg 0 records 31.
    assert text.startswith(f"{paths[0]}:4: run=1/2 prints prompt_tokens=40, but leg 0")
    assert "records 31" in text and "out of prompt order" in text


@pytest.mark.parametrize(
    ("old", "new", "field", "line"),
    [
        ("completion_tokens=13", "completion_tokens=14", "completion_tokens=14", 11),
        ("secs=2.000 tok_s=6.500", "secs=2.001 tok_s=6.500", "secs=2.001", 11),
        ("generate_end_unix=1796000131.300000", "generate_end_unix=1796000131.300001",
         "generate_end_unix=1796000131.300001", 12),
        ("spec_drafts_accepted=10", "spec_drafts_accepted=11", "spec_drafts_accepted=11", 13),
    ],
)  # fmt: skip
def test_a_run_line_that_disagrees_with_its_leg_is_refused(gate, old, new, field, line):
    arm, paths = gate((broken(PROMPT_0, old, new), PROMPT_1))
    with pytest.raises(RefusedError) as error:
        fold_acceptance(arm, paths, resamples=0)
    assert str(error.value).startswith(f"{paths[0]}:{line}: run=2/2 prints {field}, but leg 1")


def test_a_file_with_a_leg_missing_is_refused(gate):
    cut = PROMPT_0[: PROMPT_0.index("[SPECTRACE]  req=1")]
    arm, paths = gate((cut, PROMPT_1))
    with pytest.raises(RefusedError, match="1 legs of run lines for prompt 0, whose 2 legs"):
        fold_acceptance(arm, paths, resamples=0)


def test_a_file_without_run_lines_is_refused(gate):
    only_steps = "\n".join(line for line in PROMPT_0.splitlines() if "run=" not in line) + "\n"
    arm, paths = gate((only_steps, PROMPT_1))
    with pytest.raises(RefusedError, match="no 'vllm-cli: run=r/R' lines"):
        fold_acceptance(arm, paths, resamples=0)


def test_a_run_line_after_a_later_step_is_refused(gate):
    # The spec line of run 1 moved after run 2's first step: that step's leg cannot be told.
    spec = "vllm-cli: run=1/2 spec_drafts_proposed=16 spec_drafts_accepted=4 spec_drafted_request_steps=2\n"  # noqa: E501
    first = "[SPECTRACE]  req=1  pos=8 k=8   ns=1 acc=0 draft=[5 ...] emit=[5]\n"
    moved = broken(broken(PROMPT_0, spec, ""), first, first + spec)
    arm, paths = gate((moved, PROMPT_1))
    with pytest.raises(RefusedError, match=r":8: a run line of run=1/2 after \[SPECTRACE\] line 7"):
        fold_acceptance(arm, paths, resamples=0)


def test_a_repeated_run_line_is_refused(gate):
    counts = "vllm-cli: run=2/2 finish_reason=length prompt_tokens=31 completion_tokens=13 secs=2.000 tok_s=6.500\n"  # noqa: E501
    arm, paths = gate((broken(PROMPT_0, counts, counts + counts), PROMPT_1))
    with pytest.raises(RefusedError, match=r":12: a second 'counts' run line for run=2/2"):
        fold_acceptance(arm, paths, resamples=0)


def test_runs_that_are_not_whole_prompts_are_refused(gate):
    document = arm_document()
    document["workload"]["repeat"] = 3
    arm, paths = gate(document=document)
    with pytest.raises(RefusedError, match=r"4 legs are not whole prompts of workload\.repeat = 3"):
        fold_acceptance(arm, paths, resamples=0)


# -- the worked example --------------------------------------------------------------------------


def test_the_worked_example_s_stderr_folds_as_its_hook_log_and_the_hand_figures():
    arm = str(EXAMPLE / "our-arm.json")
    stderr = sorted(str(path) for path in (EXAMPLE / "stderr").glob("prompt-*.log"))
    from_trace = fold_acceptance(arm, stderr, resamples=0).to_json()
    from_hook = fold_acceptance(arm, [str(EXAMPLE / "steps.jsonl")], resamples=0).to_json()
    per_leg = [(run, *PER_PROMPT[prompt]) for prompt in range(4) for run in range(1, REPEAT + 1)]
    for document in (from_trace, from_hook):
        assert [
            (leg["run"], leg["steps"], leg["proposed"], leg["accepted"]) for leg in document["legs"]
        ] == per_leg
        for block, sums in (("warm", WARM), ("all", ALL)):
            figures = document[block]
            assert (figures["steps"], figures["proposed"], figures["accepted"]) == sums
        assert document["warm"]["per_position"] == pytest.approx(WARM_PER_POSITION)
        assert document["warm"]["histogram"] == WARM_HISTOGRAM
    for name in ("accept_rate", "mean_acceptance_length", "completion_tokens_per_step"):
        assert from_trace["warm"][name] == from_hook["warm"][name]
    # Every step of the stderr is in a leg; each file holds 3 other log lines and a "done".
    assert [(f["unattributed"], f["run_lines"], f["other_lines"]) for f in from_trace["files"]] == [
        (0, 15, 4)
    ] * 4


def test_follow_reads_the_hook_s_logs_only(gate, capsys):
    arm, paths = gate()
    assert main([arm, *paths, "--follow", "--idle", "0.2", "--quiet"]) == 2
    assert "is folded once the gate is done, without --follow" in capsys.readouterr().err


def test_a_long_loading_log_before_the_first_trace_line_is_still_told_apart(gate):
    loading = "".join(f"[INFO] loading tensor {i} of 90000\n" for i in range(90_000))  # > 64 KiB
    arm, paths = gate((loading + PROMPT_0, PROMPT_1))
    assert looks_like_engine_trace(paths[0])
    result = fold_acceptance(arm, paths, resamples=0)
    assert result.to_json()["files"][0]["other_lines"] == 90_000 + 3


def test_run_lines_of_a_later_engine_are_taken_as_they_come(gate):
    # All fields on one line, and a fourth line of a kind this reader does not know.
    joined = broken(
        PROMPT_0,
        "vllm-cli: run=2/2 generate_start_unix=1796000129.300000 generate_end_unix="
        "1796000131.300000\nvllm-cli: run=2/2 spec_drafts_proposed=24",
        "vllm-cli: run=2/2 generate_start_unix=1796000129.300000 generate_end_unix="
        "1796000131.300000 spec_drafts_proposed=24",
    )
    joined = broken(joined, "vllm-cli: done", "vllm-cli: run=2/2 ttft_ms=81.2\nvllm-cli: done")
    arm, paths = gate((joined, PROMPT_1))
    result = fold_acceptance(arm, paths, resamples=0)
    assert [leg["steps"] for leg in result.legs] == [2, 3, 2, 3]
    assert result.to_json()["files"][0]["run_lines"] == 6
    # A disagreeing value on the joined line is still named by that line.
    wrong = broken(joined, "spec_drafts_proposed=24 spec_drafts_accepted=10",
                   "spec_drafts_proposed=24 spec_drafts_accepted=11")  # fmt: skip
    arm, paths = gate((wrong, PROMPT_1))
    with pytest.raises(RefusedError, match=r":12: run=2/2 prints spec_drafts_accepted=11"):
        fold_acceptance(arm, paths, resamples=0)


def test_the_outputs_name_the_trace_as_the_source(gate, capsys):
    arm, paths = gate()
    result = fold_acceptance(arm, paths, resamples=0)
    record = markdown_record(result.to_json())
    assert "- the engine's trace (VT_SPEC_TRACE stderr): `" in record
    assert "## Cadence\n\nneeds time stamps: the engine's trace has none." in record
    assert main([arm, *paths, "--bootstrap", "0", "--details"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "S, P, A per leg and every per-step figure from the engine's trace" in out
    assert "engine counters: checked against the engine's own counters, leg by leg" in out


def test_a_shorter_draft_counts_only_where_it_drafted(gate):
    # Leg 1's third step drafts 2 (k=2), accepting both: the warm steps propose 8, 8, 2 and
    # 8, 8, 8 and accept 0, 8, 2 and 7, 1, 4. Accepted > i: 5, 4, 3, 3, 2, 2, 2, 1; proposed
    # > i: 6, 6, then 5 from position 2 on.
    prompt = PROMPT_0.replace(
        "pos=18 k=8 ns=3 acc=2 draft=[21 22 ...]", "pos=18 k=2 ns=3 acc=2 draft=[21 22]"
    ).replace("run=2/2 spec_drafts_proposed=24", "run=2/2 spec_drafts_proposed=18")
    document = arm_document()
    document["legs"][1]["spec_drafts_proposed"] = 18
    arm, paths = gate((prompt, PROMPT_1), document)
    warm = fold_acceptance(arm, paths, resamples=0).warm
    assert warm["proposed"] == 42
    assert warm["per_position"] == pytest.approx([n / 6 for n in (5, 4, 3, 3, 2, 2, 2, 1)])
    assert warm["per_position_of_proposed"] == pytest.approx(
        [5 / 6, 4 / 6, 3 / 5, 3 / 5, 2 / 5, 2 / 5, 2 / 5, 1 / 5]
    )
    assert list(warm["histogram"]) == [1, 1, 1, 0, 1, 0, 0, 1, 1]
