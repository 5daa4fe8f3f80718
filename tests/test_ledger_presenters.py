"""The ledger's presenters read, never compute: the run list, a figure's history and ``--check``
are worded from fields the ledger's builders (``fold.ledger.history``, ``fold.ledger.check``)
worked out, and what they print for a recorded ledger is the text written here by hand.

Two checks. The code (``tests/computing.py``, the check every presenter is held to by
``tests/test_presenters_compute.py``, here with no allowance at all): no arithmetic, no
ordering of numbers and no counting or summing
(``sum``, ``len``, ``abs``, ``min``, ``max``, ``round``, ``sorted``, ``math``, ``statistics``) in
``fold/present/history.py``, ``fold/present/check.py`` and ``fold/present/history_page.py`` (the
history's chart: where its points, error bars and colours go is the history's ``chart``
block); a number is turned into text by the formats kit (``fold/present/table.py``: one number
in, its text out), text is laid out by ``table_layout.py`` and ``markdown_table.py``. Planted
computations show the check finds each form. The behaviour: ``fixtures/ledger/recorded/`` is a
ledger folder of five toy gates kept on five days (seeds 1-3 of main, the one-less log as
``slower``, a ``--bootstrap 0`` run), and what the command prints for it, and what the history's
chart draws, is made here from its Parquet files read by polars, with this
file's own rounding, alignment and statistics.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from pathlib import Path

import polars as pl
import pytest
from computing import computations

from fold.cli import main

ROOT = Path(__file__).resolve().parents[1]
PRESENT = ROOT / "fold" / "present"
LEDGER_PRESENTERS = ("history.py", "check.py", "history_page.py")
RECORDED = ROOT / "fixtures" / "ledger" / "recorded"


def test_the_ledger_presenters_compute_nothing():
    found = {
        name: places
        for name in LEDGER_PRESENTERS
        if (places := computations((PRESENT / name).read_text()))
    }
    assert found == {}


@pytest.mark.parametrize(
    "planted",
    [
        "def total(history):\n    return sum(len(g['runs']) for g in history['groups'])\n",
        "def shown(check):\n    return f\"{100 * check['relative']:+.1f}%\"\n",
        "def side(check):\n    return 'below' if check['difference'] < 0 else 'above'\n",
        "def size(check):\n    return abs(check['difference'])\n",
        "def flip(check):\n    return -check['difference']\n",
        "def count(data):\n    n = 0\n    n += data['counts']['alert']\n    return n\n",
        "def runs(baseline):\n    return f\"{len(baseline['runs'])} runs\"\n",
        "import math\n",
        "def ratio(a, b):\n    return a['value'] / b['value']\n",
        "def both(a, b):\n    return a['steps'] + b['steps']\n",
        # the chart's own sums, as history_page.py once made them
        "def ys(points, scale):\n    return [scale * p['value'] for p in points]\n",
        "def colour(index):\n    return PALETTE[index % len(PALETTE)]\n",
        "def reach(entry, scale):\n"
        "    distance = scale * (entry['value'] - entry['ci'][0])\n"
        "    return max(distance, 0.0)\n",
        "def note(text):\n    return text if len(text) <= 40 else text[:39]\n",
        "def order(groups):\n    return sorted(e['run'] for g in groups for e in g['runs'])\n",
    ],
)
def test_a_planted_computation_is_found(planted):
    for name in LEDGER_PRESENTERS:
        assert computations((PRESENT / name).read_text() + "\n" + planted), name


def test_text_joined_and_words_chosen_are_not_taken_for_computing():
    source = (
        "def line(check, rows):\n"
        "    mark = '-' * 3\n"
        "    head = 'run ' + f\"{check['run']}\" + '\\n'\n"
        "    plural = 's' if check['count'] != 1 else ''\n"
        "    return f'{mark}{head}' + plural.upper() + ', '.join(rows)\n"
    )
    assert computations(source) == []


# -- what the command prints for the recorded ledger, made here from its files ----------------

Z = statistics.NormalDist().inv_cdf(0.975)  # the 95% intervals the fold draws


def _table(name: str) -> pl.DataFrame:
    return pl.read_parquet(str(RECORDED / name / "*" / "*.parquet"), hive_partitioning=True)


@pytest.fixture(scope="module")
def kept() -> dict[int, dict]:
    """Each recorded run's kept time, labels, arm and warm figures, read by polars."""
    runs = {
        row["run_id"]: {
            "kept": row["kept_at"].strftime("%Y-%m-%d %H:%M:%S"),
            "labels": {},
            "figures": {},
        }
        for row in _table("runs").iter_rows(named=True)
    }
    for row in _table("labels").sort("key").iter_rows(named=True):
        runs[row["run_id"]]["labels"][row["key"]] = row["value"]
    for row in _table("inputs").iter_rows(named=True):
        if row["role"] == "arm":
            runs[row["run_id"]]["arm"] = row["name"]
    for row in _table("figures").iter_rows(named=True):
        if row["fold"] == "warm" and row["position"] is None and row["versus"] is None:
            interval = None if row["ci_low"] is None else (row["ci_low"], row["ci_high"])
            runs[row["run_id"]]["figures"][row["figure"]] = (row["value"], interval)
    assert sorted(runs) == [1, 2, 3, 4, 5]
    return runs


