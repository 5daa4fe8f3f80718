"""Each arm's figures that only steps give, in one shape for every arm that has steps: per
position in its three forms, the histogram, and the shape within a leg, each with its 95%
interval over the arm's legs and requests (``step_figures`` in each comparison row).

The point figures are the fold's own (``FoldResult``: ours, or an oracle's steps folded by the
same code, ``fold.folding.oracle_steps``); an oracle known only by its requests' histograms
(vLLM's summary level) gets the ones its histograms give, by the same formulas
(``fold.inputs.acceptance``), and "not recorded" for the rest. Every figure is a ratio of sums,
so its interval is drawn by the project's bootstrap (``ratio_replicates``) from per-unit sums:
a request where the input keeps each request's steps (an oracle's), else a leg (ours: the fold
keeps each leg's histogram, not each request's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fold.folding.leg_figures import LegFigures, Named, PooledFigures, plain
from fold.folding.result import ENGINE_TRACE, ORACLE_STEPS, STEP_LOG, FoldResult
from fold.folding.uncertainty import Interval, ratio_replicates
from fold.inputs import acceptance
from fold.inputs.acceptance import Counts
from fold.inputs.leg_sums import Leg
from fold.inputs.oracles.request_steps import DETAILED, OracleSteps

# Where an arm's step figures came from (``step_figures.source``), a code: our step log or the
# engine's trace (the fold's ``step_source``), an oracle's steps per request in order (its
# detailed level), or only its requests' histograms (vLLM's summary level). ``source_text``
# beside it is the sentence: the fold's words for ours, the oracle reader's for an oracle's.
ORACLE_HISTOGRAMS = "oracle_histograms"
SOURCES = (STEP_LOG, ENGINE_TRACE, ORACLE_STEPS, ORACLE_HISTOGRAMS)
BY_REQUEST = "the requests within each drawn leg (two stages)"
BY_LEG = "the legs (the fold keeps each leg's histogram, not each request's)"
NOT_RECORDED_PROPOSED = (
    "not recorded: vLLM's summary level keeps no step's drafts, so which positions were "
    "drafted is unknown"
)
NOT_RECORDED_WINDOWS = "not recorded: the summary level keeps no step order"
NOT_RECORDED_REQUESTS = (
    "not recorded: made by the fold of an arm's steps, and the summary level has none"
)
UNPLACED = (
    "{0} of the requests' {1} output tokens after the first came from steps the engine kept no "
    "record of (none drafted): by output position counts the recorded steps' tokens only, so "
    "a position is a lower bound"
)
WARM_LEGS_ONLY = "not made: a figure of the warm legs only"
MAX_INTERVAL_POSITIONS = 64
"""Intervals are drawn for this many draft positions (and histogram entries) at most: each costs
a bootstrap figure, and no drafter in use drafts more than a few dozen tokens a step. Past it
an interval reads null, and the block says so."""
PAST_INTERVAL_POSITIONS = (
    f"not recorded past position {MAX_INTERVAL_POSITIONS}: intervals are drawn for the first "
    f"{MAX_INTERVAL_POSITIONS} positions"
)


@dataclass(frozen=True)
class Unit:
    """One resampling unit's step sums: its steps counted by drafts accepted (``[j]``, j = 0 ..
    k) and, where known, by drafts proposed."""

    by_accepted: Sequence[int]
    by_proposed: Sequence[int] | None


def _padded(counts: Sequence[int], size: int) -> list[int]:
    return [*counts, *([0] * (size - len(counts)))]


def _columns(unit: Unit, k: int) -> dict[str, int]:
    """A unit's sums as bootstrap columns: ``s`` (steps), ``h<j>``, ``a<i>`` (steps that
    accepted position i) and ``d<i>`` (steps that drafted it)."""
    by_accepted = _padded(unit.by_accepted, k + 1)
    found = {"s": sum(by_accepted)}
    found |= {f"h{j}": count for j, count in enumerate(by_accepted)}
    accepted = acceptance.accepted_at_position(by_accepted)
    found |= {f"a{i}": count for i, count in enumerate(accepted)}
    if unit.by_proposed is not None:
        by_proposed = _padded(unit.by_proposed, k + 1)
        drafted = acceptance.accepted_at_position(by_proposed)
        found |= {f"d{i}": count for i, count in enumerate(drafted)}
    return found


def _ratios(k: int, proposed: bool) -> dict[str, tuple[str, str]]:
    ratios = {f"per_position.{i}": (f"a{i}", "s") for i in range(k)}
    ratios |= {
        f"per_position_conditional.{i}": (f"a{i}", f"a{i - 1}" if i else "s") for i in range(k)
    }
    ratios |= {f"histogram_share.{j}": (f"h{j}", "s") for j in range(k + 1)}
    if proposed:
        ratios |= {f"per_position_of_proposed.{i}": (f"a{i}", f"d{i}") for i in range(k)}
    return ratios


def _pair(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [interval[0], interval[1]]


def _intervals(
    units: Sequence[Sequence[Unit]], k: int, resamples: int, seed: int | Sequence[int]
) -> dict[str, list[list[float] | None]] | None:
    """Per figure, each position's interval; None without resamples."""
    if resamples < 1 or not units:
        return None
    proposed = all(unit.by_proposed is not None for leg in units for unit in leg)
    drawn = min(k, MAX_INTERVAL_POSITIONS)
    ratios = _ratios(drawn, proposed)
    if drawn < k:
        ratios[f"histogram_share.{drawn}"] = (f"h{drawn}", "s")
    names = sorted({name for pair in ratios.values() for name in pair})
    columns = [[_columns(unit, k) for unit in leg] for leg in units]
    legs = [
        Leg(requests={name: [unit.get(name, 0) for unit in leg] for name in names})
        for leg in columns
    ]
    replicates = ratio_replicates(legs, ratios, resamples, seed)
    found: dict[str, list[list[float] | None]] = {}
    for figure, size in (
        ("per_position", k),
        ("per_position_conditional", k),
        ("per_position_of_proposed", k),
        ("histogram_share", k + 1),
    ):
        if f"{figure}.0" in replicates.figures:
            found[figure] = [
                _pair(replicates.interval(f"{figure}.{i}"))
                if f"{figure}.{i}" in replicates.figures
                else None
                for i in range(size)
            ]
    return found


