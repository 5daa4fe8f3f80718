"""Two runs of ours side by side, as rich renderables (never printed): the workload and the
pairing, per-position rates and histogram with their differences, and the paired legs, from
the JSON document's ``runs``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from fold.present.table import NOT_RECORDED, percent, plus_minus, position_label, value_runs
from fold.present.table_layout import fit


def runs_lines(found: Mapping[str, Any], *, details: bool = True) -> list[RenderableType]:
    """Under the verdict against another run of ours (the document's ``runs[NAME]``): what
    only two measured runs show. Without ``details``: the decode factor, a workload that
    differs, legs that do not pair and the other run's flagged legs."""
    name = found["other"]
    pairing = found["pairing"]
    lines: list[RenderableType] = []
    if found["workload_differences"]:
        lines.append(Text(f"  workloads differ ({name} against ours):", style="bold yellow"))
        lines.extend(
            Text(f"    {difference}", style="yellow")
            for difference in found["workload_differences"]
        )
    elif details:
        lines.append(Text(f"  same workload as {name}, as far as the records tell", style="dim"))
    if pairing["paired"]:
        if details:
            lines.append(
                Text(
                    f"  legs pair one to one with {name}; resampling {found['resampling_text']}",
                    "dim",
                )
            )
    else:
        lines.append(
            Text(
                f"  legs do not pair with {name}: {'; '.join(pairing['reasons'])}; "
                f"resampling {found['resampling_text']}",
                style="yellow",
            )
        )
    if found["decode_factor"] is not None:
        spread = found["decode_factor_ci"]
        lines.append(
            Text(
                f"  decode steps/s, both measured: ours / {name} = {found['decode_factor']:.3f}"
                + ("" if spread is None else f" [{spread[0]:.3f}, {spread[1]:.3f}]"),
                style="bold",
            )
        )
    if details:
        if found["per_position"] is None or found["histogram"] is None:
            lines.append(
                Text("  per position and histogram: needs a step log on both sides", style="dim")
            )
        else:
            lines.append(position_table(found["per_position"], name, "per_position"))
            lines.append(position_table(found["histogram"], name, "histogram"))
        if found["pairs"] is not None:
            lines.append(pairs_table(found["pairs"], name))
            if found["pair_summary"]:
                lines.append(Text("  " + pair_summary_text(found), style="dim"))
        lines.append(Text(f"  {name}'s lines: {found['lines']}", style="dim"))
    flagged = [leg for leg in found["fold"]["legs"] if leg["flags"]]
    for leg in flagged:
        lines.append(
            Text(
                f"  ! {name} leg {leg['index']} (run {leg['run']}): {', '.join(leg['flags'])}",
                style="yellow",
            )
        )
    return lines


def position_table(rows: Sequence[dict[str, Any]], name: str, which: str) -> RenderableType:
    """Per position (or accepted count): both runs' warm shares, the difference, its ``±``."""
    per_position = which == "per_position"
    table = Table(
        title=(
            f"warm per-position acceptance: ours and {name}"
            if per_position
            else f"warm steps by drafts accepted: ours and {name}"
        ),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )
    table.add_column("position" if per_position else "accepted", justify="right")
    for header in ("ours", name, "ours - " + name, "± (95%)"):
        table.add_column(header, justify="right", overflow="fold")
    cells = [
        (
            percent(row["ours"], NOT_RECORDED),
            percent(row["other"], NOT_RECORDED),
            signed_percent(row["difference"]),
            plus_minus(row["difference_reach"], "percent"),
        )
        for row in rows
    ]
    for first, last, shown in value_runs(cells):
        table.add_row(position_label(first, last), *shown)
    return fit(table)


def pairs_table(pairs: Sequence[dict[str, Any]], name: str) -> RenderableType:
    """One row per pair of legs: each run's A/P and the differences of A/P, 1 + A/S, tok/s."""
    table = Table(
        title=f"paired legs: ours - {name}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )
    for header in ("leg", "run", "warm", "A/P ours", f"A/P {name}", "Δ A/P", "Δ 1+A/S", "Δ tok/s"):
        table.add_column(header, justify="right", overflow="fold")
    for pair in pairs:
        rate, length, tok_s = (pair[figure] for figure in ("accept_rate",
                               "mean_acceptance_length", "tok_s"))  # fmt: skip
        table.add_row(
            str(pair["index"]),
            str(pair["run"]),
            "yes" if pair["warm"] else "no",
            percent(rate["ours"], NOT_RECORDED),
            percent(rate["other"], NOT_RECORDED),
            signed_percent(rate["difference"]),
            signed(length["difference"], 2),
            signed(tok_s["difference"], 3),
        )
    return fit(table)


def pair_summary_text(found: Mapping[str, Any]) -> str:
    """'warm pairs (6): Δ A/P median -3.1% [-4.0%, -2.2%]; ...': median and range, from a run
    of ours's ``pair_summary`` and ``warm_pairs``."""
    summary = found["pair_summary"]
    parts = []
    for figure, label, shown in (
        ("accept_rate", "Δ A/P", signed_percent),
        ("mean_acceptance_length", "Δ 1+A/S", lambda value: signed(value, 2)),
        ("tok_s", "Δ tok/s", lambda value: signed(value, 3)),
    ):
        spread = summary[figure]
        if spread["median"] is None:
            parts.append(f"{label} {NOT_RECORDED}")
            continue
        parts.append(
            f"{label} median {shown(spread['median'])} (range {shown(spread['min'])} to "
            f"{shown(spread['max'])})"
        )
    return f"warm pairs ({found['warm_pairs']}): " + "; ".join(parts)


def signed_percent(value: float | None) -> str:
    return NOT_RECORDED if value is None else f"{round(value * 100, 1) + 0.0:+.1f}%"


def signed(value: float | None, decimals: int) -> str:
    return NOT_RECORDED if value is None else f"{round(value, decimals) + 0.0:+.{decimals}f}"
