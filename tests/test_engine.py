"""llama.cpp with the hook patched in, on tiny models: the fold must equal the engine's counters.

Marked ``engine`` (``pytest -m engine``; the default run deselects them): the first run builds
llama.cpp (examples/llamacpp/build.py, cached by version under the user's cache directory).
The expectations are the engines' own counters, never the fold's output: speculative-simple's
``n_drafted``/``n_accept``/``n_predict``, llama-server's ``/completion`` ``timings`` and its
``/metrics`` counter deltas.
"""

from __future__ import annotations

import json
import re
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from fold.api import fold_acceptance
from fold.cli import main as cli

pytestmark = pytest.mark.engine

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llamacpp"
sys.path.insert(0, str(EXAMPLE))

import gate_server  # noqa: E402
import gate_speculative  # noqa: E402


def run_spec(out: Path, llamacpp_bin_dir: Path, gguf_models: Path, *extra: str) -> dict:
    common = [
        "--bin-dir",
        str(llamacpp_bin_dir),
        "--models",
        str(gguf_models),
        "--out-dir",
        str(out),
    ]
    assert gate_speculative.main([*common, "--prompts", "3", "--repeat", "3", *extra]) == 0
    return json.loads((out / "our-arm.json").read_text())


@pytest.fixture(scope="module")
def spec_run(tmp_path_factory, llamacpp_bin_dir, gguf_models) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("spec")
    return out, run_spec(out, llamacpp_bin_dir, gguf_models)


@pytest.fixture(scope="module")
def spec_pid_run(tmp_path_factory, llamacpp_bin_dir, gguf_models) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("spec-pid")
    return out, run_spec(
        out, llamacpp_bin_dir, gguf_models, "--log", "steps-%p.jsonl", "--label-legs"
    )


@pytest.fixture(scope="module")
def server_run(tmp_path_factory, llamacpp_bin_dir, gguf_models) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("server")
    common = [
        "--bin-dir",
        str(llamacpp_bin_dir),
        "--models",
        str(gguf_models),
        "--out-dir",
        str(out),
    ]
    shape = ["--prompts", "2", "--repeat", "3", "--parallel", "4", "--concurrency", "4"]
    assert gate_server.main([*common, *shape, "--log", "steps-%p.jsonl"]) == 0
    return out, json.loads((out / "our-arm.json").read_text())


def assert_nothing_lost(result) -> None:
    counts = (
        result.fold.lost_lines,
        result.fold.torn_lines,
        result.fold.unattributed_steps,
        result.fold.ambiguous_steps,
        result.fold.skipped_lines,
    )
    assert counts == (0, 0, 0, 0, 0)


def assert_throughput_is_the_gates(result, arm: dict) -> None:
    warm = [leg["tok_s"] for leg in arm["legs"] if leg["run"] > 1]
    assert result.warm["output_throughput_tok_s"] == arm["metrics"]["output_throughput_tok_s"]
    assert result.warm["output_throughput_tok_s"] == statistics.median(warm)


# --- speculative-simple -------------------------------------------------------------------------


def check_spec_legs(result, arm: dict) -> None:
    assert len(result.legs) == len(arm["legs"]) == 9
    for figures, leg in zip(result.legs, arm["legs"], strict=True):
        engine = leg["engine_counters"]
        assert engine["n_drafted"] > 0
        assert (figures["proposed"], figures["accepted"]) == (
            engine["n_drafted"],
            engine["n_accept"],
        )
        # Every output token comes from a verify step: emitted sums to n_predict.
        assert figures["emitted"] == engine["n_predict"] == leg["completion_tokens"]
        assert figures["flags"] == ()
    assert result.fold.prefill_tokens["per_request"] == 0
    assert result.fold.prefill_tokens["source"] == "learned_from_the_arm"
    assert result.fold.prefill_tokens["source_text"] == "learned from the arm"
    assert 0 < result.warm["accept_rate"] < 1  # the noisy draft: intermediate acceptance


def test_speculative_simple_counts_equal_the_engines(spec_run):
    out, arm = spec_run
    result = fold_acceptance(out / "our-arm.json", [str(out / "steps.jsonl")])
    check_spec_legs(result, arm)
    assert_nothing_lost(result)
    assert_throughput_is_the_gates(result, arm)
    assert len(result.fold.writers) == 9  # one engine process per leg


def test_speculative_simple_with_a_file_per_process_and_labels(spec_pid_run):
    out, arm = spec_pid_run
    files = sorted(out.glob("steps-*.jsonl"))
    assert len(files) == 9
    result = fold_acceptance(out / "our-arm.json", [str(out / "steps-*.jsonl")])
    check_spec_legs(result, arm)
    assert_nothing_lost(result)
    assert_throughput_is_the_gates(result, arm)
    assert [figures["label"] for figures in result.legs] == [leg["leg"] for leg in arm["legs"]]
    for path in files:  # each process labelled its own steps with its leg
        labels = {json.loads(line)["leg"] for line in path.read_text().splitlines()}
        assert len(labels) == 1


@pytest.mark.parametrize(("draft", "expected"), [("target", "all"), ("unrelated", "almost none")])
def test_the_target_as_its_own_draft_accepts_everything_and_an_unrelated_one_almost_nothing(
    tmp_path, llamacpp_bin_dir, gguf_models, draft, expected
):
    arm = run_spec(
        tmp_path, llamacpp_bin_dir, gguf_models, "--draft", draft, "--prompts", "1", "--repeat", "2"
    )
    result = fold_acceptance(tmp_path / "our-arm.json", [str(tmp_path / "steps.jsonl")])
    engine = arm["legs"][1]["engine_counters"]
    warm = result.warm
    assert (warm["proposed"], warm["accepted"]) == (engine["n_drafted"], engine["n_accept"])
    if expected == "all":
        assert warm["accepted"] == warm["proposed"] > 0
    else:
        assert warm["accept_rate"] < 0.05


