"""A llama-server triple's tok/s read from the runs' own records, the way each run defines it,
and the measured factors from them: the expectation the fold's measured split is held to (the
fold is never asked)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path


def our_tok_s(arm: Path) -> float:
    """Our warm tok/s: the median tok_s of the arm record's warm legs (run > 1)."""
    legs = json.loads(arm.read_text())["legs"]
    return statistics.median(leg["tok_s"] for leg in legs if leg["run"] > 1)


def server_tok_s(warm_completions: Path) -> float:
    """A server arm's tok/s: the median predicted_per_second of its warm /completion
    responses, as the server printed them."""
    lines = warm_completions.read_text().splitlines()
    return statistics.median(json.loads(line)["timings"]["predicted_per_second"] for line in lines)


def measured_factors(ours: Path, base: Path, matched: Path) -> dict[str, float]:
    """r, the speed factor and the acceptance factor: ``ours`` is our arm record, ``base`` and
    ``matched`` the gate's output directories of the two server arms."""
    t_o = our_tok_s(ours)
    t_b = server_tok_s(base / "completions-warm.jsonl")
    t_m = server_tok_s(matched / "completions-warm.jsonl")
    return {"ratio": t_o / t_b, "speed": t_o / t_m, "acceptance": t_m / t_b}
