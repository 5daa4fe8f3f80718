"""The four speculative-decoding counters vLLM and llama.cpp share, under their prefixes.

``spec_decode_num_drafts`` (S), ``spec_decode_num_draft_tokens`` (P),
``spec_decode_num_accepted_tokens`` (A) and ``spec_decode_num_accepted_tokens_per_pos``
(label ``position``), with or without the ``_total`` a scrape adds. Read from a mapping
(``get_metrics()``-style records) or from scrapes; series of several engines are summed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fold.errors import InputError, RefusedError
from fold.inputs import limits
from fold.inputs.oracles.count_checks import ORACLE_COUNT_WHAT_TO_DO
from fold.inputs.oracles.figures import ArmFigures, arm_from_counts
from fold.inputs.oracles.prometheus import Sample, Scrape, SeriesKey
from fold.inputs.oracles.source import count

DRAFTS = "spec_decode_num_drafts"
DRAFT_TOKENS = "spec_decode_num_draft_tokens"
ACCEPTED = "spec_decode_num_accepted_tokens"
PER_POS = "spec_decode_num_accepted_tokens_per_pos"
BASES = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS)
FIGURES = {"steps": DRAFTS, "proposed": DRAFT_TOKENS, "accepted": ACCEPTED, "per_position": PER_POS}

Bound = Callable[[Sample], float]
"""How far a sample's true count may be from its printed value (0 when printed exactly)."""


def exact(_sample: Sample) -> float:
    return 0.0


@dataclass
class CounterValues:
    """Counter values by base name; ``None`` = present but not recorded (a ``null``)."""

    values: dict[str, int | list[int] | None] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # base -> name as written
    bounds: dict[str, float] = field(default_factory=dict)  # base -> largest rounding error
    notes: list[str] = field(default_factory=list)


def base_name(key: str, prefix: str) -> str | None:
    if not key.startswith(prefix):
        return None
    base = key[len(prefix) :]
    if base.endswith("_total"):
        base = base[: -len("_total")]
    return base if base in BASES else None


def mentions(keys: Any, prefix: str) -> bool:
    return any(isinstance(k, str) and base_name(k, prefix) for k in keys)


