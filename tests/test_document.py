"""The result document: built once from each stage's part, never changed after, and its JSON
held to the schema in docs/ (``docs/document.md``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import orjson
import pytest
from document_schema import SCHEMA, validate

from fold.api import fold_acceptance
from fold.cli import main
from fold.folding.document import Document
from fold.folding.leg_figures import NEEDS_STEP_LOG, STEP_ONLY, StepFigures
from fold.folding.result import FoldResult

ROOT = Path(__file__).resolve().parents[1]
ARM = str(ROOT / "fixtures" / "our-arm.json")
LOG = str(ROOT / "fixtures" / "steps.jsonl")
COUNTERS_ARM = str(ROOT / "fixtures" / "vllmcpp" / "our-arm.json")


@pytest.fixture(scope="module")
def document() -> Document:
    return fold_acceptance(ARM, [LOG], resamples=50)


def test_no_part_of_a_built_document_can_be_changed(document: Document):
    with pytest.raises(dataclasses.FrozenInstanceError):
        document.fold = document.fold  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        document.fold.legs = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        document.legs[0].counts = document.legs[0].counts  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        document.legs[0].counts.steps = 0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        document.warm.counts.accepted = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        document.legs[0].from_steps.windows[0].steps = 0  # type: ignore[union-attr,misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        document.counter_check.summary = ""  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        document.legs[1].from_steps.lines = 0  # type: ignore[union-attr,misc]


def test_the_fold_s_figures_are_read_on_the_fold_not_through_the_document(document: Document):
    # No forwarding: the fold's figures are the fold's, and an unknown name is an error.
    assert "__getattr__" not in vars(Document)
    assert document.fold.torn_lines == document.to_json()["torn_lines"]
    for name in ("torn_lines", "predicate", "files", "no_such_figure"):
        with pytest.raises(AttributeError):
            getattr(document, name)
    assert document.legs is document.fold.legs and document.warm is document.fold.warm


def test_figures_read_by_name_cannot_be_patched(document: Document):
    leg = document.legs[1]
    with pytest.raises(TypeError):
        leg["steps"] = 0  # type: ignore[index]
    with pytest.raises(TypeError):
        leg["requests"][0]["cadence"] = None
    with pytest.raises(TypeError):
        leg["requests"][0]["cadence"]["lines"] = 0
    with pytest.raises(TypeError):
        document.warm["cadence"]["lines"] = 0
    with pytest.raises(TypeError):
        document.fold.files[0]["lines"] = 0  # type: ignore[index]
    with pytest.raises((TypeError, AttributeError)):
        document.legs.append(leg)  # type: ignore[attr-defined]
    # and none of the attempts changed anything
    assert document.to_json() == fold_acceptance(ARM, [LOG], resamples=50).to_json()


def test_the_comparison_block_cannot_be_changed(document: Document):
    from fold.compare.comparison import compare
    from fold.inputs.arm import load_arm
    from fold.inputs.vs_arms import read_vs_arms

    oracles = read_vs_arms([f"o={ROOT / 'fixtures' / 'oracles' / 'vllm-scrapes.prom'}"], [])
    found = compare(document, oracles, 0.02, record=load_arm(ARM))
    before = found.to_json()
    with pytest.raises(TypeError):
        found.block["rows"][1]["accept_rate"] = 0.999
    assert found.to_json() == before


def test_a_comparison_makes_a_new_document(document: Document):
    class Compared:
        def to_json(self) -> dict:
            return {
                "rows": [],
                "gaps": {},
                "speed": {},
                "waterfalls": {},
                "step_figures": {"max_draft": 0, "windows": 0, "buckets_of": None, "beside": False},
            }

        def runs_json(self) -> None:
            return None

    compared = document.with_comparison(Compared())
    assert "comparison" in compared.to_json() and "comparison" not in document.to_json()
    assert compared.fold is document.fold


def test_step_figures_of_a_counted_leg_are_needs_a_step_log():
    """One definition: every field of the step figures is None in the JSON of a leg whose
    counts came without steps, and no other key is."""
    folded = fold_acceptance(COUNTERS_ARM, [], resamples=0)
    assert all(leg.from_steps is NEEDS_STEP_LOG for leg in folded.legs)
    assert tuple(field.name for field in dataclasses.fields(StepFigures)) == STEP_ONLY
    leg = folded.to_json()["legs"][0]
    # each request's row is in the sums file, not the JSON: the leg has its count instead
    step_only = set(STEP_ONLY) - {"requests"} | {"request_count", "lowest_request"}
    assert "requests" not in leg
    assert {name for name, value in leg.items() if value is None} >= step_only
    assert leg["steps"] > 0 and leg["accept_rate"] is not None
    stepped = fold_acceptance(COUNTERS_ARM, [str(ROOT / "fixtures/vllmcpp/steps.jsonl")])
    assert set(stepped.to_json()["legs"][0]) == set(leg)


def test_the_document_is_what_orjson_writes_of_it(document: Document, tmp_path: Path, capsys):
    out = tmp_path / "fold.json"
    assert main([ARM, LOG, "--bootstrap", "50", "--json", str(out)]) == 0
    capsys.readouterr()
    written = orjson.loads(out.read_bytes())
    assert written["format"] == "fold-acceptance/5"
    assert written == orjson.loads(orjson.dumps(document.to_json()))
    validate(out.read_bytes())


def _valid() -> dict:
    return orjson.loads(orjson.dumps(fold_acceptance(ARM, [LOG], resamples=0).to_json()))


BROKEN = {
    "a missing key": lambda d: d.pop("legs"),
    "an unknown top-level key": lambda d: d.update(extra=1),
    "the old format": lambda d: d.update(format="fold-acceptance/1"),
    "the old name of the comparison": lambda d: d.update(oracles={"rows": [], "gaps": {}}),
    "a count as a string": lambda d: d["legs"][0].update(steps="3"),
    "a null count": lambda d: d["warm"].update(steps=None),
    "an unknown key in a leg": lambda d: d["legs"][0].update(trace=None),
    "an interval of one bound": lambda d: d["warm"].update(accept_rate_ci=[0.5]),
    "a request's rows back in a leg": lambda d: d["legs"][1].update(requests=[]),
    "a leg without its request count": lambda d: d["legs"][1].pop("request_count"),
    "a writer without its lost lines": lambda d: d["writers"][0].pop("lost"),
    "the windows an object each (format 4)": lambda d: d["legs"][1].update(
        windows=[
            dict(zip(d["legs"][1]["windows"], part, strict=True))
            for part in zip(*d["legs"][1]["windows"].values(), strict=True)
        ]
    ),
    "the shape pools an object each (format 4)": lambda d: d["legs"][1]["window_pools"].update(
        shape=[{"steps": 1, "proposed": 2, "accepted": 1, "accept_rate": 0.5}]
    ),
    "a windows figure the format has not": lambda d: d["legs"][1]["windows"].update(lines=[]),
    "a window's steps a fraction": lambda d: d["legs"][1]["windows"]["steps"].append(1.5),
    "windows without their rates": lambda d: d["legs"][1]["windows"].pop("accept_rate"),
    "more than 10 shape pools": lambda d: d["legs"][1]["window_pools"]["shape"].update(
        steps=[1] * 11
    ),
    "more than 128 chart pools": lambda d: d["legs"][1]["window_pools"]["chart"].update(
        accept_rate=[0.5] * 129
    ),
}


@pytest.mark.parametrize("case", BROKEN, ids=list(BROKEN))
def test_a_document_that_breaks_the_schema_is_caught(case: str):
    document = _valid()
    validate(document)
    BROKEN[case](document)
    with pytest.raises(jsonschema.ValidationError):
        validate(document)


def test_the_suite_validates_what_to_json_returns(monkeypatch):
    """The conftest hook runs: a fold whose JSON broke the schema would fail its test."""
    built = FoldResult.to_json

    def broken(self: FoldResult) -> dict:
        return {**built(self), "stray": True}

    monkeypatch.setattr(FoldResult, "to_json", broken)
    with pytest.raises(jsonschema.ValidationError, match="stray"):
        fold_acceptance(ARM, [LOG], resamples=0).to_json()


def test_the_schema_is_a_valid_draft_2020_12_schema():
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["format"] == {"const": "fold-acceptance/5"}
    assert schema["additionalProperties"] is False
