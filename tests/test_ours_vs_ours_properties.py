"""Property: another run of ours, compared with ours, is folded exactly as it folds alone."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from strategies import scaled

from fold.api import fold_acceptance
from fold.compare.comparison import compare, our_figures
from fold.compare.vs_arms import fold_vs_arms
from fold.folding.leg_figures import plain
from fold.inputs.arm import load_arm
from fold.inputs.steplog import format_line
from fold.inputs.vs_arms import read_vs_arms

SEED = 7
OPTIONS = {"window_steps": 4, "skip_bad_lines": False, "stall_factor": 4.0,
           "prefill_tokens": None, "resamples": 40, "seed": SEED}  # fmt: skip
START_US = 1_796_300_000_000_000


@st.composite
def shapes(draw: st.DrawFn) -> dict[str, int]:
    return {
        "prompts": draw(st.integers(1, 3)),
        "repeats": draw(st.integers(2, 3)),
        "requests": draw(st.integers(1, 2)),
        "prompt_tokens": draw(st.integers(5, 50)),
    }


@st.composite
def runs(draw: st.DrawFn, shape: dict[str, int]) -> tuple[dict[str, Any], bytes]:
    """An arm record and its step log: legs one after another, each request's steps at
    random intervals; every request's first step carries a draft."""
    legs, lines = [], []
    now = START_US + draw(st.integers(0, 10**6))
    for prompt in range(shape["prompts"]):
        writer = f"{0xC0 + prompt:016x}"
        count = 0
        for run in range(1, shape["repeats"] + 1):
            start = now
            emitted_total = 0
            stamps = []
            for request in range(shape["requests"]):
                t = start
                for step in range(draw(st.integers(1, 6))):
                    t += draw(st.integers(50, 900))
                    proposed = draw(st.integers(1 if step == 0 else 0, 4))
                    accepted = draw(st.integers(0, proposed))
                    emitted_total += accepted + 1
                    stamps.append(t)
                    lines.append(
                        format_line(
                            writer_id=writer,
                            n=count,
                            t_ns=t * 1000,
                            pid=900 + prompt,
                            seq=run * 10 + request,
                            proposed=proposed,
                            accepted=accepted,
                            emitted=accepted + 1,
                            leg=f"p{prompt}",
                        )
                    )
                    count += 1
            end = max(stamps) + draw(st.integers(0, 300))
            completion = shape["requests"] + emitted_total
            secs = (end - start) / 1e6
            legs.append(
                {
                    "run": run,
                    "finish_reason": "length",
                    "prompt_tokens": shape["prompt_tokens"] + prompt,
                    "completion_tokens": completion,
                    "secs": secs,
                    "tok_s": round(completion / secs, 3),
                    "generate_start_unix": float(f"{start // 10**6}.{start % 10**6:06d}"),
                    "generate_end_unix": float(f"{end // 10**6}.{end % 10**6:06d}"),
                    "leg": f"p{prompt}",
                }
            )
            now = end + draw(st.integers(10, 1000))
    return {"legs": legs}, b"".join(lines)


@st.composite
def pairs_of_runs(draw: st.DrawFn):
    shape = draw(shapes())
    other = shape if draw(st.booleans()) else draw(shapes())
    return draw(runs(shape)), draw(runs(other))


@scaled(0.3)
@given(pairs_of_runs())
def test_the_other_runs_row_equals_its_standalone_fold(pair) -> None:
    with tempfile.TemporaryDirectory() as directory:
        paths = {}
        for name, (record, log) in zip(("main", "old"), pair, strict=True):
            (Path(directory) / f"{name}.json").write_text(json.dumps(record))
            (Path(directory) / f"{name}.jsonl").write_bytes(log)
            paths[name] = (str(Path(directory) / f"{name}.json"),
                           str(Path(directory) / f"{name}.jsonl"))  # fmt: skip
        main = load_arm(paths["main"][0])
        read = read_vs_arms(["old=" + paths["old"][0]], ["old=" + paths["old"][1]])
        arms = fold_vs_arms(read, main=main, predicate="run > 1", fold_options=OPTIONS)
        result = fold_acceptance(main, [paths["main"][1]], predicate="run > 1", **OPTIONS)
        found = compare(result, arms, record=main)
        paired = found.runs["old"].pairing.paired
        alone = fold_acceptance(paths["old"][0], [paths["old"][1]], predicate="run > 1",
                                **{**OPTIONS, "seed": SEED if paired else SEED + 1})  # fmt: skip
    assert plain(found.runs["old"].other_fold) == alone.to_json()
    row = next(row for row in found.to_json()["rows"] if row["name"] == "old")
    expected = our_figures(alone.fold, name="old").to_json()
    assert {key: row[key] for key in expected} == expected
    for figure in ("accept_rate", "mean_acceptance_length", "output_throughput_tok_s"):
        assert row[f"{figure}_ci"] == plain(alone.warm[f"{figure}_ci"])
    # the same shape, the same prompt tokens and runs: the legs pair
    assert paired == (
        [leg["run"] for leg in pair[0][0]["legs"]] == [leg["run"] for leg in pair[1][0]["legs"]]
        and [leg["prompt_tokens"] for leg in pair[0][0]["legs"]]
        == [leg["prompt_tokens"] for leg in pair[1][0]["legs"]]
    )
