"""The report's charts: what each one shows, taken from the fold's JSON document, and drawn.

Every chart is built from the document ``Document.to_json()`` returns (with the ``comparison``
block once a comparison ran), so a chart shows exactly the figures the table and ``--json``
show, and nothing here reads an input. Marks are per leg, per window of steps or per draft
position, never per step, so a fold of millions of lines draws as fast as one of hundreds.

How a chart is drawn and rendered (style, PNG and SVG bytes) is ``fold.present.chart``.
"""

from __future__ import annotations

import math
from typing import Any

from fold.present.another_k import another_k_chart
from fold.present.chart import (
    COLD_COLOUR,
    FLAG_COLOUR,
    PALETTE,
    WARM_COLOUR,
    Chart,
    leg_colour,
    legend_patches,
    log_axis,
    panel_rows,
    percent,
)
from fold.present.per_request import by_position_chart, requests_chart

NEEDS_STEPS = "needs a step log"
NEEDS_TIMES = "needs time stamps on the steps"
MAX_LABELS = 30  # leg labels on an axis, at most; past that every n-th


def charts(document: dict[str, Any]) -> list[Chart]:
    """Every chart of the report, in page order, for one fold's JSON document."""
    return [
        _per_position(document),
        _windows(document),
        _per_leg(document),
        _waterfall(document),
        _intervals(document),
        _time_shares(document),
        another_k_chart(document),
        requests_chart(document),
        by_position_chart(document),
    ]


