"""A fold of step logs over an arm record's legs: the whole job, no printing (``fold.api`` is
its public face)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from fold.errors import InputError, RefusedError
from fold.folding import native
from fold.folding.accumulate import MERGE_EVERY, PartialFold
from fold.folding.build import build_result, settle_lines
from fold.folding.cadence import DEFAULT_STALL_FACTOR, check_stall_factor
from fold.folding.counter_check import check_counters
from fold.folding.counter_fold import fold_counters
from fold.folding.document import Document
from fold.folding.engine_trace_fold import engine_trace_fold
from fold.folding.host_sums import RefusedWithSums, SumsFile, host_sums
from fold.folding.line_figures import LineFigures
from fold.folding.line_rows import hold_unsure
from fold.folding.logfile import Legs, LogFile
from fold.folding.merge import ROW_TABLES, merge_all
from fold.folding.result import ENGINE_TRACE, STEP_LOG
from fold.folding.uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED, check_resamples
from fold.folding.warm import DEFAULT_PREDICATE, ThroughputCheck, check_arm
from fold.inputs.acceptance import DEFAULT_WINDOW_STEPS
from fold.inputs.arm import ArmRecord, load_arm
from fold.inputs.engine_trace import looks_like_engine_trace, read_engine_trace
from fold.inputs.reader import DEFAULT_BLOCK_BYTES, ReadCounts, expand_log_paths

ProgressCallback = Callable[[int], None]
"""Called with the number of bytes read since the last call."""


@dataclass
class LogFold:
    """A fold in progress: the partial fold of the logs read so far and what reading met."""

    arm: ArmRecord
    partial: PartialFold = field(default_factory=PartialFold)
    read_counts: dict[str, ReadCounts] = field(default_factory=dict)
    step_source: str = STEP_LOG
    """The hook's step logs (``STEP_LOG``) or the engine's trace (``ENGINE_TRACE``)."""
    tally_drafts: bool = False
    """Count each request's drafted lines by (proposed, accepted) as the logs are read: a
    fold whose ``result`` is asked for the sums file needs it from its first file."""
    draft_positions: pl.DataFrame | None = None
    """Each request's steps by draft position where they are known already (a union of sums
    files carries them, ``fold.folding.from_sums``): the sums file takes them instead of
    counting them from the logs' lines, which such a fold does not have."""
    _legs: Legs | None = field(default=None, repr=False, compare=False)

    def add_engine_traces(self, paths: list[str], *, skip_bad_lines: bool = False) -> None:
        """The engine's own trace: one stderr file per prompt process, in prompt order
        (``fold.inputs.engine_trace``). Its steps are given legs by their files' run lines, not by
        time, so they are read all at once, and only into a fold of nothing else."""
        if self.read_counts:
            raise InputError(
                f"{paths[0]}: the engine's trace cannot join a fold of other step logs"
            )
        traces = [read_engine_trace(path, skip_bad_lines=skip_bad_lines) for path in paths]
        self.partial = engine_trace_fold(traces, self.arm)
        for trace in traces:
            trace.counts.kind = "engine trace"
            trace.counts.run_lines = trace.run_lines
            trace.counts.other_lines = trace.other_lines
            self.read_counts[trace.path] = trace.counts
        self.step_source = ENGINE_TRACE

    def add_file(
        self,
        path: str,
        *,
        skip_bad_lines: bool = False,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Read the step log at ``path`` into the fold, ``block_bytes`` at a time, calling
        ``progress`` with the bytes read since its last call. ``skip_bad_lines`` counts a
        malformed line as skipped instead of refusing the file; a log already in the fold is an
        ``InputError``."""
        if path in self.read_counts:
            raise InputError(f"{path}: this step log is already in the fold")
        log = LogFile(
            path,
            skip_bad_lines=skip_bad_lines,
            block_bytes=block_bytes,
            tally_drafts=self.tally_drafts,
        )
        pending: list[PartialFold] = []
        reported = 0
        for partial, _ in log.read_available(self.legs()):
            if partial is not None:
                pending.append(partial)
            if len(pending) >= MERGE_EVERY:
                self.partial = merge_all([self.partial, *pending])
                pending = []
            if progress is not None and log.offset > reported:
                progress(log.offset - reported)
                reported = log.offset
        # Lines the read could not fold in order are held now, while the file is there.
        self.partial = hold_unsure(merge_all([self.partial, *pending]), self.legs().native)
        log.finish()
        self.read_counts[path] = log.counts

    def legs(self) -> Legs:
        """The arm's legs indexed for reading (once per fold)."""
        if self._legs is None:
            self._legs = Legs.of(self.arm.legs)
        return self._legs

    def merge(self, other: LogFold) -> LogFold:
        """The fold of both sets of logs (they must be distinct files over the same arm)."""
        overlap = set(self.read_counts) & set(other.read_counts)
        if overlap:
            raise InputError(f"{sorted(overlap)[0]}: the same step log is in both folds")
        return LogFold(
            self.arm,
            merge_all([self.partial, other.partial]),
            {**self.read_counts, **other.read_counts},
            tally_drafts=self.tally_drafts and other.tally_drafts,
        )

    def result(
        self,
        predicate: str = DEFAULT_PREDICATE,
        window_steps: int = DEFAULT_WINDOW_STEPS,
        *,
        prefill_tokens: int | None = None,
        resamples: int = DEFAULT_RESAMPLES,
        seed: int = DEFAULT_SEED,
        stall_factor: float = DEFAULT_STALL_FACTOR,
        sums: bool = False,
        check_lines: Callable[[LineFigures], None] | None = None,
    ) -> Document:
        """The fold, with 95% bootstrap intervals (``resamples`` 0 leaves them out), refused
        unless it agrees with the engine's own counters where the record carries them.
        ``sums``: the document carries the sums file too (``Document.sums``; a refusal then
        carries it, ``RefusedWithSums``). ``check_lines``: called with the figures of the
        partial's lines once they are made, before the rest (a union of sums files holds its
        files' cadence columns to them), to raise where they disagree."""
        check = check_arm(self.arm, predicate)
        lines = self.settle(check, stall_factor, sums=sums)
        if check_lines is not None:
            check_lines(lines)
        return self._document(
            check,
            window_steps,
            prefill_tokens=prefill_tokens,
            resamples=resamples,
            seed=seed,
            stall_factor=stall_factor,
            lines=lines,
            sums=self.sums_file(lines, check) if sums else None,
        )

    def settle(self, check: ThroughputCheck, stall_factor: float, *, sums: bool) -> LineFigures:
        """The figures from the partial's lines (``settle_lines``): after them, the document
        needs none of its per-line tables."""
        known = self.draft_positions
        lines = settle_lines(
            self.partial,
            self.arm.legs,
            check,
            stall_factor=stall_factor,
            step_source=self.step_source,
            draft_positions=sums and known is None,
        )
        return replace(lines, draft_positions=known) if sums and known is not None else lines

    def sums_file(self, lines: LineFigures, check: ThroughputCheck) -> SumsFile:
        """This fold's sums file (``fold.folding.host_sums``), its lines settled with the steps
        by draft position."""
        return host_sums(
            self.arm.legs, self.partial, self.read_counts, self.step_source, lines, check.warm_legs
        )

    def _document(
        self,
        check: ThroughputCheck,
        window_steps: int,
        *,
        prefill_tokens: int | None,
        resamples: int,
        seed: int,
        stall_factor: float,
        lines: LineFigures,
        sums: SumsFile | None = None,
    ) -> Document:
        try:
            result = build_result(
                self.arm.legs,
                self.partial,
                self.read_counts,
                check,
                window_steps,
                prefill_tokens=prefill_tokens,
                stall_factor=stall_factor,
                resamples=resamples,
                seed=seed,
                step_source=self.step_source,
                lines=lines,
            )
            return Document(result, check_counters(result, self.arm.counters), sums=sums)
        except RefusedError as refused:
            if sums is None:
                raise
            # This host's fold is not the gate's: its part of the union is still written.
            raise RefusedWithSums(str(refused), sums) from None


def checked_settings(
    arm: ArmRecord | str | Path,
    predicate: str,
    window_steps: int,
    resamples: int,
    seed: int,
    stall_factor: float,
) -> tuple[ArmRecord, ThroughputCheck]:
    """The arm record and its warm legs, the fold's settings checked: before any input is
    read, so that a mistake is refused without the cost of reading."""
    record = arm if isinstance(arm, ArmRecord) else load_arm(arm)
    if window_steps < 1:
        raise InputError(f"--window must be at least 1 step, got {window_steps}")
    check_resamples(resamples, seed)
    check_stall_factor(stall_factor)
    return record, check_arm(record, predicate)


def fold_acceptance(
    arm: ArmRecord | str | Path,
    logs: list[str],
    *,
    predicate: str = DEFAULT_PREDICATE,
    window_steps: int = DEFAULT_WINDOW_STEPS,
    skip_bad_lines: bool = False,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    progress: ProgressCallback | None = None,
    prefill_tokens: int | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    stall_factor: float = DEFAULT_STALL_FACTOR,
    sums: bool = False,
) -> Document:
    """Fold the step logs (paths or globs) over the arm's legs: the whole job, no printing.

    With no logs, the legs' own counters are folded (``fold.folding.counter_fold``): every figure
    that needs the steps themselves is then None.

    ``prefill_tokens``: output tokens per request that no verify step emits (1 for servers, 0
    for llama.cpp's speculative-simple); None learns it from the arm.

    ``sums``: the document carries the sums file (``Document.sums``, ``--sums``), with each
    request's steps by draft position, counted as the logs are read (a table entry per
    request and count met); a refused fold raises ``RefusedWithSums``, which carries it.

    The warm predicate and the recorded throughput fold are checked before any log is read, so
    a mismatch is refused without the cost of reading.
    """
    record, check = checked_settings(arm, predicate, window_steps, resamples, seed, stall_factor)
    if not logs:
        result = fold_counters(
            record.legs,
            record.counters,
            check,
            window_steps,
            stall_factor=stall_factor,
            resamples=resamples,
            seed=seed,
        )
        return Document(result, check_counters(result, record.counters))
    fold = LogFold(record, tally_drafts=sums)
    paths = expand_log_paths(logs)
    traces = [path for path in paths if looks_like_engine_trace(path)]
    if traces and len(traces) < len(paths):
        hook = next(path for path in paths if path not in traces)
        raise InputError(
            f"{traces[0]} is the engine's trace (VT_SPEC_TRACE stderr) and {hook} the hook's "
            "step log: fold one source at a time (both would count the same steps twice)"
        )
    if traces:
        fold.add_engine_traces(traces, skip_bad_lines=skip_bad_lines)
    for path in paths if not traces else []:
        fold.add_file(
            path, skip_bad_lines=skip_bad_lines, block_bytes=block_bytes, progress=progress
        )
    lines = fold.settle(check, stall_factor, sums=sums)
    carried = fold.sums_file(lines, check) if sums else None
    # This fold is the call's alone and takes no more files: its times and rows from the lines
    # go before the rest of the result is built, which never reads them.
    fold.partial = replace(
        fold.partial,
        **{name: getattr(fold.partial, name).clear() for name in ("step_times", *ROW_TABLES)},
    )
    native.release_memory()  # what the lines and the line figures' columns held
    return fold._document(
        check,
        window_steps,
        prefill_tokens=prefill_tokens,
        resamples=resamples,
        seed=seed,
        stall_factor=stall_factor,
        lines=lines,
        sums=carried,
    )
