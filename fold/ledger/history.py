"""A figure's history over the kept runs, and the list of runs: plain JSON-ready data.

A run is flagged when its figure lies outside the previous run's 95% interval, the previous
run being the one kept before it that has the figure, in the same group when the history is
grouped by a label. Beside each run are the labels that changed since that previous run: what
moved between the two gates. A previous run without an interval (``--bootstrap 0``, an arm
known only by totals) flags nothing, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fold.errors import InputError
from fold.ledger.figures import FOLD_FIGURES, FOLDS, GAP_FIGURES, POSITION_FIGURES, FigureRow
from fold.ledger.store import KeptRun

ALIASES = {
    "A/P": "accept_rate",
    "1+A/S": "mean_acceptance_length",
    "tok/s": "output_throughput_tok_s",
    "steps/s": "step_rate",
}
"""The figures by the names the tables show them under."""
SHOWN = {
    "accept_rate": "A/P",
    "mean_acceptance_length": "1 + A/S",
    "output_throughput_tok_s": "tok/s",
    "completion_tokens_per_step": "completion tokens per step",
    "step_rate": "verify steps/s",
    "per_position": "accepted at position {position} per step",
    "per_position_conditional": "accepted at position {position} given position {before}",
    "per_position_of_proposed": "accepted at position {position} per draft reaching it",
    "ratio": "tok/s ratio to {versus}",
    "acceptance_factor": "acceptance factor against {versus}",
    "speed_factor": "speed factor against {versus}",
    "measured_speed_factor": "measured speed factor against {versus}",
}
NO_LABEL = "(no label)"
LISTED_FIGURES = ("accept_rate", "mean_acceptance_length", "output_throughput_tok_s")
PERCENT_FIGURES = ("accept_rate", *POSITION_FIGURES)
"""The rates, charted in percent."""
CHART_COLOURS = 7
"""The colours a chart's series cycle through (``fold.present.chart.PALETTE``; the tests hold
the two equal)."""
MAX_NOTE_CHARS = 40
"""A flagged point's note (the labels that changed) is cut to this many characters."""


@dataclass(frozen=True)
class FigureKey:
    """Which figure: a fold's figure, a per-position rate (``position``, from 1) or a gap
    figure against the arm ``versus`` (over the fold its comparison used)."""

    figure: str
    fold: str = "warm"
    position: int | None = None
    versus: str | None = None

    def matches(self, row: FigureRow) -> bool:
        if self.versus is not None:
            return row.figure == self.figure and row.versus == self.versus
        return (row.figure, row.fold, row.position, row.versus) == (
            self.figure,
            self.fold,
            self.position,
            None,
        )

    @property
    def name(self) -> str:
        if self.versus is not None:
            return f"{self.figure}:{self.versus}"
        return self.figure if self.position is None else f"{self.figure}:{self.position}"

    @property
    def shown(self) -> str:
        text = SHOWN[self.figure].format(
            position=self.position, before=(self.position or 1) - 1, versus=self.versus
        )
        return text if self.versus is not None else f"{text} ({self.fold} legs)"


def parse_figure(text: str, fold: str = "warm", flag: str = "--figure") -> FigureKey:
    """``A/P``, ``1+A/S``, ``tok/s`` or a figure's JSON name; ``per_position:I`` (and its
    conditional and of-proposed kinds); ``ratio:ARM``, ``acceptance_factor:ARM``,
    ``speed_factor:ARM``, ``measured_speed_factor:ARM``."""
    if fold not in FOLDS:
        raise InputError(f"--fold {fold!r}: expected one of {', '.join(FOLDS)}")
    compact = text.replace(" ", "")
    name, _, argument = compact.partition(":")
    name = ALIASES.get(name, name)
    if name in FOLD_FIGURES and not argument:
        return FigureKey(name, fold)
    if name in POSITION_FIGURES and argument.isdigit() and int(argument) >= 1:
        return FigureKey(name, fold, position=int(argument))
    if name in GAP_FIGURES and argument:
        return FigureKey(name, fold, versus=text.partition(":")[2].strip())
    raise InputError(
        f"{flag} {text!r}: expected A/P, 1+A/S, tok/s, steps/s, completion_tokens_per_step, "
        f"{'|'.join(POSITION_FIGURES)}:POSITION (from 1) or {'|'.join(GAP_FIGURES)}:ARM "
        "(the name given with --vs)"
    )


