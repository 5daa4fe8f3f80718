"""Our warm legs as a matched setting (``fold.compare.matched``) reads them: the counts, the
per-position rates and their intervals by the fold's bootstrap, and what a synthetic run at
those rates cannot carry of them (the words each setting lists under ``cannot_carry``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fold.errors import RefusedError
from fold.folding.uncertainty import bootstrap
from fold.inputs import acceptance
from fold.inputs.acceptance import Counts
from fold.inputs.leg_sums import Leg
from fold.wording import figure


@dataclass(frozen=True, slots=True)
class WarmSteps:
    """The warm fold's counts and per-position rates, and the warm legs themselves."""

    counts: Counts
    per_position: list[float]
    mean_acceptance_length_ci: tuple[float, float] | None
    legs: tuple[Any, ...]

    @property
    def mean_acceptance_length(self) -> float:
        """1 + A/S: never None here, since ``warm_figures`` refuses a warm fold with S = 0."""
        length = self.counts.mean_acceptance_length
        assert length is not None
        return length


def warm_figures(fold: Any, engine: str) -> WarmSteps:
    """``fold``'s warm legs as ``engine``'s setting needs them, or RefusedError saying why
    there is nothing to match."""
    warm = fold.warm
    if not warm["legs"]:
        raise RefusedError(
            f"--matched {engine}: no warm legs (--warm {fold.predicate!r}); "
            "the setting is our warm acceptance"
        )
    if not warm["steps"]:
        raise RefusedError(
            f"--matched {engine}: the warm legs have no verify step with a draft (S = 0), so "
            f"there is no acceptance to match and no k: {REFUSES_NO_DRAFT[engine]}"
        )
    per_position = warm["per_position"]
    if engine != "sglang" and per_position is None:
        raise RefusedError(
            f"--matched {engine}: the warm legs' counts came from the record's counters, which "
            "give no per-position acceptance; name the step log after the arm record"
        )
    interval = warm.get("mean_acceptance_length_ci")
    return WarmSteps(
        counts=Counts.of(warm),
        per_position=list(per_position or []),
        mean_acceptance_length_ci=None if interval is None else (interval[0], interval[1]),
        legs=tuple(leg for leg in fold.legs if leg["warm"]),
    )


REFUSES_NO_DRAFT = {
    "vllm": 'vLLM refuses num_speculative_tokens 0 ("Input should be greater than 0")',
    "llamacpp": 'llama-server refuses it ("synthetic acceptance requires at least one '
    'speculative token")',
    "sglang": "SGLang's simulated length would stand for acceptance we never measured",
}


def position_intervals(
    legs: Sequence[Any], k: int, resamples: int, seed: int
) -> list[tuple[float, float] | None]:
    """Each position's 95% interval by the fold's bootstrap over the warm legs. A leg's
    per-position counts exist per leg (its histogram), not per request, so each leg is one
    unit: the legs are redrawn, not the requests in them (with one request a leg, as a
    gate's offline legs have, that is the whole two-stage draw)."""
    if resamples < 1:
        return [None] * k
    counts = []
    for leg in legs:
        at_position = acceptance.accepted_at_position(leg["histogram"] or [0])
        counts.append(at_position + [0] * (k - len(at_position)))
    found = []
    for position in range(k):
        # The bootstrap's 1 + A/S over legs with A := the steps that accepted this position:
        # that figure less 1 is the position's rate, a ratio of sums as in the pooled fold.
        units = [
            Leg(requests={"accepted": [count[position]], "steps": [leg["steps"]]})
            for leg, count in zip(legs, counts, strict=True)
        ]
        replicates = bootstrap(units, {"warm": list(range(len(units)))}, resamples, seed)
        interval = replicates["warm"].interval("mean_acceptance_length")
        found.append(None if interval is None else (interval[0] - 1.0, interval[1] - 1.0))
    return found


def cannot_carry(warm: WarmSteps, k: int, engine: str) -> tuple[str, ...]:
    counts = warm.counts
    mean_draft = counts.proposed / counts.steps
    notes = []
    short = counts.proposed < k * counts.steps
    if engine != "sglang" and short:
        notes.append(
            f"drafts of varying length: our warm steps drafted {figure(mean_draft, 3)} tokens "
            f"on average of k = {k}; the rates count an undrafted position as not accepted, "
            "so the run matches our tokens per step only if its drafter fills all k positions "
            "at every step, and then it verifies k tokens a step where we verified fewer (its "
            f"A/P then reads {percent(counts.accepted / (k * counts.steps))}, ours "
            f"{percent(counts.accepted / counts.proposed)}: compare 1 + A/S)"
        )
    elif short:
        notes.append(
            f"drafts of varying length: our warm steps drafted {figure(mean_draft, 3)} tokens "
            f"on average of k = {k}; SGLang forces the accepted length whatever was drafted "
            "and verifies its full draft every step"
        )
    else:
        notes.append(
            f"drafts of varying length: none here (every warm step drafted k = {k}); the "
            "oracle's drafter must fill all k positions at every step as well"
        )
    rates = [
        request["accept_rate"]
        for leg in warm.legs
        for request in (leg["requests"] or ())
        if request["accept_rate"] is not None
    ]
    spread = (
        f"; our warm requests' A/P ran from {percent(min(rates))} to {percent(max(rates))}"
        if len(rates) > 1
        else ""
    )
    if engine != "sglang":
        notes.append(
            "the spread over requests: every request and step gets the same per-position rates"
            + spread
        )
        notes.append(
            "the shape within a leg: the rates hold from a run's first step to its last; steps "
            "are drawn independently, so runs of good or bad steps are not reproduced"
        )
    else:
        notes.append(
            "the spread over requests and the per-position shape: one length for every "
            "request, drawn once per verify forward for the whole batch as the value's floor "
            "or ceiling" + spread
        )
    notes.append(
        "the tokens: synthetic acceptance keeps draft tokens the target did not choose, so the "
        "text differs from a real run; fix the output length (max_tokens, ignore_eos) so the "
        "run generates as many tokens as ours"
    )
    return tuple(notes)


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"
