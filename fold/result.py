"""Assembling a fold's figures from a partial fold, the arm's legs and the warm predicate."""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from fold import acceptance
from fold.accumulate import REQUEST_KEY, PartialFold, request_id
from fold.cadence import (
    DEFAULT_STALL_FACTOR,
    Cadence,
    check_stall_factor,
    fold_cadence,
    no_request,
)
from fold.cadence import KEY as CADENCE_KEY
from fold.errors import RefusedError
from fold.leg_figures import Histograms, bootstrap_leg, pooled, stepped_leg
from fold.reader import ReadCounts, SkippedLine
from fold.spectrace import NO_TIME_STAMPS
from fold.uncertainty import (
    DEFAULT_SEED,
    Replicates,
    check_resamples,
    decode_interval,
    fold_replicates,
    interval_fields,
    method_note,
)
from fold.warm import ThroughputCheck

JSON_FORMAT = "fold-acceptance/1"
# Where a fold's counts came from (FoldResult.step_source).
STEP_LOG = "step log"
ENGINE_TRACE = "the engine's trace (VT_SPEC_TRACE)"
RECORD_COUNTERS = "the record's counters"
NEEDS_STEP_LOG = "needs a step log"
# Output tokens per request that no verify step emits: servers (vLLM, SGLang, llama-server)
# sample the first from prefill; llama.cpp's speculative-simple verifies the prompt's last token
# with the first draft, so every output token comes from a verify step (0).
SERVER_PREFILL_TOKENS = 1
PREFILL_CONVENTIONS = (0, 1)


@dataclass
class FoldResult:
    """Everything one fold found. ``to_json`` is the documented machine-readable form."""

    predicate: str
    window_steps: int
    legs: list[dict[str, Any]]
    warm: dict[str, Any]
    all: dict[str, Any]
    files: list[dict[str, Any]]
    writers: list[dict[str, Any]]
    skipped_examples: list[SkippedLine] = field(default_factory=list)
    oracles: dict[str, Any] | None = None
    stall_factor: float = DEFAULT_STALL_FACTOR
    prefill_tokens: dict[str, Any] = field(
        default_factory=lambda: {"per_request": SERVER_PREFILL_TOKENS, "source": "default"}
    )
    bootstrap: dict[str, Any] | None = None
    """How the intervals were drawn (resamples, seed, level, method); None without intervals."""
    replicates: dict[str, Replicates] = field(default_factory=dict, repr=False, compare=False)
    """The warm and all-legs folds' bootstrap replicates, which the split propagates."""
    step_source: str = STEP_LOG
    """Where S, P and A came from: ``STEP_LOG``, ``ENGINE_TRACE`` (steps without times: the
    figures that need times are None), or ``RECORD_COUNTERS`` when no log was given (every
    figure that needs steps is then None)."""
    counter_check: dict[str, Any] | None = None
    """Whether the fold was checked against the engine's own counters, and how
    (``fold.counter_check``)."""

    @property
    def from_log(self) -> bool:
        """Whether steps were read from files (the hook's log or the engine's trace)."""
        return self.step_source != RECORD_COUNTERS

    @property
    def untimed(self) -> str | None:
        """Why the steps have no times (the engine's trace), or None: they have."""
        return NO_TIME_STAMPS if self.step_source == ENGINE_TRACE else None

    def no_times(self) -> str:
        """What the figures built from step times read when there are none."""
        return self.untimed or f"{NEEDS_STEP_LOG} (the steps' times)"

    def _line_total(self, rows: list[dict[str, Any]], key: str) -> int | None:
        # Without a log nothing was read: no count of lines, not a count of 0.
        return sum(row[key] for row in rows) if self.from_log else None

    @property
    def unattributed_steps(self) -> int | None:
        return self._line_total(self.files, "unattributed")

    @property
    def ambiguous_steps(self) -> int | None:
        return self._line_total(self.files, "ambiguous")

    @property
    def torn_lines(self) -> int | None:
        return self._line_total(self.files, "torn")

    @property
    def skipped_lines(self) -> int | None:
        return self._line_total(self.files, "skipped")

    @property
    def lost_lines(self) -> int | None:
        return self._line_total(self.writers, "lost")

    def sources(self) -> dict[str, str]:
        """Where each figure came from: the step log, the engine's trace, the record, or
        nowhere yet."""
        counts = (
            self.step_source
            if self.from_log
            else RECORD_COUNTERS + " (spec_drafted_request_steps, spec_drafts_proposed, "
            "spec_drafts_accepted)"
        )
        from_steps = self.step_source if self.from_log else NEEDS_STEP_LOG
        timed = {} if self.untimed is None else dict.fromkeys(TIMED_FIGURES, self.untimed)
        return {
            "steps": counts,
            "proposed": counts,
            "accepted": counts,
            "accept_rate": counts,
            "mean_acceptance_length": counts,
            "completion_tokens_per_step": f"completion_tokens (arm record) / S ({counts})",
            "step_rate": f"S ({counts}) / the legs' generate windows (arm record)",
            "tok_s": "the legs' tok_s (arm record)",
            **dict.fromkeys(STEP_FIGURES, from_steps),
            **timed,
        }

    def to_json(self) -> dict[str, Any]:
        document = {
            "format": JSON_FORMAT,
            "predicate": self.predicate,
            "window_steps": self.window_steps,
            "stall_factor": self.stall_factor,
            "legs": self.legs,
            "warm": self.warm,
            "all": self.all,
            "unattributed_steps": self.unattributed_steps,
            "ambiguous_steps": self.ambiguous_steps,
            "torn_lines": self.torn_lines,
            "skipped_lines": self.skipped_lines,
            "lost_lines": self.lost_lines,
            "files": self.files,
            "writers": self.writers,
            "skipped_examples": [vars(example) for example in self.skipped_examples],
            "prefill_tokens": self.prefill_tokens,
            "step_source": self.step_source,
            "sources": self.sources(),
            "counter_check": self.counter_check,
        }
        if self.bootstrap is not None:
            document["bootstrap"] = self.bootstrap
        if self.oracles is not None:
            document["oracles"] = self.oracles
        return document


