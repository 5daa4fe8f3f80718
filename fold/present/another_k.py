"""Another k as a table for the terminal (``--details``), a markdown section and a chart, from
the warm fold's ``another_k`` block of the JSON document (``fold.folding.another_k``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fold.folding.another_k import FEW_STEPS
from fold.present.cadence import duration
from fold.present.chart import PALETTE, Chart
from fold.present.table import NOT_DEFINED, length, percent, plus_minus, rate
from fold.present.table_layout import fit

TITLE = "Another k: the warm legs' drafts cut at k'"
HEADERS = ("k'", "P", "A", "A/P", "±", "1+A/S", "±", "steps needed")
TIMED = ("step time", "tok/s")
NOT_MEASURED = "not measured"
"""A draft length's step time measured from fewer intervals than this is called out: the
tok/s of a k' that cuts steps to it rests on few."""


def block(document: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return (document.get("warm") or {}).get("another_k")


def headers(found: Mapping[str, Any]) -> tuple[str, ...]:
    """The table's columns: step time and tok/s only where the log measured them."""
    return HEADERS + (TIMED if found["step_times"] is not None else ())


def rows(found: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Each k' as the table's cells (the recorded k marked with *)."""
    cells = []
    measured = found["step_times"] is not None
    for row in found["rows"]:
        timed = (duration(row["step_time_s"]), rate(row["modelled_tok_s"])) if measured else ()
        cells.append(
            (
                f"{row['k']}{'*' if row['recorded'] else ''}",
                str(row["proposed"]),
                str(row["accepted"]),
                percent(row["accept_rate"]),
                plus_minus(row["accept_rate_reach"], "percent"),
                length(row["tokens_per_step"]),
                plus_minus(row["tokens_per_step_reach"], "length"),
                rate(row["steps_needed"]),
                *timed,
            )
        )
    return cells


def notes(found: Mapping[str, Any]) -> list[str]:
    """What the figures rest on, said wherever they are shown."""
    said = [
        f"assumption: {found['assumption']}",
        f"model: {found['step_model']}",
        f"step time: {found['step_time_note']}",
    ]
    if found["step_times"]:
        said.append(
            "measured: "
            + ", ".join(
                f"k = {time['proposed']} {duration(time['mean_s'])} ({time['intervals']} steps)"
                for time in found["step_times"]
            )
        )
        few = found["few_steps_lengths"]
        if few:
            said.append(
                f"fewer than {FEW_STEPS} steps timed at draft length "
                + ", ".join(map(str, few))
                + ": the tok/s of a k' that cuts steps to it rests on few"
            )
    unmeasured = found["unmeasured_lengths"]
    if unmeasured:
        said.append(
            "no step time in the log at draft length "
            + ", ".join(map(str, unmeasured))
            + ": the k' that need it have no tok/s"
        )
    said.append(
        f"±: {found['intervals']}" if found["intervals"] else "±: no intervals (--bootstrap 0)"
    )
    said.append("*: the recorded k (the fold's own figures)")
    return said


def another_k_view(document: Mapping[str, Any]) -> RenderableType:
    """The table and its notes, or one line saying why there is none."""
    found = block(document)
    if found is None:
        text = Text()
        text.append("another k: ", style="bold")
        text.append("no drafted steps in the warm legs", style="dim")
        return text
    table = Table(
        title=TITLE,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1),
        pad_edge=False,
    )
    for header in headers(found):
        table.add_column(header, justify="right", no_wrap=True)
    for cells in rows(found):
        table.add_row(*cells)
    return Group(fit(table, give_way=("P", "A")), Text("\n".join(notes(found)), style="dim"))


def another_k_markdown(document: Mapping[str, Any]) -> str | None:
    """The section of the markdown record, None without the block."""
    found = block(document)
    if found is None:
        return None
    header = [name for name in headers(found) if name != "±"]
    body = []
    for row, cells in zip(found["rows"], rows(found), strict=True):
        shown = list(cells)
        shown[3] = _bracketed(percent, row["accept_rate"], row["accept_rate_ci"])
        shown[5] = _bracketed(length, row["tokens_per_step"], row["tokens_per_step_ci"])
        del shown[6], shown[4]
        body.append(shown)
    lines = [
        "## " + TITLE,
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" for _ in header) + "|",
        *("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body),
        "",
        *(
            f"- {line.replace('±: ', '[low, high]: ', 1) if line.startswith('±') else line}"
            for line in notes(found)
        ),
    ]
    return "\n".join(lines)


def _bracketed(shown: Any, value: float | None, interval: list[float] | None) -> str:
    if value is None:
        return NOT_DEFINED
    if interval is None:
        return shown(value)
    return f"{shown(value)} [{shown(interval[0])}, {shown(interval[1])}]"


def chart_series(
    found: Mapping[str, Any],
) -> tuple[list[int], list[float | None], list[float | None]]:
    """k', tokens per step and modelled tok/s (None where not measured), as drawn."""
    ks = [row["k"] for row in found["rows"]]
    tokens = [row["tokens_per_step"] for row in found["rows"]]
    tok_s = [row["modelled_tok_s"] for row in found["rows"]]
    return ks, tokens, tok_s


def another_k_chart(document: Mapping[str, Any]) -> Chart:
    caption = (
        "Tokens per step (1 + A/S) and, where the log measured a step time per draft length, "
        "the modelled tok/s, had every draft been cut at k' tokens (the hollow mark is the "
        "recorded k), assuming a chain drafter whose first k' tokens would be the same and "
        "steps that follow alike (docs/another-k.md)."
    )
    title = "Another k"
    found = block(document)
    if found is None:
        return Chart("another-k", title, caption, None, "needs drafted steps in the warm legs")
    ks, tokens, tok_s = chart_series(found)
    recorded = found["largest_k"]
    modelled = [(k, value) for k, value in zip(ks, tok_s, strict=True) if value is not None]

    def draw(figure) -> None:
        axes = figure.subplots()
        axes.plot(ks, tokens, marker="o", color=PALETTE[0], label="tokens per step")
        axes.plot(
            [recorded],
            [tokens[ks.index(recorded)]],
            marker="o",
            markersize=11,
            markerfacecolor="none",
            color=PALETTE[0],
            linestyle="none",
        )
        axes.set_xlabel("k' (draft tokens)")
        axes.set_ylabel("tokens per step (1 + A/S)")
        if len(ks) <= 16:  # past that, matplotlib's own ticks read better
            axes.set_xticks(ks)
        if modelled:
            other = axes.twinx()
            other.plot(
                [k for k, _ in modelled],
                [value for _, value in modelled],
                marker="s",
                color=PALETTE[1],
                label="modelled tok/s",
            )
            other.set_ylabel("modelled tok/s")
            other.spines["right"].set_visible(True)
            other.grid(False)
            handles = [*axes.get_lines()[:1], *other.get_lines()]
            axes.legend(handles, [line.get_label() for line in handles], loc="lower right")
        else:
            axes.set_title(f"step time per k': {NOT_MEASURED}", fontsize=8, loc="right")

    return Chart("another-k", title, caption, draw)
