"""vLLM (V1 engine): ``/metrics`` scrapes, ``get_metrics()``-style arm records, ``vllm bench
serve --save-result`` files, and the periodic ``SpecDecoding metrics:`` log line.

Facts from the released sources (vLLM 0.33): the counters are ``vllm:spec_decode_num_drafts``
(S), ``..._num_draft_tokens`` (P), ``..._num_accepted_tokens`` (A) and
``..._num_accepted_tokens_per_pos`` (label ``position``), one series per engine core; a scrape
adds ``_total`` and ``_created``. The gate's capture writes ``get_metrics()`` values by their
registered names (no ``_total``), the per-position Vector as ``null``, after the last leg.
``bench serve`` writes flat ``spec_decode_*`` keys, the difference of two scrapes around the run.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from typing import Any

from fold.errors import InputError
from fold.inputs import limits
from fold.inputs.acceptance import TRIPLE
from fold.inputs.oracles import counter_arms, counters
from fold.inputs.oracles.figures import (
    ArmFigures,
    arm_from_counts,
)
from fold.inputs.oracles.printed import sum_printed_lines
from fold.inputs.oracles.prometheus import looks_like_scrape
from fold.inputs.oracles.source import (
    OracleFile,
    Record,
    Run,
    count,
    one_workload,
    positive,
    runs_of,
)
from fold.inputs.oracles.vllm_speculative import read_setting
from fold.inputs.populations import INTERVAL, SINCE_START

KIND = "vllm"
ALIASES = ("vllm",)
PREFIX = "vllm:"
SOURCES = ("scrapes", "log", "bench", "arm_record")
"""What ``read`` reads, one code per format (``registry.SOURCES`` names them all)."""

_BENCH_KEYS = (
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
)
# Keys of a bench result that define its workload: runs pooled from one file must share them.
_WORKLOAD_KEYS = ("model_id", "backend", "max_concurrency", "request_rate", "num_prompts")
_LOG_MARKER = "SpecDecoding metrics:"
# Each value is captured as printed, whatever it holds: limits refuses one of the wrong kind.
_LOG_RE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<length>[^,\s]+),.*?"
    r"Accepted: (?P<accepted>\S+) tokens, Drafted: (?P<drafted>\S+) tokens"
)


def sniff(doc: OracleFile) -> bool:
    if doc.form == "text":
        return looks_like_scrape(doc.text, (PREFIX,)) or _LOG_MARKER in doc.text
    return any(_claims(record) for record, _ in doc.records)


def _claims(record: dict[str, Any]) -> bool:
    if str(record.get("engine", "")).strip().lower() == KIND:
        return True
    if _is_bench(record) or _is_throughput_bench(record):
        return True
    return any(counters.mentions(snapshot, PREFIX) for snapshot in _mappings(record)) or any(
        looks_like_scrape(text, (PREFIX,)) for text in counter_arms.scrape_texts(record)
    )


def _is_bench(record: dict[str, Any]) -> bool:
    return any(key in record for key in _BENCH_KEYS) or (
        "model_id" in record and "endpoint_type" in record and "output_throughput" in record
    )


def _is_throughput_bench(record: dict[str, Any]) -> bool:
    return "tokens_per_second" in record and "elapsed_time" in record


def _mappings(record: dict[str, Any]) -> list[Any]:
    metrics = record.get("metrics")
    found: list[Any] = [record]
    if isinstance(metrics, dict):
        found.append(metrics)
        found.extend(v for k, v in metrics.items() if k in ("before", "after"))
    return [m for m in found if isinstance(m, dict)]


def runs(doc: OracleFile) -> list[Run] | None:
    """The runs of a ``vllm bench serve`` file (``--append-result`` writes one per line)."""
    return runs_of(doc, _is_bench, _WORKLOAD_KEYS)


def read(name: str, doc: OracleFile) -> ArmFigures:
    if doc.form == "text":
        if looks_like_scrape(doc.text, (PREFIX,)):
            return counter_arms.read_scrapes(name, doc.text, doc.where, kind=KIND, prefix=PREFIX)
        return _read_log(name, doc)
    first = doc.record
    if _is_throughput_bench(first):
        raise InputError(
            f"{doc.where}: a `vllm bench throughput` result: its tokens_per_second counts prompt "
            "and output tokens and it holds no speculative-decoding figures; give `vllm bench "
            "serve --save-result` output, the gate's arm record or /metrics scrapes"
        )
    if all(_is_bench(record) for record, _ in doc.records):
        return _read_bench(name, doc.records, doc.where)
    if doc.form != "object":
        raise InputError(
            f"{doc.where}: several vLLM records that are not `vllm bench serve` results; give "
            "one arm record per file"
        )
    figures = counter_arms.read_record(name, KIND, PREFIX, first, doc.where)
    # the capture script writes the config the run was made with; a synthetic one makes it
    # an arm run at a chosen acceptance (fold.compare.matched_arms)
    return dataclasses.replace(figures, speculative=read_setting(first, doc.where))


def _read_bench(name: str, records: list[Record], where: str) -> ArmFigures:
    """``vllm bench serve --save-result``: one run, or one per line with ``--append-result``.

    Several runs are pooled (counts summed, tok/s their median) only when they ran the same
    workload."""
    one_workload(records, _WORKLOAD_KEYS)
    tok_values = [
        positive(r.get("output_throughput"), f"{w}: output_throughput") for r, w in records
    ]
    tok_s = statistics.median(tok_values)
    runs = f"{len(records)} runs" if len(records) > 1 else "the run"
    tok_s_source = (
        "output_throughput" if len(records) == 1 else f"median output_throughput of {runs}"
    )
    with_spec = [r for r, _ in records if any(k in r for k in _BENCH_KEYS)]
    sources: dict[str, str] = {"tok_s": tok_s_source}
    notes: list[str] = []
    if len(with_spec) != len(records):
        if with_spec:
            raise InputError(
                f"{where}: some runs have spec_decode_* figures and some do not; keep runs of "
                "one server configuration per file"
            )
        for key in ("steps", "proposed", "accepted", "per_position"):
            sources[key] = "not recorded: no spec_decode_* keys (speculative decoding off?)"
        return arm_from_counts(
            name, KIND, tok_s=tok_s, sources=sources, where=where, population=INTERVAL,
            population_detail=f"{runs} of vllm bench serve",
        )  # fmt: skip
    count_keys = (
        "spec_decode_num_drafts",
        "spec_decode_draft_tokens",
        "spec_decode_accepted_tokens",
    )
    present = [sum(r.get(k) is not None for k in count_keys) for r, _ in records]
    if not any(present):
        return _bench_ratios_only(name, records, where, tok_s, sources)
    if any(n != len(count_keys) for n in present):
        partial = next(w for (_, w), n in zip(records, present, strict=True) if n < len(count_keys))
        raise InputError(
            f"{partial}: some of {', '.join(count_keys)} are missing while other runs (or keys) "
            "have them; give every run's counts"
        )
    steps = proposed = accepted = 0
    per_pos: list[int] | None = []
    for record, rwhere in records:
        s = count(record.get("spec_decode_num_drafts"), f"{rwhere}: spec_decode_num_drafts")
        p = count(record.get("spec_decode_draft_tokens"), f"{rwhere}: spec_decode_draft_tokens")
        a = count(
            record.get("spec_decode_accepted_tokens"), f"{rwhere}: spec_decode_accepted_tokens"
        )
        # built for its checks only: the run's recorded ratios must come out of its counts
        arm_from_counts(
            name,
            KIND,
            steps=s,
            proposed=p,
            accepted=a,
            accept_rate=_percent(record, rwhere),
            mean_acceptance_length=_optional(record, "spec_decode_acceptance_length", rwhere),
            labels={
                "steps": "spec_decode_num_drafts",
                "proposed": "spec_decode_draft_tokens",
                "accepted": "spec_decode_accepted_tokens",
                "accept_rate": "spec_decode_acceptance_rate / 100",
                "mean_acceptance_length": "spec_decode_acceptance_length",
            },
            where=rwhere,
        )
        steps, proposed, accepted = steps + s, proposed + p, accepted + a
        positions = _positions(record, s, rwhere)
        if per_pos is not None and positions is not None:
            if len(per_pos) < len(positions):
                per_pos += [0] * (len(positions) - len(per_pos))
            for i, c in enumerate(positions):
                per_pos[i] += c
        else:
            per_pos = None
    how = "" if len(records) == 1 else f" summed over {runs}"
    sources.update(
        steps=f"spec_decode_num_drafts{how}",
        proposed=f"spec_decode_draft_tokens{how}",
        accepted=f"spec_decode_accepted_tokens{how}",
        per_position=(
            f"spec_decode_per_position_acceptance_rates x spec_decode_num_drafts{how}"
            if per_pos is not None
            else "not recorded: no spec_decode_per_position_acceptance_rates"
        ),
    )
    return arm_from_counts(
        name,
        KIND,
        tok_s=tok_s,
        steps=steps,
        proposed=proposed,
        accepted=accepted,
        per_position=per_pos,
        sources=sources,
        notes=notes,
        where=where,
        population=INTERVAL,
        population_detail=(
            f"{runs} of vllm bench serve (the difference of two scrapes around each run)"
        ),
    )


def _bench_ratios_only(
    name: str, records: list[Record], where: str, tok_s: float, sources: dict[str, str]
) -> ArmFigures:
    """A result whose backend exposed no aggregate counters: only the ratios it recorded."""
    if len(records) > 1:
        raise InputError(
            f"{where}: {len(records)} runs with acceptance ratios but no counts: ratios of "
            "several runs cannot be pooled without their counts; keep one run per file"
        )
    record, rwhere = records[0]
    for key in TRIPLE:
        sources[key] = "not recorded: the result holds ratios, not spec_decode_* counts"
    sources["per_position"] = "not recorded: per-position rates without spec_decode_num_drafts"
    return arm_from_counts(
        name,
        KIND,
        tok_s=tok_s,
        accept_rate=_percent(record, rwhere),
        mean_acceptance_length=_optional(record, "spec_decode_acceptance_length", rwhere),
        sources=sources,
        labels={
            "accept_rate": "spec_decode_acceptance_rate / 100",
            "mean_acceptance_length": "spec_decode_acceptance_length",
        },
        where=where,
        population=INTERVAL,
        population_detail="the run of vllm bench serve (the difference of two scrapes around it)",
    )


def _optional(record: dict[str, Any], key: str, where: str) -> float | None:
    value = record.get(key)
    return None if value is None else positive(value, f"{where}: {key}")


def _percent(record: dict[str, Any], where: str) -> float | None:
    value = record.get("spec_decode_acceptance_rate")
    if value is None:
        return None
    field = "spec_decode_acceptance_rate"
    percent = limits.finite_number(where, field, value, "give the result as vLLM wrote it")
    if not 0 <= percent <= 100:
        raise InputError(f"{where}: {field} = {limits.json_shown(value)} is outside 0..100")
    return percent / 100


def _positions(record: dict[str, Any], steps: int, where: str) -> list[int] | None:
    rates = record.get("spec_decode_per_position_acceptance_rates")
    if rates is None:
        return None
    key = f"{where}: spec_decode_per_position_acceptance_rates"
    fix = "give the result as vLLM wrote it"
    if not isinstance(rates, list):
        raise limits.WrongKind(key, "", rates, "a list of fractions", fix)
    counts = []
    for i, given in enumerate(rates):
        rate = limits.finite_number(key, f"[{i}]", given, fix)
        if not 0 <= rate <= 1:
            raise InputError(f"{key}[{i}] = {limits.json_shown(given)} is outside 0..1")
        exact = rate * steps
        whole = round(exact)
        # vLLM divides a whole count by S; anything else is not its output.
        if abs(exact - whole) > 1e-6 * max(1, steps):
            raise InputError(
                f"{key}[{i}] = {rate!r} times spec_decode_num_drafts = {steps} is {exact:.6g}, "
                "not a whole number of steps: the rates do not belong to these counts"
            )
        counts.append(whole)
    return counts


def _read_log(name: str, doc: OracleFile) -> ArmFigures:
    """``SpecDecoding metrics:`` lines: A and P per logging interval, summed exactly.

    The line prints no S, only ``1 + A/S`` to two decimals; S of each interval is the range of
    whole step counts that round to it (and no more than P), so the pooled S is given with the
    bound of that range, or not at all when an interval accepted nothing (1.00 fits any S).
    """
    printed = sum_printed_lines(
        doc.text,
        _LOG_RE,
        ("accepted", "drafted", "length"),
        doc.where,
        marker=_LOG_MARKER,
        fields=("Accepted", "Drafted"),
        no_fit="no whole number of drafts up to {p} gives a mean acceptance length of {length} "
        "with Accepted: {a}: the line is not vLLM's",
    )
    lines = printed.lines
    sources = {
        "accepted": f"sum of 'Accepted: N tokens' over {lines} SpecDecoding metrics lines",
        "proposed": f"sum of 'Drafted: N tokens' over {lines} SpecDecoding metrics lines",
        "tok_s": "not recorded: the log line's throughputs are accepted and drafted tokens/s",
        "per_position": "not recorded: the log line rounds per-position rates to 3 decimals",
    }
    if printed.steps is not None:
        sources["steps"] = (
            "the whole step counts whose 1 + A/S rounds to each line's mean acceptance length "
            f"(two decimals), summed over {lines} lines"
        )
    else:
        sources["steps"] = (
            "not recorded: an interval that accepted nothing prints 1.00 for any number of steps"
        )
    return arm_from_counts(
        name,
        KIND,
        steps=printed.steps,
        proposed=printed.proposed,
        accepted=printed.accepted,
        sources=sources,
        where=doc.where,
        population=SINCE_START,
        population_detail=f"the {lines} logging intervals in the file",
        bounds=printed.bounds,
    )
