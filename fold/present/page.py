"""The fold as one self-contained page (``--html``), and its charts as PNG and SVG files
(``--plots``), from the fold's JSON document alone.

The page opens with the answer: the comparison in one unit (every arm, the ratios, their 95%
intervals) and one verdict per oracle in the words the terminal uses; then our fold, then the
charts. It inlines every chart as SVG and its style sheet: it has no script and fetches nothing,
so it opens from a file on a machine with no network.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

from rich.text import Text

from fold.compare.gap import SGLANG_UNIT
from fold.errors import InputError
from fold.present.chart import Chart, render
from fold.present.charts import charts
from fold.present.comparison import (
    POPULATION_LABELS,
    has_intervals,
    population_line,
    step_rate_line,
    tolerance_of,
)
from fold.present.comparison_columns import recorded_columns
from fold.present.fold_lines import flag_lines, flags_grouped, line_problems
from fold.present.matched import matched_html
from fold.present.matched_arms import matched_arm_html
from fold.present.measured_split import ALWAYS_SHOWN, factors_text, gap_texts, measured_of
from fold.present.page_layout import STYLE, toc
from fold.present.per_request import page_section
from fold.present.step_figures_page import ours_only_html, step_figures_html
from fold.present.step_split import step_split_html
from fold.present.table import (
    NOT_RECORDED,
    fmt_factor,
    fmt_length,
    fmt_rate,
    fmt_tok_s,
    plus_minus,
)

PLOT_FORMATS = ("png", "svg")
# The charts not shown beside the figures they draw, grouped by the question they answer.
CHART_GROUPS = (
    ("acceptance-charts", "Where does acceptance fall off?", ("per-position", "windows")),
    ("another-k-charts", "What if drafts were shorter?", ("another-k",)),
    ("gap-charts", "Where does the gap to each oracle go?", ("gap",)),
    ("time-charts", "Where does the time go, leg by leg?", ("time-shares", "intervals",
                                                           "per-leg")),
)  # fmt: skip
STEP_SPLIT_BEFORE = "time-charts"  # the step split reads with the time charts, just above them
BESIDE_FIGURES = ("requests", "by-output-position")  # drawn in the per-request section
_HEADING = re.compile(r'<section id="([^"]+)"[^>]*><h2>(.*?)</h2>', re.DOTALL)
# a split that stands on a caveat, or a model that stands, is marked as a warning
_SPLIT_CLASS = dict.fromkeys(ALWAYS_SHOWN, "warn")


def page(document: dict[str, Any], *, title: str = "fold-acceptance report") -> bytes:
    """The whole page for one fold's JSON document: the answer, what needs a look, our fold,
    the per-request and step figures, then the charts by the question each answers; a table of
    contents beside it."""
    found = charts(document)
    drawn = {chart.name: _chart_html(chart) for chart in found if chart.draw is not None}
    sections = [
        answer(document),
        attention(document),
        _summary(document),
        page_section(document, {name: drawn.get(name, "") for name in BESIDE_FIGURES}),
        step_figures_html(document),
    ]
    contents: list[tuple[str, str, list[tuple[str, str]]]]
    contents = [(target, html.unescape(heading), []) for section in sections
                for target, heading in _HEADING.findall(section)[:1]]  # fmt: skip
    for target, heading, names in CHART_GROUPS:
        if target == STEP_SPLIT_BEFORE and (split := step_split_html(document)):
            sections.append(split)
            contents += [(found_id, html.unescape(text), []) for found_id, text in
                         _HEADING.findall(split)[:1]]  # fmt: skip
        named = {chart.name: chart for chart in found if chart.draw is not None}
        shown = [named[name] for name in names if name in named]
        if not shown:
            continue
        sections.append(
            f'<section id="{target}"><h2>{html.escape(heading)}</h2><div class="charts">'
            + "".join(drawn[chart.name] for chart in shown)
            + "</div></section>"
        )
        contents.append((target, heading, [(chart.name, chart.title) for chart in shown]))
    missing = [chart for chart in found if chart.draw is None]
    if missing:
        listed = "; ".join(f"{chart.title} ({chart.missing})" for chart in missing)
        sections.append(f'<p class="missing">Not drawn: {html.escape(listed)}.</p>')
    matched = matched_html(document)  # below the charts; empty without --matched
    sections.append(matched)
    contents += [(target, html.unescape(heading), []) for target, heading in
                 _HEADING.findall(matched)[:1]]  # fmt: skip
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        '<div class="layout">',
        toc(contents),
        f"<main><h1>{html.escape(title)}</h1>",
        *(section for section in sections if section),
        "</main></div></body></html>",
    ]
    return ("\n".join(parts) + "\n").encode()


def _chart_html(chart: Chart) -> str:
    return (
        f'<section class="chart" id="{chart.name}"><h3>{html.escape(chart.title)}</h3>'
        f"<figure>{_inline_svg(render(chart, 'svg'))}"
        f"<figcaption>{html.escape(chart.caption)}</figcaption></figure></section>"
    )


def write_page(path: str, document: dict[str, Any], *, title: str | None = None) -> None:
    data = page(document, title=title or "fold-acceptance report")
    _write(Path(path), data)


def write_plots(directory: str, document: dict[str, Any]) -> list[str]:
    """Each drawable chart as ``NAME.png`` and ``NAME.svg`` in ``directory``; the PNG names."""
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(
            f"--plots {directory}: cannot create the folder: {error.strerror}"
        ) from error
    written = []
    for chart in drawable(document):
        for fmt in PLOT_FORMATS:
            _write(out / f"{chart.name}.{fmt}", render(chart, fmt))
        written.append(f"{chart.name}.png")
    return written


def drawable(document: dict[str, Any]) -> list[Chart]:
    return [chart for chart in charts(document) if chart.draw is not None]


def markdown_links(document: dict[str, Any], directory: str, relative_to: str | None) -> str:
    """A markdown section that shows the PNGs, linked relative to the markdown file."""
    base = Path(relative_to).parent if relative_to and relative_to != "-" else Path.cwd()
    lines = ["", "## Charts", ""]
    for chart in drawable(document):
        target = Path(os.path.relpath(Path(directory) / f"{chart.name}.png", base)).as_posix()
        lines += [f"![{chart.title}]({target})", "", f"*{chart.caption}*", ""]
    return "\n".join(lines)


_COLUMNS = (
    ("output_throughput_tok_s", "tok/s (warm)", fmt_tok_s, "three_decimals"),
    ("mean_acceptance_length", "mean len (1 + A/S)", fmt_length, "length"),
    ("accept_rate", "rate (A/P)", fmt_rate, "percent"),
    ("verify_steps_per_s", "verify steps/s", fmt_tok_s, "three_decimals"),
    ("completion_tokens_per_step", "SGLang len*", fmt_length, "length"),
)


def _modelled(gap: dict[str, Any]) -> str:
    """A ratio row's mark when its gap is split by measurement: its factors are the model's."""
    return " (modelled)" if gap.get("split") == "measured" else ""


def answer(document: dict[str, Any]) -> str:
    """The comparison table and the verdicts, or nothing when no oracle was given."""
    block = document.get("comparison")
    if not block:
        return ""
    intervals = has_intervals(document)
    kept = recorded_columns(block, oracles_only=True)
    head = "".join(f"<th>{html.escape(_COLUMNS[i][1])}</th>" for i in kept)
    rows = []
    for row in block["rows"]:
        population = row.get("population") or ""
        cells = [
            _figure(shown(row[key]), row.get(f"{key}_reach"), form, intervals)
            for key, _, shown, form in _COLUMNS
        ]
        rows.append(
            f'<tr class="arm"><td><b>{html.escape(row["name"])}</b></td>'
            f"<td>{html.escape(POPULATION_LABELS.get(population, population))}</td>"
            + "".join(cells[i] for i in kept)
            + "</tr>"
        )
    for gap in block["gaps"].values():
        split = gap["ratio"] is not None and gap["acceptance_factor"] is not None
        factor = _figure(
            fmt_factor(gap["acceptance_factor"]) if split else NOT_RECORDED,
            gap["acceptance_factor_reach"],
            "three_decimals",
            intervals,
        )
        in_sglang_unit = gap["unit"] == SGLANG_UNIT
        cells = [
            _figure(fmt_factor(gap["ratio"]), gap["ratio_reach"], "three_decimals",
                    intervals),
            "<td></td>" if in_sglang_unit else factor,
            "<td></td>",
            _figure(
                fmt_factor(gap["speed_factor"]) if split else NOT_RECORDED,
                gap["speed_factor_reach"],
                "three_decimals",
                intervals,
            ),
            factor if in_sglang_unit else "<td></td>",
        ]  # fmt: skip
        rows.append(
            f'<tr class="ratio"><td>ours/{html.escape(gap["oracle"])}{_modelled(gap)}</td><td></td>'
            + "".join(cells[i] for i in kept)
            + "</tr>"
        )
    caption = _caption(kept)
    if intervals:
        caption += " ±: 95% bootstrap interval, the larger distance to either end."
    if any(_modelled(gap) for gap in block["gaps"].values()):
        caption += (
            " (modelled): the model's factors; that gap is split by measurement, in the "
            "verdicts below."
        )
    verdicts = []
    for name, gap in block["gaps"].items():
        verdicts.append(
            f'<li class="verdict" data-arm="{html.escape(name)}"><b>vs {html.escape(name)}</b>: '
            f"{html.escape(gap['verdict'])}</li>"
        )
        if measured_of(gap) is not None:
            verdicts.append(f'<li class="measured">{html.escape(factors_text(gap))}</li>')
        verdicts.extend(
            f'<li class="{_SPLIT_CLASS.get(gap.get("split_reason"), "split")}">'
            f"{html.escape(text)}</li>"
            for text in gap_texts(gap, details=True)
        )
        covers = population_line(gap)
        if covers is not None and not gap["populations"]["same"]:
            verdicts.append(f'<li class="warn">{html.escape(covers.plain.strip())}</li>')
        verdicts.extend(matched_arm_html(block, name))
    check = block.get("step_rate_check")
    if check is not None and check.get("flagged"):
        line = step_rate_line(check, tolerance_of(document)).plain
        verdicts.append(f'<li class="warn">{html.escape(line)}</li>')
    return (
        '<section id="answer"><h2>Throughput and acceptance in one unit</h2>'
        '<table class="comparison"><tr><th>engine</th><th>covers</th>'
        f"{head}</tr>{''.join(rows)}</table>"
        f'<p class="caption">{html.escape(caption)}</p>'
        f'<ul class="verdicts">{"".join(verdicts)}</ul></section>'
    )


def attention(document: dict[str, Any]) -> str:
    """What the terminal never hides, in its words: the flagged legs and the lines that are in
    no leg (outside every leg, ambiguous, torn, skipped, lost); nothing when all is well. Many
    flagged legs are a line per flag, as on the terminal, with every leg's line folded below."""
    grouped = flags_grouped(document)
    items = _lines(flag_lines(document, more=", every leg below" if grouped else ""))
    problems = line_problems(document)
    if problems is not None:
        items.append(problems.plain)
    if not items:
        return ""
    listed = "".join(f'<li class="warn">{html.escape(item)}</li>' for item in items)
    each = ""
    if grouped:
        every = _lines(flag_lines(document, each_leg=True))
        each = (
            f"<details><summary>Every flagged leg ({len(every)})</summary>"
            f'<ul class="verdicts">{"".join(f"<li>{html.escape(line)}</li>" for line in every)}'
            "</ul></details>"
        )
    return (
        '<section id="attention"><h2>What needs a look?</h2>'
        f'<ul class="verdicts">{listed}</ul>{each}</section>'
    )


