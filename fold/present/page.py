"""The charts as one self-contained page (``--html``) and as PNG and SVG files (``--plots``).

The page inlines every chart as SVG and its style sheet: it has no script and fetches nothing,
so it opens from a file on a machine with no network.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

from fold.errors import InputError
from fold.present.chart import Chart, render
from fold.present.charts import charts

PLOT_FORMATS = ("png", "svg")
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; color: #1d232a; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
figure { margin: 0; } figure svg { width: 100%; height: auto; }
figcaption { color: #47515c; font-size: 0.9rem; margin-top: 0.3rem; }
.missing { color: #8a5a00; font-style: italic; }
table { border-collapse: collapse; font-size: 0.9rem; }
td, th { padding: 0.2rem 0.8rem; text-align: right; border-bottom: 1px solid #e3e6ea; }
th:first-child, td:first-child { text-align: left; }
"""


def page(document: dict[str, Any], *, title: str = "fold-acceptance report") -> bytes:
    """The whole page for one fold's JSON document: a summary, then every chart."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        _summary(document),
    ]
    for chart in charts(document):
        parts.append(f'<section class="chart" id="{chart.name}">')
        parts.append(f"<h2>{html.escape(chart.title)}</h2>")
        if chart.draw is None:
            parts.append(f'<p class="missing">Not drawn: {html.escape(chart.missing or "")}.</p>')
        else:
            parts.append(f"<figure>{_inline_svg(render(chart, 'svg'))}")
            parts.append(f"<figcaption>{html.escape(chart.caption)}</figcaption></figure>")
        parts.append("</section>")
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
