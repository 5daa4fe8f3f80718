"""SGLang's summaries that are not per request: ``bench_serving``'s result lines (tok/s per run,
and the server's mean acceptance length since it started) and the server's Prometheus gauges.
``fold.inputs.oracles.sglang`` detects the format and calls these."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from fold.errors import InputError
from fold.inputs.limits import is_number
from fold.inputs.oracles.figures import (
    ArmFigures,
    arm_from_counts,
)
from fold.inputs.oracles.prometheus import parse_scrapes
from fold.inputs.oracles.source import (
    OracleFile,
    Record,
    one_workload,
    positive,
)
from fold.inputs.populations import LAST_INTERVAL, SINCE_START

KIND = "sglang"
PREFIX = "sglang:"
BENCH_WORKLOAD = (
    "backend",
    "dataset_name",
    "request_rate",
    "max_concurrency",
    "random_input_len",
    "random_output_len",
)


# --------------------------------------------------------------------------------------------
# bench_serving
# --------------------------------------------------------------------------------------------


def read_bench(name: str, records: Sequence[Record], where: str) -> ArmFigures:
    """Result lines of ``bench_serving``: tok/s per run, and the server's 1 + A/S since start.

    Runs appended to one file are pooled only when they ran the same workload: tok/s is their
    median, and the last run's ``accept_length`` (cumulative since server start) covers all.
    """
    one_workload(records, BENCH_WORKLOAD)
    values = [positive(r.get("output_throughput"), f"{w}: output_throughput") for r, w in records]
    last, last_where = records[-1]
    length = last.get("accept_length")
    if is_number(length) and length == 0:
        length = None  # the server reports 0 before any speculative step: not a length of 0
    runs = "the run" if len(records) == 1 else f"the {len(records)} runs"
    sources = {
        "tok_s": "output_throughput"
        if len(records) == 1
        else f"median output_throughput of {runs}",
        "steps": "not recorded: bench_serving writes only the server's accept length",
        "proposed": "not recorded: bench_serving writes only the server's accept length",
        "accepted": "not recorded: bench_serving writes only the server's accept length",
        "per_position": "not recorded: bench_serving writes no per-position figures",
        "completion_tokens_per_step": "not recorded: bench_serving's accept_length is 1 + A/S",
    }
    notes = [
        "bench_serving's accept_length is the server's avg_spec_accept_length: 1 + A/S over all "
        "requests since the server started (warm-up included), not SGLang's per-request unit"
    ]
    if length is not None:
        length = positive(length, f"{last_where}: accept_length")
        sources["mean_acceptance_length"] = (
            f"accept_length of {'the' if len(records) == 1 else 'the last'} run "
            "(/server_info avg_spec_accept_length, cumulative since server start)"
        )
    else:
        sources["mean_acceptance_length"] = "not recorded: accept_length is null (no speculation)"
    return arm_from_counts(
        name,
        KIND,
        tok_s=statistics.median(values),
        mean_acceptance_length=length,
        sources=sources,
        notes=notes,
        where=where,
        labels={"mean_acceptance_length": "accept_length"},
        population=SINCE_START,
        population_detail="everything the server ran since it started, up to the end of " + runs,
    )


# --------------------------------------------------------------------------------------------
# Prometheus gauges
# --------------------------------------------------------------------------------------------


def read_gauges(name: str, doc: OracleFile) -> ArmFigures:
    scrape = parse_scrapes(doc.text, where=doc.where)[-1]
    found: dict[str, float] = {}
    for gauge in ("spec_accept_length", "spec_accept_rate"):
        samples = [(k, s) for k, s in scrape.samples.items() if k[0] == PREFIX + gauge]
        if len(samples) > 1:
            raise InputError(
                f"{doc.where}:{samples[1][1].line}: {PREFIX}{gauge} has {len(samples)} series "
                "(one per scheduler): averages of different engines cannot be pooled; scrape "
                "one engine"
            )
        if samples:
            found[gauge] = samples[0][1].value
    length = found.get("spec_accept_length")
    rate = found.get("spec_accept_rate")
    sources = {
        "tok_s": "not recorded: a Prometheus scrape carries no tok/s",
        "steps": "not recorded: SGLang's gauges hold ratios, not counts",
        "proposed": "not recorded: SGLang's gauges hold ratios, not counts",
        "accepted": "not recorded: SGLang's gauges hold ratios, not counts",
        "mean_acceptance_length": f"{PREFIX}spec_accept_length gauge (1 + A/S)",
        "accept_rate": f"{PREFIX}spec_accept_rate gauge (A/P)",
    }
    if not length:
        # 0 (or absent) means no speculative step in the interval, not a 0% acceptance
        length = rate = None
        sources["mean_acceptance_length"] = "not recorded: sglang:spec_accept_length is 0 or absent"
        sources["accept_rate"] = "not recorded: no speculative step in the interval"
    return arm_from_counts(
        name,
        KIND,
        mean_acceptance_length=length,
        accept_rate=rate,
        sources=sources,
        notes=["SGLang's gauges describe only the last logging interval before the scrape"],
        where=doc.where,
        population=LAST_INTERVAL,
        population_detail="the last logging interval before the (last) scrape",
        labels={
            "mean_acceptance_length": f"{PREFIX}spec_accept_length",
            "accept_rate": f"{PREFIX}spec_accept_rate",
        },
    )