def _percent(value: float) -> str:
    return f"{value * 100:.1f}%"


def _as(figure: str):
    return {"accept_rate": _percent, "mean_acceptance_length": lambda v: f"{v:.2f}",
            "output_throughput_tok_s": lambda v: f"{v:.3f}"}[figure]  # fmt: skip


def _aligned(rows: list[list[str]]) -> str:
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    rows = [rows[0], ["-" * w for w in widths], *rows[1:]]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in rows
    )


def _side(value: float, before: tuple[float, float] | None) -> str | None:
    """Where a figure lies against the previous run's interval: None inside or with none."""
    if before is None:
        return None
    return "above" if value > before[1] else "below" if value < before[0] else None


def _printed(capsys, *argv: str) -> tuple[int, str]:
    code = main(["ledger", str(RECORDED), *argv])
    return code, capsys.readouterr().out


def test_the_run_list_prints_as_written_by_hand(kept, capsys):
    names = ("accept_rate", "mean_acceptance_length", "output_throughput_tok_s")
    rows = [["run", "kept (UTC)", "arm record", "A/P", "1 + A/S", "tok/s", "compared with",
             "labels"]]  # fmt: skip
    before: dict[str, tuple[float, float] | None] = dict.fromkeys(names)
    flagged = 0
    for run_id, run in sorted(kept.items()):
        cells, marked = [], False
        for name in names:
            value, interval = run["figures"][name]
            cell = _as(name)(value)
            if interval is not None:
                cell += f" ({_as(name)(interval[0])} – {_as(name)(interval[1])})"
            side = _side(value, before[name])
            if side:
                cell += " !↑" if side == "above" else " !↓"
                marked = True
            cells.append(cell)
            before[name] = interval
        flagged += marked
        labels = " ".join(f"{k}={v}" for k, v in run["labels"].items())
        rows.append([f"{'!' if marked else ''}{run_id}", run["kept"], run["arm"], *cells, "-",
                     labels])  # fmt: skip
    expected = _aligned(rows) + (
        f"5 runs kept (warm legs' figures, 95% intervals); {flagged} runs with a figure outside "
        "the previous run's interval (marked !, ↓ below, ↑ above)\n"
    )
    assert flagged == 2  # run 4 falls below run 3's, run 5 (no interval) above run 4's
    assert _printed(capsys) == (0, expected)


