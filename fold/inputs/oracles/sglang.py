"""SGLang: ``/generate`` responses (every key generation), ``bench_serving`` result lines, the
gate's SGLang legs, and the ``sglang:spec_*`` gauges of a scrape.

Key generations of a finished response's ``meta_info`` (tokenizer_manager.py): 0.5.23 writes
``spec_verify_ct`` (S), ``spec_num_correct_drafts`` (A), ``spec_num_proposed_drafts`` (P) and
``spec_correct_drafts_histogram``; 0.5.16 adds the aliases ``spec_accepted_drafts`` and
``spec_proposed_drafts``; 0.5.9 writes ``spec_accept_token_num`` (A), ``spec_draft_token_num``
(P) and ``spec_accept_histogram``; 0.5.3 only ``spec_verify_ct``. ``spec_accept_length`` is
completion_tokens / spec_verify_ct, SGLang's per-request unit (it counts the prefill token).
``bench_serving``'s ``accept_length`` is another figure: the server's 1 + A/S since it started.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fold.errors import InputError, RefusedError
from fold.inputs import acceptance as formulas
from fold.inputs import limits
from fold.inputs.oracles.count_checks import check_accept_rate, check_acceptance_length
from fold.inputs.oracles.figures import (
    ArmFigures,
    arm_from_counts,
)
from fold.inputs.oracles.legs import leg_tok_s, oracle_legs
from fold.inputs.oracles.prometheus import looks_like_scrape
from fold.inputs.oracles.sglang_summaries import (
    BENCH_WORKLOAD,
    KIND,
    PREFIX,
    read_bench,
    read_gauges,
)
from fold.inputs.oracles.source import (
    OracleFile,
    Record,
    Run,
    Selection,
    arm_tok_s,
    count,
    legs_of,
    median_tok_s,
    pick,
    positive,
    runs_of,
    warm,
)
from fold.inputs.populations import REQUESTS

ALIASES = ("sglang",)
SOURCES = ("gauges", "bench", "responses", "legs")
"""What ``read`` reads, one code per format (``registry.SOURCES`` names them all)."""

_ACCEPT_LENGTH = ("spec_accept_length", "accept_length")
_ACCEPTED = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
_PROPOSED = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
_HISTOGRAM = ("spec_correct_drafts_histogram", "spec_accept_histogram")
_VERIFY = ("spec_verify_ct",)
_AS_WRITTEN = "give it as SGLang wrote it"
_MISCOUNTED = "the fields come from different requests, or the engine miscounts; take it again"
_SPECIFIC = (*_ACCEPT_LENGTH, *_ACCEPTED, *_PROPOSED, *_HISTOGRAM, *_VERIFY, "spec_accept_rate")
_BENCH_MARKERS = ("backend", "completed", "duration", "server_info", "total_output_tokens")


def sniff(doc: OracleFile) -> bool:
    if doc.form == "text":
        return looks_like_scrape(doc.text, (PREFIX,))
    for record, _ in doc.records:
        if str(record.get("engine", "")).strip().lower() == KIND:
            return True
        if _is_bench(record) or _has_fields(record):
            return True
        legs = record.get("legs")
        if isinstance(legs, list) and any(
            isinstance(leg, dict) and _has_fields(leg) for leg in legs
        ):
            return True
    return False


def _flatten(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record with its ``meta_info`` (SGLang's response field) folded in; top level wins."""
    flat: dict[str, Any] = {}
    meta = record.get("meta_info")
    if isinstance(meta, dict):
        flat.update(meta)
    flat.update(record)
    return flat


def _has_fields(record: Mapping[str, Any]) -> bool:
    flat = _flatten(record)
    return any(key in flat for key in _SPECIFIC)


def _is_bench(record: Mapping[str, Any]) -> bool:
    return (
        "accept_length" in record
        and "output_throughput" in record
        and "run" not in record
        and any(key in record for key in _BENCH_MARKERS)
    )


def runs(doc: OracleFile) -> list[Run] | None:
    """The runs of a ``bench_serving`` result file (one line appended per run)."""
    return runs_of(doc, _is_bench, BENCH_WORKLOAD)


