"""A llama-server triple's tok/s read from the runs' own records, each as its legs give it, and
the measured factors from them: the expectation the fold's measured split is held to (the fold
is never asked)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path


def legs_tok_s(record: Path) -> float:
    """An arm's warm tok/s from its record's legs: the median tok_s (a leg's completion tokens
    over its wall time) of the legs with run > 1. Ours and the server arms alike."""
    legs = json.loads(record.read_text())["legs"]
    return statistics.median(leg["tok_s"] for leg in legs if leg["run"] > 1)


def our_length(arm: Path) -> float:
    """Our 1 + A/S over the warm legs, from the server's own counters of each leg."""
    deltas = [
        leg["engine_counters"]["metrics_delta"]
        for leg in json.loads(arm.read_text())["legs"]
        if leg["run"] > 1
    ]
    steps = sum(delta["spec_decode_num_drafts_total"] for delta in deltas)
    accepted = sum(delta["spec_decode_num_accepted_tokens_total"] for delta in deltas)
    return 1 + accepted / steps


def server_length(record: Path) -> float:
    """A server arm's 1 + A/S between its two warm /metrics scrapes."""
    metrics = json.loads(record.read_text())["metrics"]

    def counter(text: str, name: str) -> float:
        (value,) = re.findall(rf"^llamacpp:{name} (\S+)$", text, re.M)
        return float(value)

    def delta(name: str) -> float:
        return counter(metrics["after"], name) - counter(metrics["before"], name)

    accepted = delta("spec_decode_num_accepted_tokens_total")
    return 1 + accepted / delta("spec_decode_num_drafts_total")


def measured_factors(ours: Path, base: Path, matched: Path) -> dict[str, float]:
    """r, the speed factor, the acceptance factor and the model's error, T_b L_o / (T_m L_b):
    ``ours`` is our arm record, ``base`` and ``matched`` the gate's output directories of the
    two server arms (their ``llamacpp-arm.json``)."""
    t_o = legs_tok_s(ours)
    t_b = legs_tok_s(base / "llamacpp-arm.json")
    t_m = legs_tok_s(matched / "llamacpp-arm.json")
    l_o, l_b = our_length(ours), server_length(base / "llamacpp-arm.json")
    return {
        "ratio": t_o / t_b,
        "speed": t_o / t_m,
        "acceptance": t_m / t_b,
        "model_error": t_b * l_o / (t_m * l_b),
    }
