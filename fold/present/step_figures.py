"""Every arm's step figures side by side (the comparison rows' ``step_figures``): per position
in its three forms, the histogram, the shape within a leg, and the warm fold's per-request and
by-position figures; in the terminal (``--details``), the
markdown record and the page. A function of the JSON document alone, as every presenter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from fold.inputs.populations import POPULATION_TEXT
from fold.present.markdown_table import table
from fold.present.table import (
    NOT_RECORDED,
    index_ranges,
    length,
    percent,
    position_label,
    value_runs,
)

TITLE = "Step figures side by side"
_FORMS = (
    ("per_position", "pos {i}, of steps"),
    ("per_position_conditional", "pos {i}, given the one before"),
    ("per_position_of_proposed", "pos {i}, of drafting steps"),
)
CAPTION = (
    "Per position: of all drafted steps, the share that accepted draft position i (vLLM's "
    "per-position rate); given the one before accepted; and of the steps that drafted "
    "position i. Histogram: share of steps that accepted exactly j drafts. Window w: A/P of "
    "every leg's w-th window of steps. [low, high]: 95% interval."
)


NO_ARMS = {"max_draft": 0, "windows": 0, "buckets_of": None, "beside": False}
"""How far the step figures reach without a comparison: no arm, nothing set beside."""


def _extent(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """The comparison's ``step_figures``: how far the arms' step figures reach."""
    return (document.get("comparison") or {}).get("step_figures") or NO_ARMS


def _arms(document: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any] | None]]:
    comparison = document.get("comparison") or {}
    return [(row["name"], row.get("step_figures")) for row in comparison.get("rows", [])]


def _ours(document: Mapping[str, Any]) -> list[bool]:
    """Per arm, in ``_arms``'s order: whether it is our fold (warm or all legs), not an arm
    set beside it (an oracle or another run of ours: those are the gaps' names)."""
    comparison = document.get("comparison") or {}
    beside = comparison.get("gaps") or {}
    return [row["name"] not in beside for row in comparison.get("rows", [])]


def _cell(value: Any, interval: Any) -> tuple[str, str]:
    if value is None:
        return NOT_RECORDED, ""
    if interval is None:
        return percent(value), ""
    return percent(value), f"[{percent(interval[0])}, {percent(interval[1])}]"


def _at(values: Sequence[Any] | None, i: int) -> Any:
    return values[i] if values is not None and i < len(values) else None


def _collapsed(
    label: str, cells_by_position: list[tuple[tuple[str, str], ...]], first_number: int
) -> list[tuple[str, list[tuple[str, str]]]]:
    """One row per position, but a long run of positions where every arm reads the same as one
    ``a..b`` row: a draft at the step cap would otherwise print 65,536 rows each."""
    found = []
    for first, last, cells in value_runs(cells_by_position):
        span = position_label(first + first_number, last + first_number)
        found.append((label.format(i=span), list(cells)))
    return found


def rows(document: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, list[tuple[str, str]]]]]:
    """The arms' names, and per figure its label and each arm's (value, interval) text; an
    arm without steps reads "not recorded" in every row (known only by totals)."""
    arms = _arms(document)
    names = [name for name, _ in arms]
    found = [figures for _, figures in arms]
    missing = (NOT_RECORDED, "")
    k = _extent(document)["max_draft"]
    table: list[tuple[str, list[tuple[str, str]]]] = []
    for key, label in _FORMS:
        cells = [
            tuple(
                missing
                if figures is None
                else _cell(_at(figures.get(key), i), _at(figures.get(f"{key}_ci"), i))
                for figures in found
            )
            for i in range(k)
        ]
        if key == "per_position_conditional" and cells:
            table.append(("pos 1, given none", list(cells[0])))
            table.extend(_collapsed(label, cells[1:], 2))
        else:
            table.extend(_collapsed(label, cells, 1))
    shares = [
        tuple(
            missing
            if figures is None
            else _cell(_at(figures["histogram_share"], j), _at(figures["histogram_share_ci"], j))
            for figures in found
        )
        for j in range(k + 1)
    ]
    table.extend(_collapsed("accepted exactly {i}", shares, 0))
    count = _extent(document)["windows"]
    windows: list[tuple[tuple[str, str], ...]] = []
    for w in range(count):
        window_cells: list[tuple[str, str]] = []
        for figures in found:
            window = _at(None if figures is None else figures["windows"], w)
            shown = (
                None if window is None else _cell(window["accept_rate"], window["accept_rate_ci"])
            )
            window_cells.append(missing if shown is None else shown)
        windows.append(tuple(window_cells))
    table.extend(_collapsed("window {i}, A/P", windows, 1))
    return names, table


