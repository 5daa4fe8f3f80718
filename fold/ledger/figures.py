"""The figures a kept run's history is read from, taken from its JSON document.

One row per figure: our warm and all-legs folds' pooled figures with their 95% intervals,
their per-position rates (one row per draft position, counted from 1; the unconditional and
conditional rates with intervals drawn from the document's legs), and per compared arm
the gap's tok/s ratio and its two factors, and the speed factor measured through a run at our
acceptance where one measured it. The document itself is kept whole beside them;
these rows are what a history or a query over many ledgers needs without parsing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fold.errors import InputError
from fold.folding.position_intervals import position_intervals
from fold.inputs.limits import is_int, is_number
from fold.inputs.populations import ALL_LEGS, WARM_LEGS

DOCUMENT_FORMAT = "fold-acceptance/5"
DOCUMENT_FORMATS = ("fold-acceptance/3", "fold-acceptance/4", DOCUMENT_FORMAT)
"""Formats whose figures the ledger keeps: 4 moved the requests' rows out of the document and 5
holds a leg's windows by column, and the ledger keeps neither, so a saved format-3 or format-4
document is kept as it is."""
FOLDS = ("warm", "all")
FOLD_FIGURES = (
    "accept_rate",
    "mean_acceptance_length",
    "output_throughput_tok_s",
    "completion_tokens_per_step",
    "step_rate",
)
POSITION_FIGURES = ("per_position", "per_position_conditional", "per_position_of_proposed")
GAP_FIGURES = ("ratio", "acceptance_factor", "speed_factor", "measured_speed_factor")
"""The gap's modelled split, and the speed factor a run at our acceptance measured (kept as a
figure of its own: the modelled one is another figure whatever the verdict rests on)."""
REGRESSES = {
    "accept_rate": "lower",
    "mean_acceptance_length": "lower",
    "output_throughput_tok_s": "lower",
    "completion_tokens_per_step": "lower",
    "step_rate": "lower",
    "per_position": "lower",
    "per_position_conditional": "lower",
    "per_position_of_proposed": "lower",
    "ratio": "lower",
    "acceptance_factor": "lower",
    "speed_factor": "lower",
    "measured_speed_factor": "lower",
}
"""Which way a figure moves when the engine got worse, the boundary ``ledger --check`` holds
by default: ``lower`` (a fall is a regression: acceptance, tokens per step, throughput, steps
per second, our ratio and its factors against an oracle) or ``upper`` (a rise is: a time per
step). A figure added to the ledger names its direction here."""
_POPULATION_FOLD = {WARM_LEGS: "warm", ALL_LEGS: "all"}


@dataclass(frozen=True)
class FigureRow:
    """One figure of one run. ``position`` is set for a per-position rate, ``versus`` (the
    compared arm's name) for a gap figure; ``fold`` is the fold of ours it was taken over."""

    fold: str
    figure: str
    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    position: int | None = None
    versus: str | None = None


def check_document(document: Any) -> dict[str, Any]:
    """The run's JSON document, refused unless it is one this ledger keeps."""
    if not isinstance(document, dict) or "format" not in document:
        raise InputError("the run to keep is not a fold-acceptance JSON document")
    if document["format"] not in DOCUMENT_FORMATS:
        names = [repr(name) for name in DOCUMENT_FORMATS]
        kept = f"{', '.join(names[:-1])} and {names[-1]}"
        raise InputError(
            f"the run to keep is a {document['format']!r} document; this ledger keeps "
            f"{kept} documents (fold the run again with this fold-acceptance)"
        )
    return document


def figure_rows(document: dict[str, Any]) -> list[FigureRow]:
    """Every figure of the document that has a value; a figure that is None is left out."""
    rows: list[FigureRow] = []
    intervals = _position_intervals(document)
    for fold in FOLDS:
        block = document.get(fold) or {}
        for name in FOLD_FIGURES:
            row = _row(fold, name, block.get(name), block.get(f"{name}_ci"))
            if row is not None:
                rows.append(row)
        for name in POSITION_FIGURES:
            drawn = intervals.get((fold, name)) or []
            for position, rate in enumerate(block.get(name) or [], start=1):
                interval = drawn[position - 1] if position <= len(drawn) else None
                row = _row(fold, name, rate, interval, position=position)
                if row is not None:
                    rows.append(row)
    gaps = (document.get("comparison") or {}).get("gaps") or {}
    for versus, gap in gaps.items():
        population = (gap.get("populations") or {}).get("ours", WARM_LEGS)
        fold = _POPULATION_FOLD.get(population, "warm")
        measured = gap.get("measured") or {}
        for name in GAP_FIGURES:
            source, key = (
                (measured, "speed_factor") if name.startswith("measured_") else (gap, name)
            )
            row = _row(fold, name, source.get(key), source.get(f"{key}_ci"), versus=versus)
            if row is not None:
                rows.append(row)
    return rows


def _position_intervals(document: dict[str, Any]) -> dict[tuple[str, str], list]:
    """The per-position rates' 95% intervals (``fold.folding.position_intervals``), drawn from
    the document's legs with its own bootstrap's resamples and seed; none when the fold drew
    no intervals (``--bootstrap 0``) or a leg has no histogram (a fold of counters)."""
    drawn = document.get("bootstrap") or {}
    legs = document.get("legs") or []
    resamples, seed = drawn.get("resamples"), drawn.get("seed")
    if not is_int(resamples) or resamples < 1 or not is_int(seed) or not legs:
        return {}
    if any(not isinstance(leg.get("histogram"), list) for leg in legs):
        return {}
    return position_intervals(
        [leg["histogram"] for leg in legs], [bool(leg.get("warm")) for leg in legs],
        resamples, seed,
    )  # fmt: skip


def _row(
    fold: str,
    name: str,
    value: Any,
    interval: Any,
    *,
    position: int | None = None,
    versus: str | None = None,
) -> FigureRow | None:
    if not is_number(value):
        return None
    low, high = (interval[0], interval[1]) if _is_interval(interval) else (None, None)
    return FigureRow(fold, name, float(value), low, high, position, versus)


def _is_interval(interval: Any) -> bool:
    return (
        isinstance(interval, list | tuple)
        and len(interval) == 2
        and all(is_number(end) for end in interval)
    )
