"""An oracle's speed factor split one level deeper, as rich renderables (never printed): over
leg windows, our decode windows and our steady decoding, beside the shares of warm leg time
outside steady decoding; from the JSON document's ``comparison.speed``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from fold.present.table import fmt_factor, fmt_rate, recorded_cell
from fold.present.table_layout import Fitted, fit

Row = Mapping[str, Any]


_PART_LABELS = {"before_first_step": "start-up", "stalls": "stalls", "tail": "tail",
                "rest": "rest (median tok/s against the steps' times)"}  # fmt: skip


def speed_summary(split: Row) -> str | None:
    """'speed: 70% slower steps, 30% start-up, 0% stalls, 0% tail', largest part first."""
    parts = split.get("parts")
    if parts is None:
        return None
    steady = split["steady_factor"]
    slower = steady is not None and steady < 1
    labels = {"steps": "slower steps" if slower else "faster steps", **_PART_LABELS}
    phrases = []
    for name in split["parts_by_share"]:
        part = parts[name]
        share = round(abs(part) * 100)
        phrases.append(
            f"{share}% {labels[name]}" if part >= 0 else f"{labels[name]} offset {share}%"
        )
    return "speed: " + ", ".join(phrases)


def speed_table(split: Row, *, modelled: bool = False) -> Fitted:
    """The speed factor over leg windows, our decode windows and our steady decoding, beside
    our shares of warm leg time outside steady decoding (the oracle records none of its own;
    another run of ours does, and gets a row of its own shares)."""
    other_shares = split.get("other_shares")
    both = other_shares is not None
    table = Table(
        title=f"{'modelled ' if modelled else ''}speed factor vs {split['oracle']}, and "
        + ("both runs' warm leg time" if both else "our warm leg time"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )
    whose = "both" if both else "our"
    headers = ("over leg windows", f"over {whose} decode windows",
               f"over {whose} steady decoding", "before first step", "in stalls",
               "in the tail")  # fmt: skip
    if both:
        table.add_column("shares of", overflow="fold")
    for header in headers:
        table.add_column(header, justify="right", overflow="fold")
    outside = ("before_first_step", "stalls", "tail")
    factors = [recorded_cell(fmt_factor(split[name]))
               for name in ("leg_factor", "decode_factor", "steady_factor")]  # fmt: skip
    shares = split["shares"]
    table.add_row(
        *([Text("ours")] if both else []),
        *factors,
        *(recorded_cell(fmt_rate(shares[name])) for name in outside),
    )
    if other_shares is not None:
        table.add_row(
            Text(split["oracle"]),
            *[Text("")] * 3,
            *(recorded_cell(fmt_rate(other_shares[name])) for name in outside),
        )
    return fit(table)


def speed_lines(split: Row, *, modelled: bool = False) -> list[RenderableType]:
    """The speed factor one level deeper, the split of its log into slower steps and time
    outside steady decoding, and what the oracle does not record. ``modelled``: the gap is
    split by measurement, so this factor is the model's and is named so."""
    lines: list[RenderableType] = [speed_table(split, modelled=modelled)]
    summary = speed_summary(split)
    if summary is not None:
        whose = "the modelled" if modelled else "the"
        lines.append(Text(f"  {summary} (shares of {whose} speed factor's log)", "bold"))
    lines.extend(Text(f"  {lack}", style="dim") for lack in split["oracle_lacks"])
    return lines
