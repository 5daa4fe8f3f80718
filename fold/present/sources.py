"""Where each arm's figures came from, and its notes: the sources table ``--details`` shows,
and the notes' lines without it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from fold.inputs.oracles.figures import DERIVED_SOURCE, NOT_RECORDED_SOURCE
from fold.inputs.populations import POPULATION_TEXT

Row = Mapping[str, Any]

_FIGURE_LABELS = (
    ("tok_s", "tok/s"),
    ("accepted", "A"),
    ("proposed", "P"),
    ("steps", "S"),
    ("per_position", "per position"),
    ("completion_tokens_per_step", "SGLang len*"),
    ("mean_acceptance_length", "mean len"),
    ("accept_rate", "rate"),
)


def sources_table(rows: Sequence[Row]) -> Table:
    """Where each figure of each arm came from (counter or field), or why it is missing."""
    table = Table(title="Sources", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("engine", overflow="fold")
    table.add_column("figure", no_wrap=True)
    table.add_column("source", overflow="fold", ratio=1)
    for position, row in enumerate(rows):
        name = row["name"]
        if row.get("population"):
            detail = row.get("population_detail")
            words = POPULATION_TEXT[row["population"]]
            covers = words + (f": {detail}" if detail else "")
            table.add_row(Text(name, style="bold"), "covers", Text(covers))
            name = ""
        for key, label in _FIGURE_LABELS:
            source = row["sources"].get(key)
            if source is None:
                continue
            kind = row["source_kinds"][key]
            if kind == DERIVED_SOURCE:
                continue  # derived as always; only another origin is worth a line
            style = "dim" if kind == NOT_RECORDED_SOURCE else ""
            table.add_row(Text(name, style="bold"), label, Text(source, style=style))
            name = ""
        for note in row["notes"]:
            table.add_row(Text(name, style="bold"), "note", Text(note, style="yellow"))
            name = ""
        if position < len(rows) - 1:
            table.rows[-1].end_section = True
    return table


def note_lines(rows: Sequence[Row]) -> list[Text]:
    """Each arm's notes (rounded counters, a reset, ...), which the sources table holds with
    ``--details``: without it they still show, one line each."""
    return [
        Text(f"note ({row['name']}): ", style="bold yellow") + Text(note, style="yellow")
        for row in rows
        for note in row["notes"]
    ]
