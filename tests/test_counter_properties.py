"""The fold from the engine's counters alone equals the fold of a step log that agrees with
them: per leg, over the warm and all legs, in the comparison, and in the intervals (one request
per leg, as vllm.cpp's gate runs: --max-num-seqs 1)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from strategies import scaled
from vllmcpp import Leg, record, step_log, write_pair

from fold.api import fold_acceptance
from fold.compare.comparison import compare
from fold.inputs.vs_arms import read_vs_arms

ROOT = Path(__file__).resolve().parents[1]
ORACLES = [
    f"gate={ROOT / 'fixtures' / 'oracles' / 'vllm-gate-arm.json'}",
    f"bench={ROOT / 'fixtures' / 'oracles' / 'vllm-bench-serve.json'}",
]
LEG_FIGURES = ("steps", "proposed", "accepted", "accept_rate", "mean_acceptance_length",
               "completion_tokens_per_step", "step_rate", "tok_s")  # fmt: skip
FOLD_FIGURES = (*LEG_FIGURES[:-1], "output_throughput_tok_s", "legs")
ROW_FIGURES = (
    "output_throughput_tok_s", "steps", "proposed", "accepted", "accept_rate",
    "mean_acceptance_length", "verify_steps_per_s", "completion_tokens_per_step",
)  # fmt: skip
GAP_FIGURES = ("ratio", "acceptance_factor", "speed_factor", "dominant", "verdict", "ratio_ci",
               "acceptance_factor_ci", "speed_factor_ci")  # fmt: skip


@st.composite
def gates(draw: st.DrawFn) -> tuple[list[list[Leg]], int, int]:
    """Prompts x runs of legs whose steps reach max_tokens exactly (the gate refuses others):
    drawn accepted counts are taken until the tokens are out, padded with 0-accept steps."""
    k = draw(st.integers(1, 8))
    max_tokens = draw(st.integers(2, 48))
    repeat = draw(st.integers(2, 4))
    prompts = []
    for _ in range(draw(st.integers(1, 3))):
        runs = []
        for _ in range(repeat):
            drawn = draw(st.lists(st.integers(0, k), max_size=30))
            accepted, tokens = [], 1
            for value in [*drawn, *[0] * max_tokens]:
                if tokens >= max_tokens:
                    break
                accepted.append(value)
                tokens += value + 1
            secs = draw(st.integers(50, 5000)) / 1000
            runs.append(Leg(accepted, secs, k))
        prompts.append(runs)
    return prompts, max_tokens, k


@given(gates())
@scaled(1)
def test_counters_alone_fold_as_the_agreeing_log(gate):
    prompts, max_tokens, k = gate
    document = record(prompts, max_tokens=max_tokens, k=k)
    with tempfile.TemporaryDirectory() as directory:
        steps = step_log(prompts, document, max_tokens=max_tokens)
        arm, log = write_pair(Path(directory), document, steps)
        with_log = fold_acceptance(arm, [log], resamples=40)
        alone = fold_acceptance(arm, [], resamples=40)
    assert with_log.counter_check["legs_checked"] == len(document["legs"])
    for ours, theirs in zip(with_log.legs, alone.legs, strict=True):
        for figure in LEG_FIGURES:
            assert ours[figure] == theirs[figure], figure
    for name in ("warm", "all"):
        one, two = getattr(with_log, name), getattr(alone, name)
        for figure in FOLD_FIGURES:
            assert one[figure] == two[figure], (name, figure)
        for key in one:
            if key.endswith("_ci"):
                assert one[key] == two[key], (name, key)
    oracles = read_vs_arms(ORACLES, [])
    found = [compare(result, oracles) for result in (with_log, alone)]
    for row, other in zip(found[0].rows, found[1].rows, strict=True):
        for figure in ROW_FIGURES:
            assert getattr(row, figure) == getattr(other, figure), (row.name, figure)
    blocks = [comparison.to_json() for comparison in found]
    for name in ("gate", "bench"):
        for key in GAP_FIGURES:
            assert blocks[0]["gaps"][name][key] == blocks[1]["gaps"][name][key], (name, key)
