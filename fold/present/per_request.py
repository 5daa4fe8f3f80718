"""The warm fold's per-request figures and acceptance by output position, for the terminal
(``--details``, and a flag line on the first screen when acceptance falls with position), the
markdown record and the page, with the page's chart: all from the JSON document alone."""

from __future__ import annotations

import html
from typing import Any

from rich.text import Text

from fold.present.chart import FLAG_COLOUR, WARM_COLOUR, Chart, percent
from fold.present.page_layout import disclosure
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
            quantiles = "  ".join(
                f"{key} {shown_percent(rates[key])}" for key in ("min", "p10", "p50", "p90", "max")
            )
            lines.append(f"  A/P per request: {quantiles}")
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
        if (alone := long_requests_words(positions)) is not None:
            lines.append(f"  {alone}")
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
    if positions.get("caveat") is not None:  # the code decides, the document's words say it
        text.append(f"\n  {positions['caveat_text']}")
    else:
        text.append(" (--details)")
    return text


def long_requests_words(positions: dict[str, Any]) -> str | None:
    """The buckets of the requests that reached the last one: one set of requests throughout,
    so their line falls only if acceptance falls within requests."""
    found = positions.get("long_requests")
    if found is None:
        return None
    edges = positions["edges"]
    rates = ", ".join(
        f"tokens {edges[i]}-{edges[i + 1]}: {shown_percent(bucket['accept_rate'])}"
        for i, bucket in enumerate(found["buckets"])
        if bucket["proposed"]
    )
    count = found["requests"]
    return (
        f"the {count} request{'s' if count != 1 else ''} that reached the last bucket, alone "
        f"(the same requests in every bucket, so a fall here is within requests): {rates}"
    )


def markdown_section(document: dict[str, Any]) -> str | None:
    lines = summary_lines(document)
    if not lines:
        return None
    return "## Per request and by output position\n\n" + "\n".join(
        f"- {line.strip()}" for line in lines
    )


SECTION_ID = "per-request"
HEADING = "Which requests accept least, and does acceptance fall as output grows?"


def _lowest(spread: dict[str, Any]) -> list[dict[str, Any]]:
    """The lowest requests the page, its chart and the records show: those with a rate."""
    return [r for r in spread["lowest"][:LOWEST_LISTED] if r["accept_rate"] is not None]


def page_section(document: dict[str, Any], charts: dict[str, str] | None = None) -> str:
    """The page's section: the spread in one line, the lowest requests as a table, the
    falling verdict, and the by-position figures folded under a line; ``charts`` holds the
    drawn ``requests`` and ``by-output-position`` charts' HTML, shown beside them."""
    spread, positions = _blocks(document)
    if spread is None and positions is None:
        return ""
    charts = charts or {}
    parts = [f'<section id="{SECTION_ID}"><h2>{html.escape(HEADING)}</h2>']
    if spread is not None:
        parts.append(f"<p>{html.escape(_spread_words(spread))}</p>")
        lowest = _lowest(spread)
        if lowest:
            rows = "".join(
                f'<tr><td>{r["leg"]}</td><td title="writer {html.escape(str(r["w"]))}">'
                f"{html.escape(str(r['seq']))}</td><td>{shown_percent(r['accept_rate'])}</td>"
                f"<td>{r['proposed']:,}</td></tr>"
                for r in lowest
            )
            parts.append(
                '<table class="requests"><tr><th>leg</th><th>request id</th><th>A/P</th>'
                f"<th>P</th></tr>{rows}</table>"
                f'<p class="caption">The {len(lowest)} warm requests that accepted the least '
                "of the drafts they proposed; P: the draft tokens each verified (the writer of "
                "each id is in its tooltip and the JSON).</p>"
            )
    if positions is not None:
        parts.append(f"<p>By output position: {html.escape(falling_words(positions))}.</p>")
        drawn = [b for b in positions["buckets"] if b["steps"]]
        if drawn:
            rows = "".join(
                f"<tr><td>{_bucket_name(b)}</td><td>{shown_percent(b['accept_rate'])}</td>"
                f'<td class="pm">{html.escape(_interval(b["accept_rate_ci"]))}</td>'
                f"<td>{b['steps']:,}</td></tr>"
                for b in drawn
            )
            table = (
                "<table><tr><th>tokens already out</th><th>A/P</th><th>95% interval</th>"
                f"<th>steps</th></tr>{rows}</table>"
            )
            parts.append(disclosure(f"A/P by output position, {_buckets(len(drawn))}", table))
    images = "".join(charts.get(name, "") for name in ("requests", "by-output-position"))
    if images:
        parts.append(f'<div class="charts">{images}</div>')
    parts.append("</section>")
    return "".join(parts)


