"""Codes in the JSON, words beside them, for the verdicts and the notes the presenters show: a
gap's verdict (``verdict_kind``), what changed between two runs of ours (``changes``), how they
were resampled (``resampling``), where the prefill tokens came from (``prefill_tokens.source``)
and the falling line's caveat (``by_output_position.caveat``).

For each set: the schema lists every code the library can emit, the library's rules reach the
codes they should, and a saved document whose sentences are reworded renders the same, with only
the words swapped where they are printed: the presenters choose on the codes, never on prose.
"""

from __future__ import annotations

import copy
import html
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from test_per_request import fold_lines, long_requests

from fold.cli import main as cli
from fold.compare.gap_intervals import BOTH_ARMS, SplitIntervals
from fold.compare.our_runs import RESAMPLINGS
from fold.compare.runs_verdict import CHANGES, plain_verdict
from fold.compare.verdict import ACCEPTANCE, NO_GAP, SPEED, VERDICT_KINDS, judge, model_words
from fold.folding.by_position import CAVEAT_TEXT
from fold.folding.result import PREFILL_SOURCE_TEXT
from fold.present.markdown import markdown_record
from fold.present.page import page
from fold.present.terminal import terminal

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "docs" / "fold-acceptance-5.schema.json").read_text())
DEFS = SCHEMA["$defs"]
PREFILL = SCHEMA["properties"]["prefill_tokens"]["properties"]
POSITIONS = DEFS["by_output_position"]["anyOf"][0]["properties"]
GATE = ROOT / "fixtures" / "gate-example"
ORACLES = ROOT / "fixtures" / "oracles"
RUNS = ROOT / "fixtures" / "ours-vs-ours"


def _enum(node: dict[str, Any]) -> list[str]:
    """The codes a property lists: its ``enum``, or its non-null branch's."""
    if "enum" in node:
        return node["enum"]
    (listed,) = [branch["enum"] for branch in node["anyOf"] if "enum" in branch]
    return listed


def _changes(part: str) -> list[str]:
    return _enum(DEFS["run"]["properties"]["changes"]["anyOf"][0]["properties"][part])


# -- the schema lists the library's codes ---------------------------------------------------


@pytest.mark.parametrize(
    ("listed", "emitted"),
    [
        (lambda: _enum(DEFS["gap"]["properties"]["verdict_kind"]), VERDICT_KINDS),
        (lambda: _enum(DEFS["run"]["properties"]["resampling"]), RESAMPLINGS),
        (lambda: _changes("acceptance"), CHANGES["acceptance"]),
        (lambda: _changes("steps"), CHANGES["steps"]),
        (lambda: _changes("net"), CHANGES["net"]),
        (lambda: _enum(PREFILL["source"]), tuple(PREFILL_SOURCE_TEXT)),
        (lambda: _enum(POSITIONS["caveat"]), tuple(CAVEAT_TEXT)),
    ],
)
def test_the_schema_lists_every_code_the_library_emits(listed, emitted):
    assert sorted(listed()) == sorted(emitted)


def test_every_code_has_its_sentence_beside_it():
    pairs = [
        (DEFS["run"], "resampling_text"),
        (DEFS["run"], "changes"),
        (DEFS["gap"], "verdict_kind"),
        (SCHEMA["properties"]["prefill_tokens"], "source_text"),
        (DEFS["by_output_position"]["anyOf"][0], "caveat_text"),
    ]
    for node, key in pairs:
        assert key in node["properties"] and key in node["required"], key


# -- the rules reach their codes -------------------------------------------------------------


def _judge(ratio, af, sf, intervals=None, tolerance=0.02):
    return judge("o", ratio, af, sf, tolerance, intervals, "ours is faster than o", ["why"],
                 model_words("o"), 1e-9)  # fmt: skip


