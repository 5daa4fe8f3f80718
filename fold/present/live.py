"""Renderables for following a gate live (``--follow``); nothing here prints.

``live_view`` picks what one poll shows: the fold's report once the arm record folds, else the
provisional groups; either way with a status line (why there is no fold yet) and the notices
(new files, truncation, a record that appeared). The CLI hands it to ``rich.live.Live``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from rich import box
from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text

from fold.present.fold_lines import report
from fold.present.table import length, percent

View = dict[str, Any]
"""One poll of ``--follow`` as JSON (``fold.folding.follow.FollowView.to_json``)."""


def provisional_table(groups: list[dict[str, Any]]) -> Table:
    """Steps grouped by leg label (or writer) and time, before the arm record gives legs."""
    table = Table(
        title="Provisional groups (no arm record yet: by leg label or writer, split at pauses)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
    )
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("group", "left"),
        ("from (UTC)", "right"),
        ("secs", "right"),
        ("lines", "right"),
        ("S", "right"),
        ("P", "right"),
        ("A", "right"),
        ("A/P", "right"),
        ("1+A/S", "right"),
    )
    for header, justify in columns:
        table.add_column(header, justify=justify, no_wrap=True)
    for group in groups:
        table.add_row(
            group_name(group),
            _clock(group["first_ns"]),
            f"{group['seconds']:.1f}",
            str(group["lines"]),
            str(group["steps"]),
            str(group["proposed"]),
            str(group["accepted"]),
            percent(group["accept_rate"]),
            length(group["mean_acceptance_length"]),
        )
    return table


def group_name(group: dict[str, Any]) -> str:
    label = group["label"]
    name = f"leg {label!r}" if label is not None else f"writer {group['writer']}"
    return f"{name} #{group['part'] + 1}" if group["part"] else name


def status_lines(view: View) -> Text:
    text = Text()
    held = f", {view['held_bytes']} bytes of unfinished lines held" if view["held_bytes"] else ""
    text.append(
        f"following {len(view['files'])} file(s): {view['lines']} lines, "
        f"{view['bytes']} bytes{held}",
        style="dim",
    )
    if view["status"] is not None:
        text.append("\n" + view["status"], style="yellow")
    for notice in view["recent_notices"]:
        text.append("\n" + notice_line(notice), style="cyan")
    return text


def notice_line(notice: dict[str, Any]) -> str:
    return f"{notice['path']}: {notice['message']}"


def live_view(
    view: View, render: Callable[[dict[str, Any]], RenderableType] = report
) -> RenderableType:
    """The fold's report when there is a fold, else the provisional groups; plus the status."""
    if view["document"] is not None:
        return Group(render(view["document"]), status_lines(view))
    return Group(provisional_table(view["provisional"]), status_lines(view))


def _clock(t_ns: int) -> str:
    return datetime.fromtimestamp(t_ns / 1e9, tz=timezone.utc).strftime("%H:%M:%S")
