"""Records written as vllm.cpp's gate writes ``our-arm.json`` (shared reference
``vllmcpp-arm.md``), with a step log of the same steps as the hook would write it.

One ``vllm-cli`` process per prompt, ``repeat`` runs in each (run 1..repeat), one request per
leg (``--max-num-seqs 1``). Each leg is given as its verify steps' accepted counts (every step
verifies ``k`` drafts); completion_tokens is the prefill token plus accepted + 1 per step, the
last step cut at ``max_tokens``. Counters, ``spec_acceptance`` and the throughput fold are
computed here from those steps the way the gate computes them, independently of the fold.
"""

from __future__ import annotations

import copy
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fold.inputs.steplog import format_line

START_UNIX = 1_796_000_000.0
BONUS_SENTENCE = (
    "drafts_accepted excludes the bonus token; mean_acceptance_length = "
    "(drafts_accepted + drafted_request_steps) / drafted_request_steps includes it"
)


@dataclass
class Leg:
    accepted: list[int]
    secs: float
    k: int

    @property
    def steps(self) -> int:
        return len(self.accepted)

    @property
    def proposed(self) -> int:
        return self.k * len(self.accepted)

    @property
    def accepted_total(self) -> int:
        return sum(self.accepted)

    def emitted(self, max_tokens: int) -> list[int]:
        """Tokens each verify step appends, after the prefill's one, cut at max_tokens."""
        out, total = [], 1
        for accepted in self.accepted:
            tokens = min(accepted + 1, max_tokens - total)
            out.append(tokens)
            total += tokens
        return out


