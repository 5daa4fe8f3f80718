"""Our warm fold beside the oracle arms: one unit, and the throughput gap split in two."""

from __future__ import annotations

from dataclasses import dataclass

from fold.acceptance import accepted_at_position
from fold.errors import InputError
from fold.gap import (
    DEFAULT_TOLERANCE,
    GapAttribution,
    StepRateCheck,
    attribute_gap,
    check_step_rate,
    check_tolerance,
    oracles_block,
)
from fold.gap_intervals import arm_replicates, split_intervals, verify_steps_per_s
from fold.oracles import ArmFigures, arm_from_counts, load_oracle, parse_vs_spec
from fold.result import FoldResult
from fold.uncertainty import Interval, Replicates, percentile_interval

OURS = "ours"


@dataclass(frozen=True)
class Comparison:
    rows: list[ArmFigures]
    """Ours first, then the oracles in the order given."""
    gaps: dict[str, GapAttribution]
    measured_steps_per_s: float | None
    step_check: StepRateCheck
    intervals: dict[str, dict[str, Interval | None]] | None = None
    """Per arm, each figure's 95% interval; an arm known by totals is absent."""


def our_figures(result: FoldResult) -> ArmFigures:
    """Our warm fold as an arm row, in the same units the oracle rows are converted to."""
    warm = result.warm
    return arm_from_counts(
        OURS,
        "ours",
        tok_s=warm["output_throughput_tok_s"],
        steps=warm["steps"],
        proposed=warm["proposed"],
        accepted=warm["accepted"],
        per_position=accepted_at_position(warm["histogram"]),
        sources={
            "tok_s": f"median tok_s of the warm legs ({result.predicate})",
            "steps": "step log: warm steps with proposed > 0",
            "proposed": "step log: sum of proposed over warm legs",
            "accepted": "step log: sum of accepted over warm legs",
            "per_position": "step log: warm steps with accepted > i",
        },
    )


def load_oracles(specs: list[str]) -> list[ArmFigures]:
    """``NAME[:KIND]=PATH`` specs to oracle rows; names must be distinct and not ``ours``."""
    oracles = []
    seen: set[str] = set()
    for spec in specs:
        name, kind, path = parse_vs_spec(spec)
        if name == OURS or name in seen:
            raise InputError(f"--vs {spec!r}: the name {name!r} is taken; give each arm its own")
        seen.add(name)
        oracles.append(load_oracle(name, path, kind))
    return oracles


def compare(
    result: FoldResult, oracles: list[ArmFigures], tolerance: float = DEFAULT_TOLERANCE
) -> Comparison:
    """Rows, gap attributions and our step-rate check; also sets ``result.oracles`` for JSON."""
    check_tolerance(tolerance)
    ours = our_figures(result)
    bootstrap = result.bootstrap or {}
    resamples, seed = bootstrap.get("resamples", 0), bootstrap.get("seed", 0)
    our_replicates = result.replicates.get("warm")
    replicates = {OURS: our_replicates} | {
        oracle.name: arm_replicates(oracle.legs, resamples, seed, arm)
        for arm, oracle in enumerate(oracles, start=1)
    }
    gaps = {
        oracle.name: attribute_gap(
            ours,
            oracle,
            tolerance,
            split_intervals(
                our_replicates,
                replicates[oracle.name],
                oracle.output_throughput_tok_s,
                oracle.mean_acceptance_length,
            ),
        )
        for oracle in oracles
    }
    measured = result.warm["step_rate"]
    step_check = check_step_rate(
        measured, ours.output_throughput_tok_s, ours.mean_acceptance_length, tolerance
    )
    rows = [ours, *oracles]
    intervals = {
        name: row_intervals(found) for name, found in replicates.items() if found is not None
    }
    result.oracles = oracles_block(rows, gaps, step_check, measured)
    for row in result.oracles["rows"]:
        found = intervals.get(row["name"])
        row.update({f"{figure}_ci": None for figure in ROW_FIGURES})
        if found is not None:
            row.update({f"{figure}_ci": _pair(found.get(figure)) for figure in ROW_FIGURES})
        row["ci_note"] = interval_note(resamples, found)
    return Comparison(rows, gaps, measured, step_check, intervals)


ROW_FIGURES = (
    "output_throughput_tok_s",
    "mean_acceptance_length",
    "accept_rate",
    "verify_steps_per_s",
    "completion_tokens_per_step",
)


def row_intervals(replicates: Replicates) -> dict[str, Interval | None]:
    """An arm row's intervals; verify steps/s is tok/s over mean length in each resample."""
    found = {figure: replicates.interval(figure) for figure in ROW_FIGURES}
    steps_per_s = verify_steps_per_s(replicates)
    found["verify_steps_per_s"] = None if steps_per_s is None else percentile_interval(steps_per_s)
    return found


def interval_note(resamples: int, found: dict[str, Interval | None] | None) -> str:
    """Why an arm row has intervals, or why not."""
    if not resamples:
        return "no interval: --bootstrap 0"
    if found is None:
        return "no interval: known only by totals"
    if not any(found.values()):
        return "no interval: one leg (or one request) says nothing about the spread"
    return "95% bootstrap interval over its legs"


def _pair(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [interval[0], interval[1]]
