"""The fold's JSON document as rich tables: the legs and the fold, and how their figures are
written (the lines beside them and the first screen: ``fold.present.fold_lines``).

Every function takes the document ``--json`` writes (``FoldResult.to_json()``), so a saved
``--json`` file renders the same; nothing here prints (the command line does)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from fold.folding.result import NEEDS_STEP_LOG, RECORD_COUNTERS

SPARK_LEVELS = "▁▂▃▄▅▆▇█"
NOT_DEFINED = "-"


def percent(value: float | None, missing: str = NOT_DEFINED) -> str:
    """A fraction as a percentage with one decimal: 0.46083 -> '46.1%'."""
    return missing if value is None else f"{100 * value:.1f}%"


def length(value: float | None, missing: str = NOT_DEFINED) -> str:
    """A tokens-per-step figure with two decimals: 4.2258 -> '4.23'."""
    return missing if value is None else f"{value:.2f}"


def three_decimals(value: float | None, missing: str = NOT_DEFINED) -> str:
    """tok/s of a fold and factors: a 0.93x gate is decided at 14.951 tok/s."""
    return missing if value is None else f"{value:.3f}"


def points(value: float) -> str:
    """A difference of two fractions in percentage points, one decimal: 0.189 -> '18.9'."""
    return f"{100 * value:.1f}"


def signed_points(value: float) -> str:
    """A difference of fractions in points (or a relative change in percent) with its sign,
    a minus sign for a fall: -0.401 -> '−40.1', 0 -> '+0.0'."""
    return f"{100 * value:+.1f}".replace("-", "−")


def signed_decimals(value: float, decimals: int) -> str:
    """A difference in a figure's own units with its sign: -3195.4651 -> '−3195.465' (3)."""
    return f"{value:+.{decimals}f}".replace("-", "−")


NOT_RECORDED = "not recorded"
"""What a figure an arm does not record reads, in every table: never 0, never blank."""


def fmt_tok_s(value: float | None) -> str:
    return three_decimals(value, NOT_RECORDED)


def fmt_rate(value: float | None) -> str:
    return percent(value, NOT_RECORDED)


def fmt_length(value: float | None) -> str:
    return length(value, NOT_RECORDED)


fmt_steps_per_s = fmt_factor = fmt_tok_s


def fmt_share(value: float | None) -> str:
    """A share as a whole percentage; a rounded zero never shows as "-0%"."""
    return NOT_RECORDED if value is None else f"{round(value * 100) + 0}%"


def recorded_cell(text: str) -> Text:
    """A table cell, dimmed when it says the figure is not recorded."""
    return Text(text, style="dim italic") if text == NOT_RECORDED else Text(text)


def plus_minus(reach: float | None, form: str) -> str:
    """An interval as ``±`` its reach (``<figure>_reach``: the larger distance from the figure
    to either end, worked out where the interval is): '±0.04'.

    ``form`` is ``percent``, ``length`` or ``three_decimals``; empty when there is none.
    """
    if reach is None:
        return ""
    if form == "percent":
        return f"±{100 * reach:.1f}%"
    return f"±{reach:.2f}" if form == "length" else f"±{reach:.3f}"


def rate(value: float | None) -> str:
    """Per-leg rates, to four significant digits (three below 1), trailing zeros kept so a
    column of them reads alike: 15 -> '15.00' beside 14.95."""
    if value is None:
        return NOT_DEFINED
    if value >= 999.95:
        return f"{value:.0f}"
    return f"{value:#.3g}" if value < 1 else f"{value:#.4g}"


def same_decimals(reach: float, shown: str) -> str:
    """``reach`` to as many decimals as the figure ``shown`` beside it: ('3.590', 0.0115) ->
    '0.012'."""
    decimals = len(shown.partition(".")[2].rstrip("%"))
    return f"{reach:.{decimals}f}"


def sparkline(pools: dict[str, Any]) -> str:
    """A leg's shape: the A/P of each pool of its windows (``window_pools.shape``, pooled by
    the fold, a column per figure) on an absolute 0..100% scale, a character each."""
    characters = []
    for value in pools["accept_rate"]:
        characters.append(
            " "
            if value is None
            else SPARK_LEVELS[min(len(SPARK_LEVELS) - 1, int(value * len(SPARK_LEVELS)))]
        )
    return "".join(characters)


def from_log(document: dict[str, Any]) -> bool:
    """Whether the steps were read from files (the hook's log or the engine's trace)."""
    return document["step_source"] != RECORD_COUNTERS


