"""``examples/vllm/offline.py``'s engine settings: the CPU defaults the gate's tests run with,
and the options a GPU box gives both arms of a matched run (docs/matched.md), passed to
``LLM(...)`` and ``SamplingParams`` as given. vLLM itself is stood in for by a module that
records its arguments (the real run: ``tests/test_vllm_real.py``, marker oracle)."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

OFFLINE = Path(__file__).resolve().parents[1] / "examples" / "vllm" / "offline.py"


class _Completion:
    token_ids = (1, 2, 3)
    text = "abc"
    finish_reason = "length"
    spec_decode_metrics = None


class _Result:
    prompt_token_ids = (7, 8)
    outputs = (_Completion(),)
    request_id = "0"


def run_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *options: str) -> dict:
    seen: dict = {}

    class LLM:
        def __init__(self, **kwargs):
            seen["llm"] = kwargs
            self.llm_engine = types.SimpleNamespace(do_log_stats=lambda: None)

        def generate(self, prompts, sampling, use_tqdm):
            return [_Result()]

        def get_metrics(self):
            return []

    def sampling_params(**kwargs):
        seen["sampling"] = kwargs
        return kwargs

    fake = types.ModuleType("vllm")
    fake.LLM, fake.SamplingParams = LLM, sampling_params
    monkeypatch.setitem(sys.modules, "vllm", fake)
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps(["a prompt"]))
    config = '{"method": "ngram", "num_speculative_tokens": 4}'
    out = str(tmp_path / "out")
    argv = ["offline.py", "--model", "M", "--prompts", str(prompts), "--repeat", "2",
            "--speculative-config", config, "--out-dir", out, *options]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    spec = importlib.util.spec_from_file_location("offline_under_test", OFFLINE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main()
    seen["record"] = json.loads((tmp_path / "out" / "vllm-arm.json").read_text())
    return seen


def test_the_defaults_are_the_cpu_tests_settings(tmp_path, monkeypatch):
    seen = run_offline(tmp_path, monkeypatch)
    assert seen["llm"]["dtype"] == "float32" and seen["llm"]["enforce_eager"] is True
    assert seen["llm"]["max_model_len"] == 512
    assert seen["sampling"] == {"temperature": 0.0, "max_tokens": 64, "ignore_eos": True}
    assert len(seen["record"]["legs"]) == 2


def test_a_gpu_box_gives_the_gate_s_settings(tmp_path, monkeypatch):
    seen = run_offline(
        tmp_path, monkeypatch, "--dtype", "bfloat16", "--no-enforce-eager", "--max-tokens",
        "256", "--max-model-len", "4096",
    )  # fmt: skip
    assert seen["llm"]["dtype"] == "bfloat16" and seen["llm"]["enforce_eager"] is False
    assert seen["llm"]["max_model_len"] == 4096
    assert seen["sampling"]["max_tokens"] == 256 and seen["sampling"]["ignore_eos"] is True
    assert seen["llm"]["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 4}
    assert seen["record"]["speculative_config"] == seen["llm"]["speculative_config"]


def test_the_gpu_box_steps_of_the_docs_run_offline_py_as_written(tmp_path, monkeypatch):
    """docs/matched.md's step 3: its offline.py line, variables filled, parses and reaches
    LLM(...) with the settings it names."""
    import re
    import shlex

    text = (OFFLINE.parents[2] / "docs" / "matched.md").read_text()
    block = text[text.index("## On a GPU box, end to end") :]
    command = re.search(r"python examples/vllm/offline\.py(.*?)--out-dir", block, re.S).group(1)
    words = shlex.split(command.replace("\\\n", " "))
    values = {"$MODEL": "M", "$MAX_TOKENS": "200", "$SPEC": '{"method": "ngram"}'}
    words = [values.get(word.replace('"', ""), word) for word in words]
    # run_offline gives the model, prompts, repeat and config; the doc's settings go after
    options = words
    skip = {"--model", "--prompts", "--repeat", "--speculative-config"}
    kept, i = [], 0
    while i < len(options):
        if options[i] in skip:
            i += 2
            continue
        kept.append(options[i])
        i += 1
    seen = run_offline(tmp_path, monkeypatch, *kept)
    assert seen["sampling"]["max_tokens"] == 200
    assert seen["llm"]["dtype"] == "bfloat16" and seen["llm"]["enforce_eager"] is False
