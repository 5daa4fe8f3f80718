"""The fold's JSON document as rich renderables: the legs, the fold, the sources, the lines.

Every function takes the document ``--json`` writes (``FoldResult.to_json()``), so a saved
``--json`` file renders the same; nothing here prints (the command line does)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fold.folding.result import NEEDS_STEP_LOG, RECORD_COUNTERS, STEP_LOG
from fold.present.table_layout import fit

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


FLAGGED_LEGS_EACH = 4
"""Up to this many flagged legs, each gets a line; more get a line per flag, naming the legs and
describing the first of them (``each_leg``: every leg's line). A load test's 50 legs, all
flagged alike, took 150 lines before the fold's table."""


def flag_lines(
    document: dict[str, Any], *, each_leg: bool = False, more: str = ", --details lists each"
) -> Text:
    """The legs marked ``!`` in the table, and why; ``more`` says where every leg's line is
    when they are grouped."""
    text = Text()
    flagged = [leg for leg in document["legs"] if leg["flags"]]
    if each_leg or not flags_grouped(document):
        for leg in flagged:
            text.append(f"leg {leg['index']}! ", style="bold red")
            text.append(", ".join(_describe_flag(flag, leg) for flag in leg["flags"]) + "\n")
        return text
    by_flag: dict[str, list[dict[str, Any]]] = {}
    for leg in flagged:
        for flag in leg["flags"]:
            by_flag.setdefault(flag, []).append(leg)
    for flag, legs in by_flag.items():
        if len(legs) == 1:
            text.append(f"leg {legs[0]['index']}! ", style="bold red")
            text.append(f"{_describe_flag(flag, legs[0])}\n")
            continue
        text.append(f"legs {index_ranges([leg['index'] for leg in legs])}! ", style="bold red")
        text.append(
            f"({len(legs)} legs; leg {legs[0]['index']} shown{more}) "
            f"{_describe_flag(flag, legs[0])}\n"
        )
    return text


def flags_grouped(document: dict[str, Any]) -> bool:
    """Whether ``flag_lines`` groups the flagged legs (more than ``FLAGGED_LEGS_EACH``)."""
    flagged = [leg for leg in document["legs"] if leg["flags"]]
    return len(flagged) > FLAGGED_LEGS_EACH


def index_ranges(indices: list[int]) -> str:
    """Ascending indices with each run of consecutive ones as its ends: '0-3, 5, 7-9'."""
    runs: list[list[int]] = []
    for index in indices:
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _describe_flag(flag: str, leg: dict[str, Any]) -> str:
    if flag == "collapse":
        return "collapse: a window's acceptance fell under half the leg's median window"
    if flag == "request collapse":
        worst = leg["lowest_request"]
        return (
            f"request collapse: request {worst['seq']} of writer {worst['w']} accepted "
            f"{percent(worst['accept_rate'])} over {worst['steps']} steps"
        )
    if flag == "emitted != completion":
        requests, prefill = leg["request_count"], leg["prefill_tokens_per_request"]
        return (
            f"emitted != completion: completion_tokens {leg['completion_tokens']}, but the log's "
            f"verify steps emitted {leg['emitted']} over {requests} request(s), and with "
            f"{prefill} prefill token(s) per request that makes "
            f"{leg['expected_completion_tokens']} (state the engine's count with "
            "--prefill-tokens)"
        )
    if flag == "no steps":
        return "no verify step with a draft in this leg's window"
    return flag


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


def _rate_or_dash(value: float | None) -> str:
    return "-" if value is None else percent(value)


def distribution_lines(document: dict[str, Any]) -> Text:
    warm = document["warm"]
    text = Text()
    for key, title, show in (
        ("per_position", "warm per-position acceptance (accepted > i)/S: ", percent),
        (
            "per_position_conditional",
            "\nwarm per-position, conditional (accepted > i among accepted > i - 1): ",
            _rate_or_dash,
        ),
        (
            "per_position_of_proposed",
            "\nwarm per-position, of steps that drafted it (accepted > i)/(proposed > i): ",
            _rate_or_dash,
        ),
        ("histogram", "\nwarm histogram, steps accepting exactly j: ", str),
    ):
        text.append(title, style="bold")
        if warm[key] is None:
            text.append(NEEDS_STEP_LOG, style="dim")
        else:
            text.append(position_cells([show(value) for value in warm[key]]))
    text.append(f"\nwarm legs: {index_ranges(list(warm['legs']))}")
    return text


def source_lines(document: dict[str, Any]) -> Text:
    """Where S, P and A came from, and whether the engine's own counters were checked."""
    text = Text()
    text.append("source: ", style="bold")
    if untimed(document) is not None:
        text.append(
            f"S, P, A per leg and every per-step figure from {document['step_source_text']}; "
            "tok/s, completion tokens and leg windows from the record's legs; cadence: "
            f"{untimed(document)}"
        )
    elif from_log(document):
        text.append(
            "S, P, A per leg and every per-step figure from the step log; tok/s, completion "
            "tokens and leg windows from the record's legs"
        )
    else:
        text.append(
            "S, P, A per leg from the record's counters (spec_drafted_request_steps, "
            "spec_drafts_proposed, spec_drafts_accepted); tok/s, completion tokens and leg "
            "windows from its legs; per position, histogram, shape, requests, cadence and the "
            f"emitted check: {NEEDS_STEP_LOG}"
        )
    if document["counter_check"] is not None:
        text.append("\nengine counters: ", style="bold")
        text.append(document["counter_check"]["summary"])
    return text


def accounting_lines(document: dict[str, Any]) -> Text:
    """Where every line went: nothing is dropped without a count."""
    text = Text()
    text.append("lines: ", style="bold")
    if not from_log(document):
        text.append("no step log given", style="dim")
        return text
    for entry in document["files"]:
        if entry.get("kind") == "engine trace":
            text.append(
                f"\n  {entry['path']} (the engine's trace): {entry['lines']} steps, "
                f"{entry['attributed']} in legs, {entry['unattributed']} after the last run "
                f"line, {entry['run_lines']} run lines, {entry['other_lines']} other log lines, "
                f"{entry['skipped']} skipped"
            )
            continue
        text.append(
            f"\n  {entry['path']}: {entry['lines']} read, {entry['attributed']} in legs, "
            f"{entry['unattributed']} outside every leg, {entry['ambiguous']} ambiguous, "
            f"{entry['torn']} torn, {entry['skipped']} skipped"
        )
    lost = [writer for writer in document["writers"] if writer["lost"]]
    text.append(f"\n  lost (gaps in writer line counters): {document['lost_lines']}")
    for writer in lost[:5]:
        text.append(f"\n    writer {writer['w']} pid {writer['pid']}: {writer['lost']} lost")
    for example in document["skipped_examples"]:
        text.append(f"\n  skipped {example['path']}:{example['line']}: {example['reason']}")
    return text


def line_problems(document: dict[str, Any]) -> Text | None:
    """One line when any line is not in a leg (outside every leg, ambiguous, torn, skipped,
    lost): shown whether or not ``--details`` was asked for, since a lost line is never hidden."""
    if not from_log(document):
        return None
    counts = (
        ("outside every leg", document["unattributed_steps"]),
        ("ambiguous", document["ambiguous_steps"]),
        ("torn", document["torn_lines"]),
        ("skipped", document["skipped_lines"]),
        ("lost", document["lost_lines"]),
    )
    found = [f"{count} {what}" for what, count in counts if count]
    if not found:
        return None
    read = document["lines_read"]
    text = Text()
    text.append("lines not in a leg: ", style="bold yellow")
    text.append(f"{', '.join(found)} of {read} read (--details names files and writers)")
    return text


def report(document: dict[str, Any], *, details: bool = False) -> RenderableType:
    """The legs, their flags and the fold; with ``details`` also the sources, the per-position
    figures and where every line went (without: the lines that are not in a leg, and where the
    counts came from when not from the hook's step log)."""
    parts: list[RenderableType] = [
        fit(legs_table(document), give_way=("shape", "steps/s", "run")),
        flag_lines(document, each_leg=details),
        fit(fold_table(document), give_way=("completion/S",)),
    ]
    if details:
        parts += [source_lines(document), distribution_lines(document), accounting_lines(document)]
        return Group(*parts)
    if document["step_source"] != STEP_LOG:  # counts from elsewhere than the hook's log: say so
        parts.append(source_lines(document))
    if (problems := line_problems(document)) is not None:
        parts.append(problems)
    return Group(*parts)
