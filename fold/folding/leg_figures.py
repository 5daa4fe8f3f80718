"""A leg's figures, and a set of legs' pooled ones, from S, P and A, whichever source the
counts came from (a step log, or the engine's counters on the record's legs): one definition
for both, so the two folds cannot drift apart."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, ClassVar, Union

import numpy as np

from fold.folding.frozen import freeze_fields
from fold.folding.frozen import frozen as frozen  # where the document's builders import it
from fold.folding.request_rows import RequestRows
from fold.folding.windows import collapses, windows_from_bins
from fold.inputs import acceptance
from fold.inputs.acceptance import TRIPLE, CountColumns, Counts
from fold.inputs.arm import WINDOW_SLACK_NS
from fold.inputs.leg_sums import Leg


class NeedsStepLog(enum.Enum):
    """What a leg's step figures are when its counts came without steps (the record's
    counters): not zeros, a value of its own, written as None in the JSON."""

    NEEDS_STEP_LOG = "needs a step log"


NEEDS_STEP_LOG = NeedsStepLog.NEEDS_STEP_LOG


_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """``value`` with every read-only view and figure type made a dict again, for JSON."""
    # Most values are numbers, as they are: asking first whether each is a RequestRows (an
    # abstract Sequence) cost seconds on lists of 65,536 draft positions.
    if type(value) in _SCALARS:
        return value
    if isinstance(value, (Figures, RequestRows, Counts, CountColumns)):
        return value.to_json()
    if isinstance(value, (MappingProxyType, dict)):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


class Figures:
    """Read access by name (``leg["steps"]``), as gate scripts and the JSON have it; the
    figures themselves are the fields of frozen dataclasses."""

    __slots__ = ()
    JSON_ORDER: ClassVar[tuple[str, ...]] = ()

    def __getitem__(self, name: str) -> Any:
        try:
            return self._lookup(name)
        except AttributeError:
            raise KeyError(name) from None

    def _lookup(self, name: str) -> Any:
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.keys()

    def keys(self) -> tuple[str, ...]:
        return self.JSON_ORDER

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def items(self) -> Iterator[tuple[str, Any]]:
        return ((name, self[name]) for name in self.keys())

    def values(self) -> Iterator[Any]:
        return (self[name] for name in self.keys())

    def to_json(self) -> dict[str, Any]:
        return {name: plain(self[name]) for name in self.keys()}


Named = Union["Figures", Mapping[str, Any]]
"""Figures read by name: a leg's or a pool's (a ``Figures``), or the same as a plain mapping
(a document read back from JSON, a reader's legs)."""


@dataclass(frozen=True, slots=True)
class StepFigures:
    """A leg's figures that only its steps give (a step log, or the engine's trace)."""

    lines: int
    per_position: tuple[float, ...]
    per_position_conditional: tuple[float | None, ...]
    per_position_of_proposed: tuple[float | None, ...]
    histogram: tuple[int, ...]
    emitted: int | None
    emitted_lines: int
    expected_completion_tokens: int | None
    prefill_tokens_per_request: int
    emitted_consistent: bool | None
    requests: RequestRows
    """Per request, its sums and figures and its cadence: one table, read as read-only
    mappings or by column."""
    windows: CountColumns

    def __post_init__(self) -> None:
        freeze_fields(
            self,
            ("per_position", "per_position_conditional", "per_position_of_proposed",
             "histogram"),
        )  # fmt: skip


STEP_ONLY = tuple(item.name for item in fields(StepFigures))
"""The step figures' names: None in the JSON of a leg that ``NEEDS_STEP_LOG``."""


_NOT_COUNTED = ("from_steps", "flags", "cadence")


@dataclass(frozen=True, slots=True)
class LegFigures(Figures):
    """One leg's figures, whichever source its S, P and A came from."""

    index: int
    run: int
    warm: bool
    label: str | None
    finish_reason: str | None
    tok_s: float
    completion_tokens: int
    window_secs: float
    window_start_ns: int
    window_end_ns: int
    counts: Counts
    completion_tokens_per_step: float | None
    step_rate: float | None
    from_steps: StepFigures | NeedsStepLog
    flags: tuple[str, ...]
    cadence: Mapping[str, Any] | None

    def _lookup(self, name: str) -> Any:
        if name in STEP_ONLY:
            return None if self.from_steps is NEEDS_STEP_LOG else getattr(self.from_steps, name)
        if name in COUNT_NAMES:
            return getattr(self.counts, name)
        if name in ("from_steps", "counts"):
            raise AttributeError(name)
        return getattr(self, name)

    def keys(self) -> tuple[str, ...]:
        return LEG_JSON


COUNT_NAMES = (*TRIPLE, "accept_rate", "mean_acceptance_length")
"""A figure's counts and their ratios, read by name as its own (``leg["steps"]``): the JSON
has them where the figure's ``counts`` stands."""


def _in_json_order(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(part for name in names for part in (COUNT_NAMES if name == "counts" else (name,)))


LEG_JSON = (
    *_in_json_order(
        item.name
        for item in fields(LegFigures)
        if item.name not in ("from_steps", "flags", "cadence")
    ),
    *STEP_ONLY,
    "flags",
    "cadence",
)


@dataclass(frozen=True, slots=True)
class PooledFigures(Figures):
    """A set of legs' figures: ratios of their sums, with 95% intervals beside the pooled
    ones when the fold was resampled."""

    legs: tuple[int, ...]
    counts: Counts
    completion_tokens_per_step: float | None
    output_throughput_tok_s: float | None
    step_rate: float | None
    per_position: tuple[float, ...] | None
    per_position_conditional: tuple[float | None, ...] | None
    per_position_of_proposed: tuple[float | None, ...] | None
    histogram: tuple[int, ...] | None
    cadence: Mapping[str, Any] | None
    intervals: Mapping[str, Sequence[float] | None]
    """``<figure>_ci`` for each figure with an interval (``fold.folding.uncertainty``), and
    ``<figure>_reach`` beside it: what ``±`` shows."""
    per_request: Mapping[str, Any] | None = None
    """``fold.folding.per_request``'s figures (None: no requests, or no steps)."""
    by_output_position: Mapping[str, Any] | None = None
    """``fold.folding.by_position``'s figures (None: no steps in time order)."""

    def __post_init__(self) -> None:
        freeze_fields(
            self,
            ("legs", "per_position", "per_position_conditional", "per_position_of_proposed",
             "histogram", "cadence", "intervals", "per_request", "by_output_position"),
        )  # fmt: skip

    def _lookup(self, name: str) -> Any:
        if name in self.intervals:
            return self.intervals[name]
        if name in COUNT_NAMES:
            return getattr(self.counts, name)
        if name in ("intervals", "counts"):
            raise AttributeError(name)
        return getattr(self, name)

    def keys(self) -> tuple[str, ...]:
        return (*POOLED_JSON, *self.intervals)


POOLED_JSON = _in_json_order(
    item.name for item in fields(PooledFigures) if item.name != "intervals"
)


def counted_leg(
    leg: dict[str, Any], warm: bool, steps: int, proposed: int, accepted: int
) -> dict[str, Any]:
    """A leg's figures that need only its S, P and A and the record's fields, whichever
    source the counts came from (the step log or the engine's counters)."""
    seconds = window_secs(leg)
    return {
        "index": leg["index"],
        "run": leg["run"],
        "warm": warm,
        "label": leg.get("leg"),
        "finish_reason": leg["finish_reason"],
        "tok_s": leg["tok_s"],
        "completion_tokens": leg["completion_tokens"],
        "window_secs": seconds,
        # the generate window as recorded, on the step log's clock: the timeline draws it
        "window_start_ns": leg["start_ns"] + WINDOW_SLACK_NS,
        "window_end_ns": leg["end_ns"] - WINDOW_SLACK_NS,
        "steps": steps,
        "proposed": proposed,
        "accepted": accepted,
        "completion_tokens_per_step": acceptance.completion_tokens_per_step(
            leg["completion_tokens"], steps
        ),
        "step_rate": steps / seconds if seconds > 0 else None,
    }


def stepped_leg(
    leg: dict[str, Any],
    *,
    prefill_tokens: int,
    warm: bool,
    sums: dict[str, Any] | None,
    counts: dict[int, int],
    proposals: dict[int, int],
    bins: list[tuple[int, int, int]],
    requests: RequestRows,
    window_steps: int,
) -> dict[str, Any]:
    """A leg's figures from its steps: the counts, per position and histogram, the within-leg
    windows, its requests' rates, the flags and the emitted check."""
    sums = sums or {"lines": 0, "steps": 0, "proposed": 0, "accepted": 0, "emitted": 0,
                    "emitted_lines": 0, "max_proposed": 0}  # fmt: skip
    steps, proposed, accepted = sums["steps"], sums["proposed"], sums["accepted"]
    steps_by_accepted = acceptance.histogram(counts, sums["max_proposed"])
    per_position = acceptance.per_position(steps_by_accepted, steps)
    steps_by_proposed = acceptance.histogram(proposals, sums["max_proposed"])
    windows = windows_from_bins(bins, window_steps)
    flags = []
    if steps == 0:
        flags.append("no steps")
    full_rates = [
        rate
        for count, rate in zip(windows.steps, windows.accept_rate, strict=True)
        if count >= window_steps
    ]
    if collapses(full_rates):
        flags.append("collapse")
    judged = requests.column("steps") >= window_steps
    rates = requests.column("accept_rate")[judged]
    # Only whether any request collapses is asked: a request without a rate (NaN) is left
    # out as collapses() leaves out None, in one numpy pass (a float per request in Python
    # took 0.1 s on 45,600 requests).
    if collapses(rates[~np.isnan(rates)].tolist(), at_least=2):
        flags.append("request collapse")
    emitted_consistent = None
    expected_completion = None
    if sums["lines"] and sums["emitted_lines"] == sums["lines"]:
        expected_completion = prefill_tokens * len(requests) + sums["emitted"]
        emitted_consistent = expected_completion == leg["completion_tokens"]
        if not emitted_consistent:
            flags.append("emitted != completion")
    return {
        **counted_leg(leg, warm, steps, proposed, accepted),
        "lines": sums["lines"],
        "per_position": per_position,
        "per_position_conditional": acceptance.per_position_conditional(per_position),
        "per_position_of_proposed": acceptance.per_position_of_proposed(
            steps_by_accepted, steps_by_proposed
        ),
        "histogram": steps_by_accepted,
        "emitted": sums["emitted"] if sums["emitted_lines"] else None,
        "emitted_lines": sums["emitted_lines"],
        "expected_completion_tokens": expected_completion,
        "prefill_tokens_per_request": prefill_tokens,
        "emitted_consistent": emitted_consistent,
        "requests": requests,
        "windows": windows,
        "flags": flags,
    }


COUNTED = (
    *(
        item.name
        for item in fields(LegFigures)
        if item.name not in ("from_steps", "flags", "cadence", "counts")
    ),
    *TRIPLE,
)
"""The figures every leg has, whichever source its S, P and A came from (``counted_leg``):
its draft holds the counts by name, its figures as one ``Counts``."""


def with_counts(draft: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """A draft's ``names``, its count triple made one ``Counts``."""
    found = {name: draft[name] for name in names if name not in TRIPLE}
    found["counts"] = Counts(*(draft[name] for name in TRIPLE))
    return found


def stepped_figures(draft: dict[str, Any]) -> LegFigures:
    """A leg's figures from its finished draft (``stepped_leg``, with its cadence)."""
    steps = StepFigures(
        **{name: draft[name] for name in STEP_ONLY if name != "requests"},
        requests=draft["requests"],
    )
    return LegFigures(
        **with_counts(draft, COUNTED),
        from_steps=steps,
        flags=tuple(draft["flags"]),
        cadence=None if draft["cadence"] is None else frozen(draft["cadence"]),
    )


def counted_figures(
    leg: dict[str, Any], warm: bool, steps: int, proposed: int, accepted: int
) -> LegFigures:
    """A leg's figures from its counts alone (the record's counters): its step figures are
    ``NEEDS_STEP_LOG``, and it has no cadence."""
    return LegFigures(
        **with_counts(counted_leg(leg, warm, steps, proposed, accepted), COUNTED),
        from_steps=NEEDS_STEP_LOG,
        flags=("no steps",) if steps == 0 else (),
        cadence=None,
    )


def window_secs(leg: dict[str, Any]) -> float:
    # The generate window as recorded (microseconds), not the band attribution widens it by.
    return (leg["end_ns"] - leg["start_ns"] - 2 * WINDOW_SLACK_NS) / 1e9


def bootstrap_leg(leg: dict[str, Any], requests: dict[str, Any], steps: int) -> Leg:
    """One arm leg as the bootstrap draws it: its requests' sums (``requests``: a column per
    sum, a value per request) and what exists only per leg, whichever source the counts came
    from. Counts known only per leg are one request of the leg, as for an oracle's legs."""
    return Leg(
        requests=requests,
        values={
            "completion_tokens": leg["completion_tokens"],
            "steps": steps,
            "window_secs": window_secs(leg),
        },
        tok_s=leg["tok_s"],
    )
