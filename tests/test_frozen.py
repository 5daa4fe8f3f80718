"""The result document is read-only all the way down (docs/code.md, "The result document"):
no list, dict or set anywhere inside a built document or its comparison, whatever it holds (a
gate against oracles, another run of ours beside the main one, the per-request figures), and
no field can be set. The JSON form turns the views back into plain lists and dicts.
"""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from fold.api import fold_acceptance
from fold.compare.comparison import compare
from fold.compare.vs_arms import fold_vs_arms
from fold.folding.document import Document
from fold.folding.request_rows import RequestRows
from fold.inputs.arm import load_arm
from fold.inputs.vs_arms import read_vs_arms

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "fixtures" / "gate-example"
ORACLES = ROOT / "fixtures" / "oracles"
RUNS = ROOT / "fixtures" / "ours-vs-ours"
OPTIONS = {"resamples": 40, "seed": 7}


KNOWN_VALUES = (enum.Enum,)
"""Values the walk knows to be immutable besides those it walks: anything else is reported, so
a new kind of value in the document is looked at before it is let through."""


def mutable_places(value: Any, where: str = "$", seen: set[int] | None = None) -> list[str]:
    """Every place under ``value`` that holds a list, dict, set or a dataclass that is not
    frozen, walking dataclass fields, read-only views and tuples."""
    seen = set() if seen is None else seen
    if id(value) in seen or value is None or isinstance(value, (str, bytes, int, float)):
        return []
    seen.add(id(value))
    if isinstance(value, (list, dict, set)):
        return [f"{where}: {type(value).__name__}"]
    if isinstance(value, np.ndarray):
        return [f"{where}: a writable array"] if value.flags.writeable else []
    found: list[str] = []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not value.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            found.append(f"{where}: {type(value).__name__} is not frozen")
        for field in dataclasses.fields(value):
            found += mutable_places(getattr(value, field.name), f"{where}.{field.name}", seen)
    elif isinstance(value, MappingProxyType):
        for key, item in value.items():
            found += mutable_places(item, f"{where}[{key!r}]", seen)
    elif isinstance(value, tuple):
        for index, item in enumerate(value):
            found += mutable_places(item, f"{where}[{index}]", seen)
    elif isinstance(value, RequestRows):
        # Its polars table is never handed out, only copies (tests/test_request_rows.py).
        pass
    elif not isinstance(value, KNOWN_VALUES):
        found.append(f"{where}: a {type(value).__name__}, which the walk does not know")
    return found


@pytest.fixture(scope="module")
def gate() -> Document:
    arm = load_arm(GATE / "our-arm.json")
    document = fold_acceptance(arm, [str(GATE / "steps.jsonl")], **OPTIONS)
    specs = [f"vllm={ORACLES / 'vllm-gate-arm.json'}", f"sglang={ORACLES / 'sglang-legs.jsonl'}"]
    read = read_vs_arms(specs, [])
    arms = fold_vs_arms(read, main=arm, predicate="run > 1", fold_options=OPTIONS)
    return document.with_comparison(compare(document, arms, record=arm))


@pytest.fixture(scope="module")
def two_runs() -> Document:
    after, before = RUNS / "after", RUNS / "before"
    arm = load_arm(after / "our-arm.json")
    document = fold_acceptance(arm, [str(after / "steps.jsonl")], **OPTIONS)
    read = read_vs_arms([f"before={before / 'our-arm.json'}"], [f"before={before / 'steps.jsonl'}"])
    arms = fold_vs_arms(read, main=arm, predicate="run > 1", fold_options=OPTIONS)
    return document.with_comparison(compare(document, arms, record=arm))


@pytest.mark.parametrize("which", ["gate", "two_runs"])
def test_nothing_in_a_built_document_is_mutable(which: str, request):
    document = request.getfixturevalue(which)
    assert document.comparison is not None
    assert mutable_places(document) == []


def test_the_walk_finds_a_planted_mutable_value(gate: Document):
    assert gate.comparison is not None
    planted = dataclasses.replace(gate.comparison.gaps["vllm"], missing=["planted"])  # type: ignore[arg-type]
    assert mutable_places(planted) == ["$.missing: list"]
    assert mutable_places(MappingProxyType({"x": (1, {"y": 2})})) == ["$['x'][1]: dict"]
    assert mutable_places(MappingProxyType({"a": np.zeros(3)})) == ["$['a']: a writable array"]


def test_the_bootstraps_draws_cannot_be_changed_through_the_document(gate: Document):
    """The replicates are figures a later comparison reads (its intervals): writing to them
    through the document raised no error and changed the comparison's intervals."""
    draws = gate.fold.replicates["warm"].figures
    assert draws and all(not values.flags.writeable for values in draws.values())
    with pytest.raises(ValueError):
        next(iter(draws.values()))[:] = 0


def test_a_field_cannot_be_set_and_a_view_cannot_be_changed(two_runs: Document):
    comparison = two_runs.comparison
    assert comparison is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        comparison.rows = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        comparison.gaps["before"] = comparison.gaps["before"]  # type: ignore[index]
    runs = comparison.runs["before"]
    with pytest.raises(TypeError):
        runs.other_fold["legs"] = []  # type: ignore[index]
    assert isinstance(runs.per_position, tuple)


def test_the_json_form_is_plain(two_runs: Document):
    def kinds(value: Any) -> set[type]:
        if isinstance(value, dict):
            return {dict}.union(*(kinds(item) for item in value.values()))
        if isinstance(value, list):
            return {list}.union(*(kinds(item) for item in value))
        return {type(value)}

    assert not kinds(two_runs.to_json()) & {tuple, MappingProxyType}


def test_the_walk_reports_a_value_it_does_not_know():
    """A new kind of value in the document is reported, not let through unlooked-at."""

    class Holder:  # mutable, and no dataclass, mapping view or tuple
        pass

    assert mutable_places((1, Holder())) == ["$[1]: a Holder, which the walk does not know"]
    assert mutable_places(MappingProxyType({"a": (2.5, "x", None)})) == []
