"""Arms read from the spec_decode counters (vLLM, llama.cpp): scrapes and arm records.

Both engines' counters share one schema (:mod:`fold.inputs.oracles.counters`); what differs is the
prefix and how exactly the values are printed (``bound``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fold.errors import InputError
from fold.inputs import limits
from fold.inputs.oracles import counters
from fold.inputs.oracles.figures import ArmFigures
from fold.inputs.oracles.legs import leg_tok_s, oracle_legs
from fold.inputs.oracles.prometheus import Scrape, parse_scrapes
from fold.inputs.oracles.source import arm_tok_s, legs_of, warm
from fold.inputs.populations import ALL_LEGS, INTERVAL, SINCE_START


def scrape_texts(record: dict[str, Any]) -> list[str]:
    """Scrape texts a record holds: ``metrics`` as text, or before/after texts (top level or
    in ``metrics``)."""
    metrics = record.get("metrics")
    texts = [metrics, record.get("before"), record.get("after")]
    if isinstance(metrics, dict):
        texts += [metrics.get("before"), metrics.get("after")]
    return [text for text in texts if isinstance(text, str)]


def read_scrapes(
    name: str,
    text: str,
    where: str,
    *,
    kind: str,
    prefix: str,
    bound: counters.Bound = counters.exact,
    tok_s: float | None = None,
    tok_s_source: str = "not recorded: a Prometheus scrape carries no tok/s",
) -> ArmFigures:
    scrapes = parse_scrapes(text, where=where)
    counts = counters.from_scrapes(scrapes, prefix, where, bound)
    if len(scrapes) == 2:
        how, population = "(after - before scrape)", INTERVAL
        detail = f"between the scrapes at lines {scrapes[0].first_line} and {scrapes[1].first_line}"
        notes: list[str] = []
    else:
        how, population = "(single scrape, cumulative)", SINCE_START
        detail = "one scrape: everything since the server started, warm-up included"
        notes = [
            "single scrape: counters are cumulative since server start and include warm-up "
            "traffic; scrape before and after the run for the run's own figures"
        ]
    return counters.figures(
        name,
        kind,
        counts,
        how,
        where,
        tok_s=tok_s,
        tok_s_source=tok_s_source,
        population=population,
        population_detail=detail,
        notes=notes,
    )


def read_record(
    name: str,
    kind: str,
    prefix: str,
    record: dict[str, Any],
    where: str,
    bound: counters.Bound = counters.exact,
) -> ArmFigures:
    """An arm record: ``metrics`` with the counters as ``get_metrics()`` names them (or with
    ``_total``), as before/after pairs, or as scrape text; tok/s checked against its legs.

    Its warm legs go to the bootstrap for tok/s; the counters are totals (no interval)."""
    figures = _read_record(name, kind, prefix, record, where, bound)
    legs = legs_of(record, where)
    if legs is None:
        return figures
    return replace(figures, legs=oracle_legs(leg_tok_s(warm(legs).records)))


def _read_record(
    name: str,
    kind: str,
    prefix: str,
    record: dict[str, Any],
    where: str,
    bound: counters.Bound,
) -> ArmFigures:
    tok_s, tok_s_source = arm_tok_s(record, where)
    legs = legs_of(record, where)
    metrics = record.get("metrics")
    if metrics is None and isinstance(record.get("before"), str):
        # {"before": "<scrape>", "after": "<scrape>"} at the top level
        metrics = {"before": record["before"], "after": record.get("after")}
    mwhere = f"{where}: metrics"
    if isinstance(metrics, str):
        return read_scrapes(
            name, metrics, mwhere, kind=kind, prefix=prefix, bound=bound, tok_s=tok_s,
            tok_s_source=tok_s_source,
        )  # fmt: skip
    if metrics is None:
        metrics = {}
    if not isinstance(metrics, dict):
        wanted = "an object of counters or a Prometheus text string"
        raise limits.WrongKind(mwhere, "", metrics, wanted, "give the counters as scraped")
    if set(metrics) >= {"before", "after"} and not counters.mentions(metrics, prefix):
        halves: list[tuple[Scrape | None, counters.CounterValues | None]] = []
        for half in ("before", "after"):
            value = metrics[half]
            hwhere = f"{mwhere}.{half}"
            if isinstance(value, str):
                scrapes = parse_scrapes(value, where=hwhere, most=1)
                halves.append((scrapes[0], None))
            elif isinstance(value, dict):
                halves.append((None, counters.from_mapping(value, prefix, hwhere)))
            else:
                wanted = "an object of counters or a scrape text"
                raise limits.WrongKind(hwhere, "", value, wanted, "give the counters as scraped")
        if halves[0][0] is not None and halves[1][0] is not None:
            counts = counters.from_scrapes([halves[0][0], halves[1][0]], prefix, mwhere, bound)
        elif halves[0][1] is not None and halves[1][1] is not None:
            counts = counters.delta(halves[0][1], halves[1][1], mwhere)
        else:
            raise InputError(
                f"{mwhere}: give before and after the same way (both text or both objects)"
            )
        how, population = "(metrics.after - metrics.before)", INTERVAL
        detail = "between the before and after snapshots"
    else:
        pairs = {
            k: v for k, v in metrics.items() if counters.base_name(str(k), prefix) and _is_pair(v)
        }
        singles = {
            k: v
            for k, v in metrics.items()
            if counters.base_name(str(k), prefix) and not _is_pair(v)
        }
        if pairs and singles:
            raise InputError(
                f"{mwhere}: {', '.join(sorted(pairs))} are before/after pairs but "
                f"{', '.join(sorted(singles))} are single values; a single value may be cumulative "
                "since server start, so give every counter the same way"
            )
        if pairs:
            before_after = [
                counters.from_mapping(
                    {k: v[half] for k, v in pairs.items()}, prefix, f"{mwhere}({half})"
                )
                for half in ("before", "after")
            ]
            counts = counters.delta(before_after[0], before_after[1], mwhere)
            how, population = "(after - before)", INTERVAL
            detail = "between the before and after values"
        else:
            counts = counters.from_mapping(singles, prefix, mwhere)
            if legs is not None:
                how, population = "(read once after the last leg)", ALL_LEGS
                detail = (
                    f"all {len(legs)} legs, cold ones included: the counters were read once "
                    "after the last leg"
                )
            else:
                how, population = "(cumulative)", SINCE_START
                detail = "cumulative since the engine started (no legs to say more)"
    return counters.figures(
        name,
        kind,
        counts,
        how,
        where,
        tok_s=tok_s,
        tok_s_source=tok_s_source,
        population=population,
        population_detail=detail,
    )


def _is_pair(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"before", "after"}
