"""Two runs of our own engine side by side: what only two measured runs can show.

Against an oracle the comparison has one side's steps; against another run of ours it has both,
so beyond the split it shows:

* whether the runs ran the same workload, as far as the records tell (``workload``,
  ``speculative_config``, the toy gate's ``config``, ``prompts``, leg counts, prompt and
  completion tokens per leg, requests per leg, the largest draft);
* whether their legs pair (``fold.compare.leg_pairs``): paired runs are resampled together (the same
  legs drawn on both sides, see ``fold.compare.vs_arms``) and get per-pair differences of A/P, 1 +
  A/S and tok/s;
* the warm per-position rates and histogram of both, with the difference at each position and its
  95% interval (legs redrawn; the fold keeps these counts per leg, not per request);
* a verdict in plain words: "acceptance fell 3.1% [2.0, 4.2]; steps are 9.0% faster [...]; net
  5.6% faster [...]".

The main run is "ours", the other one is named on the command line; every difference is ours
less the other's, every factor ours over the other's. Nothing here prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fold.compare.arms import Arm
from fold.compare.gap import GapAttribution
from fold.compare.leg_pairs import Pairing, pair_legs, pair_summary, pairing
from fold.compare.runs_positions import side_by_side
from fold.folding.frozen import freeze_fields
from fold.folding.leg_figures import Named, plain
from fold.folding.result import FoldResult
from fold.folding.uncertainty import Interval, percentile_interval, ratio
from fold.inputs.arm import ArmRecord

WORKLOAD_BLOCKS = ("workload", "speculative_config", "config")

# RunsComparison.resampling values, codes: how the two runs' resamples were drawn (its
# resampling_text says it in words, with the seeds or why requests were not matched)
PAIRED = "paired"  # the same legs, and requests within them, drawn on both sides
PAIRED_BY_LEGS = "paired_by_legs"  # the same legs drawn, their requests not matched
INDEPENDENT = "independent"  # each run drawn on its own stream
NOT_RESAMPLED = "none"  # --bootstrap 0
RESAMPLINGS = (PAIRED, PAIRED_BY_LEGS, INDEPENDENT, NOT_RESAMPLED)


@dataclass(frozen=True)
class RunsComparison:
    """What two runs of ours show beyond the split; ``gap`` carries the plain-words verdict."""

    other: str
    gap: GapAttribution
    pairing: Pairing
    resampling: str
    """How the runs were resampled, a code of ``RESAMPLINGS``."""
    resampling_text: str
    workload: tuple[str, ...]
    per_position: tuple[Mapping[str, Any], ...] | None
    """None when a run has no step log: they need the steps themselves."""
    histogram: tuple[Mapping[str, Any], ...] | None
    pairs: tuple[Mapping[str, Any], ...] | None
    pair_summary: Mapping[str, Mapping[str, float | None]] | None
    other_fold: Mapping[str, Any]
    other_lines: str
    warm_pairs: int | None = None
    """With ``pair_summary``: the warm pairs it summarizes (the most of any figure's)."""
    decode_factor: float | None = None
    """Ours over the other's pooled decode steps/s (``fold.folding.cadence``), both measured."""
    decode_factor_ci: Interval | None = None

    def __post_init__(self) -> None:
        freeze_fields(
            self, ("workload", "per_position", "histogram", "pairs", "pair_summary", "other_fold")
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "other": self.other,
            "verdict": self.gap.verdict,
            "changes": None if self.gap.changes is None else dict(self.gap.changes),
            "decode_factor": finite(self.decode_factor),
            "decode_factor_ci": (
                None if self.decode_factor_ci is None else list(self.decode_factor_ci)
            ),
            "pairing": self.pairing.to_json(),
            "resampling": self.resampling,
            "resampling_text": self.resampling_text,
            "workload_differences": list(self.workload),
            "per_position": _listed(self.per_position),
            "histogram": _listed(self.histogram),
            "pairs": None if self.pairs is None else [dict(row) for row in self.pairs],
            "pair_summary": self.pair_summary,
            "warm_pairs": self.warm_pairs,
            "lines": self.other_lines,
            "fold": self.other_fold,
        }


def _listed(rows: tuple[Mapping[str, Any], ...] | None) -> list[dict[str, Any]] | None:
    return None if rows is None else [plain(row) for row in rows]


def compare_runs(main: Arm, other: Arm, gap: GapAttribution, tolerance: float) -> RunsComparison:
    """The other run of ours against the main one; ``gap`` is their split (``fold.compare.gap``)."""
    assert main.result is not None and other.result is not None
    ours, theirs = main.result, other.result
    found = (
        pairing(main.record, other.record, ours.warm["legs"], theirs.warm["legs"], other.name)
        if main.record is not None and other.record is not None
        else Pairing(False, ("an arm record is not at hand",))
    )
    seeds = [(result.fold.bootstrap or {}).get("seed") for result in (ours, theirs)]
    resamples = (ours.fold.bootstrap or {}).get("resamples", 0)
    together = found.paired and seeds[0] == seeds[1]
    unmatched = unmatched_requests(ours.legs, theirs.legs, other.name) if together else None
    resampling, resampling_text = (
        (
            INDEPENDENT,
            f"independent: each run drawn on its own stream (seeds {seeds[0]}, {seeds[1]})",
        )
        if not together
        else (PAIRED, "paired: the same legs (and requests within them) drawn on both sides")
        if unmatched is None
        else (PAIRED_BY_LEGS, f"paired by legs: the same legs drawn on both sides; {unmatched}")
    )
    if not resamples:
        resampling, resampling_text = NOT_RESAMPLED, "none: --bootstrap 0"
    pairs = summary = None
    if found.paired:
        pairs = tuple(pair_legs(ours.legs, theirs.legs))
        summary = pair_summary([pair for pair in pairs if pair["warm"]])
    # Made once: a run whose drafts reach FORMAT.md's 65,536 tokens has lists that long, and
    # the JSON form of its document took seconds each time.
    other_json = theirs.to_json()
    return RunsComparison(
        other=other.name,
        gap=gap,
        pairing=found,
        resampling=resampling,
        resampling_text=resampling_text,
        workload=tuple(workload_differences(main, other)),
        per_position=_rows(side_by_side(ours.fold, theirs.fold, "per_position", resamples, seeds)),
        histogram=_rows(side_by_side(ours.fold, theirs.fold, "histogram", resamples, seeds)),
        pairs=pairs,
        pair_summary=summary,
        warm_pairs=None
        if summary is None
        else max((entry["pairs"] for entry in summary.values()), default=0),
        other_fold=other_json,
        other_lines=lines_text(other_json),
        decode_factor=_decode_factor(ours.fold, theirs.fold),
        decode_factor_ci=_decode_factor_ci(ours.fold, theirs.fold),
    )


def unmatched_requests(ours: Sequence[Named], theirs: Sequence[Named], name: str) -> str | None:
    """Why the requests within paired legs are not drawn in pairs, or None when they are.

    A paired resample draws a leg's requests by their place in the leg, from the leg's own
    stream, so the same places on both sides. The places hold the same requests only when both
    legs list the same request ids from writers in the same order (writers' ids are random per
    process, so a writer is known by its rank in the leg): that is checked here, leg by leg."""
    for a, b in zip(ours, theirs, strict=True):
        if a["requests"] is None or b["requests"] is None:
            return "a run has no step log, so its legs are drawn whole, without requests"
        mine, yours = _request_places(a["requests"]), _request_places(b["requests"])
        if mine != yours:
            return (
                f"the requests within them are not matched (leg {a['index']} holds "
                f"{_ids_text(mine)} in ours, {_ids_text(yours)} in {name})"
            )
    return None


def _request_places(requests: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, Any]]:
    """Each request in draw order as (its writer's rank, its id's type, its id)."""
    rank = {writer: place for place, writer in enumerate(sorted({r["w"] for r in requests}))}
    return [(rank[r["w"]], type(r["seq"]).__name__, r["seq"]) for r in requests]


