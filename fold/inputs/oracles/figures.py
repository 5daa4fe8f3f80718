"""One arm's figures in the reference units, with where each came from and what it covers.

* ``S`` (``steps``): (request, verify step) pairs that carried at least one draft token;
* ``P`` (``proposed``): draft tokens verified; ``A`` (``accepted``): draft tokens accepted,
  never counting the bonus token;
* ``A/P`` and ``1 + A/S`` (vLLM's units); SGLang's per-request ``spec_accept_length``
  (completion tokens per verify step, the prefill token included) is kept apart in
  ``completion_tokens_per_step``.

A figure the input does not carry is ``None`` ("not recorded"), never 0. ``population`` says
which requests the counters cover, so a comparison can fold our arm over the same ones.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from fold.errors import RefusedError
from fold.inputs import acceptance as formulas
from fold.inputs.leg_sums import Leg
from fold.inputs.oracles.count_checks import ORACLE_COUNT_WHAT_TO_DO as ORACLE_COUNT_WHAT_TO_DO
from fold.inputs.oracles.count_checks import (
    check_counts,
    check_rates,
    check_together,
    checked_per_position,
    count_labels,
)
from fold.inputs.oracles.request_steps import OracleSteps
from fold.inputs.oracles.vllm_speculative import SpeculativeSetting

OURS_KIND = "ours"


NOT_RECORDED_SOURCE, DERIVED_SOURCE, RECORDED_SOURCE = "not_recorded", "derived", "recorded"
"""What a figure's source is, a code (``source_kinds`` beside the ``sources`` sentences)."""
SOURCE_FIGURES = {
    "tok_s": "output_throughput_tok_s",
    "steps": "steps",
    "proposed": "proposed",
    "accepted": "accepted",
    "per_position": "per_position",
    "completion_tokens_per_step": "completion_tokens_per_step",
    "mean_acceptance_length": "mean_acceptance_length",
    "accept_rate": "accept_rate",
    "verify_steps_per_s": "verify_steps_per_s",
}
"""The arm's figure each key of ``sources`` speaks for."""
DERIVED_OVER = {"accept_rate": "proposed", "mean_acceptance_length": "steps"}
"""The figures worked out from the counts when they are there: A over P, and 1 + A over S."""


@dataclass(frozen=True)
class MatchedAs:
    """``--vs NAME:matched[@BASE]=PATH``: the arm was run at our acceptance, by the command
    line's word; ``base`` names the ordinary arm of the same engine it is measured against."""

    base: str | None = None