def _buckets(count: int) -> str:
    return "1 bucket of tokens" if count == 1 else f"{count} buckets of tokens"


def _interval(interval: list[float] | None) -> str:
    return (
        "" if interval is None else f"[{shown_percent(interval[0])}, {shown_percent(interval[1])}]"
    )


def _spread_words(spread: dict[str, Any]) -> str:
    pooled, mean = spread["pooled"], spread["per_request_mean"]
    text = (
        f"{spread['requests']} warm requests ({spread['requests_without_drafts']} without a "
        f"draft, left out). A/P pooled "
        f"{_pm(pooled['accept_rate'], pooled['accept_rate_ci'], shown_percent)}, per-request "
        f"mean {_pm(mean['accept_rate'], mean['accept_rate_ci'], shown_percent)}"
    )
    rates = spread["spread"]["accept_rate"]
    if rates is not None:
        text += "; per request " + ", ".join(
            f"{name} {shown_percent(rates[key])}"
            for key, name in (("min", "min"), ("p10", "p10"), ("p50", "median"), ("p90", "p90"),
                              ("max", "max"))
        )  # fmt: skip
    return text + "."


def requests_chart(document: dict[str, Any]) -> Chart:
    """The lowest requests' A/P as bars, over the band from p10 to p90 of every request's A/P
    and its median: how far below the bulk the worst requests sit."""
    spread, _ = _blocks(document)
    title = "The lowest requests against the spread"
    caption = (
        "A/P of the warm requests that accepted least (bars, by leg and request id) over the "
        "band from p10 to p90 of every warm request's A/P, with its median (dashed) and "
        "highest (dotted): bars far under the band are requests the fold's mean hides."
    )
    lowest = [] if spread is None else _lowest(spread)
    rates = None if spread is None else spread["spread"]["accept_rate"]
    if not lowest or rates is None:
        return Chart("requests", title, caption, None, "needs a step log")

    def draw(figure) -> None:
        axes = figure.subplots()
        axes.axhspan(100 * rates["p10"], 100 * rates["p90"], color=WARM_COLOUR, alpha=0.15,
                     gid="p10-p90")  # fmt: skip
        axes.axhline(100 * rates["p50"], color=WARM_COLOUR, linestyle="--", gid="median")
        axes.axhline(100 * rates["max"], color=WARM_COLOUR, linestyle=":", gid="max")
        places = list(range(len(lowest)))
        for place, request in zip(places, lowest, strict=True):
            axes.bar(place, 100 * request["accept_rate"], width=0.6, color=FLAG_COLOUR,
                     gid=f"request-{place}")  # fmt: skip
            # the value over each bar: a request at 0.0% draws no bar and must not read as a gap
            axes.annotate(shown_percent(request["accept_rate"]),
                          (place, 100 * request["accept_rate"]), xytext=(0, 2),
                          textcoords="offset points", ha="center", va="bottom", fontsize=8,
                          gid=f"request-value-{place}")  # fmt: skip
        axes.set_xticks(places, [f"leg {r['leg']}\nid {r['seq']}" for r in lowest])
        axes.set_ylabel("A/P (%)")
        axes.set_ylim(0, 105)

    return Chart("requests", title, caption, draw)


def by_position_chart(document: dict[str, Any]) -> Chart:
    """A/P per bucket of output position, with each bucket's 95% interval."""
    _, positions = _blocks(document)
    title = "Acceptance by output position"
    caption = (
        "A/P of the warm legs' drafted steps, pooled over requests, by the output tokens the "
        "request had already emitted (buckets double; bars: 95% intervals); each bucket pools the "
        "requests that reached it, so a line that falls is the drafter losing the thread within "
        "requests, or the long requests (the only ones in late buckets) accepting less from "
        "their start: --details shows the long requests' own buckets, which tell the two apart."
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
