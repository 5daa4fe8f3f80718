"""A stand-in for the benchmark gate, driving examples/toy_engine.cc.

For each of ``--prompts`` prompts it runs the toy engine once (one process, ``--repeats`` generate
calls), one prompt after another so legs never overlap, with ``DFLASH_STEP_LOG`` pointing at
``OUT_DIR/steps.jsonl`` and ``DFLASH_STEP_LEG=prompt-<i>``. It writes ``OUT_DIR/our-arm.json``
shaped like the real gate's arm record: ``legs`` (one per generate call), ``metrics`` with the
median ``tok_s`` of the warm legs (run > 1), ``warm_legs`` and ``cold_legs_discarded``. Each leg
also carries the engine's own counters under ``engine_counters`` so tests can check the fold.

    python examples/gate.py --prompts 3 --repeats 3 --concurrency 3 --seed 7 --out-dir /tmp/arm
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATE_FIELDS = (
    "run",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "secs",
    "tok_s",
    "generate_start_unix",
    "generate_end_unix",
)
BUILD = [
    "-std=c++17",
    "-O2",
    "-Wall",
    "-Wextra",
    "-Wpedantic",
    "-Werror",
    f"-I{ROOT / 'instrument'}",
    str(ROOT / "examples" / "toy_engine.cc"),
]


def build_engine(directory: Path) -> Path:
    compiler = shutil.which("g++")
    if compiler is None:
        sys.exit("gate: g++ is needed to build the toy engine (or pass --engine PATH)")
    out = directory / "toy_engine"
    subprocess.run([compiler, *BUILD, "-o", str(out)], check=True)
    return out


def run_prompt(engine: Path, prompt: int, args: argparse.Namespace, log: Path) -> list[dict]:
    """One engine process for one prompt; returns its legs in run order."""
    env = dict(os.environ)
    env["DFLASH_STEP_LOG"] = str(log)
    env["DFLASH_STEP_LEG"] = f"prompt-{prompt}"
    command = [
        str(engine),
        "--seed",
        str(args.seed * 1000 + prompt),
        "--runs",
        str(args.repeats),
        "--concurrency",
        str(args.concurrency),
        "--max-tokens",
        str(args.max_tokens),
        "--k",
        str(args.k),
    ]
    for option, value in engine_options(args).items():
        command += [f"--{option.replace('_', '-')}", str(value)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    legs = []
    for line in proc.stdout.splitlines():
        record = json.loads(line)
        leg = {field: record.pop(field) for field in GATE_FIELDS}
        leg["leg"] = env["DFLASH_STEP_LEG"]
        leg["prompt"] = prompt
        leg["engine_counters"] = record
        legs.append(leg)
    if len(legs) != args.repeats:
        sys.exit(f"gate: prompt {prompt} printed {len(legs)} runs, expected {args.repeats}")
    return legs


def engine_options(args: argparse.Namespace) -> dict:
    """The engine's own settings given to this gate (the drafter's quality, the forward's
    time): what a change to the engine changes, kept apart from the workload in ``config``."""
    names = ("accept", "eos", "forward_us", "cold_us", "draft_us", "ks")
    found = {name: getattr(args, name, None) for name in names}
    return {name: value for name, value in found.items() if value is not None}


def arm_record(legs: list[dict], args: argparse.Namespace) -> dict:
    warm = [leg for leg in legs if leg["run"] > 1]
    throughput = statistics.median(leg["tok_s"] for leg in warm) if warm else None
    options = engine_options(args)
    return {
        "arm": "ours",
        "engine": "toy_engine",
        "config": {
            "prompts": args.prompts,
            "repeats": args.repeats,
            "concurrency": args.concurrency,
            "max_tokens": args.max_tokens,
            "k": args.k,
            "seed": args.seed,
        },
        **({"engine_options": options} if options else {}),
        "legs": legs,
        "metrics": {"output_throughput_tok_s": throughput},
        "warm_legs": len(warm),
        "cold_legs_discarded": len(legs) - len(warm),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--accept", type=float, help="the engine's --accept (default: its own)")
    parser.add_argument("--eos", type=float, help="the engine's --eos")
    parser.add_argument("--forward-us", type=int, help="the engine's --forward-us")
    parser.add_argument("--cold-us", type=int, help="the engine's --cold-us")
    parser.add_argument(
        "--ks", help="the engine's --ks: draft lengths taken forward by forward, as 2,4,6"
    )
    parser.add_argument("--draft-us", type=int, help="the engine's --draft-us")
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--engine", type=Path, help="toy_engine binary (built when omitted)")
    args = parser.parse_args(argv)
    if args.prompts < 1 or args.repeats < 1 or args.concurrency < 1:
        parser.error("--prompts, --repeats and --concurrency must be at least 1")

    args.out_dir.mkdir(parents=True, exist_ok=True)
    log = args.out_dir / "steps.jsonl"
    log.unlink(missing_ok=True)  # the engines append; start from an empty log
    with tempfile.TemporaryDirectory() as build_dir:
        engine = args.engine or build_engine(Path(build_dir))
        legs = [leg for p in range(args.prompts) for leg in run_prompt(engine, p, args, log)]
    (args.out_dir / "our-arm.json").write_text(json.dumps(arm_record(legs, args), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
