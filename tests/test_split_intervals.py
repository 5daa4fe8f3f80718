"""Intervals on the oracle arms and the split, the verdict that reads from them, and the
command's --bootstrap/--seed, table and JSON."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from fold.cli import main
from fold.compare.gap import ACCEPTANCE, NO_GAP, SPEED, attribute_gap
from fold.compare.gap_intervals import (
    BOTH_ARMS,
    OURS_ONLY,
    SplitIntervals,
    arm_replicates,
    split_intervals,
)
from fold.folding.uncertainty import Leg, Replicates, bootstrap
from fold.inputs.oracles import arm_from_counts, load_oracle, read_oracle

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ORACLES = FIXTURES / "oracles"
GATE = FIXTURES / "gate-example"
OURS_ARGS = [str(GATE / "our-arm.json"), str(GATE / "steps.jsonl")]


# ----------------------------------------------------------------------------------------------
# Oracle legs
# ----------------------------------------------------------------------------------------------


def test_sglang_records_are_legs_with_their_counts_and_tok_s() -> None:
    legs = load_oracle("sg", ORACLES / "sglang-legs.jsonl").legs
    # the three warm records (run > 1) carry tok/s and no counts
    assert legs is not None
    assert [leg.tok_s for leg in legs] == [16.010, 16.034, 16.051]
    assert all(not leg.requests for leg in legs)
    counted = load_oracle("sg", ORACLES / "sglang-requests.jsonl").legs
    assert counted is not None
    # 257 completion tokens over 60 verify steps: 257 - 1 - 60 = 196 accepted drafts
    assert counted[0].requests == {"steps": (60,), "accepted": (196,)}
    assert counted[0].values == {"completion_tokens": 257, "steps": 60}


def test_counters_are_totals_and_have_no_legs() -> None:
    assert load_oracle("v", ORACLES / "vllm-arm.json").legs is None
    assert load_oracle("l", ORACLES / "llamacpp-arm.json").legs is None


def test_an_arm_record_whose_tok_s_is_its_legs_median_has_legs() -> None:
    text = orjson.dumps(
        {
            "legs": [
                {"run": 1, "tok_s": 9.0},
                {"run": 2, "tok_s": 16.0},
                {"run": 2, "tok_s": 16.4},
            ],
            "metrics": {
                "vllm:spec_decode_num_drafts": 10,
                "vllm:spec_decode_num_draft_tokens": 70,
                "vllm:spec_decode_num_accepted_tokens": 30,
            },
        }
    ).decode()
    figures = read_oracle("v", text, "vllm")
    assert figures.legs is not None and [leg.tok_s for leg in figures.legs] == [16.0, 16.4]
    # a recorded figure must be the warm legs' median (16.2), so the legs still stand behind it
    with_total = orjson.loads(text) | {"output_throughput_tok_s": 16.2}
    legs = read_oracle("v", orjson.dumps(with_total).decode(), "vllm").legs
    assert legs is not None and [leg.tok_s for leg in legs] == [16.0, 16.4]
    # the counters are totals: no leg carries a count
    assert all(not leg.requests and not leg.values for leg in legs)


# ----------------------------------------------------------------------------------------------
# The split's intervals
# ----------------------------------------------------------------------------------------------


def same_legs(count: int, tok_s: float, accepted: int, steps: int = 10) -> list[Leg]:
    return [
        Leg(
            requests={"steps": [steps], "accepted": [accepted], "proposed": [7 * steps]},
            tok_s=tok_s,
        )
        for _ in range(count)
    ]


def test_identical_legs_on_both_sides_give_a_point_split() -> None:
    ours = bootstrap(same_legs(5, 15.0, 30), {"w": range(5)}, 200)["w"]
    oracle = arm_replicates(same_legs(4, 16.0, 32), 200, seed=1, arm=1)
    found = split_intervals(ours, oracle, 16.0, 4.2)
    assert found is not None and found.from_both_arms
    # r = 15/16; af = (1 + 30/10) / (1 + 32/10) = 4 / 4.2; sf = r / af
    assert found.ratio == pytest.approx((15 / 16, 15 / 16))
    assert found.acceptance_factor == pytest.approx((4 / 4.2, 4 / 4.2))
    assert found.speed_factor == pytest.approx((15 / 16 * 4.2 / 4, 15 / 16 * 4.2 / 4))


def test_an_oracle_by_totals_is_taken_as_exact_and_labelled() -> None:
    speeds = [14.0, 14.5, 15.0, 15.5, 16.0]
    legs = [Leg(requests={"steps": [10], "accepted": [30]}, tok_s=s) for s in speeds]
    ours = bootstrap(legs, {"w": range(5)}, 1000, seed=3)["w"]
    found = split_intervals(ours, None, 16.0, 4.0)
    assert found is not None and not found.from_both_arms
    assert found.basis == dict.fromkeys(("ratio", "acceptance_factor", "speed_factor"), OURS_ONLY)
    # the oracle is a constant, so r's interval is ours divided by it, end for end
    low, high = ours.interval("output_throughput_tok_s")
    assert found.ratio == pytest.approx((low / 16.0, high / 16.0))
    assert found.acceptance_factor == (1.0, 1.0)  # ours has the same 1 + A/S on every leg


def test_only_the_resampled_sides_count_as_both_arms() -> None:
    ours = bootstrap(same_legs(3, 15.0, 30), {"w": range(3)}, 100)["w"]
    oracle = Replicates(100, {"output_throughput_tok_s": np.full(100, 16.0)})
    found = split_intervals(ours, oracle, 16.0, 4.0)
    assert found is not None
    assert found.basis == {"ratio": BOTH_ARMS, "acceptance_factor": OURS_ONLY,
                           "speed_factor": OURS_ONLY}  # fmt: skip
    assert not found.from_both_arms
    assert split_intervals(None, oracle, 16.0, 4.0) is None


# ----------------------------------------------------------------------------------------------
# The verdict
# ----------------------------------------------------------------------------------------------


def arms(our_tok_s: float, our_length: float, oracle_tok_s: float, oracle_length: float):
    # 100 steps; A chosen so that 1 + A/S is the given length
    ours = arm_from_counts("ours", "ours", tok_s=our_tok_s, steps=100, proposed=700,
                           accepted=round((our_length - 1) * 100))  # fmt: skip
    oracle = arm_from_counts("vllm", "vllm", tok_s=oracle_tok_s, steps=100, proposed=700,
                             accepted=round((oracle_length - 1) * 100))  # fmt: skip
    return ours, oracle


def both(ratio, acceptance, speed) -> SplitIntervals:
    return SplitIntervals(ratio, acceptance, speed, dict.fromkeys(
        ("ratio", "acceptance_factor", "speed_factor"), BOTH_ARMS))  # fmt: skip


def test_verdict_reads_from_intervals_when_both_arms_have_them() -> None:
    ours, oracle = arms(14.848, 4.23, 16.0, 4.23)  # r = 0.928, af = 1, sf = 0.928
    gap = attribute_gap(ours, oracle, intervals=both((0.91, 0.945), (0.981, 1.019),
                                                    (0.911, 0.944)))  # fmt: skip
    assert gap.dominant == SPEED
    assert gap.verdict == (
        "acceptance factor 1.000 [0.981, 1.019]: not distinguishable from vllm; "
        "speed factor 0.928 [0.911, 0.944]: the gap is speed"
    )
    assert gap.to_json()["acceptance_factor_ci"] == [0.981, 1.019]
    assert gap.to_json()["ci_basis"]["speed_factor"] == BOTH_ARMS


def test_a_wide_acceptance_interval_outranks_a_tolerance_it_exceeds() -> None:
    # af = 4.0 / 4.2 = 0.952 is 4.8% off, beyond the 2% tolerance, but its interval holds 1
    ours, oracle = arms(15.0, 4.0, 16.0, 4.2)
    gap = attribute_gap(ours, oracle, 0.02, both((0.90, 0.97), (0.90, 1.01), (0.95, 0.99)))
    assert gap.dominant == SPEED and "not distinguishable from vllm" in gap.verdict
    without = attribute_gap(ours, oracle, 0.02)  # the tolerance alone: speed is within 2%
    assert without.dominant == ACCEPTANCE


def test_verdict_speed_equal_acceptance_differs() -> None:
    ours, oracle = arms(15.0, 4.0, 16.0, 4.2)
    gap = attribute_gap(ours, oracle, intervals=both((0.9, 0.97), (0.93, 0.97), (0.97, 1.01)))
    assert gap.dominant == ACCEPTANCE and gap.verdict.endswith("the gap is acceptance")


def test_verdict_no_gap_when_the_ratio_interval_holds_one() -> None:
    ours, oracle = arms(15.0, 4.0, 15.2, 4.0)
    gap = attribute_gap(ours, oracle, intervals=both((0.96, 1.01), (0.99, 1.01), (0.96, 1.01)))
    assert gap.dominant == NO_GAP and "not distinguishable from vllm" in gap.verdict


def test_verdict_both_factors_differ() -> None:
    # r = 12/16 = 0.75; af = 3.6/4.2 = 0.857 (log -0.154); sf = 0.875 (log -0.134)
    ours, oracle = arms(12.0, 3.6, 16.0, 4.2)
    gap = attribute_gap(ours, oracle, intervals=both((0.7, 0.8), (0.82, 0.89), (0.85, 0.9)))
    assert gap.dominant == ACCEPTANCE and "both differ from vllm" in gap.verdict


def test_ours_only_intervals_leave_the_tolerance_verdict_alone() -> None:
    ours, oracle = arms(14.848, 4.23, 16.0, 4.23)
    plain = attribute_gap(ours, oracle)
    labelled = SplitIntervals((0.9, 0.95), (0.99, 1.01), (0.9, 0.95), dict.fromkeys(
        ("ratio", "acceptance_factor", "speed_factor"), OURS_ONLY))  # fmt: skip
    gap = attribute_gap(ours, oracle, intervals=labelled)
    assert gap.verdict == plain.verdict and gap.dominant == plain.dominant
    assert gap.to_json()["ci_basis"]["ratio"] == OURS_ONLY


# ----------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------


def run_json(capsys, *extra: str) -> dict:
    assert main([*OURS_ARGS, "--json", "-", *extra]) == 0
    return orjson.loads(capsys.readouterr().out)


def test_seed_and_bootstrap_options(capsys) -> None:
    vs = [
        "--vs",
        f"vllm={ORACLES / 'vllm-arm.json'}",
        "--vs",
        f"sg={ORACLES / 'sglang-legs.jsonl'}",
    ]
    first = run_json(capsys, *vs, "--seed", "5")
    assert first == run_json(capsys, *vs, "--seed", "5")
    other = run_json(capsys, *vs, "--seed", "6")

    def intervals(document: dict) -> list:
        return [value for fold in ("warm", "all") for key, value in document[fold].items()
                if key.endswith("_ci")]  # fmt: skip

    assert intervals(first) != intervals(other)
    assert first["bootstrap"]["seed"] == 5
    rows = {row["name"]: row for row in first["comparison"]["rows"]}
    assert rows["vllm"]["output_throughput_tok_s_ci"] is None
    assert rows["vllm"]["ci_note"] == "totals_only"
    assert rows["sg"]["output_throughput_tok_s_ci"] is not None
    # the split is in SGLang's unit, whose per-leg accept lengths are resampled too
    assert first["comparison"]["gaps"]["sg"]["ci_basis"] == {
        "ratio": BOTH_ARMS,
        "acceptance_factor": BOTH_ARMS,
        "speed_factor": BOTH_ARMS,
    }
    assert first["comparison"]["gaps"]["vllm"]["ci_basis"]["ratio"] == OURS_ONLY
    none = run_json(capsys, *vs, "--bootstrap", "0")
    assert none["warm"]["mean_acceptance_length_ci"] is None
    assert none["comparison"]["gaps"]["vllm"]["ratio_ci"] is None
    # the figures themselves do not move with the bootstrap
    for key in ("accept_rate", "mean_acceptance_length", "output_throughput_tok_s"):
        assert none["warm"][key] == first["warm"][key]
    assert main([*OURS_ARGS, "--bootstrap", "-1"]) == 2
    assert "--bootstrap" in capsys.readouterr().err
    assert main([*OURS_ARGS, "--seed", "-3"]) == 2
    assert "--seed" in capsys.readouterr().err


def test_table_with_intervals_fits_80_columns() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "fold.cli", *OURS_ARGS,
         "--vs", f"vllm={ORACLES / 'vllm-arm.json'}",
         "--vs", f"sglang={ORACLES / 'sglang-legs.jsonl'}", "--details"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "COLUMNS": "80", "TERM": "xterm-256color"},
    )  # fmt: skip
    lines = completed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(line.split()[:1] == ["±"] for line in lines)  # the folds' ± rows
    assert "95% intervals (both arms):" in completed.stdout
    assert "95% intervals (ours only: vllm by totals):" in completed.stdout
    start = next(i for i, line in enumerate(lines) if "Throughput and acceptance" in line)
    vllm_row = lines.index(next(line for line in lines[start:] if line.split()[:1] == ["vllm"]))
    # the vllm row's "not recorded" may wrap; its ± row comes next
    below = next(line for line in lines[vllm_row + 1 :] if line.split()[:1] == ["±"])
    assert below.split() == ["±", "totals"]


def test_the_annotated_record_carries_the_intervals(tmp_path, capsys) -> None:
    out = tmp_path / "annotated.json"
    document = run_json(capsys, "--annotate", str(out))
    block = orjson.loads(out.read_bytes())["acceptance"]
    for fold in ("warm", "all"):
        for figure in ("accept_rate", "mean_acceptance_length", "output_throughput_tok_s"):
            assert block[fold][f"{figure}_ci"] == document[fold][f"{figure}_ci"]
            assert block[fold][f"{figure}_ci"] is not None
    assert block["bootstrap"] == document["bootstrap"]


def test_sglang_legs_with_counts_give_a_verdict_from_both_arms(tmp_path, capsys) -> None:
    # Six warm SGLang legs with counts: 1 + A/S = 1 + 1000/310-ish like ours, tok/s about 16.1.
    legs = tmp_path / "sglang.jsonl"
    records = [
        {"run": 2 + i % 2, "tok_s": 16.0 + 0.05 * i, "spec_verify_ct": 52,
         "spec_accepted_drafts": 166 + i % 3, "completion_tokens": 52 + 166 + i % 3 + 1}
        for i in range(6)
    ]  # fmt: skip
    legs.write_bytes(b"\n".join(orjson.dumps(record) for record in records) + b"\n")
    document = run_json(capsys, "--vs", f"sg={legs}")
    gap = document["comparison"]["gaps"]["sg"]
    assert gap["ci_basis"] == dict.fromkeys(
        ("ratio", "acceptance_factor", "speed_factor"), BOTH_ARMS
    )
    low, high = gap["acceptance_factor_ci"]
    # both arms accept about 3.2 drafts a step: the factor's interval holds 1
    assert low <= 1 <= high
    assert gap["speed_factor_ci"][1] < 1  # ours is about 7% slower per step
    assert gap["dominant"] == SPEED
    assert gap["verdict"].startswith("acceptance factor ")
    assert "not distinguishable from sg; speed factor" in gap["verdict"]
    assert gap["verdict"].endswith("the gap is speed")


def test_a_single_warm_leg_has_no_interval_and_says_why(tmp_path, capsys) -> None:
    arm = tmp_path / "arm.json"
    arm.write_bytes(
        orjson.dumps({"legs": orjson.loads((GATE / "our-arm.json").read_bytes())["legs"]})
    )
    argv = [str(arm), OURS_ARGS[1], "--warm", "run > 1 AND tok_s > 15.05", "--json", "-",
            "--vs", f"sg={ORACLES / 'sglang-legs.jsonl'}"]  # fmt: skip
    assert main(argv) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert document["warm"]["legs"] == [8]
    assert document["warm"]["accept_rate_ci"] is None  # one leg of one request
    assert document["all"]["accept_rate_ci"] is not None
    ours = document["comparison"]["rows"][0]
    assert ours["ci_note"] == "one_leg"
    assert document["comparison"]["gaps"]["sg"]["ratio_ci"] is None
