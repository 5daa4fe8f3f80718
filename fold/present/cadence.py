"""The step cadence as rich renderables, from the fold's JSON document: per leg, then the warm
legs (nothing here prints)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fold.present.table import NOT_DEFINED, no_times, percent, rate, same_decimals
from fold.present.table_layout import Fitted, fit


def duration(seconds: float | None) -> str:
    """Three significant digits in the unit that suits: '282us', '3.42ms', '5.45s', '1234s'."""
    if seconds is None:
        return NOT_DEFINED
    if seconds == 0:
        return "0"
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if seconds >= scale or unit == "us":
            value = seconds / scale
            return f"{value:.0f}{unit}" if value >= 100 else f"{value:.3g}{unit}"
    raise AssertionError("unreachable")


def count(value: int | None) -> str:
    return NOT_DEFINED if value is None else str(value)


def cadence_table(document: dict[str, Any]) -> Fitted:
    """One row per leg with steps: seconds per request (mean), intervals in ms over all of the
    leg's requests, stalls, and decode steps/s (all intervals over all decode seconds)."""
    table = Table(
        title="Step cadence per leg (stall: interval > "
        f"{document['stall_factor']:g}x its request's median)",
        title_justify="left",
        caption="first/decode/tail: per request, mean; p50..max: intervals between a "
        "request's steps, over all of the leg's requests; steps/s: steps after the first over "
        "decode time; c: cold leg",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0),  # the box's separators keep columns apart; 11 of them fit 80 columns
        pad_edge=False,
    )
    for header in (
        "leg",
        "first",
        "decode",
        "tail",
        "p50",
        "p90",
        "p99",
        "max",
        "stalls",
        "stall",
        "steps/s",
    ):
        table.add_column(header, justify="right", no_wrap=True)
    for leg in document["legs"]:
        cadence = leg["cadence"]
        if not cadence["requests"]:
            continue
        table.add_row(
            f"{leg['index']}{'' if leg['warm'] else 'c'}",
            *time_cells(cadence),
            rate(cadence["decode_steps_per_s"]),
        )
    return fit(table)


def where_time_goes(cadence: dict[str, Any]) -> str:
    """'45.0% before the first step, 50.0% decoding (2.0% in stalls), 5.0% in the tail'."""
    shares = cadence["shares"]
    if shares["decode"] is None:
        return "no timed leg"
    return (
        f"{percent(shares['before_first_step'])} before the first step, "
        f"{percent(shares['decode'])} decoding ({percent(shares['stalls'])} in stalls), "
        f"{percent(shares['tail'])} in the tail"
    )


def time_cells(cadence: dict[str, Any]) -> tuple[str, ...]:
    """A group's durations, intervals, stall count and stall time as its table rows show them."""
    return (
        duration(cadence["first_step_s"]),
        duration(cadence["decode_s"]),
        duration(cadence["tail_s"]),
        duration(cadence["interval_median_s"]),
        duration(cadence["interval_p90_s"]),
        duration(cadence["interval_p99_s"]),
        duration(cadence["interval_max_s"]),
        count(cadence["stalls"]),
        duration(cadence["stall_s"]),
    )


def decode_rate(cadence: dict[str, Any]) -> str:
    """The pooled decode steps/s with its 95% interval as ``±`` when it has one: '23.57 ±1.21'."""
    value = cadence["decode_steps_per_s"]
    reach = cadence.get("decode_steps_per_s_reach")
    if value is None or reach is None:
        return rate(value)
    shown = rate(value)
    return f"{shown} ±{same_decimals(reach, shown)}"


def warm_cadence_lines(document: dict[str, Any]) -> Text:
    cadence = document["warm"]["cadence"]
    text = Text()
    text.append("warm cadence: ", style="bold")
    text.append(
        f"{cadence['requests']} requests; decode steps/s {decode_rate(cadence)} "
        f"pooled, {rate(cadence['median']['decode_steps_per_s'])} median request; intervals "
        f"p50 {duration(cadence['interval_median_s'])}, "
        f"p99 {duration(cadence['interval_p99_s'])}; "
        f"stalls {count(cadence['stalls'])} ({duration(cadence['stall_s'])} per request)"
    )
    text.append("\nwarm leg time: ", style="bold")
    text.append(where_time_goes(cadence))
    return text


def cadence_view(document: dict[str, Any]) -> RenderableType:
    if document["warm"]["cadence"] is None:
        text = Text()
        text.append("step cadence: ", style="bold")
        text.append(no_times(document), style="dim")
        return text
    return Group(cadence_table(document), warm_cadence_lines(document))