REQUESTS_TITLE = "Per request and by output position, side by side"
REQUESTS_CAPTION = (
    "Pooled: sums over every request, then the ratio (what engines report). Per-request mean: "
    "each request's ratio, then their mean. A/P pN: the N-th percentile of per-request A/P. "
    "Lowest: the requests that accepted least, by leg and id (the writer is in the JSON), "
    "with the drafts each proposed. Bucket: the output tokens the request had already "
    "generated (an oracle's: those of its recorded steps; docs/oracle-steps.md). Slope: A/P "
    "per doubling of the output, weighted by P; falling when its interval is wholly below 0. "
    "[low, high]: 95% interval."
)
LOWEST_SIDE_BY_SIDE = 5
_SPREAD = ("min", "p10", "p25", "p50", "p75", "p90", "max")


def _shown(value: Any, interval: Any, shown) -> tuple[str, str]:
    if value is None:
        return NOT_RECORDED, ""
    if interval is None:
        return shown(value), ""
    return shown(value), f"[{shown(interval[0])}, {shown(interval[1])}]"


def _points(value: float) -> str:
    return f"{100 * value:+.1f} pts"


def _request_cells(spread: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """One arm's column of the per-request rows (``_REQUEST_LABELS``'s order)."""
    missing = (NOT_RECORDED, "")
    if spread is None:
        return [missing] * len(_REQUEST_LABELS)
    cells = []
    for figure, shown in (("accept_rate", percent), ("mean_acceptance_length", length)):
        for mean in ("pooled", "per_request_mean"):
            block = spread[mean]
            cells.append(_shown(block[figure], block[f"{figure}_ci"], shown))
    rates = spread["spread"]["accept_rate"]
    cells += [missing if rates is None else (percent(rates[key]), "") for key in _SPREAD]
    lowest = spread["lowest"]
    for place in range(LOWEST_SIDE_BY_SIDE):
        if place >= len(lowest):
            cells.append(("", ""))
            continue
        found = lowest[place]
        cells.append(
            (
                f"{percent(found['accept_rate'])} of {found['proposed']}",
                f"leg {found['leg']}, id {found['seq']}",
            )
        )
    return cells


_REQUEST_LABELS = (
    "A/P, pooled",
    "A/P, per-request mean",
    "1+A/S, pooled",
    "1+A/S, per-request mean",
    *(f"A/P {key}, over requests" for key in _SPREAD),
    *(f"lowest A/P {place + 1}" for place in range(LOWEST_SIDE_BY_SIDE)),
)


def _position_cells(positions: Mapping[str, Any] | None, count: int) -> list[tuple[str, str]]:
    """One arm's column of the by-position rows: ``count`` buckets, the slope, the flag."""
    missing = (NOT_RECORDED, "")
    if positions is None:
        return [missing] * (count + 2)
    cells = []
    for bucket in range(count):
        found = _at(positions["buckets"], bucket)
        if found is None or not found["steps"]:
            cells.append(("no steps", ""))
            continue
        value, interval = _shown(found["accept_rate"], found["accept_rate_ci"], percent)
        cells.append((f"{value} ({found['steps']} steps)", interval))
    slope = positions["slope"]
    cells.append(
        ("not defined", "") if slope is None else _shown(slope, positions["slope_ci"], _points)
    )
    falling = positions["falling"]
    cells.append(("not judged" if falling is None else "falling" if falling else "not falling", ""))
    return cells


def request_rows(
    document: Mapping[str, Any],
) -> tuple[list[str], list[tuple[str, list[tuple[str, str]]]]]:
    """The arms' names, and per row its label and each arm's (value, interval): the warm
    folds' per-request figures and acceptance by output position (null: "not recorded")."""
    arms = _arms(document)
    names = [name for name, _ in arms]
    found = [figures or {} for _, figures in arms]
    spreads = [figures.get("per_request") for figures in found]
    positions = [figures.get("by_output_position") for figures in found]
    # Bucket edges are fixed, so the arm with the most buckets names them for every arm.
    named = _extent(document)["buckets_of"]
    longest: list[Any] = next(
        (p["buckets"] for (name, _), p in zip(arms, positions, strict=True) if p and name == named),
        [],
    )
    count = len(longest)
    labels = [
        *_REQUEST_LABELS,
        *(f"A/P, tokens {b['from']}-{b['to']} out" for b in longest),
        "slope of A/P by position",
        "falling",
    ]
    columns = [
        [*_request_cells(spread), *_position_cells(position, count)]
        for spread, position in zip(spreads, positions, strict=True)
    ]
    return names, [(label, [column[row] for column in columns]) for row, label in enumerate(labels)]


def _has_request_figures(document: Mapping[str, Any]) -> bool:
    """Whether an arm beside ours has per-request or by-position figures: without one the
    side-by-side table would only repeat ours, which the per-request section already shows."""
    arms = zip(_arms(document), _ours(document), strict=True)
    return any(
        figures is not None
        and not is_ours
        and any(figures.get(key) is not None for key in ("per_request", "by_output_position"))
        for (_, figures), is_ours in arms
    )


def about_lines(document: Mapping[str, Any]) -> list[str]:
    """Per arm, what its step figures cover and what their intervals are drawn over."""
    lines = []
    for name, figures in _arms(document):
        if figures is None:
            lines.append(f"{name}: not recorded (known only by totals, no steps)")
            continue
        text = (
            f"{name}: {figures['source_text']}, {figures['steps']} steps of {figures['requests']} "
            f"requests in {figures['legs']} legs ({POPULATION_TEXT[figures['population']]})"
        )
        if figures["window_steps"] is not None:
            text += f", windows of {figures['window_steps']} steps"
        if figures["interval_over"] is not None:
            text += f"; intervals over {figures['interval_over']}"
        flagged = {flag: legs for flag, legs in figures["flags"].items() if legs}
        if flagged:
            text += "; " + ", ".join(
                f"{flag} in legs {index_ranges(legs)}" for flag, legs in flagged.items()
            )
        for key, why in figures["not_recorded"].items():
            text += f"; {key.replace('_', ' ')}: {why}"
        lines.append(text)
    return lines


def has_step_figures(document: Mapping[str, Any]) -> bool:
    """Whether any arm beside ours has steps: only then is there something to set beside."""
    return bool(_extent(document)["beside"])


Made = tuple[list[str], list[tuple[str, list[tuple[str, str]]]]]
_NOTHING = (NOT_RECORDED, "")


def _empty(cell: tuple[str, str]) -> bool:
    return cell[0] in _NOTHING


def recorded(made: Made, keep: Sequence[bool] | None = None) -> tuple[Made, list[int]]:
    """``made`` without the arms none of whose cells holds a figure and without the rows that
    hold none; with the kept arms' indices. ``keep`` limits the arms to those marked True."""
    names, body = made
    arms = [
        i
        for i in range(len(names))
        if (keep is None or keep[i]) and any(not _empty(cells[i]) for _, cells in body)
    ]
    kept = [
        (label, [cells[i] for i in arms])
        for label, cells in body
        if any(not _empty(cells[i]) for i in arms)
    ]
    return ([names[i] for i in arms], kept), arms


def split_ours(document: Mapping[str, Any], made: Made) -> tuple[Made, Made]:
    """The recorded rows set beside each other and the rows only our folds hold, in a table of
    ours alone. Decided per group of figures (``group_of``), not per row: a group some arm
    beside ours fills in any row stays side by side whole, so the line naming what the others
    do not record never names a group one of them fills elsewhere (``before`` filling windows
    1-4 but not window 5 still records windows)."""
    ours = _ours(document)
    (names, body), arms = recorded(made)
    mine = [ours[i] for i in arms]
    beside = {
        group_of(label)
        for label, cells in body
        if any(not _empty(cell) for cell, is_ours in zip(cells, mine, strict=True) if not is_ours)
    }
    shared, only = [], []
    for label, cells in body:
        if group_of(label) in beside:
            shared.append((label, cells))
        else:
            only.append(
                (label, [cell for cell, is_ours in zip(cells, mine, strict=True) if is_ours])
            )
    ours_names = [name for name, is_ours in zip(names, mine, strict=True) if is_ours]
    return (names if shared else [], shared), (ours_names, only)


def group_of(label: str) -> str:
    """What kind of step figure a row's label names, for the line that lists them."""
    for start, group in (
        ("pos ", "per position"),
        ("accepted exactly", "the histogram"),
        ("window ", "windows"),
        ("A/P, tokens", "by output position"),
        ("slope", "by output position"),
        ("falling", "by output position"),
    ):
        if label.startswith(start):
            return group
    return "per request"


def groups(body: Sequence[tuple[str, Any]]) -> list[str]:
    found: list[str] = []
    for label, _ in body:
        if (group := group_of(label)) not in found:
            found.append(group)
    return found


def others(document: Mapping[str, Any]) -> list[str]:
    """The arms set beside our folds (oracles, other runs of ours), by name."""
    arms = zip(_arms(document), _ours(document), strict=True)
    return [name for (name, _), is_ours in arms if not is_ours]


def _terminal_table(
    title: str, caption: str, made: tuple[list[str], list[tuple[str, list[tuple[str, str]]]]]
) -> Table:
    names, body = made
    table = Table(
        title=title, caption=Text(caption), caption_justify="left", box=None, pad_edge=False
    )
    table.add_column("figure", overflow="fold")
    for name in names:
        table.add_column(Text(name), justify="right", no_wrap=True)
    for label, cells in body:
        table.add_row(
            Text(label),
            *(Text(f"{value}\n{interval}" if interval else value) for value, interval in cells),
        )
    return table


def step_figures_view(document: Mapping[str, Any]) -> Table | Group:
    """The terminal's tables: a column per arm, the interval under each figure; the
    per-request and by-position figures in a second table when any arm has them."""
    table = _terminal_table(TITLE, CAPTION, recorded(rows(document))[0])
    if not _has_request_figures(document):
        return table
    second = _terminal_table(REQUESTS_TITLE, REQUESTS_CAPTION, recorded(request_rows(document))[0])
    return Group(table, Text(""), second)


def about_text(document: Mapping[str, Any]) -> Text:
    """Per arm, what its step figures cover and what their intervals are over."""
    return Text("\n".join(about_lines(document)))


def step_figures_markdown(document: Mapping[str, Any]) -> str:
    """The markdown record's section."""

    def shown(made: tuple[list[str], list[tuple[str, list[tuple[str, str]]]]]) -> str:
        names, body = made
        cells = [
            (label, *(f"{value} {interval}".strip() for value, interval in found))
            for label, found in body
        ]
        return table(["figure", *names], cells, [False, *([True] * len(names))])

    about = "\n".join(f"- {line}" for line in about_lines(document))
    found = f"## {TITLE}\n\n{about}\n\n" + shown(rows(document)) + f"\n\n{CAPTION}"
    if _has_request_figures(document):
        found += (
            f"\n\n### {REQUESTS_TITLE}\n\n"
            + shown(request_rows(document))
            + f"\n\n{REQUESTS_CAPTION}"
        )
    return found