def _window_shape(
    legs: Sequence[LegFigures], resamples: int, seed: int | Sequence[int]
) -> list[dict[str, Any]]:
    """The shape within a leg: window w of every leg (its w-th run of the fold's window steps)
    pooled over the legs, A/P of the sums, with its interval over the legs."""
    rows = []
    count = max((len(leg["windows"]) for leg in legs), default=0)
    for w in range(count):
        present = [leg["windows"][w] for leg in legs if len(leg["windows"]) > w]
        rows.append(
            {
                "window": w,
                "legs": len(present),
                **Counts.total(map(Counts.of, present)),
                "accept_rate_ci": None,
            }
        )
    if resamples >= 1 and count and len(legs) >= 2:
        units = [
            Leg(
                requests={
                    **{f"a{w}": [_window(leg, w, "accepted")] for w in range(count)},
                    **{f"p{w}": [_window(leg, w, "proposed")] for w in range(count)},
                }
            )
            for leg in legs
        ]
        replicates = ratio_replicates(
            units, {f"w{w}": (f"a{w}", f"p{w}") for w in range(count)}, resamples, seed
        )
        for row in rows:
            row["accept_rate_ci"] = _pair(replicates.interval(f"w{row['window']}"))
    return rows


def _window(leg: LegFigures, w: int, key: str) -> int:
    return leg["windows"][w][key] if len(leg["windows"]) > w else 0


def _shares(histogram: Sequence[int]) -> list[float | None]:
    steps = sum(histogram)
    return [count / steps if steps else None for count in histogram]


