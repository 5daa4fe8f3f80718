"""Invariants of the engine's trace as a step source, for gates drawn at random.

A gate of P prompts x R runs is drawn as its steps; the same steps are printed as vllm-cli's
stderr (spacing, other log lines and line ends varying) and written as the hook's step log
inside each leg's window. Both fold to the sums taken here from the drawn steps, and to each
other, figure for figure, except what needs times.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from strategies import scaled

from fold.api import fold_acceptance
from fold.inputs.steplog import format_line

K_CHOICES = [1, 3, 7, 8]
OTHER_LINES = [
    "vllm-cli: loading model /models/m.gguf",
    "[INFO] kv cache: 2048 blocks of 16 tokens",
    "warning: k=3 is small for this drafter",
    "",
    "   ",
]
SPACE = st.sampled_from([" ", "  ", "\t", " \t "])


@st.composite
def gates(draw: st.DrawFn) -> dict[str, Any]:
    prompts, runs = draw(st.integers(1, 3)), draw(st.integers(2, 3))
    k = draw(st.sampled_from(K_CHOICES))
    legs = []
    for _ in range(prompts):
        next_req = 0
        for run in range(1, runs + 1):
            requests = draw(st.integers(1, 2))
            steps = []
            for _ in range(draw(st.integers(1, 6))):
                acc = draw(st.integers(0, k))
                emitted = draw(st.sampled_from([acc + 1, acc + 1, acc]))
                steps.append((next_req + draw(st.integers(0, requests - 1)), k, acc, emitted))
            legs.append({"run": run, "runs": runs, "steps": steps, "requests": requests})
            next_req += requests
    return {"prompts": prompts, "runs": runs, "legs": legs}


def step_line(draw: st.DrawFn, step: tuple[int, int, int, int]) -> str:
    req, k, acc, emitted = step
    fields = [f"req={req}", f"pos={8 + acc}", f"k={k}", f"ns={acc + 1}", f"acc={acc}",
              "draft=[" + " ".join(str(100 + i) for i in range(k)) + "]",
              "emit=[" + " ".join(str(200 + i) for i in range(emitted)) + "]"]  # fmt: skip
    return "[SPECTRACE]" + "".join(draw(SPACE) + field for field in fields)


def write_gate(draw: st.DrawFn, gate: dict[str, Any], where: Path) -> tuple[str, list, str]:
    """(arm path, stderr paths, hook log path) for the drawn gate."""
    arm_legs, files, hook = [], [], []
    start = 1_796_000_000.0
    end_of_line = draw(st.sampled_from(["\n", "\r\n"]))
    legs = iter(gate["legs"])
    for prompt in range(gate["prompts"]):
        lines = [draw(st.sampled_from(OTHER_LINES))]
        writer = f"{prompt + 1:016x}"
        n = 0
        for _ in range(gate["runs"]):
            leg = next(legs)
            secs = draw(st.sampled_from([0.5, 1.25, 2.0]))
            completion = leg["requests"] + sum(step[3] for step in leg["steps"])
            tok_s = f"{completion / secs:.3f}"
            for index, step in enumerate(leg["steps"]):
                lines.append(step_line(draw, step))
                if draw(st.integers(0, 4)) == 0:
                    lines.append(draw(st.sampled_from(OTHER_LINES)))
                t_ns = round(start * 1e6) * 1000 + 1000 * (index + 1)
                hook.append(format_line(writer_id=writer, n=n, t_ns=t_ns, pid=prompt + 1,
                                        seq=step[0], proposed=step[1], accepted=step[2],
                                        emitted=step[3]))  # fmt: skip
                n += 1
            run, runs = leg["run"], leg["runs"]
            P = sum(step[1] for step in leg["steps"])
            A = sum(step[2] for step in leg["steps"])
            S = len(leg["steps"])
            lines += [
                f"vllm-cli: run={run}/{runs} finish_reason=length prompt_tokens=31 "
                f"completion_tokens={completion} secs={secs:.3f} tok_s={tok_s}",
                f"vllm-cli: run={run}/{runs} generate_start_unix={start:.6f} "
                f"generate_end_unix={start + secs:.6f}",
                f"vllm-cli: run={run}/{runs} spec_drafts_proposed={P} spec_drafts_accepted={A} "
                f"spec_drafted_request_steps={S}",
            ]
            arm_legs.append({
                "run": run, "finish_reason": "length", "prompt_tokens": 31,
                "completion_tokens": completion, "secs": secs, "tok_s": float(tok_s),
                "generate_start_unix": float(f"{start:.6f}"),
                "generate_end_unix": float(f"{start + secs:.6f}"),
                "spec_drafts_proposed": P, "spec_drafts_accepted": A,
                "spec_drafted_request_steps": S,
            })  # fmt: skip
            start += secs + 1.0
        lines.append(draw(st.sampled_from(OTHER_LINES)))
        path = where / f"prompt-{prompt}.log"
        path.write_bytes(end_of_line.join(lines).encode() + end_of_line.encode())
        files.append(str(path))
    warm = [leg["tok_s"] for leg in arm_legs if leg["run"] > 1]
    document = {"legs": arm_legs, "metrics": {"output_throughput_tok_s": statistics.median(warm)}}
    if draw(st.booleans()):
        document["workload"] = {"repeat": gate["runs"]}
    arm = where / "our-arm.json"
    arm.write_text(json.dumps(document))
    steps = where / "steps.jsonl"
    steps.write_bytes(b"".join(hook))
    return str(arm), files, str(steps)


@scaled(0.5)
@given(gate=gates(), data=st.data())
def test_the_trace_folds_as_the_drawn_steps_and_as_the_hook_log(tmp_path_factory, gate, data):
    where = tmp_path_factory.mktemp("gate")
    arm, files, hook = write_gate(data.draw, gate, where)
    from_trace = fold_acceptance(arm, files, resamples=0).to_json()
    from_hook = fold_acceptance(arm, [hook], resamples=0).to_json()
    expected = [
        (
            len(leg["steps"]),
            sum(step[1] for step in leg["steps"]),
            sum(step[2] for step in leg["steps"]),
            sum(step[3] for step in leg["steps"]),
            len({step[0] for step in leg["steps"]}),
        )
        for leg in gate["legs"]
    ]

    def per_leg(document: dict[str, Any]) -> list[tuple[int, ...]]:
        return [
            (leg["steps"], leg["proposed"], leg["accepted"], leg["emitted"], leg["request_count"])
            for leg in document["legs"]
        ]

    assert per_leg(from_trace) == per_leg(from_hook) == expected
    for block in ("warm", "all"):
        for name in (
            "steps",
            "proposed",
            "accepted",
            "per_position",
            "per_position_conditional",
            "per_position_of_proposed",
            "histogram",
            "accept_rate",
            "mean_acceptance_length",
            "completion_tokens_per_step",
        ):
            assert from_trace[block][name] == from_hook[block][name], (block, name)  # fmt: skip
    # Each file's lines: one step each, three run lines per leg, the rest other log lines.
    for path, entry in zip(files, from_trace["files"], strict=True):
        text = Path(path).read_bytes().decode().replace("\r\n", "\n")
        lines = text.split("\n")[:-1]
        steps = sum(1 for line in lines if line.startswith("[SPECTRACE]"))
        assert entry["lines"] == entry["attributed"] == steps
        assert entry["run_lines"] == 3 * gate["runs"]
        assert entry["other_lines"] == len(lines) - steps - 3 * gate["runs"]
