"""What the step-log hook costs a real engine: llama.cpp's speculative-simple on a tiny model.

Four contestants, run interleaved (each round runs every contestant once, in a rotated order, so
drift in the machine's load falls on all of them alike):

- ``absent``: speculative-simple built without the hook (the baseline);
- ``absent again``: the same binary once more: its ratio to ``absent`` is the noise floor;
- ``compiled in, off``: the patched binary with ``DFLASH_STEP_LOG`` unset;
- ``on``: the patched binary writing every verify step to a file.

The figure is the engine's own decode speed (its ``decoded N tokens ... speed: X t/s`` line,
computed from microsecond timers; model loading and prompt processing excluded), one process
per run. Prints each contestant's median and interquartile spread and its ratio to ``absent``.

    python benchmarks/llamacpp_hook_cost.py [--rounds 15] [--n-predict 900]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llamacpp"
sys.path.insert(0, str(EXAMPLE))

import build  # noqa: E402
import make_models  # noqa: E402
from gate_common import PROMPTS, SPEC_ARGS  # noqa: E402

SPEED = re.compile(r"decoded\s+(\d+) tokens in\s+[0-9.]+ seconds, speed:\s+([0-9.]+) t/s")
BASELINE = "absent"


def decode_speed(binary: str, models: dict, args, log: Path | None) -> float:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DFLASH_")}
    if log is not None:
        env["DFLASH_STEP_LOG"] = str(log)
    command = [
        binary,
        "-m",
        str(models["target"]),
        "-md",
        str(models["draft"]),
        *SPEC_ARGS,
        "--spec-draft-n-max",
        "8",
        "-n",
        str(args.n_predict),
        "-t",
        "1",
        "-p",
        PROMPTS[0],
    ]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    found = SPEED.findall(proc.stderr)
    if len(found) != 1:
        sys.exit(f"benchmark: no 'decoded ... speed' line from {binary}:\n{proc.stderr[-1000:]}")
    return float(found[0][1])


def quartiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--n-predict", type=int, default=900, help="tokens per run (< 1000)")
    args = parser.parse_args(argv)
    binaries = build.ensure_built(hookless=True)
    patched, hookless = binaries["llama-speculative-simple"], binaries[build.HOOKLESS]
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        models = make_models.make_models(directory / "models")
        log = directory / "steps.jsonl"
        contestants = {
            BASELINE: (hookless, None),
            "absent again": (hookless, None),
            "compiled in, off": (patched, None),
            "on": (patched, log),
        }
        names = list(contestants)
        speeds: dict[str, list[float]] = {name: [] for name in names}
        decode_speed(hookless, models, args, None)  # warm the page cache before timing
        for round_index in range(args.rounds):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                binary, path = contestants[name]
                speeds[name].append(decode_speed(binary, models, args, path))
        lines_written = len(log.read_text().splitlines())
    base = statistics.median(speeds[BASELINE])
    print(
        f"llama-speculative-simple, tiny model, {args.n_predict} tokens per run, "
        f"{args.rounds} interleaved rounds; {lines_written} step lines written by 'on'"
    )
    print(f"{'contestant':<18} {'median tok/s':>12} {'IQR tok/s':>21} {'vs absent':>10}")
    for name in names:
        values = speeds[name]
        low, high = quartiles(values)
        median = statistics.median(values)
        spread = f"{low:.0f} .. {high:.0f}"
        print(f"{name:<18} {median:>12.1f} {spread:>21} {median / base:>10.4f}")
    low, high = quartiles(speeds[BASELINE])
    print(
        f"noise: 'absent again' / 'absent' = "
        f"{statistics.median(speeds['absent again']) / base:.4f}; the baseline's IQR is "
        f"{100 * (high - low) / base:.1f}% of its median"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
