"""Presenters read, never compute: every figure a presenter shows is a field of the document.

Two checks. The code: a presenter imports from the stages before it only codes and words
(upper-case constants), never a function that works a figure out; planted imports show the
check finds one. The behaviour: a saved document whose figure is changed, and nothing else, is
shown with the changed figure by every presenter that shows it; a presenter that worked the
figure out again from the counts beside it would show the old one.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from fold.cli import main as cli
from fold.folding.step_split import by_share
from fold.present.charts import charts
from fold.present.live import live_view
from fold.present.markdown import markdown_record
from fold.present.page import page
from fold.present.speed import speed_summary
from fold.present.step_split import summary_line
from fold.present.terminal import terminal

ROOT = Path(__file__).resolve().parents[1]
PRESENT = ROOT / "fold" / "present"
GATE = ROOT / "fixtures" / "gate-example"
ORACLES = ROOT / "fixtures" / "oracles"
EARLIER_STAGES = ("fold.inputs", "fold.folding", "fold.compare", "fold.ledger")
DRAWS_LINES = {"timeline.py": "draws the attributed step lines, which no document holds"}
"""The one output drawn from more than the document (docs/code.md says so)."""
WRITERS = {
    "output.py": "the JSON writer: serializes what it is given, shows no figure",
    "annotate.py": "copies the arm record it is given (ArmRecord) beside the document's figures",
    "sums_file.py": "serializes the document's table of requests as Parquet, shows no figure",
}


def computing_imports(source: str) -> list[str]:
    """Names a module imports from an earlier stage that are not codes or words: functions
    and classes, which would let it work a figure out."""
    found = []
    stages = {stage.removeprefix("fold.") for stage in EARLIER_STAGES}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:  # relative: the stage is hidden
            found += [f"{'.' * node.level}{node.module or ''}.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(EARLIER_STAGES):
            found += [f"{node.module}.{a.name}" for a in node.names if not a.name.isupper()]
        elif isinstance(node, ast.ImportFrom) and node.module == "fold":
            found += [f"fold.{a.name}" for a in node.names if a.name in stages]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith(EARLIER_STAGES)]
    return found


def test_presenters_import_only_codes_and_words_from_earlier_stages():
    found = {
        path.name: names
        for path in sorted(PRESENT.glob("*.py"))
        if path.name not in DRAWS_LINES and path.name not in WRITERS
        and (names := computing_imports(path.read_text()))
    }  # fmt: skip
    assert found == {}


@pytest.mark.parametrize(
    "planted",
    [
        "from fold.inputs.acceptance import per_position_conditional\n",
        "from fold.folding.windows import window_pools\n",
        "import fold.compare.gap\n",
        "from fold import inputs\n",
        "from ..folding import windows\n",
        "def shape(leg):\n    from fold.inputs.acceptance import accept_rate\n    return 1\n",
    ],
)
def test_a_planted_computing_import_is_found(planted):
    source = (PRESENT / "table.py").read_text() + "\n" + planted
    assert computing_imports(source)


def test_codes_and_words_are_not_taken_for_computing():
    source = (
        "from fold.folding.result import NEEDS_STEP_LOG, STEP_LOG\n"
        "from fold.inputs.populations import POPULATION_TEXT\n"
        "from fold.present.table import percent\n"
        "from rich.text import Text\n"
    )
    assert computing_imports(source) == []


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    """The worked example against vLLM and SGLang, saved by --json and read back."""
    out = tmp_path_factory.mktemp("doc") / "fold.json"
    argv = [
        str(GATE / "our-arm.json"),
        str(GATE / "steps.jsonl"),
        f"--vs=vllm={ORACLES / 'vllm-gate-arm.json'}",
        f"--vs=sglang={ORACLES / 'sglang-legs.jsonl'}",
        "--bootstrap",
        "100",
    ]
    assert cli([*argv, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_bytes())


def _words(text: str) -> str:
    return " ".join(text.split())


def _shape_cells(text: str) -> list[str]:
    """The shape column of the terminal's legs table, a cell per leg in order."""
    table = text[: text.index("Fold (warm")]
    rows = [line for line in table.splitlines() if re.match(r"^\s+\d+\s+\d+\s", line)]
    return [row.split()[-1] for row in rows]