def _lines(text: Text) -> list[str]:
    return [line for line in text.plain.splitlines() if line.strip()]


def _figure(shown: str, reach: Any, form: str, intervals: bool) -> str:
    if shown == NOT_RECORDED:
        return f'<td class="na">{NOT_RECORDED}</td>'
    spread = plus_minus(reach, form) if intervals else ""
    extra = f' <span class="pm">{html.escape(spread)}</span>' if spread else ""
    return f"<td>{html.escape(shown)}{extra}</td>"


def _summary(document: dict[str, Any]) -> str:
    rows = []
    for key, label in (("warm", "warm legs"), ("all", "all legs")):
        block = document.get(key) or {}
        if not block:
            continue
        rows.append(
            "<tr>"
            f"<td>{label}</td><td>{len(block.get('legs') or [])}</td>"
            f"<td>{_number(block.get('steps'))}</td><td>{_number(block.get('proposed'))}</td>"
            f"<td>{_number(block.get('accepted'))}</td>"
            f"<td>{_rate(block.get('accept_rate'))}</td>"
            f"<td>{_fixed(block.get('mean_acceptance_length'), 2)}</td>"
            f"<td>{_fixed(block.get('output_throughput_tok_s'), 3)}</td>"
            f"<td>{_fixed(block.get('completion_tokens_per_step'), 2)}</td>"
            "</tr>"
        )
    head = (
        "<tr><th>legs</th><th>n</th><th>S</th><th>P</th><th>A</th><th>A/P</th>"
        "<th>1 + A/S</th><th>tok/s</th><th>completion/S</th></tr>"
    )
    predicate = html.escape(str(document.get("predicate", "")))
    return (
        '<section id="ours"><h2>What did our legs propose and accept?</h2>'
        f"<p>Warm legs: <code>{predicate}</code>. S: verify steps that carried a draft; P: draft "
        "tokens verified; A: draft tokens accepted (bonus token excluded).</p>"
        f"<table>{head}{''.join(rows)}</table>{ours_only_html(document, _ours_alone(document))}"
        "</section>"
    )