def read(name: str, doc: OracleFile) -> ArmFigures:
    if doc.form == "text":
        return read_gauges(name, doc)
    bench = [_is_bench(record) for record, _ in doc.records]
    if all(bench):
        return read_bench(name, doc.records, doc.where)
    if any(bench):
        # their accept_length is 1 + A/S, the other records' is the per-request unit
        first = next(where for (_, where), is_bench in zip(doc.records, bench, strict=True)
                     if is_bench)  # fmt: skip
        raise InputError(
            f"{first}: a bench_serving result among other records; its accept_length is in "
            "another unit, so give bench results and responses or legs in separate files"
        )
    if doc.form == "object" and "legs" in doc.record:
        legs = legs_of(doc.record, doc.where)
        assert legs is not None
        tok_s, tok_s_source = arm_tok_s(doc.record, doc.where)
        return _read_records(name, legs, doc.where, tok_s=(tok_s, tok_s_source))
    return _read_records(name, doc.records, doc.where)


# --------------------------------------------------------------------------------------------
# /generate responses and the gate's legs
# --------------------------------------------------------------------------------------------


@dataclass
class _Request:
    where: str
    accept_length: float | None
    verify: int | None
    completion: int | None
    accepted: int | None
    accepted_key: str | None
    proposed: int | None
    proposed_key: str | None
    histogram: list[int] | None


def _request(raw: Mapping[str, Any], where: str) -> _Request:
    rec = _flatten(raw)
    length, length_key = pick(rec, _ACCEPT_LENGTH, where)
    if length is not None:
        length = positive(length, f"{where}: {length_key}")
        assert length_key is not None  # pick names the key it found a value under
        check_acceptance_length(where, length_key, length)
    found: dict[str, tuple[int | None, str | None]] = {}
    for figure, keys in (
        ("verify", _VERIFY),
        ("completion", ("completion_tokens",)),
        ("accepted", _ACCEPTED),
        ("proposed", _PROPOSED),
    ):
        value, key = pick(rec, keys, where)
        found[figure] = (None if value is None else count(value, f"{where}: {key}"), key)
    verify, completion = found["verify"][0], found["completion"][0]
    accepted, accepted_key = found["accepted"]
    proposed, proposed_key = found["proposed"]
    histogram_value, histogram_key = pick(rec, _HISTOGRAM, where)
    histogram = None
    if histogram_value is not None:
        if not isinstance(histogram_value, list):
            raise limits.WrongKind(
                where, str(histogram_key), histogram_value, "a list of step counts", _AS_WRITTEN
            )
        histogram = [
            count(v, f"{where}: {histogram_key}[{i}]") for i, v in enumerate(histogram_value)
        ]
        if verify is not None and sum(histogram) != verify:
            raise RefusedError(
                f"{where}: {histogram_key} sums to {sum(histogram)} steps but spec_verify_ct = "
                f"{verify}: the fields come from different requests"
            )
        weighted = sum(j * n for j, n in enumerate(histogram))
        if accepted is not None and weighted != accepted:
            raise RefusedError(
                f"{where}: {histogram_key} holds {weighted} accepted drafts but {accepted_key} = "
                f"{accepted}: the fields come from different requests"
            )
    if verify is not None and completion is not None:
        if completion < 1 + verify:
            raise RefusedError(
                f"{where}: completion_tokens = {completion} is less than 1 + spec_verify_ct = "
                f"{1 + verify}: every verify step emits a token after the prefill token; the "
                "fields come from different requests"
            )
        if length is not None and verify:
            expected = completion / verify
            if abs(length - expected) > max(0.05, 0.01 * expected):
                raise RefusedError(
                    f"{where}: {length_key} = {length} but completion_tokens / spec_verify_ct = "
                    f"{completion}/{verify} = {expected:.4f}: the record mixes units or requests"
                )
    if accepted is not None and proposed is not None:
        totals = ((f"{proposed_key}", proposed), (f"{accepted_key}", accepted))
        limits.check_accepted(where, totals, _MISCOUNTED)
    rate = rec.get("spec_accept_rate")
    if rate is not None:
        rate = limits.finite_number(where, "spec_accept_rate", rate, _AS_WRITTEN)
        # with counts or without: a rate above 1 is no request's, whatever else it carries
        check_accept_rate(where, "spec_accept_rate", rate, _MISCOUNTED)
    # SGLang writes it as accepted / proposed of the same request
    if (
        rate is not None
        and accepted is not None
        and proposed
        and not math.isclose(rate, accepted / proposed, rel_tol=1e-6, abs_tol=1e-9)
    ):
        raise RefusedError(
            f"{where}: spec_accept_rate = {rate!r} but {accepted_key} / {proposed_key} = "
            f"{accepted}/{proposed} = {accepted / proposed:.6g}: the fields come from "
            "different requests"
        )
    return _Request(where, length, verify, completion, accepted, accepted_key, proposed,
                    proposed_key, histogram)  # fmt: skip


