"""Which figure columns the comparison draws: in the terminal and on the page, a column no arm
records is not drawn, and SGLang's unit only beside an arm that records it. Read from the JSON
document's ``comparison`` block alone, as every presenter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fold.compare.gap import SGLANG_UNIT

ROW_FIGURES = (
    ("output_throughput_tok_s", "three_decimals"),
    ("mean_acceptance_length", "length"),
    ("accept_rate", "percent"),
    ("verify_steps_per_s", "three_decimals"),
    ("completion_tokens_per_step", "length"),
)


HEADERS = ("tok/s (warm)", "mean len (1+A/S)", "rate (A/P)", "verify steps/s", "SGLang len*")


def recorded_columns(block: Mapping[str, Any], *, oracles_only: bool = False) -> list[int]:
    """The figure columns (``ROW_FIGURES``'s order) some arm records or a ratio fills: a
    column of "not recorded" is not drawn. ``oracles_only`` (the page) keeps a column only
    when an arm set beside ours (an oracle, another run of ours) records it, since the page
    shows what our fold alone has in our block."""
    filled = {
        place
        for row in block["rows"]
        if not (oracles_only and row["name"] not in block["gaps"])
        for place, (figure, _) in enumerate(ROW_FIGURES)
        if row[figure] is not None
    }
    for gap in block["gaps"].values():
        if gap["ratio"] is not None:
            filled.add(0)
        if gap["acceptance_factor"] is not None:
            filled.add(4 if gap["unit"] == SGLANG_UNIT else 1)
        if gap["speed_factor"] is not None:
            filled.add(3)
    return sorted(filled)


def terminal_columns(block: Mapping[str, Any]) -> list[int]:
    """The terminal's columns: every recorded one in the one unit (tok/s, mean len, rate,
    steps/s), which the verdicts read; SGLang len* only when an arm beside ours records it,
    since SGLang's unit beside no SGLang arm compares with nothing."""
    beside = recorded_columns(block, oracles_only=True)
    return [place for place in recorded_columns(block) if place != 4 or place in beside]
