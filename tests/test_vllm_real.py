"""A real vLLM's outputs, read by ``--vs``, must give exactly vLLM's own figures.

Two runs of ``examples/vllm/vllm_gate.py`` and ``examples/vllm/llamacpp_arm.py``: the one recorded
under ``fixtures/oracles/vllm-real/`` (every default run reads it), and a fresh one made here
(``pytest -m oracle``: installs vLLM into its cached venv, trains the tiny model, runs vLLM
offline and as a server and llama.cpp with the hook; minutes from an empty cache).

For each, vLLM's outputs are first checked against each other (``vllm_sources``: get_metrics()
= the log lines' sums, a bench result = the difference of the scrapes around it, the server
log = the last scrape), so a vLLM that contradicts itself is named as such; then every output
is read as a user would and each figure compared with vLLM's own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import vllm_sources
from vllm_readings import read_oracle, reading_problems

from fold.api import fold_acceptance
from fold.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "fixtures" / "oracles" / "vllm-real"
EXAMPLE = ROOT / "examples" / "vllm"


def fresh_run(base: Path, model: str, bin_dir: Path) -> Path:
    """The whole pipeline on the shared fixtures' vLLM, model and llama.cpp: both engines."""
    sys.path.insert(0, str(EXAMPLE))
    import llamacpp_arm
    import vllm_gate

    run = base / "run"
    assert vllm_gate.main(["--out-dir", str(run)]) == 0
    assert json.loads((run / "gate.json").read_text())["model"] == model
    ours = ["--model", model, "--bin-dir", str(bin_dir), "--out-dir", str(run / "ours")]
    assert llamacpp_arm.main(ours) == 0
    return run


@pytest.fixture(
    scope="module",
    params=["recorded", pytest.param("fresh", marks=pytest.mark.oracle)],
)
def run(request, tmp_path_factory) -> Path:
    if request.param == "recorded":
        return RECORDED
    # Only the fresh run needs the engines: asked for here, so the recorded one never makes them.
    model = request.getfixturevalue("vllm_model")  # vLLM itself comes with the model
    bin_dir = request.getfixturevalue("llamacpp_bin_dir")
    return fresh_run(tmp_path_factory.mktemp("vllm"), model, bin_dir)


def ours(run: Path) -> tuple[Path, Path]:
    return run / "ours" / "our-arm.json", run / "ours" / "steps.jsonl"


# --- vLLM against itself --------------------------------------------------------------------


def test_vllm_offline_outputs_agree_with_each_other(run):
    truth = vllm_sources.offline_truth(run)
    assert truth.steps > 0 and truth.accepted > 0  # the trained model accepts n-gram drafts
    assert (
        len(truth.per_position)
        == json.loads((run / "gate.json").read_text())["speculative_config"][
            "num_speculative_tokens"
        ]
    )


def test_vllm_server_outputs_agree_with_each_other(run):
    truth = vllm_sources.serve_truth(run)
    assert truth["bench.json"].accepted > 0


# --- every output read as vLLM states it ----------------------------------------------------

OFFLINE = ["vllm-arm.json", "engine.log"]
SERVE = [
    "bench.json",
    "bench-append.json",
    "metrics/bench-1.prom",
    "metrics/bench-2.prom",
    "metrics-warm.prom",
    "metrics-last.prom",
    "server.log",
]


@pytest.mark.parametrize("name", OFFLINE)
def test_offline_outputs_read_as_vllm_states_them(run, name):
    truth = vllm_sources.offline_truth(run)
    arm, steps = ours(run)
    if name == "vllm-arm.json":
        # The record holds the per-position Vector as null: not recorded, not zeros.
        own = vllm_sources.Own(truth.steps, truth.proposed, truth.accepted, None, truth.tok_s)
        problems = reading_problems(arm, steps, run / "offline" / name, own)
    else:
        # The log lines print no S, no per-position counts and no tok/s.
        own = vllm_sources.Own(truth.steps, truth.proposed, truth.accepted)
        problems = reading_problems(arm, steps, run / "offline" / name, own, steps_printed=False)
    assert problems == []


@pytest.mark.parametrize("name", SERVE)
def test_server_outputs_read_as_vllm_states_them(run, name):
    truth = vllm_sources.serve_truth(run)
    arm, steps = ours(run)
    own = truth[name]
    if name == "server.log":
        last = truth["metrics-last.prom"]
        own = vllm_sources.Own(last.steps, own.proposed, own.accepted)
    problems = reading_problems(
        arm, steps, run / "serve" / name, own, steps_printed=not name.endswith(".log")
    )
    assert problems == []