def untimed(document: dict[str, Any]) -> str | None:
    """Why the steps that were read have no times, or None: they have, or none were read."""
    return document["no_times_text"] if document["steps_timed"] is False else None


def no_times(document: dict[str, Any]) -> str:
    """What the figures built from step times read when there are none."""
    return document["no_times_text"]


def legs_table(document: dict[str, Any]) -> Table:
    shaped = from_log(document)
    title = "Acceptance per leg" + ("" if shaped else f" (shape within a leg: {NEEDS_STEP_LOG})")
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False
    )
    headers = ["leg", "run", "warm", "tok/s", "S", "P", "A", "A/P", "1+A/S", "steps/s"]
    for header in headers:
        table.add_column(header, justify="center" if header == "warm" else "right", no_wrap=True)
    if shaped:
        table.add_column("shape", justify="left", no_wrap=True)
    for leg in document["legs"]:
        cells = [
            f"{leg['index']}!" if leg["flags"] else str(leg["index"]),
            str(leg["run"]),
            "yes" if leg["warm"] else "",
            rate(leg["tok_s"]),
            str(leg["steps"]),
            str(leg["proposed"]),
            str(leg["accepted"]),
            percent(leg["accept_rate"]),
            length(leg["mean_acceptance_length"]),
            rate(leg["step_rate"]),
        ]
        if shaped:
            cells.append(sparkline(leg["window_pools"]["shape"]))
        table.add_row(*cells)
    return table


def index_ranges(indices: Iterable[int]) -> str:
    """Ascending indices with each run of consecutive ones as its ends: '0-3, 5, 7-9'."""
    runs: list[list[int]] = []
    for index in indices:
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def fold_table(document: dict[str, Any]) -> Table:
    table = Table(
        title=f"Fold (warm: {document['predicate']})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        show_edge=False,
    )
    for header in ("legs", "n", "S", "P", "A", "A/P", "1+A/S", "tok/s", "completion/S"):
        table.add_column(header, justify="right", no_wrap=True)
    for name, fold in (("warm", document["warm"]), ("all", document["all"])):
        table.add_row(
            name,
            str(len(fold["legs"])),
            str(fold["steps"]),
            str(fold["proposed"]),
            str(fold["accepted"]),
            percent(fold["accept_rate"]),
            length(fold["mean_acceptance_length"]),
            three_decimals(fold["output_throughput_tok_s"]),
            length(fold["completion_tokens_per_step"]),
        )
        spreads = [
            plus_minus(fold.get(f"{figure}_reach"), form) for figure, form in _FOLD_INTERVALS
        ]
        if any(spreads):
            table.add_row("±", "", "", "", "", *spreads, style="dim")
    bootstrap = document.get("bootstrap")
    if bootstrap and bootstrap["resamples"]:
        table.caption = Text(
            f"±: 95% bootstrap interval ({bootstrap['resamples']} resamples of the legs and "
            f"their requests, seed {bootstrap['seed']}), the larger distance to either end",
            style="dim",
        )
        table.caption_justify = "left"
    return table


_FOLD_INTERVALS = (
    ("accept_rate", "percent"),
    ("mean_acceptance_length", "length"),
    ("output_throughput_tok_s", "three_decimals"),
    ("completion_tokens_per_step", "length"),
)


RUN_SHOWN = 3
"""A run of one value longer than this prints as one ``i..j:value`` cell (or table row)."""


def value_runs(values: list[Any]) -> list[tuple[int, int, Any]]:
    """``(first, last, value)`` for each position, but a run of more than ``RUN_SHOWN`` equal
    values as one: the zeros past what most steps accepted, when one step drafted far more
    than the rest (up to FORMAT.md's 65,536), would otherwise print one cell each."""
    found: list[tuple[int, int, Any]] = []
    start = 0
    for end in range(1, len(values) + 1):
        if end < len(values) and values[end] == values[start]:
            continue
        if end - start > RUN_SHOWN:
            found.append((start, end - 1, values[start]))
        else:
            found += [(i, i, values[i]) for i in range(start, end)]
        start = end
    return found


def position_label(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}..{last}"


def position_cells(cells: list[str]) -> str:
    """``i:value`` per position; a long run of one value as one ``i..j:value`` cell."""
    return "  ".join(
        f"{position_label(first, last)}:{cell}" for first, last, cell in value_runs(cells)
    )