def test_the_shape_column_shows_the_documents_pools_not_the_windows(saved):
    document = copy.deepcopy(saved)
    for index, leg in enumerate(document["legs"]):
        shape = leg["window_pools"]["shape"]
        # the windows stay at ~45%
        shape["accept_rate"] = [0.0 if index == 0 else 0.99] * len(shape["accept_rate"])
    cells = _shape_cells(terminal(document, width=100))
    pools = len(document["legs"][0]["window_pools"]["shape"]["accept_rate"])
    assert cells[0] == "▁" * pools and set(cells[1:]) == {"█" * pools}
    record = markdown_record(document)
    assert f"`{'▁' * pools}`" in record and f"`{'█' * pools}`" in record
    untouched = _shape_cells(terminal(saved, width=100))
    assert "▁" * pools not in untouched and "█" * pools not in untouched


def test_the_shape_column_draws_the_pools_in_their_order_and_an_empty_shape_blank(saved):
    """Pool i is character i (eight levels over 0..100%: 0.0 the lowest, 0.99 the highest,
    None a space); a leg without windows has an empty shape, in the markdown too."""
    document = copy.deepcopy(saved)
    document["legs"][0]["window_pools"]["shape"] = {
        "steps": [1, 1, 1, 1],
        "proposed": [1, 1, 1, 0],
        "accepted": [0, 1, 0, 0],
        "accept_rate": [0.0, 0.99, 0.5, None],
    }
    document["legs"][1]["window_pools"]["shape"] = dict.fromkeys(
        ("steps", "proposed", "accepted", "accept_rate"), ()
    )
    text = terminal(document, width=100)
    assert _shape_cells(text)[0] == "▁█▅"  # the last pool's space is the cell's padding
    legs = markdown_record(document).split("## Legs", 1)[1].split("\n## ", 1)[0]
    first, second = (line for line in legs.splitlines() if re.match(r"^\| [01] \|", line))
    assert first.split(" | ")[10] == "`▁█▅ `"
    assert second.split(" | ")[10] == ""  # no windows: no shape, not an empty code span


def test_the_chart_along_each_leg_draws_the_documents_pools(saved):
    document = copy.deepcopy(saved)
    leg = document["legs"][0]
    leg["window_pools"]["chart"] = {
        "steps": [7, 5],
        "proposed": [1, 1],
        "accepted": [1, 1],
        "accept_rate": [0.25, 0.75],
    }
    chart = next(chart for chart in charts(document) if chart.name == "windows")
    figure = Figure()
    chart.draw(figure)
    line = next(line for line in figure.axes[0].get_lines() if line.get_gid() == "leg-0")
    assert list(line.get_xdata()) == [0, 7, 12]
    assert list(line.get_ydata()) == [25.0, 75.0, 75.0]


def test_the_per_position_chart_draws_each_rows_conditional_rates(saved):
    document = copy.deepcopy(saved)
    row = next(row for row in document["comparison"]["rows"] if row["per_position_rate"])
    planted = [0.5, None, 0.125] + [0.25] * (len(row["per_position_rate"]) - 3)
    row["per_position_rate_conditional"] = planted
    chart = next(chart for chart in charts(document) if chart.name == "per-position")
    figure = Figure()
    chart.draw(figure)
    line = next(
        line
        for line in figure.axes[0].get_lines()
        if line.get_label() == f"{row['name']}, conditional"
    )
    drawn = [None if value != value else value / 100 for value in line.get_ydata()]
    assert drawn == planted


def test_lines_read_is_the_documents_figure(saved):
    document = copy.deepcopy(saved)
    document["unattributed_steps"] = 3  # a line outside every leg: the terminal says so
    document["lines_read"] = 424242
    document["lines_attributed"] = 515151
    assert "3 outside every leg of 424242 read" in _words(terminal(document, width=100))
    assert "424242 read, 515151 in legs" in markdown_record(document)


def test_the_missing_times_are_said_in_the_documents_words(saved):
    document = copy.deepcopy(saved)
    document["steps_timed"] = False
    document["no_times_text"] = "no clock: planted words"
    text = _words(terminal(document, width=100, details=True))
    assert "cadence: no clock: planted words" in text


