"""Our fold beside the oracles, through the command: the gate's worked example by hand."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest

from fold.api import fold_acceptance
from fold.cli import main
from fold.compare import our_figures

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OURS = [
    str(FIXTURES / "gate-example" / "our-arm.json"),
    str(FIXTURES / "gate-example" / "steps.jsonl"),
]
VS = ["--vs", f"vllm={FIXTURES / 'oracles' / 'vllm-arm.json'}",
      "--vs", f"sglang={FIXTURES / 'oracles' / 'sglang-legs.jsonl'}"]  # fmt: skip


def test_gate_example_oracles_block(capsys):
    assert main([*OURS, *VS, "--json", "-"]) == 0
    block = orjson.loads(capsys.readouterr().out)["oracles"]
    rows = {row["name"]: row for row in block["rows"]}
    assert [row["name"] for row in block["rows"]] == ["ours", "vllm", "sglang"]
    # vLLM: A = 1000, P = 2170, S = 310 -> 46.08% and 4.2258.
    assert rows["vllm"]["accept_rate"] == pytest.approx(1000 / 2170)
    assert rows["vllm"]["mean_acceptance_length"] == pytest.approx(1 + 1000 / 310)
    # Our warm legs were built with the same counts, at 14.951 tok/s.
    assert (rows["ours"]["steps"], rows["ours"]["proposed"], rows["ours"]["accepted"]) == (
        310,
        2170,
        1000,
    )
    assert rows["ours"]["output_throughput_tok_s"] == pytest.approx(14.951)
    # SGLang's bare accept lengths stay in their own unit: mean of 4.66, 4.67, 4.68 (warm).
    assert rows["sglang"]["mean_acceptance_length"] is None
    assert rows["sglang"]["completion_tokens_per_step"] == pytest.approx(4.67)
    vllm = block["gaps"]["vllm"]
    assert vllm["ratio"] == pytest.approx(14.951 / 16.111)
    assert vllm["acceptance_factor"] == pytest.approx(1.0)
    assert vllm["speed_factor"] * vllm["acceptance_factor"] == pytest.approx(vllm["ratio"])
    assert "execution speed" in vllm["verdict"]
    sglang = block["gaps"]["sglang"]
    assert sglang["ratio"] == pytest.approx(14.951 / 16.034)
    # SGLang is known only in its own unit, so the split is in that unit: our completion
    # tokens per step over the warm legs are (6 prefill tokens + 310 steps + 1000 accepted) /
    # 310 = 1316/310 = 4.2452, against SGLang's 4.67.
    assert sglang["unit"] == "completion tokens per verify step (SGLang's unit)"
    assert sglang["acceptance_factor"] == pytest.approx((1316 / 310) / 4.67)
    assert sglang["speed_factor"] == pytest.approx((14.951 / 16.034) / ((1316 / 310) / 4.67))
    assert rows["ours"]["completion_tokens_per_step"] == pytest.approx(1316 / 310)
    assert block["gaps"]["vllm"]["populations"] == {
        "ours": "warm legs",
        "oracle": "since server start",
        "oracle_detail": "cumulative since the engine started (no legs to say more)",
        "same": False,
    }
    check = block["step_rate_check"]
    # Measured: 310 warm steps over the warm windows; derived: 14.951 / 4.2258.
    assert check["expected_steps_per_s"] == pytest.approx(14.951 / (1 + 1000 / 310))
    assert check["flagged"] is False


def test_gate_example_table_reads_46_1_and_4_23(capsys):
    assert main([*OURS, *VS]) == 0
    out = capsys.readouterr().out
    vllm_row = next(line for line in out.splitlines() if line.strip().startswith("vllm"))
    assert "46.1%" in vllm_row and "4.23" in vllm_row
    assert "not recorded" in out


def test_per_position_counts_of_our_row_come_from_the_histogram():
    result = fold_acceptance(OURS[0], [OURS[1]])
    ours = our_figures(result)
    histogram = result.warm["histogram"]
    for position, count in enumerate(ours.per_position):
        assert count == sum(histogram[position + 1 :])
    assert sum(ours.per_position) == ours.accepted
    assert math.isclose(ours.mean_acceptance_length, result.warm["mean_acceptance_length"])


def test_oracle_names_must_be_distinct(capsys):
    vllm = f"vllm={FIXTURES / 'oracles' / 'vllm-arm.json'}"
    assert main([*OURS, "--vs", vllm, "--vs", vllm]) == 2
    assert "taken" in capsys.readouterr().err
    assert main([*OURS, "--vs", f"ours={FIXTURES / 'oracles' / 'vllm-arm.json'}"]) == 2
