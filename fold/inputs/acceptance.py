"""The acceptance formulas, in the oracles' units, each defined once.

Notation (``shared`` units reference): S = verify steps that carried at least one draft token,
counted once per request per verify forward; P = draft tokens proposed; A = draft tokens
accepted, the bonus/correction token excluded. Every pooled figure is a ratio of sums.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import NamedTuple

# A window (or request) whose acceptance falls under this fraction of its leg's median is a
# collapse: halving is far outside the window-to-window noise of a steady drafter at the
# default window size, and the past collapses this tool was made for went to (near) zero.
COLLAPSE_FRACTION = 0.5
MIN_WINDOWS_FOR_COLLAPSE = 3
DEFAULT_WINDOW_STEPS = 32


def accept_rate(accepted: int, proposed: int) -> float | None:
    """A/P: vLLM's "Avg Draft acceptance rate", llama.cpp's "draft acceptance"."""
    return accepted / proposed if proposed else None


def mean_acceptance_length(accepted: int, steps: int) -> float | None:
    """1 + A/S: tokens per verify step, bonus token included (vLLM, llama.cpp, TRT-LLM)."""
    return 1 + accepted / steps if steps else None


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


class Window(NamedTuple):
    """A window of a leg's steps. A named tuple: a leg of 10M lines has 512 of them, made
    anew for every fold, and a frozen dataclass takes several times longer to make."""

    steps: int
    proposed: int
    accepted: int

    @property
    def accept_rate(self) -> float | None:
        return accept_rate(self.accepted, self.proposed)


def windows_from_bins(bins: Iterable[tuple[int, int, int]], window_steps: int) -> list[Window]:
    """Consecutive windows of at least ``window_steps`` steps, from time-ordered bins.

    ``bins`` are (steps, proposed, accepted) of consecutive equal slices of a leg's window. A
    window closes at the first bin edge where it holds ``window_steps`` steps, so its counts are
    exact and its edges fall on bin edges; the last window may hold fewer steps.
    """
    windows = []
    steps = proposed = accepted = 0
    for bin_steps, bin_proposed, bin_accepted in bins:
        steps += bin_steps
        proposed += bin_proposed
        accepted += bin_accepted
        if steps >= window_steps:
            windows.append(Window(steps, proposed, accepted))
            steps = proposed = accepted = 0
    if steps:
        windows.append(Window(steps, proposed, accepted))
    return windows


def collapses(rates: list[float | None], at_least: int = MIN_WINDOWS_FOR_COLLAPSE) -> list[int]:
    """Positions of the rates below COLLAPSE_FRACTION of their median (needs a few to judge)."""
    known = [rate for rate in rates if rate is not None]
    if len(known) < at_least:
        return []
    median = statistics.median(known)
    if median <= 0:
        return []
    return [
        position
        for position, rate in enumerate(rates)
        if rate is not None and rate < COLLAPSE_FRACTION * median
    ]
