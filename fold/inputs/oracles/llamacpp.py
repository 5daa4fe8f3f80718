"""llama.cpp: ``llama-server`` ``/metrics`` scrapes and ``/completion`` responses, its
per-request log line, ``llama-speculative-simple`` output, and arm records with its counters.

Facts from the sources vendored in llama-cpp-python 0.3.36: ``/metrics`` prints
``llamacpp:spec_decode_num_drafts_total`` (S), ``..._num_draft_tokens_total`` (P),
``..._num_accepted_tokens_total`` (A) as doubles through ``operator<<``, i.e. six significant
digits (1249380 prints as ``1.24938e+06``), and the per-position series (whole numbers) only
once a request has drafted. A ``/completion`` response's ``timings`` carry ``draft_n`` (P) and
``draft_n_accepted`` (A) only when the request drafted, and no S.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import replace
from typing import Any

from fold.errors import InputError, RefusedError
from fold.inputs import limits
from fold.inputs.oracles import counter_arms, counters
from fold.inputs.oracles.count_checks import ENGINE_MISCOUNTS
from fold.inputs.oracles.figures import (
    ArmFigures,
    arm_from_counts,
)
from fold.inputs.oracles.legs import leg_tok_s, oracle_legs
from fold.inputs.oracles.llamacpp_simple import (
    ACCEPT_N_RE,
    DRAFTED_RE,
    read_speculative_simple,
)
from fold.inputs.oracles.printed import sum_printed_lines
from fold.inputs.oracles.prometheus import Sample, looks_like_scrape
from fold.inputs.oracles.source import OracleFile, Record, arm_tok_s, count, legs_of, positive, warm
from fold.inputs.populations import REQUESTS
from fold.wording import figure

KIND = "llamacpp"
ALIASES = ("llamacpp", "llama.cpp", "llama-cpp", "llama_cpp")
PREFIX = "llamacpp:"
SOURCES = ("scrapes", "speculative_simple", "server_log", "completions", "arm_record")
"""What ``read`` reads, one code per format (``registry.SOURCES`` names them all)."""
SIGNIFICANT_DIGITS = 6  # operator<< on a double, as /metrics prints its counters
PER_REQUEST = "one request's generation speed (predicted_per_second)"
# An arm record with no legs cannot show its tok/s is a leg's: the llama.cpp gate that wrote
# records without legs gave the median predicted_per_second, so it is taken as that kind.
RECORD_WITHOUT_LEGS = (
    "one request's generation speed (an arm record without legs, as the llama.cpp gate wrote "
    "the median predicted_per_second before it kept its legs)"
)

_SERVER_LOG_MARKER = "draft acceptance = "
# The rate is not read (A and P are), but it must be one as printed ("%.5f", nan when nothing
# was generated): a line with anything else there is not llama-server's and is refused.
_SERVER_LOG_RE = re.compile(
    r"draft acceptance = (-?nan|[0-9]+\.[0-9]+) \(\s*(\S+) accepted /\s*(\S+) generated\), "
    r"mean len =\s*(\S+)"
)


def rounded(sample: Sample) -> float:
    """How far a printed counter may be from the true count: half a unit of its sixth digit.

    Whole numbers print exactly below 10^6 (and the per-position counters are integers, printed
    in full); in exponent form only six significant digits survive.
    """
    if "e" not in sample.text.lower() or not math.isfinite(sample.value) or sample.value == 0:
        return 0.0
    exponent = math.floor(math.log10(abs(sample.value)))
    return 0.5 * 10.0 ** (exponent - (SIGNIFICANT_DIGITS - 1))


def sniff(doc: OracleFile) -> bool:
    if doc.form == "text":
        return (
            looks_like_scrape(doc.text, (PREFIX,))
            or bool(DRAFTED_RE.search(doc.text) and ACCEPT_N_RE.search(doc.text))
            or _SERVER_LOG_MARKER in doc.text
        )
    for record, _ in doc.records:
        if str(record.get("engine", "")).strip().lower() in ALIASES:
            return True
        legs = record.get("legs")
        if isinstance(record.get("timings"), dict) or (
            isinstance(legs, list)
            and any(isinstance(leg, dict) and isinstance(leg.get("timings"), dict) for leg in legs)
        ):
            return True
        if any(looks_like_scrape(text, (PREFIX,)) for text in counter_arms.scrape_texts(record)):
            return True
        metrics = record.get("metrics")
        for mapping in (record, metrics, *(metrics.values() if isinstance(metrics, dict) else ())):
            if isinstance(mapping, dict) and counters.mentions(mapping, PREFIX):
                return True
    return False


def read(name: str, doc: OracleFile) -> ArmFigures:
    if doc.form == "text":
        if looks_like_scrape(doc.text, (PREFIX,)):
            return counter_arms.read_scrapes(
                name, doc.text, doc.where, kind=KIND, prefix=PREFIX, bound=rounded
            )
        if DRAFTED_RE.search(doc.text):
            return read_speculative_simple(name, doc, KIND)
        return _read_server_log(name, doc)
    first = doc.record
    if any(isinstance(record.get("timings"), dict) for record, _ in doc.records):
        return _read_completions(name, doc.records, doc.where)
    legs = legs_of(first, doc.where) if doc.form == "object" else None
    if legs and any(isinstance(leg.get("timings"), dict) for leg, _ in legs):
        # the gate's arm record with each leg's /completion timings
        return _read_completions(name, legs, doc.where, tok_s=arm_tok_s(first, doc.where))
    if doc.form != "object":
        raise InputError(f"{doc.where}: several llama.cpp records; give one arm record per file")
    figures = counter_arms.read_record(name, KIND, PREFIX, first, doc.where, bound=rounded)
    if legs is None and figures.output_throughput_tok_s is not None:
        note = (
            f"tok/s is taken as {RECORD_WITHOUT_LEGS}, not a leg's completion tokens over its "
            "wall time as a gate's legs give ours: r and the speed factor against this arm "
            "compare the two kinds; record the legs to compare one kind"
        )
        figures = replace(figures, tok_s_kind=RECORD_WITHOUT_LEGS, notes=(*figures.notes, note))
    return figures


def _read_completions(
    name: str,
    records: list[Record],
    where: str,
    *,
    tok_s: tuple[float | None, str] | None = None,
) -> ArmFigures:
    """``/completion`` responses (or legs holding them): P and A summed, tok/s the median
    ``predicted_per_second`` unless the arm record gives its own (checked against its legs)."""
    # A streamed request's chunks carry "stop": false (or, OpenAI-style, choices not yet
    # finished); only its last one has the timings.
    finals = [(r, w) for r, w in records if not _partial_chunk(r)]
    for record, where in finals:
        timings = record.get("timings")
        if timings is not None and not isinstance(timings, dict):
            fix = "give the response as llama-server wrote it"
            raise limits.WrongKind(where, "timings", timings, "an object", fix)
        if timings is None:
            raise InputError(
                f"{where}: a record without timings among /completion responses; give the "
                "final response of each request (a streamed request's last chunk)"
            )
    selection = warm(finals)
    how = selection.description.replace("records", "responses")
    tok_values = []
    silent = 0
    proposed = accepted = 0
    drafted = 0
    speeds: list[float | None] = []  # each response's, for the bootstrap
    counts: list[dict[str, int | None]] = []
    for record, where in selection.records:
        timings = record["timings"]
        twhere = f"{where}: timings"
        n = timings.get("predicted_n")
        if n is not None and _no_generation_step(timings, count(n, f"{twhere}.predicted_n")):
            # nothing generated (an immediate stop), or only the token prefill gives: no
            # generation step to time, and no drafts either
            silent += 1
            speeds.append(None)
        else:
            tok_values.append(_speed(timings, twhere))
            speeds.append(tok_values[-1])
        p = a = 0  # the server omits draft_n when a request drafted nothing
        if "draft_n" in timings or "draft_n_accepted" in timings:
            p = count(timings.get("draft_n"), f"{twhere}.draft_n")
            a = count(timings.get("draft_n_accepted"), f"{twhere}.draft_n_accepted")
            totals = (("timings.draft_n", p), ("timings.draft_n_accepted", a))
            limits.check_accepted(where, totals, ENGINE_MISCOUNTS)
            proposed, accepted, drafted = proposed + p, accepted + a, drafted + 1
        counts.append({"proposed": p, "accepted": a})
    if not tok_values:
        raise InputError(f"{where}: no response generated a token; there is no speed to compare")
    skipped = f" ({silent} that generated nothing or one token left out)" if silent else ""
    tok_value: float | None = statistics.median(tok_values)
    tok_source = f"median timings.predicted_per_second of {how}{skipped}"
    if tok_s is not None and tok_s[0] is not None:
        tok_value, tok_source = tok_s
        speeds = leg_tok_s(selection.records)  # the legs' tok_s, whose median the arm records
    sources = {
        "tok_s": tok_source,
        "steps": "not recorded: /completion timings carry no verify-step count",
        "per_position": "not recorded: /completion timings carry no per-position counts",
        "completion_tokens_per_step": "not recorded: SGLang's unit only",
    }
    notes = []
    if drafted:
        absent = len(selection.records) - drafted
        note = f" ({absent} without draft_n: the server omits it when a request drafted nothing)"
        sources["proposed"] = f"sum of timings.draft_n over {how}" + (note if absent else "")
        sources["accepted"] = f"sum of timings.draft_n_accepted over {how}" + (
            note if absent else ""
        )
        p_value: int | None = proposed
        a_value: int | None = accepted
    else:
        p_value = a_value = None
        for key in ("proposed", "accepted"):
            sources[key] = "not recorded: no response has draft_n (speculative decoding off?)"
    if tok_s is None or tok_s[0] is None:
        notes.append(
            "tok/s is one request's own generation speed (predicted_per_second, prompt "
            "processing excluded), not a leg's completion tokens over its wall time as a gate's "
            "legs give ours: r and the speed factor against this arm compare the two kinds"
        )
    figures = arm_from_counts(
        name,
        KIND,
        tok_s=tok_value,
        proposed=p_value,
        accepted=a_value,
        sources=sources,
        notes=notes,
        where=where,
        population=selection.population if selection.by_run else REQUESTS,
        population_detail=how,
    )
    kind = None if tok_s is not None and tok_s[0] is not None else PER_REQUEST
    return replace(figures, legs=oracle_legs(speeds, counts if drafted else None), tok_s_kind=kind)


def _no_generation_step(timings: dict[str, Any], predicted_n: int) -> bool:
    """A response with no generation step to time: nothing generated, or the one token the
    prefill gives, which 0.3.36 reports as ``predicted_per_second`` 0 (``n_gen_tps`` over
    ``predicted_n - 1`` steps). Older servers, dividing ``predicted_n``, give such a response
    a speed, which is taken."""
    if predicted_n == 0:
        return True
    return predicted_n == 1 and timings.get("predicted_per_second") == 0


def _speed(timings: dict[str, Any], where: str) -> float:
    """``predicted_per_second``, checked against ``predicted_n`` and ``predicted_ms``.

    The 0.3.36 server divides the generation steps, ``predicted_n - 1``, by ``predicted_ms``
    (the first token comes from prefill: ``n_gen_tps`` in ``tools/server/server-common.h``);
    older servers divide ``predicted_n``. Either is one request's timings.
    """
    tok = positive(timings.get("predicted_per_second"), f"{where}.predicted_per_second")
    n, ms = timings.get("predicted_n"), timings.get("predicted_ms")
    if n is not None and ms is not None:
        n = count(n, f"{where}.predicted_n")
        ms = positive(ms, f"{where}.predicted_ms")
        if not any(math.isclose(tok, 1e3 * tokens / ms, rel_tol=1e-6) for tokens in (n - 1, n)):
            raise RefusedError(
                f"{where}: predicted_per_second = {tok!r} but 1000 x (predicted_n - 1) / "
                f"predicted_ms = {figure(1e3 * (n - 1) / ms)} and 1000 x predicted_n / "
                f"predicted_ms = {figure(1e3 * n / ms)}: the timings are not one request's"
            )
    return tok


def _partial_chunk(record: dict[str, Any]) -> bool:
    if record.get("stop") is False:
        return True
    choices = record.get("choices")
    return (
        isinstance(choices, list)
        and bool(choices)
        and "timings" not in record
        and all(isinstance(c, dict) and c.get("finish_reason") is None for c in choices)
    )


def _read_server_log(name: str, doc: OracleFile) -> ArmFigures:
    """``draft acceptance = R (A accepted / P generated), mean len = L`` per request: A and P
    summed; S from the whole step counts for which 1 + A/S rounds to L (two decimals)."""
    printed = sum_printed_lines(
        doc.text,
        _SERVER_LOG_RE,
        (2, 3, 4),
        doc.where,
        marker=_SERVER_LOG_MARKER,
        fields=("accepted", "generated"),
        no_fit="no whole number of verify steps up to {p} gives mean len = {length} with {a} "
        "accepted: the line is not llama-server's",
    )
    lines = printed.lines
    sources = {
        "accepted": f"sum of 'N accepted' over {lines} draft acceptance lines",
        "proposed": f"sum of 'N generated' over {lines} draft acceptance lines",
        "tok_s": "not recorded: the draft acceptance line carries no tok/s",
        "per_position": "not recorded: the per-position line is printed at trace level only",
    }
    if printed.steps is not None:
        sources["steps"] = (
            "the whole step counts whose 1 + A/S rounds to each line's mean len (two "
            f"decimals), summed over {lines} lines"
        )
    else:
        sources["steps"] = "not recorded: a request that accepted nothing fits any S"
    return arm_from_counts(
        name,
        KIND,
        steps=printed.steps,
        proposed=printed.proposed,
        accepted=printed.accepted,
        sources=sources,
        where=doc.where,
        population=REQUESTS,
        population_detail=f"the {lines} requests logged",
        bounds=printed.bounds,
    )
