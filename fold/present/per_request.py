"""The warm fold's per-request figures and acceptance by output position, for the terminal
(``--details``, and a flag line on the first screen when acceptance falls with position), the
markdown record and the page, with the page's chart: all from the JSON document alone."""

from __future__ import annotations

import html
from typing import Any

from rich.text import Text

from fold.present.chart import WARM_COLOUR, Chart, percent
from fold.present.table import length
from fold.present.table import percent as shown_percent

LOWEST_LISTED = 5  # of the JSON's lowest requests, the terminal and the records list these


def _blocks(document: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    warm = document.get("warm") or {}
    return warm.get("per_request"), warm.get("by_output_position")


def _pm(value: float | None, interval: list[float] | None, shown) -> str:
    if value is None:
        return shown(None)
    if interval is None:
        return shown(value)
    return f"{shown(value)} [{shown(interval[0])}, {shown(interval[1])}]"


def _bucket_name(bucket: dict[str, Any]) -> str:
    return f"{bucket['from']}-{bucket['to']}"


def request_name(request: dict[str, Any]) -> str:
    """A request as the lists name it: leg, writer and id (ids repeat across writers)."""
    return f"leg {request['leg']} w {request['w']} id {request['seq']}"


def summary_lines(document: dict[str, Any]) -> list[str]:
    """The per-request and by-position figures as plain lines (terminal and markdown)."""
    spread, positions = _blocks(document)
    lines: list[str] = []
    if spread is not None:
        pooled, mean = spread["pooled"], spread["per_request_mean"]
        lines.append(
            f"Per request (warm legs, {spread['requests']} requests; "
            f"{spread['requests_without_drafts']} without a draft, left out of the means):"
        )
        for figure, shown, name in (
            ("accept_rate", shown_percent, "A/P"),
            ("mean_acceptance_length", length, "1+A/S"),
        ):
            lines.append(
                f"  {name}: pooled {_pm(pooled[figure], pooled[figure + '_ci'], shown)}; "
                f"per-request mean {_pm(mean[figure], mean[figure + '_ci'], shown)}"
            )
        rates = spread["spread"]["accept_rate"]
        if rates is not None:
            cells = "  ".join(
                f"{key} {shown_percent(rates[key])}" for key in ("min", "p10", "p50", "p90", "max")
            )
            lines.append(f"  A/P per request: {cells}")
        lowest = spread["lowest"][:LOWEST_LISTED]
        if lowest:
            lines.append("  lowest A/P (of the drafts each proposed):")
            lines.extend(
                f"    {request_name(r)}: {shown_percent(r['accept_rate'])} of {r['proposed']}"
                for r in lowest
            )
    if positions is not None:
        lines.append("By output position (warm legs; A/P pooled over requests):")
        cells = [
            f"tokens {_bucket_name(b)} already out: "
            f"{_pm(b['accept_rate'], b['accept_rate_ci'], shown_percent)} ({b['steps']} steps)"
            for b in positions["buckets"]
            if b["steps"]
        ]
        lines.extend(f"  {cell}" for cell in cells)
        lines.append(f"  {falling_words(positions)}")
    return lines


def falling_words(positions: dict[str, Any]) -> str:
    slope, interval = positions["slope"], positions["slope_ci"]
    if slope is None:
        return "slope: not defined (fewer than two buckets with drafts)"
    found = f"A/P {100 * slope:+.1f} points per doubling of the output"
    if interval is None:
        return f"{found} (no interval: not judged)"
    verdict = "falling" if positions["falling"] else "not falling"
    return f"{found} [{100 * interval[0]:+.1f}, {100 * interval[1]:+.1f}]: {verdict}"


def details_view(document: dict[str, Any]) -> Text:
    """The ``--details`` section of the terminal."""
    return Text("\n".join(summary_lines(document)))


def falling_flag(document: dict[str, Any]) -> Text | None:
    """The first screen's line when the warm legs' acceptance falls with output position."""
    _, positions = _blocks(document)
    if positions is None or not positions["falling"]:
        return None
    slope, (low, high) = positions["slope"], positions["slope_ci"]
    text = Text()
    text.append("A/P falls as output grows: ", style="bold yellow")
    text.append(f"{100 * slope:+.1f} points per doubling [{100 * low:+.1f}, {100 * high:+.1f}]")
    text.append(" (--details)")
    return text


def markdown_section(document: dict[str, Any]) -> str | None:
    lines = summary_lines(document)
    if not lines:
        return None
    return "## Per request and by output position\n\n" + "\n".join(
        f"- {line.strip()}" for line in lines
    )


def page_section(document: dict[str, Any]) -> str:
    lines = summary_lines(document)
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line.strip())}</li>" for line in lines)
    heading = "<h2>Per request and by output position</h2>"
    return f'<section id="per-request">{heading}<ul>{items}</ul></section>'


def by_position_chart(document: dict[str, Any]) -> Chart:
    """A/P per bucket of output position, with each bucket's 95% interval."""
    _, positions = _blocks(document)
    title = "Acceptance by output position"
    caption = (
        "A/P of the warm legs' drafted steps, pooled over requests, by the output tokens the "
        "request had already emitted (buckets double; bars: 95% intervals): a line that falls "
        "means the drafter loses the thread as the output grows."
    )
    buckets = [] if positions is None else [b for b in positions["buckets"] if b["steps"]]
    if not buckets:
        return Chart("by-output-position", title, caption, None, "needs a step log with times")

    def draw(figure) -> None:
        axes = figure.subplots()
        places = list(range(len(buckets)))
        rates = percent([b["accept_rate"] for b in buckets])
        low = [
            rate - 100 * b["accept_rate_ci"][0] if b["accept_rate_ci"] else 0.0
            for rate, b in zip(rates, buckets, strict=True)
        ]
        high = [
            100 * b["accept_rate_ci"][1] - rate if b["accept_rate_ci"] else 0.0
            for rate, b in zip(rates, buckets, strict=True)
        ]
        axes.errorbar(places, rates, yerr=[low, high], marker="o", color=WARM_COLOUR, capsize=3)
        axes.set_xticks(places, [_bucket_name(b) for b in buckets], rotation=30)
        axes.set_xlabel("output tokens already emitted by the request")
        axes.set_ylabel("A/P (%)")
        axes.set_ylim(0, 105)

    return Chart("by-output-position", title, caption, draw)
