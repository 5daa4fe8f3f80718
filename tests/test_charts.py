"""Every chart shows the document's figures: its marks, read back from the matplotlib objects
it drew, equal what the document says (per position per arm, windows, legs, the waterfall's
factors, step intervals, time shares), worked out here from the document's counts, not with
the charts' own helpers. A chart drawn from other data (a swapped arm, the wrong leg) fails
the same check.
"""

from __future__ import annotations

import copy
import json
import math
import statistics
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from fold.cli import main as cli
from fold.compare.waterfall import waterfall
from fold.present.chart import log_ticks, render
from fold.present.charts import charts

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "fixtures" / "gate-example"
ORACLES = ROOT / "fixtures" / "oracles"
OURS_VS_OURS = ROOT / "fixtures" / "ours-vs-ours"


def _document(tmp_path_factory, argv: list[str]) -> dict:
    out = tmp_path_factory.mktemp("doc") / "fold.json"
    assert cli([*argv, "--json", str(out), "--bootstrap", "100", "--quiet"]) == 0
    return json.loads(out.read_bytes())


@pytest.fixture(scope="module")
def gate(tmp_path_factory) -> dict:
    """The worked example against an oracle with per-position counts over the warm legs, one
    over all legs (so ours is compared over all legs too) and SGLang."""
    return _document(
        tmp_path_factory,
        [
            str(GATE / "our-arm.json"),
            str(GATE / "steps.jsonl"),
            f"--vs=vllm={ORACLES / 'vllm-arm.json'}",
            f"--vs=gate={ORACLES / 'vllm-gate-arm.json'}",
            f"--vs=sglang={ORACLES / 'sglang-legs.jsonl'}",
        ],
    )


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> dict:
    after, before = OURS_VS_OURS / "after", OURS_VS_OURS / "before"
    return _document(
        tmp_path_factory,
        [
            str(after / "our-arm.json"),
            str(after / "steps.jsonl"),
            f"--vs=before={before / 'our-arm.json'}",
            f"--vs-log=before={before / 'steps.jsonl'}",
        ],
    )


def drawn(document: dict, name: str) -> Figure:
    (chart,) = [chart for chart in charts(document) if chart.name == name]
    assert chart.draw is not None, chart.missing
    figure = Figure()
    chart.draw(figure)
    return figure


def runs(document: dict) -> list[tuple[str, dict]]:
    """Our run and each other run of ours, in the order their panels are drawn."""
    others = document.get("runs") or {}
    return [("ours", document), *((name, run["fold"]) for name, run in others.items())]


def rate(accepted: int, proposed: int) -> float:
    return math.nan if proposed == 0 else 100 * accepted / proposed


def same(found: list[float], expected: list[float]) -> bool:
    return len(found) == len(expected) and all(
        (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-9)
        for a, b in zip(found, expected, strict=True)
    )


# --- what each chart must show, and what it shows -------------------------------------------


def assert_per_position(document: dict, figure: Figure) -> None:
    """A solid curve per arm with per-position counts: 100 * count_i / S."""
    expected = {
        row["name"]: [100 * count / row["steps"] for count in row["per_position"]]
        for row in document["comparison"]["rows"]
        if row["per_position"] and row["steps"]
    }
    (axes,) = figure.axes
    solid = {
        line.get_label(): list(line.get_ydata())
        for line in axes.get_lines()
        if line.get_linestyle() == "-"
    }
    assert sorted(solid) == sorted(expected)
    for name, values in expected.items():
        assert same(solid[name], values), (name, solid[name], values)
    # dashed: of the steps that accepted position i - 1 (all S for position 0), the share that
    # accepted i; undefined (not drawn) after a position no step accepted
    conditional = {}
    for row in document["comparison"]["rows"]:
        if row["per_position"] and row["steps"]:
            before = [row["steps"], *row["per_position"][:-1]]
            conditional[f"{row['name']}, conditional"] = [
                100 * count / reached if reached else math.nan
                for count, reached in zip(row["per_position"], before, strict=True)
            ]
    dashed = {
        line.get_label(): list(line.get_ydata())
        for line in axes.get_lines()
        if line.get_linestyle() == "--"
    }
    assert sorted(dashed) == sorted(conditional)
    for name, values in conditional.items():
        assert same(dashed[name], values), (name, dashed[name], values)
    # positions numbered from 1, as the step figures' table ("pos 1") and docs/units.md do
    for line in axes.get_lines():
        assert list(line.get_xdata()) == list(range(1, len(line.get_ydata()) + 1)), line


