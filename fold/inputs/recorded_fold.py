"""Whether a record's own throughput fold comes out of its legs.

A gate records, beside its legs, the fold it made of them: the median tok/s of the warm legs,
and often how many legs were warm and how many cold ones it discarded. Our arm's record
(``fold.folding.warm``) and an oracle's arm record (``fold.inputs.oracles.source``) are both held
to it the same way, here: a record whose figures do not come out of its legs describes other legs
than the ones folded, and is refused by its caller, with these reasons and a remedy of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fold.wording import figures_apart

RELATIVE_TOLERANCE = 1e-9
"""Two tok/s figures are the same fold when they agree to this (a JSON round trip, not more)."""


@dataclass(frozen=True)
class RecordedFold:
    """What a record says of its own fold; None where it says nothing (or nothing usable)."""

    tok_s: float | None
    tok_s_field: str
    """Where ``tok_s`` is in the record (``metrics.output_throughput_tok_s``)."""
    warm_legs: int | list[int] | None
    cold_legs_discarded: int | None


def disagreements(
    recorded: RecordedFold,
    warm_indices: list[int],
    legs: int,
    tok_s: float | None,
    *,
    rule: str,
    chosen: str,
) -> list[str]:
    """Every way ``recorded`` differs from the fold of the legs: ``warm_indices`` of ``legs``
    are warm under ``rule`` (as people read it: ``'run > 1'``), ``chosen`` names them (``the
    legs selected by 'run > 1'``), and their median tok/s is ``tok_s``. Empty when the record's
    fold comes out of its legs."""
    problems = []
    if recorded.tok_s is not None and (
        tok_s is None or not math.isclose(tok_s, recorded.tok_s, rel_tol=RELATIVE_TOLERANCE)
    ):
        in_record, folded = figures_apart(recorded.tok_s, tok_s)
        problems.append(
            f"{recorded.tok_s_field} is {in_record} in the record, but the median tok_s of "
            f"{chosen} is {folded}"
        )
    if isinstance(recorded.warm_legs, list) and recorded.warm_legs != warm_indices:
        problems.append(
            f"warm_legs is {recorded.warm_legs} in the record, but {rule} selects {warm_indices}"
        )
    if isinstance(recorded.warm_legs, int) and recorded.warm_legs != len(warm_indices):
        problems.append(
            f"warm_legs is {recorded.warm_legs} in the record, but {rule} selects "
            f"{len(warm_indices)} legs"
        )
    cold = legs - len(warm_indices)
    if recorded.cold_legs_discarded is not None and recorded.cold_legs_discarded != cold:
        problems.append(
            f"cold_legs_discarded is {recorded.cold_legs_discarded} in the record, but {rule} "
            f"leaves {cold} legs cold"
        )
    return problems
