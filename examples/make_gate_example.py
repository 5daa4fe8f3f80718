"""Write the gate example of the comparison: our arm at 14.951 tok/s against vLLM and SGLang.

Our warm legs are built to hold exactly the vLLM fixture's counts (S = 310 drafts, P = 2170 draft
tokens, A = 1000 accepted, k = 7), so our mean acceptance length equals vLLM's (4.23) and the
whole throughput gap (14.951 / 16.111 = 0.928) must come out as verify-step speed. The log is
written with the Python writer, deterministically:

    python examples/make_gate_example.py fixtures/gate-example
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fold.inputs.steplog import format_line

START_UNIX_S = 1_795_000_000
DRAFTS_PER_STEP = 7
# (run, verify steps, accepted draft tokens, tok_s) per leg; three prompts, run 1 is cold.
LEGS = [
    (1, 40, 120, 13.100), (2, 52, 168, 14.900), (3, 52, 168, 14.951),
    (1, 41, 125, 13.300), (2, 52, 168, 14.951), (3, 51, 165, 15.000),
    (1, 39, 118, 12.900), (2, 52, 166, 14.800), (3, 51, 165, 15.100),
]  # fmt: skip
GAP_S = 2.0


def write_example(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    lines: list[bytes] = []
    legs = []
    start_ns = START_UNIX_S * 1_000_000_000
    for index, (run, steps, accepted, tok_s) in enumerate(LEGS):
        writer_id = f"{0xE0 + index // 3:016x}"
        completion = 1 + steps + accepted  # one prefill token, then accepted + 1 per step
        secs = round(completion / tok_s, 6)
        window_ns = round(secs * 1e9)
        for position in range(steps):
            # Spread the accepted drafts evenly: the first `extra` steps take one more.
            taken = accepted // steps + (position < accepted % steps)
            lines.append(
                format_line(
                    writer_id=writer_id,
                    n=len([line for line in lines if writer_id.encode() in line]),
                    t_ns=start_ns + (position + 1) * window_ns // (steps + 1),
                    pid=4000 + index // 3,
                    seq=run,
                    proposed=DRAFTS_PER_STEP,
                    accepted=taken,
                    emitted=taken + 1,
                    leg=f"prompt-{index // 3}",
                )
            )
        legs.append(
            {
                "run": run,
                "finish_reason": "length",
                "prompt_tokens": 200,
                "completion_tokens": completion,
                "secs": secs,
                "tok_s": tok_s,
                "generate_start_unix": start_ns / 1e9,
                "generate_end_unix": (start_ns + window_ns) / 1e9,
                "leg": f"prompt-{index // 3}",
            }
        )
        start_ns += window_ns + round(GAP_S * 1e9)
    warm = sorted(leg["tok_s"] for leg in legs if leg["run"] > 1)
    record = {
        "arm": "ours",
        "legs": legs,
        "metrics": {"output_throughput_tok_s": (warm[2] + warm[3]) / 2},
        "warm_legs": len(warm),
        "cold_legs_discarded": len(legs) - len(warm),
    }
    (out_dir / "our-arm.json").write_text(json.dumps(record, indent=2) + "\n")
    (out_dir / "steps.jsonl").write_bytes(b"".join(lines))


if __name__ == "__main__":
    write_example(Path(sys.argv[1] if len(sys.argv) > 1 else "fixtures/gate-example"))