@dataclass(frozen=True)
class ArmFigures:
    """One arm's throughput and acceptance, in the reference units; ``None`` = not recorded.

    ``per_position[i]`` is the number of steps whose draft position ``i`` was accepted.
    ``bounds`` holds, for counts an engine printed rounded, the most the true count can differ
    from the one shown (``{"accepted": 5}``); the derived ratios' bounds are in
    ``accept_rate_bound`` and ``mean_acceptance_length_bound``. ``legs`` holds what the
    figures pool, leg by leg (or request by request), where the input has it.
    """

    name: str
    kind: str
    output_throughput_tok_s: float | None = None
    steps: int | None = None
    proposed: int | None = None
    accepted: int | None = None
    accept_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position: tuple[int, ...] | None = None
    completion_tokens_per_step: float | None = None
    verify_steps_per_s: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict, hash=False, compare=True)
    notes: tuple[str, ...] = ()
    population: str | None = None
    population_detail: str = ""
    bounds: Mapping[str, float] = field(default_factory=dict, hash=False, compare=True)
    accept_rate_bound: float | None = None
    mean_acceptance_length_bound: float | None = None
    legs: tuple[Leg, ...] | None = field(default=None, repr=False, compare=False)
    """The legs (or requests) the figures pool, for the bootstrap's intervals; None when the
    arm is known only by totals (counters, scrapes, bench results, log lines)."""
    speculative: SpeculativeSetting | None = field(default=None, compare=False)
    """The speculative config the arm's record carries (vLLM's), checked as vLLM checks it."""
    matched_as: MatchedAs | None = field(default=None, compare=False)
    """Given as a matched arm on the command line (``fold.compare.matched_arms``)."""
    draft_overhead: Mapping[str, Any] | None = field(default=None, hash=False, compare=True)
    """The drafting time the oracle reports, where it does (docs/step-split.md): ``draft_s``
    over ``draft_calls`` and what it covers (``source``); None: it reports none."""
    tok_s_kind: str | None = field(default=None, compare=False)
    """What its tok/s is where that is another kind than ours (a leg's completion tokens over
    its wall time), in words ("one request's generation speed ..."); None: the same kind."""
    requests: OracleSteps | None = field(default=None, repr=False, compare=False)
    """Its legs' requests and their steps, for an oracle known request by request (vLLM's
    per-request metrics), folded later as ours are; None for every other input."""

    def __post_init__(self) -> None:
        for name in ("sources", "bounds", "draft_overhead"):  # read-only, as the document is
            if (found := getattr(self, name)) is not None:
                object.__setattr__(self, name, MappingProxyType(dict(found)))

    @property
    def per_position_rate(self) -> tuple[float, ...] | None:
        """Unconditional per-position rate ``per_position[i] / steps``; None if not recorded."""
        if self.per_position is None or not self.steps:
            return None
        return tuple(count / self.steps for count in self.per_position)

    @property
    def approximate(self) -> bool:
        return bool(self.bounds)

    def source_kinds(self) -> dict[str, str]:
        """Per figure in ``sources``, a code the presenters choose on (the sentence beside it
        says more): ``not_recorded`` (the arm has no such figure), ``derived`` (A/P or 1 + A/S
        worked out from its counts, as always) or ``recorded`` (as the input gives it)."""
        kinds = {}
        for key in self.sources:
            figure = getattr(self, SOURCE_FIGURES[key]) if key in SOURCE_FIGURES else ""
            if figure is None:
                kinds[key] = NOT_RECORDED_SOURCE
            elif key in DERIVED_OVER and self.accepted and getattr(self, DERIVED_OVER[key]):
                kinds[key] = DERIVED_SOURCE
            else:
                kinds[key] = RECORDED_SOURCE
        return kinds

    def to_json(self) -> dict[str, Any]:
        """A plain dict for the ``oracles`` block: None where a figure is not recorded."""
        rates = self.per_position_rate
        return {
            "name": self.name,
            "kind": self.kind,
            "population": self.population,
            "population_detail": self.population_detail,
            "output_throughput_tok_s": finite_or_none(self.output_throughput_tok_s),
            "steps": self.steps,
            "proposed": self.proposed,
            "accepted": self.accepted,
            "accept_rate": finite_or_none(self.accept_rate),
            "mean_acceptance_length": finite_or_none(self.mean_acceptance_length),
            "per_position": None if self.per_position is None else list(self.per_position),
            "per_position_rate": None if rates is None else [finite_or_none(r) for r in rates],
            "per_position_rate_conditional": (
                None if rates is None else formulas.per_position_conditional(list(rates))
            ),
            "completion_tokens_per_step": finite_or_none(self.completion_tokens_per_step),
            "verify_steps_per_s": finite_or_none(self.verify_steps_per_s),
            "approximate": (
                {
                    "bounds": dict(self.bounds),
                    "accept_rate": finite_or_none(self.accept_rate_bound),
                    "mean_acceptance_length": finite_or_none(self.mean_acceptance_length_bound),
                }
                if self.bounds
                else None
            ),
            "sources": dict(self.sources),
            "source_kinds": self.source_kinds(),
            "notes": list(self.notes),
            **(
                {} if self.draft_overhead is None else {"draft_overhead": dict(self.draft_overhead)}
            ),
        }


def finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return value