STEP_FIGURES = (
    "per_position",
    "per_position_conditional",
    "per_position_of_proposed",
    "histogram",
    "windows",
    "requests",
    "lines",
    "cadence",
    "emitted",
    "trace",
)
"""Figures only the steps themselves give: read "needs a step log" (None) without one."""
TIMED_FIGURES = ("cadence", "trace")
"""Figures that need the steps' times: None from the engine's trace, which has none."""


def build_result(
    arm_legs: pl.DataFrame,
    partial: PartialFold,
    read_counts: dict[str, ReadCounts],
    check: ThroughputCheck,
    window_steps: int = acceptance.DEFAULT_WINDOW_STEPS,
    *,
    prefill_tokens: int | None = None,
    stall_factor: float = DEFAULT_STALL_FACTOR,
    resamples: int = 0,
    seed: int = DEFAULT_SEED,
    step_source: str = STEP_LOG,
) -> FoldResult:
    """``prefill_tokens``: output tokens per request not emitted by a verify step, when the
    user states it; None learns it from the arm (see ``_prefill_convention``). ``resamples``
    above 0 puts 95% bootstrap intervals beside the pooled figures (``add_intervals``)."""
    stall_factor = check_stall_factor(stall_factor)
    check_resamples(resamples, seed)
    # The cadence's pass and the bootstrap's draws run without the GIL (the extension, numpy),
    # and both need only the partial fold: started first, on threads of their own, they overlap
    # the acceptance figures (mostly Python) instead of following them.
    with _no_cycle_collection(), ThreadPoolExecutor(max_workers=2) as pool:
        cadence = pool.submit(fold_cadence, partial.step_times, arm_legs, stall_factor)
        replicates = pool.submit(
            _fold_replicates, arm_legs, partial, check, cadence, resamples, seed
        )
        result = _acceptance_result(
            arm_legs, partial, read_counts, check, window_steps, prefill_tokens, stall_factor
        )
        result.step_source = step_source
        _add_cadence(result, cadence.result())
        add_intervals(result, replicates.result(), resamples, seed)
    return result


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused while the figures are built: they are some 10^6
    small objects (a dict of figures per request) and hold no cycles, but allocating them
    set off full collections that walked the whole heap for nothing (0.05 s of a 0.9 s fold
    of 10M lines). It runs again as before once the result is built."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _acceptance_result(
    arm_legs: pl.DataFrame,
    partial: PartialFold,
    read_counts: dict[str, ReadCounts],
    check: ThroughputCheck,
    window_steps: int,
    prefill_tokens: int | None,
    stall_factor: float,
) -> FoldResult:
    warm_set = set(check.warm_legs)
    sums = {row["leg"]: row for row in partial.legs.iter_rows(named=True)}
    histograms = Histograms.of_rows(partial.histogram.iter_rows())
    bins: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for leg, _bin, steps, proposed, accepted in partial.bins.sort("leg", "bin").iter_rows():
        bins[leg].append((steps, proposed, accepted))
    requests: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in partial.requests.sort(REQUEST_KEY).iter_rows(named=True):
        row["seq"] = request_id(row["seq"], row.pop("sid"))
        requests[row.pop("leg")].append(row)

    convention = _prefill_convention(arm_legs, sums, requests, prefill_tokens)
    legs = [
        stepped_leg(
            leg,
            prefill_tokens=convention["per_request"],
            warm=leg["index"] in warm_set,
            sums=sums.get(leg["index"]),
            counts=histograms.by_accepted.get(leg["index"], {}),
            proposals=histograms.by_proposed.get(leg["index"], {}),
            bins=bins.get(leg["index"], []),
            requests=requests.get(leg["index"], []),
            window_steps=window_steps,
        )
        for leg in arm_legs.iter_rows(named=True)
    ]
    _refuse_warm_legs_without_steps(legs, partial)
    writers = _writers(partial, list(read_counts))
    result = FoldResult(
        predicate=check.predicate,
        window_steps=window_steps,
        stall_factor=check_stall_factor(stall_factor),
        legs=legs,
        warm=pooled([leg for leg in legs if leg["warm"]], histograms),
        all=pooled(legs, histograms),
        files=_files(partial, read_counts),
        writers=writers,
        skipped_examples=[
            example for counts in read_counts.values() for example in counts.skipped_examples
        ],
        prefill_tokens=convention,
    )
    return result