def by_row(columns: dict[str, list]) -> list[dict]:
    """A leg's windows or pools (an array per figure, format 5) as an object per part."""
    return [dict(zip(columns, part, strict=True)) for part in zip(*columns.values(), strict=True)]


def _consecutive_runs(pools: list[dict], windows: list[dict]) -> bool:
    """Whether each pool sums a run of consecutive windows, in order, every window once."""
    keys = ("steps", "proposed", "accepted")
    start = 0
    for pool in pools:
        sums = dict.fromkeys(keys, 0)
        while start < len(windows) and any(sums[k] != pool[k] for k in keys):
            if any(sums[k] > pool[k] for k in keys):
                return False
            for key in keys:
                sums[key] += windows[start][key]
            start += 1
        if any(sums[k] != pool[k] for k in keys):
            return False
    return start == len(windows)


def assert_windows(document: dict, figure: Figure) -> None:
    """A step line per leg with windows, a panel per run: edges at the cumulative steps of the
    document's pools of windows (``window_pools.chart``), each at its pool's A/P; and those
    pools hold the leg's windows, every one once, in order."""
    panels = figure.axes
    folds = runs(document)
    assert len(panels) == len(folds)
    for axes, (_name, fold) in zip(panels, folds, strict=True):
        lines = {line.get_gid(): line for line in axes.get_lines()}
        legs = [leg for leg in fold["legs"] if leg["windows"] and leg["windows"]["steps"]]
        assert sorted(lines) == sorted(f"leg-{leg['index']}" for leg in legs)
        for leg in legs:
            line = lines[f"leg-{leg['index']}"]
            pools = by_row(leg["window_pools"]["chart"])
            assert _consecutive_runs(pools, by_row(leg["windows"])), leg["index"]
            edges = [0]
            for pool in pools:
                edges.append(edges[-1] + pool["steps"])
            rates = [rate(p["accepted"], p["proposed"]) for p in pools]
            assert same(list(line.get_xdata()), edges), leg["index"]
            assert same(list(line.get_ydata()), [*rates, rates[-1]]), leg["index"]


def assert_per_leg(document: dict, figure: Figure) -> None:
    """Per run: each leg's tok/s and 1 + A/S as points, the warm fold as a line."""
    folds = runs(document)
    grid = figure.axes  # two rows, a column per run
    assert len(grid) == 2 * len(folds)
    for column, (_name, fold) in enumerate(folds):
        legs = fold["legs"]
        warm = [leg for leg in legs if leg["warm"]]
        expected_rows = [
            (
                {(leg["index"], leg["tok_s"]) for leg in legs},
                statistics.median(leg["tok_s"] for leg in warm),
            ),
            (
                {(leg["index"], 1 + leg["accepted"] / leg["steps"]) for leg in legs},
                1 + sum(leg["accepted"] for leg in warm) / sum(leg["steps"] for leg in warm),
            ),
        ]
        for row, (points, folded) in enumerate(expected_rows):
            axes = grid[row * len(folds) + column]
            shown = sorted(
                (float(x), float(y))
                for collection in axes.collections
                for x, y in collection.get_offsets()
            )
            assert same([x for x, _ in shown], [x for x, _ in sorted(points)])
            assert same([y for _, y in shown], [y for _, y in sorted(points)])
            (level,) = [line.get_ydata()[0] for line in axes.get_lines()]
            assert level == pytest.approx(folded, rel=1e-9)
            # warm legs filled, cold ones hollow (a white face)
            hollow = sorted(
                int(x)
                for collection in axes.collections
                if len(collection.get_facecolors())
                and tuple(collection.get_facecolors()[0][:3]) == (1.0, 1.0, 1.0)
                for x, _ in collection.get_offsets()
            )
            assert hollow == sorted(leg["index"] for leg in legs if not leg["warm"])


