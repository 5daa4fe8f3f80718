"""The side-by-side comparison of our arm and the oracles, as rich renderables (never printed).

One row per engine, ours first, all acceptance figures in one unit (``1 + A/S`` and ``A/P``);
SGLang's own per-request unit sits in a separate, labelled column. A figure that cannot be
had reads "not recorded", never 0. The table fits 80 columns: the source text folds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fold.compare.gap import NO_GAP, SGLANG_UNIT, GapAttribution, StepRateCheck
from fold.compare.gap_intervals import BOTH_ARMS, OURS_ONLY, SplitIntervals
from fold.compare.our_runs import RunsComparison
from fold.compare.speed import SpeedSplit
from fold.folding.uncertainty import Interval
from fold.inputs.oracles import (
    ALL_LEGS,
    INTERVAL,
    LAST_INTERVAL,
    REQUESTS,
    SINCE_START,
    WARM_LEGS,
    ArmFigures,
)
from fold.present.fit import Fitted, fit
from fold.present.runs import runs_lines
from fold.present.table import length, percent, plus_minus, three_decimals

NOT_RECORDED = "not recorded"


def fmt_tok_s(value: float | None) -> str:
    return three_decimals(value, NOT_RECORDED)


def fmt_rate(value: float | None) -> str:
    return percent(value, NOT_RECORDED)


def fmt_length(value: float | None) -> str:
    return length(value, NOT_RECORDED)


fmt_steps_per_s = fmt_factor = fmt_tok_s


def fmt_share(value: float | None) -> str:
    """A share as a whole percentage; a rounded zero never shows as "-0%"."""
    return NOT_RECORDED if value is None else f"{round(value * 100) + 0}%"


def _cell(text: str) -> Text:
    return Text(text, style="dim italic") if text == NOT_RECORDED else Text(text)


# Short names for what an arm's counters cover (the full wording is in the sources table).
POPULATION_LABELS = {
    WARM_LEGS: "warm legs",
    ALL_LEGS: "all legs",
    INTERVAL: "2 scrapes",
    SINCE_START: "since start",
    REQUESTS: "requests",
    LAST_INTERVAL: "last log",
}


def _approx(text: str, bound: float | None) -> str:
    """A figure from rounded counters is marked ≈ (its bound is in the notes)."""
    return text if bound is None or text == NOT_RECORDED else f"≈{text}"


def comparison_table(
    rows: Sequence[ArmFigures],
    gaps: Mapping[str, GapAttribution] | None = None,
    intervals: Mapping[str, Mapping[str, Interval | None]] | None = None,
) -> Fitted:
    """One row per arm in the order given (put ours first), then one ratio row per oracle.

    ``gaps`` maps an oracle's name to its attribution against ours. Its ratio row
    ("ours/ORACLE") puts each factor under the column it divides: r under tok/s, the acceptance
    factor under the length it compares (mean len, or SGLang len* when the split is in SGLang's
    unit), the speed factor under verify steps/s. With ``intervals`` (per arm row, as
    ``fold.compare.comparison.Comparison.intervals``), a ``±`` row under each arm and ratio gives
    its 95% intervals, or says why it has none. Figures never wrap or get cut: at narrow widths the
    population column goes first, then the table turns vertical.
    """
    gaps = gaps or {}
    caption = (
        "mean len = 1 + A/S (bonus token included); rate = A/P; steps/s = tok/s / mean "
        "len. SGLang len* is SGLang's own unit (completion tokens per verify, prefill token "
        "included): not comparable with mean len. covers = what the acceptance counters "
        "count; ≈ = from rounded counters."
    )
    if intervals is not None:
        caption += (
            " ±: 95% bootstrap interval over the arm's legs, the larger distance to either end "
            "(totals: the arm is known only by its totals, so it has none; 1 leg: one leg "
            "says nothing of the spread); ± both: both arms resampled; ± ours: ours only, the "
            "oracle taken as exact; ± mixed: r from both arms, the factors from ours only."
        )
    table = Table(
        title="Throughput and acceptance in one unit",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    # Names and labels keep their width while they fit; "not recorded" may wrap, figures never.
    longest_name = max((len(row.name) for row in rows), default=6)
    table.add_column("engine", overflow="fold", min_width=min(longest_name, 10))
    table.add_column("covers", overflow="fold")
    for header in ("tok/s (warm)", "mean len (1+A/S)", "rate (A/P)", "verify steps/s",
                   "SGLang len*"):  # fmt: skip
        table.add_column(header, justify="right", overflow="fold")
    for row in rows:
        table.add_row(
            Text(row.name, style="bold"),
            Text(POPULATION_LABELS.get(row.population or "", row.population or "")),
            _cell(fmt_tok_s(row.output_throughput_tok_s)),
            _cell(
                _approx(fmt_length(row.mean_acceptance_length), row.mean_acceptance_length_bound)
            ),
            _cell(_approx(fmt_rate(row.accept_rate), row.accept_rate_bound)),
            _cell(fmt_steps_per_s(row.verify_steps_per_s)),
            _cell(fmt_length(row.completion_tokens_per_step)),
        )
        if intervals is not None:
            _arm_interval_row(table, row, intervals.get(row.name))
    arm_rows = len(table.rows)
    first = True
    for gap in gaps.values():
        split = gap.ratio is not None and gap.acceptance_factor is not None
        factor = _cell(fmt_factor(gap.acceptance_factor) if split else NOT_RECORDED)
        in_sglang_unit = gap.unit == SGLANG_UNIT
        table.add_row(
            Text(f"ours/{gap.oracle}", style="italic"),
            Text(""),
            _cell(fmt_factor(gap.ratio)),
            Text("") if in_sglang_unit else factor,
            Text(""),
            _cell(fmt_factor(gap.speed_factor) if split else NOT_RECORDED),
            factor if in_sglang_unit else Text(""),
            end_section=False,
        )
        found = gap.intervals
        if found is not None and found.basis:
            spread = Text(
                plus_minus(gap.acceptance_factor, found.acceptance_factor, "three_decimals"),
                style="dim",
            )
            table.add_row(
                Text(_ratio_label(found), style="dim"),
                Text(""),
                Text(plus_minus(gap.ratio, found.ratio, "three_decimals"), style="dim"),
                Text("") if in_sglang_unit else spread,
                Text(""),
                Text(plus_minus(gap.speed_factor, found.speed_factor, "three_decimals"), "dim"),
                spread if in_sglang_unit else Text(""),
            )
        if first:
            # a rule between the arms and the ratio rows
            table.rows[arm_rows - 1].end_section = True
            first = False
    return fit(table, give_way=("covers",))


def _arm_interval_row(
    table: Table, row: ArmFigures, found: Mapping[str, Interval | None] | None
) -> None:
    """The ``±`` row under an arm: its 95% intervals, or why it has none."""
    if found is None or not any(found.values()):
        why = "totals" if found is None else "1 leg"
        table.add_row(
            Text("  ±", style="dim"), Text(""), Text(why, style="dim italic"), *[Text("")] * 4
        )
        return
    cells = [
        plus_minus(
            row.output_throughput_tok_s, found.get("output_throughput_tok_s"), "three_decimals"
        ),
        plus_minus(row.mean_acceptance_length, found.get("mean_acceptance_length"), "length"),
        plus_minus(row.accept_rate, found.get("accept_rate"), "percent"),
        plus_minus(row.verify_steps_per_s, found.get("verify_steps_per_s"), "three_decimals"),
        plus_minus(
            row.completion_tokens_per_step, found.get("completion_tokens_per_step"), "length"
        ),
    ]
    table.add_row(Text("  ±", style="dim"), Text(""), *[Text(cell, style="dim") for cell in cells])


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
_DERIVED = {"mean_acceptance_length": "1 + A/S", "accept_rate": "A/P"}


def sources_table(rows: Sequence[ArmFigures]) -> Table:
    """Where each figure of each arm came from (counter or field), or why it is missing."""
    table = Table(title="Sources", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("engine", overflow="fold")
    table.add_column("figure", no_wrap=True)
    table.add_column("source", overflow="fold", ratio=1)
    for row in rows:
        name = row.name
        if row.population:
            covers = row.population + (
                f": {row.population_detail}" if row.population_detail else ""
            )
            table.add_row(Text(name, style="bold"), "covers", Text(covers))
            name = ""
        for key, label in _FIGURE_LABELS:
            source = row.sources.get(key)
            if source is None:
                continue
            if _DERIVED.get(key) == source:
                continue  # derived as always; only another origin is worth a line
            style = "dim" if source.startswith(NOT_RECORDED) else ""
            table.add_row(Text(name, style="bold"), label, Text(source, style=style))
            name = ""
        for note in row.notes:
            table.add_row(Text(name, style="bold"), "note", Text(note, style="yellow"))
            name = ""
        if row is not rows[-1]:
            table.rows[-1].end_section = True
    return table


def gap_lines(gap: GapAttribution) -> list[Text]:
    """The factors of one attribution and its verdict, as lines."""
    head = Text(f"vs {gap.oracle}: ", style="bold")
    if gap.ratio is None:
        return [head + Text(gap.verdict)]
    factors = Text(
        f"r = {gap.ours}/{gap.oracle} tok/s = {fmt_factor(gap.ratio)} = acceptance "
        f"{fmt_factor(gap.acceptance_factor)} x speed {fmt_factor(gap.speed_factor)}"
    )
    lines = [head + factors]
    found = gap.intervals
    if found is not None and found.ratio is not None:
        basis = _basis_text(found, gap.oracle)
        parts = [f"r {_bracket(found.ratio)}"]
        if found.acceptance_factor is not None and found.speed_factor is not None:
            parts += [
                f"acceptance {_bracket(found.acceptance_factor)}",
                f"speed {_bracket(found.speed_factor)}",
            ]
        lines.append(Text(f"  95% intervals ({basis}):", style="dim"))
        lines.append(Text("    " + "  ".join(parts), style="dim"))
    if (
        gap.acceptance_share is not None
        and gap.speed_share is not None
        and gap.dominant != NO_GAP  # near r = 1 the shares are large and mean nothing
    ):
        lines.append(
            Text(
                f"  share of the log-gap: acceptance {fmt_share(gap.acceptance_share)}, "
                f"speed {fmt_share(gap.speed_share)}"
            )
        )
    style = "bold" if gap.dominant is not None else "yellow"
    lines.append(Text("  verdict: ", style="bold") + Text(gap.verdict, style=style))
    return lines


_FACTOR_NAMES = {"ratio": "r", "acceptance_factor": "acceptance", "speed_factor": "speed"}


def _basis_text(found: SplitIntervals, oracle: str) -> str:
    """What the intervals rest on: both arms' legs, ours alone, or each factor its own."""
    if found.from_both_arms:
        return "both arms"
    if BOTH_ARMS not in found.basis.values():
        return f"ours only: {oracle} by totals"
    names = {basis: [_FACTOR_NAMES[f] for f, b in found.basis.items() if b == basis]
             for basis in (BOTH_ARMS, OURS_ONLY)}  # fmt: skip
    return (
        f"{BOTH_ARMS} for {', '.join(names[BOTH_ARMS])}; {OURS_ONLY} for "
        f"{', '.join(names[OURS_ONLY])}: {oracle}'s length is a total"
    )


