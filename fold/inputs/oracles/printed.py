"""Figures read off log lines the engines print (vLLM's and llama.cpp's acceptance lines): A
and P summed exactly over the lines, and S pinned by the two-decimal mean acceptance length
each line prints."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from fold.errors import InputError, RefusedError
from fold.inputs import limits
from fold.inputs.oracles.count_checks import ENGINE_MISCOUNTS, check_acceptance_length
from fold.inputs.oracles.figures import ORACLE_COUNT_WHAT_TO_DO

_PRINTED_HALF_UNIT = 0.005  # the engines print mean acceptance lengths with two decimals


@dataclass(frozen=True)
class PrintedSums:
    """A and P summed over log lines, and S where every line's printed length pins a range."""

    accepted: int
    proposed: int
    lines: int
    steps: int | None
    bounds: dict[str, float]


def sum_printed_lines(
    text: str,
    pattern: re.Pattern[str],
    groups: tuple[int | str, int | str, int | str],
    where: str,
    *,
    marker: str,
    fields: tuple[str, str],
    no_fit: str,
) -> PrintedSums:
    """Every line of ``text`` that holds ``marker`` (the engine's words that begin its line),
    read by ``pattern``, its ``groups`` being A, P and the mean acceptance length as printed,
    each captured whatever it holds so that a value of the wrong kind is refused by ``limits``
    (``WrongKind``), never passed over; a marked line ``pattern`` cannot read is malformed
    (exit 2), and a mean acceptance length below 1 is refused as in every source. A and P are
    summed exactly; S is the middle of the summed ranges of whole step counts whose
    ``1 + A/S`` rounds to each printed length, with the distance to either end as its bound
    (None when a line accepted nothing: any S fits it). A line with A > P is refused by the
    step rule (``limits.check_accepted``), its counts named by ``fields``, (A, P) as the engine
    prints them; ``no_fit`` words the refusal of a line no whole S fits, in the engine's own
    terms (``{a}``, ``{p}`` and ``{length}`` filled in)."""
    accepted = proposed = count = low = high = 0
    steps_known = True
    for lineno, line in enumerate(text.splitlines(), start=1):
        if marker not in line:
            continue
        match = pattern.search(line)
        if match is None:
            raise InputError(
                f"{where}:{lineno}: a {marker!r} line that cannot be read "
                f"({line if len(line) <= 80 else line[:80] + '...'}); "
                "give the engine's lines as printed"
            )
        a, p = (
            limits.decimal_count(match[group], f"{where}:{lineno}", field, ORACLE_COUNT_WHAT_TO_DO)
            for group, field in zip(
                groups[:2], ("accepted tokens (A)", "draft tokens (P)"), strict=True
            )
        )
        length = match[groups[2]]
        printed_length = limits.printed_number(
            length, f"{where}:{lineno}", "mean acceptance length", "give the lines as printed"
        )
        check_acceptance_length(f"{where}:{lineno}", "mean acceptance length", printed_length)
        totals = ((fields[1], p), (fields[0], a))
        limits.check_accepted(f"{where}:{lineno}", totals, ENGINE_MISCOUNTS)
        accepted, proposed, count = accepted + a, proposed + p, count + 1
        found = steps_range(a, p, printed_length, _PRINTED_HALF_UNIT)
        if found is None:
            steps_known = False
            continue
        if found[0] > found[1]:
            raise RefusedError(f"{where}:{lineno}: " + no_fit.format(a=a, p=p, length=length))
        low, high = low + found[0], high + found[1]
    if not (steps_known and count):
        return PrintedSums(accepted, proposed, count, None, {})
    steps = (low + high) // 2
    bounds = {"steps": float(max(steps - low, high - steps))} if high > low else {}
    return PrintedSums(accepted, proposed, count, steps, bounds)


def steps_range(
    accepted: int, proposed: int, length: float, half_unit: float
) -> tuple[int, int] | None:
    """The whole step counts S (at most ``proposed``) for which ``1 + accepted/S`` rounds to a
    printed mean acceptance length; None when any S would (nothing accepted), ``(1, 0)``
    (empty) when none does."""
    if accepted == 0 or length - 1 - half_unit <= 0:
        return None
    low = math.ceil(accepted / (length - 1 + half_unit) - 1e-9)
    high = min(proposed, math.floor(accepted / (length - 1 - half_unit) + 1e-9))
    return low, high
