"""Write the worked example of two runs of ours: the toy gate before and after a change.

``before`` is the toy gate as it ships (each draft position accepted with probability 0.7, a
verify forward of 200 us); ``after`` is a change that makes every forward faster (160 us) while
the drafter accepts less (0.6). Both run the same workload: 4 prompts x 3 runs, 2 requests per
leg, 128 tokens, k = 4, seed 7, no EOS, so their legs pair leg by leg:

    python examples/gate.py --prompts 4 --repeats 3 --concurrency 2 --max-tokens 128 --k 4 \
        --seed 7 --eos 0 --accept 0.7 --forward-us 200 --cold-us 3000 --out-dir before

The runs are those of ``examples/gate.py`` driving ``examples/toy_engine.cc`` with these
options, on a clock that does not drift: this script makes the engine's very draws (its
SplitMix64 stream, its decode loop, step for step) and lets each forward take exactly its
``--forward-us`` (the first run of a process ``--cold-us`` more), so every time in the logs is
known to the nanosecond and the example comes out the same bytes every time. The tests run the
real engine with the same options and check that its counters equal these legs'.

    python examples/make_ours_vs_ours.py fixtures/ours-vs-ours
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate import GATE_FIELDS, arm_record

from fold.inputs.steplog import format_line

MASK = (1 << 64) - 1
WORKLOAD = {"prompts": 4, "repeats": 3, "concurrency": 2, "max_tokens": 128, "k": 4, "seed": 7}
# No EOS (--eos 0): every request runs to max_tokens, so both runs emit the same tokens per leg
# and only the change moves the figures.
RUNS = {
    "before": {"accept": 0.7, "eos": 0.0, "forward_us": 200, "cold_us": 3000},
    "after": {"accept": 0.6, "eos": 0.0, "forward_us": 160, "cold_us": 3000},
}
START_UNIX_US = {"before": 1_796_100_000_000_000, "after": 1_796_200_000_000_000}
BETWEEN_RUNS_US = 1_000  # the engine prints a run's line and sets up the next
BETWEEN_PROMPTS_US = 250_000  # the gate starts the next process, which loads its model


class Rng:
    """toy_engine.cc's SplitMix64, draw for draw."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def uniform(self) -> float:
        return (self.next() >> 11) * 2.0**-53

    def below(self, n: int) -> int:
        return self.next() % n


def engine_process(
    prompt: int, options: dict, start_us: int, writer_id: str, pid: int
) -> tuple[list[dict], list[bytes], int]:
    """One engine process (one prompt): its runs' printed lines, its log lines and the time
    it ends, as toy_engine.cc makes them with a clock that moves only by the sleeps."""
    rng = Rng(WORKLOAD["seed"] * 1000 + prompt)
    prompt_tokens = 16 + rng.below(240)
    max_tokens, k, concurrency = WORKLOAD["max_tokens"], WORKLOAD["k"], WORKLOAD["concurrency"]
    next_seq = 1
    now_us = start_us
    printed, lines = [], []
    for run in range(1, WORKLOAD["repeats"] + 1):
        requests = [{"seq": next_seq + i, "generated": 1, "done": False, "eos": False}
                    for i in range(concurrency)]  # fmt: skip
        next_seq += concurrency
        counters = dict.fromkeys(("rows", "steps", "proposed", "accepted", "emitted"), 0)
        start = now_us
        if run == 1:
            now_us += options["cold_us"]
        while any(not r["done"] and r["generated"] < max_tokens for r in requests):
            now_us += options["forward_us"]
            for r in requests:
                if r["done"]:
                    continue
                remaining = max_tokens - r["generated"]
                proposed = min(remaining - 1, k)
                accepted = 0
                while accepted < proposed and rng.uniform() < options["accept"]:
                    accepted += 1
                emitted = accepted + 1
                if rng.uniform() < options["eos"]:
                    emitted = 1 + rng.below(emitted)
                    r["eos"] = True
                r["generated"] += emitted
                r["done"] = r["eos"] or r["generated"] >= max_tokens
                lines.append(
                    format_line(
                        writer_id=writer_id,
                        n=len(lines),
                        t_ns=now_us * 1000,
                        pid=pid,
                        seq=r["seq"],
                        proposed=proposed,
                        accepted=accepted,
                        emitted=emitted,
                        leg=f"prompt-{prompt}",
                    )
                )
                counters["rows"] += 1
                counters["steps"] += proposed > 0
                counters["proposed"] += proposed
                counters["accepted"] += accepted
                counters["emitted"] += emitted
        completion = sum(r["generated"] for r in requests)
        secs = (now_us - start) / 1e6
        printed.append(
            {
                "run": run,
                "finish_reason": "stop" if any(r["eos"] for r in requests) else "length",
                "prompt_tokens": prompt_tokens * concurrency,
                "completion_tokens": completion,
                "secs": float(f"{secs:.6f}"),
                "tok_s": float(f"{completion / secs:.3f}"),
                "generate_start_unix": float(f"{start // 10**6}.{start % 10**6:06d}"),
                "generate_end_unix": float(f"{now_us // 10**6}.{now_us % 10**6:06d}"),
                "requests": concurrency,
                **counters,
                "dropped": 0,
            }
        )
        now_us += BETWEEN_RUNS_US
    return printed, lines, now_us


def write_run(out_dir: Path, name: str) -> None:
    options = RUNS[name]
    args = argparse.Namespace(**WORKLOAD, **options)
    legs, log = [], []
    now_us = START_UNIX_US[name]
    for prompt in range(WORKLOAD["prompts"]):
        writer_id = f"{(0xA0 if name == 'before' else 0xB0) + prompt:016x}"
        printed, lines, now_us = engine_process(prompt, options, now_us, writer_id, 6000 + prompt)
        for record in printed:  # as gate.run_prompt turns the engine's lines into legs
            leg = {field: record.pop(field) for field in GATE_FIELDS}
            leg["leg"] = f"prompt-{prompt}"
            leg["prompt"] = prompt
            leg["engine_counters"] = record
            legs.append(leg)
        log.extend(lines)
        now_us += BETWEEN_PROMPTS_US
    directory = out_dir / name
    directory.mkdir(parents=True, exist_ok=True)
    record = arm_record(legs, args)
    (directory / "our-arm.json").write_text(json.dumps(record, indent=2) + "\n")
    (directory / "steps.jsonl").write_bytes(b"".join(log))


def main(argv: list[str] | None = None) -> int:
    out_dir = Path((argv or sys.argv[1:] or ["fixtures/ours-vs-ours"])[0])
    for name in RUNS:
        write_run(out_dir, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
