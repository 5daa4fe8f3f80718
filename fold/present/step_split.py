"""Our step time split into drafting, verifying and the rest, from the JSON document's
``step_split`` blocks (per leg and ``warm``): a terminal table, one line for under the speed
split, a markdown section and a page section. Nothing here prints."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fold.present.cadence import duration
from fold.present.table import NOT_DEFINED, index_ranges, percent
from fold.present.table_layout import Fitted, fit

Split = Mapping[str, Any]
PARTS = (("draft", "drafting"), ("verify", "verifying"), ("rest", "rest"))
CAPTION = (
    "steps: steps that carried a duration; step: the mean interval between a request's steps "
    "(the cadence's); drafting, verifying: each part's mean per step; rest: the step less the "
    "parts measured; c: cold leg"
)
NO_DURATIONS = "no step carried draft_ns or verify_ns (the hook's timed record; docs/step-split.md)"


def has_split(document: Mapping[str, Any]) -> bool:
    return (document.get("warm") or {}).get("step_split") is not None or any(
        leg.get("step_split") is not None for leg in document.get("legs") or ()
    )


def share_with_interval(split: Split, part: str) -> str:
    """'20.1% [18.3%, 22.0%]', the interval when the split has one."""
    value, interval = split[f"{part}_share"], split.get(f"{part}_share_ci")
    if value is None:
        return NOT_DEFINED
    if interval is None:
        return percent(value)
    return f"{percent(value)} [{percent(interval[0])}, {percent(interval[1])}]"


def part_cell(split: Split, part: str) -> str:
    """'812us 20.1%': the part's mean per step and its share of the step."""
    seconds = split[f"{part}_s"]
    if seconds is None:
        return NOT_DEFINED
    return f"{signed_duration(seconds)} {percent(split[f'{part}_share'])}"


def signed_duration(seconds: float) -> str:
    """A duration that may be below 0 (a rest the measured parts overran)."""
    return "-" + duration(-seconds) if seconds < 0 else duration(seconds)


def adds_up_text(split: Split) -> str:
    if split["adds_up"] is None:
        return "one part only"
    if split["adds_up"]:
        return "yes"
    return f"no: parts exceed the step by {duration(-split['rest_s'])}"


def split_rows(document: Mapping[str, Any]) -> list[tuple[str, Split]]:
    """(name, split) for every leg with one, then the warm legs'."""
    rows = [
        (f"{leg['index']}{'' if leg['warm'] else 'c'}", leg["step_split"])
        for leg in document["legs"]
        if leg.get("step_split") is not None
    ]
    warm = document["warm"].get("step_split")
    if warm is not None:
        rows.append(("warm", warm))
    return rows


HEADERS = ("leg", "requests", "steps", "step", "drafting", "verifying", "rest", "adds up")


def row_cells(name: str, split: Split) -> tuple[str, ...]:
    timed = split["timed_steps"]
    return (
        name,
        str(split["requests"]),
        str(timed),
        duration(split["step_s"]),
        *(part_cell(split, part) for part, _ in PARTS),
        adds_up_text(split),
    )


def step_split_table(document: Mapping[str, Any]) -> Fitted:
    table = Table(
        title="Step split: our step time into drafting, verifying and the rest",
        title_justify="left",
        caption=CAPTION,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0),  # the box's separators keep columns apart, so 80 columns hold them
        pad_edge=False,
    )
    for header in HEADERS:
        table.add_column(header, justify="left" if header == "leg" else "right", no_wrap=True)
    for name, split in split_rows(document):
        table.add_row(*row_cells(name, split))
    return fit(table)


def summary_line(split: Split) -> str:
    """'our warm step 4.12ms: verifying 70.1% [68.0%, 72.3%], drafting 19.7% [...], rest 10.2%
    [...]', the largest part first."""
    labels = dict(PARTS)
    parts = [
        f"{labels[part]} {share_with_interval(split, part)}" for part in split["parts_by_share"]
    ]
    text = f"our warm step {duration(split['step_s'])}: " + ", ".join(parts)
    left_out = left_out_text(split)
    if left_out:
        text += f" ({left_out})"
    if split["adds_up"] is False:
        text += (
            f" (the measured parts exceed the step by {duration(-split['rest_s'])}, beyond the"
            f" {duration(split['tolerance_s'])} tolerance)"
        )
    return text