def figures_kept(runs: Sequence[KeptRun]) -> list[str]:
    """The figure names some run has, as ``--figure`` takes them."""
    names: dict[str, None] = {}
    for run in runs:
        for row in run.figures:
            if row.versus is not None:
                names[f"{row.figure}:{row.versus}"] = None
            elif row.position is not None:
                names[f"{row.figure}:{row.position}"] = None
            else:
                names[row.figure] = None
    return list(names)


def select(runs: Sequence[KeptRun], where: dict[str, str]) -> list[KeptRun]:
    """The runs whose labels hold every ``where`` pair."""
    return [run for run in runs if all(run.labels.get(k) == v for k, v in where.items())]


def figure_history(
    runs: Sequence[KeptRun],
    key: FigureKey,
    *,
    where: dict[str, str] | None = None,
    by: str | None = None,
    ledger: str = "",
) -> dict[str, Any]:
    """The figure's history, runs in the order they were kept, grouped by the label ``by``
    (groups in the order of their first run)."""
    where = where or {}
    chosen = select(runs, where)
    if chosen and not any(_row_of(run, key) for run in chosen):
        kept = figures_kept(chosen)
        raise InputError(
            f"--figure {key.name}: no run{' of those selected' if where else ''} has it "
            f"over the {key.fold} legs; the runs have: {', '.join(kept) or 'no figures'}"
        )
    groups: dict[str | None, list[KeptRun]] = {}
    for run in chosen:
        groups.setdefault(run.labels.get(by) if by else None, []).append(run)
    shown: list[dict[str, Any]] = [
        {"group": None if by is None else (group or NO_LABEL), "runs": _entries(members, key)}
        for group, members in groups.items()
    ]
    return {
        "ledger": ledger,
        "figure": key.name,
        "shown": key.shown,
        "fold": key.fold,
        "where": dict(where),
        "by": by,
        "groups": shown,
        "listed": sum(len(group["runs"]) for group in shown),
        "flagged": sum(entry["flag"] is not None for group in shown for entry in group["runs"]),
        "chart": history_chart_data(key, shown),
    }


def history_chart_data(key: FigureKey, groups: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the history's chart draws, in its own units: the kept runs in order along x (their
    ids label the ticks at 0, 1, ...), and per group with a figure a series of points at
    (x, y), with the error bar's lengths below and above y, the series' colour (an index into
    the palette) and a flagged point's note of the labels that changed. Rates are in percent."""
    percent = key.figure in PERCENT_FIGURES
    scale = 100.0 if percent else 1.0
    order = sorted(entry["run"] for group in groups for entry in group["runs"])
    x_of = {run: index for index, run in enumerate(order)}
    drawn = [g for g in groups if any(entry["value"] is not None for entry in g["runs"])]
    series = []
    for index, group in enumerate(drawn):
        points = [
            {
                "run": entry["run"],
                "x": x_of[entry["run"]],
                "y": scale * entry["value"],
                "below": _reach(entry, scale, 0),
                "above": _reach(entry, scale, 1),
                "flag": entry["flag"],
                "note": _note(entry["changed"]) if entry["flag"] else "",
            }
            for entry in group["runs"]
            if entry["value"] is not None
        ]
        series.append({"group": group["group"], "colour": index % CHART_COLOURS, "points": points})
    return {"percent": percent, "runs": order, "ticks": list(range(len(order))), "series": series}


def _reach(entry: dict[str, Any], scale: float, end: int) -> float:
    """The error bar's length below (``end`` 0) or above (1) the point; 0 without an interval."""
    interval = entry["ci"]
    if interval is None:
        return 0.0
    distance = scale * (entry["value"] - interval[0] if end == 0 else interval[1] - entry["value"])
    return max(distance, 0.0) if math.isfinite(distance) else 0.0