def assert_waterfall(document: dict, figure: Figure) -> None:
    """Per oracle: acceptance from 1, the speed parts stacked on it, r from 1; r equals the
    tok/s of the two rows divided, and the bars multiply out to it."""
    block = document["comparison"]
    rows = {row["name"]: row for row in block["rows"]}
    panels = {axes.get_title(): axes for axes in figure.axes}
    assert sorted(panels) == sorted(f"ours vs {name}" for name in block["gaps"])
    for name, gap in block["gaps"].items():
        ours, oracle = rows[gap["ours"]], rows[gap["oracle"]]
        ratio = ours["output_throughput_tok_s"] / oracle["output_throughput_tok_s"]
        bars = {patch.get_gid(): patch for patch in panels[f"ours vs {name}"].patches}
        heights = {gid: (bar.get_y(), bar.get_y() + bar.get_height()) for gid, bar in bars.items()}
        # tok/s are rounded to the record's digits, and r is worked out from them here
        assert heights[f"bar-{len(bars) - 1}"] == pytest.approx(sorted((1.0, ratio)), rel=1e-4)
        level = 1.0
        factors = [gap["acceptance_factor"]]
        parts = (block.get("speed", {}).get(name) or {}).get("parts")
        factors += (
            [gap["speed_factor"] ** share for share in parts.values()]
            if parts
            else [gap["speed_factor"]]
        )
        for position, factor in enumerate(factors):
            low, high = sorted((level, level * factor))
            assert heights[f"bar-{position}"] == pytest.approx((low, high), rel=1e-9)
            level *= factor
        assert level == pytest.approx(ratio, rel=1e-4)


def assert_intervals(document: dict, figure: Figure) -> None:
    """Per leg with intervals: a box from p50 to p90 (ms), a dot at the longest."""
    for axes, (_name, fold) in zip(figure.axes, runs(document), strict=True):
        legs = [leg for leg in fold["legs"] if (leg["cadence"] or {}).get("intervals")]
        boxes = sorted(
            (
                patch.get_x() + patch.get_width() / 2,
                patch.get_y(),
                patch.get_y() + patch.get_height(),
            )
            for patch in axes.patches
        )
        expected = sorted(
            (
                leg["index"],
                1e3 * leg["cadence"]["interval_median_s"],
                1e3 * leg["cadence"]["interval_p90_s"],
            )
            for leg in legs
        )
        assert len(boxes) == len(expected)
        for found, wanted in zip(boxes, expected, strict=True):
            assert found == pytest.approx(wanted, rel=1e-9, abs=1e-9)
        dots = sorted(
            tuple(point)
            for c in axes.collections
            if isinstance(c, PathCollection)  # the dots, not the whiskers and medians
            for point in c.get_offsets()
        )
        longest = sorted((leg["index"], 1e3 * leg["cadence"]["interval_max_s"]) for leg in legs)
        assert len(dots) == len(longest)
        for found, wanted in zip(dots, longest, strict=True):
            assert found == pytest.approx(wanted, rel=1e-9)


def assert_time_shares(document: dict, figure: Figure) -> None:
    """Per warm leg: before the first step, decoding outside stalls, stalls and the tail, as
    percentages of their sum, side by side from 0 to 100."""
    for axes, (_name, fold) in zip(figure.axes, runs(document), strict=True):
        warm = [leg for leg in fold["legs"] if leg["warm"] and leg["cadence"]]
        expected = []
        for leg in warm:
            c = leg["cadence"]
            total = c["first_step_s"] + c["decode_s"] + c["tail_s"]
            stall = c["stall_s"] or 0.0
            expected.append(
                [100 * part / total for part in
                 (c["first_step_s"], c["decode_s"] - stall, stall, c["tail_s"])]
            )  # fmt: skip
        patches = axes.patches
        assert len(patches) == 4 * len(warm)
        # each bar's label names its leg (every leg, when as few as these are drawn)
        labels = {round(tick.get_position()[1]): tick.get_text() for tick in axes.get_yticklabels()}
        for position, leg in enumerate(warm):
            assert labels.get(position) in (None, f"leg {leg['index']}"), (position, labels)
        if len(warm) <= 30:
            assert [labels[position] for position in range(len(warm))] == [
                f"leg {leg['index']}" for leg in warm
            ]
        for part in range(4):
            row = patches[part * len(warm) : (part + 1) * len(warm)]
            assert same([patch.get_width() for patch in row], [shares[part] for shares in expected])
        for patch, shares in zip(patches[-len(warm) :], expected, strict=True):
            assert patch.get_x() + patch.get_width() == pytest.approx(sum(shares))
            assert sum(shares) == pytest.approx(100.0)