def _add_cadence(result: FoldResult, cadence: Cadence) -> None:
    """Each request's, each leg's and the folds' cadence, beside their acceptance."""
    if result.untimed is not None:  # no step times: no cadence at all, never one of zeros
        for owner in [*result.legs, result.warm, result.all]:
            owner["cadence"] = None
            for request in owner.get("requests", []):
                request["cadence"] = None
        return
    by_request = cadence.by_request
    for leg in result.legs:
        for request in leg["requests"]:
            key = (leg["index"], request["w"], request["seq"])
            request["cadence"] = by_request.get(key) or no_request()
    folds = [result.warm, result.all]
    groups = cadence.groups([[leg["index"]] for leg in result.legs] + [f["legs"] for f in folds])
    for owner, figures in zip([*result.legs, *folds], groups, strict=True):
        owner["cadence"] = figures


def _prefill_convention(
    arm_legs: pl.DataFrame,
    sums: dict[int, dict[str, Any]],
    requests: dict[int, list[dict[str, Any]]],
    stated: int | None,
) -> dict[str, Any]:
    """How many output tokens per request come from prefill rather than a verify step.

    Stated by the user, or learned from the arm: each leg whose every line carries `emitted`
    votes for the k in (0, 1) with completion_tokens = k * requests + sum(emitted); the k with
    most votes wins (ties and no votes: the servers' 1). Legs that disagree are flagged.
    """
    if stated is not None:
        return {"per_request": stated, "source": "stated"}
    votes = dict.fromkeys(PREFILL_CONVENTIONS, 0)
    for leg in arm_legs.iter_rows(named=True):
        leg_sums = sums.get(leg["index"])
        count = len(requests.get(leg["index"], []))
        if not leg_sums or not count or leg_sums["emitted_lines"] != leg_sums["lines"]:
            continue
        for k in PREFILL_CONVENTIONS:
            if leg["completion_tokens"] == k * count + leg_sums["emitted"]:
                votes[k] += 1
    legs_agreeing = {str(k): count for k, count in votes.items()}  # JSON keys are strings
    if not any(votes.values()):
        return {"per_request": SERVER_PREFILL_TOKENS, "source": "default", "legs": legs_agreeing}
    best = max(PREFILL_CONVENTIONS, key=lambda k: (votes[k], k == SERVER_PREFILL_TOKENS))
    return {"per_request": best, "source": "learned from the arm", "legs": legs_agreeing}


