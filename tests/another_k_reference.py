"""Another k the slow way, from the definition (docs/another-k.md), for the reference fold.

Pure Python over the attributed steps themselves, no import from ``fold``: every draft cut at
k (accepted = min(A, k), proposed = min(P, k)), one step at a time; the step time per draft
length from each request's lines sorted by time (then proposed), the interval to a drafted
line going to that line's proposed. The prose keys (assumption, model, notes) are not figures
and are left out; ``without_prose`` drops them from the library's block.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

PROSE = ("assumption", "step_model", "intervals", "step_time_note")
MAX_CUT_K = 64  # docs/another-k.md: rows for k' = 1 .. 64 below the largest draft, and it


def step_times_of(steps: list[Any]) -> dict[int, list[int]]:
    """Per drafted length p, every interval ending at a line that proposed p."""
    by_request: dict[tuple[Any, ...], list[tuple[int, int]]] = defaultdict(list)
    for leg, step in steps:
        by_request[(leg, step.w, type(step.seq).__name__, step.seq)].append(
            (step.t_ns, step.proposed)
        )
    intervals: dict[int, list[int]] = defaultdict(list)
    for lines in by_request.values():
        lines.sort()
        for (before, _), (after, proposed) in pairwise(lines):
            if proposed > 0:
                intervals[proposed].append(after - before)
    return dict(intervals)


def another_k_of(steps: list[Any], legs: list[int], tok_s: float | None) -> dict[str, Any] | None:
    """``steps``: (leg, step) of every line attributed to the legs ``legs``."""
    drafted = [step for _leg, step in steps if step.proposed > 0]
    if not drafted:
        return None
    largest = max(step.proposed for step in drafted)
    lengths = sorted({step.proposed for step in drafted})
    s = len(drafted)
    a = sum(step.accepted for step in drafted)
    measured = None
    if len(lengths) > 1:
        measured = {
            p: sum(values) / len(values) / 1e9 for p, values in step_times_of(steps).items()
        } or None  # no two lines of one request: nothing timed

    def rate_at(k: int) -> tuple[float | None, list[int], float | None]:
        if measured is None:
            return None, [], None
        missing = sorted({min(step.proposed, k) for step in drafted} - set(measured))
        if missing:
            return None, missing, None
        seconds = sum(measured[min(step.proposed, k)] for step in drafted)
        if seconds <= 0:
            return None, [], None
        step_time = seconds / s
        tokens = 1 + sum(min(step.accepted, k) for step in drafted) / s
        return step_time, [], tokens / step_time

    recorded_rate = rate_at(largest)[2]
    rows = []
    for k in sorted({*range(1, min(largest, MAX_CUT_K + 1)), largest}):
        cut_p = sum(min(step.proposed, k) for step in drafted)
        cut_a = sum(min(step.accepted, k) for step in drafted)
        tokens = 1 + cut_a / s
        step_time, missing, rate = rate_at(k)
        modelled = None
        if rate is not None and recorded_rate and tok_s is not None:
            modelled = tok_s * rate / recorded_rate
        rows.append(
            {
                "k": k,
                "recorded": k == largest,
                "steps": s,
                "proposed": cut_p,
                "accepted": cut_a,
                "accept_rate": cut_a / cut_p,
                "accept_rate_ci": None,
                "accept_rate_reach": None,  # no interval: nothing for ± to reach
                "tokens_per_step": tokens,
                "tokens_per_step_ci": None,
                "tokens_per_step_reach": None,
                "per_position": [
                    sum(1 for step in drafted if step.accepted > i) / s for i in range(k)
                ],
                "steps_needed": (s + a) / tokens,
                "step_time_s": step_time,
                "decode_tok_s": rate,
                "modelled_tok_s": modelled,
                "unmeasured_lengths": missing,
            }
        )
    return {
        "legs": list(legs),
        "largest_k": largest,
        "draft_lengths": [
            {"proposed": p, "steps": sum(1 for step in drafted if step.proposed == p)}
            for p in lengths
        ],
        "step_times": None
        if measured is None
        else [
            {"proposed": p, "intervals": len(values), "mean_s": sum(values) / len(values) / 1e9}
            for p, values in sorted(step_times_of(steps).items())
        ],
        "rows": rows,
        # by their definitions: lengths timed over fewer than 30 steps, and every row's
        # lengths without a step time, once each and in order
        "few_steps_lengths": []
        if measured is None
        else [p for p, values in sorted(step_times_of(steps).items()) if len(values) < 30],
        "unmeasured_lengths": sorted(set().union(*(row["unmeasured_lengths"] for row in rows))),
    }


def without_prose(block: dict[str, Any] | None) -> dict[str, Any] | None:
    if block is None:
        return None
    return {key: value for key, value in block.items() if key not in PROSE}
