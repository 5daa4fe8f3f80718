"""Presenters read, never compute: no presenter of ``fold/present/`` works a figure out.

The check reads each module's syntax tree (``tests/computing.py``: arithmetic, negation,
ordering, augmented assignment, counting and ordering calls by name or through a module
(``builtins.sum``, ``functools.reduce``), ``.count(...)`` and ``.sort(...)``, dunders called by
name (``x.__truediv__(y)``), calls and imports of numeric modules (``math``,
``statistics``, numpy, polars, ``operator``, ``functools``, ...) and ``collections.Counter``)
and fails on every place not in the allow-list below. The allow-list is narrow and says why
for each entry: what is left is formatting and layout, never a figure. Three kinds:

* **kits** (whole modules that are handed widths, texts and axis ends, never the document):
  ``chart.py`` (the charts' axes and ticks), ``table_layout.py`` (column widths),
  ``markdown_table.py`` (a pipe table's rule), and ``timeline.py`` (it draws the attributed
  step lines, which no document holds: the named exception of ``docs/code.md``; it is the
  one presenter that imports ``math`` and polars, ``TIMELINE_IMPORTS`` below, and a test
  holds it to exactly those);
* **formats** (functions of one number in and its text out, each with the exact expressions
  it holds, so a computation added inside one is still found): a fraction shown as a
  percentage is ``100 x`` the fraction (the document keeps fractions; the percentage is how
  people read them), seconds shown as ms or us, a fraction as a spark level;
* **places** (exact expressions in a named function): a chart's pixel geometry (subplots
  per run, a colour per arm, bar widths, an interval's whisker as distances from its point,
  an axis's headroom), a table's rows and columns (their count, a 1-based label, the last
  row's rule), and a word chosen by a figure's side of 0 or 1 ('slower' below 1, 'offset'
  below 0) or a count's plural.

Every entry must still be used (a stale one fails), and planted computations in copies of the
presenters show the check finds them.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from computing import Place, places

ROOT = Path(__file__).resolve().parents[1]
PRESENT = ROOT / "fold" / "present"

KITS = {
    "chart.py": "the charts' kit: a log axis's ticks and span from the two ends it is given, "
    "percent scale of an axis, figure sizes",
    "table_layout.py": "tables that never cut a figure: column widths from the texts' widths",
    "markdown_table.py": "a pipe table's rule under its header, as long as the header",
    "timeline.py": "draws the attributed step lines, which no document holds (docs/code.md)",
}
"""Modules that lay out or draw what they are handed, never the document's figures."""

TIMELINE_IMPORTS = {
    "imports math": "the slices' widths: how many steps one slice of the trace holds",
    "imports polars": "the attributed step lines it draws come as a polars frame "
    "(``TraceLines``), which no document holds",
}
"""The numeric imports of ``timeline.py``, a kit: each named, so a new one is still found."""