def _block(
    *,
    source: str,
    source_text: str,
    population: str,
    legs: int,
    requests: int,
    pooled: Named,
    k: int,
    intervals: dict[str, list[list[float] | None]] | None,
    over: str,
    windows: list[dict[str, Any]] | None,
    window_steps: int | None,
    flags: dict[str, list[int]],
    not_recorded: dict[str, str],
) -> dict[str, Any]:
    histogram = _padded(pooled["histogram"], k + 1)
    block: dict[str, Any] = {
        "source": source,
        "source_text": source_text,
        "population": population,
        "legs": legs,
        "requests": requests,
        "steps": sum(histogram),
        "max_draft": k,
        "interval_over": None if intervals is None else over,
    }
    for figure in ("per_position", "per_position_conditional", "per_position_of_proposed"):
        value = pooled.get(figure)
        block[figure] = None if value is None else list(value)
        block[f"{figure}_ci"] = None if intervals is None else intervals.get(figure)
    block["histogram"] = histogram
    block["histogram_share"] = _shares(histogram)
    block["histogram_share_ci"] = None if intervals is None else intervals.get("histogram_share")
    block["window_steps"] = window_steps
    block["windows"] = windows
    block["flags"] = flags
    # The fold's own blocks, as its warm fold has them (null in a fold of all legs, and where
    # the arm has no steps in order).
    for key in ("per_request", "by_output_position"):
        found = pooled.get(key)
        block[key] = None if found is None else plain(found)
    if intervals is not None and k > MAX_INTERVAL_POSITIONS:
        not_recorded = {**not_recorded, "intervals": PAST_INTERVAL_POSITIONS}
    block["not_recorded"] = not_recorded
    return block


def _flags(legs: Sequence[LegFigures]) -> dict[str, list[int]]:
    return {
        flag: [leg["index"] for leg in legs if flag in leg.flags]
        for flag in ("collapse", "request collapse")
    }


def fold_step_figures(
    result: FoldResult,
    pooled: PooledFigures,
    population: str,
    *,
    steps: OracleSteps | None = None,
    resamples: int = 0,
    seed: int | Sequence[int] = 0,
) -> dict[str, Any] | None:
    """The step figures of a fold (ours, or an oracle's folded steps ``steps``) over the legs
    of ``pooled``; None for a fold without steps (the record's counters)."""
    if not result.from_log or pooled["histogram"] is None:
        return None
    chosen = set(pooled["legs"])
    legs = [leg for leg in result.legs if leg.index in chosen]
    k = max(len(pooled["histogram"]) - 1, 0)
    if steps is not None:
        units = [
            [_request_unit(request) for request in leg.requests]
            for leg in steps.legs
            if leg.index in chosen
        ]
        over = BY_REQUEST
    else:
        units = [[Unit(leg["histogram"], None)] for leg in legs]
        over = BY_LEG
    intervals = _intervals(units, k, resamples, seed)
    not_recorded = {}
    if intervals is not None and steps is None:
        not_recorded["per_position_of_proposed_ci"] = (
            "not recorded: the fold keeps each leg's rates by proposal, not its counts"
        )
    not_recorded |= _missing_blocks(result, pooled)
    if steps is not None and pooled.get("by_output_position") is not None:
        unplaced = _unplaced_tokens([leg for leg in steps.legs if leg.index in chosen])
        if unplaced[0]:
            not_recorded["positions"] = UNPLACED.format(*unplaced)
    return _block(
        source=result.step_source if steps is None else ORACLE_STEPS,
        source_text=result.step_source_text if steps is None else _oracle_text(steps),
        population=population,
        legs=len(legs),
        requests=sum(len(leg["requests"]) for leg in legs),
        pooled=pooled,
        k=k,
        intervals=intervals,
        over=over,
        windows=_window_shape(legs, resamples, seed),
        window_steps=result.window_steps,
        flags=_flags(legs),
        not_recorded=not_recorded,
    )


def _oracle_text(steps: OracleSteps) -> str:
    return f"{steps.source} ({steps.level})"


def _unplaced_tokens(legs: Sequence[Any]) -> tuple[int, int]:
    """Of the requests' output tokens after the first (sampled at prefill), those no recorded
    step emitted (decode steps that drafted nothing), and all of them."""
    unplaced = total = 0
    for leg in legs:
        for request in leg.requests:
            after_first = request.completion_tokens - 1
            total += after_first
            unplaced += after_first - sum(a + 1 for a in request.accepted)
    return unplaced, total


