"""A record to paste: the fold (and the comparison) as GitHub-flavoured markdown.

Every figure comes from the same ``FoldResult`` (and ``Comparison``) the JSON is written from,
rounded with the table's formats. Nothing here prints or writes; the command line does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fold.compare.comparison import Comparison
from fold.compare.speed import SpeedSplit
from fold.folding.result import NEEDS_STEP_LOG, FoldResult
from fold.inputs.oracles import ArmFigures
from fold.present.cadence import time_cells, where_time_goes
from fold.present.comparison import speed_summary
from fold.present.table import length, percent, rate, sparkline, three_decimals

NOT_RECORDED = "not recorded"


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


def markdown_record(
    result: FoldResult,
    comparison: Comparison | None = None,
    *,
    arm_path: str | None = None,
) -> str:
    """The record; figures with a 95% interval in the JSON carry it as [low, high]."""
    sections = [_heading(result, arm_path)]
    if comparison is not None:
        sections.append(_comparison(comparison, result))
        sections.append(_verdicts(comparison, comparison.speeds))
        if comparison.runs:
            # imported here: that module builds its tables with this one's helpers
            from fold.present.markdown_runs import runs_section

            sections.append(runs_section(comparison.runs))
    sections.append(_folds(result))
    sections.append(_legs(result))
    sections.append(_cadence(result))
    sections.append(_lines(result))
    return "\n\n".join(sections) + "\n"


def _heading(result: FoldResult, arm_path: str | None) -> str:
    about = [f"warm legs: `{result.predicate}` ({', '.join(map(str, result.warm['legs']))})"]
    if arm_path:
        about.insert(0, f"arm record: `{arm_path}`")
    if result.from_log:
        kind = "logs" if result.untimed is None else "the engine's trace (VT_SPEC_TRACE stderr)"
        about.append(f"{kind}: " + ", ".join(f"`{entry['path']}`" for entry in result.files))
    else:
        about.append(
            "logs: none; S, P and A per leg from the record's counters "
            "(`spec_drafted_request_steps`, `spec_drafts_proposed`, `spec_drafts_accepted`); "
            f"per position, histogram, shape, cadence and the emitted check: {NEEDS_STEP_LOG}"
        )
    if result.counter_check is not None:
        about.append(f"engine counters: {result.counter_check['summary']}")
    return "# Acceptance fold\n\n" + "\n".join(f"- {line}" for line in about)


def _source(row: ArmFigures, result: FoldResult) -> str:
    if row.kind == "ours":
        counts = result.step_source if result.from_log else "the record's counters"
        return f"{counts}, warm legs (`{result.predicate}`); tok/s: median of their tok_s"
    parts = [row.kind]
    for key, label in (("tok_s", "tok/s"), ("steps", "S"), ("accepted", "A")):
        source = row.sources.get(key)
        if source:
            parts.append(f"{label}: {source}")
    return "; ".join(parts)


def _comparison(comparison: Comparison, result: FoldResult) -> str:
    intervals = comparison.intervals or {}
    body = []
    for row in comparison.rows:
        found = intervals.get(row.name) or {}
        body.append(
            (
                row.name,
                with_interval(length, row.mean_acceptance_length,
                              found.get("mean_acceptance_length")),
                with_interval(percent, row.accept_rate, found.get("accept_rate")),
                with_interval(three_decimals, row.verify_steps_per_s,
                              found.get("verify_steps_per_s")),
                with_interval(three_decimals, row.output_throughput_tok_s,
                              found.get("output_throughput_tok_s")),
                _source(row, result),
            )
        )  # fmt: skip
    headers = ("engine", "tokens per verify step", "accept rate", "steps/s", "tok/s", "source")
    return (
        "## Comparison\n\n"
        + table(headers, body, (False, True, True, True, True, False))
        + "\n\ntokens per verify step = 1 + A/S (bonus token included); accept rate = A/P; "
        "steps/s = tok/s / tokens per verify step; [low, high]: 95% bootstrap interval over "
        "the arm's legs (none for an arm known only by totals)."
    )


def _verdicts(comparison: Comparison, speeds: Mapping[str, SpeedSplit]) -> str:
    lines = ["## Verdict", ""]
    for name, gap in comparison.gaps.items():
        lines.append(f"- **vs {name}**: {gap.verdict}")
        found = gap.intervals
        if gap.ratio is not None and found is not None and found.ratio is not None:
            factors = [("r", gap.ratio, found.ratio)]
            if found.acceptance_factor is not None and found.speed_factor is not None:
                factors += [
                    ("acceptance factor", gap.acceptance_factor, found.acceptance_factor),
                    ("speed factor", gap.speed_factor, found.speed_factor),
                ]
            basis = "both arms" if found.from_both_arms else "ours only, or mixed"
            lines.append(
                f"  - 95% intervals ({basis}): "
                + "; ".join(
                    f"{label} {with_interval(three_decimals, value, interval)}"
                    for label, value, interval in factors
                )
            )
        split = speeds.get(name)
        if split is None:
            continue
        if split.leg_factor is not None:
            whose = "our" if split.other_shares is None else "both runs'"
            lines.append(
                f"  - speed factor {three_decimals(split.leg_factor)} over leg windows, "
                f"{three_decimals(split.decode_factor, NOT_RECORDED)} over {whose} decode "
                f"windows, {three_decimals(split.steady_factor, NOT_RECORDED)} over {whose} "
                "steady decoding"
            )
        summary = speed_summary(split)
        if summary is not None:
            lines.append(f"  - {summary} (shares of the speed factor's log)")
        lines.extend(f"  - {lack}" for lack in split.oracle_lacks)
    check = comparison.step_check
    if comparison.measured_steps_per_s is not None and check.expected is not None:
        lines.append(
            f"- our verify steps/s: {three_decimals(comparison.measured_steps_per_s)} measured, "
            f"{three_decimals(check.expected)} from tok/s / tokens per verify step"
        )
    return "\n".join(lines)


def _folds(result: FoldResult) -> str:
    headers = ("fold", "legs", "S", "P", "A", "A/P", "1+A/S", "tok/s", "completion/S", "steps/s")
    body = [
        (
            name,
            len(fold["legs"]),
            fold["steps"],
            fold["proposed"],
            fold["accepted"],
            with_interval(percent, fold["accept_rate"], fold.get("accept_rate_ci")),
            with_interval(length, fold["mean_acceptance_length"],
                          fold.get("mean_acceptance_length_ci")),
            with_interval(three_decimals, fold["output_throughput_tok_s"],
                          fold.get("output_throughput_tok_s_ci")),
            with_interval(length, fold["completion_tokens_per_step"],
                          fold.get("completion_tokens_per_step_ci")),
            with_interval(rate, fold["step_rate"], fold.get("step_rate_ci")),
        )
        for name, fold in (("warm", result.warm), ("all", result.all))
    ]  # fmt: skip
    note = ""
    if result.bootstrap is not None and result.bootstrap["resamples"]:
        note = (
            f"\n\n[low, high]: 95% interval ({result.bootstrap['method']}; "
            f"{result.bootstrap['resamples']} resamples, seed {result.bootstrap['seed']})."
        )
    return "## Fold\n\n" + table(headers, body, (False, *[True] * 9)) + note


def _legs(result: FoldResult) -> str:
    headers = ("leg", "run", "warm", "tok/s", "S", "P", "A", "A/P", "1+A/S", "steps/s", "shape",
               "flags")  # fmt: skip
    body = [
        (
            leg["index"],
            leg["run"],
            "yes" if leg["warm"] else "no",
            rate(leg["tok_s"]),
            leg["steps"],
            leg["proposed"],
            leg["accepted"],
            percent(leg["accept_rate"]),
            length(leg["mean_acceptance_length"]),
            rate(leg["step_rate"]),
            _shape(leg["windows"]),
            ", ".join(leg["flags"]),
        )
        for leg in result.legs
    ]
    return (
        "## Legs\n\n"
        + table(headers, body, (True, True, False, *[True] * 7, False, False))
        + "\n\nshape: acceptance per window of steps, 0-100% scale."
    )


def _shape(windows: list[dict[str, Any]] | None) -> str:
    if windows is None:
        return NEEDS_STEP_LOG
    return f"`{sparkline(windows)}`" if windows else ""


def _cadence_row(name: Any, cadence: dict[str, Any]) -> tuple[Any, ...]:
    return (
        name,
        cadence["requests"],
        *time_cells(cadence),
        with_interval(rate, cadence["decode_steps_per_s"], cadence.get("decode_steps_per_s_ci"))
        if cadence["decode_steps_per_s"] is not None
        else rate(None),
        rate(cadence["median"]["decode_steps_per_s"]),
    )


def _cadence(result: FoldResult) -> str:
    if result.warm["cadence"] is None:
        return f"## Cadence\n\n{result.no_times()}."
    headers = ("leg", "requests", "first step", "decode", "tail", "p50", "p90", "p99", "max",
               "stalls", "stall", "decode steps/s", "median request")  # fmt: skip
    body = [_cadence_row(leg["index"], leg["cadence"]) for leg in result.legs]
    body.append(_cadence_row("warm", result.warm["cadence"]))
    return (
        "## Cadence\n\n"
        + table(headers, body, [True] * len(headers))
        + "\n\nfirst step, decode, tail, stall: per request, mean; p50..max: intervals between "
        f"a request's steps; stalls: intervals over {result.stall_factor:g}x their request's "
        "median; decode steps/s: steps after the first over decode time, pooled and for the "
        f"median request.\n\nwarm leg time: {where_time_goes(result.warm['cadence'])}."
    )


def _lines(result: FoldResult) -> str:
    if not result.from_log:
        return "## Lines\n\nno step log given."
    read = sum(entry["lines"] for entry in result.files)
    attributed = sum(entry["attributed"] for entry in result.files)
    return (
        f"## Lines\n\n{read} read, {attributed} in legs, {result.unattributed_steps} outside "
        f"every leg, {result.ambiguous_steps} ambiguous, {result.torn_lines} torn, "
        f"{result.skipped_lines} skipped, {result.lost_lines} lost."
    )