# --- llama-server ---------------------------------------------------------------------------


def test_server_counts_equal_its_timings_and_metrics(server_run):
    out, arm = server_run
    result = fold_acceptance(out / "our-arm.json", [str(out / "steps-*.jsonl")])
    assert len(result.legs) == 6
    for figures, leg in zip(result.legs, arm["legs"], strict=True):
        delta = leg["engine_counters"]["metrics_delta"]
        responses = leg["engine_counters"]["responses"]
        assert (figures["steps"], figures["proposed"], figures["accepted"]) == (
            delta["spec_decode_num_drafts_total"],
            delta["spec_decode_num_draft_tokens_total"],
            delta["spec_decode_num_accepted_tokens_total"],
        )
        assert figures["proposed"] == sum(r["timings"]["draft_n"] for r in responses)
        assert figures["accepted"] == sum(r["timings"]["draft_n_accepted"] for r in responses)
        assert leg["completion_tokens"] == delta["tokens_predicted_total"]
        # Per request: seq is the slot, and each request of a leg had its own slot.
        assert sorted(r["id_slot"] for r in responses) == [0, 1, 2, 3]
        ours = {request["seq"]: request for request in figures["requests"]}
        for response in responses:
            request = ours[response["id_slot"]]
            assert (request["proposed"], request["accepted"]) == (
                response["timings"]["draft_n"],
                response["timings"]["draft_n_accepted"],
            )
        assert figures["flags"] == ()
    # The server samples each request's first token from prefill.
    assert result.fold.prefill_tokens["per_request"] == 1
    assert_nothing_lost(result)
    assert_throughput_is_the_gates(result, arm)
    warm_steps = sum(f["steps"] for f in result.legs if f["warm"])
    assert result.warm["steps"] == warm_steps > 0


def compare_json(arm_path: Path, logs: str, oracle: str, capsys) -> dict:
    assert cli([str(arm_path), logs, "--vs", f"llamacpp={oracle}", "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)["comparison"]


def test_the_servers_own_metrics_give_an_acceptance_factor_of_exactly_one(server_run, capsys):
    out, _ = server_run
    logs = str(out / "steps-*.jsonl")
    oracles = compare_json(out / "our-arm.json", logs, str(out / "llamacpp-arm.json"), capsys)
    assert oracles["gaps"]["llamacpp"]["acceptance_factor"] == 1.0
    ours, oracle = oracles["rows"]
    for key in ("steps", "proposed", "accepted", "per_position"):
        assert ours[key] == oracle[key]
    # The bare scrape pair, as the server wrote it: the same S, P and A over the warm legs.
    oracles = compare_json(out / "our-arm.json", logs, str(out / "metrics-warm.prom"), capsys)
    ours, oracle = oracles["rows"]
    for key in ("steps", "proposed", "accepted", "mean_acceptance_length", "accept_rate"):
        assert ours[key] == oracle[key]
    assert ours["mean_acceptance_length"] / oracle["mean_acceptance_length"] == 1.0


def test_the_servers_own_completion_records_give_the_same_counts(server_run, capsys):
    out, _ = server_run
    logs = str(out / "steps-*.jsonl")
    warm = [json.loads(line) for line in (out / "completions-warm.jsonl").read_text().splitlines()]
    oracles = compare_json(out / "our-arm.json", logs, str(out / "completions-warm.jsonl"), capsys)
    ours, oracle = oracles["rows"]
    assert (oracle["proposed"], oracle["accepted"]) == (ours["proposed"], ours["accepted"])
    assert oracle["accept_rate"] == ours["accept_rate"]
    speeds = [response["timings"]["predicted_per_second"] for response in warm]
    assert oracle["output_throughput_tok_s"] == pytest.approx(statistics.median(speeds))


# --- the patched builds -------------------------------------------------------------------------

STRICT = ["-Wconversion", "-Wsign-conversion", "-Wuseless-cast", "-Wzero-as-null-pointer-constant"]


@pytest.mark.parametrize(
    ("target", "source"),
    [
        ("llama-speculative-simple", "examples/speculative-simple/speculative-simple.cpp"),
        ("llama-server", "tools/server/server-context.cpp"),
    ],
)
def test_the_hook_compiles_clean_in_the_engines_own_build(llamacpp_bin_dir, target, source):
    """The engine's exact compile command, plus strict warnings: none at the hook.

    llama.cpp's own code is not clean under -Wconversion, so only diagnostics located in the
    header or on the patch's call lines count.
    """
    build_dir = llamacpp_bin_dir.parent
    commands = subprocess.run(
        ["ninja", "-C", str(build_dir), "-t", "commands", target],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    compile_line = next(line for line in commands if line.rstrip().endswith(source))
    path = build_dir.parent / "src" / source
    hook_lines = {
        number
        for number, text in enumerate(path.read_text().splitlines(), start=1)
        if "dflash" in text
    }
    assert hook_lines, f"{source} is not patched"
    words, command = shlex.split(compile_line), []
    while words:  # no object or dependency file: only the diagnostics are wanted
        word = words.pop(0)
        if word in ("-o", "-MT", "-MF"):
            words.pop(0)
        elif word != "-MD":
            command.append(word)
    proc = subprocess.run(
        [*command, "-fsyntax-only", *STRICT], cwd=build_dir, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    at_hook = [
        line
        for line in proc.stderr.splitlines()
        if "dflash_step_log.h" in line
        or any(re.search(rf"{re.escape(source)}:{number}:", line) for number in hook_lines)
    ]
    assert at_hook == []