def _ids_text(places: list[tuple[int, str, Any]]) -> str:
    shown = ", ".join(repr(seq) if kind == "str" else str(seq) for _, kind, seq in places[:4])
    more = " ..." if len(places) > 4 else ""
    return f"{len(places)} request(s): {shown}{more}" if places else "no requests"


def _rows(rows: list[dict[str, Any]] | None) -> tuple[dict[str, Any], ...] | None:
    return None if rows is None else tuple(rows)


def _decode_factor(ours: Any, theirs: Any) -> float | None:
    a, b = (
        (result.warm.get("cadence") or {}).get("decode_steps_per_s") for result in (ours, theirs)
    )
    return None if a is None or not b else a / b


def _decode_factor_ci(ours: FoldResult, theirs: FoldResult) -> Interval | None:
    """From each run's resampled decode steps/s, resample by resample (paired or not, as the
    runs were drawn)."""
    drawn = [
        None if found is None else found.figures.get("decode_steps_per_s")
        for found in (ours.replicates.get("warm"), theirs.replicates.get("warm"))
    ]
    if drawn[0] is None or drawn[1] is None or drawn[0].size != drawn[1].size:
        return None
    return percentile_interval(ratio(drawn[0], drawn[1]))


# ----------------------------------------------------------------------------------------------
# Workloads
# ----------------------------------------------------------------------------------------------


