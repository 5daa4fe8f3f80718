"""Our fold beside the oracle arms: one unit, one population, and the throughput gap split.

Each oracle's counters cover some population (``ArmFigures.population``); ours is folded over
the same one where the gate lets us: over all legs when the oracle's counters span every leg
(the gate reads vLLM's ``get_metrics()`` once, after the last leg), over the warm legs
otherwise. tok/s is the warm throughput fold on both sides, as the gate compares it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fold.compare.arm_draws import Side
from fold.compare.arms import Arm
from fold.compare.gap import (
    DEFAULT_TOLERANCE,
    GapAttribution,
    GapSplit,
    StepRateCheck,
    attribute_gap,
    check_step_rate,
    check_tolerance,
    comparison_block,
    length_unit,
    split_gap,
)
from fold.compare.gap_intervals import arm_replicates, split_intervals
from fold.compare.matched_arms import MatchedCheck, check_matched_arms
from fold.compare.measured_split import split_bases
from fold.compare.our_runs import RunsComparison, compare_runs
from fold.compare.row_intervals import (
    INTERVAL_NOTES,
    ROW_FIGURES,
    interval_note,
    our_replicates,
    row_intervals,
)
from fold.compare.speed import SpeedSplit, split_speeds
from fold.compare.step_figures import fold_step_figures, oracle_step_figures, step_figures_extent
from fold.compare.waterfall import Waterfall, waterfall
from fold.folding.document import Document
from fold.folding.frozen import freeze_fields
from fold.folding.leg_figures import frozen, plain
from fold.folding.oracle_steps import fold_oracle
from fold.folding.result import NEEDS_STEP_LOG, FoldResult
from fold.folding.uncertainty import Interval, reach
from fold.inputs.acceptance import accepted_at_position
from fold.inputs.oracles import (
    ALL_LEGS,
    OURS_KIND,
    WARM_LEGS,
    ArmFigures,
    arm_from_counts,
)

OURS = "ours"
OURS_ALL = "ours (all legs)"


@dataclass(frozen=True)
class Comparison:
    rows: tuple[ArmFigures, ...]
    """Ours (warm legs; then all legs when an oracle needs it) first, then the oracles."""
    gaps: Mapping[str, GapAttribution]
    measured_steps_per_s: float | None
    step_check: StepRateCheck
    populations: Mapping[str, Mapping[str, Any]]
    """Per oracle: the population of its counters, of our row it is compared with, and
    whether they are the same."""
    intervals: Mapping[str, Mapping[str, Interval | None]] | None = None
    """Per arm row, each figure's 95% interval; an arm known by totals is absent."""
    speeds: Mapping[str, SpeedSplit] = field(default_factory=dict)
    """Per oracle: its speed factor split with our cadence (``fold.compare.speed``)."""
    runs: Mapping[str, RunsComparison] = field(default_factory=dict)
    """Per other run of ours: what only two runs of ours can show (``fold.compare.our_runs``)."""
    matched: Mapping[str, MatchedCheck | None] = field(default_factory=dict)
    """Per oracle: the check of an arm run at our acceptance (``fold.compare.matched_arms``)."""
    waterfalls: Mapping[str, Waterfall] = field(default_factory=dict)
    """Per gap: its factors as the gap chart's bars (``fold.compare.waterfall``)."""
    block: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The rows, gaps and step-rate check as JSON, with each row's intervals."""
    step_folds: Mapping[str, FoldResult] = field(default_factory=dict, repr=False, compare=False)
    """Per arm row with steps, the fold they came from: ours (warm legs and all legs), each
    other run of ours, and each oracle whose steps were folded (``fold.folding.oracle_steps``)."""

    def __post_init__(self) -> None:
        # The JSON block is what the document shows: read-only all the way down.
        freeze_fields(
            self,
            (
                "rows",
                "gaps",
                "populations",
                "intervals",
                "speeds",
                "runs",
                "matched",
                "block",
                "waterfalls",
            ),
        )
        object.__setattr__(self, "step_folds", frozen(self.step_folds))

    def to_json(self) -> dict[str, Any]:
        """The document's ``comparison`` block: every arm in one row shape, the gaps, our
        step-rate check and the speed splits."""
        return {
            **plain(self.block),
            "speed": {name: split.to_json() for name, split in self.speeds.items()},
            "waterfalls": {name: found.to_json() for name, found in self.waterfalls.items()},
            "matched": {
                name: None if check is None else check.to_json()
                for name, check in self.matched.items()
            },
        }

    def runs_json(self) -> dict[str, Any] | None:
        """The document's ``runs`` block: the other runs of ours, or None without any."""
        return {name: found.to_json() for name, found in self.runs.items()} or None


GAP_INTERVALS = ("ratio", "acceptance_factor", "speed_factor")
"""A gap's figures with an interval (``<figure>_ci``) and so a reach (``<figure>_reach``)."""


