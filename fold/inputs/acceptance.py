"""The acceptance formulas, in the oracles' units, each defined once.

Notation (``shared`` units reference): S = verify steps that carried at least one draft token,
counted once per request per verify forward; P = draft tokens proposed; A = draft tokens
accepted, the bonus/correction token excluded. Every pooled figure is a ratio of sums.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

DEFAULT_WINDOW_STEPS = 32
"""Steps per window of the within-leg shape (``--window``, ``fold.folding.windows``)."""


def accept_rate(accepted: int, proposed: int) -> float | None:
    """A/P: vLLM's "Avg Draft acceptance rate", llama.cpp's "draft acceptance"."""
    return accepted / proposed if proposed else None


def mean_acceptance_length(accepted: int, steps: int) -> float | None:
    """1 + A/S: tokens per verify step, bonus token included (vLLM, llama.cpp, TRT-LLM)."""
    return 1 + accepted / steps if steps else None


TRIPLE = ("steps", "proposed", "accepted")
"""S, P and A by name: ``Counts``' fields, and the columns and keys every table and record
that carries a count triple names them by."""


@dataclass(frozen=True, slots=True)
class Counts(Mapping[str, Any]):
    """S, P and A of some steps (a window, a request, a leg, a set of legs, a cut at another
    k), with the two ratios every figure takes from them: the one type that carries a count
    triple, so no figure redeclares the counts or works a ratio out on its own.

    Read by name it is its JSON: a read-only mapping of ``steps``, ``proposed``, ``accepted``
    and ``accept_rate`` (a window, a pool of windows); 1 + A/S is the attribute
    ``mean_acceptance_length``, which a figure that shows it names beside these."""

    steps: int
    proposed: int
    accepted: int

    @property
    def accept_rate(self) -> float | None:
        return accept_rate(self.accepted, self.proposed)

    @property
    def mean_acceptance_length(self) -> float | None:
        return mean_acceptance_length(self.accepted, self.steps)

    def __getitem__(self, name: str) -> Any:
        if name not in _COUNTS_JSON:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(_COUNTS_JSON)

    def __len__(self) -> int:
        return len(_COUNTS_JSON)

    @classmethod
    def total(cls, parts: Iterable[Counts]) -> Counts:
        """The parts' sums (none: zeros): a pooled figure is a ratio of these, never a mean
        of the parts' ratios."""
        steps = proposed = accepted = 0
        for part in parts:
            steps += part.steps
            proposed += part.proposed
            accepted += part.accepted
        return cls(steps, proposed, accepted)

    @classmethod
    def of(cls, named: Any) -> Counts:
        """The counts of anything read by name (a leg, a pool, a window read back from JSON)."""
        return cls(named["steps"], named["proposed"], named["accepted"])

    def to_json(self) -> dict[str, Any]:
        """The counts and A/P: a window's or a pool's JSON."""
        return {name: getattr(self, name) for name in _COUNTS_JSON}


_COUNTS_JSON = (*TRIPLE, "accept_rate")