def _ratio_bound(
    numerator: int, numerator_bound: float, denominator: int, denominator_bound: float
) -> float:
    """The most ``n/d`` can move when n and d each move by up to their bounds."""
    centre = numerator / denominator
    corners = [
        (numerator + dn) / (denominator + dd)
        for dn, dd in itertools.product(
            (-numerator_bound, numerator_bound), (-denominator_bound, denominator_bound)
        )
        if denominator + dd > 0
    ]
    if len(corners) < 4:
        return math.inf
    return max(abs(corner - centre) for corner in corners)


def arm_from_counts(
    name: str,
    kind: str,
    *,
    tok_s: float | None = None,
    steps: int | None = None,
    proposed: int | None = None,
    accepted: int | None = None,
    per_position: Sequence[int] | None = None,
    completion_tokens_per_step: float | None = None,
    mean_acceptance_length: float | None = None,
    accept_rate: float | None = None,
    sources: Mapping[str, str] | None = None,
    notes: Iterable[str] = (),
    where: str = "<input>",
    labels: Mapping[str, str] | None = None,
    population: str | None = None,
    population_detail: str = "",
    bounds: Mapping[str, float] | None = None,
) -> ArmFigures:
    """Check the counts against each other and derive the rates; the one way to build figures.

    ``mean_acceptance_length`` and ``accept_rate`` are given directly only by inputs that carry
    the ratio without its counts (SGLang's ``accept_length`` from ``bench_serving``); with the
    counts they are derived here. ``bounds`` are the largest errors of rounded counts; checks
    then refuse only what no count within the bounds could explain.

    Raises RefusedError when the counts contradict each other and InputError when a value is
    not a count or not a finite positive rate.
    """
    src = dict(sources or {})
    names = dict(labels or {})
    slack = {key: float(value) for key, value in (bounds or {}).items() if value}
    label = count_labels(names)
    counts = {"accepted": accepted, "proposed": proposed, "steps": steps}
    check_counts(counts, label, where)
    rates = {
        "tok_s": tok_s,
        "completion_tokens_per_step": completion_tokens_per_step,
        "mean_acceptance_length": mean_acceptance_length,
        "accept_rate": accept_rate,
    }
    check_rates(rates, names, src.get("tok_s", "throughput"), where)
    check_together(counts, slack, label, where)
    per_pos = checked_per_position(per_position, counts, slack, label, where)
    accept_rate, rate_bound = _from_counts(
        "accept_rate", accept_rate, "proposed", formulas.accept_rate, "A/P",
        counts=counts, slack=slack, names=names, src=src, where=where,
    )  # fmt: skip
    mean_acceptance_length, length_bound = _from_counts(
        "mean_acceptance_length", mean_acceptance_length, "steps",
        formulas.mean_acceptance_length, "1 + A/S",
        counts=counts, slack=slack, names=names, src=src, where=where,
    )  # fmt: skip
    steps_per_s = _steps_per_s(tok_s, mean_acceptance_length, completion_tokens_per_step, src)
    for key, figure in (
        ("tok_s", tok_s),
        ("steps", steps),
        ("proposed", proposed),
        ("accepted", accepted),
        ("per_position", per_pos),
        ("completion_tokens_per_step", completion_tokens_per_step),
    ):
        if figure is None:
            src.setdefault(key, "not recorded")
    all_notes = list(notes)
    if slack:
        all_notes.append(_approximate_note(slack, rate_bound, length_bound))
    return ArmFigures(
        name=name,
        kind=kind,
        output_throughput_tok_s=None if tok_s is None else float(tok_s),
        steps=steps,
        proposed=proposed,
        accepted=accepted,
        accept_rate=accept_rate,
        mean_acceptance_length=mean_acceptance_length,
        per_position=per_pos,
        completion_tokens_per_step=(
            None if completion_tokens_per_step is None else float(completion_tokens_per_step)
        ),
        verify_steps_per_s=steps_per_s,
        sources=src,
        notes=tuple(all_notes),
        population=population,
        population_detail=population_detail,
        bounds=slack,
        accept_rate_bound=rate_bound,
        mean_acceptance_length_bound=length_bound,
    )