FORMATS: dict[tuple[str, str], tuple[str, set[str]]] = {
    ("table.py", "percent"): ("a fraction as a percentage: 100 x, one decimal", {
        "100 * value"}),
    ("table.py", "points"): ("a difference of fractions in points: 100 x", {
        "100 * value"}),
    ("table.py", "signed_points"): ("the same with its sign", {
        "100 * value"}),
    ("table.py", "fmt_share"): ("a share as a whole percentage; a rounded zero never -0%", {
        "round(value * 100)", "round(value * 100) + 0", "value * 100"}),
    ("table.py", "rate"): ("a rate to four significant digits: its size picks the digits", {
        "value < 1", "value >= 999.95"}),
    ("table.py", "plus_minus"): ("an interval's reach (the document's) as ±, in percent or not", {
        "100 * reach"}),
    ("table.py", "same_decimals"): ("a reach to as many decimals as the figure beside it shows", {
        "len(shown.partition('.')[2].rstrip('%'))"}),
    ("table.py", "sparkline"): ("a fraction as one of eight spark levels", {
        "len(SPARK_LEVELS)", "len(SPARK_LEVELS) - 1", "value * len(SPARK_LEVELS)",
        "min(len(SPARK_LEVELS) - 1, int(value * len(SPARK_LEVELS)))"}),
    ("cadence.py", "duration"): ("seconds as s, ms or us, its size picking the unit", {
        "seconds / scale", "seconds >= scale", "value >= 100"}),
    ("runs.py", "signed_percent"): ("a difference of fractions in percent with its sign", {
        "round(value * 100, 1)", "round(value * 100, 1) + 0.0", "value * 100"}),
    ("runs.py", "signed"): ("a difference with its sign, rounded so -0.0 reads +0.0", {
        "round(value, decimals)", "round(value, decimals) + 0.0"}),
    ("step_split.py", "signed_duration"): ("a duration that may be below 0, with its sign", {
        "-seconds", "seconds < 0"}),
    ("page.py", "_rate"): ("a fraction as a percentage", {
        "100 * value"}),
    ("step_figures.py", "_points"): ("a difference of fractions in points", {
        "100 * value"}),
    ("live.py", "_clock"): ("a time stamp in ns as the clock time it reads", {
        "t_ns / 1000000000.0"}),
}  # fmt: skip
"""Functions of one number in and its text out: how people read a figure, not a new one. Each
names the exact expressions it holds, so a computation added inside a format is still found."""

GEOMETRY = "a chart's geometry: subplots per run or arm, a colour per arm, bar and box widths"
PERCENT_AXIS = "a fraction drawn on a percent axis: 100 x"
JSON_LAYOUT = "the JSON's indentation: two spaces a level of nesting"
ROWS = "a table's rows and columns: their count, a 1-based label, the last row's rule"
COUNTED = "the length of a list the document holds, shown as how many it lists"
WORDS = "a word chosen by a figure's side of 0 or 1, or a count's plural"
INLINE_PERCENT = "a fraction shown in percent or points inside a sentence: 100 x"

