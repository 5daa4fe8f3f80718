"""What the first screen shows beside the tables (``fold.present.table``): the flagged legs and
why, the lines that are in no leg, where the counts came from and, with details, the
per-position figures and every line's place; and ``report``, the legs, their flags and the fold
as the terminal and the live view show them.

Every function takes the document ``--json`` writes; nothing here prints."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from fold.folding.result import NEEDS_STEP_LOG, STEP_LOG
from fold.present.table import (
    fold_table,
    from_log,
    index_ranges,
    legs_table,
    percent,
    position_cells,
    untimed,
)
from fold.present.table_layout import fit

FLAGGED_LEGS_EACH = 4
"""Up to this many flagged legs, each gets a line; more get a line per flag, naming the legs and
describing the first of them (``each_leg``: every leg's line). A load test's 50 legs, all
flagged alike, took 150 lines before the fold's table."""


def flag_lines(
    document: dict[str, Any], *, each_leg: bool = False, more: str = ", --details lists each"
) -> Text:
    """The legs marked ``!`` in the table, and why; ``more`` says where every leg's line is
    when they are grouped."""
    text = Text()
    flagged = [leg for leg in document["legs"] if leg["flags"]]
    if each_leg or not flags_grouped(document):
        for leg in flagged:
            text.append(f"leg {leg['index']}! ", style="bold red")
            text.append(", ".join(_describe_flag(flag, leg) for flag in leg["flags"]) + "\n")
        return text
    by_flag: dict[str, list[dict[str, Any]]] = {}
    for leg in flagged:
        for flag in leg["flags"]:
            by_flag.setdefault(flag, []).append(leg)
    for flag, legs in by_flag.items():
        if len(legs) == 1:
            text.append(f"leg {legs[0]['index']}! ", style="bold red")
            text.append(f"{_describe_flag(flag, legs[0])}\n")
            continue
        text.append(f"legs {index_ranges(leg['index'] for leg in legs)}! ", style="bold red")
        text.append(
            f"({len(legs)} legs; leg {legs[0]['index']} shown{more}) "
            f"{_describe_flag(flag, legs[0])}\n"
        )
    return text


def flags_grouped(document: dict[str, Any]) -> bool:
    """Whether ``flag_lines`` groups the flagged legs (more than ``FLAGGED_LEGS_EACH``)."""
    flagged = [leg for leg in document["legs"] if leg["flags"]]
    return len(flagged) > FLAGGED_LEGS_EACH


def _describe_flag(flag: str, leg: dict[str, Any]) -> str:
    if flag == "collapse":
        return "collapse: a window's acceptance fell under half the leg's median window"
    if flag == "request collapse":
        worst = leg["lowest_request"]
        return (
            f"request collapse: request {worst['seq']} of writer {worst['w']} accepted "
            f"{percent(worst['accept_rate'])} over {worst['steps']} steps"
        )
    if flag == "emitted != completion":
        requests, prefill = leg["request_count"], leg["prefill_tokens_per_request"]
        return (
            f"emitted != completion: completion_tokens {leg['completion_tokens']}, but the log's "
            f"verify steps emitted {leg['emitted']} over {requests} request(s), and with "
            f"{prefill} prefill token(s) per request that makes "
            f"{leg['expected_completion_tokens']} (state the engine's count with "
            "--prefill-tokens)"
        )
    if flag == "no steps":
        return "no verify step with a draft in this leg's window"
    return flag


def _rate_or_dash(value: float | None) -> str:
    return "-" if value is None else percent(value)


def distribution_lines(document: dict[str, Any]) -> Text:
    warm = document["warm"]
    text = Text()
    for key, title, show in (
        ("per_position", "warm per-position acceptance (accepted > i)/S: ", percent),
        (
            "per_position_conditional",
            "\nwarm per-position, conditional (accepted > i among accepted > i - 1): ",
            _rate_or_dash,
        ),
        (
            "per_position_of_proposed",
            "\nwarm per-position, of steps that drafted it (accepted > i)/(proposed > i): ",
            _rate_or_dash,
        ),
        ("histogram", "\nwarm histogram, steps accepting exactly j: ", str),
    ):
        text.append(title, style="bold")
        if warm[key] is None:
            text.append(NEEDS_STEP_LOG, style="dim")
        else:
            text.append(position_cells([show(value) for value in warm[key]]))
    text.append(f"\nwarm legs: {index_ranges(warm['legs'])}")
    return text


def source_lines(document: dict[str, Any]) -> Text:
    """Where S, P and A came from, and whether the engine's own counters were checked."""
    text = Text()
    text.append("source: ", style="bold")
    if untimed(document) is not None:
        text.append(
            f"S, P, A per leg and every per-step figure from {document['step_source_text']}; "
            "tok/s, completion tokens and leg windows from the record's legs; cadence: "
            f"{untimed(document)}"
        )
    elif from_log(document):
        text.append(
            "S, P, A per leg and every per-step figure from the step log; tok/s, completion "
            "tokens and leg windows from the record's legs"
        )
    else:
        text.append(
            "S, P, A per leg from the record's counters (spec_drafted_request_steps, "
            "spec_drafts_proposed, spec_drafts_accepted); tok/s, completion tokens and leg "
            "windows from its legs; per position, histogram, shape, requests, cadence and the "
            f"emitted check: {NEEDS_STEP_LOG}"
        )
    if document["counter_check"] is not None:
        text.append("\nengine counters: ", style="bold")
        text.append(document["counter_check"]["summary"])
    return text


def accounting_lines(document: dict[str, Any]) -> Text:
    """Where every line went: nothing is dropped without a count."""
    text = Text()
    text.append("lines: ", style="bold")
    if not from_log(document):
        text.append("no step log given", style="dim")
        return text
    for entry in document["files"]:
        if entry.get("kind") == "engine trace":
            text.append(
                f"\n  {entry['path']} (the engine's trace): {entry['lines']} steps, "
                f"{entry['attributed']} in legs, {entry['unattributed']} after the last run "
                f"line, {entry['run_lines']} run lines, {entry['other_lines']} other log lines, "
                f"{entry['skipped']} skipped"
            )
            continue
        text.append(
            f"\n  {entry['path']}: {entry['lines']} read, {entry['attributed']} in legs, "
            f"{entry['unattributed']} outside every leg, {entry['ambiguous']} ambiguous, "
            f"{entry['torn']} torn, {entry['skipped']} skipped"
        )
    lost = [writer for writer in document["writers"] if writer["lost"]]
    text.append(f"\n  lost (gaps in writer line counters): {document['lost_lines']}")
    for writer in lost[:5]:
        text.append(f"\n    writer {writer['w']} pid {writer['pid']}: {writer['lost']} lost")
    for example in document["skipped_examples"]:
        text.append(f"\n  skipped {example['path']}:{example['line']}: {example['reason']}")
    return text


def line_problems(document: dict[str, Any]) -> Text | None:
    """One line when any line is not in a leg (outside every leg, ambiguous, torn, skipped,
    lost): shown whether or not ``--details`` was asked for, since a lost line is never hidden."""
    if not from_log(document):
        return None
    counts = (
        ("outside every leg", document["unattributed_steps"]),
        ("ambiguous", document["ambiguous_steps"]),
        ("torn", document["torn_lines"]),
        ("skipped", document["skipped_lines"]),
        ("lost", document["lost_lines"]),
    )
    found = [f"{count} {what}" for what, count in counts if count]
    if not found:
        return None
    read = document["lines_read"]
    text = Text()
    text.append("lines not in a leg: ", style="bold yellow")
    text.append(f"{', '.join(found)} of {read} read (--details names files and writers)")
    return text


def report(document: dict[str, Any], *, details: bool = False) -> RenderableType:
    """The legs, their flags and the fold; with ``details`` also the sources, the per-position
    figures and where every line went (without: the lines that are not in a leg, and where the
    counts came from when not from the hook's step log)."""
    parts: list[RenderableType] = [
        fit(legs_table(document), give_way=("shape", "steps/s", "run")),
        flag_lines(document, each_leg=details),
        fit(fold_table(document), give_way=("completion/S",)),
    ]
    if details:
        parts += [source_lines(document), distribution_lines(document), accounting_lines(document)]
        return Group(*parts)
    if document["step_source"] != STEP_LOG:  # counts from elsewhere than the hook's log: say so
        parts.append(source_lines(document))
    if (problems := line_problems(document)) is not None:
        parts.append(problems)
    return Group(*parts)