def _missing_blocks(result: FoldResult, pooled: PooledFigures) -> dict[str, str]:
    """Why a fold's per-request or by-position block is null, where it is."""
    found = {}
    for key in ("per_request", "by_output_position"):
        if pooled.get(key) is not None:
            continue
        if pooled is result.all:
            found[key] = WARM_LEGS_ONLY
    return found


def _request_unit(request: Any) -> Unit:
    """A request's steps counted as the fold counts them: drafted steps only (a step whose
    every draft a grammar invalidated verified none)."""
    pairs = [(a, d) for a, d in zip(request.accepted, request.drafted, strict=True) if d > 0]
    by_accepted: dict[int, int] = {}
    by_proposed: dict[int, int] = {}
    for accepted, drafted in pairs:
        by_accepted[accepted] = by_accepted.get(accepted, 0) + 1
        by_proposed[drafted] = by_proposed.get(drafted, 0) + 1
    k = len(request.histogram) - 1
    return Unit(acceptance.histogram(by_accepted, k), acceptance.histogram(by_proposed, k))


def summary_step_figures(
    steps: OracleSteps, population: str, *, resamples: int = 0, seed: int | Sequence[int] = 0
) -> dict[str, Any]:
    """The step figures an oracle's requests' histograms give (no steps: vLLM's summary
    level): per position unconditional and conditional, and the histogram."""
    warm = steps.warm_legs
    k = steps.max_draft
    histogram = [sum(r.histogram[j] for leg in warm for r in leg.requests) for j in range(k + 1)]
    per_position = acceptance.per_position(histogram, sum(histogram))
    units = [[Unit(request.histogram, None) for request in leg.requests] for leg in warm]
    return _block(
        source=ORACLE_HISTOGRAMS,
        source_text=_oracle_text(steps),
        population=population,
        legs=len(warm),
        requests=sum(len(leg.requests) for leg in warm),
        pooled={
            "histogram": histogram,
            "per_position": per_position,
            "per_position_conditional": acceptance.per_position_conditional(per_position),
            "per_position_of_proposed": None,
            "per_request": None,
            "by_output_position": None,
        },
        k=k,
        intervals=_intervals(units, k, resamples, seed),
        over=BY_REQUEST,
        windows=None,
        window_steps=None,
        flags={},
        not_recorded={
            "per_position_of_proposed": NOT_RECORDED_PROPOSED,
            "windows": NOT_RECORDED_WINDOWS,
            "per_request": NOT_RECORDED_REQUESTS,
            "by_output_position": NOT_RECORDED_WINDOWS,
        },
    )


def oracle_step_figures(
    steps: OracleSteps | None,
    fold: FoldResult | None,
    population: str,
    *,
    resamples: int = 0,
    seed: int | Sequence[int] = 0,
) -> dict[str, Any] | None:
    """An oracle arm's step figures: from its folded steps (detailed), its histograms
    (summary), or None when it is known only by totals."""
    if steps is None:
        return None
    if fold is None or steps.level != DETAILED:
        return summary_step_figures(steps, population, resamples=resamples, seed=seed)
    return fold_step_figures(
        fold, fold.warm, population, steps=steps, resamples=resamples, seed=seed
    )


def step_figures_extent(rows: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """How far the arms' step figures reach, set side by side (``comparison.step_figures``):
    ``rows`` are each arm row's name and its ``step_figures`` block (None without steps), in
    the comparison's order.

    ``max_draft``: the longest draft of any arm (the rows per position); ``windows``: the most
    windows of any arm; ``buckets_of``: the arm whose output-position buckets are the most
    (the bucket edges are fixed, so its buckets name the rows for every arm; the first of
    those with as many; None when no arm has them); ``beside``: whether at least two arms
    have step figures, so there is something to set beside ours."""
    found = [figures for _, figures in rows if figures]
    bucketed = [
        (name, len(figures["by_output_position"]["buckets"]))
        for name, figures in rows
        if figures and figures.get("by_output_position") is not None
    ]
    most = max((count for _, count in bucketed), default=None)
    return {
        "max_draft": max((figures["max_draft"] for figures in found), default=0),
        "windows": max((len(figures["windows"] or []) for figures in found), default=0),
        "buckets_of": next((name for name, count in bucketed if count == most), None),
        "beside": sum(figures is not None for _, figures in rows) >= 2,
    }
