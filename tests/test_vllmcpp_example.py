"""The worked example in vllm.cpp's own layout (fixtures/vllmcpp): its figures, worked by hand.

The expectations come from fixtures/vllmcpp/README.md's arithmetic over each prompt's pattern
of accepted drafts, not from the fold: the record, the hook log and the engine's stderr must all
hold them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fold.api import fold_acceptance

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "fixtures" / "vllmcpp"
K = 7
REPEAT = 5
# Per prompt, one run: (S, P, A), from the README's table.
PER_PROMPT = [(21, 147, 42), (9, 63, 54), (18, 126, 45), (27, 189, 36)]
WARM = (300, 2100, 708)
ALL = (375, 2625, 885)
WARM_PER_POSITION = [0.88, 0.64, 0.36, 0.24, 0.12, 0.12, 0.0]
WARM_HISTOGRAM = [36, 72, 84, 36, 36, 0, 36, 0]
WARM_TOK_S = (11.100 + 12.094) / 2


def _expected_legs() -> list[tuple[int, int, int, int]]:
    """(run, S, P, A) for every leg, prompt by prompt."""
    return [(run, *PER_PROMPT[prompt]) for prompt in range(4) for run in range(1, REPEAT + 1)]


def test_the_fixture_is_what_the_script_writes(tmp_path):
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "make_vllmcpp_example.py"), str(tmp_path)],
        check=True,
        cwd=ROOT,
    )
    written = sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*") if path.is_file())
    shipped = sorted(
        path.relative_to(EXAMPLE)
        for path in EXAMPLE.rglob("*")
        if path.is_file() and path.name != "README.md"
    )
    assert written == shipped
    for relative in written:
        assert (tmp_path / relative).read_bytes() == (EXAMPLE / relative).read_bytes(), relative


def test_the_record_is_canonical_and_holds_the_hand_figures():
    raw = (EXAMPLE / "our-arm.json").read_bytes()
    record = json.loads(raw)
    assert raw == json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    legs = record["legs"]
    assert [
        (
            leg["run"],
            leg["spec_drafted_request_steps"],
            leg["spec_drafts_proposed"],
            leg["spec_drafts_accepted"],
        )
        for leg in legs
    ] == _expected_legs()
    assert all(leg["completion_tokens"] == 64 for leg in legs)
    pooled = record["spec_acceptance"]
    assert (
        pooled["drafted_request_steps"],
        pooled["drafts_proposed"],
        pooled["drafts_accepted"],
    ) == WARM
    assert pooled["warm_legs"] == record["warm_legs"] == 16
    assert pooled["accept_rate"] == pytest.approx(708 / 2100, abs=1e-12)
    assert pooled["mean_acceptance_length"] == pytest.approx(3.36, abs=1e-12)
    assert len(pooled["per_leg"]) == 16
    assert record["cold_legs_discarded"] == 4
    assert record["metrics"]["output_throughput_tok_s"] == pytest.approx(WARM_TOK_S, abs=1e-9)


def test_the_hook_log_folds_to_the_hand_figures():
    result = fold_acceptance(
        str(EXAMPLE / "our-arm.json"), [str(EXAMPLE / "steps.jsonl")], resamples=0
    ).to_json()
    assert [
        (leg["run"], leg["steps"], leg["proposed"], leg["accepted"]) for leg in result["legs"]
    ] == _expected_legs()
    for block, (steps, proposed, accepted) in (("warm", WARM), ("all", ALL)):
        figures = result[block]
        assert (figures["steps"], figures["proposed"], figures["accepted"]) == (
            steps,
            proposed,
            accepted,
        )
        assert figures["accept_rate"] == pytest.approx(accepted / proposed)
        assert figures["mean_acceptance_length"] == pytest.approx(1 + accepted / steps)
    assert result["warm"]["per_position"] == pytest.approx(WARM_PER_POSITION)
    # Every step proposes k = 7: over the steps that drafted position i is over every step.
    assert result["warm"]["per_position_of_proposed"] == result["warm"]["per_position"]
    assert result["warm"]["histogram"] == WARM_HISTOGRAM
    assert result["warm"]["output_throughput_tok_s"] == pytest.approx(WARM_TOK_S)
    assert result["unattributed_steps"] == 0


TRACE = re.compile(r"^\[SPECTRACE\] req=(\d+) +pos=(\d+) +k=(\d+) +ns=(\d+) +acc=(\d+) ")
RUN_LINE = re.compile(r"^vllm-cli: run=(\d+)/(\d+) spec_drafts_proposed=(\d+) ")


@pytest.mark.parametrize("prompt", range(4))
def test_each_stderr_file_traces_its_prompts_steps_before_each_leg(prompt):
    """A second, plain reading of the stderr files: each leg's trace lines, then its run lines."""
    steps, proposed, accepted = PER_PROMPT[prompt]
    pending: list[tuple[int, int, int]] = []
    legs = []
    for line in (EXAMPLE / "stderr" / f"prompt-{prompt}.log").read_text().splitlines():
        if match := TRACE.match(line):
            request, _, k, sampled, taken = map(int, match.groups())
            assert sampled == taken + 1
            pending.append((request, k, taken))
        elif match := RUN_LINE.match(line):
            run = int(match.group(1))
            assert {request for request, _, _ in pending} == {run - 1}
            legs.append(
                (run, len(pending), sum(k for _, k, _ in pending), sum(a for *_, a in pending))
            )
            pending = []
    assert pending == []
    assert legs == [(run, steps, proposed, accepted) for run in range(1, REPEAT + 1)]


def test_the_three_ways_in_give_the_same_legs():
    """The hook's log, the engine's own trace and the record's counters alone."""
    arm = str(EXAMPLE / "our-arm.json")
    traces = [str(EXAMPLE / "stderr" / f"prompt-{prompt}.log") for prompt in range(4)]
    ways = {
        "hook": [str(EXAMPLE / "steps.jsonl")],
        "engine trace": traces,
        "counters alone": [],
    }
    for way, logs in ways.items():
        result = fold_acceptance(arm, logs, resamples=0).to_json()
        legs = [
            (leg["run"], leg["steps"], leg["proposed"], leg["accepted"]) for leg in result["legs"]
        ]
        assert legs == _expected_legs(), way
        assert (
            result["warm"]["steps"],
            result["warm"]["proposed"],
            result["warm"]["accepted"],
        ) == WARM, way
