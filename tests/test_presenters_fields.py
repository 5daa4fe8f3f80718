"""The figures the presenters used to work out for themselves, now fields of the document:
each is checked against the same figure worked out here from the document's own parts, and a
planted value shows the presenters show the field, not a figure of their own."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from fold.cli import main as cli
from fold.compare.our_runs import lines_text
from fold.present.another_k import notes as another_k_notes
from fold.present.cadence import decode_rate
from fold.present.markdown import markdown_record
from fold.present.runs import pair_summary_text
from fold.present.sources import sources_table
from fold.present.step_figures import has_step_figures, request_rows, rows
from fold.present.terminal import terminal

ROOT = Path(__file__).resolve().parents[1]
ORACLES = ROOT / "fixtures" / "oracles"
RUNS = ROOT / "fixtures" / "ours-vs-ours"


def _saved(tmp_path: Path, argv: list[str]) -> dict:
    out = tmp_path / "fold.json"
    assert cli([*argv, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_bytes())


@pytest.fixture(scope="module")
def oracle_steps(tmp_path_factory) -> dict:
    """Ours beside vLLM's per-request steps (detailed) and its histograms (summary)."""
    requests = ORACLES / "vllm-requests"
    ours = ORACLES / "vllm-real" / "ours"
    argv = [
        str(ours / "our-arm.json"),
        str(ours / "steps.jsonl"),
        f"--vs=vllm={requests / 'offline' / 'requests.jsonl'}",
        f"--vs=sum={requests / 'summary.jsonl'}",
        "--bootstrap",
        "20",
    ]
    return _saved(tmp_path_factory.mktemp("doc"), argv)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> dict:
    """The shipped example of two runs of ours, paired."""
    argv = [
        str(RUNS / "after" / "our-arm.json"),
        str(RUNS / "after" / "steps.jsonl"),
        f"--vs=before:ours={RUNS / 'before' / 'our-arm.json'}",
        f"--vs-log=before={RUNS / 'before' / 'steps.jsonl'}",
        "--bootstrap",
        "20",
    ]
    return _saved(tmp_path_factory.mktemp("doc"), argv)


def test_how_far_the_step_figures_reach_is_the_rows_own(oracle_steps):
    """Worked out here from the rows: the longest draft, the most windows, the arm with the
    most output-position buckets, and whether two arms have steps."""
    block = oracle_steps["comparison"]
    figures = {row["name"]: row["step_figures"] for row in block["rows"]}
    with_steps = {name: found for name, found in figures.items() if found is not None}
    assert len(with_steps) >= 2
    longest_draft = 0
    most_windows = 0
    most_buckets, named = -1, None
    for name, found in with_steps.items():
        longest_draft = found["max_draft"] if found["max_draft"] > longest_draft else longest_draft
        windows = len(found["windows"] or [])
        most_windows = windows if windows > most_windows else most_windows
        positions = found.get("by_output_position")
        if positions is not None and len(positions["buckets"]) > most_buckets:
            most_buckets, named = len(positions["buckets"]), name
    assert block["step_figures"] == {
        "max_draft": longest_draft,
        "windows": most_windows,
        "buckets_of": named,
        "beside": True,
    }


def test_the_side_by_side_tables_reach_as_far_as_the_document_says(oracle_steps):
    document = copy.deepcopy(oracle_steps)
    _, body = rows(document)
    assert any(label.startswith("pos 3") for label, _ in body)
    document["comparison"]["step_figures"]["max_draft"] = 2  # planted: the arms draft more
    document["comparison"]["step_figures"]["windows"] = 1
    _, body = rows(document)
    labels = [label for label, _ in body]
    assert "pos 1, given none" in labels and "accepted exactly 2" in labels
    assert not any(re.match(r"pos [3-9]|accepted exactly [3-9]|window [2-9]", x) for x in labels)
    assert [label for label in labels if label.startswith("window")] == ["window 1, A/P"]
    document["comparison"]["step_figures"]["buckets_of"] = None  # no arm's buckets name rows
    _, requests = request_rows(document)
    assert not any(label.startswith("A/P, tokens") for label, _ in requests)


def test_whether_step_figures_are_set_beside_ours_is_the_documents(oracle_steps):
    document = copy.deepcopy(oracle_steps)
    assert has_step_figures(document)
    shown = terminal(document, width=100, details=True)
    document["comparison"]["step_figures"]["beside"] = False  # planted
    assert not has_step_figures(document)
    assert terminal(document, width=100, details=True) != shown
    assert not has_step_figures({"legs": []})  # no comparison: nothing beside


def test_the_warm_pairs_counted_are_the_pairs_with_a_difference(two_runs):
    found = two_runs["runs"]["before"]
    differences = [
        sum(1 for pair in found["pairs"] if pair["warm"] and pair[figure]["difference"] is not None)
        for figure in ("accept_rate", "mean_acceptance_length", "tok_s")
    ]
    assert found["warm_pairs"] == max(differences) > 0
    planted = {**found, "warm_pairs": 4242}
    assert pair_summary_text(planted).startswith("warm pairs (4242): ")
    document = copy.deepcopy(two_runs)
    document["runs"]["before"]["warm_pairs"] = 4242
    assert "warm pairs (4242)" in markdown_record(document)


