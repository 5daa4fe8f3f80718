"""llama.cpp's ``llama-speculative-simple`` (and ``llama-speculative``) output: ``n_drafted``
(P), ``n_accept`` (A), the ``accept = X%`` and ``decoded ... speed`` lines per run, and, at
trace level, the drafters' statistics line with the time spent drafting.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import replace
from typing import Any

from fold.errors import InputError, RefusedError
from fold.inputs import limits
from fold.inputs.oracles.count_checks import ENGINE_MISCOUNTS
from fold.inputs.oracles.figures import ORACLE_COUNT_WHAT_TO_DO, ArmFigures, arm_from_counts
from fold.inputs.oracles.source import OracleFile
from fold.inputs.populations import REQUESTS

PER_SEQUENCE = "one sequence's decode speed (the 'decoded ... speed' line)"

# The lines may carry a log prefix (timestamp, level) before the name.
# A count is captured as printed, whatever it holds, so a line with a value of the wrong kind is
# refused by limits.decimal_count rather than passed over.
DRAFTED_RE = re.compile(r"^.*?\bn_drafted\s*=\s*(\S+)\s*$", re.M)
ACCEPT_N_RE = re.compile(r"^.*?\bn_accept\s*=\s*(\S+)\s*$", re.M)
_ACCEPT_PCT_RE = re.compile(r"^.*?\baccept\s*=\s*(\S+)%\s*$", re.M)
_DECODED_MARK = re.compile(r"\bdecoded\s.*\bspeed:")
_DECODED_RE = re.compile(r"decoded\s+(\S+) tokens in\s+(\S+) seconds, speed:\s+(\S+) t/s")
# The drafters' statistics line (common_speculative_print_stats, a trace-level line: -lv 4):
# calls to begin, generate and accept, then the milliseconds spent in each, as totals. 0.3.36
# prints the durations with std::fixed and precision 3 ("18.843"; "inf", "nan", "-nan" for a
# value that is none); a printf of another version may write "%g" or "%e" forms ("1.8843e+04").
# A line naming #calls(b,g,a) or dur(b,g,a) is held to this shape: read, or refused by file
# and line. A line without dur(b,g,a) (a drafter that keeps no timings) carries no time.
_DRAFT_STATS_MARK = re.compile(r"#calls\(b,g,a\)|dur\(b,g,a\)")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)(?:\([^)]*\))?"
_DRAFT_STATS_RE = re.compile(
    r"statistics\s+(\S+): #calls\(b,g,a\) =\s*(\d+)\s+(\d+)\s+(\d+),(.*)$", re.I
)
_DRAFT_DURATIONS_RE = re.compile(
    rf",\s*dur\(b,g,a\) = ({_NUMBER}), ({_NUMBER}), ({_NUMBER}) ms\s*$", re.I
)


def _speeds(doc: OracleFile) -> list[float]:
    """Each ``decoded N tokens in T seconds, speed: X t/s`` line's speed. A line that begins as
    one (``decoded ... speed:``) but does not read as one, or whose values are not numbers as
    printed, is refused by file and line (exit 2), never passed over."""
    fix = "give the program's output as printed"
    speeds = []
    for number, line in enumerate(doc.text.splitlines(), start=1):
        if not _DECODED_MARK.search(line):
            continue
        where = f"{doc.where}:{number}"
        found = _DECODED_RE.search(line)
        if found is None:
            raise InputError(f"{where}: a 'decoded' line that cannot be read: {fix}")
        limits.decimal_count(found.group(1), where, "decoded tokens", fix)
        limits.printed_number(found.group(2), where, "seconds", fix)
        speeds.append(limits.printed_number(found.group(3), where, "speed", fix))
    return speeds


def read_speculative_simple(name: str, doc: OracleFile, kind: str) -> ArmFigures:
    """``llama-speculative-simple`` / ``llama-speculative``: ``n_drafted`` (P), ``n_accept``
    (A) and the ``decoded ... speed: X t/s`` line, per run printed; several runs are pooled."""
    drafted, accepted = (
        [
            limits.decimal_count(text, f"{doc.where}: run {i + 1}", key, ORACLE_COUNT_WHAT_TO_DO)
            for i, text in enumerate(pattern.findall(doc.text))
        ]
        for pattern, key in ((DRAFTED_RE, "n_drafted"), (ACCEPT_N_RE, "n_accept"))
    )
    speeds = _speeds(doc)
    if len(drafted) != len(accepted):
        raise InputError(
            f"{doc.where}: {len(drafted)} n_drafted lines but {len(accepted)} n_accept lines; "
            "give the program's complete output"
        )
    for i, (p, a) in enumerate(zip(drafted, accepted, strict=True)):
        totals = (("n_drafted", p), ("n_accept", a))
        limits.check_accepted(f"{doc.where}: run {i + 1}", totals, ENGINE_MISCOUNTS)
    for i, (text_pct, p, a) in enumerate(
        zip(_ACCEPT_PCT_RE.findall(doc.text), drafted, accepted, strict=False)
    ):
        if not p:  # a run that drafted nothing prints a nan or inf percentage
            continue
        percent = limits.printed_number(
            text_pct, f"{doc.where}: run {i + 1}", "accept", "give the program's output as printed"
        )
        if abs(percent - 100 * a / p) > 0.001:
            raise RefusedError(
                f"{doc.where}: run {i + 1}: accept = {text_pct}% but 100 x n_accept / n_drafted "
                f"= {100 * a / p:.3f}%: the lines come from different runs"
            )
    runs = len(drafted)
    tok_s = None
    tok_source = "not recorded: no 'decoded N tokens in T seconds, speed: X t/s' line"
    if speeds:
        if len(speeds) != runs:
            raise InputError(
                f"{doc.where}: {len(speeds)} 'decoded' lines but {runs} n_drafted lines; give "
                "the program's complete output"
            )
        tok_s = statistics.median(speeds)
        tok_source = (
            "the 'decoded ... speed' line (printed to 3 decimals)"
            if runs == 1
            else f"median of the 'decoded ... speed' lines of {runs} runs (3 decimals each)"
        )
    of = "" if runs == 1 else f" summed over {runs} runs"
    figures = arm_from_counts(
        name,
        kind,
        tok_s=tok_s,
        proposed=sum(drafted),
        accepted=sum(accepted),
        sources={
            "tok_s": tok_source,
            "proposed": f"n_drafted{of}",
            "accepted": f"n_accept{of}",
            "steps": "not recorded: the program prints no verify-step count",
            "per_position": "not recorded: the program prints no per-position counts",
        },
        notes=[]
        if tok_s is None
        else [
            "tok/s is one sequence's decode speed (the 'decoded ... speed' line, prompt "
            "processing excluded), not a leg's completion tokens over its wall time as a "
            "gate's legs give ours: r and the speed factor against this arm compare the two kinds"
        ],
        where=doc.where,
        population=REQUESTS,
        population_detail=f"the {runs} run(s) printed",
    )
    return replace(
        figures,
        draft_overhead=_draft_overhead(doc),
        tok_s_kind=None if tok_s is None else PER_SEQUENCE,
    )


def _draft_overhead(doc: OracleFile) -> dict[str, Any] | None:
    """The drafters' generate time and calls, summed over the statistics lines printed (one
    per drafter per run); None when the output has none (printed at -lv 4 or more only)."""
    calls, milliseconds, lines = 0, 0.0, 0
    for number, text in enumerate(doc.text.splitlines(), 1):
        if not _DRAFT_STATS_MARK.search(text):
            continue
        where = f"{doc.where}:{number}"
        found = _DRAFT_STATS_RE.search(text)
        if found is None:
            raise InputError(
                f"{where}: a drafter statistics line (-lv 4) of a shape this reader does not "
                "know: want 'statistics NAME: #calls(b,g,a) = B G A, ..., dur(b,g,a) = B, G, A "
                "ms' (llama.cpp's common_speculative_print_stats)"
            )
        rest = found.group(5)
        if "dur(b,g,a)" not in rest:
            continue  # the drafter keeps no timings: nothing to add
        durations = _DRAFT_DURATIONS_RE.search(rest)
        if durations is None:
            raise InputError(
                f"{where}: the drafter statistics line's dur(b,g,a) does not read: want "
                "'dur(b,g,a) = B, G, A ms', three numbers of milliseconds"
            )
        generate_ms = durations.group(2)
        fix = "give the statistics line as printed"
        value = limits.printed_number(generate_ms.split("(")[0], where, "dur g", fix)
        if value < 0:
            raise InputError(f"{where}: dur g = {generate_ms} ms is negative; {fix}")
        calls += limits.decimal_count(
            found.group(3), f"{where}: drafter statistics", "#calls g", ORACLE_COUNT_WHAT_TO_DO
        )
        milliseconds += value
        lines += 1
    if not lines or calls == 0:
        return None
    if not math.isfinite(milliseconds):
        raise InputError(f"{doc.where}: the drafters' dur g lines sum past any finite duration")
    return {
        "draft_s": milliseconds / 1e3,
        "draft_calls": calls,
        "draft_s_per_call": milliseconds / 1e3 / calls,
        "source": f"the generate time of {lines} drafter statistics line(s) (-lv 4): "
        "without the draft model's pass over the verified batch",
    }
