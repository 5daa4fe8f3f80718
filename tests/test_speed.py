"""The speed factor split into slower steps and time outside the decode loop, by hand.

Our warm legs are ``cadence_logs.stall_and_pace_run``: 18 request-seconds, of which 4 before
the first steps (3 + 0.5 + 0.5), 4.2 in tails (2 + 1.5 + 0.7) and 1.95 in stalls.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from cadence_logs import stall_and_pace_run
from rich.console import Console

from fold.api import fold_acceptance
from fold.cli import main
from fold.compare.gap import attribute_gap, comparison_block
from fold.compare.speed import split_speed
from fold.inputs.oracles import arm_from_counts
from fold.present.comparison import comparison
from fold.present.speed import speed_summary

approx = pytest.approx


def arm(name: str, tok_s: float, accepted: int = 200):
    return arm_from_counts(name, name, tok_s=tok_s, steps=100, proposed=400, accepted=accepted)


@pytest.fixture
def warm_cadence(tmp_path: Path) -> dict:
    arm_path, log = stall_and_pace_run(tmp_path)
    return fold_acceptance(arm_path, [log]).warm["cadence"]


def test_half_the_oracle_speed_is_mostly_time_outside_the_decode_loop(warm_cadence):
    # Same acceptance, half the tok/s: speed factor 0.5 over leg windows.
    split = split_speed(attribute_gap(arm("ours", 10.0), arm("vllm", 20.0)), warm_cadence, "vllm")
    assert split.leg_factor == approx(0.5)
    assert split.shares == approx(
        {"before_first_step": 4 / 18, "stalls": 1.95 / 18, "tail": 4.2 / 18}
    )
    # Decode windows are 18 - 4 - 4.2 = 9.8 of 18 s; steady decoding 9.8 - 1.95 = 7.85.
    assert split.decode_factor == approx(0.5 * 18 / 9.8)  # 0.918
    assert split.steady_factor == approx(0.5 * 18 / 7.85)  # 1.146: our steps are faster
    # log 0.5 = log(1.146) + log(7.85 / 18): steps -19.7%, outside the loop 119.7%, shared
    # 4 : 1.95 : 4.2 among start-up, stalls and tail.
    outside = math.log(7.85 / 18) / math.log(0.5)
    assert split.parts == approx(
        {
            "steps": math.log(0.5 * 18 / 7.85) / math.log(0.5),
            "before_first_step": outside * 4 / 10.15,
            "stalls": outside * 1.95 / 10.15,
            "tail": outside * 4.2 / 10.15,
        }
    )
    assert sum(split.parts.values()) == approx(1.0)
    assert speed_summary(split.to_json()) == (
        "speed: 50% tail, 47% start-up, 23% stalls, faster steps offset 20%"
    )
    assert "vllm records no per-step times" in split.oracle_lacks[0]


def test_speed_within_tolerance_is_not_split(warm_cadence):
    split = split_speed(
        attribute_gap(arm("ours", 10.0, accepted=100), arm("vllm", 20.0)), warm_cadence, "vllm"
    )
    # 1 + 100/100 = 2 against 1 + 200/100 = 3: acceptance 2/3, speed 0.5 / (2/3) = 0.75
    assert split.leg_factor == approx(0.75)
    equal = split_speed(
        attribute_gap(arm("ours", 10.0, accepted=100), arm("o", 15.0)), warm_cadence, "sglang"
    )
    assert equal.leg_factor == approx(1.0) and equal.parts is None
    assert "o (sglang) records no per-step times" in equal.oracle_lacks[0]


def test_an_oracle_without_a_speed_factor_says_why(warm_cadence):
    oracle = arm_from_counts("sglang", "sglang", tok_s=20.0)
    split = split_speed(attribute_gap(arm("ours", 10.0), oracle), warm_cadence, "sglang")
    assert split.leg_factor is None and split.decode_factor is None and split.parts is None
    assert any("mean acceptance length not recorded" in lack for lack in split.oracle_lacks)


def test_the_command_prints_and_writes_the_split(tmp_path: Path, capsys):
    arm_path, log = stall_and_pace_run(tmp_path)
    result = fold_acceptance(arm_path, [log])
    steps, proposed, accepted = (result.warm[k] for k in ("steps", "proposed", "accepted"))
    tok_s = result.warm["output_throughput_tok_s"]
    oracle = tmp_path / "vllm.json"
    oracle.write_text(
        json.dumps(
            {
                "output_throughput_tok_s": 2 * tok_s,
                "metrics": {
                    "vllm:spec_decode_num_drafts": steps,
                    "vllm:spec_decode_num_draft_tokens": proposed,
                    "vllm:spec_decode_num_accepted_tokens": accepted,
                },
            }
        )
    )
    out_json = tmp_path / "fold.json"
    assert (
        main([arm_path, log, "--vs", f"vllm={oracle}", "--json", str(out_json), "--details"]) == 0
    )
    out = capsys.readouterr().out
    assert "speed: 50% tail, 47% start-up, 23% stalls, faster steps offset 20%" in " ".join(
        out.split()
    )
    speed = json.loads(out_json.read_text())["comparison"]["speed"]["vllm"]
    assert speed["leg_factor"] == approx(0.5)
    assert speed["decode_factor"] == approx(0.5 * 18 / 9.8)


@pytest.mark.parametrize("width", [80, 50, 30])
def test_the_split_comes_before_the_verdict_with_every_figure_whole(warm_cadence, width):
    gap = attribute_gap(arm("ours", 10.0), arm("vllm", 20.0))
    split = split_speed(gap, warm_cadence, "vllm")
    block = comparison_block([arm("ours", 10.0), arm("vllm", 20.0)], {"vllm": gap})
    block["speed"] = {"vllm": split.to_json()}
    console = Console(width=width, record=True, color_system=None)
    console.print(comparison({"comparison": block}, details=True))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    words = text.split()
    # By hand (see the first test): 0.5, 0.5 * 18 / 9.8 and 0.5 * 18 / 7.85; our shares
    # 4 / 18, 1.95 / 18 and 4.2 / 18 of the warm leg time.
    for figure in ("0.500", "0.918", "1.146", "22.2%", "10.8%", "23.3%"):
        assert figure in words, (figure, text)
    # the verdicts come last, so that they are what stays on screen
    verdict = text.index("verdict:")
    assert verdict > text.index("0.918") and verdict > text.index("22.2%")
    assert text.index("speed: 50% tail") < verdict
