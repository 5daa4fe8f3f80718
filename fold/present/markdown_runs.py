"""The markdown record's section on another run of ours: the verdict in plain words, the decode
factor both runs measured, the workload and pairing, per-position rates and histogram with their
differences, and the paired legs. Every figure from the JSON document's ``runs``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fold.present.markdown_table import table, with_interval
from fold.present.runs import pair_summary_text, signed, signed_percent
from fold.present.table import percent, position_label, three_decimals, value_runs


def runs_section(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One ``## ours against NAME`` section per other run of ours."""
    return "\n\n".join(_one(found) for found in runs.values())


def _one(found: Mapping[str, Any]) -> str:
    name = found["other"]
    pairing = found["pairing"]
    lines = [f"## ours against {name}", "", f"- **verdict**: {found['verdict']}"]
    if found["decode_factor"] is not None:
        lines.append(
            f"- decode steps/s, both measured: ours / {name} = "
            + with_interval(three_decimals, found["decode_factor"], found["decode_factor_ci"])
        )
    if found["workload_differences"]:
        lines.append("- workloads differ: " + "; ".join(found["workload_differences"]))
    else:
        lines.append(f"- same workload as {name}, as far as the records tell")
    if pairing["paired"]:
        lines.append(f"- legs pair one to one; resampling {found['resampling_text']}")
    else:
        lines.append(
            f"- legs do not pair: {'; '.join(pairing['reasons'])}; "
            f"resampling {found['resampling_text']}"
        )
    if found["pair_summary"]:
        lines.append(f"- {pair_summary_text(found)}")
    lines.append(f"- {name}'s lines: {found['lines']}")
    sections = ["\n".join(lines)]
    if found["per_position"] is None or found["histogram"] is None:
        sections.append("per position and histogram: needs a step log on both sides.")
    for rows, key, title in (
        (found["per_position"] or (), "position", "Warm per-position acceptance"),
        (found["histogram"] or (), "accepted", "Warm steps by drafts accepted"),
    ):
        if not rows:
            continue
        cells = [
            (
                percent(row["ours"], "not recorded"),
                percent(row["other"], "not recorded"),
                with_interval(signed_percent, row["difference"], row["difference_ci"]),
            )
            for row in rows
        ]
        # A long run of equal rows (positions past what most steps drafted) as one i..j row.
        body = [(position_label(first, last), *shown) for first, last, shown in value_runs(cells)]
        headers = (key, "ours", name, f"ours - {name} [95%]")
        sections.append(f"### {title}\n\n" + table(headers, body, (True, True, True, True)))
    if found["pairs"] is not None:
        body = [
            (
                pair["index"],
                pair["run"],
                "yes" if pair["warm"] else "no",
                percent(pair["accept_rate"]["ours"], "not recorded"),
                percent(pair["accept_rate"]["other"], "not recorded"),
                signed_percent(pair["accept_rate"]["difference"]),
                signed(pair["mean_acceptance_length"]["difference"], 2),
                signed(pair["tok_s"]["difference"], 3),
            )
            for pair in found["pairs"]
        ]
        pair_headers = (
            "leg",
            "run",
            "warm",
            "A/P ours",
            f"A/P {name}",
            "Δ A/P",
            "Δ 1+A/S",
            "Δ tok/s",
        )
        sections.append(
            "### Paired legs (ours - " + name + ")\n\n" + table(pair_headers, body, [True] * 8)
        )
    return "\n\n".join(sections)