def test_where_the_counts_came_from_is_the_documents_sentence(saved):
    document = copy.deepcopy(saved)
    document["step_source_text"] = "a planted source"
    assert "a planted source, warm legs" in markdown_record(document)


def test_the_sglang_column_is_chosen_by_the_units_code(saved):
    document = copy.deepcopy(saved)
    for gap in document["comparison"]["gaps"].values():
        gap["unit_text"] = "words that say nothing"  # the words decide nothing
    assert terminal(document, width=100) == terminal(saved, width=100)
    assert page(document) == page(saved)
    document["comparison"]["gaps"]["vllm"]["unit"] = "completion_tokens_per_step"
    assert terminal(document, width=100) != terminal(saved, width=100)  # the code decides


def test_a_populations_label_follows_its_code(saved):
    document = copy.deepcopy(saved)
    row = next(row for row in document["comparison"]["rows"] if row["name"] == "vllm")
    row["population"] = "between_scrapes"
    line = next(
        line for line in terminal(document, width=100).splitlines() if line.startswith("vllm ")
    )
    assert "2 scrapes" in line


def test_a_legs_figures_are_the_documents_not_its_counts(saved):
    document = copy.deepcopy(saved)
    document["legs"][0]["accept_rate"] = 0.123
    document["legs"][0]["mean_acceptance_length"] = 9.87
    row = next(
        line
        for line in terminal(document, width=100).splitlines()
        if re.match(r"^\s+0\s+1\s", line)
    )
    assert "12.3%" in row and "9.87" in row


def test_the_live_view_shows_the_groups_figures():
    group = {
        "label": "prompt-0",
        "writer": None,
        "part": 0,
        "lines": 12,
        "steps": 10,
        "proposed": 70,
        "accepted": 30,
        "first_ns": 0,
        "seconds": 1.5,
        "accept_rate": 0.111,  # planted: the counts say 42.9%
        "mean_acceptance_length": 7.77,  # planted: the counts say 4.00
    }
    view = {
        "document": None,
        "provisional": [group],
        "status": "no arm record yet",
        "recent_notices": [{"path": "steps.jsonl", "message": "new file"}],
        "files": {"steps.jsonl": 1234, "more.jsonl": 10},
        "bytes": 99999,  # planted: the files say 1244
        "lines": 12,
        "held_bytes": 0,
    }
    from rich.console import Console

    console = Console(width=120, record=True)
    console.print(live_view(view))
    text = console.export_text()
    assert "11.1%" in text and "7.77" in text and "42.9%" not in text
    assert "steps.jsonl: new file" in text and "no arm record yet" in text
    assert "2 file(s): 12 lines, 99999 bytes" in text


def test_the_speed_parts_factors_multiply_back_to_the_leg_factor(tmp_path):
    """The gap chart's bars for the speed parts are the document's part_factors: by their
    definition each is leg_factor ** share, and together they make the leg factor."""
    runs = ROOT / "fixtures" / "ours-vs-ours"
    out = tmp_path / "fold.json"
    argv = [
        str(runs / "after" / "our-arm.json"),
        str(runs / "after" / "steps.jsonl"),
        f"--vs=before:ours={runs / 'before' / 'our-arm.json'}",
        f"--vs-log=before={runs / 'before' / 'steps.jsonl'}",
    ]
    assert cli([*argv, "--json", str(out), "--quiet"]) == 0
    speed = json.loads(out.read_bytes())["comparison"]["speed"]["before"]
    factors, parts = speed["part_factors"], speed["parts"]
    assert factors is not None and set(factors) == set(parts)
    product = 1.0
    for name, share in parts.items():
        assert factors[name] == pytest.approx(speed["leg_factor"] ** share, rel=1e-12)
        product *= factors[name]
    assert product == pytest.approx(speed["leg_factor"], rel=1e-9)
    # the words' order is the document's: the largest share first, sorted here by hand
    shares = sorted(parts.items(), key=lambda item: item[1], reverse=True)
    assert speed["parts_by_share"] == [name for name, _ in shares]
    shown = speed_summary(speed)
    planted = speed_summary({**speed, "parts_by_share": speed["parts_by_share"][::-1]})
    assert shown is not None and planted is not None
    assert (
        planted.removeprefix("speed: ").split(", ")
        == shown.removeprefix("speed: ").split(", ")[::-1]
    )