PLACES: dict[tuple[str, str], tuple[str, set[str]]] = {
    ("output.py", "_items_on_lines"): (JSON_LAYOUT, {"depth + 1"}),
    ("output.py", "_flat_items"): (JSON_LAYOUT, {"depth + 1"}),
    ("output.py", "_line_break"): (JSON_LAYOUT, {"b'\\n' + b'  ' * depth", "b'  ' * depth"}),
    ("another_k.py", "headers"): (ROWS, {
        "HEADERS + (TIMED if found['step_times'] is not None else ())"}),
    ("another_k.py", "another_k_chart.draw"): (GEOMETRY + ", ticks on at most 16 k'", {
        "len(ks)", "len(ks) <= 16"}),
    ("charts.py", "<module>"): (GEOMETRY + ": math for the labels' thinning", {"imports math"}),
    ("charts.py", "_per_position.draw"): (GEOMETRY + ", a legend column per 4 arms", {
        "1 + len(arms) // 4", "index % len(PALETTE)", "len(PALETTE)", "len(arms)",
        "len(arms) // 4", "len(rates)", "len(rates) + 1"}),
    ("charts.py", "_windows"): (GEOMETRY, {"len(runs)"}),
    ("charts.py", "_windows.draw"): (GEOMETRY + ": each pool's step edge along the leg", {
        "edges[-1] + steps"}),
    ("charts.py", "_per_leg.draw"): (GEOMETRY, {
        "column % len(PALETTE)", "len(PALETTE)", "len(runs)", "len(runs) > 1"}),
    ("charts.py", "_waterfall.draw"): (GEOMETRY, {"len(bars)", "len(waterfalls)"}),
    ("charts.py", "_intervals"): (GEOMETRY + ": the axis's end at the longest interval", {
        "len(runs)",
        "max((leg['cadence']['interval_max_s'] for _, legs in runs for leg in legs))"}),
    ("charts.py", "_intervals.draw"): (GEOMETRY + ": seconds drawn in ms, 10% headroom", {
        "1000.0 * leg['cadence'][key]", "1100.0 * longest", "high - low", "x + 0.3",
        "x - 0.3"}),
    ("charts.py", "_time_shares.draw"): (GEOMETRY + ": stacked shares in percent, every "
        "n-th label", {
        "100 * shares[key]", "len(runs)", "len(runs) > 1", "len(warm)",
        "len(warm) / MAX_LABELS", "max(1, math.ceil(len(warm) / MAX_LABELS))",
        "math.ceil(len(warm) / MAX_LABELS)", "start + width"}),
    ("comparison.py", "comparison_table"): (ROWS + ", the name column's width", {
        "arm_rows - 1", "caption += INTERVALS_CAPTION", "len(row['name'])", "len(table.rows)",
        "max((len(row['name']) for row in rows), default=6)", "min(longest_name, 10)"}),
    ("comparison.py", "step_rate_line"): (INLINE_PERCENT, {
        "check['relative_diff'] * 100", "tolerance * 100"}),
    ("comparison_columns.py", "recorded_columns"): (ROWS + ": the kept columns in order", {
        "sorted(filled)"}),
    ("live.py", "group_name"): (ROWS, {"group['part'] + 1"}),
    ("live.py", "status_lines"): (COUNTED, {"len(view['files'])"}),
    ("markdown.py", "_folds"): (COUNTED, {"len(fold['legs'])"}),
    ("markdown.py", "_cadence"): (ROWS, {"len(headers)"}),
    ("page.py", "_summary"): (COUNTED, {"len(block.get('legs') or [])"}),
    ("per_request.py", "falling_words"): (INLINE_PERCENT, {
        "100 * interval[0]", "100 * interval[1]", "100 * slope"}),
    ("per_request.py", "falling_flag"): (INLINE_PERCENT, {
        "100 * high", "100 * low", "100 * slope"}),
    ("per_request.py", "long_requests_words"): (ROWS + ": a bucket's upper edge", {"i + 1"}),
    ("per_request.py", "page_section"): (COUNTED, {"len(drawn)", "len(lowest)"}),
    ("per_request.py", "requests_chart.draw"): (PERCENT_AXIS + "; " + GEOMETRY, {
        "100 * rates['max']", "100 * rates['p10']", "100 * rates['p50']", "100 * rates['p90']",
        "100 * request['accept_rate']", "len(lowest)"}),
    ("per_request.py", "by_position_chart.draw"): (PERCENT_AXIS + "; an interval's whisker as "
        "its distances from the point, as matplotlib draws it", {
        "100 * b['accept_rate_ci'][0]", "100 * b['accept_rate_ci'][1]",
        "100 * b['accept_rate_ci'][1] - rate", "len(buckets)",
        "rate - 100 * b['accept_rate_ci'][0]"}),
    ("sources.py", "sources_table"): (ROWS, {
        "len(rows)", "len(rows) - 1", "position < len(rows) - 1"}),
    ("speed.py", "speed_summary"): (WORDS + "; a share as a whole percentage", {
        "abs(part)", "abs(part) * 100", "part >= 0", "round(abs(part) * 100)", "steady < 1"}),
    ("step_figures.py", "_at"): (ROWS + ": a position past an arm's list reads nothing", {
        "i < len(values)", "len(values)"}),
    ("step_figures.py", "_collapsed"): (ROWS, {"first + first_number", "last + first_number"}),
    ("step_figures.py", "rows"): (ROWS + ": accepted 0..k, k + 1 bars", {"k + 1"}),
    ("step_figures.py", "_request_cells"): (ROWS, {
        "len(_REQUEST_LABELS)", "len(lowest)", "place >= len(lowest)"}),
    ("step_figures.py", "<module>"): (ROWS, {"place + 1"}),
    ("step_figures.py", "_position_cells"): (ROWS + ": the buckets, the slope and falling", {
        "count + 2"}),
    ("step_figures.py", "request_rows"): (ROWS, {"len(longest)"}),
    ("step_figures.py", "recorded"): (ROWS, {"len(names)"}),
    ("step_figures.py", "step_figures_markdown.shown"): (ROWS, {"len(names)"}),
    ("step_figures_page.py", "_listed"): (WORDS, {"len(items)"}),
    ("step_figures_page.py", "_summary"): (ROWS, {"len(body)", "len(names)"}),
    ("step_figures_page.py", "ours_only_html"): (WORDS, {"len(oracles)"}),
    ("step_split.py", "adds_up_text"): ("an overrun (a rest below 0) said as how much", {
        "-split['rest_s']"}),
    ("step_split.py", "summary_line"): ("an overrun (a rest below 0) said as how much", {
        "-split['rest_s']"}),
    ("step_split.py", "left_out_text"): (WORDS, {"len(legs)", "len(legs) > 1"}),
    ("step_split.py", "_markdown_table"): (ROWS, {"len(HEADERS)", "len(HEADERS) - 1"}),
    ("table.py", "fold_table"): (COUNTED, {"len(fold['legs'])"}),
    ("fold_lines.py", "flag_lines"): (COUNTED + ": a flag's legs", {"len(legs)"}),
    ("fold_lines.py", "flags_grouped"): (COUNTED + ": the flagged legs, a line each up to four", {
        "len(flagged)", "len(flagged) > FLAGGED_LEGS_EACH"}),
    ("page.py", "attention"): (COUNTED + ": every flagged leg's line", {"len(every)"}),
    ("table.py", "index_ranges"): (ROWS + ": consecutive legs' indices as one range", {
        "runs[-1][1] + 1"}),
    ("table.py", "value_runs"): (ROWS + ": a long run of equal cells as one row", {
        "end - 1", "end - start", "end - start > RUN_SHOWN", "end < len(values)",
        "len(values)", "len(values) + 1"}),
}  # fmt: skip
"""Exact expressions, each in the one function named: nothing else in that function passes."""