WIDE, NARROW = (1.5, 2.5), (0.9, 1.1)  # an interval wholly past 1, one holding it
JUDGED = [
    # without intervals, the tolerance (2%) decides
    ((1.01, 1.5, 1.01 / 1.5), None, NO_GAP, "within_tolerance"),
    ((2.0, None, None), None, None, "cannot_split"),
    ((2.0, 1.01, 2.0 / 1.01), None, SPEED, "acceptance_within_tolerance"),
    ((2.0, 2.0 / 1.01, 1.01), None, ACCEPTANCE, "speed_within_tolerance"),
    ((2.0, 1.6, 1.25), None, ACCEPTANCE, "larger_share"),  # |log 1.6| > |log 1.25|
    ((2.0, 1.25, 1.6), None, SPEED, "larger_share"),
    # with every arm resampled, the intervals decide
    ((1.05, 1.5, 0.7), (NARROW, WIDE, WIDE), NO_GAP, "not_distinguishable"),
    ((2.0, None, None), (WIDE, None, None), None, "cannot_split"),
    ((2.0, 1.01, 2.0 / 1.01), (WIDE, NARROW, WIDE), SPEED, "acceptance_not_distinguishable"),
    ((2.0, 2.0 / 1.01, 1.01), (WIDE, WIDE, NARROW), ACCEPTANCE, "speed_not_distinguishable"),
    ((2.0, 1.6, 1.25), (WIDE, NARROW, NARROW), ACCEPTANCE, "neither_alone"),
    ((2.0, 1.25, 1.6), (WIDE, WIDE, WIDE), SPEED, "both_differ"),
]


@pytest.mark.parametrize(("figures", "intervals", "dominant", "kind"), JUDGED)
def test_each_rule_of_the_verdict_gives_its_kind(figures, intervals, dominant, kind):
    found = _judge(*figures, intervals=intervals)
    assert (found.dominant, found.kind) == (dominant, kind)


def test_the_rules_reach_every_kind_but_the_two_made_beside_them():
    """``judge`` makes all kinds but two: a gap with no ratio (``attribute_gap``) and a
    matched run's own gap (``measured_split``); tests/test_gap.py and test_measured_split.py
    hold those."""
    reached = {kind for *_, kind in JUDGED}
    assert reached == set(VERDICT_KINDS) - {"cannot_measure", "speed_at_our_acceptance"}


def _expected_change(part: str, factor: float, interval, tolerance: float) -> str:
    """By the definition: unchanged when the interval holds 1 (with one) or the factor is
    within the tolerance (without); else the way it went."""
    same = interval[0] <= 1 <= interval[1] if interval else abs(factor - 1) <= tolerance
    if same:
        return "unchanged"
    return CHANGES[part][0] if factor > 1 else CHANGES[part][1]


FACTORS = (0.3, 0.9, 0.99, 1.0, 1.01, 1.1, 3.0)


@pytest.mark.parametrize("resampled", [False, True])
def test_the_changes_between_two_runs_follow_their_factors(resampled):
    tolerance = 0.02
    for af, sf in itertools.product(FACTORS, FACTORS):
        ratio = af * sf
        spread = {name: (value * 0.97, value * 1.03) for name, value in
                  (("ratio", ratio), ("acceptance_factor", af), ("speed_factor", sf))}  # fmt: skip
        intervals = (
            SplitIntervals(**spread, basis=dict.fromkeys(spread, BOTH_ARMS)) if resampled else None
        )
        changes, _ = plain_verdict(ratio, af, sf, intervals, (), tolerance)
        for part, factor in (("acceptance", af), ("steps", sf), ("net", ratio)):
            interval = spread[{"acceptance": "acceptance_factor", "steps": "speed_factor",
                               "net": "ratio"}[part]] if resampled else None  # fmt: skip
            assert changes[part] == _expected_change(part, factor, interval, tolerance)
    unsplit, text = plain_verdict(0.5, None, None, None, ["no 1 + A/S"], tolerance)
    assert unsplit == {"acceptance": None, "steps": None, "net": "slower"}
    assert text.startswith("no 1 + A/S: the change cannot be split")


# -- the presenters choose on the codes ------------------------------------------------------