def test_a_figures_history_prints_as_written_by_hand(kept, capsys):
    rows = [["run", "kept (UTC)", "A/P (warm legs)", "95% interval", "against the previous run",
             "labels changed since"]]  # fmt: skip
    previous = None
    flagged = 0
    for run_id, run in sorted(kept.items()):
        value, interval = run["figures"]["accept_rate"]
        shown = "-" if interval is None else f"{_percent(interval[0])} – {_percent(interval[1])}"
        if previous is None:
            against, changed = "first", ""
        else:
            side = _side(value, kept[previous]["figures"]["accept_rate"][1])
            against = (f"! {side.upper()} run {previous}'s interval" if side
                       else f"inside run {previous}'s interval")  # fmt: skip
            before, after = kept[previous]["labels"], run["labels"]
            changed = ", ".join(f"{k}: {before[k]} → {after[k]}" for k in after
                                if before[k] != after[k]) or "-"  # fmt: skip
        flagged += previous is not None and side is not None
        mark = "!" if previous is not None and side else ""
        rows.append([f"{mark}{run_id}", run["kept"], _percent(value), shown, against, changed])
        previous = run_id
    expected = (
        _aligned(rows)
        + f"5 runs: {flagged} runs outside the previous run's 95% interval (marked !)\n"
    )
    assert _printed(capsys, "--figure", "A/P") == (0, expected)


def _signed(text: str) -> str:
    return text.replace("-", "−")


def _decided(kept: dict[int, dict], figure: str, shown: str, as_points: bool) -> tuple[str, bool]:
    """Run 4's ``figure`` against runs 1-3 (labelled branch=main) as the check words it, and
    whether it is an alert, by docs/ledger.md's test written again here: the three baseline
    figures are equal, so no run-to-run spread is estimated and 1.96 is the threshold."""
    form = _as(figure)
    value, (low, high) = kept[4]["figures"][figure]
    baseline = [kept[run]["figures"][figure] for run in (1, 2, 3)]
    assert len({v for v, _ in baseline}) == 1  # so the spread is 0: the normal quantile
    mean = statistics.fmean(v for v, _ in baseline)
    own = statistics.fmean(((hi - lo) / (2 * Z)) ** 2 for _, (lo, hi) in baseline)
    error = math.sqrt(((high - low) / (2 * Z)) ** 2 + own / 3)
    difference = value - mean
    t = difference / error
    if as_points:
        amount = f"{abs(difference) * 100:.1f} points "
        ends = [_signed(f"{(difference + s * Z * error) * 100:+.1f}") for s in (-1, 1)]
        unit = " points"
    else:
        amount = "" if difference == 0 else f"{form(abs(difference))} "
        ends = [_signed(f"{difference + s * Z * error:+.3f}") for s in (-1, 1)]
        unit = ""
    direction = "below" if difference < 0 else "above" if difference > 0 else "level"
    relative = _signed(f"{difference / abs(mean) * 100:+.1f}")
    alert = t < -Z
    line = (
        f"{'ALERT' if alert else 'HOLDS'}  {shown} of run 4: {form(value)} ({form(low)} – "
        f"{form(high)}) against the baseline's {form(mean)} (mean of runs 1–3 labelled "
        f"branch=main): {amount}{direction}, {relative}% (95% interval {ends[0]} to {ends[1]}"
        f"{unit}), t = {_signed(f'{t:.2f}')} (alert past 1.96); a fall regresses"
    )
    return line, alert


def test_a_check_that_decides_prints_as_written_by_hand(kept, capsys):
    rate, rate_alert = _decided(kept, "accept_rate", "A/P (warm legs)", as_points=True)
    speed, speed_alert = _decided(kept, "output_throughput_tok_s", "tok/s (warm legs)", False)
    assert (rate_alert, speed_alert) == (True, False)  # one token less a step; the same tok/s
    expected = (
        f"{rate}\n  labels changed since run 3: branch: main → slower\n{speed}\n"
        "2 checks of recorded: 1 alert, 1 holding\n"
    )
    argv = ("--check", "A/P", "--check", "tok/s", "--run", "4", "--baseline-where", "branch=main")
    assert _printed(capsys, *argv) == (1, expected)