def _ours_alone(document: dict[str, Any]) -> list[str]:
    """The comparison's figures only our folds record, which its table leaves to our block."""
    block = document.get("comparison")
    if not block:
        return []
    shown = set(recorded_columns(block, oracles_only=True))
    return [_OURS_ALONE[i] for i in recorded_columns(block) if i not in shown and i in _OURS_ALONE]


# What our block calls a comparison column it holds alone, by column (``HEADERS``' order).
_OURS_ALONE = {
    0: "tok/s",
    1: "mean len (1 + A/S)",
    2: "rate (A/P)",
    3: "verify steps/s",
    4: "completion tokens per verify step (SGLang len*, our completion/S)",
}


def _caption(kept: list[int]) -> str:
    """The comparison's caption, defining only the columns drawn (``kept``)."""
    ratios = [
        text
        for column, text in (
            (0, "r under tok/s"),
            (1, "the acceptance factor under the length it compares"),
            (3, "the speed factor under verify steps/s"),
        )
        if column in kept or (column == 1 and 4 in kept)
    ]
    parts = [f"Ratios: {', '.join(ratios)}."] if ratios else []
    terms = []
    if 1 in kept:
        terms.append("mean len = 1 + A/S (bonus token included)")
    if 2 in kept:
        terms.append("rate = A/P")
    if 3 in kept:
        over = ["mean len" if 1 in kept else "1 + A/S", *(["SGLang len*"] if 4 in kept else [])]
        terms.append(f"steps/s = tok/s / {' or '.join(over)}")
    if terms:
        parts.append("; ".join(terms) + ".")
    if 4 in kept:
        parts.append(
            "SGLang len* is SGLang's own unit"
            + (", not comparable with mean len." if 1 in kept else " (tokens per verify step).")
        )
    return " ".join(parts)


def _inline_svg(svg: bytes) -> str:
    text = svg.decode()
    # the XML prolog and doctype are for a standalone file, not for SVG inside HTML
    return re.sub(r"^.*?(?=<svg)", "", text, count=1, flags=re.DOTALL)


def _number(value: Any) -> str:
    return "" if value is None else f"{value:,}"


def _rate(value: Any) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def _fixed(value: Any, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as error:
        raise InputError(f"{path}: cannot write: {error.strerror}") from error
