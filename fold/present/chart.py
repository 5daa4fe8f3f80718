"""The charts' drawing kit: a chart's description, its rendering to PNG or SVG, the style.

matplotlib is imported only when a chart is drawn: it is the ``report`` extra, not a core
dependency, and a fold that draws nothing never loads it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fold.errors import InputError

REPORT_EXTRA = "pip install 'fold-acceptance[report]'"
# Stable colours per arm, in row order: ours first, then each oracle.
PALETTE = ("#1f5fa8", "#d9622b", "#2e8b57", "#8e44ad", "#b8860b", "#c0392b", "#555555")
WARM_COLOUR, COLD_COLOUR, FLAG_COLOUR = "#1f5fa8", "#9aa5b1", "#c0392b"
WIDTH_IN, HEIGHT_IN, DPI = 7.2, 3.6, 100
PANEL_HEIGHT = 0.6  # each further panel adds this much of a chart's height


@dataclass(frozen=True)
class Chart:
    """One picture: a stable file name, a title, a one-sentence caption and how to draw it.

    ``missing`` says why the chart cannot be drawn from this fold (then ``draw`` is None).
    """

    name: str
    title: str
    caption: str
    draw: Callable[[Any], None] | None
    missing: str | None = None
    panels: int = 1
    """Panels stacked one above another (one per run of ours): each adds to the height."""


def render(chart: Chart, fmt: str) -> bytes:
    """The chart as ``png`` or ``svg`` bytes; the same document gives the same bytes."""
    if chart.draw is None:
        raise ValueError(f"chart {chart.name} has nothing to draw: {chart.missing}")
    figure_class = matplotlib_figure()
    import matplotlib

    # matplotlib's stubs want each name as a literal; rcParams checks the names when it runs
    with matplotlib.rc_context(_STYLE):  # type: ignore[arg-type]
        height = HEIGHT_IN * (1 + PANEL_HEIGHT * (chart.panels - 1))
        figure = figure_class(figsize=(WIDTH_IN, height), dpi=DPI, layout="constrained")
        chart.draw(figure)
        out = io.BytesIO()
        metadata = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
        figure.savefig(out, format=fmt, metadata=metadata)
    return out.getvalue()


_STYLE: dict[str, Any] = {
    "svg.hashsalt": "fold-acceptance",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#e3e6ea",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "legend.fontsize": 8,
}


def require_matplotlib() -> None:
    """Refuse before any work when the charts' library is missing, saying how to add it."""
    matplotlib_figure()


def matplotlib_figure():
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise InputError(
            f"charts need matplotlib, which the core install leaves out: {REPORT_EXTRA}"
        ) from error
    return Figure


def panel_rows(figure, runs: list, *, sharex: bool, sharey: bool) -> list:
    """One row of axes per run, titled with the run's name when there is more than one."""
    rows = figure.subplots(len(runs), 1, sharex=sharex, sharey=sharey, squeeze=False)[:, 0]
    if len(runs) > 1:
        for axes, (name, _) in zip(rows, runs, strict=True):
            axes.set_title(name, fontsize=9, loc="right")
    return list(rows)


def leg_colour(leg: dict[str, Any], flagged: bool) -> str:
    if flagged:
        return FLAG_COLOUR
    return WARM_COLOUR if leg.get("warm") else COLD_COLOUR


def percent(rates: list[float | None]) -> list[float]:
    return [math.nan if rate is None else 100 * rate for rate in rates]


def legend_patches(axes, entries: list[tuple[str, str]]) -> None:
    """A one-row legend above the plot, where it can hide no mark."""
    from matplotlib.patches import Patch

    axes.legend(
        handles=[Patch(color=colour, label=label) for label, colour in entries],
        loc="lower left",
        bbox_to_anchor=(0.0, 1.0),
        ncol=len(entries),
    )


MOST_LOG_TICKS = 6
"""Labels on a log axis, at most: past that they crowd and print over one another."""


def log_ticks(low: float, high: float, most: int = MOST_LOG_TICKS) -> list[float]:
    """Tick values for a log axis from ``low`` to ``high`` (both > 0) that stay apart at any
    range: 1-2-5 per decade while they number at most ``most``, then the powers of ten alone,
    then every n-th of those; over a range narrower than two such steps, evenly spaced values
    (a gap of 0.93 to 1.03 still gets labels)."""
    if not (0 < low <= high and math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"a log axis needs 0 < low <= high, not {low!r}, {high!r}")
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    for mantissas in ((1, 2, 5), (1,)):
        found = [
            m * 10.0**k
            for k in range(first, last + 1)
            for m in mantissas
            if low <= m * 10.0**k <= high
        ]
        if 2 <= len(found) <= most:
            return found
    powers = [10.0**k for k in range(first, last + 1) if low <= 10.0**k <= high]
    if len(powers) > most:
        every = math.ceil(len(powers) / most)
        return powers[::every]
    return _even_ticks(low, high, most)


def _even_ticks(low: float, high: float, most: int) -> list[float]:
    """At most ``most`` round values from ``low`` to ``high``, a 1-2-5 step apart."""
    span = high - low
    if span <= 0:
        return [low]
    decade = math.floor(math.log10(span))
    for step in (m * 10.0**k for k in range(decade - 2, decade + 2) for m in (1, 2, 5)):
        start = math.ceil(low / step)
        values = [round(n * step, 12) for n in range(start, math.floor(high / step) + 1)]
        if len(values) <= most:
            return values
    return [low, high]


def tick_label(value: float) -> str:
    """A factor as people read it: 0.01, 0.95, 1, 2.5, 100."""
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def log_axis(axes, low: float, high: float) -> None:
    """A readable log-scale y axis over ``low`` .. ``high``: ticks from :func:`log_ticks`
    with their labels, no minor labels, a little room above and below."""
    from matplotlib.ticker import FixedLocator, NullLocator

    axes.set_yscale("log")
    ticks = log_ticks(low, high)
    margin = (high / low) ** 0.08 if high > low else 1.1
    axes.set_ylim(low / margin, high * margin)
    axes.yaxis.set_major_locator(FixedLocator(ticks))
    axes.yaxis.set_minor_locator(NullLocator())
    axes.set_yticks(ticks, [tick_label(value) for value in ticks])
