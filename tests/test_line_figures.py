"""The figures that read each line are computed first, and nothing after them reads a line
(``fold.folding.line_figures``): a fold whose lines are let go once those figures are made
gives every figure of the fold that kept them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fold.folding.build import build_result, settle_lines
from fold.folding.log_fold import LogFold, fold_acceptance
from fold.folding.warm import DEFAULT_PREDICATE, check_arm
from fold.inputs.arm import load_arm

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# The toy gate with several draft lengths (the step time per length is measured), and the
# shipped example (cadence, positions and per request over several legs).
GATES = [FIXTURES / "another-k", FIXTURES / "gate-example"]
RESAMPLES = 200


def _kept(gate: Path) -> LogFold:
    fold = LogFold(load_arm(str(gate / "our-arm.json")))
    fold.add_file(str(gate / "steps.jsonl"))
    return fold


@pytest.mark.parametrize("gate", GATES, ids=lambda gate: gate.name)
def test_a_result_built_without_the_lines_is_the_same(gate):
    fold = _kept(gate)
    partial = fold.partial
    assert partial.step_times.height > 0  # the lines are there to be let go
    check = check_arm(fold.arm, DEFAULT_PREDICATE)
    lines = settle_lines(partial, fold.arm.legs, check)
    without = replace(partial, step_times=partial.step_times.clear())
    released = build_result(
        fold.arm.legs, without, fold.read_counts, check, resamples=RESAMPLES, lines=lines
    )
    kept = build_result(fold.arm.legs, partial, fold.read_counts, check, resamples=RESAMPLES)
    assert released.to_json() == kept.to_json()
    # The figures that need the lines are all there (so the comparison above tests them).
    warm = kept.to_json()["warm"]
    assert warm["cadence"]["interval_median_s"] is not None
    assert warm["by_output_position"] is not None
    if gate.name == "another-k":
        assert warm["another_k"]["step_times"]


@pytest.mark.parametrize("gate", GATES, ids=lambda gate: gate.name)
def test_the_one_call_fold_equals_the_fold_that_keeps_its_lines(gate):
    """``fold_acceptance`` lets its lines go before the rest of the result; ``LogFold``,
    which may take more files, keeps them. Both give the same document."""
    arm, log = str(gate / "our-arm.json"), str(gate / "steps.jsonl")
    one_call = fold_acceptance(arm, [log], resamples=RESAMPLES).to_json()
    kept = _kept(gate).result(resamples=RESAMPLES).to_json()
    assert one_call == kept
