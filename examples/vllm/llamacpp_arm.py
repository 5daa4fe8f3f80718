"""Our arm for a gate of two real engines: llama.cpp with the hook, against vLLM's ngram arm.

The same tiny model as ``vllm_gate.py``'s vLLM runs (``make_model.py``, converted with
``to_gguf.py``), the same prompts, repeats and output length, greedy, and n-gram drafting on
both sides: llama.cpp's ``ngram-simple`` with a lookup of ``--ngram`` tokens and drafts of up
to ``--k``, against vLLM's ``ngram`` with ``prompt_lookup_min = prompt_lookup_max = --ngram``
and ``num_speculative_tokens = --k``. What still differs (see the README): vLLM drafts what
followed the earliest occurrence of the n-gram, llama.cpp what followed the latest; llama.cpp
drafts at most the tokens still to generate minus one and nothing while the history is shorter
than ``ngram + k + 2`` tokens.

One ``llama-server`` (the patched build of ``examples/llamacpp/build.py``; one slot, one
thread, on 127.0.0.1) with ``DFLASH_STEP_LOG`` set; each prompt ``--repeat`` times through
``/completion``, prompt by prompt as vLLM's offline arm runs them. Written to OUT_DIR:
``our-arm.json`` (the arm record, one leg per request, timed around it), ``steps.jsonl`` (the
step log), ``completions.jsonl`` (the responses, with their token ids), ``metrics.prom``
(``/metrics`` before and after), ``model.gguf`` and ``server.log``.

    python examples/vllm/llamacpp_arm.py --model MODEL_DIR --out-dir /tmp/ours
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "llamacpp"))

import gate_common  # noqa: E402  (sibling scripts, not packages)
import gate_server  # noqa: E402
import to_gguf  # noqa: E402
import vllm_gate  # noqa: E402


class NgramServer(gate_server.Server):
    """llama-server with n-gram drafting and no draft model, one slot."""

    def __init__(self, binary: str, model: Path, args, env: dict, log: Path):
        self.port = gate_server.free_port()
        self.base = f"http://{gate_server.HOST}:{self.port}"
        command = [
            binary,
            "-m",
            str(model),
            "--spec-type",
            "ngram-simple",
            "--spec-ngram-simple-size-n",
            str(args.ngram),
            "--spec-ngram-simple-size-m",
            str(args.k),
            "--temp",
            "0",
            "--seed",
            "1",
            "--parallel",
            "1",
            "--ctx-size",
            "512",
            "--threads",
            "1",
            "--host",
            gate_server.HOST,
            "--port",
            str(self.port),
            "--metrics",
        ]
        self.output = open(log, "w")  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(command, env=env, stdout=self.output, stderr=subprocess.STDOUT)


def run(args) -> Path:
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("steps*.jsonl"):
        old.unlink()  # the engine appends: start from an empty log
    binary = gate_common.binaries(args.bin_dir)["llama-server"]
    model = to_gguf.convert(args.model, out / "model.gguf")
    env = {**os.environ, "DFLASH_STEP_LOG": str(out / "steps.jsonl")}
    env.pop("DFLASH_STEP_LEG", None)
    server = NgramServer(binary, model, args, env, out / "server.log")
    legs, responses = [], []
    deadline = time.monotonic() + args.deadline
    try:
        server.wait_ready(min(120.0, args.deadline))
        before = server.metrics()
        for record, prompt in enumerate(args.prompt_texts):
            for run_number in range(1, args.repeat + 1):
                if time.monotonic() > deadline:
                    raise gate_server.GateError(f"longer than --deadline {args.deadline:g} s")
                body = {
                    "prompt": prompt,
                    "n_predict": args.max_tokens,
                    "temperature": 0,
                    "ignore_eos": True,
                    "cache_prompt": False,
                    "return_tokens": True,
                }
                start = gate_common.unix_now()
                raw = gate_server.http(server.base + "/completion", body, args.timeout)
                end = gate_common.unix_now()
                response = json.loads(raw)
                tokens = response["tokens_predicted"]
                secs = end - start
                legs.append(
                    {
                        "run": run_number,
                        "record": record,
                        "finish_reason": "length" if response["stop_type"] == "limit" else "stop",
                        "prompt_tokens": response["tokens_evaluated"],
                        "completion_tokens": tokens,
                        "secs": round(secs, 6),
                        "tok_s": tokens / secs,
                        "generate_start_unix": start,
                        "generate_end_unix": end,
                    }
                )
                responses.append(gate_server.as_line(raw))
        after = server.metrics()
    except (gate_server.GateError, urllib.error.URLError, TimeoutError) as error:
        sys.exit(f"llamacpp_arm: {error}; the server's output is in {out / 'server.log'}")
    finally:
        server.stop()
    config = {
        "engine": "llama-server",
        "spec_type": "ngram-simple",
        "ngram": args.ngram,
        "k": args.k,
        "max_tokens": args.max_tokens,
        "repeat": args.repeat,
        "prompts": len(args.prompt_texts),
    }
    record = gate_common.arm_record("llama-server", config, legs)
    (out / "our-arm.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "completions.jsonl").write_text("".join(responses))
    (out / "metrics.prom").write_text(before + after)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="make_model.py's directory")
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=len(vllm_gate.PROMPTS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=vllm_gate.K)
    parser.add_argument("--ngram", type=int, default=vllm_gate.NGRAM)
    parser.add_argument("--bin-dir", type=Path, help="patched llama.cpp binaries (else built)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per request")
    parser.add_argument("--deadline", type=float, default=900, help="seconds for the whole run")
    args = parser.parse_args(argv)
    if not 1 <= args.prompts <= len(vllm_gate.PROMPTS) or not 1 <= args.repeat <= 20:
        parser.error(f"--prompts 1..{len(vllm_gate.PROMPTS)}, --repeat 1..20")
    args.prompt_texts = list(vllm_gate.PROMPTS[: args.prompts])
    print(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
