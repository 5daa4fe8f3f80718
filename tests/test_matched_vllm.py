"""vLLM's own configuration takes every setting ``--matched vllm`` emits for the recorded runs,
and refuses what the command refuses (``pytest -m oracle``: the real vLLM venv of
``examples/vllm/install.py``, installed on first use, and the tiny model of
``examples/vllm/make_model.py``, trained on first use).

The CPU build without Triton refuses to *run* synthetic acceptance (its sampler warm-up asserts
"Synthetic acceptance not supported with CPU sampling" in the C++ fallbacks it registers only
where Triton is missing), so the check is vLLM's whole configuration path
short of the engine: the emitted ``vllm serve`` line's ``--speculative-config`` parsed by vLLM's
own argument parser, ``EngineArgs.from_cli_args`` and ``create_engine_config()`` for the
model, which builds and validates the ``SpeculativeConfig``; and the ``LLM(...)`` line's dict
given to ``EngineArgs`` as ``LLM`` gives it.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from fold.cli import main as cli
from fold.compare.matched import check_rates
from fold.errors import RefusedError

pytestmark = pytest.mark.oracle

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "vllm"
REAL = ROOT / "fixtures" / "oracles" / "vllm-real"
RUNS = {
    "fixtures": ("fixtures/our-arm.json", "fixtures/steps.jsonl"),
    "gate-example": ("fixtures/gate-example/our-arm.json", "fixtures/gate-example/steps.jsonl"),
    "ours-vs-ours-before": (
        "fixtures/ours-vs-ours/before/our-arm.json",
        "fixtures/ours-vs-ours/before/steps.jsonl",
    ),
    "ours-vs-ours-after": (
        "fixtures/ours-vs-ours/after/our-arm.json",
        "fixtures/ours-vs-ours/after/steps.jsonl",
    ),
    "vllmcpp": ("fixtures/vllmcpp/our-arm.json", "fixtures/vllmcpp/steps.jsonl"),
    "vllm-real-ours": (
        "fixtures/oracles/vllm-real/ours/our-arm.json",
        "fixtures/oracles/vllm-real/ours/steps.jsonl",
    ),
}

# Runs in vLLM's venv: each case's serve line (parsed by vLLM's CLI parser) or offline dict
# through EngineArgs to the engine config; prints what vLLM made of each, or its error.
VALIDATE = """
import json, sys
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser

model, cases = json.loads(sys.stdin.read())
parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
found = {}
for name, case in cases.items():
    try:
        if "argv" in case:
            engine = EngineArgs.from_cli_args(parser.parse_args(["--model", model, *case["argv"]]))
            engine.enforce_eager, engine.dtype = True, "float32"
        else:
            engine = EngineArgs(model=model, speculative_config=case["config"],
                                enforce_eager=True, dtype="float32")
        config = engine.create_engine_config().speculative_config
        found[name] = {"rates": config.synthetic_acceptance_rates,
                       "k": config.num_speculative_tokens,
                       "method": config.rejection_sample_method}
    except Exception as error:
        found[name] = {"error": f"{type(error).__name__}: {error}"}
print("RESULT " + json.dumps(found))
"""


def vllm_says(python: Path, model: str, cases: dict) -> dict:
    proc = subprocess.run(
        [str(python), "-c", VALIDATE],
        input=json.dumps([model, cases]),
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"},
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])


def matched(capsys, arm: str, log: str, *extra: str) -> tuple[int, dict | None, str]:
    code = cli([str(ROOT / arm), str(ROOT / log), "--matched", "vllm", "--json", "-", *extra])
    out, err = capsys.readouterr()
    return code, (json.loads(out)["matched"]["vllm"] if code == 0 else None), err


def test_vllm_takes_every_setting_emitted_for_the_recorded_runs(capsys, vllm_python, vllm_model):
    emitted, cases = {}, {}
    gate_config = json.loads((REAL / "gate.json").read_text())["speculative_config"]
    runs = [(name, arm, log, ()) for name, (arm, log) in RUNS.items()]
    # the real oracle's own config (ngram, lookup 2..2, k = 4) as the base, as a gate passes it
    arm, log = RUNS["vllm-real-ours"]
    runs.append(("vllm-real-gate-config", arm, log, ("--matched-config", json.dumps(gate_config))))
    for name, arm, log, extra in runs:
        code, setting, err = matched(capsys, arm, log, *extra)
        assert code == 0, err
        emitted[name] = setting
        lines = {command["where"]: command["line"] for command in setting["commands"]}
        cases[f"{name}/serve"] = {"argv": shlex.split(lines["serve"])[3:]}
        offline = lines["offline"][len("LLM(model=MODEL, speculative_config=") : -1]
        cases[f"{name}/offline"] = {"config": ast.literal_eval(offline)}
    said = vllm_says(vllm_python, vllm_model, cases)
    for name, setting in emitted.items():
        for where in ("serve", "offline"):
            got = said[f"{name}/{where}"]
            assert "error" not in got, (name, where, got)
            assert got["method"] == "synthetic" and got["k"] == setting["k"]
            # vLLM keeps the rates as given: exactly the fold's warm per-position rates
            assert got["rates"] == [rate["rate"] for rate in setting["rates"]]


def test_vllm_refuses_what_the_command_refuses(capsys, vllm_python, vllm_model):
    arm, log = RUNS["vllm-real-ours"]
    _, ours, _ = matched(capsys, arm, log)
    config, rates, k = (
        ours["speculative_config"],
        ours["speculative_config"]["synthetic_acceptance_rates"],
        ours["k"],
    )
    # what the command refuses, each as the config vLLM would have been given
    refused = {
        "another k": (
            {**config, "num_speculative_tokens": k + 1},
            ("--matched-config", json.dumps({"method": "ngram", "num_speculative_tokens": k + 1})),
            "must have length",
        ),
        "rates and a length": (
            {**config, "synthetic_acceptance_length": 2.0},
            ("--matched-config", '{"method": "ngram", "synthetic_acceptance_length": 2.0}'),
            "exactly one of",
        ),
        "rising rates": (
            {**config, "synthetic_acceptance_rates": sorted(rates)},
            None,
            "non-increasing",
        ),
        "a rate above 1": (
            {**config, "synthetic_acceptance_rates": [1.5, *rates[1:]]},
            None,
            "[0, 1]",
        ),
        "no draft position": (
            {**config, "num_speculative_tokens": 0, "synthetic_acceptance_rates": []},
            None,
            "greater than 0",
        ),
    }
    said = vllm_says(
        vllm_python, vllm_model, {name: {"config": case[0]} for name, case in refused.items()}
    )
    for name, (given, argv, vllm_reason) in refused.items():
        assert vllm_reason in said[name].get("error", ""), (name, said[name])
        if argv is not None:  # the command refuses it (exit 1) before vLLM sees it
            code, _, err = matched(capsys, arm, log, *argv)
            assert code == 1 and "Traceback" not in err, (name, err)
        else:  # rates our fold cannot give: the command's own check refuses them as vLLM does
            with pytest.raises(RefusedError):
                check_rates(given["synthetic_acceptance_rates"], given["num_speculative_tokens"])
