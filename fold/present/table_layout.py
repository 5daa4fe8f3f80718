"""Tables that never cut a figure: columns give way, then the table turns vertical.

rich crops a no-wrap cell when a table is wider than the console (80 columns when piped). A
figure cut short is a wrong figure, so :func:`fit` measures the table at render time: while
its narrowest layout is too wide, the named give-way columns are dropped (the sparkline first,
then secondary columns); if it still does not fit, each row is printed as ``header: value``
lines, which fit any width a figure fits in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text


def _header(column_header: object) -> str:
    return " ".join(str(column_header).split())


def _copy_without(table: Table, dropped: set[str], widths: list[int] | None = None) -> Table:
    keep = [c for c in table.columns if _header(c.header) not in dropped]
    copy = Table(
        title=table.title,
        caption=table.caption,
        box=table.box,
        padding=table.padding,
        pad_edge=table.pad_edge,
        show_header=table.show_header,
        title_justify=table.title_justify,
        caption_justify=table.caption_justify,
        show_edge=table.show_edge,
        show_lines=table.show_lines,
        title_style=table.title_style,
        caption_style=table.caption_style,
        header_style=table.header_style,
        row_styles=table.row_styles,
    )
    for index, column in enumerate(keep):
        copy.add_column(
            column.header,
            width=None if widths is None else widths[index],
            justify=column.justify,
            no_wrap=column.no_wrap,
            overflow=column.overflow,
            min_width=column.min_width,
            style=column.style,
            header_style=column.header_style,
            ratio=column.ratio,
        )
    cells = [list(column.cells) for column in keep]
    for index, row in enumerate(table.rows):
        copy.add_row(
            *(column_cells[index] for column_cells in cells),
            style=row.style,
            end_section=row.end_section,
        )
    return copy


LONGEST_WHOLE_WORD = 16
"""In a folding column, a word up to this long is never split (a longer one is a path or a
name, which may fold)."""
_FIGURE = re.compile(r"[≈±~<>+-]?[\d.,:]*\d[\d.,:]*(e[+-]?\d+)?[%x]?[),;]?")


def _plain(console: Console, cell: object) -> str:
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return console.render_str(cell).plain
    return ""


def _ranges(console: Console, table: Table) -> list[tuple[int, int, int]]:
    """Per column: the narrowest width that cuts no no-wrap cell and splits no word, the width
    of its longest cell line, and of its header on one line."""
    ranges = []
    for column in table.columns:
        header = _plain(console, column.header)
        cells = [_plain(console, c) for c in column.cells]
        lines = [line for text in cells for line in text.splitlines()] or [""]
        header_lines = header.splitlines() or [""]
        if column.no_wrap:
            pieces = [*lines, *header_lines]
        else:
            # A folding column may split a name too long for any column ("recorde / d" reads
            # as two words), never a figure or a word; other columns would cut a long word
            # short, so every word of theirs stays whole.
            words = [word for line in lines for word in line.split()]
            if column.overflow == "fold":
                words = [
                    word
                    for word in words
                    if _FIGURE.fullmatch(word) or cell_len(word) <= LONGEST_WHOLE_WORD
                ]
            pieces = [*words, *(word for line in header_lines for word in line.split())]
        narrowest = max([cell_len(piece) for piece in pieces] + [column.min_width or 0, 1])
        widest = max(narrowest, *(cell_len(line) for line in lines))
        header_width = max(widest, *(cell_len(line) for line in header_lines))
        ranges.append((narrowest, widest, header_width))
    return ranges


def _overhead(table: Table) -> int:
    _top, right, _bottom, left = Padding.unpack(table.padding)
    count = len(table.columns)
    total = count * (left + right)
    if not table.pad_edge and count:
        total -= left + right
    if table.box is not None:
        total += count - 1 + (2 if table.show_edge else 0)
    return total


def _widths(console: Console, table: Table, width: int) -> list[int] | None:
    """Column widths that fit ``width`` without cutting a figure, or None if none do.

    rich's own shrinking can cut a no-wrap cell or go past a column's minimum, so the widths
    are decided here: every column gets its narrowest, and the room left is shared out.
    """
    ranges = _ranges(console, table)
    room = width - _overhead(table) - sum(low for low, _, _ in ranges)
    if room < 0:
        return None
    widths = [low for low, _, _ in ranges]
    # Labels (left-justified columns) first, then the other cells, then headers on one line;
    # within each, max-min fair: the columns that want least are made whole first.
    labels = [column.justify in ("left", "default") for column in table.columns]
    for target, only_labels in ((1, True), (1, False), (2, False)):
        wanted = [
            r[target] - w if label or not only_labels else 0
            for r, w, label in zip(ranges, widths, labels, strict=True)
        ]
        order = sorted(range(len(ranges)), key=lambda i: wanted[i])
        for position, index in enumerate(order):
            share = min(wanted[index], room // (len(order) - position))
            widths[index] += share
            room -= share
    return widths


class Fitted:
    """A table that drops ``give_way`` columns (in order) or turns vertical to fit."""

    def __init__(self, table: Table, give_way: Sequence[str] = ()) -> None:
        self.table = table
        self.give_way = list(give_way)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        dropped: list[str] = []
        attempts: Iterable[str | None] = [None, *self.give_way]
        for column in attempts:
            if column is not None:
                dropped.append(column)
            table = _copy_without(self.table, set(dropped))
            widths = _widths(console, table, width)
            if widths is not None:
                yield _copy_without(table, set(), widths)
                if dropped:
                    yield Text(f"(at {width} columns: {', '.join(dropped)} not shown)", style="dim")
                return
        yield self.vertical(console)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)

    def vertical(self, console: Console) -> Group:
        """Each row as ``header: value`` lines under the row's first cell: plain text wraps
        only at spaces, so a figure stays whole at any width it fits in."""
        columns = self.table.columns
        cells = [list(column.cells) for column in columns]
        parts: list[Text] = []
        if self.table.title:
            parts.append(Text(str(self.table.title), style="italic"))
        for index in range(len(self.table.rows)):
            title = Text(f"{_header(columns[0].header)}: ", style="bold")
            parts.append(title + Text(_plain(console, cells[0][index]), style="bold"))
            for column, column_cells in zip(columns[1:], cells[1:], strict=True):
                value = " ".join(_plain(console, column_cells[index]).split())
                if value:
                    parts.append(Text(f"  {_header(column.header)}: ", style="dim") + value)
        if self.table.caption:
            parts.append(Text(str(self.table.caption), style="dim"))
        return Group(*parts)


def fit(table: Table, give_way: Sequence[str] = ()) -> Fitted:
    return Fitted(table, give_way)


def plain_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells of text in left-aligned columns two spaces apart under a rule of dashes, each
    column as wide as its widest cell (the ledger's tables: plain text, no cell cut)."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [header, ["-" * width for width in widths], *rows]
    return "".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        + "\n"
        for line in lines
    )