def assert_by_position(document: dict, figure: Figure) -> None:
    """A/P per bucket of output position: a point per bucket with drafted steps, at its
    figure, its error bar spanning the bucket's interval, each tick naming the bucket."""
    buckets = [b for b in document["warm"]["by_output_position"]["buckets"] if b["steps"]]
    (axes,) = figure.axes
    (line,) = axes.get_lines()[:1]
    assert same(list(line.get_ydata()), [100 * b["accept_rate"] for b in buckets])
    labels = [tick.get_text() for tick in axes.get_xticklabels()]
    assert labels == [f"{b['from']}-{b['to']}" for b in buckets]
    (bars,) = [c for c in axes.collections if len(c.get_segments()) == len(buckets)]
    for segment, bucket in zip(bars.get_segments(), buckets, strict=True):
        low, high = sorted(point[1] for point in segment)
        interval = bucket["accept_rate_ci"] or [bucket["accept_rate"]] * 2
        assert same([low, high], [100 * interval[0], 100 * interval[1]])


def assert_requests(document: dict, figure: Figure) -> None:
    """The lowest warm requests as bars, each at its accepted / proposed and named by its leg
    and id under it; behind them the band from p10 to p90 of every request's A/P, the median
    and the highest as lines, at the document's figures."""
    spread = document["warm"]["per_request"]
    lowest = [r for r in spread["lowest"][:5] if r["proposed"]]
    rates = spread["spread"]["accept_rate"]
    (axes,) = figure.axes
    bars = [patch for patch in axes.patches if (patch.get_gid() or "").startswith("request-")]
    assert same(
        [bar.get_y() + bar.get_height() for bar in bars],
        [100 * r["accepted"] / r["proposed"] for r in lowest],
    )
    assert [tick.get_text() for tick in axes.get_xticklabels()] == [
        f"leg {r['leg']}\nid {r['seq']}" for r in lowest
    ]
    # each bar carries its value, so a request at 0.0% reads as a figure, not a missing bar
    values = [t for t in axes.texts if (t.get_gid() or "").startswith("request-value-")]
    assert [t.get_text() for t in values] == [
        f"{100 * r['accepted'] / r['proposed']:.1f}%" for r in lowest
    ]
    (band,) = [patch for patch in axes.patches if patch.get_gid() == "p10-p90"]
    assert same([band.get_y(), band.get_y() + band.get_height()],
                [100 * rates["p10"], 100 * rates["p90"]])  # fmt: skip
    lines = {line.get_gid(): list(line.get_ydata()) for line in axes.get_lines()}
    assert same(lines["median"], [100 * rates["p50"]] * 2)
    assert same(lines["max"], [100 * rates["max"]] * 2)


CHECKS = {
    "per-position": assert_per_position,
    "windows": assert_windows,
    "per-leg": assert_per_leg,
    "gap": assert_waterfall,
    "intervals": assert_intervals,
    "time-shares": assert_time_shares,
    "requests": assert_requests,
    "by-output-position": assert_by_position,
}


@pytest.mark.parametrize("name", list(CHECKS))
@pytest.mark.parametrize("which", ["gate", "two_runs"])
def test_each_chart_shows_the_documents_figures(name, which, request):
    document = request.getfixturevalue(which)
    CHECKS[name](document, drawn(document, name))


def test_the_per_position_chart_draws_every_arm_that_counts_positions(gate):
    names = [line.get_label() for line in drawn(gate, "per-position").axes[0].get_lines()]
    assert names[::2] == ["ours", "ours (all legs)", "vllm"]  # gate and sglang count none


# --- the same checks fail on a chart drawn from other data ----------------------------------


def _swap(items: list, a: int, b: int, key: str) -> None:
    items[a][key], items[b][key] = items[b][key], items[a][key]


def _swapped_arms(document: dict) -> dict:
    rows = document["comparison"]["rows"]
    ours = next(i for i, row in enumerate(rows) if row["name"] == "ours")
    vllm = next(i for i, row in enumerate(rows) if row["name"] == "vllm")
    for key in ("per_position", "per_position_rate", "steps"):
        _swap(rows, ours, vllm, key)
    return document


def _wrong_leg(key: str, a: int = 0, b: int = 1):
    def tamper(document: dict) -> dict:
        _swap(document["legs"], a, b, key)
        return document

    return tamper


def _swapped_gaps(document: dict) -> dict:
    gaps = document["comparison"]["gaps"]
    gaps["vllm"], gaps["sglang"] = (
        {**gaps["sglang"], "oracle": "vllm", "ours": gaps["vllm"]["ours"]},
        {**gaps["vllm"], "oracle": "sglang", "ours": gaps["sglang"]["ours"]},
    )
    bars = document["comparison"]["waterfalls"]  # what the chart draws
    bars["vllm"], bars["sglang"] = bars["sglang"], bars["vllm"]
    return document