def canonical(document: Any) -> bytes:
    """``write_json_atomic``: sorted keys, no spaces, a newline."""
    return (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()


def gate_figures(legs: list[dict[str, Any]]) -> dict[str, Any]:
    """The five figures the gate writes for a set of legs' counters."""
    s = sum(leg["spec_drafted_request_steps"] for leg in legs)
    p = sum(leg["spec_drafts_proposed"] for leg in legs)
    a = sum(leg["spec_drafts_accepted"] for leg in legs)
    return {
        "drafted_request_steps": s,
        "drafts_proposed": p,
        "drafts_accepted": a,
        "accept_rate": a / p if p else None,
        "mean_acceptance_length": (a + s) / s if s else None,
    }


def spec_acceptance(legs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The gate's block over the warm legs (run > 1); None when no leg carries counters."""
    if not any("spec_drafts_proposed" in leg for leg in legs):
        return None
    warm = [leg for leg in legs if int(leg["run"]) > 1]
    return {
        "warm_legs": len(warm),
        **gate_figures(warm),
        "per_leg": [{"run": leg["run"], **gate_figures([leg])} for leg in warm],
        "bonus_token": BONUS_SENTENCE,
    }


def refold(document: dict[str, Any]) -> dict[str, Any]:
    """The gate's own folds (throughput, warm counts, spec_acceptance) of the legs as they
    stand, for a record whose legs a test changed."""
    document = copy.deepcopy(document)
    legs = document["legs"]
    warm = [leg for leg in legs if int(leg["run"]) > 1]
    document["metrics"]["output_throughput_tok_s"] = statistics.median(leg["tok_s"] for leg in warm)
    document["warm_legs"] = len(warm)
    document["cold_legs_discarded"] = len(legs) - len(warm)
    document["spec_acceptance"] = spec_acceptance(legs)
    return document


def record(
    prompts: list[list[Leg]],
    *,
    max_tokens: int,
    k: int,
    counters: bool = True,
    prompt_texts: list[str] | None = None,
) -> dict[str, Any]:
    """The arm record of ``prompts`` (per prompt, its runs' legs), every field the gate
    writes at the top level and on each leg."""
    repeat = len(prompts[0])
    texts = prompt_texts or [f"Prompt {i}: write about topic {i}." for i in range(len(prompts))]
    legs = []
    clock = START_UNIX
    for prompt in prompts:
        clock += 30.0  # the process loads the model
        for run, leg in enumerate(prompt, start=1):
            completion = 1 + sum(leg.emitted(max_tokens))
            assert completion == max_tokens, "the gate refuses a leg cut short"
            start = round(clock, 6)
            end = round(start + leg.secs, 6)
            entry = {
                "run": run,
                "finish_reason": "length",
                "prompt_tokens": 31,
                "completion_tokens": completion,
                "secs": float(f"{leg.secs:.3f}"),
                "tok_s": float(f"{completion / leg.secs:.3f}"),
                "generate_start_unix": start,
                "generate_end_unix": end,
            }
            if counters:
                entry |= {
                    "spec_drafts_proposed": leg.proposed,
                    "spec_drafts_accepted": leg.accepted_total,
                    "spec_drafted_request_steps": leg.steps,
                }
            legs.append(entry)
            clock = end + 0.25
    document = {
        "artifacts": {"model": {"path": "/models/target", "sha256": "0" * 64}},
        "contention": {"lease": "test", "compute_processes": []},
        "build": {"revision": "e238ef9", "recipe": "cmake --preset release"},
        "models": {"target": "/models/target", "draft": "/models/draft"},
        "speculative_config": {"method": "dflash2", "num_speculative_tokens": k},
        "env": {"VT_SERVER_SSE_PING_S": "0"},
        "prompts": texts,
        "workload": {
            "num_prompts": len(prompts),
            "max_tokens": max_tokens,
            "num_speculative_tokens": k,
            "max_num_seqs": 1,
            "repeat": repeat,
            "concurrency": 1,
            "temperature": 0.0,
            "seed": 0,
        },
        "metrics": {"output_throughput_tok_s": 0.0},
        "legs": legs,
        "spec_acceptance": None,
        "warm_legs": 0,
        "cold_legs_discarded": 0,
        "cold_discard_cause": "run 1 of each prompt carries the first graph capture",
        "clock": None,
        "clock_error": "clock sampling needs the GPU",
        "binary": "/build/bin/vllm-cli",
    }
    return refold(document)


def step_log(prompts: list[list[Leg]], document: dict[str, Any], *, max_tokens: int) -> bytes:
    """The hook's lines for every leg's steps: one writer per prompt process, the request id
    a per-process counter, the steps spread inside the leg's window."""
    lines = []
    index = 0
    for number, prompt in enumerate(prompts):
        writer = f"{0xC0FFEE00 + number:016x}"
        n = 0
        for seq, leg in enumerate(prompt):
            entry = document["legs"][index]
            start_ns = round(entry["generate_start_unix"] * 1e6) * 1000
            end_ns = round(entry["generate_end_unix"] * 1e6) * 1000
            emitted = leg.emitted(max_tokens)
            for position, accepted in enumerate(leg.accepted):
                t_ns = start_ns + (end_ns - start_ns) * (position + 1) // (leg.steps + 1)
                lines.append(
                    format_line(
                        writer_id=writer,
                        n=n,
                        t_ns=t_ns,
                        pid=4000 + number,
                        seq=seq,
                        proposed=leg.k,
                        accepted=accepted,
                        emitted=emitted[position],
                    )
                )
                n += 1
            index += 1
    return b"".join(lines)


def write_pair(
    directory: Path, document: dict[str, Any], log: bytes | None = None
) -> tuple[str, str | None]:
    arm_path = directory / "our-arm.json"
    arm_path.write_bytes(canonical(document))
    if log is None:
        return str(arm_path), None
    log_path = directory / "steps.jsonl"
    log_path.write_bytes(log)
    return str(arm_path), str(log_path)


# The hand-worked example: 2 prompts x 3 runs, k = 4, max_tokens 12 (see test_engine_counters).
K = 4
MAX_TOKENS = 12
EXAMPLE = [
    [
        Leg([1, 2, 0, 3, 0], 1.000, K),
        Leg([3, 3, 2], 0.800, K),
        Leg([2, 2, 2, 1], 0.750, K),
    ],
    [
        Leg([0] * 11, 1.500, K),
        Leg([4, 4, 1], 0.600, K),
        Leg([1, 1, 1, 1, 1, 0], 0.960, K),
    ],
]
