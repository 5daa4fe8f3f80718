"""The fold from the engine's own counters alone, when no step log is given.

Each leg's S, P and A are the counters the gate wrote on it; everything built from counts
(A/P, 1 + A/S, completion tokens per step, the step rate over the leg's window, the warm and
all-legs folds and their intervals, the comparison) is built by the same functions as from a
step log (``fold.folding.result``). What only the steps themselves give (per position, histogram,
within-leg shape, requests, cadence, the emitted check) is None: "needs a step log", never 0.
"""

from __future__ import annotations

import polars as pl

from fold.errors import RefusedError
from fold.folding.build import MAX_LEGS_NAMED, finished_pooled
from fold.folding.leg_figures import (
    LegFigures,
    PooledFigures,
    bootstrap_leg,
    counted_figures,
    frozen,
)
from fold.folding.pooled import Histograms, pooled
from fold.folding.result import (
    PREFILL_NEEDS_STEP_LOG,
    RECORD_COUNTERS,
    FoldResult,
    prefill_convention,
)
from fold.folding.uncertainty import Replicates, check_resamples, fold_replicates, method_note
from fold.folding.warm import ThroughputCheck
from fold.inputs.acceptance import Counts
from fold.inputs.arm_counters import COUNTER_FIELDS, EngineCounters

WHAT_TO_ADD = (
    "give the step log (DFLASH_STEP_LOG) as the second argument, or take the record from an "
    "engine whose gate writes spec_drafts_proposed, spec_drafts_accepted and "
    "spec_drafted_request_steps on every leg"
)


def fold_counters(
    arm_legs: pl.DataFrame,
    counters: EngineCounters | None,
    check: ThroughputCheck,
    window_steps: int,
    *,
    stall_factor: float,
    resamples: int = 0,
    seed: int = 0,
) -> FoldResult:
    """The fold of the legs' counters, with the same intervals as a step log's when each leg
    is one request (a leg's counters are its one unit here)."""
    check_resamples(resamples, seed)
    per_leg = _every_leg_counted(counters)
    assert counters is not None  # _every_leg_counted refused a record without them
    warm_set = set(check.warm_legs)
    rows = list(arm_legs.iter_rows(named=True))
    legs = tuple(
        counted_figures(row, row["index"] in warm_set, c.steps, c.proposed, c.accepted)
        for row, c in zip(rows, per_leg, strict=True)
    )
    _refuse_warm_legs_without_steps(legs, counters)
    replicates = {}
    if resamples:
        boot = [
            bootstrap_leg(
                row,
                {"steps": [c.steps], "proposed": [c.proposed], "accepted": [c.accepted]},
                c.steps,
            )
            for row, c in zip(rows, per_leg, strict=True)
        ]
        replicates = fold_replicates(boot, [leg.warm for leg in legs], resamples, seed)
    return FoldResult(
        predicate=check.predicate,
        window_steps=window_steps,
        legs=legs,
        warm=_pooled([leg for leg in legs if leg.warm], replicates.get("warm")),
        all=_pooled(list(legs), replicates.get("all")),
        files=(),
        writers=(),
        stall_factor=stall_factor,
        prefill_tokens=frozen(prefill_convention(None, PREFILL_NEEDS_STEP_LOG)),
        bootstrap=frozen(method_note(resamples, seed)),
        replicates=frozen(replicates),
        step_source=RECORD_COUNTERS,
    )


def _pooled(legs: list[LegFigures], replicates: Replicates | None) -> PooledFigures:
    return finished_pooled({**pooled(legs, Histograms()), "cadence": None}, replicates)


def _every_leg_counted(counters: EngineCounters | None) -> list[Counts]:
    if counters is None or not counters.carried:
        raise RefusedError(
            "no step log was given and no leg of the arm record carries the engine's counters "
            f"({', '.join(COUNTER_FIELDS.values())}), so there is nothing to fold: {WHAT_TO_ADD}"
        )
    lacking = [index for index, counts in enumerate(counters.legs) if counts is None]
    if lacking:
        named = ", ".join(counters.describe(index) for index in lacking[:MAX_LEGS_NAMED])
        if len(lacking) > MAX_LEGS_NAMED:
            named += f" and {len(lacking) - MAX_LEGS_NAMED} more"
        raise RefusedError(
            f"no step log was given and {len(lacking)} of {len(counters.legs)} legs carry no "
            f"counters: {named}. A fold without them would leave those legs out of both "
            f"folds; {WHAT_TO_ADD}"
        )
    return [counts for counts in counters.legs if counts is not None]


def _refuse_warm_legs_without_steps(legs: tuple[LegFigures, ...], counters: EngineCounters) -> None:
    empty = [leg for leg in legs if leg["warm"] and leg["steps"] == 0]
    if not empty:
        return
    named = ", ".join(counters.describe(leg["index"]) for leg in empty[:MAX_LEGS_NAMED])
    if len(empty) > MAX_LEGS_NAMED:
        named += f" and {len(empty) - MAX_LEGS_NAMED} more"
    raise RefusedError(
        f"{len(empty)} warm leg(s) have spec_drafted_request_steps = 0 in the record: {named}. "
        "A drafter that never proposed is not a 0% acceptance; check that speculative "
        "decoding was on for those legs"
    )
