"""The charts (--html, --plots): every chart drawn from the worked example, offline, the same
bytes for the same inputs, and the extra named when matplotlib is missing."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from PIL import Image

from fold.cli import main as cli
from fold.compare.waterfall import waterfall
from fold.present.chart import DPI, HEIGHT_IN, WIDTH_IN, render
from fold.present.charts import charts
from fold.present.page import page

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "fixtures" / "gate-example"
VLLM = ROOT / "fixtures" / "oracles" / "vllm-gate-arm.json"
VLLMCPP = ROOT / "fixtures" / "vllmcpp"
CHART_NAMES = [
    "per-position",
    "windows",
    "per-leg",
    "gap",
    "intervals",
    "time-shares",
    "another-k",
    "requests",
    "by-output-position",
]


@pytest.fixture(scope="module")
def gate_document(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("gate") / "fold.json"
    argv = [str(GATE / "our-arm.json"), str(GATE / "steps.jsonl"), f"--vs=vllm={VLLM}"]
    assert cli([*argv, "--json", str(out), "--bootstrap", "200"]) == 0
    return json.loads(out.read_bytes())


def test_the_gate_example_draws_every_chart(gate_document):
    found = charts(gate_document)
    assert [chart.name for chart in found] == CHART_NAMES
    assert [chart.missing for chart in found] == [None] * len(CHART_NAMES)
    assert all(chart.caption.endswith(".") and chart.caption.count(". ") == 0 for chart in found)


def test_the_page_is_self_contained(gate_document):
    text = page(gate_document).decode()
    sections = re.findall(r'<section class="chart" id="([^"]+)">(.*?)</section>', text, re.DOTALL)
    # in the page's order: the per-request charts beside their figures, then by question
    # (acceptance, the what-if, the gap per oracle, the time leg by leg)
    assert [name for name, _ in sections] == [
        "requests", "by-output-position", "per-position", "windows", "another-k", "gap",
        "time-shares", "intervals", "per-leg",
    ]  # fmt: skip
    assert sorted(name for name, _ in sections) == sorted(CHART_NAMES)
    for name, body in sections:
        assert body.count("<svg") == 1, name
        assert "<figcaption>" in body, name
    assert "<script" not in text
    # the SVG namespace is a name, not a fetch: nothing else may point off the page
    assert not re.search(r'\b(?:src|href)="(?!#)', text)
    assert "url(http" not in text and "@import" not in text


def _pixels(png: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(png))
    image.load()
    return image.convert("RGB")


@pytest.mark.parametrize("name", CHART_NAMES)
def test_each_png_has_its_size_and_marks(gate_document, name):
    (chart,) = [chart for chart in charts(gate_document) if chart.name == name]
    png = render(chart, "png")
    image = _pixels(png)
    assert image.size == (round(WIDTH_IN * DPI), round(HEIGHT_IN * DPI))
    colours = image.getcolors(maxcolors=1 << 16)
    assert colours is not None and len(colours) > 20, "a blank or one-colour picture"
    non_white = sum(count for count, colour in colours if colour != (255, 255, 255))
    assert non_white > 0.02 * image.size[0] * image.size[1]


def test_the_same_inputs_give_the_same_bytes(gate_document):
    again = json.loads(json.dumps(gate_document))
    for first, second in zip(charts(gate_document), charts(again), strict=True):
        for fmt in ("png", "svg"):
            assert render(first, fmt) == render(second, fmt), (first.name, fmt)
    assert page(gate_document) == page(again)


def test_plots_and_markdown_links(tmp_path):
    plots, record = tmp_path / "plots", tmp_path / "record.md"
    argv = [str(GATE / "our-arm.json"), str(GATE / "steps.jsonl"), f"--vs=vllm={VLLM}"]
    assert cli([*argv, "--plots", str(plots), "--markdown", str(record), "--quiet"]) == 0
    assert sorted(path.name for path in plots.iterdir()) == sorted(
        f"{name}.{fmt}" for name in CHART_NAMES for fmt in ("png", "svg")
    )
    text = record.read_text()
    for name in CHART_NAMES:
        assert f"](plots/{name}.png)" in text


def test_the_waterfall_multiplies_out_to_r(gate_document):
    """The document's gap bars: acceptance, the speed parts (leg_factor ** share, worked out
    here from the split's shares), then r; each factor's bar runs from the product of those
    before it, multiplied here by hand, and the ratio's from 1."""
    block = gate_document["comparison"]
    gap, speed = block["gaps"]["vllm"], block["speed"]["vllm"]
    bars = block["waterfalls"]["vllm"]["bars"]
    assert [bar["part"] for bar in bars] == [
        "acceptance",
        "slower_steps",
        "before_first_step",
        "stalls",
        "tail",
        "ratio",
    ]
    shares = speed["parts"]
    factors = [gap["acceptance_factor"]] + [
        speed["leg_factor"] ** shares[name]
        for name in ("steps", "before_first_step", "stalls", "tail")
    ]
    level = 1.0
    for bar, factor in zip(bars, factors, strict=False):
        ends = sorted((level, level * factor))
        assert bar["factor"] == pytest.approx(factor, rel=1e-12)
        assert (bar["bottom"], bar["bottom"] + bar["height"]) == pytest.approx(ends, rel=1e-12)
        assert bar["top"] == pytest.approx(level * factor, rel=1e-12)
        assert bar["kind"] == ("gain" if factor >= 1 else "cost")
        level *= factor
    assert level == pytest.approx(gap["ratio"], rel=1e-9)
    ratio = bars[-1]
    assert (ratio["kind"], ratio["factor"], ratio["top"]) == ("total", gap["ratio"], gap["ratio"])
    assert ratio["bottom"] == min(1.0, gap["ratio"]) and ratio["height"] == pytest.approx(
        abs(gap["ratio"] - 1.0), rel=1e-12
    )
    low, high = gap["ratio_ci"]  # the ratio's whisker: its interval about r, on the scale of 1
    assert ratio["whisker"] == pytest.approx([gap["ratio"] - low, high - gap["ratio"]])
    ends = [1.0, low, high] + [e for bar in bars[:-1] for e in (bar["bottom"], bar["top"])]
    acceptance = bars[0]
    if acceptance["whisker"] is not None:
        ends += list(gap["acceptance_factor_ci"])
    assert block["waterfalls"]["vllm"]["axis"] == pytest.approx([min(ends), max(ends)])


