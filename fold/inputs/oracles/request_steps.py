"""What an oracle known request by request hands the later stages: its legs, each leg's
requests, and each request's steps where the engine recorded them, as plain data.

A reader fills these; the fold (``fold.folding.oracle_steps``) folds them with the code that
folds our steps. Nothing here computes a figure.
"""

from __future__ import annotations

from dataclasses import dataclass

DETAILED = "detailed"
"""Every request's verify steps in order, with what each drafted and accepted."""
SUMMARY = "summary"
"""Per request only its totals and its histogram of steps by drafts accepted."""


@dataclass(frozen=True, slots=True)
class OracleRequest:
    """One request (one output sequence) as the engine recorded it.

    ``histogram[j]`` = its verify steps that accepted exactly j drafts (j = 0 .. k);
    ``accepted`` and ``drafted`` are its steps in order, one entry per verify step, or None
    when the engine kept only the totals (``SUMMARY``).
    """

    id: str
    where: str
    steps: int
    proposed: int
    accepted_total: int
    histogram: tuple[int, ...]
    accepted: tuple[int, ...] | None
    drafted: tuple[int, ...] | None
    completion_tokens: int
    finish_reason: str | None


@dataclass(frozen=True, slots=True)
class OracleLeg:
    """One leg of the oracle's arm: its requests, run, speed and window as recorded.
    ``index`` is its place among the legs (0, 1, ...); ``label`` the ``leg`` the input gave it,
    if any."""

    index: int
    label: str | None
    where: str
    run: int | None
    warm: bool
    tok_s: float | None
    secs: float | None
    requests: tuple[OracleRequest, ...]

    @property
    def completion_tokens(self) -> int:
        return sum(request.completion_tokens for request in self.requests)


@dataclass(frozen=True, slots=True)
class OracleSteps:
    """An oracle arm's legs with their requests (and steps), and how they were recorded."""

    source: str
    """What wrote them (``vLLM's per-request spec_decode_metrics``), for the sources."""
    where: str
    level: str
    """``DETAILED`` or ``SUMMARY``."""
    max_draft: int
    """The configured drafts per step (k): the histogram runs j = 0 .. k."""
    predicate: str
    """How the warm legs were chosen (``run > 1``, or every leg when none has a run)."""
    legs: tuple[OracleLeg, ...]

    @property
    def warm_legs(self) -> tuple[OracleLeg, ...]:
        return tuple(leg for leg in self.legs if leg.warm)
