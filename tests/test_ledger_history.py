"""A figure's history over the kept runs: the flags, the labels that moved, the views."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_runs import ARM, STEPS, document

from fold.cli import main
from fold.ledger.figures import FigureRow
from fold.ledger.history import figure_history, parse_figure
from fold.ledger.store import KeptRun, keep_run, read_runs


def planted_log(tmp_path: Path) -> str:
    """The toy gate's step log with every step's accepted tokens halved: A/P falls from 47%
    to 19%, far outside the first log's interval."""
    out = tmp_path / "planted.jsonl"
    lines = []
    for line in Path(STEPS).read_text().splitlines():
        step = json.loads(line)
        step["accepted"] //= 2
        step["emitted"] = step["accepted"] + 1
        lines.append(json.dumps(step))
    out.write_text("\n".join(lines) + "\n")
    return str(out)


@pytest.fixture(scope="module")
def gates(tmp_path_factory) -> Path:
    """Four gates: two of drafter v1, then the planted change with drafter v2, then v2 again
    (each with its own seed, so each is a run of its own). Read, never written, by the tests."""
    folder = tmp_path_factory.mktemp("gates")
    ledger = folder / "gates.duckdb"
    planted = planted_log(folder)
    for seed, log, drafter in ((1, STEPS, "v1"), (2, STEPS, "v1"), (3, planted, "v2"),
                               (4, planted, "v2")):  # fmt: skip
        code = main([ARM, log, "--seed", str(seed), "--ledger", str(ledger),
                     "--label", "k=4", "--label", f"drafter={drafter}"])  # fmt: skip
        assert code == 0
    return ledger


def test_the_history_flags_the_planted_change_and_names_the_label_that_moved(gates, capsys):
    assert main(["ledger", str(gates), "--figure", "A/P", "--json", "-"]) == 0
    history = orjson.loads(capsys.readouterr().out)
    (group,) = history["groups"]
    entries = {entry["run"]: entry for entry in group["runs"]}
    assert [entry["flag"] for entry in group["runs"]] == [None, None, "below", None]
    assert entries[3]["previous"] == 2
    assert entries[3]["value"] < entries[2]["ci"][0]  # outside, by the figures themselves
    assert entries[3]["changed"] == [{"key": "drafter", "from": "v1", "to": "v2"}]
    assert entries[2]["changed"] == [] and entries[2]["compared"] == "inside"
    assert history["flagged"] == 1

    assert main(["ledger", str(gates), "--figure", "A/P"]) == 0
    table = capsys.readouterr().out.splitlines()
    (flagged,) = [line for line in table if line.startswith("!")]
    assert flagged.startswith("!3 ") and "! BELOW run 2's interval" in flagged
    assert "drafter: v1 → v2" in flagged
    assert table[-1] == "4 runs: 1 run outside the previous run's 95% interval (marked !)"


def test_the_history_as_markdown_and_as_a_page(gates, tmp_path, capsys):
    page = tmp_path / "history.html"
    assert main(["ledger", str(gates), "--figure", "A/P", "--markdown", "-",
                 "--html", str(page)]) == 0  # fmt: skip
    markdown = capsys.readouterr().out
    assert markdown.startswith("# A/P (warm legs) over the kept runs\n")
    (row,) = [line for line in markdown.splitlines() if line.startswith("| !3 |")]
    assert "drafter: v1 → v2" in row
    text = page.read_text()
    assert "<svg" in text and "<script" not in text
    assert text.count('<tr class="flagged">') == 1


def test_where_selects_the_runs_of_the_list_and_of_the_page(gates, tmp_path, capsys):
    """Runs 3 and 4 are drafter v2; a label no run has matches none of the four kept."""
    page = tmp_path / "v2.html"
    assert main(["ledger", str(gates), "--where", "drafter=v2", "--html", str(page)]) == 0
    listed = capsys.readouterr().out
    assert [line.split()[0] for line in listed.splitlines()[2:4]] == ["3", "4"]
    assert page.read_text().count("<tr") - page.read_text().count("<tr><th") == 2
    assert main(["ledger", str(gates), "--where", "drafter=v9"]) == 0
    assert capsys.readouterr().out == "gates.duckdb: no kept run matches (4 kept)\n"


