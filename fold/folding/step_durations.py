"""The steps' own durations (the hook's optional ``draft_ns`` and ``verify_ns``,
``instrument/FORMAT.md``) summed per request and per leg, for the stages that split a step's
time into drafting, verifying and the rest.

Only sums live here, the same from the native and the polars path (``PartialFold.durations``);
what they mean beside the legs' step times is decided by the stage that reads them. A fold of a
log without durations has none (``FoldResult.durations`` is None), so such a fold is what it
was before the keys existed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from fold.folding.accumulate import DURATION_SUMS, REQUEST_KEY, request_id
from fold.folding.leg_figures import frozen
from fold.inputs import limits

WHAT_TO_DO = (
    "the engine's step timing is wrong (no leg's steps take 2^63 ns); fix where the hook is "
    "given the step's durations"
)


@dataclass(frozen=True, slots=True)
class DurationSums:
    """Steps' durations over some lines (a request's, a leg's, some legs')."""

    timed_steps: int
    """Lines that carried both ``draft_ns`` and ``verify_ns``."""
    draft_steps: int
    """Lines that carried ``draft_ns``; its mean is ``draft_ns / draft_steps``."""
    verify_steps: int
    """Lines that carried ``verify_ns``; its mean is ``verify_ns / verify_steps``."""
    draft_ns: int
    verify_ns: int

    def to_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in DURATION_SUMS}


NO_DURATIONS = DurationSums(0, 0, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class StepDurations:
    """The durations of one fold's steps: per leg (by the arm record's leg index) and per
    request in each leg. Legs and requests none of whose lines carried a duration are absent
    (``leg()`` reads them as ``NO_DURATIONS``)."""

    legs: Mapping[int, DurationSums]
    requests: Mapping[int, tuple[Mapping[str, Any], ...]]
    """Per leg: each timed request's ``w``, ``seq`` (its integer or string id) and sums, in
    the order of the leg's ``requests``."""

    def leg(self, index: int) -> DurationSums:
        return self.legs.get(index, NO_DURATIONS)

    def pooled(self, legs: Iterable[int]) -> DurationSums:
        """The sums over these legs (the warm legs, all legs); RefusedError past 2^63 - 1."""
        chosen = [(index, self.leg(index)) for index in legs]
        return _summed(
            ((f"leg {index}", name, getattr(sums, name)) for index, sums in chosen
             for name in DURATION_SUMS)
        )  # fmt: skip


def step_durations(table: pl.DataFrame) -> StepDurations | None:
    """The fold's durations from its partial fold's ``durations`` table; None when no line
    in a leg carried one."""
    if table.height == 0:
        return None
    requests: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    places: dict[int, list[tuple[str, str, int]]] = defaultdict(list)
    for row in table.sort(REQUEST_KEY).iter_rows(named=True):
        leg = row.pop("leg")
        row["seq"] = request_id(row["seq"], row.pop("sid"))
        requests[leg].append(frozen(row))
        places[leg].extend((f"leg {leg}", name, row[name]) for name in DURATION_SUMS)
    return StepDurations(
        legs=frozen({leg: _summed(found) for leg, found in places.items()}),
        requests=frozen({leg: tuple(found) for leg, found in requests.items()}),
    )


def _summed(places: Iterable[tuple[str, str, int]]) -> DurationSums:
    totals = limits.check_sums(places, WHAT_TO_DO)
    return DurationSums(**{name: totals.get(name, 0) for name in DURATION_SUMS})