def left_out_text(split: Split) -> str:
    """What a group's split leaves out, and the cadence's step over everything ('' when it
    leaves nothing out)."""
    legs = list(split.get("untimed_legs") or ())
    requests = split.get("untimed_requests") or 0
    if not legs and not requests:
        return ""
    if legs:
        named = index_ranges(legs)
        plural = "s" if len(legs) > 1 else ""
        text = f"over the timed legs only: leg{plural} {named} carried no duration"
    else:
        text = f"over the timed requests only: {requests} carried no duration"
    return f"{text}; the cadence's step over every request {duration(split['cadence_step_s'])}"


def untimed_leg_lines(document: Mapping[str, Any]) -> list[str]:
    """A line per leg the table leaves out, once any leg has a split."""
    if not has_split(document):
        return []
    return [
        f"leg {leg['index']}: no step carried a duration"
        + (", left out of the warm split" if leg["warm"] else "")
        for leg in document["legs"]
        if leg.get("step_split") is None
    ]


def oracle_line(row: Split, ours: Split | None) -> str:
    """What an oracle reports of its drafting, beside ours."""
    found = row["draft_overhead"]
    per_call = found["draft_s_per_call"]
    text = (
        f"{row['name']} reports drafting {duration(per_call)} per draft call "
        f"({duration(found['draft_s'])} over {found['draft_calls']} calls; {found['source']})"
    )
    if ours is not None and ours["draft_s"] is not None:
        text += f"; ours {duration(ours['draft_s'])} a step"
    return text


def step_split_lines(document: Mapping[str, Any], oracle: str | None = None) -> list[str]:
    """The lines under a speed split: our warm step's parts (none without durations), and the
    drafting ``oracle`` reports where it reports any."""
    warm = (document.get("warm") or {}).get("step_split")
    lines = [] if warm is None else [summary_line(warm)]
    rows = (document.get("comparison") or {}).get("rows") or ()
    for row in rows:
        if row["name"] == oracle and row.get("draft_overhead") is not None:
            lines.append(oracle_line(row, warm))
    return lines


def step_split_view(document: Mapping[str, Any]) -> RenderableType:
    """The ``--details`` view: the table per leg and warm, and the warm line."""
    if not has_split(document):
        text = Text()
        text.append("step split: ", style="bold")
        text.append(NO_DURATIONS, style="dim")
        return text
    parts: list[RenderableType] = [step_split_table(document)]
    parts.extend(Text(line) for line in untimed_leg_lines(document))
    for line in step_split_lines(document):
        parts.append(Text(line, style="bold"))
    return Group(*parts)


def _markdown_table(rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|---|" + "---:|" * (len(HEADERS) - 1)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines)


def step_split_markdown(document: Mapping[str, Any]) -> str:
    """The ``## Step split`` section of the markdown record."""
    if not has_split(document):
        return f"## Step split\n\n{NO_DURATIONS}."
    rows = [row_cells(name, split) for name, split in split_rows(document)]
    text = f"## Step split\n\n{_markdown_table(rows)}\n\n{CAPTION}."
    for line in untimed_leg_lines(document):
        text += f"\n\n{line}."
    lines = step_split_lines(document)
    if lines:
        text += f"\n\n{lines[0]}."
    return text


def step_split_html(document: Mapping[str, Any]) -> str:
    """The page's step-split section (an empty string without durations)."""
    if not has_split(document):
        return ""
    head = "".join(f"<th>{html.escape(header)}</th>" for header in HEADERS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row_cells(name, split)) + "</tr>"
        for name, split in split_rows(document)
    )
    parts = [
        '<section id="step-split"><h2>Where does a step\'s time go?</h2>',
        f"<table><tr>{head}</tr>{body}</table>",
        f'<p class="caption">{html.escape(CAPTION)}</p>',
    ]
    parts.extend(f"<p>{html.escape(line)}</p>" for line in untimed_leg_lines(document))
    parts.extend(f"<p>{html.escape(line)}</p>" for line in step_split_lines(document))
    warm = document["warm"].get("step_split")
    for row in (document.get("comparison") or {}).get("rows") or ():
        if row.get("draft_overhead") is not None:
            parts.append(f"<p>{html.escape(oracle_line(row, warm))}</p>")
    parts.append("</section>")
    return "".join(parts)
