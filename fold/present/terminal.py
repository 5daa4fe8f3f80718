"""What the command prints: the fold's JSON document as text for a terminal of a given width.

By default the per-leg table, the fold, the comparison table and the verdicts, the verdicts
last so that they are what stays on screen; ``details`` adds the sources, the per-position
figures, the line accounting, the cadence, another k and the speed splits, before the
comparison. A flag, a line not in a leg, notes on an arm's counters and a failed check show
either way.
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.text import Text

from fold.present.another_k import another_k_view
from fold.present.cadence import cadence_view
from fold.present.fold_lines import report
from fold.present.matched import matched_terminal
from fold.present.per_request import details_view, falling_flag
from fold.present.step_figures import about_text, has_step_figures, step_figures_view
from fold.present.step_split import step_split_view


def terminal_view(document: dict[str, Any], *, details: bool = False) -> RenderableType:
    parts: list[RenderableType] = [report(document, details=details)]
    if (falling := falling_flag(document)) is not None:
        parts.append(falling)
    if details:
        parts += [Text(""), cadence_view(document), Text(""), step_split_view(document)]
        parts += [Text(""), another_k_view(document), Text(""), details_view(document)]
    if details and has_step_figures(document):
        parts += [Text(""), step_figures_view(document), about_text(document)]
    if document.get("comparison") is not None:
        # Here, not above: the comparison's views load the oracles' readers, which a fold
        # without --vs never needs (docs/performance.md, "Start-up").
        from fold.present.comparison import comparison

        parts += [Text(""), comparison(document, details=details)]
    return Group(*parts)


def terminal(
    document: dict[str, Any], *, width: int = 80, details: bool = False, color: bool = False
) -> str:
    """The text, ``width`` columns wide; ``color`` keeps the terminal's styles (ANSI codes)."""
    out = io.StringIO()
    console = Console(
        file=out,
        width=width,
        force_terminal=color,
        color_system="standard" if color else None,
        highlight=False,
        emoji=False,
        legacy_windows=False,
    )
    console.print(terminal_view(document, details=details))
    if document.get("matched"):  # after the answer, its lines whole (they are copied)
        return out.getvalue() + "\n" + matched_terminal(document, width=width)
    return out.getvalue()