def our_figures(result: FoldResult, population: str = WARM_LEGS, name: str = OURS) -> ArmFigures:
    """Our fold over ``population`` (warm legs or all legs), in the oracles' units.

    tok/s is always the warm throughput fold: the gate's figure for the arm. ``name`` names
    the run (another run of ours compared with this one has its own).
    """
    fold = result.all if population == ALL_LEGS else result.warm
    which = "all legs" if population == ALL_LEGS else "the warm legs"
    legs = fold["legs"]
    if result.from_log:
        log = result.step_source_text  # the hook's step log or the engine's trace
        counted = {
            "steps": f"{log}: steps with proposed > 0 over {which}",
            "proposed": f"{log}: sum of proposed over {which}",
            "accepted": f"{log}: sum of accepted over {which}",
            "per_position": f"{log}: steps with accepted > i over {which}",
        }
    else:
        counted = {
            "steps": f"record: sum of the legs' spec_drafted_request_steps over {which}",
            "proposed": f"record: sum of the legs' spec_drafts_proposed over {which}",
            "accepted": f"record: sum of the legs' spec_drafts_accepted over {which}",
            "per_position": f"not recorded: {NEEDS_STEP_LOG}",
        }
    histogram = fold["histogram"]
    return arm_from_counts(
        f"{name} (all legs)" if population == ALL_LEGS else name,
        "ours",
        tok_s=result.warm["output_throughput_tok_s"],
        steps=fold["steps"],
        proposed=fold["proposed"],
        accepted=fold["accepted"],
        per_position=None if histogram is None else accepted_at_position(histogram),
        completion_tokens_per_step=fold["completion_tokens_per_step"],
        sources={
            "tok_s": f"median tok_s of the warm legs ({result.predicate})",
            **counted,
            "completion_tokens_per_step": (
                f"sum completion_tokens / S over {which} (SGLang's unit)"
            ),
        },
        population=ALL_LEGS if population == ALL_LEGS else WARM_LEGS,
        population_detail=(
            f"the {len(legs)} legs, cold ones included"
            if population == ALL_LEGS
            else f"the {len(legs)} warm legs ({result.predicate})"
        ),
    )


def our_arm(result: Document, name: str = OURS, record: Any = None) -> Arm:
    """A fold of ours as an arm: the one way any run of ours (the main one, or one given with
    ``--vs NAME=ARM``) reaches the comparison."""
    fold = result.fold
    return Arm(
        name,
        OURS_KIND,
        {population: our_figures(fold, population, name) for population in (WARM_LEGS, ALL_LEGS)},
        {population: our_replicates(fold, population) for population in (WARM_LEGS, ALL_LEGS)},
        cadence=fold.warm.get("cadence"),
        result=result,
        record=record,
    )


def oracle_arm(
    figures: ArmFigures, resamples: int, seed: int, position: int, window_steps: int | None = None
) -> Arm:
    """An oracle's figures as an arm; its legs, if any, resampled on a stream of its own, and
    its per-request steps, if any, folded as ours are (with our ``window_steps``)."""
    population = figures.population or ""
    replicates = arm_replicates(figures.legs, resamples, seed, position)
    steps_fold = None
    if figures.requests is not None:
        options = {} if window_steps is None else {"window_steps": window_steps}
        steps_fold = fold_oracle(
            figures.requests, resamples=resamples, seed=seed + position, **options
        )
    return Arm(
        figures.name,
        figures.kind,
        {population: figures},
        {population: replicates},
        steps_fold=steps_fold,
    )