def test_grouped_by_a_label_each_run_is_held_against_its_own_group(gates, capsys):
    assert main(["ledger", str(gates), "--figure", "A/P", "--by", "drafter", "--json", "-"]) == 0
    history = orjson.loads(capsys.readouterr().out)
    groups = {group["group"]: group["runs"] for group in history["groups"]}
    assert [entry["run"] for entry in groups["v1"]] == [1, 2]
    assert [entry["run"] for entry in groups["v2"]] == [3, 4]
    assert groups["v2"][0]["compared"] == "first"  # the change starts its own group
    assert history["flagged"] == 0
    assert main(["ledger", str(gates), "--figure", "1+A/S", "--where", "drafter=v2",
                 "--json", "-"]) == 0  # fmt: skip
    history = orjson.loads(capsys.readouterr().out)
    assert [entry["run"] for entry in history["groups"][0]["runs"]] == [3, 4]


def test_a_per_position_rate_and_a_figure_no_run_has(gates, capsys):
    assert main(["ledger", str(gates), "--figure", "per_position:1", "--json", "-"]) == 0
    history = orjson.loads(capsys.readouterr().out)
    runs = read_runs(gates)
    expected = [
        next(r.value for r in run.figures if (r.figure, r.fold, r.position) ==
             ("per_position", "warm", 1))
        for run in runs
    ]  # fmt: skip
    assert [entry["value"] for entry in history["groups"][0]["runs"]] == expected
    # the unconditional rate has its interval: the halved log's first position falls out
    assert [e["flag"] for e in history["groups"][0]["runs"]] == [None, None, "below", None]
    assert all(e["ci"][0] <= e["value"] <= e["ci"][1] for e in history["groups"][0]["runs"])
    # no interval is drawn for the rate of the drafts reaching a position: nothing is
    # flagged, and it says so
    assert main(["ledger", str(gates), "--figure", "per_position_of_proposed:1", "--json",
                 "-"]) == 0  # fmt: skip
    history = orjson.loads(capsys.readouterr().out)
    assert [e["compared"] for e in history["groups"][0]["runs"][1:]] == ["no interval before"] * 3
    assert main(["ledger", str(gates), "--figure", "ratio:vllm"]) == 2
    err = capsys.readouterr().err
    assert "--figure ratio:vllm: no run has it" in err and "accept_rate" in err
    assert main(["ledger", str(gates), "--figure", "A/Q"]) == 2
    assert "--figure 'A/Q': expected A/P, 1+A/S, tok/s" in capsys.readouterr().err
    assert main(["ledger", str(gates), "--where", "k"]) == 2
    assert "--where 'k': expected KEY=VALUE" in capsys.readouterr().err


# A second, plain implementation of the flags: for each run, the last run before it in its
# group with the figure; flagged when the figure is outside that run's interval.
def reference_flags(
    runs: list[KeptRun], by: str | None
) -> dict[int, tuple[str | None, int | None]]:
    found = {}
    for index, run in enumerate(runs):
        value = _accept_rate(run)
        before = [
            other for other in runs[:index]
            if _accept_rate(other) is not None
            and (by is None or other.labels.get(by) == run.labels.get(by))
        ]  # fmt: skip
        previous = before[-1] if before else None
        flag = None
        if value is not None and previous is not None:
            low, high = _interval(previous)
            if low is not None and value < low:
                flag = "below"
            elif high is not None and value > high:
                flag = "above"
        found[run.run_id] = (flag, None if previous is None else previous.run_id)
    return found


def _accept_rate(run: KeptRun) -> float | None:
    return next((r.value for r in run.figures if r.figure == "accept_rate"), None)


def _interval(run: KeptRun) -> tuple[float | None, float | None]:
    row = next(r for r in run.figures if r.figure == "accept_rate")
    return row.ci_low, row.ci_high


