"""A fresh real vLLM run with per-request spec-decode metrics (``pytest -m oracle``): the
per-request sums equal vLLM's own counters over the same run, and the per-position counts
derived from the per-step arrays equal its per-position counters; offline (``get_metrics()``)
and served (``/metrics`` before the first request and after the last).

``examples/vllm/vllm_requests.py`` makes the run (vLLM's cached venv, the tiny model, minutes
from an empty cache); the recorded run it wrote is read by ``tests/test_vllm_requests.py`` in
every default run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_vllm_requests import all_sums, get_metrics_counters, scrape_deltas

from fold.folding.oracle_steps import fold_oracle
from fold.inputs.oracles import load_oracle

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "vllm"

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def run(tmp_path_factory, vllm_model) -> Path:
    sys.path.insert(0, str(EXAMPLE))
    import vllm_requests

    out = tmp_path_factory.mktemp("vllm-requests") / "run"
    assert vllm_requests.main(["--out-dir", str(out)]) == 0
    assert json.loads((out / "capture.json").read_text())["model"] == vllm_model
    assert json.loads((out / "capture.json").read_text())["level"] == "detailed"
    return out


def test_offline_per_request_sums_equal_get_metrics(run):
    own = get_metrics_counters(run / "offline" / "get-metrics.json")
    path = run / "offline" / "requests.jsonl"
    steps, proposed, accepted, per_pos = all_sums(path)
    assert steps > 0 and accepted > 0  # the trained model accepts n-gram drafts
    assert (steps, proposed, accepted) == (
        own["num_drafts"],
        own["num_draft_tokens"],
        own["num_accepted_tokens"],
    )
    assert per_pos == own["num_accepted_tokens_per_pos"]
    arm = load_oracle("vllm", path)
    fold = fold_oracle(arm.requests)
    assert (fold.all["steps"], fold.all["proposed"], fold.all["accepted"]) == (
        steps,
        proposed,
        accepted,
    )
    histogram = fold.all.histogram
    assert [sum(histogram[i + 1 :]) for i in range(len(histogram) - 1)] == per_pos


@pytest.mark.parametrize("name", ["completions.jsonl", "requests.jsonl"])
def test_served_per_request_sums_equal_the_servers_counters(run, name):
    deltas = scrape_deltas(run / "serve" / "metrics.prom")
    path = run / "serve" / name
    steps, proposed, accepted, per_pos = all_sums(path)
    assert (steps, proposed, accepted) == (
        deltas["num_drafts"],
        deltas["num_draft_tokens"],
        deltas["num_accepted_tokens"],
    )
    assert per_pos == [deltas["per_pos"][i] for i in sorted(deltas["per_pos"])]
    arm = load_oracle("vllm", path)
    fold = fold_oracle(arm.requests)
    assert (fold.all["steps"], fold.all["proposed"], fold.all["accepted"]) == (
        steps,
        proposed,
        accepted,
    )
