"""An arm as the comparison takes it, ours or an oracle's, in one shape: the comparison
builds them (``fold.compare.comparison``) and the runs of ours read them
(``fold.compare.our_runs``), so the type sits apart from both."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fold.folding.document import Document
from fold.folding.frozen import freeze_fields
from fold.folding.result import FoldResult
from fold.folding.uncertainty import Replicates
from fold.inputs.oracles.figures import ArmFigures


@dataclass(frozen=True)
class Arm:
    """One arm as the comparison takes it, ours or an oracle's: an arm is an arm.

    ``rows`` holds its figures per population it can be folded over (an oracle's counters
    cover one; a run of ours has warm legs and all legs), the first being the one it is
    compared over; ``replicates`` the bootstrap's resamples of each (None: known by totals).
    A run of ours also has its warm legs' ``cadence``, its fold (``result``: the legs) and
    its arm record's top level (``record``: the workload); an oracle has none of these.
    """

    name: str
    kind: str
    rows: Mapping[str, ArmFigures]
    replicates: Mapping[str, Replicates | None]
    cadence: Mapping[str, Any] | None = None
    result: Document | None = field(default=None, repr=False)
    record: Any = field(default=None, repr=False)
    steps_fold: FoldResult | None = field(default=None, repr=False)
    """An oracle's per-request steps folded as ours are (None: no steps, or ours)."""

    def __post_init__(self) -> None:
        freeze_fields(self, ("rows", "replicates", "cadence"))

    @property
    def population(self) -> str:
        return next(iter(self.rows))

    @property
    def row(self) -> ArmFigures:
        return self.rows[self.population]