def test_a_waterfall_passes_a_factor_not_recorded_and_stands_on_the_product():
    """By hand: acceptance 0.5 with its interval, a speed factor not recorded (its place kept,
    the level unchanged), the ratio 0.25 from 1."""
    gap = {
        "acceptance_factor": 0.5,
        "acceptance_factor_ci": [0.4, 0.6],
        "speed_factor": None,
        "speed_factor_ci": None,
        "ratio": 0.25,
        "ratio_ci": None,
    }
    found = waterfall(gap, None).to_json()
    assert found["bars"] == [
        {"part": "acceptance", "factor": 0.5, "kind": "cost", "bottom": 0.5, "height": 0.5,
         "top": 0.5, "whisker": [0.5 - 0.4, 0.6 - 0.5]},
        {"part": "speed", "factor": None, "kind": None, "bottom": None, "height": None,
         "top": None, "whisker": None},
        {"part": "ratio", "factor": 0.25, "kind": "total", "bottom": 0.25, "height": 0.75,
         "top": 0.25, "whisker": None},
    ]  # fmt: skip
    assert found["axis"] == [0.25, 1.0]
    parts = {"part_factors": {"steps": 2.0, "before_first_step": 0.5, "stalls": None}}
    stacked = waterfall({**gap, "acceptance_factor_ci": None}, parts).to_json()["bars"]
    assert [(bar["part"], bar["bottom"], bar["top"]) for bar in stacked] == [
        ("acceptance", 0.5, 0.5),
        ("faster_steps", 0.5, 1.0),  # from the level acceptance left, 0.5 x 2
        ("before_first_step", 0.5, 0.5),  # 1.0 x 0.5
        ("stalls", None, None),
        ("tail", None, None),
        ("ratio", 0.25, 0.25),
    ]


def test_a_fold_without_an_oracle_says_what_the_gap_chart_needs(tmp_path):
    out = tmp_path / "fold.json"
    assert (
        cli([str(VLLMCPP / "our-arm.json"), str(VLLMCPP / "steps.jsonl"), "--json", str(out)]) == 0
    )
    found = {chart.name: chart for chart in charts(json.loads(out.read_bytes()))}
    assert found["gap"].draw is None and "--vs" in found["gap"].missing
    assert all(found[name].draw is not None for name in CHART_NAMES if name != "gap")
    assert (
        "Not drawn: Where the gap goes (needs an oracle (--vs))."
        in page(json.loads(out.read_bytes())).decode()
    )