def unexplained(name: str, source: str) -> list[Place]:
    """The places in module ``name`` (its ``source``) that no kit, format or place allows."""
    if name in KITS:
        return []
    found = []
    for place in places(source):
        key = (name, place.function)
        if key in FORMATS and place.text in FORMATS[key][1]:
            continue
        if key in PLACES and place.text in PLACES[key][1]:
            continue
        found.append(place)
    return found


def _modules() -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(PRESENT.glob("*.py"))}


def test_no_presenter_computes():
    found = {
        name: [str(place) for place in places_left]
        for name, source in _modules().items()
        if (places_left := unexplained(name, source))
    }
    assert found == {}


def test_every_allowance_is_still_used():
    """A stale entry would let a computation back in where the code once formatted."""
    used: dict[tuple[str, str], set[str]] = defaultdict(set)
    modules = _modules()
    for name, source in modules.items():
        for place in places(source):
            used[(name, place.function)].add(place.text)
    assert set(KITS) <= set(modules)
    allowed = {**FORMATS, **PLACES}
    stale = {key: texts - used[key] for key, (_, texts) in allowed.items() if texts - used[key]}
    assert stale == {}


def test_the_timeline_imports_only_its_named_numeric_modules():
    """The timeline is a kit (passed whole), so its numeric imports are named one by one."""
    found = {
        place.text
        for place in places((PRESENT / "timeline.py").read_text())
        if place.text.startswith("imports ")
    }
    assert found == set(TIMELINE_IMPORTS)


def test_no_other_presenter_imports_a_numeric_module():
    imports = {
        name: texts
        for name, source in _modules().items()
        if name != "timeline.py"
        and (texts := {p.text for p in places(source) if p.text.startswith("imports ")})
    }
    assert imports == {"chart.py": {"imports math"}, "charts.py": {"imports math"}}


