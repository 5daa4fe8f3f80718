"""Intervals on the oracle shapes that have legs, over the population the comparison chose.

Legs are checked against the fixtures' fields read by hand; intervals against a plain loop
over the same draws (one request per oracle leg, so a resample is a draw of legs), or against
values fixed by construction (zero width, pairing).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from fold.cli import main
from fold.folding.uncertainty import bootstrap, fold_replicates
from fold.inputs.leg_sums import Leg
from fold.inputs.oracles import load_oracle, read_oracle
from fold.present.table import plus_minus

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ORACLES = FIXTURES / "oracles"
GATE = FIXTURES / "gate-example"
OURS_ARGS = [str(GATE / "our-arm.json"), str(GATE / "steps.jsonl")]


def run_json(capsys, *extra: str) -> dict:
    assert main([*OURS_ARGS, "--json", "-", *extra]) == 0
    return orjson.loads(capsys.readouterr().out)


def plain_interval(values: list[float]) -> list[float]:
    """The central 95% of the defined resamples (an undefined one is NaN)."""
    defined = [value for value in values if value == value]
    assert len(defined) * 2 >= len(values)
    low, high = np.quantile(np.asarray(defined), [0.025, 0.975])
    return [float(low), float(high)]


def plain_oracle_resamples(legs: list[dict], resamples: int, seed: int, arm: int) -> dict:
    """A loop over the oracle's stage-1 draws (its own stream: [seed, arm]); each leg is one
    request, so nothing is redrawn inside it. A/P and 1 + A/S as ratios of sums, tok/s the
    median of the drawn legs that have one."""
    streams = np.random.SeedSequence([seed, arm]).spawn(1 + len(legs))
    draws = np.random.default_rng(streams[0]).integers(0, len(legs), size=(resamples, len(legs)))
    found: dict[str, list[float]] = {"accept_rate": [], "tok_s": [], "length": [], "mean": []}
    for row in draws:
        drawn = [legs[int(i)] for i in row]
        if all("proposed" in leg for leg in drawn):
            proposed = sum(leg["proposed"] for leg in drawn)
            accepted = sum(leg["accepted"] for leg in drawn)
            found["accept_rate"].append(accepted / proposed if proposed else float("nan"))
        if all("steps" in leg for leg in drawn):
            steps = sum(leg["steps"] for leg in drawn)
            found["length"].append(1 + sum(leg["accepted"] for leg in drawn) / steps)
        if all("accept_length" in leg for leg in drawn):
            found["mean"].append(statistics.fmean(leg["accept_length"] for leg in drawn))
        speeds = [leg["tok_s"] for leg in drawn if leg.get("tok_s") is not None]
        found["tok_s"].append(statistics.median(speeds) if speeds else float("nan"))
    return found


# ----------------------------------------------------------------------------------------------
# Which shapes have legs, and what each leg carries
# ----------------------------------------------------------------------------------------------


def test_the_gate_vllm_arm_has_its_warm_legs_tok_s_and_no_counts() -> None:
    legs = load_oracle("g", ORACLES / "vllm-gate-arm.json").legs
    assert legs is not None
    # runs 2 and 3 of records 0, 1, 2, in file order
    assert [leg.tok_s for leg in legs] == [16.05, 16.111, 16.111, 16.2, 16.0, 16.3]
    assert all(not leg.requests and not leg.values for leg in legs)


def test_sglang_responses_are_legs_with_their_counts() -> None:
    legs = load_oracle("s", ORACLES / "sglang-generate-0.5.23.json").legs
    assert legs is not None and len(legs) == 2
    # meta_info of the two responses: S 60 and 30, P 420 and 210, A 196 and 98
    assert [{name: list(found) for name, found in leg.requests.items()} for leg in legs] == [
        {"steps": [60], "proposed": [420], "accepted": [196]},
        {"steps": [30], "proposed": [210], "accepted": [98]},
    ]
    assert [dict(leg.values) for leg in legs] == [
        {"completion_tokens": 257, "steps": 60},
        {"completion_tokens": 129, "steps": 30},
    ]
    assert all(leg.tok_s is None for leg in legs)  # /generate responses carry no tok/s


def test_sglang_accepted_is_derived_per_leg_as_for_the_pooled_figure() -> None:
    legs = load_oracle("s", ORACLES / "sglang-generate-0.5.3.jsonl").legs
    assert legs is not None
    pooled = load_oracle("s", ORACLES / "sglang-generate-0.5.3.jsonl")
    # 0.5.3 writes only spec_verify_ct: A = completion_tokens - 1 - spec_verify_ct, per response
    assert sum(leg.requests["accepted"][0] for leg in legs) == pooled.accepted == 294
    assert "proposed" not in legs[0].requests


def test_llamacpp_responses_are_legs_with_p_a_and_speed() -> None:
    legs = load_oracle("l", ORACLES / "llamacpp-completions.json").legs
    assert legs is not None
    # timings: (448, 301, 64.0), (896, 640, 80.0), and one without draft_n (drafted nothing)
    assert [{name: list(found) for name, found in leg.requests.items()} for leg in legs] == [
        {"proposed": [448], "accepted": [301]},
        {"proposed": [896], "accepted": [640]},
        {"proposed": [0], "accepted": [0]},
    ]
    assert [leg.tok_s for leg in legs] == [64.0, 80.0, 64.0]


def test_a_llamacpp_gate_arm_takes_its_legs_tok_s() -> None:
    timings = {"predicted_n": 128, "predicted_ms": 2000.0, "predicted_per_second": 64.0,
               "draft_n": 448, "draft_n_accepted": 301}  # fmt: skip
    legs = [
        {"run": 1, "tok_s": 50.0, "timings": timings},
        {"run": 2, "tok_s": 63.0, "timings": timings},
        {"run": 2, "tok_s": 65.0, "timings": timings},
    ]
    record = {"legs": legs, "metrics": {"output_throughput_tok_s": 64.0}}
    arm = read_oracle("l", orjson.dumps(record).decode(), "llamacpp")
    assert arm.legs is not None
    # the warm legs, with the tok_s whose median (64) the record gives, not the timings' speed
    assert [leg.tok_s for leg in arm.legs] == [63.0, 65.0]
    assert [{name: list(found) for name, found in leg.requests.items()} for leg in arm.legs] == [
        {"proposed": [448], "accepted": [301]}
    ] * 2


def test_a_silent_response_takes_no_part_in_the_resampled_median() -> None:
    base = {"stop": True, "timings": {"predicted_n": 64, "predicted_ms": 1000.0,
                                      "predicted_per_second": 64.0}}  # fmt: skip
    fast = {"stop": True, "timings": {"predicted_n": 80, "predicted_ms": 1000.0,
                                      "predicted_per_second": 80.0}}  # fmt: skip
    silent = {"stop": True, "timings": {"predicted_n": 0, "predicted_ms": 1.0,
                                        "predicted_per_second": 1.0}}  # fmt: skip
    text = "\n".join(orjson.dumps(r).decode() for r in (base, fast, silent))
    arm = read_oracle("l", text, "llamacpp", where="c.jsonl")
    assert arm.legs is not None and [leg.tok_s for leg in arm.legs] == [64.0, 80.0, None]
    found = bootstrap(list(arm.legs), {"legs": [0, 1, 2]}, 400, 3)["legs"]
    tok_s = found.figures["output_throughput_tok_s"]
    # every defined resample is a median over 64s and 80s only; the silent 1.0 never enters
    defined = tok_s[~np.isnan(tok_s)]
    assert set(np.unique(defined)) <= {64.0, 72.0, 80.0}
    # NaN exactly where only the silent response was drawn: (1/3)^3 of the draws, about 15
    assert 0 < np.isnan(tok_s).sum() < 40


@pytest.mark.parametrize(
    "fixture",
    [
        "vllm-scrapes.prom",
        "vllm-arm.json",
        "vllm-bench-serve.json",
        "vllm-bench-serve-append.jsonl",
        "vllm-log.txt",
        "sglang-bench-serving.jsonl",
        "sglang-metrics.prom",
        "llamacpp-metrics-pair.prom",
        "llamacpp-server.log",
        "llamacpp-speculative-simple.txt",
        "llamacpp-arm.json",
    ],
)
def test_inputs_known_by_totals_have_no_legs(fixture: str) -> None:
    assert load_oracle("o", ORACLES / fixture).legs is None


# ----------------------------------------------------------------------------------------------
# The intervals against a plain loop over the same draws
# ----------------------------------------------------------------------------------------------


def test_llamacpp_response_intervals_match_a_plain_loop(capsys) -> None:
    document = run_json(capsys, "--vs", f"lc={ORACLES / 'llamacpp-completions.json'}")
    seed, resamples = document["bootstrap"]["seed"], document["bootstrap"]["resamples"]
    legs = [
        {"proposed": 448, "accepted": 301, "tok_s": 64.0},
        {"proposed": 896, "accepted": 640, "tok_s": 80.0},
        {"proposed": 0, "accepted": 0, "tok_s": 64.0},
    ]
    expected = plain_oracle_resamples(legs, resamples, seed, arm=1)
    row = next(r for r in document["comparison"]["rows"] if r["name"] == "lc")
    assert row["accept_rate_ci"] == pytest.approx(plain_interval(expected["accept_rate"]))
    assert row["output_throughput_tok_s_ci"] == pytest.approx(plain_interval(expected["tok_s"]))
    assert row["mean_acceptance_length_ci"] is None  # no S in /completion timings
    assert row["ci_note"] == "over_legs"


def test_sglang_response_intervals_match_a_plain_loop(capsys) -> None:
    document = run_json(
        capsys,
        "--vs", f"v={ORACLES / 'vllm-arm.json'}",
        "--vs", f"sg={ORACLES / 'sglang-generate-0.5.23.json'}",
    )  # fmt: skip
    seed, resamples = document["bootstrap"]["seed"], document["bootstrap"]["resamples"]
    legs = [
        {"steps": 60, "proposed": 420, "accepted": 196},
        {"steps": 30, "proposed": 210, "accepted": 98},
    ]
    expected = plain_oracle_resamples(legs, resamples, seed, arm=2)  # the second --vs
    row = next(r for r in document["comparison"]["rows"] if r["name"] == "sg")
    assert row["accept_rate_ci"] == pytest.approx(plain_interval(expected["accept_rate"]))
    assert row["mean_acceptance_length_ci"] == pytest.approx(plain_interval(expected["length"]))
    # both responses accept 196/420 = 98/210 = 7/15 of their drafts: every resample agrees
    assert row["accept_rate_ci"] == pytest.approx([7 / 15, 7 / 15])
    assert row["output_throughput_tok_s_ci"] is None  # no tok/s recorded
    rows = {r["name"]: r for r in document["comparison"]["rows"]}
    assert rows["v"]["ci_note"] == "totals_only"


def test_the_gate_arm_tok_s_interval_matches_a_plain_loop(capsys) -> None:
    document = run_json(capsys, "--vs", f"gate={ORACLES / 'vllm-gate-arm.json'}")
    seed, resamples = document["bootstrap"]["seed"], document["bootstrap"]["resamples"]
    legs = [{"tok_s": t} for t in (16.05, 16.111, 16.111, 16.2, 16.0, 16.3)]
    expected = plain_oracle_resamples(legs, resamples, seed, arm=1)
    row = next(r for r in document["comparison"]["rows"] if r["name"] == "gate")
    assert row["output_throughput_tok_s_ci"] == pytest.approx(plain_interval(expected["tok_s"]))
    assert row["accept_rate_ci"] is None  # the counters are totals
    gap = document["comparison"]["gaps"]["gate"]
    # r rests on both arms, the acceptance factor on ours alone (the gate's counters are totals)
    assert gap["ci_basis"] == {
        "ratio": "both_arms",
        "acceptance_factor": "ours_only",
        "speed_factor": "ours_only",
    }


# ----------------------------------------------------------------------------------------------
# Populations: ours over all legs against counters that span all legs
# ----------------------------------------------------------------------------------------------


def test_ours_over_all_legs_is_resampled_over_all_legs(capsys) -> None:
    document = run_json(capsys, "--vs", f"gate={ORACLES / 'vllm-gate-arm.json'}")
    rows = {r["name"]: r for r in document["comparison"]["rows"]}
    all_legs = rows["ours (all legs)"]
    assert all_legs["population"] == "all_legs"
    # acceptance from the all-legs fold's resamples, tok/s from the warm fold's
    assert all_legs["accept_rate_ci"] == document["all"]["accept_rate_ci"]
    assert all_legs["mean_acceptance_length_ci"] == document["all"]["mean_acceptance_length_ci"]
    assert all_legs["output_throughput_tok_s_ci"] == document["warm"]["output_throughput_tok_s_ci"]
    assert rows["ours"]["accept_rate_ci"] == document["warm"]["accept_rate_ci"]
    # the gap to the gate is split against ours over all legs: its acceptance factor's
    # interval is our all-legs length's interval over the gate's exact length
    gap = document["comparison"]["gaps"]["gate"]
    gate_length = rows["gate"]["mean_acceptance_length"]
    low, high = document["all"]["mean_acceptance_length_ci"]
    assert gap["acceptance_factor_ci"] == pytest.approx([low / gate_length, high / gate_length])


def _leg(proposed: int, accepted: int, tok_s: float) -> Leg:
    steps = proposed and 1
    return Leg(
        requests={"steps": [steps], "proposed": [proposed], "accepted": [accepted]},
        values={"completion_tokens": accepted + 2, "steps": steps, "window_secs": 1.0},
        tok_s=tok_s,
    )


def test_all_legs_resamples_keep_the_count_of_cold_and_warm_legs() -> None:
    # cold legs accept nothing, warm legs everything: a resample that kept 3 cold and 6 warm
    # legs always gives A/P = 60/90; one that drew legs regardless of warmth would vary
    legs = [_leg(10, 0, 9.0) for _ in range(3)] + [_leg(10, 10, 16.0 + i) for i in range(6)]
    found = fold_replicates(legs, [False] * 3 + [True] * 6, 300, seed=4)
    assert np.allclose(found["all"].figures["accept_rate"], 2 / 3)
    assert found["all"].interval("accept_rate") == pytest.approx((2 / 3, 2 / 3))


def test_all_legs_resamples_pair_with_the_warm_ones() -> None:
    # cold legs drafted nothing, so each all-legs resample's A/P is that of the warm legs it
    # drew; with the warm draws reused, it equals the warm resample's, row by row
    legs = [_leg(0, 0, 9.0) for _ in range(2)] + [_leg(10, a, 16.0 + a) for a in (2, 4, 5, 7, 9)]
    found = fold_replicates(legs, [False] * 2 + [True] * 5, 300, seed=11)
    warm, every = found["warm"].figures["accept_rate"], found["all"].figures["accept_rate"]
    assert np.array_equal(warm, every)
    assert np.unique(warm).size > 5  # and they do vary


# ----------------------------------------------------------------------------------------------
# SGLang's unit and the fitted table
# ----------------------------------------------------------------------------------------------


def test_a_split_in_sglangs_unit_resamples_the_legs_accept_lengths(capsys) -> None:
    document = run_json(capsys, "--vs", f"sg={ORACLES / 'sglang-legs.jsonl'}")
    seed, resamples = document["bootstrap"]["seed"], document["bootstrap"]["resamples"]
    # the warm legs (runs 2-4): SGLang len* is the plain mean of their accept lengths
    legs = [
        {"tok_s": 16.010, "accept_length": 4.66},
        {"tok_s": 16.034, "accept_length": 4.67},
        {"tok_s": 16.051, "accept_length": 4.68},
    ]
    expected = plain_oracle_resamples(legs, resamples, seed, arm=1)
    sg = next(r for r in document["comparison"]["rows"] if r["name"] == "sg")
    assert sg["completion_tokens_per_step"] == pytest.approx(4.67)
    assert sg["completion_tokens_per_step_ci"] == pytest.approx(plain_interval(expected["mean"]))
    assert sg["output_throughput_tok_s_ci"] == pytest.approx(plain_interval(expected["tok_s"]))
    gap = document["comparison"]["gaps"]["sg"]
    assert gap["unit"] == "completion_tokens_per_step"
    assert set(gap["ci_basis"].values()) == {"both_arms"}
    # so the verdict reads from the intervals, and says the split's unit
    assert "acceptance factor 0.909 [" in gap["verdict"]
    assert gap["verdict"].endswith("(split in completion tokens per verify step (SGLang's unit))")


def test_sglang_gate_legs_carry_their_accept_lengths_as_a_mean() -> None:
    legs = load_oracle("s", ORACLES / "sglang-legs.jsonl").legs
    assert legs is not None
    # each leg weighs 1, so the bootstrap's ratio of sums is the plain mean SGLang len* is
    assert [dict(leg.values) for leg in legs] == [
        {"completion_tokens": 4.66, "steps": 1},
        {"completion_tokens": 4.67, "steps": 1},
        {"completion_tokens": 4.68, "steps": 1},
    ]


def _cli(columns: int, *vs: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-m", "fold.cli", *OURS_ARGS, *vs],
        capture_output=True, text=True, check=True,
        env={**os.environ, "COLUMNS": str(columns), "TERM": "dumb"},
    )  # fmt: skip
    return completed.stdout


@pytest.mark.parametrize("columns", [80, 60])
def test_every_interval_prints_whole_in_the_fitted_table(capsys, columns: int) -> None:
    vs = ["--vs", f"gate={ORACLES / 'vllm-gate-arm.json'}",
          "--vs", f"lc={ORACLES / 'llamacpp-completions.json'}",
          "--vs", f"sg={ORACLES / 'sglang-generate-0.5.23.json'}"]  # fmt: skip
    document = run_json(capsys, *vs)
    text = _cli(columns, *vs)
    assert max(len(line) for line in text.splitlines()) <= columns
    words = text.split()
    forms = {
        "output_throughput_tok_s": "three_decimals",
        "mean_acceptance_length": "length",
        "accept_rate": "percent",
        "verify_steps_per_s": "three_decimals",
        "completion_tokens_per_step": "length",
    }
    shown = 0
    for row in document["comparison"]["rows"]:
        for figure, form in forms.items():
            interval, value = row[f"{figure}_ci"], row[figure]
            # the reach beside the interval, worked out here by its definition
            expected = (
                None
                if interval is None or value is None
                else max(value - interval[0], interval[1] - value, 0.0)
            )
            assert row[f"{figure}_reach"] == expected
            spread = plus_minus(row[f"{figure}_reach"], form)
            if spread:
                assert spread in words, (row["name"], figure, spread)
                shown += 1
    assert shown >= 10
    assert "totals" not in words  # every oracle here has legs


def test_without_resamples_the_table_has_no_interval_rows() -> None:
    vs = ["--vs", f"gate={ORACLES / 'vllm-gate-arm.json'}",
          "--vs", f"v={ORACLES / 'vllm-arm.json'}"]  # fmt: skip
    text = _cli(80, *vs, "--bootstrap", "0")
    assert not any(line.split()[:1] == ["±"] for line in text.splitlines())
    assert "totals" not in text.split()  # no arm is said to be known by totals for it
    assert "95% intervals" not in text
