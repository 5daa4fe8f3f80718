"""A figure's history as a chart, and as a self-contained page (``ledger PATH --html``).

Functions of the history data alone, which they read and never work out: where each point,
error bar and colour goes is the history's ``chart`` block (``fold.ledger.history``), and
``tests/test_ledger_presenters.py`` fails on arithmetic, counting or ordering here. The page
inlines the chart as SVG and its style: no script, nothing fetched, so it opens from a file on
a machine without network.
"""

from __future__ import annotations

import html
import re
from typing import Any

from fold.present.chart import FLAG_COLOUR, PALETTE, Chart, legend_patches, render
from fold.present.history import history_rows, summary_line

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; color: #1d232a; }
h1 { font-size: 1.4rem; } figure { margin: 0; } figure svg { width: 100%; height: auto; }
figcaption { color: #47515c; font-size: 0.9rem; margin-top: 0.3rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin-top: 1rem; }
td, th { padding: 0.2rem 0.6rem; text-align: left; border-bottom: 1px solid #e3e6ea; }
tr.flagged td { color: #c0392b; }
"""


def history_chart(history: dict[str, Any]) -> Chart:
    """Each kept run's figure in the order kept, its 95% interval as a whisker, a run outside
    the previous run's interval in red with the labels that changed beside it. What is drawn
    where is the history's ``chart`` block (``fold.ledger.history``): this only draws it."""
    chart = history["chart"]
    caption = (
        f"{history['shown']} of each kept run, in the order kept, with its 95% interval; red: "
        "outside the previous run's interval, with the labels that changed since that run."
    )
    if not chart["series"]:
        return Chart("history", history["shown"], caption, None, "no kept run has the figure")

    def draw(figure) -> None:
        axes = figure.subplots()
        for series in chart["series"]:
            points = series["points"]
            xs = [point["x"] for point in points]
            ys = [point["y"] for point in points]
            bars = [[point["below"] for point in points], [point["above"] for point in points]]
            axes.errorbar(xs, ys, yerr=bars, color=PALETTE[series["colour"]], marker="o",
                          markersize=4, linewidth=1, capsize=3, gid=_gid(series))  # fmt: skip
            for point in points:
                if point["flag"]:
                    axes.plot([point["x"]], [point["y"]], marker="o", markersize=7,
                              color=FLAG_COLOUR, zorder=3)  # fmt: skip
                    if point["note"]:
                        axes.annotate(point["note"], (point["x"], point["y"]),
                                      textcoords="offset points", xytext=(6, 6), fontsize=7,
                                      color=FLAG_COLOUR)  # fmt: skip
        axes.set_xticks(chart["ticks"], [str(run) for run in chart["runs"]])
        axes.set_xlabel("kept run")
        axes.set_ylabel(f"{history['shown']}{' (%)' if chart['percent'] else ''}")
        if history["by"] is not None:
            legend_patches(axes, [(str(s["group"]), PALETTE[s["colour"]])
                                  for s in chart["series"]])  # fmt: skip

    return Chart("history", history["shown"], caption, draw)


def _gid(series: dict[str, Any]) -> str:
    return f"history-{series['group']}"


def history_page(history: dict[str, Any], *, title: str | None = None) -> bytes:
    """The page: the chart, then the history's table."""
    chart = history_chart(history)
    heading = title or f"{history['shown']} over the kept runs"
    header, rows = history_rows(history)
    flagged = [entry["flag"] is not None for group in history["groups"] for entry in group["runs"]]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(heading)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(heading)}</h1>",
    ]
    if chart.draw is None:
        parts.append(f"<p>Not drawn: {html.escape(chart.missing or '')}.</p>")
    else:
        parts.append(f"<figure>{_inline_svg(render(chart, 'svg'))}")
        parts.append(f"<figcaption>{html.escape(chart.caption)}</figcaption></figure>")
    parts.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
    for row, flag in zip(rows, flagged, strict=True):
        cells = "".join(f"<td>{html.escape(cell)}</td>" for cell in row)
        parts.append(f'<tr class="flagged">{cells}</tr>' if flag else f"<tr>{cells}</tr>")
    parts.append("</table>")
    parts.append(f"<p>{html.escape(summary_line(history).strip())}</p>")
    parts.append("</body></html>")
    return ("\n".join(parts) + "\n").encode()


def _inline_svg(svg: bytes) -> str:
    return re.sub(r"^.*?(?=<svg)", "", svg.decode(), count=1, flags=re.DOTALL)
