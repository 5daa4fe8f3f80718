"""A record to paste: the fold (and the comparison) as GitHub-flavoured markdown.

Every figure comes from the fold's JSON document (the dict ``--json`` writes), rounded with the
table's formats, so a saved ``--json`` file gives the same record. Nothing here prints or
writes; the command line does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fold.compare.gap_intervals import BOTH_ARMS
from fold.folding.result import NEEDS_STEP_LOG, STEP_LOG
from fold.present.another_k import another_k_markdown
from fold.present.cadence import time_cells, where_time_goes
from fold.present.markdown_runs import runs_section
from fold.present.markdown_table import table, with_interval
from fold.present.matched import matched_markdown
from fold.present.matched_arms import matched_arm_markdown
from fold.present.measured_split import factors_text, gap_texts, intervals_text, measured_of
from fold.present.per_request import markdown_section
from fold.present.speed import speed_summary
from fold.present.step_figures import has_step_figures, step_figures_markdown
from fold.present.step_split import step_split_lines, step_split_markdown
from fold.present.table import (
    NOT_RECORDED,
    from_log,
    index_ranges,
    length,
    no_times,
    percent,
    rate,
    sparkline,
    three_decimals,
)


def markdown_record(document: dict[str, Any], *, arm_path: str | None = None) -> str:
    """The record of the fold's JSON ``document``; figures with a 95% interval in it carry it
    as [low, high]. ``arm_path`` names the arm record in the heading."""
    sections = [_heading(document, arm_path)]
    if document.get("comparison") is not None:
        sections.append(_comparison(document))
        sections.append(_verdicts(document))
        if document.get("runs"):
            sections.append(runs_section(document["runs"]))
        if has_step_figures(document):
            sections.append(step_figures_markdown(document))
    sections.append(_folds(document))
    matched = matched_markdown(document)
    if matched is not None:
        sections.append(matched)
    sections.append(_legs(document))
    sections.append(_cadence(document))
    if (cut := another_k_markdown(document)) is not None:
        sections.append(cut)
    if (per_request := markdown_section(document)) is not None:
        sections.append(per_request)
    sections.append(step_split_markdown(document))
    sections.append(_lines(document))
    return "\n\n".join(sections) + "\n"


def _heading(document: dict[str, Any], arm_path: str | None) -> str:
    warm = document["warm"]
    about = [f"warm legs: `{document['predicate']}` ({index_ranges(warm['legs'])})"]
    if arm_path:
        about.insert(0, f"arm record: `{arm_path}`")
    if from_log(document):
        kind = "logs" if document["step_source"] == STEP_LOG else document["step_source_text"]
        about.append(f"{kind}: " + ", ".join(f"`{entry['path']}`" for entry in document["files"]))
    else:
        about.append(
            "logs: none; S, P and A per leg from the record's counters "
            "(`spec_drafted_request_steps`, `spec_drafts_proposed`, `spec_drafts_accepted`); "
            f"per position, histogram, shape, cadence and the emitted check: {NEEDS_STEP_LOG}"
        )
    if document["counter_check"] is not None:
        about.append(f"engine counters: {document['counter_check']['summary']}")
    return "# Acceptance fold\n\n" + "\n".join(f"- {line}" for line in about)


def _source(row: Mapping[str, Any], document: dict[str, Any]) -> str:
    if row["kind"] == "ours":
        counts = document["step_source_text"]
        return f"{counts}, warm legs (`{document['predicate']}`); tok/s: median of their tok_s"
    parts = [row["kind"]]
    for key, label in (("tok_s", "tok/s"), ("steps", "S"), ("accepted", "A")):
        source = row["sources"].get(key)
        if source:
            parts.append(f"{label}: {source}")
    return "; ".join(parts)


def _comparison(document: dict[str, Any]) -> str:
    body = [
        (
            row["name"],
            with_interval(length, row["mean_acceptance_length"],
                          row.get("mean_acceptance_length_ci")),
            with_interval(percent, row["accept_rate"], row.get("accept_rate_ci")),
            with_interval(three_decimals, row["verify_steps_per_s"],
                          row.get("verify_steps_per_s_ci")),
            with_interval(three_decimals, row["output_throughput_tok_s"],
                          row.get("output_throughput_tok_s_ci")),
            _source(row, document),
        )
        for row in document["comparison"]["rows"]
    ]  # fmt: skip
    headers = ("engine", "tokens per verify step", "accept rate", "steps/s", "tok/s", "source")
    return (
        "## Comparison\n\n"
        + table(headers, body, (False, True, True, True, True, False))
        + "\n\ntokens per verify step = 1 + A/S (bonus token included); accept rate = A/P; "
        "steps/s = tok/s / tokens per verify step; [low, high]: 95% bootstrap interval over "
        "the arm's legs (none for an arm known only by totals)."
    )


def _verdicts(document: dict[str, Any]) -> str:
    block = document["comparison"]
    speeds = block.get("speed") or {}
    lines = ["## Verdict", ""]
    for name, gap in block["gaps"].items():
        lines.append(f"- **vs {name}**: {gap['verdict']}")
        measured = measured_of(gap)
        if measured is not None:
            lines.append(f"  - {factors_text(gap)}")
            spread = intervals_text(measured)
            lines.extend([] if spread is None else [f"  - {spread}"])
        lines.extend(f"  - {text}" for text in gap_texts(gap, details=True))
        lines.extend(matched_arm_markdown(block, name))
        basis = gap.get("ci_basis") or {}
        if measured is None and gap["ratio"] is not None and basis and gap["ratio_ci"] is not None:
            factors = [("r", gap["ratio"], gap["ratio_ci"])]
            if gap["acceptance_factor_ci"] is not None and gap["speed_factor_ci"] is not None:
                factors += [
                    ("acceptance factor", gap["acceptance_factor"], gap["acceptance_factor_ci"]),
                    ("speed factor", gap["speed_factor"], gap["speed_factor_ci"]),
                ]
            both = all(value == BOTH_ARMS for value in basis.values())
            lines.append(
                f"  - 95% intervals ({'both arms' if both else 'ours only, or mixed'}): "
                + "; ".join(
                    f"{label} {with_interval(three_decimals, value, interval)}"
                    for label, value, interval in factors
                )
            )
        split = speeds.get(name)
        if split is None:
            continue
        # a gap split by measurement: this speed factor is the model's, and is named so
        model = "modelled " if gap.get("split") == "measured" else ""
        if split["leg_factor"] is not None:
            whose = "our" if split.get("other_shares") is None else "both runs'"
            lines.append(
                f"  - {model}speed factor {three_decimals(split['leg_factor'])} over leg windows, "
                f"{three_decimals(split['decode_factor'], NOT_RECORDED)} over {whose} decode "
                f"windows, {three_decimals(split['steady_factor'], NOT_RECORDED)} over {whose} "
                "steady decoding"
            )
        summary = speed_summary(split)
        if summary is not None:
            lines.append(f"  - {summary} (shares of the {model}speed factor's log)")
        lines.extend(f"  - {lack}" for lack in split["oracle_lacks"])
        lines.extend(f"  - {line}" for line in step_split_lines(document, split["oracle"]))
    check = block.get("step_rate_check") or {}
    if check.get("measured_steps_per_s") is not None and check.get("expected_steps_per_s"):
        lines.append(
            f"- our verify steps/s: {three_decimals(check['measured_steps_per_s'])} measured, "
            f"{three_decimals(check['expected_steps_per_s'])} from tok/s / tokens per verify step"
        )
    return "\n".join(lines)


def _folds(document: dict[str, Any]) -> str:
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
        for name, fold in (("warm", document["warm"]), ("all", document["all"]))
    ]  # fmt: skip
    note = ""
    bootstrap = document.get("bootstrap")
    if bootstrap is not None and bootstrap["resamples"]:
        note = (
            f"\n\n[low, high]: 95% interval ({bootstrap['method']}; "
            f"{bootstrap['resamples']} resamples, seed {bootstrap['seed']})."
        )
    return "## Fold\n\n" + table(headers, body, (False, *[True] * 9)) + note


def _legs(document: dict[str, Any]) -> str:
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
            _shape(leg["window_pools"]),
            ", ".join(leg["flags"]),
        )
        for leg in document["legs"]
    ]
    return (
        "## Legs\n\n"
        + table(headers, body, (True, True, False, *[True] * 7, False, False))
        + "\n\nshape: acceptance per window of steps, 0-100% scale."
    )


def _shape(pools: dict[str, Any] | None) -> str:
    if pools is None:
        return NEEDS_STEP_LOG
    return f"`{sparkline(pools['shape'])}`" if pools["shape"]["steps"] else ""


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


def _cadence(document: dict[str, Any]) -> str:
    if document["warm"]["cadence"] is None:
        return f"## Cadence\n\n{no_times(document)}."
    headers = ("leg", "requests", "first step", "decode", "tail", "p50", "p90", "p99", "max",
               "stalls", "stall", "decode steps/s", "median request")  # fmt: skip
    body = [_cadence_row(leg["index"], leg["cadence"]) for leg in document["legs"]]
    body.append(_cadence_row("warm", document["warm"]["cadence"]))
    return (
        "## Cadence\n\n"
        + table(headers, body, [True] * len(headers))
        + "\n\nfirst step, decode, tail, stall: per request, mean; p50..max: intervals between "
        f"a request's steps; stalls: intervals over {document['stall_factor']:g}x their request's "
        "median; decode steps/s: steps after the first over decode time, pooled and for the "
        f"median request.\n\nwarm leg time: {where_time_goes(document['warm']['cadence'])}."
    )


def _lines(document: dict[str, Any]) -> str:
    if not from_log(document):
        return "## Lines\n\nno step log given."
    read = document["lines_read"]
    attributed = document["lines_attributed"]
    return (
        f"## Lines\n\n{read} read, {attributed} in legs, {document['unattributed_steps']} "
        f"outside every leg, {document['ambiguous_steps']} ambiguous, {document['torn_lines']} "
        f"torn, {document['skipped_lines']} skipped, {document['lost_lines']} lost."
    )
