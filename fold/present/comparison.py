"""The side-by-side comparison of our arm and the oracles, as rich renderables (never printed).

One row per engine, ours first, all acceptance figures in one unit (``1 + A/S`` and ``A/P``);
SGLang's own per-request unit sits in a separate, labelled column. A figure that cannot be
had reads "not recorded", never 0. Everything is read from the JSON document's ``comparison``
block (and ``runs``), so a saved ``--json`` file renders the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fold.compare.gap import NO_GAP, SGLANG_UNIT
from fold.compare.gap_intervals import BOTH_ARMS, OURS_ONLY
from fold.inputs.oracles import (
    ALL_LEGS,
    INTERVAL,
    LAST_INTERVAL,
    REQUESTS,
    SINCE_START,
    WARM_LEGS,
)
from fold.present.comparison_columns import (
    HEADERS,
    ROW_FIGURES,
    terminal_columns,
)
from fold.present.matched_arms import matched_lines
from fold.present.measured_split import (
    ALWAYS_SHOWN,
    factors_text,
    intervals_text,
    measured_of,
    modelled_text,
    shares_text,
    split_text,
)
from fold.present.runs import runs_lines
from fold.present.sources import note_lines, sources_table
from fold.present.speed import speed_lines
from fold.present.step_split import step_split_lines
from fold.present.table import (
    NOT_RECORDED,
    fmt_factor,
    fmt_length,
    fmt_rate,
    fmt_share,
    fmt_steps_per_s,
    fmt_tok_s,
    plus_minus,
    recorded_cell,
)
from fold.present.table_layout import Fitted, fit

Row = Mapping[str, Any]


# Short names for what an arm's counters cover (the full wording is in the sources table).
POPULATION_LABELS = {
    WARM_LEGS: "warm legs",
    ALL_LEGS: "all legs",
    INTERVAL: "2 scrapes",
    SINCE_START: "since start",
    REQUESTS: "requests",
    LAST_INTERVAL: "last log",
}


def _approx(text: str, row: Row, figure: str) -> str:
    """A figure from rounded counters is marked ≈ (its bound is in the notes)."""
    approximate = row.get("approximate") or {}
    bound = approximate.get(figure)
    return text if bound is None or text == NOT_RECORDED else f"≈{text}"


def has_intervals(document: Mapping[str, Any]) -> bool:
    """Whether the fold drew intervals (``--bootstrap`` above 0)."""
    return bool((document.get("bootstrap") or {}).get("resamples"))


_SHORT_SGLANG = "SGLang len* = SGLang's own unit, not comparable with mean len; "
SHORT_CAPTION = (
    "mean len = 1 + A/S (bonus token included); rate = A/P; steps/s = tok/s / mean len; "
    f"{_SHORT_SGLANG}≈ = from rounded counters."
)
INTERVALS_CAPTION = (
    " ±: 95% bootstrap interval over the arm's legs, the larger distance to either end "
    "(totals: the arm is known only by its totals, so it has none; 1 leg: one leg says nothing "
    "of the spread); ± both: both arms resampled; ± ours: ours only, the oracle taken as "
    "exact; ± mixed: r from both arms, the factors from ours only."
)


def comparison_table(document: Mapping[str, Any], *, details: bool = True) -> Fitted:
    """One row per arm in the document's order (ours first), then one ratio row per oracle.

    Each ratio row ("ours/ORACLE") puts each factor under the column it divides: r under
    tok/s, the acceptance factor under the length it compares (mean len, or SGLang len* when
    the split is in SGLang's unit), the speed factor under verify steps/s. With intervals drawn,
    a ``±`` row under each arm and ratio gives its 95% intervals, or says why it has none.
    Figures never wrap or get cut: at narrow widths the population column goes first, then the
    table turns vertical. ``details`` writes the caption out in full.
    """
    block = document["comparison"]
    rows, gaps = block["rows"], block["gaps"]
    intervals = has_intervals(document)
    kept = terminal_columns(block)
    caption = SHORT_CAPTION if 4 in kept else SHORT_CAPTION.replace(_SHORT_SGLANG, "")
    if details:
        caption = (
            "mean len = 1 + A/S (bonus token included); rate = A/P; steps/s = tok/s / mean "
            "len. "
            + (
                "SGLang len* is SGLang's own unit (completion tokens per verify, prefill token "
                "included): not comparable with mean len. "
                if 4 in kept
                else ""
            )
            + "covers = what the acceptance counters count; ≈ = from rounded counters."
        )
        if intervals:
            caption += INTERVALS_CAPTION
    elif intervals:
        caption += " ±: 95% interval (--details says over what)."
    if any(_measured(gap) for gap in block["gaps"].values()):
        caption += " (modelled): the model's factors; that gap is split by measurement below."
    table = Table(
        title="Throughput and acceptance in one unit",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )
    # Names and labels keep their width while they fit; "not recorded" may wrap, figures never.
    longest_name = max((len(row["name"]) for row in rows), default=6)
    table.add_column("engine", overflow="fold", min_width=min(longest_name, 10))
    table.add_column("covers", overflow="fold")
    for place in kept:
        table.add_column(HEADERS[place], justify="right", overflow="fold")

    def add(first: Text, second: Text, cells: Sequence[Text], **options: Any) -> None:
        table.add_row(first, second, *(cells[i] for i in kept), **options)

    for row in rows:
        population = row.get("population") or ""
        add(
            Text(row["name"], style="bold"),
            Text(POPULATION_LABELS.get(population, population)),
            [
                recorded_cell(fmt_tok_s(row["output_throughput_tok_s"])),
                recorded_cell(
                    _approx(
                        fmt_length(row["mean_acceptance_length"]), row, "mean_acceptance_length"
                    )
                ),
                recorded_cell(_approx(fmt_rate(row["accept_rate"]), row, "accept_rate")),
                recorded_cell(fmt_steps_per_s(row["verify_steps_per_s"])),
                recorded_cell(fmt_length(row["completion_tokens_per_step"])),
            ],
        )
        if intervals:
            _arm_interval_row(add, row)
    arm_rows = len(table.rows)
    first = True
    for gap in gaps.values():
        split = gap["ratio"] is not None and gap["acceptance_factor"] is not None
        factor = recorded_cell(fmt_factor(gap["acceptance_factor"]) if split else NOT_RECORDED)
        in_sglang_unit = gap["unit"] == SGLANG_UNIT
        add(
            Text(f"ours/{gap['oracle']}" + (" (modelled)" if _measured(gap) else ""), "italic"),
            Text(""),
            [
                recorded_cell(fmt_factor(gap["ratio"])),
                Text("") if in_sglang_unit else factor,
                Text(""),
                recorded_cell(fmt_factor(gap["speed_factor"]) if split else NOT_RECORDED),
                factor if in_sglang_unit else Text(""),
            ],
            end_section=False,
        )
        if gap.get("ci_basis"):
            spread = Text(
                plus_minus(gap["acceptance_factor_reach"], "three_decimals"),
                style="dim",
            )
            add(
                Text(_ratio_label(gap["ci_basis"]), style="dim"),
                Text(""),
                [
                    Text(plus_minus(gap["ratio_reach"], "three_decimals"), style="dim"),
                    Text("") if in_sglang_unit else spread,
                    Text(""),
                    Text(
                        plus_minus(gap["speed_factor_reach"], "three_decimals"),
                        "dim",
                    ),
                    spread if in_sglang_unit else Text(""),
                ],
            )
        if first:
            # a rule between the arms and the ratio rows
            table.rows[arm_rows - 1].end_section = True
            first = False
    return fit(table, give_way=("covers",))


def _arm_interval_row(add: Callable[..., None], row: Row) -> None:
    """The ``±`` row under an arm: its 95% intervals, or why it has none."""
    found = [row.get(f"{figure}_ci") for figure, _ in ROW_FIGURES]
    if not any(found):
        why = "totals" if row.get("ci_note") == "totals_only" else "1 leg"
        add(Text("  ±", style="dim"), Text(""), [Text(why, style="dim italic"), *[Text("")] * 4])
        return
    cells = [plus_minus(row[f"{figure}_reach"], form) for figure, form in ROW_FIGURES]
    add(Text("  ±", style="dim"), Text(""), [Text(cell, style="dim") for cell in cells])


def gap_lines(gap: Row, *, details: bool = True) -> list[Text]:
    """The factors of one attribution and its verdict, as lines; the intervals' lines only with
    ``details`` (the table's ``±`` rows hold them). A gap measured through a run at our
    acceptance shows the measured factors, and the modelled split beside them."""
    head = Text(f"vs {gap['oracle']}: ", style="bold")
    if gap["ratio"] is None:
        return [head + Text(gap["verdict"])]
    lines = [head + Text(factors_text(gap))]
    measured = measured_of(gap)
    if measured is not None:
        lines.extend(_measured_lines(measured, gap["dominant"], details=details))
    else:
        lines.extend(_modelled_lines(gap, details=details))
    style = "bold" if gap["dominant"] is not None else "yellow"
    lines.append(Text("  verdict: ", style="bold") + Text(gap["verdict"], style=style))
    modelled = modelled_text(gap)
    if modelled is not None:
        lines.append(Text(f"  {modelled}"))
    split = split_text(gap, details=details)
    if split is not None:
        caveat = gap.get("split_reason") in ALWAYS_SHOWN
        lines.append(Text(f"  {split}", style="yellow" if caveat else "dim"))
    return lines


def _measured_lines(measured: Row, dominant: str | None, *, details: bool) -> list[Text]:
    lines = []
    spread = intervals_text(measured)
    if details and spread is not None:
        lines.append(Text(f"  {spread}", style="dim"))
    shares = shares_text(measured)
    if shares is not None and dominant != NO_GAP:
        lines.append(Text(f"  {shares}"))
    return lines


def _modelled_lines(gap: Row, *, details: bool) -> list[Text]:
    lines = []
    if details and gap.get("ci_basis") and gap["ratio_ci"] is not None:
        basis = _basis_text(gap["ci_basis"], gap["oracle"])
        parts = [f"r {_bracket(gap['ratio_ci'])}"]
        if gap["acceptance_factor_ci"] is not None and gap["speed_factor_ci"] is not None:
            parts += [
                f"acceptance {_bracket(gap['acceptance_factor_ci'])}",
                f"speed {_bracket(gap['speed_factor_ci'])}",
            ]
        lines.append(Text(f"  95% intervals ({basis}):", style="dim"))
        lines.append(Text("    " + "  ".join(parts), style="dim"))
    if (
        gap["acceptance_share"] is not None
        and gap["speed_share"] is not None
        and gap["dominant"] != NO_GAP  # near r = 1 the shares are large and mean nothing
    ):
        lines.append(
            Text(
                f"  share of the log-gap: acceptance {fmt_share(gap['acceptance_share'])}, "
                f"speed {fmt_share(gap['speed_share'])}"
            )
        )
    return lines


_FACTOR_NAMES = {"ratio": "r", "acceptance_factor": "acceptance", "speed_factor": "speed"}


def _both(basis: Mapping[str, str]) -> bool:
    return bool(basis) and all(value == BOTH_ARMS for value in basis.values())


def _basis_text(basis: Mapping[str, str], oracle: str) -> str:
    """What the intervals rest on: both arms' legs, ours alone, or each factor its own."""
    if _both(basis):
        return "both arms"
    if BOTH_ARMS not in basis.values():
        return f"ours only: {oracle} by totals"
    names = {kind: [_FACTOR_NAMES[f] for f, b in basis.items() if b == kind]
             for kind in (BOTH_ARMS, OURS_ONLY)}  # fmt: skip
    return (
        f"both arms for {', '.join(names[BOTH_ARMS])}; ours only for "
        f"{', '.join(names[OURS_ONLY])}: {oracle}'s length is a total"
    )


def _ratio_label(basis: Mapping[str, str]) -> str:
    if _both(basis):
        return "  ± both"
    return "  ± mixed" if BOTH_ARMS in basis.values() else "  ± ours"


def _bracket(interval: Sequence[float]) -> str:
    return f"[{fmt_factor(interval[0])}, {fmt_factor(interval[1])}]"


def population_line(gap: Row) -> Text | None:
    """Whether both sides' acceptance counters cover the same requests."""
    found = gap.get("populations")
    if not found or not found.get("ours") or not found.get("oracle"):
        return None
    ours, oracle = found["ours"], found["oracle"]
    if found["same"]:
        return Text(f"  both sides' acceptance counts cover {_COVERS.get(ours)}", style="dim")
    return Text(
        f"  populations differ: {gap['ours']} counts {_COVERS.get(ours)}, "
        f"{gap['oracle']} {_COVERS.get(oracle, oracle)} "
        f"({found['oracle_detail']}); the acceptance factor compares them as they are",
        style="yellow",
    )


_COVERS = {
    WARM_LEGS: "the warm legs",
    ALL_LEGS: "all legs, cold ones included",
    INTERVAL: "the interval between two scrapes",
    SINCE_START: "everything since server start",
    REQUESTS: "the requests given",
    LAST_INTERVAL: "the server's last logging interval",
}


def step_rate_line(check: Row, tolerance: float) -> Text:
    """Our measured verify-step rate against tok/s / mean acceptance length."""
    measured = check["measured_steps_per_s"]
    if measured is None:
        return Text("our verify steps/s: not recorded (the steps carry no timestamps)", "dim")
    if check["expected_steps_per_s"] is None or check["relative_diff"] is None:
        return Text(
            f"our verify steps/s measured {measured:.3f}; tok/s / mean acceptance "
            "length not recorded, so it cannot be checked",
            "dim",
        )
    line = (
        f"our verify steps/s measured {measured:.3f}, tok/s / mean acceptance "
        f"length gives {check['expected_steps_per_s']:.3f} ({check['relative_diff'] * 100:+.1f}%)"
    )
    if check["flagged"]:
        return Text(
            f"{line}: disagree beyond {tolerance * 100:g}%, so prefill or stalls take a share "
            "of the time the acceptance x speed split does not see",
            "bold yellow",
        )
    return Text(f"{line}: agree within {tolerance * 100:g}%")


def tolerance_of(document: Mapping[str, Any]) -> float:
    gaps = document["comparison"]["gaps"]
    return next(iter(gaps.values()))["tolerance"] if gaps else 0.02


def verdict_lines(document: Mapping[str, Any], *, details: bool = True) -> list[RenderableType]:
    """Per oracle: the factors, the log-gap shares and the verdict (with ``details``, the
    intervals and the populations when they agree); against another run of ours what only two
    runs show; then the step-rate check. Populations that differ, a workload that differs and
    a failed check show with or without ``details``."""
    block = document["comparison"]
    runs = document.get("runs") or {}
    lines: list[RenderableType] = []
    for name, gap in block["gaps"].items():
        lines.extend(gap_lines(gap, details=details))
        covers = population_line(gap)
        found = gap.get("populations") or {}
        if (
            covers is not None
            and gap["acceptance_factor"] is not None
            and (details or not found.get("same"))
        ):
            lines.append(covers)
        lines.extend(matched_lines(block, name, details=details))
        if name in runs:
            lines.extend(runs_lines(runs[name], details=details))
    check = block.get("step_rate_check")
    if check is not None:
        lines.append(step_rate_line(check, tolerance_of(document)))
    return lines


def _measured(gap: Mapping[str, Any] | None) -> bool:
    return gap is not None and gap.get("split") == "measured"


def comparison(document: Mapping[str, Any], *, details: bool = False) -> Group:
    """With ``details`` the sources and the speed splits, then the table and the verdict
    lines, last so that they are what stays on screen."""
    block = document["comparison"]
    parts: list[RenderableType] = []
    if details:
        parts.append(fit(sources_table(block["rows"])))
        for name, split in (block.get("speed") or {}).items():
            modelled = _measured(block["gaps"].get(name))
            parts += [Text(""), *speed_lines(split, modelled=modelled)]
            parts += [
                Text(f"  {line}", "bold") for line in step_split_lines(document, split["oracle"])
            ]
        parts.append(Text(""))
    parts.append(comparison_table(document, details=details))
    if not details:
        parts.extend(note_lines(block["rows"]))
    parts.extend(verdict_lines(document, details=details))
    return Group(*parts)
