"""Building a fold's result: the legs' figures, the warm and all-legs pools with their
intervals, and what the lines were, from the partial folds (``build_result``); the result
itself is ``fold.folding.result.FoldResult``."""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import polars as pl

from fold.errors import RefusedError
from fold.folding.accumulate import REQUEST_KEY, PartialFold
from fold.folding.another_k import fold_another_k
from fold.folding.by_position import ORACLE_POSITION, POSITION, TRACE_POSITION, position_figures
from fold.folding.cadence import DEFAULT_STALL_FACTOR, Cadence, check_stall_factor
from fold.folding.fold_draws import fold_draws, position_sums
from fold.folding.leg_figures import (
    COUNT_NAMES,
    PooledFigures,
    frozen,
    stepped_figures,
    stepped_leg,
    with_counts,
)
from fold.folding.line_figures import LineFigures, line_figures
from fold.folding.per_request import with_request_figures
from fold.folding.pooled import Histograms, pooled
from fold.folding.request_rows import EMPTY, RequestRows, beside, request_tables
from fold.folding.result import (
    ENGINE_TRACE,
    ORACLE_STEPS,
    PREFILL_CONVENTIONS,
    PREFILL_DEFAULT,
    PREFILL_LEARNED,
    PREFILL_STATED,
    SERVER_PREFILL_TOKENS,
    STEP_LOG,
    FoldResult,
    prefill_convention,
    untimed,
)
from fold.folding.step_durations import step_durations
from fold.folding.step_split import NO_SPLIT, from_fold
from fold.folding.uncertainty import (
    DEFAULT_SEED,
    POOLED_FIGURES,
    Replicates,
    check_resamples,
    decode_interval,
    interval_fields,
    method_note,
    reach,
)
from fold.folding.warm import ThroughputCheck
from fold.folding.writers import writer_rows
from fold.inputs import acceptance
from fold.inputs.reader import ReadCounts, SkippedLine


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
    lines: LineFigures | None = None,
    draft_positions: bool = False,
) -> FoldResult:
    """``prefill_tokens``: output tokens per request not emitted by a verify step, when the
    user states it; None learns it from the arm (see ``_prefill_convention``). ``resamples``
    above 0 puts 95% bootstrap intervals beside the pooled figures (``add_intervals``).
    ``lines``: the partial's ``settle_lines``, when the caller computed them first (and let
    the lines go); else computed here. ``draft_positions``: each request's steps by draft
    position too, for the sums file (``fold.folding.request_positions``)."""
    stall_factor = check_stall_factor(stall_factor)
    check_resamples(resamples, seed)
    if lines is None:
        lines = settle_lines(
            partial,
            arm_legs,
            check,
            stall_factor=stall_factor,
            step_source=step_source,
            draft_positions=draft_positions,
        )
    cadence = lines.cadence
    # The bootstrap's draws run without the GIL (the extension, numpy) and need only the
    # partial's sums: started first, on a thread of its own, they overlap the acceptance
    # figures (mostly Python) instead of following them.
    with _no_cycle_collection(), ThreadPoolExecutor(max_workers=1) as pool:
        drawing = pool.submit(
            fold_draws, arm_legs, partial, check, cadence, lines.positions, resamples, seed
        )
        timed = untimed(step_source) is None
        requests = request_tables(
            partial.requests,
            cadence.requests if timed else None,
            partial.durations,
            lines.draft_positions,
        )
        drafts = _acceptance_drafts(
            arm_legs, partial, requests, read_counts, check, window_steps, prefill_tokens
        )
        _add_cadence(drafts, cadence, untimed(step_source))
        found, means = drawing.result()
        positions = lines.positions
        by_position = (
            None
            if positions is None
            else position_figures(positions, position_sums(found, positions))
        )
        # Per request and by position: the warm legs' only.
        warm = with_request_figures(
            finished_pooled(drafts.warm, found.get("warm")),
            drafts.legs,
            by_position,
            resamples,
            seed,
            means,
        )
        split = NO_SPLIT
        if timed:
            first = partial.requests.select(*REQUEST_KEY, "first_draft_ns", "first_verify_ns")
            split = from_fold(
                beside(partial.durations, first),
                cadence.requests,
                arm_legs["index"].to_list(),
                check.warm_legs,
                resamples,
                seed,
            )
        # Built once, from the finished drafts: nothing changes it after.
        return FoldResult(
            predicate=check.predicate,
            window_steps=window_steps,
            stall_factor=stall_factor,
            legs=tuple(stepped_figures(leg) for leg in drafts.legs),
            warm=warm,
            all=finished_pooled(drafts.all, found.get("all")),
            files=tuple(frozen(row) for row in drafts.files),
            writers=tuple(frozen(row) for row in drafts.writers),
            skipped_examples=drafts.skipped_examples,
            prefill_tokens=frozen(drafts.prefill_tokens),
            bootstrap=frozen(method_note(resamples, seed)),
            replicates=frozen(found),
            step_split=split,
            step_source=step_source,
            another_k=fold_another_k(partial, drafts.warm, resamples, seed, lines.step_lengths),
            durations=step_durations(partial.durations),
        )