def workload_differences(main: Arm, other: Arm) -> list[str]:
    """Where the two runs' workloads differ, as far as their records tell; [] when alike."""
    name = other.name
    found: list[str] = []
    mine = _document(main.record)
    theirs = _document(other.record)
    for block in WORKLOAD_BLOCKS:
        a, b = mine.get(block), theirs.get(block)
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                if a.get(key) != b.get(key):
                    found.append(
                        f"{block}.{key}: {_shown(a.get(key))} in ours, {_shown(b.get(key))} "
                        f"in {name}"
                    )
        elif isinstance(a, dict) != isinstance(b, dict):
            has = "ours" if isinstance(a, dict) else name
            found.append(f"only {has} records '{block}': the runs' {block} cannot be compared")
    a, b = mine.get("prompts"), theirs.get("prompts")
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            found.append(f"prompts: {len(a)} in ours, {len(b)} in {name}")
        else:
            differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
            if differ:
                found.append(
                    f"prompts: {len(differ)} of {len(a)} differ (first: prompt {differ[0]})"
                )
    assert main.result is not None and other.result is not None
    ours, their = main.result, other.result
    for label, fold in (("legs", "all"), ("warm legs", "warm")):
        count_a, count_b = len(getattr(ours, fold)["legs"]), len(getattr(their, fold)["legs"])
        if count_a != count_b:
            found.append(f"{label}: {count_a} in ours, {count_b} in {name}")
    if main.record is not None and other.record is not None:
        for column in ("prompt_tokens", "completion_tokens"):
            found.extend(_column_difference(main.record, other.record, column, name))
    requests_a = sorted(
        {len(leg["requests"]) for leg in ours.legs if leg["warm"] and leg["requests"] is not None}
    )
    requests_b = sorted(
        {len(leg["requests"]) for leg in their.legs if leg["warm"] and leg["requests"] is not None}
    )
    if requests_a and requests_b and requests_a != requests_b:
        found.append(
            f"requests per warm leg (concurrency): {_set_text(requests_a)} in ours, "
            f"{_set_text(requests_b)} in {name}"
        )
    draft_a, draft_b = (
        None if fold.warm["histogram"] is None else len(fold.warm["histogram"]) - 1
        for fold in (ours, their)
    )
    if draft_a is not None and draft_b is not None and draft_a != draft_b:
        found.append(
            f"largest draft in a warm step (k): {max(draft_a, 0)} in ours, {max(draft_b, 0)} "
            f"in {name}"
        )
    return found


def _document(record: ArmRecord | None) -> dict[str, Any]:
    document = None if record is None else record.document
    return document if isinstance(document, dict) else {}


def _shown(value: Any) -> str:
    return "not recorded" if value is None else repr(value)


def _set_text(values: list[int]) -> str:
    return " or ".join(map(str, values)) if values else "none"


def _column_difference(ours: ArmRecord, other: ArmRecord, column: str, name: str) -> list[str]:
    a, b = ours.legs[column].to_list(), other.legs[column].to_list()
    if len(a) == len(b):
        differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if not differ:
            return []
        first = differ[0]
        return [
            f"{column.replace('_', ' ')}: {len(differ)} of {len(a)} legs differ (first: leg "
            f"{first}, {a[first]} in ours, {b[first]} in {name})"
        ]
    if sum(a) * len(b) == sum(b) * len(a):
        return []
    return [
        f"{column.replace('_', ' ')} per leg: {sum(a) / len(a):.1f} on average in ours, "
        f"{sum(b) / len(b):.1f} in {name}"
    ]


def lines_text(document: dict[str, Any]) -> str:
    """Where the other run's lines went, as the main table says it for ours."""
    if not document["files"]:
        return "no step log: S, P and A per leg from the record's engine counters"
    return (
        f"{document['lines_read']} read, {document['lines_attributed']} in legs, "
        f"{document['unattributed_steps']} outside every leg, "
        f"{document['ambiguous_steps']} ambiguous, {document['torn_lines']} torn, "
        f"{document['skipped_lines']} skipped, {document['lost_lines']} lost"
    )


def finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