def _per_pos_list(value: Any, where: str) -> list[int]:
    if isinstance(value, list):
        return [count(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        by_pos: dict[int, int] = {}
        for key, item in value.items():
            pos = limits.decimal_count(str(key), where, "position", "give {position: count}")
            if pos in by_pos:
                raise InputError(f"{where}: position {pos} is given twice")
            by_pos[pos] = count(item, f"{where}[{key!r}]")
        return positions_to_list(by_pos, where)
    wanted = "a list of counts, a {position: count} object, or null (not recorded)"
    raise limits.WrongKind(where, "", value, wanted, "give the counts by position")


def positions_to_list(by_pos: Mapping[int, int], where: str) -> list[int]:
    if sorted(by_pos) != list(range(len(by_pos))):
        raise InputError(
            f"{where}: positions {sorted(by_pos)} are not 0..{len(by_pos) - 1} without gaps"
        )
    return [by_pos[i] for i in range(len(by_pos))]


def from_mapping(mapping: Mapping[str, Any], prefix: str, where: str) -> CounterValues:
    """``{"vllm:spec_decode_num_drafts": 310, ...}`` (``get_metrics()`` names or ``_total``)."""
    counts = CounterValues()
    for key, value in mapping.items():
        base = base_name(key, prefix) if isinstance(key, str) else None
        if base is None:
            continue
        if base in counts.names:
            raise InputError(
                f"{where}: both {counts.names[base]} and {key} are given; keep one of them"
            )
        counts.names[base] = key
        field_where = f"{where}.{key}"
        if value is None:
            counts.values[base] = None
        elif base == PER_POS:
            counts.values[base] = _per_pos_list(value, field_where)
        else:
            counts.values[base] = count(value, field_where)
    return counts


def delta(before: CounterValues, after: CounterValues, where: str) -> CounterValues:
    """``after - before`` per counter; a counter only in ``after`` counts from 0."""
    only_before = sorted(before.names[b] for b in set(before.values) - set(after.values))
    if only_before:
        raise RefusedError(
            f"{where}: {', '.join(only_before)} are in the before snapshot but not after: the "
            "snapshots come from different servers; take both from one"
        )
    out = CounterValues(names=dict(after.names))
    for base, after_value in after.values.items():
        before_value = before.values.get(base, 0 if not isinstance(after_value, list) else [])
        name = after.names[base]
        if after_value is None or before_value is None:
            out.values[base] = None
            continue
        if base not in before.values:
            out.notes.append(f"{name} is not in the before snapshot: counted from 0")
        if isinstance(after_value, list):
            assert isinstance(before_value, list)
            if len(before_value) > len(after_value):
                raise RefusedError(
                    f"{where}: {name} has {len(before_value)} positions before and "
                    f"{len(after_value)} after; take both snapshots from one server"
                )
            padded = before_value + [0] * (len(after_value) - len(before_value))
            diffs = [a - b for a, b in zip(after_value, padded, strict=True)]
            for pos, diff in enumerate(diffs):
                if diff < 0:
                    refuse_decrease(where, f"{name}[{pos}]", padded[pos], after_value[pos])
            out.values[base] = diffs
        else:
            assert isinstance(before_value, int)
            if after_value < before_value:
                refuse_decrease(where, name, before_value, after_value)
            out.values[base] = after_value - before_value
    return out


def refuse_decrease(where: str, name: str, before: float, after: float) -> None:
    raise RefusedError(
        f"{where}: {name} went down from {before:g} (before) to {after:g} (after): the counter "
        "was reset between the scrapes (server restart) or before/after are swapped; re-run "
        "with both scrapes around one run of one server process"
    )


def from_scrapes(
    scrapes: Sequence[Scrape], prefix: str, where: str, bound: Bound = exact
) -> CounterValues:
    """One scrape's counters, or the difference of two, series by series then summed.

    Series of one counter with other labels (``engine="0"``, ``engine="1"``) are summed; per
    position they are grouped by ``position``. A series missing from the first scrape (a
    position not drafted yet, an engine that started later) counts from 0.
    """
    after = _series(scrapes[-1], prefix)
    before = _series(scrapes[0], prefix) if len(scrapes) == 2 else {}
    counts = CounterValues()
    missing = [key for key in after if len(scrapes) == 2 and key not in before]
    gone = [key for key in before if key not in after]
    if gone:
        name, labels = gone[0]
        raise RefusedError(
            f"{where}: {name}{_labels_text(labels)} is in the first scrape but not the second: "
            "the scrapes come from different servers or a restart; take both from one server"
        )
    per_pos: dict[int, int] = {}
    for key, sample in after.items():
        name, labels = key
        base = base_name(name, prefix)
        assert base is not None
        if base in counts.names and counts.names[base] != name:
            raise InputError(f"{where}: both {counts.names[base]} and {name} appear")
        counts.names[base] = name
        swhere = f"{where}:{sample.line} {name}{_labels_text(labels)}"
        value = _whole(sample, swhere)
        slack = bound(sample)
        previous = before.get(key)
        if previous is not None:
            pwhere = f"{where}:{previous.line} {name}{_labels_text(labels)}"
            before_value = _whole(previous, pwhere)
            slack += bound(previous)
            if value < before_value and before_value - value > slack:
                refuse_decrease(where, f"{name}{_labels_text(labels)}", before_value, value)
            value = max(value - before_value, 0) if slack else value - before_value
        if slack:
            counts.bounds[base] = counts.bounds.get(base, 0.0) + slack
        if base == PER_POS:
            position = dict(labels).get("position")
            if position is None:
                raise InputError(f"{swhere}: a per-position sample without a position label")
            pos = limits.decimal_count(
                position, swhere, "position label", "give the scrape as served"
            )
            per_pos[pos] = per_pos.get(pos, 0) + value
        else:
            summed = counts.values.get(base)  # a scalar counter: only PER_POS holds a list
            counts.values[base] = (summed if isinstance(summed, int) else 0) + value
    if per_pos:
        counts.values[PER_POS] = positions_to_list(per_pos, f"{where}: {counts.names[PER_POS]}")
    if missing:
        counts.notes.append(f"not in the first scrape, counted from 0: {_describe(missing)}")
    return counts


def _describe(series: Sequence[SeriesKey]) -> str:
    """``NAME positions 0-6`` or ``NAME{engine="1"}``, one entry per metric name."""
    by_name: dict[str, list[tuple[tuple[str, str], ...]]] = {}
    for name, labels in series:
        others = tuple(item for item in labels if item[0] != "position")
        mine = tuple(item for item in labels if item[0] == "position")
        by_name.setdefault(name + _labels_text(others), []).append(mine or labels)
    parts = []
    for name, label_sets in sorted(by_name.items()):
        positions = sorted(
            int(dict(labels)["position"])
            for labels in label_sets
            if dict(labels).get("position", "").isdigit()
        )
        if positions and len(positions) == len(label_sets):
            span = (
                f"{positions[0]}-{positions[-1]}"
                if positions == list(range(positions[0], positions[-1] + 1)) and len(positions) > 1
                else ", ".join(map(str, positions))
            )
            parts.append(f"{name} position{'s' if len(positions) > 1 else ''} {span}")
        else:
            parts.extend(name + _labels_text(labels) for labels in label_sets)
    return "; ".join(parts)


def _series(scrape: Scrape, prefix: str) -> dict[SeriesKey, Sample]:
    return {
        key: sample
        for key, sample in scrape.samples.items()
        if not key[0].endswith("_created") and base_name(key[0], prefix)
    }


def _labels_text(labels: tuple[tuple[str, str], ...]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}" if labels else ""


def _whole(sample: Sample, where: str) -> int:
    if not math.isfinite(sample.value):
        raise limits.WrongKind(
            where, "count", None, "an integer", ORACLE_COUNT_WHAT_TO_DO, written=sample.text
        )
    return count(round(sample.value) if "e" in sample.text.lower() else sample.value, where)


def figures(
    name: str,
    kind: str,
    counts: CounterValues,
    how: str,
    where: str,
    *,
    tok_s: float | None,
    tok_s_source: str,
    population: str,
    population_detail: str,
    notes: Sequence[str] = (),
) -> ArmFigures:
    prefix = {"vllm": "vllm:", "llamacpp": "llamacpp:"}[kind]
    sources = {"tok_s": tok_s_source}
    values: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for figure, base in FIGURES.items():
        value = counts.values.get(base)
        if base in counts.values and value is not None:
            values[figure] = value
            labels[figure] = f"{counts.names[base]} {how}".strip()
            sources[figure] = labels[figure]
        else:
            values[figure] = None
            sources[figure] = (
                f"not recorded: {counts.names[base]} is null"
                if base in counts.values
                else f"not recorded: no {prefix}{base} counter"
            )
    sources["completion_tokens_per_step"] = "not recorded: SGLang's unit only"
    bounds = {
        figure: counts.bounds[base] for figure, base in FIGURES.items() if base in counts.bounds
    }
    return arm_from_counts(
        name,
        kind,
        tok_s=tok_s,
        steps=values["steps"],
        proposed=values["proposed"],
        accepted=values["accepted"],
        per_position=values["per_position"],
        sources=sources,
        notes=[*notes, *counts.notes],
        where=where,
        labels=labels,
        population=population,
        population_detail=population_detail,
        bounds={k: v for k, v in bounds.items() if k != "per_position"},
    )
