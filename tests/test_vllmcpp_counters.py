"""The worked example in vllm.cpp's layout (fixtures/vllmcpp), folded with its hook log and from
the record's counters alone: the same hand figures either way (fixtures/vllmcpp/README.md),
and a one-leg disagreement refused naming the leg's prompt."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from vllmcpp import canonical, refold

from fold.api import fold_acceptance
from fold.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "fixtures" / "vllmcpp"
ARM = str(EXAMPLE / "our-arm.json")
STEPS = str(EXAMPLE / "steps.jsonl")
VLLM_GATE = str(ROOT / "fixtures" / "oracles" / "vllm-gate-arm.json")

# One run of each prompt, from the README's table: (S, P, A).
PER_PROMPT = [(21, 147, 42), (9, 63, 54), (18, 126, 45), (27, 189, 36)]


@pytest.fixture(scope="module", params=["hook log", "counters only"])
def folded(request):
    logs = [STEPS] if request.param == "hook log" else []
    return request.param, fold_acceptance(ARM, logs)


def test_both_ways_give_the_readmes_figures(folded):
    way, result = folded
    for figures in result.legs:
        steps, proposed, accepted = PER_PROMPT[figures["index"] // 5]
        assert (figures["steps"], figures["proposed"], figures["accepted"]) == (
            steps, proposed, accepted
        ), way  # fmt: skip
        assert figures["run"] == figures["index"] % 5 + 1
    warm, every = result.warm, result.all
    assert (warm["steps"], warm["proposed"], warm["accepted"]) == (300, 2100, 708)
    assert (every["steps"], every["proposed"], every["accepted"]) == (375, 2625, 885)
    for fold in (warm, every):
        assert fold["accept_rate"] == 708 / 2100  # 885/2625 is the same ratio
        assert fold["mean_acceptance_length"] == pytest.approx(1 + 708 / 300, abs=1e-12)
        # 63 verify-step tokens + 1 prefill token per leg over its steps: 16 x 64 / 300
        assert fold["completion_tokens_per_step"] == pytest.approx(64 / 75 * 4, abs=1e-12)
    assert warm["output_throughput_tok_s"] == pytest.approx((11.100 + 12.094) / 2, abs=1e-9)
    if way == "hook log":
        assert [round(rate, 2) for rate in warm["per_position"]] == [
            0.88, 0.64, 0.36, 0.24, 0.12, 0.12, 0.0
        ]  # fmt: skip
        assert list(warm["histogram"]) == [36, 72, 84, 36, 36, 0, 36, 0]
        assert result.counter_check["legs_checked"] == 20
    else:
        assert warm["per_position"] is None and warm["histogram"] is None
        assert result.counter_check["legs_checked"] == 0
    assert result.counter_check["spec_acceptance"] == "equal"


def test_both_ways_give_the_same_intervals(folded):
    _, result = folded
    other = fold_acceptance(ARM, [] if result.fold.from_log else [STEPS])
    for name in ("warm", "all"):
        for key, value in getattr(result, name).items():
            if key.endswith("_ci"):
                assert getattr(other, name)[key] == value, (name, key)


def test_the_comparison_with_the_gates_vllm_arm_is_the_same_both_ways(capsys):
    outputs = []
    for logs in ([STEPS], []):
        assert main([ARM, *logs, "--vs", f"vllm={VLLM_GATE}", "--json", "-"]) == 0
        outputs.append(orjson.loads(capsys.readouterr().out)["comparison"]["gaps"]["vllm"])
    with_log, alone = outputs
    assert with_log == alone
    # over all 20 legs (vLLM's counters span its legs): 1 + 885/375 = 3.36 against vLLM's
    # 1 + 1363/430; r = 11.597 / 16.111
    assert alone["acceptance_factor"] == pytest.approx((1 + 885 / 375) / (1 + 1363 / 430))
    assert alone["ratio"] == pytest.approx(((11.100 + 12.094) / 2) / 16.111, rel=1e-4)


def test_the_table_counters_only(capsys):
    assert main([ARM, "--bootstrap", "0"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "warm 16 300 2100 708 33.7% 3.36 11.597 3.41" in out
    assert "all 20 375 2625 885 33.7% 3.36 11.059 3.41" in out
    assert "folded from the record's counters alone (no step log)" in out


def test_one_leg_the_log_disagrees_with_names_its_prompt(tmp_path, capsys):
    document = json.loads(Path(ARM).read_bytes())
    document["legs"][7]["spec_drafts_accepted"] += 1  # the engine counted one more
    arm = tmp_path / "our-arm.json"
    arm.write_bytes(canonical(refold(document)))
    assert main([str(arm), STEPS, "--bootstrap", "0"]) == 1
    message = " ".join(capsys.readouterr().err.split())
    assert (
        "the step log disagrees with the engine's own counters on leg 7 (run 3 of prompt 1, "
        '"Write a Python function that returns th…"): spec_drafts_accepted = 55 in the '
        "record, A = 54 in the step log. Check that the step log comes from this run"
    ) in message
    # without the log the record folds as the engine counted it
    assert fold_acceptance(str(arm), [], resamples=0).warm["accepted"] == 709