PLANTED = [
    # the review's case: a rate worked out from the counts beside it
    ("table.py", "def shown_rate(fold):\n    return fold['accepted'] / fold['proposed']\n"),
    ("table.py", "SHARE = 0\ndef total(legs):\n    return sum(leg['steps'] for leg in legs)\n"),
    ("charts.py", "def product(bars):\n    level = 1.0\n    for bar in bars:\n"
                  "        level *= bar['factor']\n    return level\n"),
    ("speed.py", "def order(parts):\n    return sorted(parts, key=parts.get)\n"),
    ("step_figures.py", "def longest(found):\n    return max(f['max_draft'] for f in found)\n"),
    ("runs.py", "def spread(a, b):\n    return b['max'] - a['min']\n"),
    ("cadence.py", "def rate(c):\n    return c['decode_steps'] / c['decode_s']\n"),
    ("page.py", "def fewer(a, b):\n    return a['steps'] < b['steps']\n"),
    ("per_request.py", "def flip(slope):\n    return -slope['value']\n"),
    ("live.py", "import statistics\n"),
    ("comparison.py", "def ratio(rows):\n    return math.prod(r['factor'] for r in rows)\n"),
    ("history.py", "def runs(history):\n    return len(history['runs'])\n"),
    # numeric modules imported: each is a way to work a figure out without an operator
    ("table.py", "import numpy as np\n"),
    ("runs.py", "import polars as pl\n"),
    ("speed.py", "import operator\n"),
    ("charts.py", "import functools\n"),
    ("page.py", "from functools import reduce\n"),
    ("markdown.py", "from collections import Counter\n"),
    ("step_figures.py", "from statistics import fmean\n"),
    ("comparison.py", "from operator import truediv\n"),
    # calls that compute without an operator or a counting name
    ("table.py", "def rate(f):\n    return np.divide(f['accepted'], f['proposed'])\n"),
    ("runs.py", "def total(legs):\n    return np.sum([leg['steps'] for leg in legs])\n"),
    ("live.py", "def misses(files):\n    return files.count(None)\n"),
    ("sources.py", "def order(rows):\n    rows.sort(key=lambda r: r['steps'])\n"),
    ("speed.py", "def product(parts):\n    return functools.reduce(lambda a, b: a, parts)\n"),
    ("page.py", "def rate(f):\n    return operator.truediv(f['accepted'], f['proposed'])\n"),
    ("markdown.py", "def total(legs):\n    return builtins.sum(legs)\n"),
    ("cadence.py", "def rate(c):\n    return c['steps'].__truediv__(c['seconds'])\n"),
    ("matched.py", "def tally(arms):\n    return Counter(arm['engine'] for arm in arms)\n"),
    ("history.py", "def product(rows):\n    return reduce(lambda a, b: a, rows)\n"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "planted"), PLANTED)
def test_a_planted_computation_in_a_presenter_is_found(name, planted):
    source = (PRESENT / name).read_text() + "\n" + planted
    assert unexplained(name, source), planted


@pytest.mark.parametrize(
    ("name", "function", "planted"),
    [
        # inside a function that may do chart geometry: only its own expressions pass
        ("charts.py", "def draw(figure) -> None:\n", "x = gap['ratio'] / gap['acceptance_factor']"),
        # inside a format: only the expressions it names pass, not the function whole
        ("table.py", "def percent(", "value = value / 2"),
        ("cadence.py", "def duration(", "seconds = seconds * 2"),
        ("runs.py", "def signed(", "value = value - 1"),
        ("live.py", "def _clock(", "t_ns = t_ns // 2"),
        ("table.py", "def fold_table(", "x = fold['accepted'] / fold['proposed']"),
        ("speed.py", "def speed_summary(", "x = split['leg_factor'] ** 0.5"),
    ],
)
def test_a_computation_planted_inside_an_allowed_function_is_found(name, function, planted):
    source = (PRESENT / name).read_text()
    head = source.index(function)
    body = source.index("\n", source.index(":\n", head)) + 1  # after the signature's line
    indent = " " * (len(source[body:]) - len(source[body:].lstrip(" ")))
    planted_source = source[:body] + f"{indent}{planted}\n" + source[body:]
    assert unexplained(name, planted_source)
    assert not unexplained(name, source)
