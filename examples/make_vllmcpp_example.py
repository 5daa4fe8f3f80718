"""Write the worked example in vllm.cpp's own layout: its gate's record, its hook log, its stderr.

The DFlash2 gate runs one ``vllm-cli`` process per prompt (4 prompts x 5 runs, 64 tokens, k = 7,
one sequence at a time) and writes ``our-arm.json`` as canonical JSON with the three per-leg
counter deltas and a pooled ``spec_acceptance`` block over the warm legs (run > 1). With
``VT_SPEC_TRACE=1`` each process prints one ``[SPECTRACE]`` line per verify step on stderr,
before each leg's three ``vllm-cli: run=r/R`` lines. The same steps, written by the hook, are
``steps.jsonl``. Layout facts: ``shared/reference/vllmcpp-arm.md``.

Decoding is greedy, so every run of a prompt verifies the same drafts and accepts the same
tokens; only the time differs (run 1 carries the graph capture). Each prompt's acceptance is a
short repeating pattern whose tokens add up to exactly 63 (64 minus the prefill token), so no
step is cut by max_tokens and every figure can be checked by hand
(``fixtures/vllmcpp/README.md``).

    python examples/make_vllmcpp_example.py fixtures/vllmcpp
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

from fold.inputs.steplog import format_line

DRAFTS_PER_STEP = 7
MAX_TOKENS = 64
REPEAT = 5
PROMPTS = [
    "Summarise the plot of Hamlet in three sentences.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "List the planets of the solar system with one fact about each.",
    "Count to twenty.",
]
PROMPT_TOKENS = [31, 24, 40, 5]
# Accepted drafts per verify step, repeated until the leg's 63 verify-step tokens are out.
ACCEPT_PATTERNS = [[2], [6], [1, 4], [0, 1, 3]]
# Per-step time of the warm runs, in microseconds; run 1 is 40% slower and prefills longer.
WARM_STEP_US = [268_000, 302_000, 281_000, 259_000]
RUN_JITTER_US = [0, 0, 3_000, -2_000, 1_000]
PREFILL_US = 180_000
COLD_PREFILL_US = 950_000
PROCESS_START_UNIX_US = 1_796_000_000_000_000
PROCESS_SPACING_US = 90_000_000
MODEL_LOAD_US = 4_200_000
STEADY_CLOCK_INSIDE_US = 40  # the secs interval starts this long after generate_start_unix
BETWEEN_LEGS_US = 30_000  # counter reads and the three printed lines


def _steps_of_leg(prompt: int) -> list[int]:
    pattern = ACCEPT_PATTERNS[prompt]
    accepted: list[int] = []
    while sum(a + 1 for a in accepted) < MAX_TOKENS - 1:
        accepted.append(pattern[len(accepted) % len(pattern)])
    assert sum(a + 1 for a in accepted) == MAX_TOKENS - 1, "a pattern must fill 63 tokens"
    return accepted


def _canonical(document: object) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def _token_list(tokens: list[int]) -> str:
    return "[" + " ".join(str(token) for token in tokens) + "]"


def _leg_figures(run: int, proposed: int, accepted: int, steps: int) -> dict:
    return {
        "run": run,
        "drafts_proposed": proposed,
        "drafts_accepted": accepted,
        "drafted_request_steps": steps,
        "accept_rate": accepted / proposed,
        "mean_acceptance_length": (accepted + steps) / steps,
    }


def write_example(out_dir: Path) -> None:
    tokens = random.Random(2832)
    (out_dir / "stderr").mkdir(parents=True, exist_ok=True)
    legs: list[dict] = []
    hook_lines: list[bytes] = []
    for prompt in range(len(PROMPTS)):
        writer_id = f"{0x7C00 + prompt:016x}"
        pid = 51_000 + prompt
        line_number = 0
        stderr = [
            f"vllm-cli: loading model /models/qwen3-8b (dflash2 drafter, k={DRAFTS_PER_STEP})",
            "[INFO] kv cache: 2048 blocks of 16 tokens",
            "[INFO] cuda graphs: capturing on first run",
        ]
        now_us = PROCESS_START_UNIX_US + prompt * PROCESS_SPACING_US + MODEL_LOAD_US
        accepted_per_step = _steps_of_leg(prompt)
        for run in range(1, REPEAT + 1):
            step_us = WARM_STEP_US[prompt] + RUN_JITTER_US[run - 1]
            prefill_us = PREFILL_US
            if run == 1:
                step_us = step_us * 14 // 10
                prefill_us = COLD_PREFILL_US
            secs_us = prefill_us + len(accepted_per_step) * step_us
            start_us = now_us
            steady_start_us = start_us + STEADY_CLOCK_INSIDE_US
            end_us = steady_start_us + secs_us + STEADY_CLOCK_INSIDE_US
            position = PROMPT_TOKENS[prompt] + 1  # the prefill token is out before any step
            for index, accepted in enumerate(accepted_per_step):
                draft = [tokens.randrange(150_000) for _ in range(DRAFTS_PER_STEP)]
                emit = [*draft[:accepted], tokens.randrange(150_000)]
                stderr.append(
                    f"[SPECTRACE] req={run - 1} pos={position:<2} k={DRAFTS_PER_STEP} "
                    f"ns={accepted + 1} acc={accepted} draft={_token_list(draft)} "
                    f"emit={_token_list(emit)}"
                )
                t_us = steady_start_us + prefill_us + (index + 1) * step_us
                hook_lines.append(
                    format_line(
                        writer_id=writer_id,
                        n=line_number,
                        t_ns=t_us * 1_000 + 123,
                        pid=pid,
                        seq=run - 1,
                        proposed=DRAFTS_PER_STEP,
                        accepted=accepted,
                        emitted=accepted + 1,
                    )
                )
                line_number += 1
                position += accepted + 1
            secs = round(secs_us / 1e6, 3)
            tok_s = float(f"{MAX_TOKENS / secs:.3f}")
            proposed = DRAFTS_PER_STEP * len(accepted_per_step)
            accepted_total = sum(accepted_per_step)
            steps = len(accepted_per_step)
            leg = {
                "run": run,
                "finish_reason": "length",
                "prompt_tokens": PROMPT_TOKENS[prompt],
                "completion_tokens": MAX_TOKENS,
                "secs": secs,
                "tok_s": tok_s,
                "generate_start_unix": float(f"{start_us / 1e6:.6f}"),
                "generate_end_unix": float(f"{end_us / 1e6:.6f}"),
                "spec_drafts_proposed": proposed,
                "spec_drafts_accepted": accepted_total,
                "spec_drafted_request_steps": steps,
            }
            legs.append(leg)
            tag = f"vllm-cli: run={run}/{REPEAT}"
            stderr += [
                f"{tag} finish_reason=length prompt_tokens={PROMPT_TOKENS[prompt]} "
                f"completion_tokens={MAX_TOKENS} secs={secs:.3f} tok_s={tok_s:.3f}",
                f"{tag} generate_start_unix={start_us / 1e6:.6f} "
                f"generate_end_unix={end_us / 1e6:.6f}",
                f"{tag} spec_drafts_proposed={proposed} spec_drafts_accepted={accepted_total} "
                f"spec_drafted_request_steps={steps}",
            ]
            now_us = end_us + BETWEEN_LEGS_US
        stderr.append("vllm-cli: done")
        (out_dir / "stderr" / f"prompt-{prompt}.log").write_text("\n".join(stderr) + "\n")

    warm = [leg for leg in legs if int(leg["run"]) > 1]
    proposed = sum(leg["spec_drafts_proposed"] for leg in warm)
    accepted = sum(leg["spec_drafts_accepted"] for leg in warm)
    steps = sum(leg["spec_drafted_request_steps"] for leg in warm)
    pooled = _leg_figures(0, proposed, accepted, steps)
    del pooled["run"]
    workload = {
        "concurrency": 1,
        "max_num_seqs": 1,
        "max_tokens": MAX_TOKENS,
        "num_prompts": len(PROMPTS),
        "num_speculative_tokens": DRAFTS_PER_STEP,
        "repeat": REPEAT,
        "seed": 0,
        "temperature": 0.0,
    }
    record = {
        "artifacts": {"arm": "our-arm.json"},
        "binary": "/opt/vllm.cpp/build/vllm-cli",
        "build": {"cmake_build_type": "Release", "git_commit": "e238ef9"},
        "clock": None,
        "clock_error": None,
        "cold_discard_cause": "run 1 of each prompt process carries the first graph capture",
        "cold_legs_discarded": len(legs) - len(warm),
        "contention": {"other_gpu_processes": 0},
        "env": {"CUDA_VISIBLE_DEVICES": "0"},
        "legs": legs,
        "metrics": {"output_throughput_tok_s": statistics.median(leg["tok_s"] for leg in warm)},
        "models": {"draft": "dflash2-qwen3-8b", "target": "qwen3-8b"},
        "prompts": PROMPTS,
        "spec_acceptance": {
            **pooled,
            "warm_legs": len(warm),
            "per_leg": [
                _leg_figures(
                    leg["run"],
                    leg["spec_drafts_proposed"],
                    leg["spec_drafts_accepted"],
                    leg["spec_drafted_request_steps"],
                )
                for leg in warm
            ],
            "bonus_token": "drafts_accepted excludes the bonus token the target samples every "
            "verify step; mean_acceptance_length = (accepted + steps) / steps includes it",
        },
        "speculative_config": {"method": "dflash2", "num_speculative_tokens": DRAFTS_PER_STEP},
        "warm_legs": len(warm),
        "workload": workload,
    }
    (out_dir / "our-arm.json").write_bytes(_canonical(record))
    (out_dir / "steps.jsonl").write_bytes(b"".join(hook_lines))


if __name__ == "__main__":
    write_example(Path(sys.argv[1] if len(sys.argv) > 1 else "fixtures/vllmcpp"))