def test_the_other_runs_lines_are_its_documents_figures(two_runs):
    """The other run's line counts are its own document's lines_read and lines_attributed,
    which are the sums over its files, added here."""
    found = two_runs["runs"]["before"]
    files = found["fold"]["files"]
    read = 0
    attributed = 0
    for entry in files:
        read, attributed = read + entry["lines"], attributed + entry["attributed"]
    assert (found["fold"]["lines_read"], found["fold"]["lines_attributed"]) == (read, attributed)
    assert found["lines"].startswith(f"{read} read, {attributed} in legs, ")
    planted = {**found["fold"], "lines_read": 77, "lines_attributed": 55}  # the files say more
    assert lines_text(planted).startswith("77 read, 55 in legs, ")


def test_another_ks_notes_name_the_documents_lengths():
    """The lengths timed over few steps and those never timed are the document's: planted
    here against step times and rows that say otherwise."""
    found = {
        "assumption": "a",
        "step_model": "m",
        "step_time_note": "n",
        "intervals": None,
        "step_times": [{"proposed": 3, "mean_s": 0.001, "intervals": 500}],
        "rows": [{"unmeasured_lengths": [9]}],
        "few_steps_lengths": [3],
        "unmeasured_lengths": [5],
    }
    said = another_k_notes(found)
    assert "fewer than 30 steps timed at draft length 3: " in " ".join(said)
    assert any(line.startswith("no step time in the log at draft length 5:") for line in said)
    assert not any("length 9" in line for line in said)


def _by_hand(value, interval):
    """What ± shows: the farther end of the interval from the figure, 0 when the figure lies
    outside it (the definition, written out again)."""
    if value is None or interval is None:
        return None
    below, above = value - interval[0], interval[1] - value
    return max(0.0, below if below > above else above)


def _reaches(block: dict, figures) -> list[tuple[str, object, object]]:
    return [
        (figure, block[f"{figure}_reach"], _by_hand(block[figure], block[f"{figure}_ci"]))
        for figure in figures
    ]


def test_every_reach_is_its_intervals_by_hand(oracle_steps, two_runs):
    pooled = ("accept_rate", "mean_acceptance_length", "completion_tokens_per_step",
              "output_throughput_tok_s", "step_rate")  # fmt: skip
    found = []
    for document in (oracle_steps, two_runs):
        for block in (document["warm"], document["all"]):
            found += _reaches(block, pooled)
        found += _reaches(document["warm"]["cadence"], ["decode_steps_per_s"])
        for gap in document["comparison"]["gaps"].values():
            found += _reaches(gap, ["ratio", "acceptance_factor", "speed_factor"])
        for row in document["comparison"]["rows"]:
            found += _reaches(row, ["output_throughput_tok_s", "accept_rate"])
        for row in (document["warm"]["another_k"] or {"rows": []})["rows"]:
            found += _reaches(row, ["accept_rate", "tokens_per_step"])
    for row in two_runs["runs"]["before"]["per_position"]:
        found += _reaches(row, ["difference"])
    assert [(figure, reach) for figure, reach, _ in found] == [
        (figure, expected) for figure, _, expected in found
    ]
    assert sum(reach is not None for _, reach, _ in found) >= 20  # intervals were drawn


def test_the_plus_minus_shown_is_the_documents_reach(two_runs):
    document = copy.deepcopy(two_runs)
    document["warm"]["accept_rate_reach"] = 0.4321  # planted: the interval says less
    document["comparison"]["gaps"]["before"]["ratio_reach"] = 9.876
    text = terminal(document, width=120, details=True)
    assert "±43.2%" in text and "±9.876" in text
    cadence = {"decode_steps_per_s": 23.57, "decode_steps_per_s_ci": [23.0, 24.0]}
    assert decode_rate({**cadence, "decode_steps_per_s_reach": 1.21}) == "23.57 ±1.21"
    assert decode_rate({**cadence, "decode_steps_per_s_reach": None}) == "23.57"


def _sources_text(rows) -> str:
    console = Console(width=200, record=True)
    console.print(sources_table(rows))
    return console.export_text()


def test_each_sources_kind_follows_the_rows_figures(oracle_steps, tmp_path):
    """By hand from the row: not recorded where its figure is null, derived where A/P or
    1 + A/S had its counts, recorded otherwise."""
    gate = ROOT / "fixtures" / "gate-example"
    argv = [str(gate / "our-arm.json"), str(gate / "steps.jsonl"),
            f"--vs=lc={ORACLES / 'llamacpp-completions.json'}",
            f"--vs=sg={ORACLES / 'sglang-generate-0.5.23.json'}", "--bootstrap", "0"]  # fmt: skip
    rows = [*oracle_steps["comparison"]["rows"], *_saved(tmp_path, argv)["comparison"]["rows"]]
    figure_of = {"tok_s": "output_throughput_tok_s"}
    over = {"accept_rate": "proposed", "mean_acceptance_length": "steps"}
    seen = set()
    for row in rows:
        for key, kind in row["source_kinds"].items():
            value = row.get(figure_of.get(key, key))
            if value is None:
                expected = "not_recorded"
            elif key in over and row["accepted"] and row[over[key]]:
                expected = "derived"
            else:
                expected = "recorded"
            assert kind == expected, (row["name"], key)
            seen.add(kind)
        assert set(row["source_kinds"]) == set(row["sources"])
    assert seen == {"not_recorded", "derived", "recorded"}


def test_the_sources_table_chooses_on_the_codes_not_the_words(oracle_steps):
    rows = copy.deepcopy(oracle_steps["comparison"]["rows"])
    row = next(row for row in rows if row["source_kinds"].get("accept_rate") == "derived")
    row["sources"]["accept_rate"] = "planted words for a derived rate"
    assert "planted words for a derived rate" not in _sources_text(rows)  # derived: no line
    row["source_kinds"]["accept_rate"] = "recorded"
    assert "planted words for a derived rate" in _sources_text(rows)
