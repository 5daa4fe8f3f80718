"""The step cadence as rich renderables: per leg, then the warm legs (nothing here prints)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fold.render import NOT_DEFINED, percent, rate, three_decimals
from fold.result import FoldResult
from fold.speed import SpeedSplit

NOT_RECORDED = "not recorded"


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


def cadence_table(result: FoldResult) -> Table:
    """One row per leg with steps: seconds per request (mean), intervals in ms over all of the
    leg's requests, stalls, and decode steps/s (all intervals over all decode seconds)."""
    table = Table(
        title=f"Step cadence per leg (stall: interval > {result.stall_factor:g}x its request's "
        "median)",
        title_justify="left",
        caption="first/decode/tail: per request, mean; p50..max: intervals between a "
        "request's steps, over all of the leg's requests; steps/s: steps after the first over "
        "decode time; c: cold leg",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        collapse_padding=True,
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
    for leg in result.legs:
        cadence = leg["cadence"]
        if not cadence["requests"]:
            continue
        table.add_row(
            f"{leg['index']}{'' if leg['warm'] else 'c'}",
            duration(cadence["first_step_s"]),
            duration(cadence["decode_s"]),
            duration(cadence["tail_s"]),
            duration(cadence["interval_median_s"]),
            duration(cadence["interval_p90_s"]),
            duration(cadence["interval_p99_s"]),
            duration(cadence["interval_max_s"]),
            count(cadence["stalls"]),
            duration(cadence["stall_s"]),
            rate(cadence["decode_steps_per_s"]),
        )
    return table


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


def warm_cadence_lines(result: FoldResult) -> Text:
    cadence = result.warm["cadence"]
    text = Text()
    text.append("warm cadence: ", style="bold")
    text.append(
        f"{cadence['requests']} requests; decode steps/s {rate(cadence['decode_steps_per_s'])} "
        f"pooled, {rate(cadence['median']['decode_steps_per_s'])} median request; intervals "
        f"p50 {duration(cadence['interval_median_s'])}, "
        f"p99 {duration(cadence['interval_p99_s'])}; "
        f"stalls {count(cadence['stalls'])} ({duration(cadence['stall_s'])} per request)"
    )
    text.append("\nwarm leg time: ", style="bold")
    text.append(where_time_goes(cadence))
    return text


def cadence_view(result: FoldResult) -> RenderableType:
    return Group(cadence_table(result), warm_cadence_lines(result))


_PART_LABELS = {"before_first_step": "start-up", "stalls": "stalls", "tail": "tail"}


def speed_summary(split: SpeedSplit) -> str | None:
    """'speed: 70% slower steps, 30% start-up, 0% stalls, 0% tail', largest part first."""
    if split.parts is None:
        return None
    slower = split.steady_factor is not None and split.steady_factor < 1
    labels = {"steps": "slower steps" if slower else "faster steps", **_PART_LABELS}
    phrases = []
    for name, part in sorted(split.parts.items(), key=lambda item: -item[1]):
        share = round(abs(part) * 100)
        phrases.append(
            f"{share}% {labels[name]}" if part >= 0 else f"{labels[name]} offset {share}%"
        )
    return "speed: " + ", ".join(phrases)


def speed_lines(splits: Mapping[str, SpeedSplit]) -> list[Text]:
    """Our shares of leg time, then per oracle: the speed factor over leg, decode and steady
    windows, the split of the speed gap, and what the oracle does not record."""
    if not splits:
        return []
    shares = next(iter(splits.values())).shares
    lines = [
        Text("our warm leg time: ", style="bold")
        + Text(
            f"{percent(shares['before_first_step'], NOT_RECORDED)} before the first step, "
            f"{percent(shares['stalls'], NOT_RECORDED)} in stalls, "
            f"{percent(shares['tail'], NOT_RECORDED)} in the tail"
        )
    ]
    for split in splits.values():
        head = Text(f"vs {split.oracle}, speed factor: ", style="bold")
        if split.leg_factor is None:
            lines.append(head + Text(NOT_RECORDED, style="dim italic"))
        else:
            lines.append(
                head
                + Text(
                    f"{three_decimals(split.leg_factor)} over leg windows, "
                    f"{three_decimals(split.decode_factor, NOT_RECORDED)} over our decode "
                    f"windows, {three_decimals(split.steady_factor, NOT_RECORDED)} over our "
                    "steady decoding"
                )
            )
        summary = speed_summary(split)
        if summary is not None:
            lines.append(Text("  " + summary + " (shares of the speed factor's log)", "bold"))
        for lack in split.oracle_lacks:
            lines.append(Text(f"  {lack}", style="dim"))
    return lines