@dataclass(frozen=True, slots=True, eq=False)
class CountColumns(Sequence[Counts]):
    """Consecutive parts' counts (a leg's windows, their pools), held by column: read in the
    library as a sequence of ``Counts`` (``windows[w].accept_rate``), equal to a tuple or list
    of the same ``Counts``, and in the JSON as one array per figure
    (``windows.accept_rate[w]``): a load test's 50 legs of 512 windows and their pools took
    2.6 MB as an object each, and take 0.8 MB so."""

    steps: tuple[int, ...]
    proposed: tuple[int, ...]
    accepted: tuple[int, ...]

    def __post_init__(self) -> None:
        for name in TRIPLE:
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not len(self.steps) == len(self.proposed) == len(self.accepted):
            raise ValueError("CountColumns: steps, proposed and accepted differ in length")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CountColumns):
            return (self.steps, self.proposed, self.accepted) == (
                other.steps,
                other.proposed,
                other.accepted,
            )
        if isinstance(other, (tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))  # a tuple of the same Counts is equal, so hashes alike

    @classmethod
    def of(cls, parts: Iterable[Counts]) -> CountColumns:
        held = list(parts)
        return cls(
            tuple(part.steps for part in held),
            tuple(part.proposed for part in held),
            tuple(part.accepted for part in held),
        )

    @property
    def accept_rate(self) -> tuple[float | None, ...]:
        return tuple(map(accept_rate, self.accepted, self.proposed))

    def __len__(self) -> int:
        return len(self.steps)

    @overload
    def __getitem__(self, index: int) -> Counts: ...

    @overload
    def __getitem__(self, index: slice) -> CountColumns: ...

    def __getitem__(self, index: int | slice) -> Counts | CountColumns:
        if isinstance(index, slice):
            return CountColumns(self.steps[index], self.proposed[index], self.accepted[index])
        return Counts(self.steps[index], self.proposed[index], self.accepted[index])

    def __iter__(self) -> Iterator[Counts]:
        return map(Counts, self.steps, self.proposed, self.accepted)

    def to_json(self) -> dict[str, Any]:
        """An array per figure, the parts in order: ``steps``, ``proposed``, ``accepted`` and
        ``accept_rate`` (null where a part proposed nothing)."""
        return {
            "steps": list(self.steps),
            "proposed": list(self.proposed),
            "accepted": list(self.accepted),
            "accept_rate": list(self.accept_rate),
        }


def completion_tokens_per_step(completion_tokens: int, steps: int) -> float | None:
    """completion_tokens / S: SGLang's per-request ``spec_accept_length`` unit (counts prefill)."""
    return completion_tokens / steps if steps else None


def histogram(counts: dict[int, int], max_proposed: int) -> list[int]:
    """``[j]`` = steps that accepted exactly j draft tokens, for j = 0 .. max proposed."""
    return [counts.get(accepted, 0) for accepted in range(max_proposed + 1)] if counts else []


def accepted_at_position(steps_by_accepted: list[int]) -> list[int]:
    """``[i]`` = steps whose draft position i was accepted, i.e. that accepted more than i.

    vLLM's ``num_accepted_tokens_per_pos``; positions run up to the largest proposal.
    """
    counts = []
    accepted_more = sum(steps_by_accepted)
    for count in steps_by_accepted[:-1]:
        accepted_more -= count
        counts.append(accepted_more)
    return counts


def per_position(steps_by_accepted: list[int], steps: int) -> list[float]:
    """``[i]`` = share of steps whose draft position i was accepted (vLLM's per-position rate)."""
    if not steps:
        return []
    return [count / steps for count in accepted_at_position(steps_by_accepted)]


def per_position_of_proposed(
    steps_by_accepted: list[int], steps_by_proposed: list[int]
) -> list[float | None]:
    """``[i]`` = share of the steps that drafted position i (proposed more than i) which
    accepted it. Both lists run j = 0 .. max proposed; a step accepts no more than it proposed,
    so the numerator's steps are among the denominator's.

    Equal to ``per_position`` when every step proposes the same k; above it when some steps
    propose fewer (their undrafted positions do not count against the rate). A position no step
    drafted has no rate: None (below the largest proposal some step always drafted it).
    """
    drafted_more = accepted_at_position(steps_by_proposed)
    return [
        accepted / drafted if drafted else None
        for accepted, drafted in zip(
            accepted_at_position(steps_by_accepted), drafted_more, strict=True
        )
    ]


def per_position_conditional(unconditional: list[float]) -> list[float | None]:
    """``[i]`` = share of the steps that accepted position i - 1 which also accepted position i:
    ``u[i] / u[i - 1]``, with ``u[-1] = 1`` (every step reached position 0).

    A position after one no step accepted has no conditional rate: None, not 0.
    """
    rates: list[float | None] = []
    previous = 1.0
    for rate in unconditional:
        rates.append(rate / previous if previous > 0 else None)
        previous = rate
    return rates