def _arms(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The arm rows to draw per-arm figures for: every row of the comparison (ours over the
    warm legs and, when an oracle counts all legs, over all legs; each oracle; each other run
    of ours), or ours alone."""
    block = document.get("comparison")
    if block and block.get("rows"):
        return list(block["rows"])
    warm = document.get("warm") or {}
    return [
        {
            "name": "ours",
            "kind": "ours",
            "per_position_rate": warm.get("per_position"),
            "per_position_rate_conditional": warm.get("per_position_conditional"),
        }
    ]


def _per_position(document: dict[str, Any]) -> Chart:
    arms = [
        (index, arm["name"], arm["per_position_rate"], arm["per_position_rate_conditional"])
        for index, arm in enumerate(_arms(document))
        if arm.get("per_position_rate")
    ]
    caption = (
        "Acceptance per draft position: solid is the share of all verify steps that accepted "
        "position i (vLLM's unit), dashed the share among steps that accepted position i - 1 "
        "(position 1: of all); pooled over requests, so a curve that drops early may be every "
        "request's drafts going wrong after few tokens or some requests' drafts rarely getting "
        "far (--details shows the spread over requests)."
    )
    if not arms:
        return Chart("per-position", "Acceptance per draft position", caption, None, NEEDS_STEPS)

    def draw(figure) -> None:
        axes = figure.subplots()
        for index, name, rates, conditional in arms:
            colour = PALETTE[index % len(PALETTE)]
            positions = list(range(1, len(rates) + 1))  # 1-based, as the tables and units.md
            axes.plot(positions, percent(rates), marker="o", color=colour, label=name)
            axes.plot(
                positions,
                percent(conditional),
                marker=".",
                linestyle="--",
                color=colour,
                label=f"{name}, conditional",
            )
        axes.set_xlabel("draft position i (1 = first drafted token)")
        axes.set_ylabel("accepted (%)")
        axes.set_ylim(0, 105)
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.legend(loc="upper right", ncol=1 + len(arms) // 4)

    return Chart("per-position", "Acceptance per draft position", caption, draw)


def _windows(document: dict[str, Any]) -> Chart:
    runs = [
        (name, legs)
        for name, fold in runs_of_ours(document)
        if (
            legs := [
                leg
                for leg in fold.get("legs", [])
                if leg["window_pools"] and leg["window_pools"]["chart"]["steps"]
            ]
        )
    ]
    window = document.get("window_steps")
    caption = (
        f"A/P along each leg, per window of {window} steps, a panel per run of ours: dark lines "
        "are warm legs, grey ones cold, red ones flagged; a window pools the requests running "
        "in it, so a line that falls and stays down is acceptance falling within requests, or "
        "the requests running late in the leg accepting less (--details: per request)."
    )
    if not runs:
        return Chart("windows", "Acceptance along each leg", caption, None, NEEDS_STEPS)

    def draw(figure) -> None:
        panels = panel_rows(figure, runs, sharex=True, sharey=True)
        for axes, (_, legs) in zip(panels, runs, strict=True):
            for leg in legs:
                # each window is a flat segment from its first step to the next window's
                pools = leg["window_pools"]["chart"]
                edges = [0]
                for steps in pools["steps"]:
                    edges.append(edges[-1] + steps)
                rates = pools["accept_rate"]
                axes.plot(
                    edges,
                    percent([*rates, rates[-1]]),
                    drawstyle="steps-post",
                    color=leg_colour(leg, bool(leg.get("flags"))),
                    linewidth=1.4 if leg.get("warm") else 1.0,
                    alpha=0.85,
                    gid=f"leg-{leg['index']}",
                )
            axes.set_ylabel("A/P (%)")
            axes.set_ylim(0, 105)
        panels[-1].set_xlabel("verify step within the leg (window start)")
        legend_patches(
            panels[0],
            [("warm leg", WARM_COLOUR), ("cold leg", COLD_COLOUR), ("flagged", FLAG_COLOUR)],
        )

    return Chart("windows", "Acceptance along each leg", caption, draw, panels=len(runs))


def _per_leg(document: dict[str, Any]) -> Chart:
    runs = runs_of_ours(document)
    caption = (
        "Each leg's tok/s (top) and 1 + A/S (bottom), a column per run of ours, warm legs "
        "filled and cold ones hollow; the band is the warm fold with its 95% interval, so a "
        "leg outside it is one the median does not describe."
    )
    if not any(
        leg.get("mean_acceptance_length") is not None
        for _, fold in runs
        for leg in fold.get("legs", [])
    ):
        return Chart("per-leg", "Per-leg throughput and acceptance", caption, None, NEEDS_STEPS)

    def draw(figure) -> None:
        grid = figure.subplots(2, len(runs), sharex="col", sharey="row", squeeze=False)
        for column, (name, fold) in enumerate(runs):
            legs, warm = fold.get("legs", []), fold.get("warm") or {}
            colour = PALETTE[column % len(PALETTE)]
            for row, (key, leg_key, label) in enumerate(
                (
                    ("output_throughput_tok_s", "tok_s", "tok/s"),
                    ("mean_acceptance_length", "mean_acceptance_length", "1 + A/S"),
                )
            ):
                axes = grid[row][column]
                for is_warm in (True, False):
                    points = [
                        (leg["index"], leg[leg_key])
                        for leg in legs
                        if bool(leg.get("warm")) == is_warm and leg.get(leg_key) is not None
                    ]
                    if points:
                        axes.scatter(
                            *zip(*points, strict=True),
                            s=22,
                            color=colour,
                            facecolors=colour if is_warm else "white",
                            zorder=3,
                        )
                folded, interval = warm.get(key), warm.get(f"{key}_ci")
                if folded is not None:
                    axes.axhline(folded, color=colour, linewidth=0.8)
                if interval:
                    axes.axhspan(interval[0], interval[1], color=colour, alpha=0.12)
                if column == 0:
                    axes.set_ylabel(label)
            if len(runs) > 1:
                grid[0][column].set_title(name, fontsize=9)
            grid[1][column].set_xlabel("leg index")
            grid[1][column].xaxis.get_major_locator().set_params(integer=True)

    return Chart("per-leg", "Per-leg throughput and acceptance", caption, draw)


_BAR_LABELS = {
    "acceptance": "acceptance",
    "slower_steps": "slower steps",
    "faster_steps": "faster steps",
    "before_first_step": "start-up",
    "stalls": "stalls",
    "tail": "tail",
    "rest": "rest",
    "speed": "speed",
    "ratio": "r",
}
_BAR_COLOURS = {"total": "#444444", "gain": "#2e8b57", "cost": "#c0392b"}


def _waterfall(document: dict[str, Any]) -> Chart:
    block = document.get("comparison") or {}
    waterfalls = block.get("waterfalls") or {}
    caption = (
        "The throughput ratio r to each oracle as a product, on a log scale: acceptance, then "
        "speed split into slower steps, start-up, stalls and tail; bars below 1 cost us, and "
        "whiskers are 95% intervals where the inputs give them."
    )
    if not waterfalls:
        return Chart("gap", "Where the gap goes", caption, None, "needs an oracle (--vs)")

    def draw(figure) -> None:
        columns = figure.subplots(1, len(waterfalls), squeeze=False)[0]
        for axes, (name, found) in zip(columns, waterfalls.items(), strict=True):
            bars = found["bars"]
            for position, bar in enumerate(bars):
                if bar["factor"] is None:
                    continue
                axes.bar(
                    position,
                    bar["height"],
                    bottom=bar["bottom"],
                    color=_BAR_COLOURS[bar["kind"]],
                    width=0.6,
                    gid=f"bar-{position}",
                )
                if bar["whisker"]:
                    below, above = bar["whisker"]
                    axes.errorbar(
                        position,
                        bar["top"],
                        yerr=[[below], [above]],
                        color="black",
                        capsize=3,
                        linewidth=0.8,
                    )
            axes.axhline(1.0, color="black", linewidth=0.6)
            log_axis(axes, *found["axis"])
            axes.set_xticks(
                range(len(bars)), [_BAR_LABELS[bar["part"]] for bar in bars], rotation=30
            )
            axes.set_title(f"ours vs {name}", fontsize=9)
        columns[0].set_ylabel("factor (log scale)")

    return Chart("gap", "Where the gap goes", caption, draw)


def _intervals(document: dict[str, Any]) -> Chart:
    runs = [
        (name, legs)
        for name, fold in runs_of_ours(document)
        if (
            legs := [
                leg for leg in fold.get("legs", []) if (leg.get("cadence") or {}).get("intervals")
            ]
        )
    ]
    factor = document.get("stall_factor") or 0
    caption = (
        "Time between a request's verify steps, per leg and a panel per run of ours: the box "
        "runs from the median to p90, the whisker to p99 and the dot is the longest; red legs "
        f"had stalls (an interval over {factor:g}x its request's median)."
    )
    if not runs:
        return Chart("intervals", "Step intervals per leg", caption, None, NEEDS_TIMES)
    longest = max(leg["cadence"]["interval_max_s"] for _, legs in runs for leg in legs)

    def draw(figure) -> None:
        panels = panel_rows(figure, runs, sharex=True, sharey=True)
        for axes, (_, legs) in zip(panels, runs, strict=True):
            index = [leg["index"] for leg in legs]
            ms = {
                key: [1e3 * leg["cadence"][key] for leg in legs]
                for key in (
                    "interval_median_s",
                    "interval_p90_s",
                    "interval_p99_s",
                    "interval_max_s",
                )
            }
            colours = [leg_colour(leg, bool(leg["cadence"].get("stalls"))) for leg in legs]
            p50, p90, p99 = ms["interval_median_s"], ms["interval_p90_s"], ms["interval_p99_s"]
            heights = [high - low for low, high in zip(p50, p90, strict=True)]
            axes.bar(index, heights, bottom=p50, width=0.6, color=colours, alpha=0.7)
            axes.vlines(index, p90, p99, colors=colours, linewidth=1)
            axes.hlines(p50, [x - 0.3 for x in index], [x + 0.3 for x in index], colors="black")
            axes.scatter(index, ms["interval_max_s"], s=6, color=colours, zorder=3)
            axes.set_ylim(0, 1.1e3 * longest)
            axes.set_ylabel("interval (ms)")
        panels[-1].set_xlabel("leg index")
        panels[-1].xaxis.get_major_locator().set_params(integer=True)
        legend_patches(
            panels[0],
            [("warm leg", WARM_COLOUR), ("cold leg", COLD_COLOUR), ("stalls", FLAG_COLOUR)],
        )

    return Chart("intervals", "Step intervals per leg", caption, draw, panels=len(runs))


_SHARE_PARTS = (
    ("before the first step", "#d9622b"),
    ("decoding", "#1f5fa8"),
    ("in stalls", "#c0392b"),
    ("in the tail", "#9aa5b1"),
)


_SPLIT_KEYS = ("before_first_step", "decoding", "stalls", "tail")
"""The cadence's ``time_split`` parts, in the order of ``_SHARE_PARTS``."""


def _time_shares(document: dict[str, Any]) -> Chart:
    runs = [
        (name, warm)
        for name, fold in runs_of_ours(document)
        if (
            warm := [
                (leg["index"], shares)
                for leg in fold.get("legs", [])
                if leg.get("warm")
                and (shares := (leg.get("cadence") or {}).get("time_split")) is not None
            ]
        )
    ]
    caption = (
        "Where each warm leg's time goes, a panel per run of ours: before the first verify step "
        "(prefill, start-up), decoding, stalled, and after the last step; a wide orange or grey "
        "part is time that steps/s does not see."
    )
    if not runs:
        return Chart("time-shares", "Warm legs' time", caption, None, NEEDS_TIMES)

    def draw(figure) -> None:
        panels = figure.subplots(1, len(runs), squeeze=False)[0]
        for axes, (name, warm) in zip(panels, runs, strict=True):
            positions = range(len(warm))
            left = [0.0] * len(warm)
            for key, (_, colour) in zip(_SPLIT_KEYS, _SHARE_PARTS, strict=True):
                widths = [100 * shares[key] for _, shares in warm]
                axes.barh(positions, widths, left=left, color=colour, height=0.7)
                left = [start + width for start, width in zip(left, widths, strict=True)]
            every = max(1, math.ceil(len(warm) / MAX_LABELS))
            shown = range(0, len(warm), every)
            axes.set_yticks(list(shown), [f"leg {warm[position][0]}" for position in shown])
            axes.invert_yaxis()
            axes.set_xlim(0, 100)
            axes.set_xlabel("share of the leg's time (%)")
            axes.grid(axis="y", visible=False)
            if len(runs) > 1:
                axes.set_title(name, fontsize=9, loc="right")
        legend_patches(panels[0], list(_SHARE_PARTS))

    return Chart("time-shares", "Warm legs' time", caption, draw)


def runs_of_ours(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, fold document) of our run and of each other run of ours it is compared with."""
    runs = document.get("runs") or {}
    return [("ours", document), *((name, run["fold"]) for name, run in runs.items())]