def test_checks_that_cannot_tell_print_as_written_by_hand(kept, capsys):
    value, (low, high) = kept[4]["figures"]["accept_rate"]
    expected = (
        "CANNOT TELL  tok/s ratio to vllm of run 4: the run has no such figure; nothing to "
        "check\n"
        f"CANNOT TELL  A/P (warm legs) of run 4: {_percent(value)} ({_percent(low)} – "
        f"{_percent(high)}); the baseline has 3 runs (runs 1–3 labelled branch=main), fewer "
        "than the 4 the test needs\n"
        "2 checks of recorded: 0 alerts, 0 holding, 2 that cannot tell\n"
    )
    argv = ("--check", "ratio:vllm", "--check", "A/P", "--run", "4",
            "--baseline-where", "branch=main", "--min-baseline", "4", "--window", "4")  # fmt: skip
    assert _printed(capsys, *argv) == (3, expected)
    unbootstrapped = kept[5]["figures"]["accept_rate"][0]
    expected = (
        f"CANNOT TELL  A/P (warm legs) of run 5: {_percent(unbootstrapped)} has no 95% interval "
        "in the ledger (none is drawn with --bootstrap 0, for a fold of counters, or for "
        "per_position_of_proposed), so no test can be made\n"
        "1 check of recorded: 0 alerts, 0 holding, 1 that cannot tell\n"
    )
    assert _printed(capsys, "--check", "A/P", "--baseline-where", "branch=main") == (3, expected)


def test_each_outcome_is_a_code_with_its_sentence_in_the_data_and_the_docs(capsys):
    """The codes are snake_case, listed with their sentences in docs/ledger.md, and the JSON
    carries both for each check."""
    from fold.ledger.check import OUTCOMES

    assert set(OUTCOMES) == {"holds", "alert", "too_few", "no_figure", "no_interval"}
    docs = (ROOT / "docs" / "ledger.md").read_text()
    for code, sentence in OUTCOMES.items():
        assert f"| `{code}` | {sentence} |" in docs, code
    argv = ("--check", "ratio:vllm", "--check", "A/P", "--run", "4",
            "--baseline-where", "branch=main", "--json", "-")  # fmt: skip
    code, out = _printed(capsys, *argv)
    data = json.loads(out)
    assert code == 1  # an alert, whatever the other check says
    assert [(c["outcome"], c["outcome_text"]) for c in data["checks"]] == [
        ("no_figure", "the run has no such figure"),
        ("alert", "the run's figure regressed past its baseline"),
    ]
    assert data["counts"] == {"holds": 0, "alert": 1, "too_few": 0, "no_figure": 1,
                              "no_interval": 0}  # fmt: skip
    assert (data["total"], data["undecided"]) == (2, 1)


# -- what the history's chart draws for the recorded ledger, made here from its files ---------


