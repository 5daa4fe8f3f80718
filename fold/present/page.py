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
from fold.present.matched import matched_html
from fold.present.matched_arms import matched_arm_html
from fold.present.measured_split import ALWAYS_SHOWN, factors_text, gap_texts, measured_of
from fold.present.per_request import page_section
from fold.present.step_figures import has_step_figures, step_figures_html
from fold.present.step_split import step_split_html
from fold.present.table import (
    NOT_RECORDED,
    flag_lines,
    fmt_factor,
    fmt_length,
    fmt_rate,
    fmt_tok_s,
    line_problems,
    plus_minus,
)

PLOT_FORMATS = ("png", "svg")
# a split that stands on a caveat, or a model that stands, is marked as a warning
_SPLIT_CLASS = dict.fromkeys(ALWAYS_SHOWN, "warn")
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 66rem; color: #1d232a; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
figure { margin: 0; } figure svg { width: 100%; height: auto; }
figcaption { color: #47515c; font-size: 0.9rem; margin-top: 0.3rem; }
.missing { color: #8a5a00; font-style: italic; }
table { border-collapse: collapse; font-size: 0.9rem; }
td, th { padding: 0.2rem 0.8rem; text-align: right; border-bottom: 1px solid #e3e6ea; }
th:first-child, td:first-child { text-align: left; }
table.comparison th { vertical-align: bottom; }
table.comparison td:nth-child(n+3) { white-space: nowrap; }
table.comparison tr.ratio td { border-top: 1px solid #9aa5b1; font-style: italic; }
.pm { color: #47515c; font-size: 0.8rem; white-space: nowrap; }
.caption { color: #47515c; font-size: 0.8rem; margin: 0.3rem 0; }
table.comparison td:nth-child(2), table.comparison th:nth-child(2) { text-align: left; }
.na { color: #8a949e; font-style: italic; }
ul.verdicts { padding-left: 1.2rem; margin: 0.6rem 0 0 0; }
ul.verdicts li { margin: 0.2rem 0; }
.warn { color: #8a5a00; }
"""


def page(document: dict[str, Any], *, title: str = "fold-acceptance report") -> bytes:
    """The whole page for one fold's JSON document: a summary, then every chart."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        answer(document),
        attention(document),
        _summary(document),
        page_section(document),
        step_split_html(document),
    ]
    if has_step_figures(document):
        parts.append(step_figures_html(document))
    for chart in charts(document):
        parts.append(f'<section class="chart" id="{chart.name}">')
        parts.append(f"<h2>{html.escape(chart.title)}</h2>")
        if chart.draw is None:
            parts.append(f'<p class="missing">Not drawn: {html.escape(chart.missing or "")}.</p>')
        else:
            parts.append(f"<figure>{_inline_svg(render(chart, 'svg'))}")
            parts.append(f"<figcaption>{html.escape(chart.caption)}</figcaption></figure>")
        parts.append("</section>")
    parts.append(matched_html(document))  # below the charts; empty without --matched
    parts.append("</body></html>")
    return ("\n".join(parts) + "\n").encode()


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
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label, _, _ in _COLUMNS)
    rows = []
    for row in block["rows"]:
        population = row.get("population") or ""
        cells = [
            _figure(shown(row[key]), row.get(f"{key}_ci"), row[key], form, intervals)
            for key, _, shown, form in _COLUMNS
        ]
        rows.append(
            f'<tr class="arm"><td><b>{html.escape(row["name"])}</b></td>'
            f"<td>{html.escape(POPULATION_LABELS.get(population, population))}</td>"
            + "".join(cells)
            + "</tr>"
        )
    for gap in block["gaps"].values():
        split = gap["ratio"] is not None and gap["acceptance_factor"] is not None
        factor = _figure(
            fmt_factor(gap["acceptance_factor"]) if split else NOT_RECORDED,
            gap["acceptance_factor_ci"],
            gap["acceptance_factor"],
            "three_decimals",
            intervals,
        )
        in_sglang_unit = gap["unit"] == SGLANG_UNIT
        cells = [
            _figure(fmt_factor(gap["ratio"]), gap["ratio_ci"], gap["ratio"], "three_decimals",
                    intervals),
            "<td></td>" if in_sglang_unit else factor,
            "<td></td>",
            _figure(
                fmt_factor(gap["speed_factor"]) if split else NOT_RECORDED,
                gap["speed_factor_ci"],
                gap["speed_factor"],
                "three_decimals",
                intervals,
            ),
            factor if in_sglang_unit else "<td></td>",
        ]  # fmt: skip
        rows.append(
            f'<tr class="ratio"><td>ours/{html.escape(gap["oracle"])}{_modelled(gap)}</td><td></td>'
            + "".join(cells)
            + "</tr>"
        )
    caption = (
        "Ratios: r under tok/s, the acceptance factor under the length it compares, the speed "
        "factor under verify steps/s. mean len = 1 + A/S (bonus token included); rate = A/P; "
        "steps/s = tok/s / mean len; SGLang len* is SGLang's own unit, not comparable with "
        "mean len."
    )
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
    no leg (outside every leg, ambiguous, torn, skipped, lost); nothing when all is well."""
    items = [line for line in flag_lines(document).plain.splitlines() if line.strip()]
    problems = line_problems(document)
    if problems is not None:
        items.append(problems.plain)
    if not items:
        return ""
    listed = "".join(f'<li class="warn">{html.escape(item)}</li>' for item in items)
    return (
        f'<section id="attention"><h2>Needs a look</h2><ul class="verdicts">{listed}</ul></section>'
    )


def _figure(shown: str, interval: Any, value: Any, form: str, intervals: bool) -> str:
    if shown == NOT_RECORDED:
        return f'<td class="na">{NOT_RECORDED}</td>'
    spread = plus_minus(value, interval, form) if intervals else ""
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
            "</tr>"
        )
    head = (
        "<tr><th>legs</th><th>n</th><th>S</th><th>P</th><th>A</th><th>A/P</th>"
        "<th>1 + A/S</th><th>tok/s</th></tr>"
    )
    predicate = html.escape(str(document.get("predicate", "")))
    return (
        "<h2>Our fold</h2>"
        f"<p>Warm legs: <code>{predicate}</code>. S: verify steps that carried a draft; P: draft "
        "tokens verified; A: draft tokens accepted (bonus token excluded).</p>"
        f"<table>{head}{''.join(rows)}</table>"
    )


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
