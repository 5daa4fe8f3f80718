"""What a real vLLM says about its own speculative decoding, from each of its outputs, read
here without the project's readers; and the checks that vLLM's outputs agree with each other.

The expectations of the real-vLLM tests come from this module: a second, plain reading of
vLLM's formats (regexes and ``json``), so a reader of the project that drifts from vLLM is
caught by a test, and a vLLM whose outputs contradict each other is named before any reader
is blamed. Laid out as ``examples/vllm/vllm_gate.py`` writes a run:

- ``offline/``: ``vllm-arm.json``, ``get-metrics.json``, ``engine.log``;
- ``serve/``: ``metrics/leg-<i>.prom`` and ``metrics/bench-<n>.prom`` (two scrapes each),
  ``metrics-warm.prom``, ``metrics-last.prom``, ``bench.json``, ``bench-append.json``,
  ``legs.json``, ``server.log``.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'(\w+)="([^"]*)"')
LOG_LINE = re.compile(r"SpecDecoding metrics: .*Accepted: (\d+) tokens, Drafted: (\d+) tokens")
COUNTERS = {
    "steps": "vllm:spec_decode_num_drafts",
    "proposed": "vllm:spec_decode_num_draft_tokens",
    "accepted": "vllm:spec_decode_num_accepted_tokens",
}
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


class Contradiction(AssertionError):
    """Two of vLLM's own outputs disagree: vLLM, not a reader, is at fault."""


@dataclass(frozen=True)
class Own:
    """vLLM's figures as one of its outputs states them (None: that output does not say)."""

    steps: int | None
    proposed: int
    accepted: int
    per_position: tuple[int, ...] | None = None
    tok_s: float | None = None

    def counts(self) -> tuple:
        return (self.steps, self.proposed, self.accepted, self.per_position)


def agree(what: str, first: str, a, second: str, b) -> None:
    if a != b:
        raise Contradiction(f"vLLM contradicts itself: {what}: {first} says {a}, {second} {b}")


# --- Prometheus text -----------------------------------------------------------------------


def scrapes(text: str) -> list[list[str]]:
    """Concatenated scrapes, split where the first line of the text comes round again."""
    lines = text.splitlines()
    parts: list[list[str]] = []
    for line in lines:
        if line == lines[0]:
            parts.append([])
        parts[-1].append(line)
    return parts


def scrape_counts(lines: list[str]) -> Own:
    """One scrape's counters, summed over engines, per position by the ``position`` label."""
    totals = dict.fromkeys(COUNTERS.values(), 0.0)
    seen: set[str] = set()
    positions: dict[int, float] = {}
    for line in lines:
        match = SAMPLE.match(line)
        if not match or line.startswith("#"):
            continue
        name, value = match["name"], float(match["value"])
        labels = dict(LABEL.findall(match["labels"] or ""))
        base = name.removesuffix("_total")
        if base in totals and name.endswith("_total"):
            totals[base] += value
            seen.add(base)
        elif base == PER_POS and name.endswith("_total"):
            position = int(labels["position"])
            positions[position] = positions.get(position, 0.0) + value
    missing = set(COUNTERS.values()) - seen
    if missing:
        raise AssertionError(f"the scrape has no {', '.join(sorted(missing))}_total")
    per_pos = tuple(int(positions[i]) for i in range(len(positions))) if positions else None
    return Own(*(int(totals[name]) for name in COUNTERS.values()), per_pos)


def difference(before: Own, after: Own) -> Own:
    per_pos = None
    if after.per_position is not None:
        first = before.per_position or (0,) * len(after.per_position)
        per_pos = tuple(b - a for a, b in zip(first, after.per_position, strict=True))
    return Own(
        after.steps - before.steps,
        after.proposed - before.proposed,
        after.accepted - before.accepted,
        per_pos,
    )


def scrape_pair(path: Path) -> Own:
    parts = scrapes(path.read_text())
    assert len(parts) == 2, f"{path}: {len(parts)} scrapes, expected before and after"
    return difference(scrape_counts(parts[0]), scrape_counts(parts[1]))


def one_scrape(path: Path) -> Own:
    parts = scrapes(path.read_text())
    assert len(parts) == 1, f"{path}: {len(parts)} scrapes, expected one"
    return scrape_counts(parts[0])


# --- get_metrics(), the arm record, log lines, bench results ----------------------------------


def get_metrics(path: Path) -> Own:
    """The dump of ``llm.get_metrics()``: Counters' ``value``, the Vector's ``values``."""
    by_name = {entry["name"]: entry for entry in json.loads(path.read_text())}
    values = [by_name[name]["value"] for name in COUNTERS.values()]
    per_pos = by_name[PER_POS]
    assert per_pos["type"] == "Vector", per_pos
    return Own(*values, tuple(per_pos["values"]))