# --- a vLLM release that renames a counter is noticed -----------------------------------------

RENAMES = [
    ("offline/vllm-arm.json", '"vllm:spec_decode_num_drafts"', '"vllm:spec_decode_num_steps"'),
    (
        "serve/metrics-warm.prom",
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_steps_total",
    ),
    ("serve/bench.json", '"spec_decode_num_drafts"', '"spec_decode_num_steps"'),
]


@pytest.mark.parametrize(("name", "old", "new"), RENAMES)
def test_a_renamed_counter_in_a_copied_real_output_fails_the_reading(run, tmp_path, name, old, new):
    source = run / name
    text = source.read_text()
    assert old in text
    copy = tmp_path / source.name
    copy.write_text(text.replace(old, new))
    if name.startswith("offline"):
        truth = vllm_sources.offline_truth(run)
        own = vllm_sources.Own(truth.steps, truth.proposed, truth.accepted, None, truth.tok_s)
    else:
        own = vllm_sources.serve_truth(run)[name.removeprefix("serve/")]
    arm, steps = ours(run)
    assert reading_problems(arm, steps, source, own) == []  # the original reads right
    problems = reading_problems(arm, steps, copy, own)
    assert problems  # the copy does not: refused, or S not recorded; never a silent 0
    code, row, stderr = read_oracle(arm, steps, copy)
    if row is None:  # refused as unreadable, naming the file
        assert code == 2 and str(copy) in stderr
    else:  # or read with S missing, and the sources say so
        assert row["steps"] is None
        assert row["sources"]["steps"] == "not recorded: no vllm:spec_decode_num_drafts counter"


# --- two real engines ---------------------------------------------------------------------


def test_our_arm_is_llama_servers_own_counts(run):
    arm, steps = ours(run)
    result = fold_acceptance(arm, [str(steps)])
    parts = vllm_sources.scrapes((run / "ours" / "metrics.prom").read_text())
    assert len(parts) == 2
    server = {}
    for index, lines in enumerate(parts):
        for line in lines:
            name, _, value = line.partition(" ")
            if name.startswith("llamacpp:spec_decode_num_"):
                server[name, index] = float(value)
    delta = {
        figure: round(server[f"llamacpp:spec_decode_num_{name}_total", 1]
                      - server[f"llamacpp:spec_decode_num_{name}_total", 0])
        for figure, name in (("steps", "drafts"), ("proposed", "draft_tokens"),
                             ("accepted", "accepted_tokens"))
    }  # fmt: skip
    every = {key: sum(leg[key] for leg in result.legs) for key in delta}
    assert every == delta
    assert every["accepted"] > 0


def test_both_engines_ran_the_same_prompts_and_weights_to_the_same_tokens(run):
    """Same prompts, tokenized alike, and the same weights: greedy, both engines generate the
    very same tokens, so what differs in acceptance is the drafting alone."""
    vllm_outputs = [json.loads(line) for line in (run / "offline" / "outputs.jsonl").open()]
    responses = [json.loads(line) for line in (run / "ours" / "completions.jsonl").open()]
    record = json.loads((run / "ours" / "our-arm.json").read_text())
    assert len(vllm_outputs) == len(responses) == len(record["legs"])
    for output, response, leg in zip(vllm_outputs, responses, record["legs"], strict=True):
        assert (output["record"], output["run"]) == (leg["record"], leg["run"])
        assert len(output["prompt_token_ids"]) == leg["prompt_tokens"]
        assert output["token_ids"] == response["tokens"]
        assert len(response["tokens"]) == leg["completion_tokens"]


def test_the_two_engine_comparison_prints_a_split_and_a_verdict(run, capsys):
    arm, steps = ours(run)
    vllm_arm = run / "offline" / "vllm-arm.json"
    assert cli([str(arm), str(steps), "--vs", f"vllm={vllm_arm}", "--json", "-"]) == 0
    oracles = json.loads(capsys.readouterr().out)["comparison"]
    gap = oracles["gaps"]["vllm"]
    # vLLM's counters span every leg, so ours is folded over every leg too.
    assert gap["ours"] == "ours (all legs)"
    assert gap["populations"]["same"] is True
    product = gap["acceptance_factor"] * gap["speed_factor"]
    assert product == pytest.approx(gap["ratio"], rel=1e-9)
    assert gap["verdict"]
    assert cli([str(arm), str(steps), "--vs", f"vllm={vllm_arm}"]) == 0
    table = capsys.readouterr().out
    assert "vs vllm" in table and "verdict" in table
