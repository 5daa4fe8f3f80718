"""A figure's history as a chart, and as a self-contained page (``ledger PATH --html``).

Functions of the history data alone. The page inlines the chart as SVG and its style: no
script, nothing fetched, so it opens from a file on a machine without network.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

from fold.present.chart import FLAG_COLOUR, PALETTE, Chart, legend_patches, render
from fold.present.history import RATES, history_rows, summary_line

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; color: #1d232a; }
h1 { font-size: 1.4rem; } figure { margin: 0; } figure svg { width: 100%; height: auto; }
figcaption { color: #47515c; font-size: 0.9rem; margin-top: 0.3rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin-top: 1rem; }
td, th { padding: 0.2rem 0.6rem; text-align: left; border-bottom: 1px solid #e3e6ea; }
tr.flagged td { color: #c0392b; }
"""
MAX_NOTE_CHARS = 40


def history_chart(history: dict[str, Any]) -> Chart:
    """Each kept run's figure in the order kept, its 95% interval as a whisker, a run outside
    the previous run's interval in red with the labels that changed beside it."""
    groups = [
        group for group in history["groups"] if any(r["value"] is not None for r in group["runs"])
    ]
    caption = (
        f"{history['shown']} of each kept run, in the order kept, with its 95% interval; red: "
        "outside the previous run's interval, with the labels that changed since that run."
    )
    if not groups:
        return Chart("history", history["shown"], caption, None, "no kept run has the figure")
    order = sorted(entry["run"] for group in history["groups"] for entry in group["runs"])
    x_of = {run: index for index, run in enumerate(order)}
    scale = 100.0 if history["figure"].partition(":")[0] in RATES else 1.0

    def draw(figure) -> None:
        axes = figure.subplots()
        for index, group in enumerate(groups):
            colour = PALETTE[index % len(PALETTE)]
            points = [entry for entry in group["runs"] if entry["value"] is not None]
            xs = [x_of[entry["run"]] for entry in points]
            ys = [scale * entry["value"] for entry in points]
            low = [_reach(entry, scale, 0) for entry in points]
            high = [_reach(entry, scale, 1) for entry in points]
            axes.errorbar(xs, ys, yerr=[low, high], color=colour, marker="o", markersize=4,
                          linewidth=1, capsize=3)  # fmt: skip
            for entry, x, y in zip(points, xs, ys, strict=True):
                if entry["flag"]:
                    axes.plot([x], [y], marker="o", markersize=7, color=FLAG_COLOUR, zorder=3)
                    note = _note(entry)
                    if note:
                        axes.annotate(note, (x, y), textcoords="offset points", xytext=(6, 6),
                                      fontsize=7, color=FLAG_COLOUR)  # fmt: skip
        axes.set_xticks(range(len(order)), [str(run) for run in order])
        axes.set_xlabel("kept run")
        axes.set_ylabel(f"{history['shown']}{' (%)' if scale == 100.0 else ''}")
        if history["by"] is not None:
            legend_patches(axes, [(str(g["group"]), PALETTE[i % len(PALETTE)])
                                  for i, g in enumerate(groups)])  # fmt: skip

    return Chart("history", history["shown"], caption, draw)


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


def _reach(entry: dict[str, Any], scale: float, end: int) -> float:
    interval = entry["ci"]
    if interval is None:
        return 0.0
    distance = scale * (entry["value"] - interval[0] if end == 0 else interval[1] - entry["value"])
    return max(distance, 0.0) if math.isfinite(distance) else 0.0


def _note(entry: dict[str, Any]) -> str:
    text = ", ".join(f"{c['key']}={c['to'] if c['to'] is not None else '(none)'}"
                     for c in entry["changed"])  # fmt: skip
    return text if len(text) <= MAX_NOTE_CHARS else text[: MAX_NOTE_CHARS - 1] + "…"


def _inline_svg(svg: bytes) -> str:
    return re.sub(r"^.*?(?=<svg)", "", svg.decode(), count=1, flags=re.DOTALL)