def _finished(records: list[Record]) -> list[Record]:
    """The finished responses: a streamed request's chunks share its ``id``, and only the last,
    finished one (``finish_reason`` set) carries the speculative keys (tokenizer_manager.py).
    An unfinished chunk is set aside only when a later record of the same request follows."""
    last: dict[Any, int] = {}
    for index, (record, _) in enumerate(records):
        if record.get("id") is not None:
            last[record["id"]] = index
    kept = []
    for index, (record, where) in enumerate(records):
        request_id = record.get("id")
        unfinished = "finish_reason" in record and record["finish_reason"] is None
        if unfinished and request_id is not None:
            if last[request_id] != index:
                continue
            raise InputError(
                f"{where}: request {request_id} has no finished response (finish_reason is "
                "null in its last chunk); give complete responses"
            )
        kept.append((record, where))
    return kept


def _read_records(
    name: str,
    records: Sequence[Record],
    where: str,
    *,
    tok_s: tuple[float | None, str] | None = None,
) -> ArmFigures:
    selection: Selection = warm(_finished([(_flatten(r), w) for r, w in records]))
    how = selection.description
    tok_s_value, tok_s_source = tok_s if tok_s is not None else median_tok_s(selection)
    if tok_s_value is None:
        tok_s_source = (
            f"not recorded: no tok_s on {how} (a /generate response's e2e_latency includes "
            "queueing and prefill)"
        )
    reqs = [_request(rec, rwhere) for rec, rwhere in selection.records]
    # SGLang writes the spec_* keys only for a request with at least one verify step; a
    # finished response without any, beside others with them, verified nothing.
    undrafted = [
        r
        for r, (rec, _) in zip(reqs, selection.records, strict=True)
        if not _has_fields(rec) and r.completion is not None and "finish_reason" in rec
    ]
    if undrafted and len(undrafted) < len(reqs):
        for r in undrafted:
            r.verify = r.accepted = r.proposed = 0
            r.histogram = []
    n = len(reqs)
    sources: dict[str, str] = {"tok_s": tok_s_source}
    notes: list[str] = []
    if undrafted and len(undrafted) < len(reqs):
        notes.append(
            f"{len(undrafted)} finished response(s) carry no spec_* keys: SGLang writes them "
            "only after a verify step, so they count as 0 steps, 0 drafts"
        )

    steps = accepted = proposed = None
    if all(r.verify is not None for r in reqs):
        steps = sum(r.verify or 0 for r in reqs)
        sources["steps"] = f"sum of spec_verify_ct over {how}"
    else:
        sources["steps"] = f"not recorded: spec_verify_ct missing on some of {how}"
    if all(r.accepted is not None for r in reqs):
        accepted = sum(r.accepted or 0 for r in reqs)
        keys = sorted({r.accepted_key for r in reqs if r.accepted_key})
        sources["accepted"] = f"sum of {'/'.join(keys)} over {how}"
    elif all(
        r.accepted is not None or (r.completion is not None and r.verify is not None) for r in reqs
    ):
        accepted = derived = 0
        for r in reqs:
            if r.accepted is not None:
                accepted += r.accepted
            else:
                assert r.completion is not None and r.verify is not None
                accepted += r.completion - 1 - r.verify
                derived += 1
        sources["accepted"] = (
            f"sum over {how} of completion_tokens - 1 - spec_verify_ct "
            f"(SGLang accounting; derived on {derived} of {n})"
        )
        notes.append(
            "SGLang accepted drafts derived as completion_tokens - 1 - spec_verify_ct: exact "
            "when no step was cut by a stop condition"
        )
    else:
        sources["accepted"] = (
            "not recorded: neither an accepted-drafts field nor completion_tokens with "
            f"spec_verify_ct on every one of {how}"
        )
    if all(r.proposed is not None for r in reqs):
        proposed = sum(r.proposed or 0 for r in reqs)
        keys = sorted({r.proposed_key for r in reqs if r.proposed_key})
        sources["proposed"] = f"sum of {'/'.join(keys)} over {how}"
        notes.append(
            "SGLang does not measure P: it writes spec_verify_ct x (speculative_num_draft_tokens "
            "- 1), so A/P assumes every step drafted the full tree width"
        )
    else:
        sources["proposed"] = (
            f"not recorded: no proposed-drafts field (spec_num_proposed_drafts, "
            f"spec_proposed_drafts or spec_draft_token_num) on every one of {how}"
        )
    per_position = None
    if all(r.histogram is not None for r in reqs):
        width = max(len(r.histogram or []) for r in reqs)
        pooled = [sum((r.histogram or [])[j] if j < len(r.histogram or []) else 0 for r in reqs)
                  for j in range(width)]  # fmt: skip
        per_position = formulas.accepted_at_position(pooled)
        sources["per_position"] = (
            f"steps accepting more than i drafts, from the histograms over {how}"
        )
    else:
        sources["per_position"] = "not recorded: no acceptance histogram on every record"

    per_step = None
    mean_of: list[float] | None = None  # the accept lengths, when SGLang len* is their mean
    if all(r.completion is not None and r.verify is not None for r in reqs):
        total_verify = sum(r.verify or 0 for r in reqs)
        if total_verify:
            # as for our legs: a request without verify steps has no tokens per step to pool
            per_step = formulas.completion_tokens_per_step(
                sum(r.completion or 0 for r in reqs if r.verify), total_verify
            )
            sources["completion_tokens_per_step"] = (
                f"sum completion_tokens / sum spec_verify_ct over {how} (SGLang unit: counts "
                "the prefill token)"
            )
    if per_step is None:
        lengths = [r.accept_length for r in reqs if r.accept_length is not None]
        if lengths and len(lengths) == n:
            per_step, mean_of = statistics.fmean(lengths), lengths
            sources["completion_tokens_per_step"] = (
                f"plain mean of the per-record accept lengths over {how} (SGLang unit, counts "
                "the prefill token; no counts to weight or convert it)"
            )
        elif lengths:
            raise InputError(
                f"{where}: {n - len(lengths)} of {how} carry no accept length and no counts"
            )
        else:
            sources["completion_tokens_per_step"] = "not recorded: no accept length or counts"
    if accepted is None or steps is None:
        sources["mean_acceptance_length"] = (
            "not recorded: the records lack the counts to convert SGLang's accept length to "
            "1 + A/S; it is shown only in the SGLang-unit column"
        )
    figures = arm_from_counts(
        name,
        KIND,
        tok_s=tok_s_value,
        steps=steps,
        proposed=proposed,
        accepted=accepted,
        per_position=per_position,
        completion_tokens_per_step=per_step,
        sources=sources,
        notes=notes,
        where=where,
        population=selection.population if selection.by_run else REQUESTS,
        population_detail=how,
    )
    counts = [
        {"steps": r.verify, "proposed": r.proposed, "completion_tokens": r.completion,
         "accepted": r.accepted if r.accepted is not None else _derived_accepted(r)}
        for r in reqs
    ]  # fmt: skip
    return replace(figures, legs=oracle_legs(leg_tok_s(selection.records), counts, mean_of))


def _derived_accepted(r: _Request) -> int | None:
    return None if r.completion is None or r.verify is None else r.completion - 1 - r.verify
