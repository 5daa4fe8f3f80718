"""The markdown record's table and cell helpers, shared by each of its sections (the record
itself, the runs of ours, the step figures), so that none of them imports another."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fold.present.table import NOT_RECORDED


def cell(value: Any) -> str:
    """Text fit for a table cell: pipes escaped, no line breaks."""
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool]) -> str:
    lines = [
        "| " + " | ".join(cell(header) for header in headers) + " |",
        "|" + "|".join("---:" if align else "---" for align in right) + "|",
    ]
    lines.extend("| " + " | ".join(cell(value) for value in row) + " |" for row in rows)
    return "\n".join(lines)


def with_interval(shown: Callable[[float], str], value: Any, interval: Any) -> str:
    """A figure and its 95% interval's ends in the same format: '4.23 [4.19, 4.27]'."""
    if value is None:
        return NOT_RECORDED
    if interval is None:
        return shown(value)
    return f"{shown(value)} [{shown(interval[0])}, {shown(interval[1])}]"


def pipe_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells of text as a GitHub markdown table, left-aligned, pipes escaped (the ledger's)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |\n"

    return line(header) + line(["---"] * len(header)) + "".join(line(row) for row in rows)