def test_the_step_splits_parts_come_in_the_documents_order():
    assert by_share({"draft": 0.2, "verify": 0.5, "rest": 0.3}) == ["verify", "rest", "draft"]
    assert by_share({"draft": 0.3, "verify": 0.3, "rest": None}) == ["draft", "verify"]
    split = {
        "step_s": 0.001,
        "draft_share": 0.2,
        "verify_share": 0.5,
        "rest_share": 0.3,
        "adds_up": True,
        "parts_by_share": ["rest", "draft", "verify"],  # planted: the shares say otherwise
    }
    assert summary_line(split) == "our warm step 1ms: rest 30.0%, drafting 20.0%, verifying 50.0%"


def test_a_request_collapse_names_the_documents_lowest_request(saved):
    document = copy.deepcopy(saved)
    leg = document["legs"][0]
    leg["flags"] = ["request collapse"]
    leg["lowest_request"] = {"w": "planted-w", "seq": 77, "accept_rate": 0.042, "steps": 9}
    text = _words(terminal(document, width=100))
    assert "request collapse: request 77 of writer planted-w accepted 4.2% over 9 steps" in text


def test_a_fold_from_the_records_counters_renders_in_every_presenter(tmp_path):
    """Without a step log the step figures (windows, their pools, requests) are null: every
    presenter says so instead of failing on them."""
    out = tmp_path / "fold.json"
    assert cli([str(ROOT / "fixtures" / "vllmcpp" / "our-arm.json"), "--json", str(out)]) == 0
    document = json.loads(out.read_bytes())
    assert all(leg["window_pools"] is None for leg in document["legs"])
    assert "needs a step log" in terminal(document, width=100)
    assert "needs a step log" in markdown_record(document)
    windows = next(chart for chart in charts(document) if chart.name == "windows")
    assert windows.draw is None
    assert b"<html" in page(document)


