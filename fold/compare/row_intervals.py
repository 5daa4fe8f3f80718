"""Each arm row's 95% intervals, and ours resampled over the population a row compares."""

from __future__ import annotations

from fold.compare.gap_intervals import verify_steps_per_s
from fold.folding.result import FoldResult
from fold.folding.uncertainty import Interval, Replicates, percentile_interval
from fold.inputs.oracles import ALL_LEGS, ArmFigures


def our_replicates(result: FoldResult, population: str) -> Replicates | None:
    """Our replicates over the legs of ``population``, as :func:`our_figures` folds them.

    Over all legs, acceptance is resampled over all legs while tok/s stays the warm fold's;
    the all-legs draws reuse the warm ones (``fold.folding.uncertainty.fold_replicates``), so each
    resample pairs a warm tok/s with the acceptance of the same warm legs plus cold ones.
    """
    warm = result.replicates.get("warm")
    if population != ALL_LEGS:
        return warm
    found = result.replicates.get("all")
    if found is None:
        return None
    figures = {k: v for k, v in found.figures.items() if k != "output_throughput_tok_s"}
    if warm is not None and "output_throughput_tok_s" in warm.figures:
        figures["output_throughput_tok_s"] = warm.figures["output_throughput_tok_s"]
    return Replicates(found.resamples, figures)


ROW_FIGURES = (
    "output_throughput_tok_s",
    "mean_acceptance_length",
    "accept_rate",
    "verify_steps_per_s",
    "completion_tokens_per_step",
)


def row_intervals(replicates: Replicates, row: ArmFigures) -> dict[str, Interval | None]:
    """An arm row's intervals; verify steps/s is tok/s over the row's length in each resample
    (1 + A/S, or SGLang's unit when that is all the row has)."""
    found = {figure: replicates.interval(figure) for figure in ROW_FIGURES}
    length = (
        "mean_acceptance_length"
        if row.mean_acceptance_length is not None
        else "completion_tokens_per_step"
    )
    steps_per_s = verify_steps_per_s(replicates, length)
    found["verify_steps_per_s"] = None if steps_per_s is None else percentile_interval(steps_per_s)
    return found


INTERVAL_NOTES = {
    "no_bootstrap": "no interval: --bootstrap 0",
    "totals_only": "no interval: known only by totals",
    "one_leg": "no interval: one leg (or one request) says nothing about the spread",
    "over_legs": "95% bootstrap interval over its legs",
}
"""Why an arm row has intervals or not: the JSON's ``ci_note`` codes and their sentences
(``ci_note_text``)."""


def interval_note(resamples: int, found: dict[str, Interval | None] | None) -> str:
    """Why an arm row has intervals, or why not: a code of ``INTERVAL_NOTES``."""
    if not resamples:
        return "no_bootstrap"
    if found is None:
        return "totals_only"
    if not any(found.values()):
        return "one_leg"
    return "over_legs"
