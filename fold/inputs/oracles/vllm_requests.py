"""vLLM's per-request spec-decode metrics (vLLM 0.32, ``per_request_spec_decode_metrics``):
offline outputs dumped one per line, and ``vllm serve`` ``/v1/completions`` response bodies.

Facts from the released sources (vLLM 0.32.0, ``vllm/v1/metrics/stats.py``
``RequestSpecDecodeMetrics``, filled in ``vllm/v1/core/sched/scheduler.py``
``update_from_output``, served as ``SpeculativeDecodingMetrics`` in
``vllm/entrypoints/generate/base/protocol.py``): per output sequence, each verify step that had
scheduled drafts calls ``observe(num_draft_tokens, num_accepted)`` once, with the drafts less
those grammar invalidated; ``to_dict()`` writes

* ``acceptance_histogram``: ``[j]`` = steps that accepted exactly j drafts, length
  ``num_spec_tokens + 1`` (k + 1, the configured k);
* ``num_spec_steps`` = the histogram's sum (S), ``num_accepted_draft_tokens`` = its weight
  ``sum j x [j]`` (A), ``num_draft_tokens`` (P), ``num_spec_tokens`` (k);
* ``mean_acceptance_length`` = ``1 + A/S`` (1.0 when S = 0), ``draft_acceptance_rate`` = ``A/P``
  (0.0 when P = 0), full precision;
* with ``detailed`` only, ``per_step_accepted`` and ``per_step_drafted``: one entry per step, in
  order (left out when empty; the served body writes them null).

Offline, ``LLM(..., per_request_spec_decode_metrics=...)`` puts it on each single-sequence
output as ``spec_decode_metrics``; the capture (``examples/vllm/offline.py``) writes one line per
output with its leg. Served, each non-streamed response (and a stream's final usage chunk)
carries it as ``metrics.speculative_decoding``. Every invariant these definitions imply is
checked and a record that breaks one is refused with its place and field.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from fold.errors import InputError, RefusedError
from fold.inputs import limits
from fold.inputs.acceptance import accepted_at_position
from fold.inputs.leg_sums import Leg
from fold.inputs.oracles.figures import ArmFigures, arm_from_counts
from fold.inputs.oracles.request_steps import (
    DETAILED,
    SUMMARY,
    OracleLeg,
    OracleRequest,
    OracleSteps,
)
from fold.inputs.oracles.source import OracleFile, Record, count, positive
from fold.inputs.oracles.vllm_request_metrics import FIX, read_metrics
from fold.inputs.populations import REQUESTS, WARM_LEGS

KIND = "vllm"
ALIASES = ()
SOURCES = ("requests",)
"""What ``read`` reads, one code per format (``registry.SOURCES`` names them all)."""
OFFLINE_KEY = "spec_decode_metrics"
SERVED_KEY = "speculative_decoding"
SOURCE = "vLLM's per-request spec_decode_metrics"


def _metrics_of(record: Mapping[str, Any]) -> tuple[bool, Any]:
    """Whether the record has a place for the metrics, and what is there."""
    if OFFLINE_KEY in record:
        return True, record[OFFLINE_KEY]
    metrics = record.get("metrics")
    if isinstance(metrics, dict) and SERVED_KEY in metrics:
        return True, metrics[SERVED_KEY]
    return False, None


def sniff(doc: OracleFile) -> bool:
    """Records with a place for vLLM's per-request metrics (null ones too: they are refused
    with what to turn on, not left to "cannot tell the engine")."""
    if doc.form == "text":
        return False
    return any(_metrics_of(record)[0] for record, _ in doc.records)


def read(name: str, doc: OracleFile) -> ArmFigures:
    steps = read_steps(doc)
    return arm_figures(name, steps)


# --------------------------------------------------------------------------------------------
# One record
# --------------------------------------------------------------------------------------------


def _request_id(record: Mapping[str, Any], where: str) -> str:
    for key in ("request_id", "id"):
        value = record.get(key)
        if value is None:
            continue
        if isinstance(value, str) or limits.is_int(value):
            return str(value)
        raise limits.WrongKind(where, key, value, "a string or an integer", "give the request's id")
    raise InputError(
        f"{where}: no request_id (offline output) or id (response body); every request must "
        "be named so none is counted twice"
    )


def _completion_tokens(record: Mapping[str, Any], where: str) -> int:
    value = record.get("completion_tokens")
    key = "completion_tokens"
    usage = record.get("usage")
    if value is None and isinstance(usage, dict):
        value, key = usage.get("completion_tokens"), "usage.completion_tokens"
    if value is None:
        raise InputError(
            f"{where}: no completion_tokens (or usage.completion_tokens): the output's length is "
            "needed for its tokens per step; write it beside the metrics"
        )
    return count(value, f"{where}: {key}")


def _finish_reason(record: Mapping[str, Any], where: str) -> str | None:
    reason = record.get("finish_reason")
    choices = record.get("choices")
    if reason is None and isinstance(choices, list) and choices and isinstance(choices[0], dict):
        reason = choices[0].get("finish_reason")
    if reason is None:
        return None
    return limits.string(where, "finish_reason", reason, "give it as vLLM wrote it")


def _request(record: Mapping[str, Any], where: str) -> tuple[OracleRequest, int]:
    _, metrics = _metrics_of(record)
    field = OFFLINE_KEY if OFFLINE_KEY in record else f"metrics.{SERVED_KEY}"
    found = read_metrics(metrics, f"{where}: {field}")
    completion = _completion_tokens(record, where)
    if found["steps"] and completion < found["steps"] + 1:
        raise RefusedError(
            f"{where}: completion_tokens = {completion} but num_spec_steps = {found['steps']}: "
            "the prefill gives one token and every verify step at least one more, so the "
            f"output has at least {found['steps'] + 1}; {FIX}"
        )
    # a request that never verified has no steps to list (vLLM leaves the arrays out)
    per_step = found["per_step"] or (((), ()) if not found["steps"] else None)
    request = OracleRequest(
        id=_request_id(record, where),
        where=where,
        steps=found["steps"],
        proposed=found["proposed"],
        accepted_total=found["accepted"],
        histogram=found["histogram"],
        accepted=None if per_step is None else per_step[0],
        drafted=None if per_step is None else per_step[1],
        completion_tokens=completion,
        finish_reason=_finish_reason(record, where),
    )
    return request, found["k"]


# --------------------------------------------------------------------------------------------
# The file: requests, legs, the level
# --------------------------------------------------------------------------------------------


def _finished(doc: OracleFile) -> list[Record]:
    """The records that carry the metrics. A saved stream's chunks share the response's id and
    only its final usage chunk carries them: the others are set aside. A record with nowhere
    for the metrics and no stream to belong to is refused."""
    carried = {id(record) for record, _ in doc.records if _metrics_of(record)[0]}
    ids_with = {
        record.get("id") for record, _ in doc.records if id(record) in carried and "id" in record
    }
    kept = []
    for record, where in doc.records:
        has, metrics = _metrics_of(record)
        if has:
            if metrics is None:
                raise InputError(
                    f"{where}: {OFFLINE_KEY if OFFLINE_KEY in record else 'metrics.' + SERVED_KEY}"
                    " is null: vLLM fills it only for single-sequence requests (n = 1) with "
                    "per_request_spec_decode_metrics summary or detailed; rerun with it on"
                )
            kept.append((record, where))
        elif record.get("id") is not None and record.get("id") in ids_with:
            continue  # a chunk of a stream whose final chunk carries the metrics
        else:
            raise InputError(
                f"{where}: no {OFFLINE_KEY} and no metrics.{SERVED_KEY} while other records have "
                "them: a request without vLLM's per-request metrics cannot be counted; start "
                "vllm serve with --per-request-spec-decode-metrics (offline: "
                "per_request_spec_decode_metrics=...) and capture every request"
            )
    return kept


_LEG_WHAT_TO_DO = "give the leg's index (0, 1, ...), its run (1, 2, ...) and its seconds"


def _leg_key(record: Mapping[str, Any], where: str, position: int) -> int:
    value = record.get("leg")
    if value is None:
        return position
    return limits.count(where, "leg", value, _LEG_WHAT_TO_DO)


def _run(record: Mapping[str, Any], where: str) -> int | None:
    value = record.get("run")
    if value is None:
        return None
    return limits.run(where, "run", value, _LEG_WHAT_TO_DO)


def _optional_positive(record: Mapping[str, Any], key: str, where: str) -> float | None:
    value = record.get(key)
    if value is None:
        return None
    found = positive(value, f"{where}: {key}")
    if key == "secs":
        limits.check_window(where, "secs", found, _LEG_WHAT_TO_DO)
    return found


def _same(values: Sequence[tuple[Any, str]], key: str, leg: int) -> Any:
    first, first_where = values[0]
    for value, where in values[1:]:
        if value != first:
            raise InputError(
                f"{where}: {key} = {value!r} but {first_where} gives {first!r} for the same leg "
                f"{leg}; a leg's fields must agree on each of its requests"
            )
    return first


def read_steps(doc: OracleFile) -> OracleSteps:
    """Every request of the file with its leg, checked; the legs in index order."""
    if doc.form == "text":
        raise InputError(f"{doc.where}: not JSON records of vLLM's per-request metrics")
    records = _finished(doc)
    seen: dict[str, str] = {}
    grouped: dict[int, list[tuple[OracleRequest, Mapping[str, Any], str]]] = {}
    spec_tokens: tuple[int, str] | None = None
    for position, (record, where) in enumerate(records):
        request, k = _request(record, where)
        if spec_tokens is None:
            spec_tokens = (k, where)
        elif k != spec_tokens[0]:
            raise RefusedError(
                f"{where}: num_spec_tokens = {k} but {spec_tokens[1]} has {spec_tokens[0]}: the "
                "requests come from engines with different k; give one configuration per file"
            )
        if request.id in seen:
            raise InputError(
                f"{where}: request {request.id!r} again (first at {seen[request.id]}): a request "
                "counted twice would weigh twice; keep each output once"
            )
        seen[request.id] = where
        grouped.setdefault(_leg_key(record, where, position), []).append((request, record, where))
    assert spec_tokens is not None  # sniffed: some record carries the metrics
    level = _level(records, grouped)
    for key in ("run", "leg"):
        given = [record.get(key) is not None for record, _ in records]
        if any(given) and not all(given):
            missing = next(w for (_, w), has in zip(records, given, strict=True) if not has)
            raise InputError(
                f"{missing}: no {key} field while other records have one; give {key} on every "
                "record or on none"
            )
    runs_given = [_run(record, where) is not None for record, where in records]
    by_run = all(runs_given)
    legs = []
    for index, leg_key in enumerate(sorted(grouped)):
        members = grouped[leg_key]
        run = _same([(_run(r, w), w) for _, r, w in members], "run", leg_key)
        tok_s = _same([(_optional_positive(r, "tok_s", w), w) for _, r, w in members], "tok_s",
                      leg_key)  # fmt: skip
        secs = _same([(_optional_positive(r, "secs", w), w) for _, r, w in members], "secs",
                     leg_key)  # fmt: skip
        legs.append(
            OracleLeg(
                index=index,
                label=None if members[0][1].get("leg") is None else str(leg_key),
                where=members[0][2],
                run=run,
                warm=(run or 0) > 1 if by_run else True,
                tok_s=tok_s,
                secs=secs,
                requests=tuple(request for request, _, _ in members),
            )
        )
    if by_run and not any(leg.warm for leg in legs):
        raise RefusedError(
            f"{doc.where}: every leg has run 1: all are cold legs, so there is no warm figure to "
            "compare"
        )
    return OracleSteps(
        source=SOURCE,
        where=doc.where,
        level=level,
        max_draft=spec_tokens[0],
        predicate="run > 1" if by_run else "every leg (no record has a run field)",
        legs=tuple(legs),
    )


def _level(records: list[Record], grouped: Mapping[int, list[Any]]) -> str:
    """Detailed when every request that verified carries its steps, summary when none does;
    vLLM sets one level per engine, so a mix is two captures in one file."""
    verified = [request for members in grouped.values() for request, _, _ in members
                if request.steps]  # fmt: skip
    with_steps = [request for request in verified if request.accepted is not None]
    if with_steps and len(with_steps) != len(verified):
        lacking = next(request for request in verified if request.accepted is None)
        raise InputError(
            f"{lacking.where}: no per_step_accepted / per_step_drafted while {with_steps[0].where} "
            "has them: the file mixes the summary and detailed levels (two engines); give one "
            "capture per file"
        )
    if not verified:
        raise RefusedError(
            f"{records[0][1]}: no request made a verify step (num_spec_steps = 0 on every one): "
            "the drafter never proposed, so there is no acceptance to compare"
        )
    return DETAILED if with_steps else SUMMARY


# --------------------------------------------------------------------------------------------
# The arm's figures
# --------------------------------------------------------------------------------------------


def arm_figures(name: str, steps: OracleSteps) -> ArmFigures:
    """The totals over the warm legs (vLLM's own S, P, A and per-position counts, summed over
    the requests), tok/s their legs' median, and the legs and steps for the later stages."""
    warm = steps.warm_legs
    requests = [request for leg in warm for request in leg.requests]
    histogram = [sum(request.histogram[j] for request in requests)
                 for j in range(steps.max_draft + 1)]  # fmt: skip
    speeds = [leg.tok_s for leg in warm if leg.tok_s is not None]
    if len(speeds) == len(warm):
        tok_s: float | None = statistics.median(speeds)
        tok_source = f"median tok_s of the {len(warm)} warm legs ({steps.predicate})"
    else:
        tok_s = None
        tok_source = (
            "not recorded: no tok_s on the legs (a response body records no client-side "
            "speed; the capture adds it)"
        )
    how = f"summed over the {len(requests)} requests of {len(warm)} warm legs"
    level = f"{SOURCE} ({steps.level})"
    sources = {
        "tok_s": tok_source,
        "steps": f"{level}: num_spec_steps {how}",
        "proposed": f"{level}: num_draft_tokens {how}",
        "accepted": f"{level}: num_accepted_draft_tokens {how}",
        "per_position": f"{level}: acceptance_histogram, steps with j > i, {how}",
        "completion_tokens_per_step": f"completion_tokens / num_spec_steps {how}",
    }
    completion = sum(request.completion_tokens for request in requests)
    undrafted = sum(
        1 for request in requests if request.drafted is not None for d in request.drafted if not d
    )
    notes = []
    if undrafted:
        notes.append(
            f"{undrafted} verify step(s) drafted nothing once a grammar invalidated their drafts: "
            "vLLM counts them in S (num_spec_steps); the step figures, as ours, count only "
            "steps that verified a draft"
        )
    figures = arm_from_counts(
        name,
        KIND,
        tok_s=tok_s,
        steps=sum(request.steps for request in requests),
        proposed=sum(request.proposed for request in requests),
        accepted=sum(request.accepted_total for request in requests),
        per_position=accepted_at_position(histogram),
        completion_tokens_per_step=(
            completion / sum(r.steps for r in requests) if any(r.steps for r in requests) else None
        ),
        sources=sources,
        notes=notes,
        where=steps.where,
        population=WARM_LEGS if steps.predicate == "run > 1" else REQUESTS,
        population_detail=(
            f"the {len(requests)} requests of {len(warm)} warm legs (run > 1), {steps.level} level"
            if steps.predicate == "run > 1"
            else f"the {len(requests)} requests given (no run field), {steps.level} level"
        ),
    )
    legs = tuple(
        Leg(
            requests={
                "steps": [request.steps for request in leg.requests],
                "proposed": [request.proposed for request in leg.requests],
                "accepted": [request.accepted_total for request in leg.requests],
            },
            values={
                "completion_tokens": leg.completion_tokens,
                "steps": sum(request.steps for request in leg.requests),
            },
            tok_s=leg.tok_s,
        )
        for leg in warm
    )
    return dataclasses.replace(figures, legs=legs, requests=steps)