@pytest.fixture(scope="module")
def with_oracle_steps(tmp_path_factory) -> dict:
    """Ours beside vLLM's per-request steps (detailed) and its histograms (summary), saved."""
    requests = ORACLES / "vllm-requests"
    ours = ORACLES / "vllm-real" / "ours"
    out = tmp_path_factory.mktemp("doc") / "fold.json"
    argv = [
        str(ours / "our-arm.json"),
        str(ours / "steps.jsonl"),
        f"--vs=vllm={requests / 'offline' / 'requests.jsonl'}",
        f"--vs=sum={requests / 'summary.jsonl'}",
        "--bootstrap",
        "50",
    ]
    assert cli([*argv, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_bytes())


def test_where_an_arms_step_figures_came_from_is_the_documents_sentence(with_oracle_steps):
    document = copy.deepcopy(with_oracle_steps)
    rows = {row["name"]: row for row in document["comparison"]["rows"]}
    assert [rows[name]["step_figures"]["source"] for name in ("ours", "vllm", "sum")] == [
        "step_log",
        "oracle_steps",
        "oracle_histograms",
    ]
    saved_text = {name: rows[name]["step_figures"]["source_text"] for name in rows}
    for name in ("ours", "vllm", "sum"):
        rows[name]["step_figures"]["source_text"] = f"planted words for {name}"
    shown = {
        "terminal": _words(terminal(document, width=100, details=True)),
        "markdown": _words(markdown_record(document)),
        "page": _words(page(document).decode()),
    }
    for where, text in shown.items():
        for name in ("ours", "vllm", "sum"):
            steps = rows[name]["step_figures"]["steps"]
            assert f"{name}: planted words for {name}, {steps} steps" in text, (where, name)
            assert f"{saved_text[name]}, {steps} steps" not in text, (where, name)
    # the saved sentences are what an untouched document shows
    untouched = _words(terminal(with_oracle_steps, width=100, details=True))
    assert "ours: step log, " in untouched
    assert "vllm: vLLM's per-request spec_decode_metrics (detailed), " in untouched


def _flagged(saved: dict, legs: list[int]) -> dict:
    """The saved document with ``legs`` flagged "emitted != completion", leg 7 "no steps", and
    each flagged leg's expected tokens its completion tokens + 100 + its index."""
    document = copy.deepcopy(saved)
    for leg in document["legs"]:
        leg["flags"] = []
    for index in legs:
        leg = document["legs"][index]
        leg["flags"] = ["emitted != completion"]
        leg["expected_completion_tokens"] = leg["completion_tokens"] + 100 + index
    document["legs"][7]["flags"] = ["no steps"]
    return document


def _flag_text(document: dict, *, details: bool = False) -> str:
    text = _words(terminal(document, width=400, details=details))
    return text[text.index("Acceptance per leg") : text.index("Fold (warm")]


def test_many_flagged_legs_print_a_line_a_flag_and_details_a_line_a_leg(saved):
    """Past four flagged legs, a flag's legs share a line that names them and describes the
    first (a load test's 50 legs flagged alike took 150 lines before the fold); --details
    and a few flagged legs keep a line a leg."""
    legs = saved["legs"]
    document = _flagged(saved, [0, 1, 2, 4, 5])
    first = legs[0]["completion_tokens"]
    shown = _flag_text(document)
    assert (
        "legs 0-2, 4-5! (5 legs; leg 0 shown, --details lists each) emitted != completion: "
        f"completion_tokens {first}, but the log's verify steps emitted"
    ) in shown
    assert f"that makes {first + 100} (state" in shown
    assert "leg 7! no verify step with a draft in this leg's window" in shown
    assert "leg 1! " not in shown and "leg 5! " not in shown
    each = _flag_text(document, details=True)
    for index in (0, 1, 2, 4, 5):
        expected = legs[index]["completion_tokens"] + 100 + index
        assert f"leg {index}! emitted != completion" in each
        assert f"that makes {expected} (state" in each
    assert "legs 0-2" not in each
    few = _flag_text(_flagged(saved, [1, 4, 5]))  # four flagged legs in all: a line each
    assert [f"leg {i}! " in few for i in (1, 4, 5, 7)] == [True] * 4 and "legs " not in few


def test_the_warm_legs_read_as_ranges_of_consecutive_indices(saved):
    document = copy.deepcopy(saved)
    document["warm"]["legs"] = [1, 2, 3, 5, 7, 8]
    assert "warm legs: 1-3, 5, 7-8" in _words(terminal(document, width=200, details=True))
    assert "(1-3, 5, 7-8)" in markdown_record(document)


def test_the_page_groups_many_flagged_legs_and_folds_every_legs_line_below(saved):
    document = _flagged(saved, [0, 1, 2, 4, 5])
    shown = page(document).decode()
    section = re.search(r'<section id="attention">(.*?)</section>', shown, re.DOTALL)
    assert section is not None
    grouped, _, folded = section[1].partition("<details>")
    assert "legs 0-2, 4-5! (5 legs; leg 0 shown, every leg below) emitted != completion" in grouped
    assert "--details" not in section[1]
    assert "<summary>Every flagged leg (6)</summary>" in folded
    for index in (0, 1, 2, 4, 5, 7):
        assert f"<li>leg {index}! " in folded
    few = re.search(
        r'<section id="attention">(.*?)</section>', page(_flagged(saved, [1])).decode(), re.DOTALL
    )
    assert few is not None and "<details>" not in few[1] and "leg 1! emitted" in few[1]


def test_leg_lists_in_the_step_figures_and_the_step_split_read_as_ranges(saved):
    from fold.present.step_figures import about_lines
    from fold.present.step_split import left_out_text

    document = copy.deepcopy(saved)
    row = next(row for row in document["comparison"]["rows"] if row.get("step_figures"))
    row["step_figures"]["flags"] = {"collapse": [0, 1, 2, 5], "request collapse": []}
    (line,) = (line for line in about_lines(document) if line.startswith(f"{row['name']}:"))
    assert "; collapse in legs 0-2, 5" in line and "request collapse" not in line
    split = {"untimed_legs": [1, 2, 3, 7], "untimed_requests": 0, "cadence_step_s": 0.001}
    assert "legs 1-3, 7 carried no duration" in left_out_text(split)
