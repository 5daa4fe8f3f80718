"""A plain reference fold, written from instrument/FORMAT.md and the definitions, for the tests.

Pure Python, no polars, no import from ``fold``: the property tests compare the library's JSON
output with what this module computes, so the two must not share code. Everything is done the
slow, obvious way (one step at a time, lists and dicts).

Definitions: S = steps with proposed > 0, P = sum proposed, A = sum accepted;
accept_rate = A/P; mean_acceptance_length = 1 + A/S; per_position[i] = (#steps with
accepted > i)/S for i < max proposed; per_position_of_proposed[i] = (#steps with accepted > i)/
(#steps with proposed > i); histogram[j] = #steps (proposed > 0) that accepted
exactly j, j = 0 .. max proposed; lost lines per writer = max_n + 1 - lines.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from another_k_reference import another_k_of, without_prose

LINE_START = b'{"v":'
# The fold cuts each leg's window into this many equal time bins and builds windows of steps
# from whole bins; the reference does the same so that the windows can be compared.
TIME_BINS_PER_LEG = 512
COLLAPSE_FRACTION = 0.5
MAX_SKIPPED_EXAMPLES = 5
# docs/units.md "The cadence": a stall is an interval over this many times its request's median.
STALL_FACTOR = 4.0


@dataclass(frozen=True)
class Step:
    """One parsed line of a step log."""

    w: str
    n: int
    t_ns: int
    pid: int
    seq: int | str
    """The request id: an integer, or a string (FORMAT.md); 7 and "7" are two requests."""
    proposed: int
    accepted: int
    emitted: int | None = None
    label: str | None = None
    draft_ns: int | None = None
    verify_ns: int | None = None


@dataclass
class FileRecord:
    """What reading one file gives: its steps in file order, and what was not a step."""

    path: str
    steps: list[Step] = field(default_factory=list)
    torn: int = 0
    skipped: int = 0
    skipped_lines: list[int] = field(default_factory=list)


class ReferenceRefused(Exception):
    """The library must refuse these inputs (RefusedError)."""


class ReferenceBadInput(Exception):
    """The library must reject these inputs (InputError)."""


# ----------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return type(value) is int


# FORMAT.md: no step proposes or emits more tokens than this; a line past it is refused.
MAX_STEP_TOKENS = 65_536


def _integer(text: str) -> int | float:
    # JSON numbers have no range; a field's integer does (64 bits), and Python's int() refuses
    # literals past 4300 digits. Anything longer than 64 bits is no field's value: a float.
    return int(text) if len(text) <= 20 else float(text)


def parse_step(raw: bytes) -> Step | None:
    """The step a v1 line holds, or None when the line is not a valid v1 line."""
    try:
        obj = json.loads(raw.decode("utf-8"), parse_int=_integer, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not _is_int(obj.get("v")) or obj["v"] != 1:
        return None
    if not isinstance(obj.get("w"), str):
        return None
    names = ("n", "t_ns", "pid", "proposed", "accepted")
    if not all(_is_int(obj.get(name)) for name in names):
        return None
    if not (_is_int(obj.get("seq")) or isinstance(obj.get("seq"), str)):
        return None
    emitted = obj.get("emitted")
    if emitted is not None and not _is_int(emitted):
        return None
    label = obj.get("leg")
    if label is not None and not isinstance(label, str):
        return None
    # The optional durations (FORMAT.md): integers 0 .. 2^63 - 1, as every count.
    durations = [obj.get(name) for name in ("draft_ns", "verify_ns")]
    if any(value is not None and not _is_int(value) for value in durations):
        return None
    step = Step(
        w=obj["w"],
        n=obj["n"],
        t_ns=obj["t_ns"],
        pid=obj["pid"],
        seq=obj["seq"],
        proposed=obj["proposed"],
        accepted=obj["accepted"],
        emitted=emitted,
        label=label,
        draft_ns=durations[0],
        verify_ns=durations[1],
    )
    # FORMAT.md: every integer is unsigned; seq uses 64 bits, every other integer is below 2^63.
    # A value outside that (a sign included) makes the line bad, not the step impossible.
    seq_in_range = isinstance(step.seq, str) or 0 <= step.seq < 2**64
    counts = (step.n, step.t_ns, step.pid, step.proposed, step.accepted, emitted, *durations)
    if not seq_in_range or not all(value is None or 0 <= value < 2**63 for value in counts):
        return None
    if step.accepted > step.proposed:
        raise ReferenceRefused(f"impossible counts in {raw!r}")
    if max(step.proposed, emitted or 0) > MAX_STEP_TOKENS:
        raise ReferenceRefused(f"more tokens in one step than FORMAT.md allows: {raw!r}")
    return step


def _no_constant(text: str) -> None:
    raise ValueError(f"{text} is not JSON")


def read_file(path: str, data: bytes, *, skip_bad_lines: bool) -> FileRecord:
    """Whole lines are parsed; a final piece without a newline is one torn line.

    A line that is not valid but ends in a whole valid line (a torn fragment another line was
    appended to) keeps that line and counts the fragment as torn.
    """
    record = FileRecord(path)
    *lines, tail = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        step = parse_step(raw)
        if step is None:
            start = raw.rfind(LINE_START)
            if start > 0:
                step = parse_step(raw[start:])
                if step is not None:
                    record.torn += 1
        if step is None:
            if not skip_bad_lines:
                raise ReferenceBadInput(f"{path}:{number}: bad line {raw!r}")
            record.skipped += 1
            record.skipped_lines.append(number)
            continue
        record.steps.append(step)
    if tail:
        record.torn += 1
    return record


# ----------------------------------------------------------------------------------------------
# The arm record
# ----------------------------------------------------------------------------------------------


# docs/decisions.md "Leg windows": the recorded microsecond only bounds the true instant to half a
# microsecond, so each window is widened by 500 ns on each side; both widened ends belong to it.
WINDOW_SLACK_NS = 500


def seconds_to_ns(seconds: float) -> int:
    """Epoch seconds recorded to the microsecond, as integer nanoseconds."""
    return round(seconds * 1_000_000) * 1_000


@dataclass(frozen=True)
class Leg:
    index: int
    fields: dict[str, Any]
    start_ns: int
    end_ns: int
    label: str | None


def arm_legs(document: dict[str, Any] | list[Any]) -> list[Leg]:
    raw_legs = document if isinstance(document, list) else document["legs"]
    return [
        Leg(
            index=index,
            fields=leg,
            start_ns=seconds_to_ns(leg["generate_start_unix"]) - WINDOW_SLACK_NS,
            end_ns=seconds_to_ns(leg["generate_end_unix"]) + WINDOW_SLACK_NS,
            label=leg.get("leg"),
        )
        for index, leg in enumerate(raw_legs)
    ]


def median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def check_record(
    document: dict[str, Any] | list[Any], legs: list[Leg], warm: Callable[[dict], bool]
) -> list[int]:
    """The warm legs; refuses when the recorded throughput fold disagrees with the predicate."""
    warm_indices = [leg.index for leg in legs if warm(leg.fields)]
    top = document if isinstance(document, dict) else {}
    throughput = median([float(legs[i].fields["tok_s"]) for i in warm_indices])
    recorded = (top.get("metrics") or {}).get("output_throughput_tok_s")
    if recorded is not None and (
        throughput is None or not math.isclose(throughput, recorded, rel_tol=1e-9)
    ):
        raise ReferenceRefused("recorded throughput differs")
    recorded_warm = top.get("warm_legs")
    if isinstance(recorded_warm, list):
        if sorted(recorded_warm) != warm_indices:
            raise ReferenceRefused("recorded warm legs differ")
    elif recorded_warm is not None and recorded_warm != len(warm_indices):
        raise ReferenceRefused("recorded warm leg count differs")
    cold = top.get("cold_legs_discarded")
    if cold is not None and cold != len(legs) - len(warm_indices):
        raise ReferenceRefused("recorded cold leg count differs")
    if not warm_indices:
        raise ReferenceRefused("no warm leg")
    return warm_indices


# ----------------------------------------------------------------------------------------------
# Attribution
# ----------------------------------------------------------------------------------------------

ATTRIBUTED, UNATTRIBUTED, AMBIGUOUS = "attributed", "unattributed", "ambiguous"


def attribute(step: Step, legs: list[Leg]) -> tuple[str, int | None]:
    """(status, leg index): the one leg whose closed window holds t_ns, or the one the label
    names among several."""
    covering = [leg for leg in legs if leg.start_ns <= step.t_ns <= leg.end_ns]
    if not covering:
        return UNATTRIBUTED, None
    if len(covering) == 1:
        return ATTRIBUTED, covering[0].index
    named = [leg for leg in covering if step.label is not None and leg.label == step.label]
    if len(named) == 1:
        return ATTRIBUTED, named[0].index
    return AMBIGUOUS, None


# ----------------------------------------------------------------------------------------------
# Figures
# ----------------------------------------------------------------------------------------------


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def histogram_of(steps: list[Step]) -> list[int]:
    drafted = [step for step in steps if step.proposed > 0]
    if not drafted:
        return []
    most = max(step.proposed for step in drafted)
    counts = [0] * (most + 1)
    for step in drafted:
        counts[step.accepted] += 1
    return counts


def per_position_of(steps: list[Step]) -> list[float | None]:
    """Of all drafted steps, the share that accepted more than i (vLLM's per-position rate)."""
    return _share_accepting(steps, lambda step, position: True)


def per_position_of_proposed_of(steps: list[Step]) -> list[float | None]:
    """Among the drafted steps that proposed more than i drafts, the share that accepted more
    than i; None where no step proposed that many."""
    return _share_accepting(steps, lambda step, position: step.proposed > position)


def per_position_conditional_of(steps: list[Step]) -> list[float | None]:
    """Among the drafted steps that accepted more than i - 1 drafts, the share that accepted
    more than i (every drafted step counts for i = 0); None where no step reached i."""
    return _share_accepting(steps, lambda step, position: step.accepted > position - 1)


def _share_accepting(steps: list[Step], counted: Callable[[Step, int], bool]) -> list[float | None]:
    """Per draft position i below the largest proposal: of the drafted steps ``counted`` at i,
    the share that accepted more than i (None when none is counted)."""
    drafted = [step for step in steps if step.proposed > 0]
    if not drafted:
        return []
    rates: list[float | None] = []
    for position in range(max(step.proposed for step in drafted)):
        among = [step for step in drafted if counted(step, position)]
        passed = sum(1 for step in among if step.accepted > position)
        rates.append(passed / len(among) if among else None)
    return rates


def collapse(rates: list[float | None], at_least: int) -> bool:
    known = sorted(rate for rate in rates if rate is not None)
    if len(known) < at_least:
        return False
    middle = median(known)
    assert middle is not None
    if middle <= 0:
        return False
    return any(rate < COLLAPSE_FRACTION * middle for rate in known)


def lowest_of(requests: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The request with the lowest A/P, the first of equals; None when no request proposed."""
    lowest = None
    for request in requests:
        rate = request["accept_rate"]
        if rate is not None and (lowest is None or rate < lowest["accept_rate"]):
            lowest = request
    if lowest is None:
        return None
    return {"w": lowest["w"], "seq": lowest["seq"], "accept_rate": lowest["accept_rate"],
            "steps": lowest["steps"]}  # fmt: skip


def pools_of(windows: list[dict[str, Any]], most: int) -> list[dict[str, Any]]:
    """docs/document.md: at most ``most`` pools of consecutive windows, as even as their count
    allows (pool g starts at window g * n // groups), each the sums of its windows."""
    n = len(windows)
    groups = min(most, n)
    starts = [g * n // groups for g in range(groups)]
    pools: list[dict[str, Any]] = []
    for index, window in enumerate(windows):
        if index in starts:
            pools.append({"steps": 0, "proposed": 0, "accepted": 0})
        for key in ("steps", "proposed", "accepted"):
            pools[-1][key] += window[key]
    for pool in pools:
        pool["accept_rate"] = ratio(pool["accepted"], pool["proposed"])
    return pools


def by_column(parts: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """docs/document.md (format 5): a leg's windows and pools as an array per figure."""
    return {key: [part[key] for part in parts] for key in ("steps", "proposed", "accepted",
                                                            "accept_rate")}  # fmt: skip


def windows_of(leg: Leg, steps: list[Step], window_steps: int) -> list[dict[str, Any]]:
    """Windows of at least ``window_steps`` drafted steps, closed on time-bin edges."""
    bins: dict[int, list[Step]] = {}
    for step in steps:
        if step.proposed > 0:
            number = (
                (step.t_ns - leg.start_ns) * TIME_BINS_PER_LEG // (leg.end_ns - leg.start_ns + 1)
            )
            bins.setdefault(number, []).append(step)
    windows = []
    current: list[Step] = []
    for number in sorted(bins):
        current.extend(bins[number])
        if len(current) >= window_steps:
            windows.append(current)
            current = []
    if current:
        windows.append(current)
    result = []
    for window in windows:
        proposed = sum(step.proposed for step in window)
        accepted = sum(step.accepted for step in window)
        result.append(
            {
                "steps": len(window),
                "proposed": proposed,
                "accepted": accepted,
                "accept_rate": ratio(accepted, proposed),
            }
        )
    return result


def prefill_convention(legs: list[Leg], leg_steps: dict[int, list[Step]]) -> dict[str, Any]:
    """Output tokens per request not from a verify step: 0 or 1, whichever more legs show."""
    agreeing = {"0": 0, "1": 0}
    for leg in legs:
        steps = leg_steps[leg.index]
        if not steps or any(step.emitted is None for step in steps):
            continue
        requests = len({(step.w, step.seq) for step in steps})
        extra = leg.fields["completion_tokens"] - sum(step.emitted or 0 for step in steps)
        if extra == 0:
            agreeing["0"] += 1
        if extra == requests:
            agreeing["1"] += 1
    if agreeing["0"] == agreeing["1"] == 0:
        return {"per_request": 1, "source": "default", "source_text": "default", "legs": agreeing}
    chosen = 0 if agreeing["0"] > agreeing["1"] else 1
    return {
        "per_request": chosen,
        "source": "learned_from_the_arm",
        "source_text": "learned from the arm",
        "legs": agreeing,
    }


def request_order(item: tuple[tuple[str, int | str], Any]) -> tuple[str, int, int | str]:
    """Requests by writer, its integer ids in order, then its string ids by code point."""
    (w, seq), _ = item
    return (w, 0, seq) if isinstance(seq, int) else (w, 1, seq)


def leg_figures(
    leg: Leg,
    warm: bool,
    steps: list[Step],
    window_steps: int,
    prefill: int = 1,
    stall_factor: float = STALL_FACTOR,
) -> dict[str, Any]:
    drafted = [step for step in steps if step.proposed > 0]
    s = len(drafted)
    p = sum(step.proposed for step in steps)
    a = sum(step.accepted for step in steps)
    window_secs = (leg.end_ns - leg.start_ns - 2 * WINDOW_SLACK_NS) / 1e9  # as recorded
    completion = leg.fields["completion_tokens"]

    by_request: dict[tuple[str, int], list[Step]] = {}
    for step in steps:
        by_request.setdefault((step.w, step.seq), []).append(step)
    requests = []
    for (w, seq), request_steps in sorted(by_request.items(), key=request_order):
        request_drafted = sum(1 for step in request_steps if step.proposed > 0)
        request_p = sum(step.proposed for step in request_steps)
        request_a = sum(step.accepted for step in request_steps)
        requests.append(
            {
                "w": w,
                "seq": seq,
                "lines": len(request_steps),
                "steps": request_drafted,
                "proposed": request_p,
                "accepted": request_a,
                "accept_rate": ratio(request_a, request_p),
                "mean_acceptance_length": 1 + request_a / request_drafted
                if request_drafted
                else None,
            }
        )
    members = cadence_members(leg, steps, stall_factor)
    for request, (_, cadence, _) in zip(requests, members, strict=True):
        request["cadence"] = cadence
    windows = windows_of(leg, steps, window_steps)

    with_emitted = [step for step in steps if step.emitted is not None]
    emitted = sum(step.emitted for step in with_emitted) if with_emitted else None
    expected = None
    consistent = None
    if steps and len(with_emitted) == len(steps):
        assert emitted is not None
        expected = prefill * len(requests) + emitted
        consistent = expected == completion

    flags = []
    if s == 0:
        flags.append("no steps")
    full = [window["accept_rate"] for window in windows if window["steps"] >= window_steps]
    if collapse(full, 3):
        flags.append("collapse")
    judged = [r["accept_rate"] for r in requests if r["steps"] >= window_steps]
    if collapse(judged, 2):
        flags.append("request collapse")
    if consistent is False:
        flags.append("emitted != completion")

    return {
        "index": leg.index,
        "run": leg.fields["run"],
        "warm": warm,
        "label": leg.label,
        "finish_reason": leg.fields["finish_reason"],
        "tok_s": float(leg.fields["tok_s"]),
        "completion_tokens": completion,
        "window_secs": window_secs,
        "window_start_ns": leg.start_ns + WINDOW_SLACK_NS,
        "window_end_ns": leg.end_ns - WINDOW_SLACK_NS,
        "lines": len(steps),
        "steps": s,
        "proposed": p,
        "accepted": a,
        "accept_rate": ratio(a, p),
        "mean_acceptance_length": 1 + a / s if s else None,
        "completion_tokens_per_step": ratio(completion, s),
        "per_position": per_position_of(steps),
        "per_position_conditional": per_position_conditional_of(steps),
        "per_position_of_proposed": per_position_of_proposed_of(steps),
        "histogram": histogram_of(steps),
        "step_rate": s / window_secs if window_secs > 0 else None,
        "emitted": emitted,
        "emitted_lines": len(with_emitted),
        "expected_completion_tokens": expected,
        "prefill_tokens_per_request": prefill,
        "emitted_consistent": consistent,
        "requests": requests,
        "windows": by_column(windows),
        "request_count": len(requests),
        "lowest_request": lowest_of(requests),
        "window_pools": {
            "shape": by_column(pools_of(windows, 10)),
            "chart": by_column(pools_of(windows, 128)),
        },
        "flags": flags,
        "cadence": group_cadence(members),
    }


def pooled(legs: list[Leg], leg_steps: dict[int, list[Step]], figures: list[dict]) -> dict:
    steps = [step for leg in legs for step in leg_steps[leg.index]]
    drafted = [step for step in steps if step.proposed > 0]
    s = len(drafted)
    p = sum(step.proposed for step in steps)
    a = sum(step.accepted for step in steps)
    # A ratio of sums over the legs where both sums were measured: a leg without a verify step
    # has no completion tokens per step, and its tokens must not inflate the others'.
    completion = sum(
        leg.fields["completion_tokens"]
        for leg in legs
        if any(step.proposed > 0 for step in leg_steps[leg.index])
    )
    timed = [figures[leg.index] for leg in legs if figures[leg.index]["window_secs"] > 0]
    window_secs = sum(leg["window_secs"] for leg in timed)
    timed_steps = sum(leg["steps"] for leg in timed)
    return {
        "legs": [leg.index for leg in legs],
        "steps": s,
        "proposed": p,
        "accepted": a,
        "accept_rate": ratio(a, p),
        "mean_acceptance_length": 1 + a / s if s else None,
        "completion_tokens_per_step": ratio(completion, s),
        "output_throughput_tok_s": median([float(leg.fields["tok_s"]) for leg in legs]),
        "step_rate": timed_steps / window_secs if window_secs > 0 else None,
        "per_position": per_position_of(steps),
        "per_position_conditional": per_position_conditional_of(steps),
        "per_position_of_proposed": per_position_of_proposed_of(steps),
        "histogram": histogram_of(steps),
    }


def _requests_of(legs: list[Leg], leg_steps: dict[int, list[Step]]) -> list[tuple[int, list[Step]]]:
    """Each request of the legs (by leg, writer and id) with its lines, in file order."""
    found: dict[tuple[int, str, int | str], list[Step]] = {}
    for leg in legs:
        for step in leg_steps[leg.index]:
            found.setdefault((leg.index, step.w, type(step.seq).__name__, step.seq), []).append(
                step
            )
    return [(key[0], steps) for key, steps in found.items()]


def linear_percentile(ordered: list[float], p: float) -> float:
    rank = p / 100 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def per_request_of(legs: list[Leg], leg_steps: dict[int, list[Step]]) -> dict | None:
    """docs/per-request.md, without the intervals: per request its own A/P and 1 + A/S; the
    means and spread over requests with a draft; the ten lowest by A/P (more P first)."""
    requests = _requests_of(legs, leg_steps)
    if not requests:
        return None
    rows = []
    for leg, steps in requests:
        drafted = [step for step in steps if step.proposed > 0]
        if drafted:
            p = sum(step.proposed for step in drafted)
            a = sum(step.accepted for step in drafted)
            rows.append((leg, steps[0].w, steps[0].seq, len(drafted), p, a))
    steps = [step for leg in legs for step in leg_steps[leg.index]]
    s = sum(1 for step in steps if step.proposed > 0)
    p = sum(step.proposed for step in steps)
    a = sum(step.accepted for step in steps)
    rates = [row[5] / row[4] for row in rows]
    lengths = [1 + row[5] / row[3] for row in rows]

    def spread(values: list[float]) -> dict | None:
        if not values:
            return None
        ordered = sorted(values)
        return {"min": ordered[0],
                **{f"p{q}": linear_percentile(ordered, q) for q in (10, 25, 50, 75, 90)},
                "max": ordered[-1]}  # fmt: skip

    lowest = sorted(rows, key=lambda row: (row[5] / row[4], -row[4], row[0], row[1], str(row[2])))
    return {
        "requests": len(requests),
        "requests_without_drafts": len(requests) - len(rows),
        "pooled": {"accept_rate": ratio(a, p), "mean_acceptance_length": 1 + a / s if s else None},
        "per_request_mean": {
            "accept_rate": sum(rates) / len(rates) if rates else None,
            "mean_acceptance_length": sum(lengths) / len(lengths) if lengths else None,
        },
        "spread": {"accept_rate": spread(rates), "mean_acceptance_length": spread(lengths)},
        "lowest": [
            {
                "leg": leg,
                "w": w,
                "seq": seq,
                "steps": s_,
                "proposed": p_,
                "accepted": a_,
                "accept_rate": a_ / p_,
                "mean_acceptance_length": 1 + a_ / s_,
            }
            for leg, w, seq, s_, p_, a_ in lowest[:10]
        ],
    }


def by_output_position_of(legs: list[Leg], leg_steps: dict[int, list[Step]]) -> dict | None:
    """docs/per-request.md, without the intervals: each drafted step in the bucket (0, 128,
    256, ...) of the tokens its request emitted before it, lines in time order (ties: by
    emitted, then accepted, then proposed)."""
    sums: dict[int, list[int]] = {}
    seen: dict[int, set] = {}
    # each request's own sums per bucket, for the long requests alone
    own: dict[int, dict[int, list[int]]] = {}
    for number, (_, steps) in enumerate(_requests_of(legs, leg_steps)):
        position = 0
        ordered = sorted(steps, key=lambda step: (
            step.t_ns, -1 if step.emitted is None else step.emitted, step.accepted, step.proposed
        ))  # fmt: skip
        for step in ordered:
            if step.proposed > 0:
                bucket, edge = 0, 128
                while position >= edge:
                    bucket, edge = bucket + 1, 2 * edge
                found = sums.setdefault(bucket, [0, 0, 0])
                found[0] += 1
                found[1] += step.proposed
                found[2] += step.accepted
                seen.setdefault(bucket, set()).add(number)
                mine = own.setdefault(number, {}).setdefault(bucket, [0, 0, 0])
                mine[0] += 1
                mine[1] += step.proposed
                mine[2] += step.accepted
            position += step.accepted + 1 if step.emitted is None else step.emitted
    if not sums:
        return None
    count = max(sums) + 1
    edges = [0] + [128 * 2**j for j in range(count)]
    buckets = []
    for bucket in range(count):
        s, p, a = sums.get(bucket, [0, 0, 0])
        buckets.append({"from": edges[bucket], "to": edges[bucket + 1],
                        "requests": len(seen.get(bucket, ())), "steps": s, "proposed": p,
                        "accepted": a, "accept_rate": ratio(a, p),
                        "mean_acceptance_length": 1 + a / s if s else None})  # fmt: skip
    used = [(x, b["accept_rate"], b["proposed"]) for x, b in enumerate(buckets) if b["proposed"]]
    slope = None
    if len(used) >= 2:
        total = sum(w for _, _, w in used)
        x_mean = sum(w * x for x, _, w in used) / total
        y_mean = sum(w * y for _, y, w in used) / total
        spread = sum(w * (x - x_mean) ** 2 for x, _, w in used)
        slope = sum(w * (x - x_mean) * (y - y_mean) for x, y, w in used) / spread
    long_requests = None
    if len(used) >= 2:
        last = used[-1][0]
        reached = [number for number, found in own.items() if found.get(last, [0, 0, 0])[1] > 0]
        alone = []
        for bucket in range(last + 1):
            s = sum(own[number].get(bucket, [0, 0, 0])[0] for number in reached)
            p = sum(own[number].get(bucket, [0, 0, 0])[1] for number in reached)
            a = sum(own[number].get(bucket, [0, 0, 0])[2] for number in reached)
            alone.append({"steps": s, "proposed": p, "accepted": a, "accept_rate": ratio(a, p)})
        long_requests = {"requests": len(reached), "reach_bucket": last, "buckets": alone}
    return {"edges": edges, "buckets": buckets, "slope": slope, "long_requests": long_requests}


def fold_records(
    document: dict[str, Any] | list[Any],
    warm: Callable[[dict], bool],
    predicate: str,
    records: list[FileRecord],
    window_steps: int,
    stall_factor: float = STALL_FACTOR,
) -> dict[str, Any]:
    """The fold's JSON document for steps already read (raises ReferenceRefused)."""
    legs = arm_legs(document)
    warm_indices = check_record(document, legs, warm)
    leg_steps: dict[int, list[Step]] = {leg.index: [] for leg in legs}
    files = []
    writers: dict[str, dict[str, int]] = {}
    for record in records:
        counts = {ATTRIBUTED: 0, UNATTRIBUTED: 0, AMBIGUOUS: 0}
        for step in record.steps:
            status, index = attribute(step, legs)
            counts[status] += 1
            if index is not None:
                leg_steps[index].append(step)
            writer = writers.setdefault(step.w, {"pid": step.pid, "lines": 0, "max_n": step.n})
            writer["pid"] = max(writer["pid"], step.pid)
            writer["max_n"] = max(writer["max_n"], step.n)
            writer["lines"] += 1
        files.append(
            {
                "path": record.path,
                "lines": len(record.steps),
                "attributed": counts[ATTRIBUTED],
                "unattributed": counts[UNATTRIBUTED],
                "ambiguous": counts[AMBIGUOUS],
                "torn": record.torn,
                "skipped": record.skipped,
            }
        )
    convention = prefill_convention(legs, leg_steps)
    figures = [
        leg_figures(
            leg,
            leg.index in warm_indices,
            leg_steps[leg.index],
            window_steps,
            convention["per_request"],
            stall_factor,
        )
        for leg in legs
    ]
    if any(figure["warm"] and figure["steps"] == 0 for figure in figures):
        raise ReferenceRefused("a warm leg has no step with a draft")
    writer_rows = []
    for w in sorted(writers):
        row = writers[w]
        if row["lines"] > row["max_n"] + 1:
            raise ReferenceRefused(f"writer {w} has more lines than its counter")
        writer_rows.append({"w": w, **row, "lost": row["max_n"] + 1 - row["lines"]})
    warm_legs = [leg for leg in legs if leg.index in warm_indices]
    members = {leg.index: cadence_members(leg, leg_steps[leg.index], stall_factor) for leg in legs}

    def cadence_of(chosen: list[Leg]) -> dict[str, Any]:
        return group_cadence([member for leg in chosen for member in members[leg.index]])

    for leg, figure in zip(legs, figures, strict=True):
        figure["step_split"] = step_split([leg], leg_steps)
    return {
        "format": "fold-acceptance/5",
        "predicate": predicate,
        "window_steps": window_steps,
        "stall_factor": stall_factor,
        "legs": figures,
        "warm": {
            **pooled(warm_legs, leg_steps, figures),
            "cadence": cadence_of(warm_legs),
            "another_k": another_k_of(
                [(leg.index, step) for leg in warm_legs for step in leg_steps[leg.index]],
                [leg.index for leg in warm_legs],
                median([float(leg.fields["tok_s"]) for leg in warm_legs]),
            ),
            "per_request": per_request_of(warm_legs, leg_steps),
            "by_output_position": by_output_position_of(warm_legs, leg_steps),
            "step_split": step_split(warm_legs, leg_steps),
        },
        "all": {
            **pooled(legs, leg_steps, figures),
            "cadence": cadence_of(legs),
            "per_request": None,
            "by_output_position": None,
        },
        "unattributed_steps": sum(f["unattributed"] for f in files),
        "ambiguous_steps": sum(f["ambiguous"] for f in files),
        "torn_lines": sum(f["torn"] for f in files),
        "skipped_lines": sum(f["skipped"] for f in files),
        "lost_lines": sum(row["lost"] for row in writer_rows),
        "lines_read": sum(f["lines"] for f in files),
        "lines_attributed": sum(f["attributed"] for f in files),
        "files": files,
        "writers": writer_rows,
        "skipped_examples": [
            {"path": record.path, "line": line}
            for record in records
            for line in record.skipped_lines[:MAX_SKIPPED_EXAMPLES]
        ],
        "prefill_tokens": convention,
        "step_source": "step_log",
        "step_source_text": "step log",
        "steps_timed": True,
        "no_times_text": None,
        "sources": STEP_LOG_SOURCES,
        "counter_check": unchecked(len(legs)),
    }


# Where each figure comes from when a step log is folded.
STEP_LOG_SOURCES = {
    **dict.fromkeys(
        ("steps", "proposed", "accepted", "accept_rate", "mean_acceptance_length"), "step log"
    ),
    "completion_tokens_per_step": "completion_tokens (arm record) / S (step log)",
    "step_rate": "S (step log) / the legs' generate windows (arm record)",
    "tok_s": "the legs' tok_s (arm record)",
    **dict.fromkeys(
        ("per_position", "per_position_conditional", "per_position_of_proposed", "histogram",
         "windows", "request_count",
         "lines", "cadence", "emitted", "timeline"),
        "step log",
    ),
}  # fmt: skip


def unchecked(legs: int) -> dict[str, Any]:
    """The generated arms carry no engine counters and no spec_acceptance: nothing checked."""
    return {
        "legs": legs,
        "legs_with_counters": 0,
        "legs_checked": 0,
        "spec_acceptance": "absent",
        "spec_acceptance_text": "not in the record: not checked",
        "summary": "not checked against the engine's own counters: the record's legs carry "
        "none (spec_drafted_request_steps, spec_drafts_proposed, spec_drafts_accepted)",
    }


def reference_fold(
    document: dict[str, Any] | list[Any],
    warm: Callable[[dict], bool],
    predicate: str,
    files: list[tuple[str, bytes]],
    *,
    window_steps: int = 32,
    skip_bad_lines: bool = False,
    stall_factor: float = STALL_FACTOR,
) -> dict[str, Any]:
    """The fold of ``files`` ((path, contents), in reading order) over the arm record."""
    check_record(document, arm_legs(document), warm)  # refused before any log is read
    records = [read_file(path, data, skip_bad_lines=skip_bad_lines) for path, data in files]
    return fold_records(document, warm, predicate, records, window_steps, stall_factor)


# ----------------------------------------------------------------------------------------------
# Cadence (docs/units.md "The cadence")
# ----------------------------------------------------------------------------------------------


def nearest_rank(ordered: list[int], percent: int) -> int:
    """The smallest value with at least ``percent``% of ``ordered`` at or below it."""
    rank = math.ceil(len(ordered) * percent / 100)
    return ordered[rank - 1]


def request_cadence(leg: Leg, times: list[int], stall_factor: float) -> dict[str, Any]:
    times = sorted(times)
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    start = leg.start_ns + WINDOW_SLACK_NS
    end = leg.end_ns - WINDOW_SLACK_NS
    middle = median(gaps)
    judged = middle is not None and middle > 0
    stalled = [gap for gap in gaps if judged and gap > stall_factor * middle]
    # docs/decisions.md "Cadence": a step in the band around the window counts as at its edge.
    first = min(max(times[0], start), end)
    last = max(min(times[-1], end), start)
    decode_s = max(0, last - first) / 1e9
    ordered = sorted(gaps)
    return {
        "lines": len(times),
        "intervals": len(gaps),
        "first_step_s": max(0, first - start) / 1e9,
        "decode_s": decode_s,
        "tail_s": max(0, end - last) / 1e9,
        "interval_median_s": None if middle is None else middle / 1e9,
        "interval_p90_s": nearest_rank(ordered, 90) / 1e9 if gaps else None,
        "interval_p99_s": nearest_rank(ordered, 99) / 1e9 if gaps else None,
        "interval_max_s": max(gaps) / 1e9 if gaps else None,
        "stalls": len(stalled) if judged else None,
        "stall_s": sum(gap - middle for gap in stalled) / 1e9 if judged else None,
        "decode_steps_per_s": len(gaps) / decode_s if decode_s > 0 else None,
    }


CADENCE_FIGURES = (
    "first_step_s",
    "decode_s",
    "tail_s",
    "interval_median_s",
    "interval_p90_s",
    "interval_p99_s",
    "interval_max_s",
    "stalls",
    "stall_s",
    "decode_steps_per_s",
)


def group_cadence(members: list[tuple[Leg, dict[str, Any], list[int]]]) -> dict[str, Any]:
    """(leg, request cadence, the request's intervals) for every request of a group of legs."""
    count = len(members)
    figures = [figure for _, figure, _ in members]
    gaps = sorted(gap for _, _, request_gaps in members for gap in request_gaps)
    judged = [figure for figure in figures if figure["stalls"] is not None]
    decode_total = sum(figure["decode_s"] for figure in figures)
    timed = [(leg, figure) for leg, figure, _ in members if leg.end_ns - leg.start_ns > 1000]
    window_s = sum((leg.end_ns - leg.start_ns - 2 * WINDOW_SLACK_NS) for leg, _ in timed) / 1e9

    def share(name: str) -> float | None:
        if not timed or window_s <= 0:
            return None
        return sum(figure[name] or 0.0 for _, figure in timed) / window_s

    def middle(name: str) -> float | None:
        values = [figure[name] for figure in figures if figure[name] is not None]
        return None if not values else float(median(values))

    return {
        "requests": count,
        "lines": sum(figure["lines"] for figure in figures),
        "intervals": len(gaps),
        "first_step_s": sum(f["first_step_s"] for f in figures) / count if count else None,
        "decode_s": decode_total / count if count else None,
        "tail_s": sum(f["tail_s"] for f in figures) / count if count else None,
        "interval_median_s": median(gaps) / 1e9 if gaps else None,
        "interval_p90_s": nearest_rank(gaps, 90) / 1e9 if gaps else None,
        "interval_p99_s": nearest_rank(gaps, 99) / 1e9 if gaps else None,
        "interval_max_s": gaps[-1] / 1e9 if gaps else None,
        "stalls": sum(f["stalls"] for f in judged) if judged else None,
        "stall_s": sum(f["stall_s"] for f in judged) / len(judged) if judged else None,
        "decode_steps_per_s": len(gaps) / decode_total if decode_total > 0 else None,
        "shares": {
            "before_first_step": share("first_step_s"),
            "decode": share("decode_s"),
            "stalls": share("stall_s"),
            "tail": share("tail_s"),
        },
        "time_split": time_split_of(figures, count, decode_total, judged),
        "median": {name: middle(name) for name in CADENCE_FIGURES},
    }


def time_split_of(figures: list[dict], count: int, decode_total: float, judged: list[dict]):
    """docs/cadence.md: the mean request's time before its first step, decoding outside
    stalls, in stalls and in its tail, each over the sum of the three durations."""
    if not count:
        return None
    first = sum(f["first_step_s"] for f in figures) / count
    decode = decode_total / count
    tail = sum(f["tail_s"] for f in figures) / count
    stalled = sum(f["stall_s"] for f in judged) / len(judged) if judged else 0.0
    whole = first + decode + tail
    if not whole > 0:
        return None
    parts = (first, decode - stalled, stalled, tail)
    names = ("before_first_step", "decoding", "stalls", "tail")
    return {name: part / whole for name, part in zip(names, parts, strict=True)}


def cadence_members(
    leg: Leg, steps: list[Step], stall_factor: float
) -> list[tuple[Leg, dict[str, Any], list[int]]]:
    """Per request of ``leg`` in (writer, seq) order: its cadence and its intervals."""
    by_request: dict[tuple[str, int], list[int]] = {}
    for step in steps:
        by_request.setdefault((step.w, step.seq), []).append(step.t_ns)
    members = []
    for key in sorted(by_request, key=lambda key: request_order((key, None))):
        times = sorted(by_request[key])
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        members.append((leg, request_cadence(leg, times, stall_factor), gaps))
    return members


# ----------------------------------------------------------------------------------------------
# The step split (docs/step-split.md)
# ----------------------------------------------------------------------------------------------

SPLIT_PARTS = ("draft", "verify")


def step_split(chosen: list[Leg], leg_steps: dict[int, list[Step]]) -> dict[str, Any] | None:
    """Our step time into drafting, verifying and the rest over the requests of ``chosen``, with
    loops: a request's decode window as the cadence clamps it, each part's mean over the steps
    after the request's first that carried it (the first's parts come before the window) times
    the request's intervals. No intervals in this model (``*_ci`` null)."""
    requests = []
    # Every request the cadence times (two lines or more), timed or not: what the split leaves
    # out is named beside it.
    everyone: list[tuple[int, int, int]] = []
    lines_with = dict.fromkeys(SPLIT_PARTS, 0)
    for leg in chosen:
        by_request: dict[tuple[str, int | str], list[Step]] = {}
        for step in leg_steps[leg.index]:
            by_request.setdefault((step.w, step.seq), []).append(step)
        for key in sorted(by_request, key=lambda key: request_order((key, None))):
            steps = by_request[key]
            times = sorted(step.t_ns for step in steps)

            def when(step: Step) -> tuple:
                # the first line: by time, then line number, then durations (a missing one first)
                missing = [
                    -1 if value is None else value for value in (step.draft_ns, step.verify_ns)
                ]
                return (step.t_ns, step.n, *missing)

            after_first = sorted(steps, key=when)[1:]
            carried = {
                part: [
                    getattr(s, f"{part}_ns")
                    for s in after_first
                    if getattr(s, f"{part}_ns") is not None
                ]
                for part in SPLIT_PARTS
            }
            if len(times) < 2:
                continue
            start, end = leg.start_ns + WINDOW_SLACK_NS, leg.end_ns - WINDOW_SLACK_NS
            first = min(max(times[0], start), end)
            last = max(min(times[-1], end), start)
            everyone.append((leg.index, len(times) - 1, max(0, last - first)))
            if not any(carried.values()):
                continue
            requests.append((len(times) - 1, max(0, last - first), carried, leg.index))
            # the steps that carried each part, the first included (the split's *_steps)
            for part in SPLIT_PARTS:
                lines_with[part] += sum(getattr(s, f"{part}_ns") is not None for s in steps)
    if not requests:
        return None
    timed_legs = {index for *_, index in requests}
    requests = [request[:3] for request in requests]
    intervals = sum(n for n, _, _ in requests)
    step_ns = sum(decode for _, decode, _ in requests) / intervals
    measured = [part for part in SPLIT_PARTS if all(c[part] for _, _, c in requests)]
    means = {
        part: math.fsum(
            float(sum(c[part])) * n / len(c[part]) if c[part] else 0.0 for n, _, c in requests
        )
        / intervals
        for part in measured
    }
    rest_ns = step_ns - sum(means.values())
    tolerance_ns = 0.001 * step_ns + 1000
    found: dict[str, Any] = {
        "requests": len(requests),
        "intervals": intervals,
        "draft_steps": lines_with["draft"],
        "verify_steps": lines_with["verify"],
        # docs/step-split.md: the steps that carried a duration of either part
        "timed_steps": max(lines_with["draft"], lines_with["verify"]),
        "measured": measured,
        "step_s": step_ns / 1e9,
        **{f"{part}_s": means[part] / 1e9 if part in means else None for part in SPLIT_PARTS},
        "rest_s": rest_ns / 1e9,
    }
    for part, value in ((p, means.get(p)) for p in (*SPLIT_PARTS, "rest")):
        value = rest_ns if part == "rest" else value
        found[f"{part}_share"] = None if value is None or step_ns <= 0 else value / step_ns
    found["tolerance_s"] = tolerance_ns / 1e9
    found["adds_up"] = rest_ns >= -tolerance_ns
    # the parts with a share, largest first; a tie keeps draft, verify, rest (picked by hand)
    left = [p for p in (*SPLIT_PARTS, "rest") if found[f"{p}_share"] is not None]
    found["parts_by_share"] = []
    while left:
        largest = left[0]
        for part in left[1:]:
            if found[f"{part}_share"] > found[f"{largest}_share"]:
                largest = part
        found["parts_by_share"].append(largest)
        left.remove(largest)
    for name in ("step", "draft", "verify", "rest"):
        found[f"{name}_s_ci"] = None
    for name in (*SPLIT_PARTS, "rest"):
        found[f"{name}_share_ci"] = None
    found["untimed_requests"] = len(everyone) - len(requests)
    found["untimed_legs"] = sorted(
        {index for index, _, _ in everyone} - timed_legs, key=[leg.index for leg in chosen].index
    )
    everyone_intervals = sum(n for _, n, _ in everyone)
    found["cadence_step_s"] = (
        found["step_s"]
        if len(everyone) == len(requests)
        else sum(d for _, _, d in everyone) / everyone_intervals / 1e9
    )
    return found


# ----------------------------------------------------------------------------------------------
# Comparing with the library's output
# ----------------------------------------------------------------------------------------------


def with_request_rows(document: dict[str, Any], result: Any) -> dict[str, Any]:
    """The library's JSON (format 4 lists no request: each one's row is in the sums file) with
    each leg's rows from the library's own request table, in the place this model's document
    keeps them, so that its rows are held to this model's too."""
    legs = []
    for leg, figures in zip(document["legs"], result.legs, strict=True):
        rows = figures["requests"]
        legs.append({**leg, "requests": None if rows is None else rows.to_json()})
    return {**document, "legs": legs}


def without_intervals(document: dict[str, Any]) -> dict[str, Any]:
    """A fold's JSON without the bootstrap's keys (the intervals and their reaches, what ±
    shows): this model has none (test_uncertainty.py
    checks the intervals against their own model)."""
    document = dict(document)
    document.pop("bootstrap", None)
    for name in ("warm", "all"):
        document[name] = {
            key: value
            for key, value in document[name].items()
            if not key.endswith(("_ci", "_reach"))
        }
        if document[name].get("another_k") is not None:
            document[name]["another_k"] = without_prose(document[name]["another_k"])
        # Per request and by position: their intervals, what is judged from them (falling)
        # and the words saying what each figure is are not this model's.
        for block in ("per_request", "by_output_position"):
            if document[name].get(block) is not None:
                document[name][block] = _without_words(document[name][block])
        if "cadence" in document[name]:
            document[name]["cadence"] = {
                key: value
                for key, value in document[name]["cadence"].items()
                if not key.endswith(("_ci", "_reach"))
            }
    return document


def _without_words(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: _without_words(item)
            for key, item in value.items()
            if not key.endswith(("_ci", "_reach"))
            and key not in ("means", "position", "falling", "falling_when", "caveat", "caveat_text")
        }
    if isinstance(value, list):
        return [_without_words(item) for item in value]
    return value


def differences(expected: Any, actual: Any, where: str = "$") -> list[str]:
    """Where ``actual`` differs from ``expected``: ints and strings exactly, floats to 1e-12."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        found = []
        for key in expected.keys() | actual.keys():
            if key not in actual:
                found.append(f"{where}.{key}: missing (expected {expected[key]!r})")
            elif key not in expected:
                found.append(f"{where}.{key}: unexpected {actual[key]!r}")
            else:
                found.extend(differences(expected[key], actual[key], f"{where}.{key}"))
        return found
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {expected!r}, got {actual!r}"]
        return [
            problem
            for position, (e, a) in enumerate(zip(expected, actual, strict=True))
            for problem in differences(e, a, f"{where}[{position}]")
        ]
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        if not isinstance(actual, bool) and math.isclose(expected, actual, rel_tol=1e-12):
            return []
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    if type(expected) is not type(actual) or expected != actual:
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    return []