def _saved(out: Path, *argv: str) -> dict[str, Any]:
    assert cli([*argv, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_bytes())


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> dict[str, dict[str, Any]]:
    """Saved documents that hold every set: gaps to two oracles, two runs of ours, a falling
    line with its caveat."""
    made = tmp_path_factory.mktemp("docs")
    oracles = _saved(
        made / "oracles.json",
        *(str(GATE / "our-arm.json"), str(GATE / "steps.jsonl"), "--bootstrap", "100"),
        f"--vs=vllm={ORACLES / 'vllm-gate-arm.json'}",
        f"--vs=sglang={ORACLES / 'sglang-legs.jsonl'}",
    )
    after, before = RUNS / "after", RUNS / "before"
    runs = _saved(
        made / "runs.json",
        *(str(after / "our-arm.json"), str(after / "steps.jsonl"), "--bootstrap", "100"),
        f"--vs=before:ours={before / 'our-arm.json'}",
        f"--vs-log=before={before / 'steps.jsonl'}",
    )
    falling = fold_lines(made, [long_requests(0.006)], resamples=200)
    assert falling["warm"]["by_output_position"]["caveat"] is not None
    return {"oracles": oracles, "runs": runs, "falling": falling}


def _sentences(document: dict[str, Any]) -> list[tuple[list[Any], str]]:
    """Where each sentence beside a code of these sets sits: (its parent, its key)."""
    found: list[tuple[list[Any], str]] = [([document["prefill_tokens"]], "source_text")]
    for gap in (document.get("comparison") or {}).get("gaps", {}).values():
        found.append(([gap], "verdict"))
    for run in (document.get("runs") or {}).values():
        found += [([run], "verdict"), ([run], "resampling_text")]
    positions = (document.get("warm") or {}).get("by_output_position")
    if positions is not None and positions["caveat_text"] is not None:
        found.append(([positions], "caveat_text"))
    return found


def _rendered(document: dict[str, Any]) -> dict[str, str]:
    return {
        "terminal": terminal(document, width=2000, details=True, color=True),
        "markdown": markdown_record(document),
        "page": page(document).decode(),
    }


@pytest.mark.parametrize("name", ["oracles", "runs", "falling"])
def test_reworded_sentences_change_nothing_but_the_words_shown(documents, name):
    """Every sentence of these sets reworded in a saved document: each output is the old one
    with the words swapped where they are printed, in the same place and style (the terminal
    keeps its colours), and unchanged where they are not; a presenter that chose anything on
    the words would differ. The rewording swaps the sentences of different kinds, so words
    that read as another verdict decide nothing either."""
    saved = documents[name]
    before = _rendered(saved)
    reworded = copy.deepcopy(saved)
    places = _sentences(reworded)
    # one rewording per distinct sentence (a run's verdict is its gap's); the verdicts are
    # rotated among the places first, so each reads as a verdict of another kind
    olds = list(dict.fromkeys(parent[0][key] for parent, key in places))
    said = {parent[0][key]: key for parent, key in places}
    verdicts = [old for old in olds if said[old] == "verdict"]
    news = {
        old: (
            verdicts[(verdicts.index(old) + 1) % len(verdicts)] + f" [{number}]"
            if said[old] == "verdict"
            else f"planted words {number} for {said[old]}"
        )
        for number, old in enumerate(olds)
    }
    for parent, key in places:
        parent[0][key] = news[parent[0][key]]
    after = _rendered(reworded)
    for output, text in before.items():
        expected = text
        escape = html.escape if output == "page" else (lambda words: words)
        marks = {old: f"\0{number}\0" for number, old in enumerate(olds)}
        for old, mark in marks.items():
            if len(old) > 12:  # a short word ("stated") may stand elsewhere too
                expected = expected.replace(escape(old), mark)
        for old, mark in marks.items():
            expected = expected.replace(mark, escape(news[old]))
        assert after[output] == expected, (name, output)
    shown = {said[old] for old in olds if old in before["terminal"]}  # the test saw words
    printed = {"oracles": {"verdict"}, "runs": {"verdict", "resampling_text"}}
    assert printed.get(name, {"caveat_text"}) <= shown


def test_the_caveat_shown_is_chosen_by_its_code(documents):
    document = copy.deepcopy(documents["falling"])
    positions = document["warm"]["by_output_position"]
    positions["caveat_text"] = "planted caveat"
    assert "planted caveat" in terminal(document, width=200)
    positions["caveat"] = None  # the words alone show nothing
    shown = terminal(document, width=200)
    assert "planted caveat" not in shown and "(--details)" in shown
