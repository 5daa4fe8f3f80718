"""A real matched run: llama-server at the acceptance ``--matched llamacpp`` emits for a gate of
ours accepts as that gate did, and refuses what the command refuses.

Marked ``engine`` (``pytest -m engine``): llama.cpp as ``examples/llamacpp/build.py`` builds it
(or the binaries in ``$LLAMACPP_BIN_DIR``, as the gate scripts' ``--bin-dir``), on the tiny
models of ``examples/llamacpp/make_models.py``. Our arm drafts with the noisy copy of the target;
the matched arm drafts with the unrelated model, which on its own accepts next to nothing, at our
rates (``--spec-synth-rates``); the hook records the matched arm's steps as it records ours, and
both are folded by the same fold. The expectation is our own warm fold and its intervals, never
the matched arm's output.
"""

from __future__ import annotations

import json
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

K = 4


def gate(out: Path, llamacpp_bin_dir: Path, gguf_models: Path, *extra: str) -> tuple[str, str]:
    common = [
        "--bin-dir",
        str(llamacpp_bin_dir),
        "--models",
        str(gguf_models),
        "--out-dir",
        str(out),
    ]
    sizes = ["--prompts", "3", "--repeat", "3", "--draft-max", str(K), "--parallel", "2"]
    assert gate_server.main([*common, *sizes, "--concurrency", "2", "--threads", "1", *extra]) == 0
    return str(out / "our-arm.json"), str(out / "steps.jsonl")


def test_llama_server_at_the_emitted_rates_accepts_as_our_gate_did(
    tmp_path, capsys, llamacpp_bin_dir, gguf_models
):
    arm, log = gate(tmp_path / "ours", llamacpp_bin_dir, gguf_models)
    assert cli([arm, log, "--matched", "llamacpp", "--json", "-"]) == 0
    document = json.loads(capsys.readouterr().out)
    setting = document["matched"]["llamacpp"]
    rates = setting["environment"]["LLAMA_ARG_SPEC_SYNTH_RATES"]
    assert setting["k"] == K

    matched = tmp_path / "matched"
    arm_m, log_m = gate(
        matched, llamacpp_bin_dir, gguf_models, "--draft", "unrelated", "--spec-synth-rates", rates
    )
    server_log = (matched / "server.log").read_text()
    # llama-server took the rates as given (it prints them to 6 significant digits)
    shown = ", ".join(f"{float(rate):.6g}" for rate in rates.split(","))
    assert (
        f"synthetic acceptance: n_max = {K}," in server_log and f"rates = [{shown}]" in server_log
    )

    ours, theirs = document["warm"], fold_acceptance(arm_m, [log_m]).to_json()["warm"]
    low, high = ours["mean_acceptance_length_ci"]
    assert low <= theirs["mean_acceptance_length"] <= high
    for position, rate in enumerate(setting["rates"]):
        assert rate["ci"][0] <= theirs["per_position"][position] <= rate["ci"][1], position
    # without the rates the unrelated drafter accepts far below ours: the rates did it
    arm_p, log_p = gate(tmp_path / "plain", llamacpp_bin_dir, gguf_models, "--draft", "unrelated")
    plain = fold_acceptance(arm_p, [log_p])
    assert plain.warm["mean_acceptance_length"] < low