rates = st.floats(0, 1, allow_nan=False)
kept_runs = st.lists(
    st.tuples(
        st.one_of(st.none(), rates),
        st.one_of(st.none(), st.tuples(rates, rates).map(sorted)),
        st.dictionaries(st.sampled_from(["commit", "k", "drafter"]),
                        st.sampled_from(["a", "b", "c"]), max_size=3),
    ),
    max_size=12,
)  # fmt: skip


def as_runs(drawn) -> list[KeptRun]:
    start = datetime(2026, 1, 1)
    runs = []
    for run_id, (value, interval, labels) in enumerate(drawn, start=1):
        figures = () if value is None else (
            FigureRow("warm", "accept_rate", value, *(interval or (None, None))),
        )  # fmt: skip
        runs.append(KeptRun(run_id, start + timedelta(hours=run_id), labels, (), figures))
    return runs


@given(kept_runs, st.sampled_from([None, "k", "drafter"]))
def test_flags_and_label_changes_agree_with_a_plain_reading(drawn, by):
    runs = as_runs(drawn)
    if runs and all(_accept_rate(run) is None for run in runs):
        return  # refused: no run has the figure (tested above)
    history = figure_history(runs, parse_figure("A/P"), by=by)
    expected = reference_flags(runs, by)
    entries = [entry for group in history["groups"] for entry in group["runs"]]
    assert sorted(entry["run"] for entry in entries) == [run.run_id for run in runs]
    labels = {run.run_id: run.labels for run in runs}
    for group in history["groups"]:
        ids = [entry["run"] for entry in group["runs"]]
        assert ids == sorted(ids)  # each group in the order the runs were kept
        for entry in group["runs"]:
            assert (entry["flag"], entry["previous"]) == expected[entry["run"]]
            if entry["previous"] is not None:
                before, after = labels[entry["previous"]], labels[entry["run"]]
                moved = {c["key"] for c in entry["changed"]}
                assert moved == {k for k in {*before, *after} if before.get(k) != after.get(k)}
    assert history["flagged"] == sum(flag is not None for flag, _ in expected.values())


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(rates, st.sampled_from(["a", "b"])), min_size=1, max_size=4))
def test_runs_come_back_in_the_order_they_were_kept(tmp_path_factory, appended):
    ledger = tmp_path_factory.mktemp("order") / "gates.duckdb"
    for value, commit in appended:
        keep_run(ledger, document(value, (value / 2, (1 + value) / 2)), {"commit": commit}, [])
    runs = read_runs(ledger)
    distinct = list(dict.fromkeys(appended))  # a run kept again is not kept twice
    assert [(_accept_rate(run), run.labels["commit"]) for run in runs] == [
        (value, next(c for v, c in appended if v == value))
        for value in dict.fromkeys(v for v, _ in distinct)
    ]
    history = figure_history(runs, parse_figure("A/P"))
    assert [entry["run"] for entry in history["groups"][0]["runs"]] == [r.run_id for r in runs]


def test_the_listing_marks_the_runs_the_history_flags(gates, capsys):
    """Each listed figure's flag is the one its own history gives the run."""
    assert main(["ledger", str(gates), "--json", "-"]) == 0
    listing = orjson.loads(capsys.readouterr().out)
    for figure in ("accept_rate", "mean_acceptance_length", "output_throughput_tok_s"):
        assert main(["ledger", str(gates), "--figure", figure, "--json", "-"]) == 0
        history = orjson.loads(capsys.readouterr().out)
        flags = {entry["run"]: entry["flag"] for entry in history["groups"][0]["runs"]}
        assert {run["run"]: run[f"{figure}_flag"] for run in listing["runs"]} == flags
    assert listing["runs"][2]["accept_rate_flag"] == "below" and listing["flagged"] == 1

    assert main(["ledger", str(gates)]) == 0
    lines = capsys.readouterr().out.splitlines()
    marked = [line for line in lines if line.startswith("!")]
    assert [line.split()[0] for line in marked] == ["!3"]
    assert "!↓" in marked[0]
    assert lines[-1] == (
        "4 runs kept (warm legs' figures, 95% intervals); 1 run with a figure outside the "
        "previous run's interval (marked !, ↓ below, ↑ above)"
    )