def arm_record(path: Path) -> Own:
    record = json.loads(path.read_text())
    metrics = record["metrics"]
    warm = [leg["tok_s"] for leg in record["legs"] if leg["run"] > 1]
    agree(
        "the arm's tok/s",
        "output_throughput_tok_s",
        metrics["output_throughput_tok_s"],
        "the median of its warm legs",
        statistics.median(warm),
    )
    return Own(
        *(metrics[name] for name in COUNTERS.values()),
        metrics[PER_POS],
        metrics["output_throughput_tok_s"],
    )


def log_sums(path: Path) -> Own:
    """``SpecDecoding metrics:`` lines: Accepted and Drafted summed; S is not printed."""
    found = LOG_LINE.findall(path.read_text())
    assert found, f"{path}: no SpecDecoding metrics lines"
    return Own(None, sum(int(p) for _, p in found), sum(int(a) for a, _ in found))


def bench_results(path: Path) -> list[dict]:
    """``--save-result`` objects, one after another (``--append-result`` adds a newline)."""
    text, decoder, results, at = path.read_text(), json.JSONDecoder(), [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        result, at = decoder.raw_decode(text, at)
        results.append(result)
    return results


def bench_own(result: dict) -> Own:
    steps = result["spec_decode_num_drafts"]
    per_pos = tuple(
        round(rate * steps) for rate in result["spec_decode_per_position_acceptance_rates"]
    )
    return Own(
        steps,
        result["spec_decode_draft_tokens"],
        result["spec_decode_accepted_tokens"],
        per_pos,
        result["output_throughput"],
    )


def pooled(results: list[Own]) -> Own:
    width = max(len(r.per_position) for r in results)
    per_pos = tuple(sum(r.per_position[i] if i < len(r.per_position) else 0 for r in results)
                    for i in range(width))  # fmt: skip
    return Own(
        sum(r.steps for r in results),
        sum(r.proposed for r in results),
        sum(r.accepted for r in results),
        per_pos,
        statistics.median(r.tok_s for r in results),
    )


# --- the cross-checks --------------------------------------------------------------------------


def offline_truth(run: Path) -> Own:
    """The offline arm's S, P, A, per position and tok/s, once vLLM's outputs agree."""
    offline = run / "offline"
    dump = get_metrics(offline / "get-metrics.json")
    record = arm_record(offline / "vllm-arm.json")
    log = log_sums(offline / "engine.log")
    for figure, index in (("S", 0), ("P", 1), ("A", 2)):
        agree(
            figure, "get_metrics()", dump.counts()[index], "the arm record", record.counts()[index]
        )
    agree("A", "get_metrics()", dump.accepted, "the log lines' sum", log.accepted)
    agree("P", "get_metrics()", dump.proposed, "the log lines' sum", log.proposed)
    agree("A", "get_metrics()", dump.accepted, "the per-position sum", sum(dump.per_position))
    return Own(dump.steps, dump.proposed, dump.accepted, dump.per_position, record.tok_s)


def serve_truth(run: Path) -> dict[str, Own]:
    """Each online output's figures, once vLLM's outputs agree with each other."""
    serve = run / "serve"
    truth: dict[str, Own] = {}
    for number, name in ((1, "bench.json"), (2, "bench-append.json")):
        results = bench_results(serve / name)
        assert len(results) == number, f"{name}: {len(results)} results"
        stated = bench_own(results[-1])
        around = scrape_pair(serve / "metrics" / f"bench-{number}.prom")
        agree(
            f"bench run {number}", name, stated.counts(), "the scrapes around it", around.counts()
        )
        truth[f"metrics/bench-{number}.prom"] = around
    first = bench_results(serve / "bench.json")[0]
    agree(
        "bench run 1",
        "bench.json",
        first,
        "bench-append.json's first",
        bench_results(serve / "bench-append.json")[0],
    )
    truth["bench.json"] = bench_own(first)
    truth["bench-append.json"] = pooled(
        [bench_own(r) for r in bench_results(serve / "bench-append.json")]
    )

    whole = scrape_pair(serve / "metrics-warm.prom")
    legs = json.loads((serve / "legs.json").read_text())
    scraped = [serve / "metrics" / f"leg-{i}.prom" for i, leg in enumerate(legs) if leg["run"] > 1]
    # A recorded run keeps the warm pair but not each leg's scrapes (110 kB each).
    if all(path.exists() for path in scraped):
        warm = [scrape_pair(path) for path in scraped]
        summed = Own(
            sum(o.steps for o in warm),
            sum(o.proposed for o in warm),
            sum(o.accepted for o in warm),
            tuple(map(sum, zip(*(o.per_position for o in warm), strict=True))),
        )
        agree(
            "the warm legs",
            "their scrapes summed",
            summed.counts(),
            "the warm scrape pair",
            whole.counts(),
        )
    truth["metrics-warm.prom"] = whole

    last = one_scrape(serve / "metrics-last.prom")
    log = log_sums(serve / "server.log")
    agree("A", "the last scrape", last.accepted, "the server log's sum", log.accepted)
    agree("P", "the last scrape", last.proposed, "the server log's sum", log.proposed)
    truth["metrics-last.prom"] = last
    truth["server.log"] = log
    return truth