@pytest.mark.parametrize(
    ("rates", "says"),
    [
        ("0.5,0.6,0.1,0.1", "monotonically non-increasing"),
        ("0.5,0.4,0.3,0.2,0.1", f"must contain {K} values, got 5"),
        ("1.5,0.4,0.3,0.2", "within [0, 1]"),
    ],
)
def test_llama_server_refuses_what_the_command_refuses(
    tmp_path, llamacpp_bin_dir, gguf_models, rates, says
):
    from fold.compare.matched import check_rates
    from fold.errors import RefusedError

    values = [float(rate) for rate in rates.split(",")]
    with pytest.raises(RefusedError):
        check_rates(values, K, "llamacpp")
    port = str(gate_server.free_port())
    proc = subprocess.run(
        [str(llamacpp_bin_dir / "llama-server"), "-m", str(gguf_models / "target.gguf"),
         "-md", str(gguf_models / "draft.gguf"), "--spec-type", "draft-simple",
         "--spec-draft-n-max", str(K),
         "--spec-synth-rates", rates, "--host", "127.0.0.1", "--port", port],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0
    assert says in proc.stdout + proc.stderr


# the sizes: 4 prompts x 4 runs, 2 requests a leg on 2 slots, one thread
TRIPLE = ["--prompts", "4", "--repeat", "4", "--draft-max", str(K), "--parallel", "2",
          "--concurrency", "2", "--threads", "1"]  # fmt: skip


def test_a_real_triple_splits_the_gap_by_measurement(
    tmp_path, capsys, llamacpp_bin_dir, gguf_models
):
    """Ours (the noisy-copy drafter), the ordinary oracle run (the unrelated drafter at its own
    acceptance) and that oracle at the rates ``--matched llamacpp`` prints: the gap to the
    ordinary run is split by measurement, and the factors are the runs' own tok/s ratios,
    read here from their records."""
    from triple_figures import measured_factors

    common = ["--bin-dir", str(llamacpp_bin_dir), "--models", str(gguf_models)]
    ours, base, matched = (tmp_path / name for name in ("ours", "base", "matched"))
    assert gate_server.main([*common, "--out-dir", str(ours), *TRIPLE]) == 0
    arm, log = str(ours / "our-arm.json"), str(ours / "steps.jsonl")
    assert cli([arm, log, "--matched", "llamacpp", "--json", "-"]) == 0
    rates = json.loads(capsys.readouterr().out)["matched"]["llamacpp"]["environment"][
        "LLAMA_ARG_SPEC_SYNTH_RATES"
    ]
    unrelated = ["--draft", "unrelated"]
    assert gate_server.main([*common, "--out-dir", str(base), *TRIPLE, *unrelated]) == 0
    synthetic = [*unrelated, "--spec-synth-rates", rates]
    assert gate_server.main([*common, "--out-dir", str(matched), *TRIPLE, *synthetic]) == 0
    vs = ["--vs", f"base={base / 'llamacpp-arm.json'}",
          "--vs", f"m:matched@base={matched / 'llamacpp-arm.json'}"]  # fmt: skip
    assert cli([arm, log, *vs, "--json", "-"]) == 0
    document = json.loads(capsys.readouterr().out)
    check = document["comparison"]["matched"]["m"]
    gap = document["comparison"]["gaps"]["base"]
    expected = measured_factors(ours / "our-arm.json", base, matched)
    assert gap["ratio"] == pytest.approx(expected["ratio"], rel=1e-9)
    if check["acceptance"]["matched"] is not True:
        # A live run at the emitted rates lands inside our interval nearly always, not always
        # (the recorded triple's 3.342 sat in [3.295, 3.500]): then the model must stand, and
        # say why. The measured path is held to a recorded triple in the default suite.
        assert gap["split"] == "modelled", check["verdict"]
        assert gap["split_reason"] == "matched_run_did_not_match", gap["split_text"]
        return
    measured = gap["measured"]
    assert gap["split"] == "measured"
    assert gap["split_reason"] == "matched_run_on_the_command_line"
    assert gap["ratio"] == pytest.approx(expected["ratio"], rel=1e-9)
    assert measured["speed_factor"] == pytest.approx(expected["speed"], rel=1e-9)
    assert measured["acceptance_factor"] == pytest.approx(expected["acceptance"], rel=1e-9)
    assert measured["model_error"] == pytest.approx(expected["model_error"], rel=1e-9)
    assert gap["verdict"].startswith("measured with m:") and "the model's error" in gap["verdict"]
    assert document["comparison"]["gaps"]["m"]["split_reason"] == (
        "at_our_acceptance_on_the_command_line"
    )