def _note(changed: Sequence[dict[str, Any]]) -> str:
    text = ", ".join(f"{c['key']}={c['to'] if c['to'] is not None else '(none)'}" for c in changed)
    return text if len(text) <= MAX_NOTE_CHARS else text[: MAX_NOTE_CHARS - 1] + "…"


def _entries(runs: Sequence[KeptRun], key: FigureKey) -> list[dict[str, Any]]:
    entries = []
    previous: tuple[KeptRun, FigureRow] | None = None
    for run in runs:
        row = _row_of(run, key)
        entry: dict[str, Any] = {
            "run": run.run_id,
            "kept_at": run.kept_at.isoformat(timespec="seconds") + "Z",
            "labels": dict(run.labels),
            "value": None if row is None else row.value,
            "ci": None if row is None or row.ci_low is None else [row.ci_low, row.ci_high],
            "previous": None if previous is None else previous[0].run_id,
            "changed": [] if previous is None else label_changes(previous[0].labels, run.labels),
            "flag": None,
        }
        if row is None:
            entry["compared"] = "no figure"
        elif previous is None:
            entry["compared"] = "first"
        elif previous[1].ci_low is None or previous[1].ci_high is None:
            entry["compared"] = "no interval before"
        elif row.value > previous[1].ci_high:
            entry["compared"], entry["flag"] = "outside", "above"
        elif row.value < previous[1].ci_low:
            entry["compared"], entry["flag"] = "outside", "below"
        else:
            entry["compared"] = "inside"
        entries.append(entry)
        if row is not None:
            previous = (run, row)
    return entries


def label_changes(before: dict[str, str], after: dict[str, str]) -> list[dict[str, Any]]:
    """Each label whose value differs between two runs (None: absent from that run)."""
    return [
        {"key": key, "from": before.get(key), "to": after.get(key)}
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]


def run_list(
    runs: Sequence[KeptRun], *, ledger: str = "", kept: int | None = None
) -> dict[str, Any]:
    """Every kept run (``runs``, as ``--where`` selected them from ``kept`` in all): its labels,
    its arm record and inputs, and its warm legs' A/P, 1 + A/S and tok/s with their
    intervals, each flagged as ``figure_history`` flags it against the previous listed run."""
    flags = {
        name: {entry["run"]: entry for entry in _entries(runs, FigureKey(name))}
        for name in LISTED_FIGURES
    }
    listed = []
    for run in runs:
        figures = {
            row.figure: row
            for row in run.figures
            if row.fold == "warm" and row.position is None and row.versus is None
        }
        arm = next((found for found in run.inputs if found.role == "arm"), None)
        entry: dict[str, Any] = {
            "run": run.run_id,
            "kept_at": run.kept_at.isoformat(timespec="seconds") + "Z",
            "labels": dict(run.labels),
            "arm": None if arm is None else arm.name,
            "inputs": len(run.inputs),
            "input_bytes": sum(found.bytes for found in run.inputs),
            "versus": sorted({row.versus for row in run.figures if row.versus is not None}),
        }
        for name in LISTED_FIGURES:
            row = figures.get(name)
            entry[name] = None if row is None else row.value
            entry[f"{name}_ci"] = (
                None if row is None or row.ci_low is None else [row.ci_low, row.ci_high]
            )
            entry[f"{name}_flag"] = flags[name][run.run_id]["flag"]
        entry["flagged"] = [name for name in LISTED_FIGURES if entry[f"{name}_flag"]]
        listed.append(entry)
    return {
        "ledger": ledger,
        "kept": len(runs) if kept is None else kept,
        "listed": len(listed),
        "runs": listed,
        "flagged": sum(bool(entry["flagged"]) for entry in listed),
    }


def _row_of(run: KeptRun, key: FigureKey) -> FigureRow | None:
    return next((row for row in run.figures if key.matches(row)), None)
