"""The ledger's run list and a figure's history as a terminal table and as markdown.

Functions of the history data alone (``fold.ledger.history``'s JSON-ready dicts): they read no
ledger and return text. They read every figure and count they show (how many runs are listed,
how many flagged, which figures of a run are) from the data; ``tests/test_ledger_presenters.py``
fails on arithmetic, counting or ordering of numbers here.
"""

from __future__ import annotations

from typing import Any

from fold.present.markdown_table import pipe_table
from fold.present.table import length, percent, three_decimals
from fold.present.table_layout import plain_table

RATES = ("accept_rate", "per_position", "per_position_conditional", "per_position_of_proposed")
LENGTHS = ("mean_acceptance_length", "completion_tokens_per_step")
FLAG_MARK = "!"


def shown_value(figure: str, value: float | None) -> str:
    """A figure rounded for people: rates as percent, lengths to 2 decimals, the rest to 3."""
    base = figure.partition(":")[0]
    if base in RATES:
        return percent(value)
    if base in LENGTHS:
        return length(value)
    return three_decimals(value)


def shown_interval(figure: str, interval: list[float] | None) -> str:
    if interval is None:
        return "-"
    return f"{shown_value(figure, interval[0])} – {shown_value(figure, interval[1])}"


def against_previous(entry: dict[str, Any]) -> str:
    """How the run's figure stands to the previous run's interval, in words."""
    previous = entry["previous"]
    return {
        "first": "first",
        "no figure": "no such figure",
        "no interval before": f"run {previous} has no interval",
        "inside": f"inside run {previous}'s interval",
        "outside": f"{FLAG_MARK} {(entry['flag'] or '').upper()} run {previous}'s interval",
    }[entry["compared"]]


def changed_labels(entry: dict[str, Any]) -> str:
    return ", ".join(
        f"{change['key']}: {_label(change['from'])} → {_label(change['to'])}"
        for change in entry["changed"]
    )


def labels_text(labels: dict[str, str]) -> str:
    return " ".join(f"{key}={value}" for key, value in labels.items())


def history_rows(history: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The history's header and rows, shared by the table and the markdown."""
    figure = history["figure"]
    grouped = history["by"] is not None
    header = ["run", "kept (UTC)", *([history["by"]] if grouped else []), history["shown"],
              "95% interval", "against the previous run", "labels changed since"]  # fmt: skip
    rows = []
    for group in history["groups"]:
        for entry in group["runs"]:
            rows.append([
                f"{FLAG_MARK if entry['flag'] else ''}{entry['run']}",
                _kept(entry["kept_at"]),
                *([group["group"]] if grouped else []),
                shown_value(figure, entry["value"]),
                shown_interval(figure, entry["ci"]),
                against_previous(entry),
                changed_labels(entry) or ("-" if entry["previous"] is not None else ""),
            ])  # fmt: skip
    return header, rows


def history_table(history: dict[str, Any]) -> str:
    """The history as an aligned plain-text table with a one-line summary under it."""
    header, rows = history_rows(history)
    return f"{plain_table(header, rows)}{summary_line(history)}"


def history_markdown(history: dict[str, Any]) -> str:
    header, rows = history_rows(history)
    title = f"# {history['shown']} over the kept runs\n\n"
    scope = _scope(history)
    scoped = f"{scope}\n\n" if scope else ""
    return f"{title}{scoped}{pipe_table(header, rows)}\n{summary_line(history)}"


def run_rows(listing: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["run", "kept (UTC)", "arm record", "A/P", "1 + A/S", "tok/s", "compared with",
              "labels"]  # fmt: skip
    rows = [
        [
            f"{FLAG_MARK if run['flagged'] else ''}{run['run']}",
            _kept(run["kept_at"]),
            run["arm"] or "-",
            _with_interval("accept_rate", run),
            _with_interval("mean_acceptance_length", run),
            _with_interval("output_throughput_tok_s", run),
            ", ".join(run["versus"]) or "-",
            labels_text(run["labels"]) or "-",
        ]
        for run in listing["runs"]
    ]
    return header, rows


def runs_table(listing: dict[str, Any]) -> str:
    if not listing["runs"]:
        kept = listing.get("kept", 0)
        if kept:
            return f"{listing['ledger'] or 'the ledger'}: no kept run matches ({kept} kept)\n"
        return f"{listing['ledger'] or 'the ledger'}: no run kept yet\n"
    header, rows = run_rows(listing)
    return f"{plain_table(header, rows)}{_listing_summary(listing)}\n"


def runs_markdown(listing: dict[str, Any]) -> str:
    title = "# Kept runs\n\n"
    if not listing["runs"]:
        return title + "No run kept yet.\n"
    header, rows = run_rows(listing)
    return f"{title}{pipe_table(header, rows)}\n{_listing_summary(listing)}.\n"


def _with_interval(figure: str, run: dict[str, Any]) -> str:
    value = shown_value(figure, run[figure])
    interval = run[f"{figure}_ci"]
    shown = value if interval is None else f"{value} ({shown_interval(figure, interval)})"
    flag = run.get(f"{figure}_flag")
    return shown if flag is None else f"{shown} {FLAG_MARK}{'↑' if flag == 'above' else '↓'}"


def _listing_summary(listing: dict[str, Any]) -> str:
    flagged, listed = listing["flagged"], listing["listed"]
    if not flagged:
        return f"{_count(listed)} kept (warm legs' figures, 95% intervals)"
    return (
        f"{_count(listed)} kept (warm legs' figures, 95% intervals); {_count(flagged)} with a "
        f"figure outside the previous run's interval (marked {FLAG_MARK}, ↓ below, ↑ above)"
    )


def summary_line(history: dict[str, Any]) -> str:
    runs = history["listed"]
    if not runs:
        return "no kept run matches\n"
    flagged = history["flagged"]
    moved = (
        f"{flagged} run{'s' if flagged != 1 else ''} outside the previous run's 95% interval "
        f"(marked {FLAG_MARK})"
        if flagged
        else "no run outside the previous run's 95% interval"
    )
    return f"{_count(runs)}: {moved}\n"


def _scope(history: dict[str, Any]) -> str:
    parts = []
    if history["where"]:
        parts.append("runs labelled " + labels_text(history["where"]))
    if history["by"]:
        parts.append(f"grouped by {history['by']}, each run against the one before it in its group")
    return "; ".join(parts)


def _count(runs: int) -> str:
    return f"{runs} run{'s' if runs != 1 else ''}"


def _kept(stamp: str) -> str:
    return stamp.replace("T", " ").removesuffix("Z")


def _label(value: str | None) -> str:
    return "(none)" if value is None else value
