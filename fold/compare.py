"""Our fold beside the oracle arms: one unit, one population, and the throughput gap split.

Each oracle's counters cover some population (``ArmFigures.population``); ours is folded over
the same one where the gate lets us: over all legs when the oracle's counters span every leg
(the gate reads vLLM's ``get_metrics()`` once, after the last leg), over the warm legs
otherwise. tok/s is the warm throughput fold on both sides, as the gate compares it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
from fold.oracles import (
    ALL_LEGS,
    WARM_LEGS,
    ArmFigures,
    arm_from_counts,
    load_oracle,
    parse_vs_spec,
)
from fold.result import FoldResult

OURS = "ours"
OURS_ALL = "ours (all legs)"


@dataclass(frozen=True)
class Comparison:
    rows: list[ArmFigures]
    """Ours (warm legs; then all legs when an oracle needs it) first, then the oracles."""
    gaps: dict[str, GapAttribution]
    measured_steps_per_s: float | None
    step_check: StepRateCheck
    populations: dict[str, dict[str, Any]]
    """Per oracle: the population of its counters, of our row it is compared with, and
    whether they are the same."""


def our_figures(result: FoldResult, population: str = WARM_LEGS) -> ArmFigures:
    """Our fold over ``population`` (warm legs or all legs), in the oracles' units.

    tok/s is always the warm throughput fold: the gate's figure for the arm.
    """
    fold = result.all if population == ALL_LEGS else result.warm
    which = "all legs" if population == ALL_LEGS else "warm legs"
    legs = fold["legs"]
    return arm_from_counts(
        OURS_ALL if population == ALL_LEGS else OURS,
        "ours",
        tok_s=result.warm["output_throughput_tok_s"],
        steps=fold["steps"],
        proposed=fold["proposed"],
        accepted=fold["accepted"],
        per_position=accepted_at_position(fold["histogram"]),
        completion_tokens_per_step=fold["completion_tokens_per_step"],
        sources={
            "tok_s": f"median tok_s of the warm legs ({result.predicate})",
            "steps": f"step log: steps with proposed > 0 over the {which}",
            "proposed": f"step log: sum of proposed over the {which}",
            "accepted": f"step log: sum of accepted over the {which}",
            "per_position": f"step log: steps with accepted > i over the {which}",
            "completion_tokens_per_step": (
                f"sum completion_tokens / S over the {which} (SGLang's unit)"
            ),
        },
        population=ALL_LEGS if population == ALL_LEGS else WARM_LEGS,
        population_detail=(
            f"the {len(legs)} legs, cold ones included"
            if population == ALL_LEGS
            else f"the {len(legs)} warm legs ({result.predicate})"
        ),
    )


def load_oracles(specs: list[str]) -> list[ArmFigures]:
    """``NAME[:KIND]=PATH`` specs to oracle rows; names must be distinct and not ours."""
    oracles = []
    seen: set[str] = set()
    for spec in specs:
        name, kind, path = parse_vs_spec(spec)
        if name in (OURS, OURS_ALL) or name in seen:
            raise InputError(f"--vs {spec!r}: the name {name!r} is taken; give each arm its own")
        seen.add(name)
        oracles.append(load_oracle(name, path, kind))
    return oracles


def compare(
    result: FoldResult, oracles: list[ArmFigures], tolerance: float = DEFAULT_TOLERANCE
) -> Comparison:
    """Rows, gap attributions and our step-rate check; also sets ``result.oracles`` for JSON."""
    check_tolerance(tolerance)
    ours = {WARM_LEGS: our_figures(result)}
    if any(oracle.population == ALL_LEGS for oracle in oracles):
        ours[ALL_LEGS] = our_figures(result, ALL_LEGS)
    gaps = {}
    populations: dict[str, dict[str, Any]] = {}
    for oracle in oracles:
        mine = ours[ALL_LEGS if oracle.population == ALL_LEGS else WARM_LEGS]
        gaps[oracle.name] = attribute_gap(mine, oracle, tolerance)
        populations[oracle.name] = {
            "ours": mine.population,
            "oracle": oracle.population,
            "oracle_detail": oracle.population_detail,
            "same": mine.population == oracle.population,
        }
    warm = ours[WARM_LEGS]
    measured = result.warm["step_rate"]
    step_check = check_step_rate(
        measured, warm.output_throughput_tok_s, warm.mean_acceptance_length, tolerance
    )
    rows = [*ours.values(), *oracles]
    block = oracles_block(rows, gaps, step_check, measured)
    for name, entry in populations.items():
        block["gaps"][name]["populations"] = entry
    result.oracles = block
    return Comparison(rows, gaps, measured, step_check, populations)