def test_without_matplotlib_the_command_names_the_extra(tmp_path, monkeypatch, capsys):
    for module in [name for name in sys.modules if name.split(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = [str(GATE / "our-arm.json"), str(GATE / "steps.jsonl")]
    assert cli([*argv, "--html", str(tmp_path / "page.html"), "--quiet"]) == 2
    assert "pip install 'fold-acceptance[report]'" in capsys.readouterr().err
    assert not (tmp_path / "page.html").exists()


def test_windows_are_pooled_by_their_counts_past_the_cap():
    from fold.folding.windows import window_pools
    from fold.inputs.acceptance import Counts

    windows = [Counts(10, 70, 30), Counts(10, 70, 10), Counts(5, 35, 35), Counts(3, 0, 0)]
    # by hand: two pools of two windows; four pools of one, the last with nothing proposed
    assert [(p["steps"], p["accept_rate"]) for p in window_pools(windows, 2)] == [
        (20, 40 / 140),
        (8, 1.0),
    ]
    assert [(p["steps"], p["accept_rate"]) for p in window_pools(windows, 4)] == [
        (10, 30 / 70),
        (10, 10 / 70),
        (5, 1.0),
        (3, None),
    ]
    # three pools of four windows: sizes 1, 1, 2 (as even as four allows, the last the larger)
    assert [p["steps"] for p in window_pools(windows, 3)] == [10, 10, 8]
    assert window_pools([], 10) == ()
    assert window_pools([], 10).to_json() == {
        "steps": [],
        "proposed": [],
        "accepted": [],
        "accept_rate": [],
    }


OURS_VS_OURS = ROOT / "fixtures" / "ours-vs-ours"


def test_two_runs_of_ours_are_both_in_every_chart(tmp_path):
    from matplotlib.figure import Figure

    out = tmp_path / "fold.json"
    after, before = OURS_VS_OURS / "after", OURS_VS_OURS / "before"
    argv = [str(after / "our-arm.json"), str(after / "steps.jsonl")]
    argv += [f"--vs=before={before / 'our-arm.json'}", f"--vs-log=before={before / 'steps.jsonl'}"]
    assert cli([*argv, "--json", str(out), "--bootstrap", "100"]) == 0
    found = {chart.name: chart for chart in charts(json.loads(out.read_bytes()))}
    assert all(chart.draw is not None for chart in found.values())

    def drawn(name: str) -> Figure:
        figure = Figure()
        found[name].draw(figure)
        return figure

    # per position: a solid and a dashed curve for each run
    (axes,) = drawn("per-position").axes
    assert [line.get_label() for line in axes.get_lines()] == [
        "ours",
        "ours, conditional",
        "before",
        "before, conditional",
    ]
    # a panel per run (per-leg: two rows, a column per run); the gap: one column, "before"
    assert len(drawn("windows").axes) == 2
    assert len(drawn("intervals").axes) == 2
    assert len(drawn("time-shares").axes) == 2
    assert len(drawn("per-leg").axes) == 4
    assert len(drawn("gap").axes) == 1
    assert found["windows"].panels == found["intervals"].panels == 2


def test_the_page_shows_what_the_terminal_never_hides(tmp_path, gate_document):
    """A lost line and the leg it leaves short of its completion tokens are on the page, in the
    terminal's words; a clean fold has no such section."""
    lines = (GATE / "steps.jsonl").read_bytes().splitlines(keepends=True)
    dropped = json.loads(lines[4])
    seconds = dropped["t_ns"] / 1e9
    legs = json.loads((GATE / "our-arm.json").read_bytes())["legs"]
    (index,) = (  # the leg whose window and label hold the dropped line, from the record
        i
        for i, leg in enumerate(legs)
        if leg["leg"] == dropped["leg"]
        and leg["generate_start_unix"] <= seconds <= leg["generate_end_unix"]
    )
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(lines[:4] + lines[5:]))  # writer's line n is missing: one lost
    out = tmp_path / "fold.json"
    assert cli([str(GATE / "our-arm.json"), str(log), "--json", str(out), "--bootstrap", "0"]) == 0
    shown = page(json.loads(out.read_bytes())).decode()
    section = re.search(r'<section id="attention">(.*?)</section>', shown, re.DOTALL)
    assert section is not None
    assert f"1 lost of {len(lines) - 1} read" in section[1]
    assert f"leg {index}! emitted != completion" in section[1]
    assert 'id="attention"' not in page(gate_document).decode()