def finished_pooled(draft: dict[str, Any], replicates: Replicates | None) -> PooledFigures:
    """A pooled fold's figures from its draft (``pooled``, with its cadence) and the 95%
    intervals its replicates give (None: each interval is None)."""
    cadence = draft.pop("cadence")
    if cadence is not None:
        decode = decode_interval(replicates)
        cadence = frozen(
            {
                **cadence,
                "decode_steps_per_s_ci": decode,
                "decode_steps_per_s_reach": reach(cadence["decode_steps_per_s"], decode),
            }
        )
    figures = with_counts(draft, draft)
    intervals: dict[str, Any] = interval_fields(replicates)
    for figure in POOLED_FIGURES:
        value = getattr(figures["counts"], figure) if figure in COUNT_NAMES else figures[figure]
        intervals[f"{figure}_reach"] = reach(value, intervals[f"{figure}_ci"])
    return PooledFigures(**figures, cadence=cadence, intervals=frozen(intervals))


@dataclass
class _Drafts:
    """The fold's figures while they are built, in this module only (plain dicts)."""

    legs: list[dict[str, Any]]
    warm: dict[str, Any]
    all: dict[str, Any]
    files: list[dict[str, Any]]
    writers: list[dict[str, Any]]
    skipped_examples: tuple[SkippedLine, ...]
    prefill_tokens: dict[str, Any]


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


def _acceptance_drafts(
    arm_legs: pl.DataFrame,
    partial: PartialFold,
    requests: Mapping[int, RequestRows],
    read_counts: dict[str, ReadCounts],
    check: ThroughputCheck,
    window_steps: int,
    prefill_tokens: int | None,
) -> _Drafts:
    warm_set = set(check.warm_legs)
    sums = {row["leg"]: row for row in partial.legs.iter_rows(named=True)}
    histograms = Histograms.of_rows(partial.histogram.iter_rows())
    bins: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for leg, _bin, steps, proposed, accepted in partial.bins.sort("leg", "bin").iter_rows():
        bins[leg].append((steps, proposed, accepted))
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
            requests=requests.get(leg["index"], EMPTY),
            window_steps=window_steps,
        )
        for leg in arm_legs.iter_rows(named=True)
    ]
    _refuse_warm_legs_without_steps(legs, partial)
    return _Drafts(
        legs=legs,
        warm=pooled([leg for leg in legs if leg["warm"]], histograms),
        all=pooled(legs, histograms),
        files=_files(partial, read_counts),
        writers=writer_rows(partial.writers, list(read_counts)),
        skipped_examples=tuple(
            example for counts in read_counts.values() for example in counts.skipped_examples
        ),
        prefill_tokens=convention,
    )


def _add_cadence(drafts: _Drafts, cadence: Cadence, no_times: str | None) -> None:
    """Each request's, each leg's and the folds' cadence, beside their acceptance."""
    if no_times is not None:  # no step times: no cadence at all, never one of zeros
        for owner in [*drafts.legs, drafts.warm, drafts.all]:
            owner["cadence"] = None
        return
    # each request's own cadence is in its row already (request_tables)
    folds = [drafts.warm, drafts.all]
    groups = cadence.groups([[leg["index"]] for leg in drafts.legs] + [f["legs"] for f in folds])
    for owner, figures in zip([*drafts.legs, *folds], groups, strict=True):
        owner["cadence"] = figures


def _prefill_convention(
    arm_legs: pl.DataFrame,
    sums: dict[int, dict[str, Any]],
    requests: Mapping[int, RequestRows],
    stated: int | None,
) -> dict[str, Any]:
    """How many output tokens per request come from prefill rather than a verify step.

    Stated by the user, or learned from the arm: each leg whose every line carries `emitted`
    votes for the k in (0, 1) with completion_tokens = k * requests + sum(emitted); the k with
    most votes wins (ties and no votes: the servers' 1). Legs that disagree are flagged.
    """
    if stated is not None:
        return prefill_convention(stated, PREFILL_STATED)
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
        return prefill_convention(SERVER_PREFILL_TOKENS, PREFILL_DEFAULT, legs_agreeing)
    best = max(PREFILL_CONVENTIONS, key=lambda k: (votes[k], k == SERVER_PREFILL_TOKENS))
    return prefill_convention(best, PREFILL_LEARNED, legs_agreeing)


def settle_lines(
    partial: PartialFold,
    arm_legs: pl.DataFrame,
    check: ThroughputCheck,
    *,
    stall_factor: float = DEFAULT_STALL_FACTOR,
    step_source: str = STEP_LOG,
    draft_positions: bool = False,
) -> LineFigures:
    """The figures that read the partial's lines (``fold.folding.line_figures``), as
    ``build_result`` takes them: after this, nothing in the fold needs the partial's lines
    (``step_times``, ``held_lines``) or its rows from them."""
    warm_legs = [index for index in arm_legs["index"].to_list() if index in check.warm_legs]
    # Steps without times (the engine's trace, an oracle's) keep their order, numbered in
    # place of times, which is all the figures by position need.
    position = {ORACLE_STEPS: ORACLE_POSITION, ENGINE_TRACE: TRACE_POSITION}.get(
        step_source, POSITION
    )
    with _no_cycle_collection():  # the cadence builds a dict per request
        return line_figures(
            partial,
            arm_legs,
            warm_legs,
            stall_factor=check_stall_factor(stall_factor),
            position=position,
            no_times=untimed(step_source),
            draft_positions=draft_positions,
        )


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