def _fold_replicates(
    arm_legs: pl.DataFrame,
    partial: PartialFold,
    check: ThroughputCheck,
    cadence: Future[Cadence],
    resamples: int,
    seed: int,
) -> dict[str, Replicates]:
    """The warm and all-legs folds' replicates (none for 0 resamples), from the same sums as
    the legs' figures: per request S, P, A and its cadence's decode steps and nanoseconds (a
    request without cadence decodes nothing)."""
    if not resamples:
        return {}
    decode = cadence.result().requests.select(
        *CADENCE_KEY, pl.col("intervals").alias("decode_steps"), "decode_ns"
    )
    ordered = (
        partial.requests.select(*CADENCE_KEY, "steps", "proposed", "accepted")
        .join(decode, on=CADENCE_KEY, how="left", nulls_equal=True)  # null: an integer id
        .with_columns(pl.col("decode_steps", "decode_ns").fill_null(0))
        .sort(CADENCE_KEY)
    )
    requests = {key[0]: frame for key, frame in ordered.partition_by("leg", as_dict=True).items()}
    steps_in_leg = dict(partial.legs.select("leg", "steps").iter_rows())
    warm_set = set(check.warm_legs)
    legs, warm = [], []
    for leg in arm_legs.iter_rows(named=True):
        index = leg["index"]
        frame = requests.get(index, ordered.clear())
        legs.append(
            bootstrap_leg(
                leg,
                {name: frame[name].to_numpy() for name in _REQUEST_SUMS},
                steps_in_leg.get(index, 0),
            )
        )
        warm.append(index in warm_set)
    return fold_replicates(legs, warm, resamples, seed)


_REQUEST_SUMS = ("steps", "proposed", "accepted", "decode_steps", "decode_ns")


def add_intervals(
    result: FoldResult, replicates: dict[str, Replicates], resamples: int, seed: int
) -> None:
    """Put ``<figure>_ci`` beside each pooled figure of the warm and all-legs folds."""
    result.replicates = replicates
    for name, fold in (("warm", result.warm), ("all", result.all)):
        fold.update(interval_fields(result.replicates.get(name)))
        if fold.get("cadence") is not None:
            fold["cadence"]["decode_steps_per_s_ci"] = decode_interval(result.replicates.get(name))
    result.bootstrap = method_note(resamples, seed)


MAX_LEGS_NAMED = 8


def _refuse_warm_legs_without_steps(legs: list[dict[str, Any]], partial: PartialFold) -> None:
    empty = [leg for leg in legs if leg["warm"] and leg["steps"] == 0]
    if not empty:
        return
    files = partial.files
    unattributed = int(files["unattributed"].sum()) if files.height else 0
    ambiguous = int(files["ambiguous"].sum()) if files.height else 0
    named = ", ".join(
        f"leg {leg['index']} (run {leg['run']}, {leg['lines']} lines without a draft)"
        for leg in empty[:MAX_LEGS_NAMED]
    )
    if len(empty) > MAX_LEGS_NAMED:
        named += f" and {len(empty) - MAX_LEGS_NAMED} more"
    found = (
        f"{len(empty)} warm leg(s) have no verify step with a draft in the step log: {named}. "
        "A drafter that never proposed is not a 0% acceptance. "
    )
    if ambiguous:
        raise RefusedError(
            found + f"{ambiguous} step line(s) are ambiguous: they fall inside two or more "
            "overlapping leg windows and carry no leg label that names exactly one of them, so "
            "they are kept out of every leg. Label the legs: run each leg's engine with "
            "DFLASH_STEP_LEG=<label> and give that leg the same 'leg' field in the arm record"
            + (
                f" ({unattributed} other line(s) fell outside every leg window)"
                if unattributed
                else ""
            )
        )
    raise RefusedError(
        found + f"{unattributed} step line(s) fell outside every leg window: check that the log "
        "belongs to this run and that the engine's clock matches the gate's"
    )


def _writers(partial: PartialFold, paths: list[str]) -> list[dict[str, Any]]:
    """The writers' line counts; ``paths`` (the logs read) name where a refusal looked."""
    writers = []
    for row in partial.writers.sort("w").iter_rows(named=True):
        expected = row["max_n"] + 1
        if row["lines"] > expected:
            where = paths[0] if len(paths) == 1 else f"{len(paths)} logs ({', '.join(paths)})"
            raise RefusedError(
                f"{where}: writer {row['w']} (pid {row['pid']}) has {row['lines']} lines but "
                f"counted only {expected}: some lines were read twice. Is one log given twice, "
                "or copied into two files?"
            )
        writers.append({**row, "lost": expected - row["lines"]})
    return writers


def _files(partial: PartialFold, read_counts: dict[str, ReadCounts]) -> list[dict[str, Any]]:
    rows = {row["path"]: row for row in partial.files.iter_rows(named=True)}
    files = []
    for path, counts in read_counts.items():
        row = rows.get(path) or {
            "path": path, "lines": 0, "attributed": 0, "unattributed": 0, "ambiguous": 0
        }  # fmt: skip
        entry = {**row, "torn": counts.torn_lines, "skipped": counts.skipped_lines}
        if counts.kind != "step log":
            entry.update(kind=counts.kind, run_lines=counts.run_lines,
                         other_lines=counts.other_lines)  # fmt: skip
        files.append(entry)
    return files