def _steps_per_s(
    tok_s: float | None,
    mean_acceptance_length: float | None,
    completion_tokens_per_step: float | None,
    src: dict[str, str],
) -> float | None:
    """Verify steps per second: tok/s over the tokens a step emits, in 1 + A/S or SGLang's
    unit; says in ``src`` which, or why none."""
    if tok_s is not None and mean_acceptance_length is not None:
        src["verify_steps_per_s"] = "tok/s / (1 + A/S)"
        return tok_s / mean_acceptance_length
    if tok_s is not None and completion_tokens_per_step is not None:
        src["verify_steps_per_s"] = "tok/s / SGLang len* (SGLang's unit)"
        return tok_s / completion_tokens_per_step
    src["verify_steps_per_s"] = _missing_because(
        ("tok/s", tok_s), ("mean acceptance length", mean_acceptance_length)
    )
    return None


# A recorded ratio is printed by its engine with a few decimals; within this it agrees.
_RECORDED_RATIO_SLACK = 0.006


def _from_counts(
    figure: str,
    given: float | None,
    denominator: str,
    formula: Callable[[int, int], float | None],
    formula_text: str,
    *,
    counts: Mapping[str, int | None],
    slack: Mapping[str, float],
    names: Mapping[str, str],
    src: dict[str, str],
    where: str,
) -> tuple[float | None, float | None]:
    """A ratio of A over ``denominator`` (P or S): from the counts when they are there (and
    held to the figure the input gives, within the counts' rounding), else the given figure
    as recorded, else none. Returns it with its bound from rounded counts (or None), and
    says in ``src`` where it came from."""
    accepted, divisor = counts["accepted"], counts[denominator]
    if accepted is not None and divisor:
        derived = formula(accepted, divisor)
        assert derived is not None  # a positive divisor
        src[figure] = formula_text
        bound = None
        if slack.get("accepted") or slack.get(denominator):
            bound = _ratio_bound(
                accepted, slack.get("accepted", 0.0), divisor, slack.get(denominator, 0.0)
            )
        _agree(given, derived, bound, names.get(figure), formula_text, where)
        return derived, bound
    if given is not None:
        src.setdefault(figure, names.get(figure, "as recorded"))
    else:
        src.setdefault(figure, _missing_because(("accepted", accepted), (denominator, divisor)))
    return given, None


def _agree(
    given: float | None,
    derived: float,
    bound: float | None,
    given_label: str | None,
    formula: str,
    where: str,
) -> None:
    if given is None:
        return
    allowed = max(_RECORDED_RATIO_SLACK, 1e-9 * abs(derived)) + (bound or 0.0)
    if abs(given - derived) > allowed:
        raise RefusedError(
            f"{where}: {given_label or 'the recorded ratio'} = {given!r} but the counts give "
            f"{formula} = {derived:.6g}: the record mixes runs or units; take it again"
        )


def _approximate_note(
    slack: Mapping[str, float], rate_bound: float | None, length_bound: float | None
) -> str:
    letters = {"steps": "S", "proposed": "P", "accepted": "A"}
    parts = [f"{letters.get(key, key)} ± {value:g}" for key, value in slack.items()]
    derived = []
    if rate_bound is not None:
        derived.append(f"A/P ± {rate_bound * 100:.2g} points")
    if length_bound is not None:
        derived.append(f"1 + A/S ± {length_bound:.2g}")
    text = (
        "approximate: the engine printed these counters rounded, so the counts are within "
        + ", ".join(parts)
    )
    if derived:
        text += " and the ratios within " + ", ".join(derived)
    return text


def _missing_because(*inputs: tuple[str, object]) -> str:
    missing = [name for name, value in inputs if value is None]
    if missing:
        return "not recorded: no " + " and no ".join(missing)
    return "not recorded"
