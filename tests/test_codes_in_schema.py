"""Codes in the JSON, words beside them: the schema lists every code a step-figures block or a
matched check can hold, and the codes the modules make are the ones it lists.

The schema is read as a reader would (``docs/fold-acceptance-5.schema.json``); the codes are
the modules' own constants, and the documents are made by the command."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from fold.compare.arm_draws import (
    ACCEPTANCE_BASIS_TEXT,
    INTERVAL_BASES,
    MEASURED_BASES,
    STEP_RATE_BASES,
    basis_code,
)
from fold.compare.row_intervals import INTERVAL_NOTES, interval_note
from fold.compare.step_figures import SOURCES

ROOT = Path(__file__).resolve().parents[1]
DEFS = json.loads((ROOT / "docs" / "fold-acceptance-5.schema.json").read_text())["$defs"]


def _enum(node: dict) -> list[str]:
    """The codes a property lists: its ``enum``, or the ``enum`` of its non-null branch."""
    if "enum" in node:
        return node["enum"]
    (listed,) = [branch["enum"] for branch in node["anyOf"] if "enum" in branch]
    assert {"type": "null"} in node["anyOf"]
    return listed


def test_the_schema_lists_where_step_figures_came_from():
    block = DEFS["step_figures"]
    assert _enum(block["properties"]["source"]) == [
        "step_log",
        "engine_trace",
        "oracle_steps",
        "oracle_histograms",
    ]
    assert set(SOURCES) == set(_enum(block["properties"]["source"]))
    assert block["properties"]["source_text"] == {"type": "string"}
    assert {"source", "source_text"} <= set(block["required"])


def test_the_schema_lists_what_a_matched_check_rests_on():
    check = DEFS["matched_arm"]["properties"]
    acceptance = check["acceptance"]
    assert _enum(acceptance["properties"]["basis"]) == ["our_interval", "tolerance"]
    assert set(ACCEPTANCE_BASIS_TEXT) == {"our_interval", "tolerance"}
    assert {"basis", "basis_text"} <= set(acceptance["required"])
    assert _enum(check["measured_basis"]) == ["both_arms", "ours_only"] == list(MEASURED_BASES)
    assert _enum(check["step_rate_basis"]) == [
        "both_arms",
        "matched_run_only",
        "ordinary_run_only",
    ]
    assert list(STEP_RATE_BASES) == _enum(check["step_rate_basis"])
    required = set(DEFS["matched_arm"]["required"])
    assert {"measured_basis_text", "step_rate_basis_text"} <= required


@pytest.mark.parametrize(
    ("where", "code", "sentence"),
    [
        ("step_figures/properties/source", "oracle_histograms", "step log"),
        ("matched_arm/properties/acceptance/properties/basis", "tolerance", "--tolerance"),
        ("matched_arm/properties/measured_basis", "ours_only", "ours only"),
        ("matched_arm/properties/step_rate_basis", "matched_run_only", "m's legs only"),
        ("measured_split/properties/basis", "every_arm", "three arms"),
    ],
)
def test_a_sentence_where_a_code_goes_breaks_the_schema(where, code, sentence):
    """The lists are enforced, not only written down."""
    check = jsonschema.Draft202012Validator({"$ref": f"#/$defs/{where}", "$defs": DEFS})
    assert check.is_valid(code) and not check.is_valid(sentence)


def test_the_schema_lists_what_a_measured_splits_intervals_rest_on():
    split = DEFS["measured_split"]
    assert _enum(split["properties"]["basis"]) == ["every_arm", "some_arms", "no_arm"]
    assert list(INTERVAL_BASES) == _enum(split["properties"]["basis"])
    assert split["properties"]["basis_text"] == {"type": "string"}
    assert {"basis", "basis_text"} <= set(split["required"])


@pytest.mark.parametrize(
    ("every", "resampled", "code"),
    [
        (True, ("ours", "vllm"), "every_arm"),
        (False, ("ours",), "some_arms"),
        (False, (), "no_arm"),
    ],
)
def test_a_measured_splits_basis_code_says_which_arms_were_resampled(every, resampled, code):
    assert basis_code(every, resampled) == code


def test_the_schema_lists_why_a_row_has_intervals_or_not():
    """Each arm row's ``ci_note`` is one of the codes the comparison makes, its words beside it;
    the terminal's ``±`` row decides on the code (``totals`` for an arm known by totals)."""
    row = DEFS["row"]["properties"]
    assert _enum(row["ci_note"]) == list(INTERVAL_NOTES)
    assert row["ci_note_text"] == {"type": "string"}
    # every branch of the rule, by hand
    assert interval_note(0, {"accept_rate": (0.4, 0.5)}) == "no_bootstrap"
    assert interval_note(1000, None) == "totals_only"
    assert interval_note(1000, {"accept_rate": None}) == "one_leg"
    assert interval_note(1000, {"accept_rate": (0.4, 0.5)}) == "over_legs"
