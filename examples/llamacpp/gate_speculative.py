"""A benchmark gate over llama.cpp's ``llama-speculative-simple`` with the step-log hook.

One engine process per prompt and run: each prompt runs ``--repeat`` times, one process after
another, so legs never overlap. Each process writes its verify steps to ``DFLASH_STEP_LOG``
(``OUT_DIR/steps.jsonl`` unless ``--log`` says otherwise, e.g. ``steps-%p.jsonl``) and, with
``--label-legs``, labels them with ``DFLASH_STEP_LEG``. The gate writes ``OUT_DIR/our-arm.json``:
one leg per process, timed around the process (the gate cannot see inside it), with the
engine's own counters (``n_drafted``, ``n_accept``, ``n_predict``, decode seconds) under
``engine_counters``; ``metrics.output_throughput_tok_s`` is the median ``tok_s`` of the warm legs
(``run > 1``).

    python examples/llamacpp/gate_speculative.py --out-dir /tmp/spec --prompts 3 --repeat 3

``completion_tokens`` is ``n_predict``: this engine takes every output token from a verify step
(the prompt's last token is verified with the first draft), so no token comes from prefill.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_common import PROMPTS, arm_record, binaries, models, speculative_args, unix_now

COUNTERS = {
    "n_predict": re.compile(r"\bn_predict\s*=\s*(\d+)"),
    "n_drafted": re.compile(r"\bn_drafted\s*=\s*(\d+)"),
    "n_accept": re.compile(r"\bn_accept\s*=\s*(\d+)"),
    "prompt_tokens": re.compile(r"\bencoded\s+(\d+) tokens"),
}
MAX_PROCESSES = 1000  # one engine process per prompt and run: keep a typo from running all day
DECODED = re.compile(r"\bdecoded\s+(\d+) tokens in\s+([0-9.]+) seconds")


def engine_counters(stderr: str, where: str) -> dict:
    """The engine's own summary, as it prints it at exit."""
    counters = {}
    for name, pattern in COUNTERS.items():
        found = pattern.findall(stderr)
        if len(found) != 1:
            sys.exit(f"gate: {where}: expected one '{name}' in the engine's output, found {found}")
        counters[name] = int(found[0])
    decoded = DECODED.findall(stderr)
    if len(decoded) != 1:
        sys.exit(f"gate: {where}: expected one 'decoded ... seconds' line, found {decoded}")
    counters["decode_secs"] = float(decoded[0][1])
    return counters


def run_leg(binary: str, model: dict, prompt: int, run: int, args, env: dict) -> dict:
    command = [
        *speculative_args(binary, model, args),
        "-n",
        str(args.n_predict),
        "-t",
        str(args.threads),
        "-p",
        PROMPTS[prompt % len(PROMPTS)],
    ]
    label = f"p{prompt}-r{run}"
    if args.label_legs:
        env = {**env, "DFLASH_STEP_LEG": label}
    start = unix_now()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    end = unix_now()
    where = f"prompt {prompt} run {run}"
    if proc.returncode != 0:
        sys.exit(f"gate: {where}: the engine exited with {proc.returncode}:\n{proc.stderr[-2000:]}")
    counters = engine_counters(proc.stderr, where)
    secs = end - start
    leg = {
        "run": run,
        "finish_reason": "length",
        "prompt_tokens": counters["prompt_tokens"],
        "completion_tokens": counters["n_predict"],
        "secs": round(secs, 6),
        "tok_s": counters["n_predict"] / secs,
        "generate_start_unix": start,
        "generate_end_unix": end,
        "prompt": prompt,
        "engine_counters": counters,
    }
    if args.label_legs:
        leg["leg"] = label
    return leg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each prompt (run 1 cold)")
    parser.add_argument("--n-predict", type=int, default=128)
    parser.add_argument("--draft-max", type=int, default=8)
    parser.add_argument("--draft", choices=("draft", "target", "unrelated"), default="draft")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--log", default="steps.jsonl", help="DFLASH_STEP_LOG under OUT_DIR")
    parser.add_argument("--label-legs", action="store_true", help="set DFLASH_STEP_LEG per leg")
    parser.add_argument("--bin-dir", type=Path, help="patched llama.cpp binaries (else built)")
    parser.add_argument("--models", type=Path, help="directory of make_models.py's output")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per engine process")
    args = parser.parse_args(argv)
    if min(args.prompts, args.repeat) < 1 or args.prompts * args.repeat > MAX_PROCESSES:
        parser.error(f"--prompts and --repeat: at least 1 each, at most {MAX_PROCESSES} runs")

    args.out_dir.mkdir(parents=True, exist_ok=True)
    for old in args.out_dir.glob("steps*.jsonl"):
        old.unlink()  # the engines append; start from empty logs
    binary = binaries(args.bin_dir)["llama-speculative-simple"]
    model = models(args.models, args.out_dir)
    env = {**os.environ, "DFLASH_STEP_LOG": str(args.out_dir / args.log)}
    env.pop("DFLASH_STEP_LEG", None)
    legs = [
        run_leg(binary, model, prompt, run, args, env)
        for prompt in range(args.prompts)
        for run in range(1, args.repeat + 1)
    ]
    config = {
        key: getattr(args, key)
        for key in ("prompts", "repeat", "n_predict", "draft_max", "draft", "threads", "log")
    }
    record = arm_record("llama-speculative-simple", config, legs)
    (args.out_dir / "our-arm.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