def _history(tmp_path: Path, *argv: str) -> dict:
    out = tmp_path / "history.json"
    assert main(["ledger", str(RECORDED), "--figure", "A/P", *argv, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def _drawn(history: dict):
    from matplotlib.figure import Figure

    from fold.present.history_page import history_chart

    figure = Figure()
    chart = history_chart(history)
    assert chart.draw is not None
    chart.draw(figure)
    return figure.axes[0]


def _whisker(run: dict) -> tuple[float, float, float]:
    """A run's A/P in percent and its whisker's ends (both at the point without an interval)."""
    value, interval = run["figures"]["accept_rate"]
    low, high = (value, value) if interval is None else interval
    return 100 * value, 100 * low, 100 * high


def test_the_history_chart_draws_the_recorded_runs_figures(kept, tmp_path, capsys):
    from fold.present.chart import FLAG_COLOUR, PALETTE

    axes = _drawn(_history(tmp_path))
    capsys.readouterr()
    runs = sorted(kept)
    (bars,) = axes.containers
    line, _, (whiskers,) = bars.lines
    assert line.get_color() == PALETTE[0]
    points = [(x, _whisker(kept[run])) for x, run in enumerate(runs)]
    assert list(line.get_xdata()) == [x for x, _ in points]
    assert list(line.get_ydata()) == pytest.approx([y for _, (y, _, _) in points], rel=1e-12)
    for segment, (x, (_, low, high)) in zip(whiskers.get_segments(), points, strict=True):
        (x0, y0), (x1, y1) = segment.tolist()
        assert (x0, x1) == (x, x) and (y0, y1) == pytest.approx((low, high), rel=1e-12)
    assert [label.get_text() for label in axes.get_xticklabels()] == [str(r) for r in runs]
    assert axes.get_ylabel() == "A/P (warm legs) (%)"
    # red: a run outside the previous run's interval, noted with the labels that changed
    flagged, notes = [], []
    for before, after in itertools.pairwise(runs):
        value = kept[after]["figures"]["accept_rate"][0]
        interval = kept[before]["figures"]["accept_rate"][1]
        if _side(value, interval):
            flagged.append((runs.index(after), 100 * value))
            was, now = kept[before]["labels"], kept[after]["labels"]
            notes.append(", ".join(f"{k}={now[k]}" for k in now if was[k] != now[k]))
    assert flagged == [(3, pytest.approx(100 * kept[4]["figures"]["accept_rate"][0])),
                       (4, pytest.approx(100 * kept[5]["figures"]["accept_rate"][0]))]  # fmt: skip
    red = [
        (drawn.get_xdata()[0], drawn.get_ydata()[0])
        for drawn in axes.get_lines()
        if drawn.get_color() == FLAG_COLOUR
    ]
    assert red == flagged
    assert [text.get_text() for text in axes.texts] == notes == ["branch=slower", "branch=nobs"]


def test_grouped_each_groups_runs_are_a_series_in_a_colour_of_its_own(kept, tmp_path, capsys):
    from fold.present.chart import PALETTE

    axes = _drawn(_history(tmp_path, "--by", "branch"))
    capsys.readouterr()
    runs = sorted(kept)
    groups: dict[str, list[int]] = {}
    for run in runs:  # the groups in the order of their first run
        groups.setdefault(kept[run]["labels"]["branch"], []).append(run)
    assert list(groups) == ["main", "slower", "nobs"]
    drawn = [container.lines[0] for container in axes.containers]
    assert [line.get_color() for line in drawn] == list(PALETTE[:3])
    for line, members in zip(drawn, groups.values(), strict=True):
        assert list(line.get_xdata()) == [runs.index(run) for run in members]
        assert list(line.get_ydata()) == pytest.approx([_whisker(kept[r])[0] for r in members])
    legend = axes.get_legend()
    assert [text.get_text() for text in legend.get_texts()] == list(groups)


def test_past_the_palette_the_series_colours_start_again():
    from fold.ledger.history import CHART_COLOURS, FigureKey, history_chart_data
    from fold.present.chart import PALETTE

    assert len(PALETTE) == CHART_COLOURS
    entry = {"value": 2.5, "ci": [2.0, 4.0], "flag": None, "changed": []}
    groups = [{"group": f"g{g}", "runs": [{**entry, "run": g + 1}]} for g in range(9)]
    groups.append({"group": "none", "runs": [{**entry, "run": 99, "value": None, "ci": None}]})
    chart = history_chart_data(FigureKey("mean_acceptance_length"), groups)
    assert [series["colour"] for series in chart["series"]] == [0, 1, 2, 3, 4, 5, 6, 0, 1]
    assert chart["percent"] is False and chart["runs"] == [*range(1, 10), 99]
    point = chart["series"][0]["points"][0]
    assert (point["y"], point["below"], point["above"]) == (2.5, 0.5, 1.5)
