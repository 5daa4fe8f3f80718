"""Every arm's step figures side by side (the comparison rows' ``step_figures``): per position
in its three forms, the histogram, the shape within a leg; in the terminal (``--details``), the
markdown record and the page. A function of the JSON document alone, as every presenter.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from fold.present.table import NOT_RECORDED, percent, position_label, value_runs

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


def _arms(document: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any] | None]]:
    comparison = document.get("comparison") or {}
    return [(row["name"], row.get("step_figures")) for row in comparison.get("rows", [])]


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
    k = max((figures["max_draft"] for figures in found if figures), default=0)
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
            table += _collapsed(label, cells[1:], 2)
        else:
            table += _collapsed(label, cells, 1)
    shares = [
        tuple(
            missing
            if figures is None
            else _cell(_at(figures["histogram_share"], j), _at(figures["histogram_share_ci"], j))
            for figures in found
        )
        for j in range(k + 1)
    ]
    table += _collapsed("accepted exactly {i}", shares, 0)
    count = max((len(figures["windows"] or []) for figures in found if figures), default=0)
    windows = []
    for w in range(count):
        cells = []
        for figures in found:
            window = _at(None if figures is None else figures["windows"], w)
            shown = (
                None if window is None else _cell(window["accept_rate"], window["accept_rate_ci"])
            )
            cells.append(missing if shown is None else shown)
        windows.append(tuple(cells))
    table += _collapsed("window {i}, A/P", windows, 1)
    return names, table


def _about(document: Mapping[str, Any]) -> list[str]:
    """Per arm, what its step figures cover and what their intervals are drawn over."""
    lines = []
    for name, figures in _arms(document):
        if figures is None:
            lines.append(f"{name}: not recorded (known only by totals, no steps)")
            continue
        text = (
            f"{name}: {figures['source']}, {figures['steps']} steps of {figures['requests']} "
            f"requests in {figures['legs']} legs ({figures['population']})"
        )
        if figures["window_steps"] is not None:
            text += f", windows of {figures['window_steps']} steps"
        if figures["interval_over"] is not None:
            text += f"; intervals over {figures['interval_over']}"
        flagged = {flag: legs for flag, legs in figures["flags"].items() if legs}
        if flagged:
            text += "; " + ", ".join(f"{flag} in legs {legs}" for flag, legs in flagged.items())
        for key, why in figures["not_recorded"].items():
            text += f"; {key.replace('_', ' ')}: {why}"
        lines.append(text)
    return lines


def has_step_figures(document: Mapping[str, Any]) -> bool:
    """Whether any arm beside ours has steps: only then is there something to set beside."""
    arms = _arms(document)
    return sum(figures is not None for _, figures in arms) >= 2


def step_figures_view(document: Mapping[str, Any]) -> Text | Table:
    """The terminal's table: a column per arm, the interval under each figure."""
    names, body = rows(document)
    table = Table(
        title=TITLE, caption=Text(CAPTION), caption_justify="left", box=None, pad_edge=False
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


def about_text(document: Mapping[str, Any]) -> Text:
    """Per arm, what its step figures cover and what their intervals are over."""
    return Text("\n".join(_about(document)))


def step_figures_markdown(document: Mapping[str, Any]) -> str:
    """The markdown record's section."""
    # imported here: the markdown record imports this module for its section
    from fold.present.markdown import table

    names, body = rows(document)
    shown = [
        (label, *(f"{value} {interval}".strip() for value, interval in cells))
        for label, cells in body
    ]
    about = "\n".join(f"- {line}" for line in _about(document))
    return (
        f"## {TITLE}\n\n{about}\n\n"
        + table(["figure", *names], shown, [False, *([True] * len(names))])
        + f"\n\n{CAPTION}"
    )


def step_figures_html(document: Mapping[str, Any]) -> str:
    """The page's section."""
    names, body = rows(document)
    head = "".join(f"<th>{html.escape(name)}</th>" for name in names)
    lines = []
    for label, cells in body:
        shown = "".join(
            f"<td>{html.escape(value)}"
            + (f'<br><span class="pm">{html.escape(interval)}</span>' if interval else "")
            + "</td>"
            for value, interval in cells
        )
        lines.append(f"<tr><td>{html.escape(label)}</td>{shown}</tr>")
    about = "".join(f"<li>{html.escape(line)}</li>" for line in _about(document))
    return (
        f'<section id="step-figures"><h2>{TITLE}</h2><ul class="verdicts">{about}</ul>'
        f'<table class="steps"><tr><th>figure</th>{head}</tr>{"".join(lines)}</table>'
        f'<p class="caption">{html.escape(CAPTION)}</p></section>'
    )