def _shifted_interval(document: dict) -> dict:
    for bucket in document["warm"]["by_output_position"]["buckets"]:
        if bucket["accept_rate_ci"]:
            bucket["accept_rate_ci"] = [
                bucket["accept_rate_ci"][0] / 2,
                bucket["accept_rate_ci"][1],
            ]
    return document


def _swapped_lowest(document: dict) -> dict:
    _swap(document["warm"]["per_request"]["lowest"], 0, 1, "leg")
    return document


def _moved_median(document: dict) -> dict:
    rates = document["warm"]["per_request"]["spread"]["accept_rate"]
    rates["p50"] = rates["p10"] / 2
    return document


TAMPERED = {
    "per-position": _swapped_arms,
    "windows": _wrong_leg("window_pools"),
    "per-leg": _wrong_leg("tok_s"),
    "gap": _swapped_gaps,
    "intervals": _wrong_leg("cadence"),
    "time-shares": _wrong_leg("cadence", 1, 5),  # two warm legs whose shares differ
    "requests": _swapped_lowest,
    "by-output-position": _shifted_interval,
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_a_chart_drawn_from_other_data_fails_its_check(name, gate):
    tampered = TAMPERED[name](copy.deepcopy(gate))
    with pytest.raises(AssertionError):
        CHECKS[name](gate, drawn(tampered, name))


def test_the_requests_chart_check_sees_a_moved_median(gate):
    with pytest.raises(AssertionError):
        assert_requests(gate, drawn(_moved_median(copy.deepcopy(gate)), "requests"))


# --- axes that stay readable ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("low", "high"),
    [(0.93, 1.03), (0.017, 1.0), (0.01, 100.0), (1.0, 100.0), (1e-6, 1e6), (0.5, 2.0)],
)
def test_log_ticks_are_few_apart_and_inside(low, high):
    ticks = log_ticks(low, high)
    assert 2 <= len(ticks) <= 6
    assert all(low <= tick <= high for tick in ticks)
    assert ticks == sorted(set(ticks))


def _labels_overlap(figure: Figure) -> list[tuple[str, str]]:
    FigureCanvasAgg(figure).draw()
    renderer = figure.canvas.get_renderer()
    found = []
    for axes in figure.axes:
        labels = [t for t in axes.get_yticklabels() if t.get_text() and t.get_visible()]
        boxes = [label.get_window_extent(renderer) for label in labels]
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                if boxes[i].overlaps(boxes[j]):
                    found.append((labels[i].get_text(), labels[j].get_text()))
    return found


@pytest.mark.parametrize("factor", [0.01, 0.017, 0.5, 2.0, 100.0])
def test_the_waterfall_axis_labels_never_overlap(gate, factor):
    document = copy.deepcopy(gate)
    gap = document["comparison"]["gaps"]["vllm"]
    gap.update(ratio=factor, acceptance_factor=0.98, speed_factor=factor / 0.98)
    gap.update(ratio_ci=None, acceptance_factor_ci=None, speed_factor_ci=None)
    speed = document["comparison"]["speed"].get("vllm")
    document["comparison"]["waterfalls"]["vllm"] = waterfall(gap, speed).to_json()
    import matplotlib

    from fold.present.chart import _STYLE

    with matplotlib.rc_context(_STYLE):
        figure = Figure(figsize=(7.2, 3.6), dpi=100, layout="constrained")
        (chart,) = [c for c in charts(document) if c.name == "gap"]
        chart.draw(figure)
        assert _labels_overlap(figure) == []
    assert render(chart, "svg")  # and it renders


def test_the_overlap_check_sees_crowded_labels():
    """The check above can fail: matplotlib's default minor labels on a log axis crowd."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    figure = Figure(figsize=(7.2, 3.6), dpi=100)
    axes = figure.subplots()
    axes.bar([0], [0.99], bottom=0.01)
    axes.set_yscale("log")
    axes.yaxis.set_minor_locator(LogLocator(subs="all"))
    axes.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:.2f}"))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.2f}"))
    figure.canvas = FigureCanvasAgg(figure)
    FigureCanvasAgg(figure).draw()
    renderer = figure.canvas.get_renderer()
    labels = [
        t
        for t in axes.get_yticklabels(minor=True) + axes.get_yticklabels()
        if t.get_text() and t.get_visible()
    ]
    boxes = [label.get_window_extent(renderer) for label in labels]
    assert any(
        boxes[i].overlaps(boxes[j]) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
    )