def _ratio_label(found: SplitIntervals) -> str:
    if found.from_both_arms:
        return "  ± both"
    return "  ± mixed" if BOTH_ARMS in found.basis.values() else "  ± ours"


def _bracket(interval: Interval) -> str:
    return f"[{fmt_factor(interval[0])}, {fmt_factor(interval[1])}]"


def population_line(ours: ArmFigures | None, oracle: ArmFigures | None) -> Text | None:
    """Whether both sides' acceptance counters cover the same requests."""
    if ours is None or oracle is None or not ours.population or not oracle.population:
        return None
    if ours.population == oracle.population:
        return Text(
            f"  both sides' acceptance counts cover {_COVERS.get(ours.population)}", style="dim"
        )
    return Text(
        f"  populations differ: {ours.name} counts {_COVERS.get(ours.population)}, "
        f"{oracle.name} {_COVERS.get(oracle.population, oracle.population)} "
        f"({oracle.population_detail}); the acceptance factor compares them as they are",
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


def step_rate_line(
    measured_steps_per_s: float | None, check: StepRateCheck, tolerance: float
) -> Text:
    """Our measured verify-step rate against tok/s / mean acceptance length."""
    if measured_steps_per_s is None:
        return Text("our verify steps/s: not recorded (the steps carry no timestamps)", "dim")
    if check.expected is None or check.relative_diff is None:
        return Text(
            f"our verify steps/s measured {measured_steps_per_s:.3f}; tok/s / mean acceptance "
            "length not recorded, so it cannot be checked",
            "dim",
        )
    line = (
        f"our verify steps/s measured {measured_steps_per_s:.3f}, tok/s / mean acceptance "
        f"length gives {check.expected:.3f} ({check.relative_diff * 100:+.1f}%)"
    )
    if check.flagged:
        return Text(
            f"{line}: disagree beyond {tolerance * 100:g}%, so prefill or stalls take a share "
            "of the time the acceptance x speed split does not see",
            "bold yellow",
        )
    return Text(f"{line}: agree within {tolerance * 100:g}%")


_PART_LABELS = {"before_first_step": "start-up", "stalls": "stalls", "tail": "tail",
                "rest": "rest (median tok/s against the steps' times)"}  # fmt: skip


def speed_summary(split: SpeedSplit) -> str | None:
    """'speed: 70% slower steps, 30% start-up, 0% stalls, 0% tail', largest part first."""
    if split.parts is None:
        return None
    slower = split.steady_factor is not None and split.steady_factor < 1
    labels = {"steps": "slower steps" if slower else "faster steps", **_PART_LABELS}
    phrases = []
    for name, part in sorted(split.parts.items(), key=lambda item: -item[1]):
        share = round(abs(part) * 100)
        phrases.append(
            f"{share}% {labels[name]}" if part >= 0 else f"{labels[name]} offset {share}%"
        )
    return "speed: " + ", ".join(phrases)


def speed_table(split: SpeedSplit) -> Fitted:
    """The speed factor over leg windows, our decode windows and our steady decoding, beside
    our shares of warm leg time outside steady decoding (the oracle records none of its own;
    another run of ours does, and gets a row of its own shares)."""
    both = split.other_shares is not None
    table = Table(
        title=f"speed factor vs {split.oracle}, and "
        + ("both runs' warm leg time" if both else "our warm leg time"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
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
    factors = [_cell(fmt_factor(split.leg_factor)), _cell(fmt_factor(split.decode_factor)),
               _cell(fmt_factor(split.steady_factor))]  # fmt: skip
    shares = split.shares
    table.add_row(
        *([Text("ours")] if both else []),
        *factors,
        *(_cell(fmt_rate(shares[name])) for name in outside),
    )
    if split.other_shares is not None:
        table.add_row(
            Text(split.oracle),
            *[Text("")] * 3,
            *(_cell(fmt_rate(split.other_shares[name])) for name in outside),
        )
    return fit(table)


def speed_lines(split: SpeedSplit) -> list[RenderableType]:
    """Under an oracle's verdict: the speed factor one level deeper, the split of its log into
    slower steps and time outside steady decoding, and what the oracle does not record."""
    lines: list[RenderableType] = [speed_table(split)]
    summary = speed_summary(split)
    if summary is not None:
        lines.append(Text("  " + summary + " (shares of the speed factor's log)", "bold"))
    lines.extend(Text(f"  {lack}", style="dim") for lack in split.oracle_lacks)
    return lines


def verdict_lines(
    gaps: Mapping[str, GapAttribution],
    *,
    rows: Sequence[ArmFigures] = (),
    measured_steps_per_s: float | None = None,
    step_check: StepRateCheck | None = None,
    tolerance: float | None = None,
    speeds: Mapping[str, SpeedSplit] | None = None,
    runs: Mapping[str, RunsComparison] | None = None,
) -> list[RenderableType]:
    """Per oracle: the factors, the log-gap shares, the verdict and, with ``speeds``, the speed
    split under it (and, against another run of ours, ``runs``); then the step-rate check."""
    lines: list[RenderableType] = []
    by_name = {row.name: row for row in rows}
    for name, gap in gaps.items():
        lines.extend(gap_lines(gap))
        covers = population_line(by_name.get(gap.ours), by_name.get(gap.oracle))
        if covers is not None and gap.acceptance_factor is not None:
            lines.append(covers)
        split = (speeds or {}).get(name)
        if split is not None:
            lines.extend(speed_lines(split))
        found = (runs or {}).get(name)
        if found is not None:
            lines.extend(runs_lines(found))
    if step_check is not None:
        tol = tolerance
        if tol is None:
            tol = next(iter(gaps.values())).tolerance if gaps else 0.02
        lines.append(step_rate_line(measured_steps_per_s, step_check, tol))
    return lines


def comparison(
    rows: Sequence[ArmFigures],
    gaps: Mapping[str, GapAttribution],
    *,
    measured_steps_per_s: float | None = None,
    step_check: StepRateCheck | None = None,
    intervals: Mapping[str, Mapping[str, Interval | None]] | None = None,
    speeds: Mapping[str, SpeedSplit] | None = None,
    runs: Mapping[str, RunsComparison] | None = None,
) -> Group:
    """The table, the sources and the verdict lines together, ready for ``Console.print``."""
    return Group(
        comparison_table(rows, gaps, intervals),
        fit(sources_table(rows)),
        *verdict_lines(
            gaps,
            rows=rows,
            measured_steps_per_s=measured_steps_per_s,
            step_check=step_check,
            speeds=speeds,
            runs=runs,
        ),
    )