def compare(
    result: Document,
    arms: Sequence[ArmFigures | Arm],
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    record: Any = None,
) -> Comparison:
    """Rows, gap attributions, our step-rate check, the speed splits and the runs of ours:
    the comparison's part of the result document (``result`` is not changed).

    ``arms`` are oracle figures or arms (another run of ours is an :class:`Arm` from
    :func:`our_arm`); ``record`` is our arm record's top level, for comparing workloads.
    """
    check_tolerance(tolerance)
    bootstrap = result.fold.bootstrap or {}
    resamples, seed = bootstrap.get("resamples", 0), bootstrap.get("seed", 0)
    main = our_arm(result, OURS, record)
    others = [
        other
        if isinstance(other, Arm)
        else oracle_arm(other, resamples, seed, position, result.fold.window_steps)
        for position, other in enumerate(arms, start=1)
    ]
    ours = {WARM_LEGS: main.rows[WARM_LEGS]}
    if any(other.population == ALL_LEGS for other in others):
        ours[ALL_LEGS] = main.rows[ALL_LEGS]
    replicates = {row.name: main.replicates[population] for population, row in ours.items()}
    replicates |= {other.row.name: other.replicates[other.population] for other in others}
    populations: dict[str, dict[str, Any]] = {}
    splits: dict[str, GapSplit] = {}
    for other in others:
        oracle = other.row
        mine = ours[ALL_LEGS if oracle.population == ALL_LEGS else WARM_LEGS]
        figure = length_unit(mine, oracle)  # the unit's code is the figure's name
        intervals = split_intervals(
            replicates[mine.name],
            replicates[oracle.name],
            oracle.output_throughput_tok_s,
            getattr(oracle, figure),
            figure,
        )
        splits[oracle.name] = split_gap(mine, oracle, intervals)
        populations[oracle.name] = {
            "ours": mine.population,
            "oracle": oracle.population,
            "oracle_detail": oracle.population_detail,
            "same": mine.population == oracle.population,
        }
    mine_of = {name: ours[entry["ours"]] for name, entry in populations.items()}
    paired = {name: Side(mine, replicates[mine.name]) for name, mine in mine_of.items()}
    sides = {other.row.name: Side(other.row, replicates[other.row.name]) for other in others}
    warm = ours[WARM_LEGS]
    matched = check_matched_arms(
        Side(warm, replicates[warm.name]),
        list(sides.values()),
        paired,
        splits,
        tolerance,
        [other.name for other in others if other.result is not None],
    )
    # the verdict is made once, from the split each gap rests on: measured where a run at
    # our acceptance measured it
    bases = split_bases(matched, sides, paired, splits, tolerance)
    gaps = {}
    runs: dict[str, RunsComparison] = {}
    for other in others:
        name = other.row.name
        gaps[name] = attribute_gap(
            mine_of[name],
            other.row,
            tolerance,
            splits[name].intervals,
            bases[name],
            of_ours=other.result is not None,
        )
        if other.result is not None:
            runs[name] = compare_runs(main, other, gaps[name], tolerance)
    measured = result.warm["step_rate"]
    step_check = check_step_rate(
        measured, warm.output_throughput_tok_s, warm.mean_acceptance_length, tolerance
    )
    rows = [*ours.values(), *(other.row for other in others)]
    by_row = {
        row.name: row_intervals(found, row)
        for row in rows
        if (found := replicates.get(row.name)) is not None
    }
    block = comparison_block(rows, gaps, step_check, measured)
    for name, entry in populations.items():
        block["gaps"][name]["populations"] = entry
    for gap in block["gaps"].values():  # what ± shows beside each factor
        gap.update({f"{f}_reach": reach(gap[f], gap[f"{f}_ci"]) for f in GAP_INTERVALS})
    for row in block["rows"]:
        shown = by_row.get(row["name"])
        row.update({f"{figure}_ci": None for figure in ROW_FIGURES})
        if shown is not None:
            row.update({f"{figure}_ci": _pair(shown.get(figure)) for figure in ROW_FIGURES})
        row.update({f"{f}_reach": reach(row[f], row[f"{f}_ci"]) for f in ROW_FIGURES})
        row["ci_note"] = interval_note(resamples, shown)
        row["ci_note_text"] = INTERVAL_NOTES[row["ci_note"]]
    step_folds, figures = _step_figures(result, ours, others, resamples, seed)
    for row in block["rows"]:
        row["step_figures"] = figures.get(row["name"])
    block["step_figures"] = step_figures_extent(
        [(row["name"], row["step_figures"]) for row in block["rows"]]
    )
    speeds = split_speeds(
        result.fold,
        gaps,
        {other.name: other.kind for other in others},
        tolerance,
        {other.name: other.cadence for other in others if other.cadence is not None},
    )
    waterfalls = {
        name: waterfall(gap, None if name not in speeds else speeds[name].to_json())
        for name, gap in block["gaps"].items()
    }
    # with --bootstrap 0 there are no intervals to show, not arms "known only by totals"
    return Comparison(
        tuple(rows),
        gaps,
        measured,
        step_check,
        populations,
        by_row if resamples else None,
        speeds,
        runs,
        block=block,
        matched=matched,
        step_folds=step_folds,
        waterfalls=waterfalls,
    )


def _step_figures(
    result: Document,
    ours: Mapping[str, ArmFigures],
    others: Sequence[Arm],
    resamples: int,
    seed: int,
) -> tuple[dict[str, FoldResult], dict[str, Any]]:
    """Per arm row, the fold its steps came from and its step figures
    (``fold.compare.step_figures``; None for an arm known only by totals)."""
    folds: dict[str, FoldResult] = {}
    found: dict[str, Any] = {}
    for population, row in ours.items():
        pooled = result.all if population == ALL_LEGS else result.warm
        folds[row.name] = result.fold
        found[row.name] = fold_step_figures(
            result.fold, pooled, population, resamples=resamples, seed=seed
        )
    for position, other in enumerate(others, start=1):
        row = other.row
        if other.result is not None:  # another run of ours
            fold = other.result.fold
            folds[row.name] = fold
            found[row.name] = fold_step_figures(
                fold, fold.warm, WARM_LEGS, resamples=resamples, seed=[seed, position]
            )
            continue
        if other.steps_fold is not None:
            folds[row.name] = other.steps_fold
        found[row.name] = oracle_step_figures(
            row.requests,
            other.steps_fold,
            other.population,
            resamples=resamples,
            seed=[seed, position],
        )
    return folds, found


def _pair(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [interval[0], interval[1]]
