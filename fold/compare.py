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
from fold.oracles import ArmFigures, arm_from_counts, load_oracle, parse_vs_spec
from fold.result import FoldResult

OURS = "ours"


@dataclass(frozen=True)
class Comparison:
    rows: list[ArmFigures]
    """Ours first, then the oracles in the order given."""
    gaps: dict[str, GapAttribution]
    measured_steps_per_s: float | None
    step_check: StepRateCheck


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
    gaps = {oracle.name: attribute_gap(ours, oracle, tolerance) for oracle in oracles}
    measured = result.warm["step_rate"]
    step_check = check_step_rate(
        measured, ours.output_throughput_tok_s, ours.mean_acceptance_length, tolerance
    )
    rows = [ours, *oracles]
    result.oracles = oracles_block(rows, gaps, step_check, measured)
    return Comparison(rows, gaps, measured, step_check)
