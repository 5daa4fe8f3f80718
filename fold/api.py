"""The library's entry points: fold step logs over an arm record's legs, with no printing."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fold.acceptance import DEFAULT_WINDOW_STEPS
from fold.accumulate import MERGE_EVERY, PartialFold, fold_file, merge_all, partial_fold
from fold.arm import ArmRecord, load_arm
from fold.attribute import leg_windows
from fold.errors import InputError
from fold.native import fold_file_native
from fold.reader import DEFAULT_BLOCK_BYTES, ReadCounts, StepLogReader, expand_log_paths
from fold.result import FoldResult, add_intervals, build_result
from fold.uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED, check_resamples
from fold.warm import DEFAULT_PREDICATE, check_arm

ProgressCallback = Callable[[int], None]
"""Called with the number of bytes read since the last call."""


@dataclass
class LogFold:
    """A fold in progress: the partial fold of the logs read so far and what reading met."""

    arm: ArmRecord
    partial: PartialFold = field(default_factory=PartialFold)
    read_counts: dict[str, ReadCounts] = field(default_factory=dict)

    def add_file(
        self,
        path: str,
        *,
        skip_bad_lines: bool = False,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
        progress: ProgressCallback | None = None,
    ) -> None:
        if path in self.read_counts:
            raise InputError(f"{path}: this step log is already in the fold")
        reader = StepLogReader(path, skip_bad_lines=skip_bad_lines, block_bytes=block_bytes)
        native = fold_file_native(path, self.arm.legs)
        if native is not None:
            # The common case, folded in one native pass (fold.native); else the polars paths.
            self.partial = merge_all([self.partial, native])
            self.read_counts[path] = reader.counts
            if progress is not None:
                progress(os.path.getsize(path))
            return
        windows = leg_windows(self.arm.legs)
        streamed_bytes = 0

        def streamed_progress(size: int) -> None:
            nonlocal streamed_bytes
            streamed_bytes += size
            if progress is not None:
                progress(size)

        streamed = fold_file(path, windows, self.arm.legs, streamed_progress)
        if streamed is not None:
            # Every line had the writers' layout and was folded in one streaming pass.
            self.partial = merge_all([self.partial, streamed])
            self.read_counts[path] = reader.counts
            return
        offset = streamed_bytes  # a scan that gave up has already reported these bytes
        pending: list[PartialFold] = []
        for block in reader.read_available():
            pending.append(partial_fold(block, windows, self.arm.legs, path))
            if len(pending) >= MERGE_EVERY:
                self.partial = merge_all([self.partial, *pending])
                pending = []
            if progress is not None and reader.offset > offset:
                progress(reader.offset - offset)
                offset = reader.offset
        self.partial = merge_all([self.partial, *pending])
        reader.finish()
        self.read_counts[path] = reader.counts

    def merge(self, other: LogFold) -> LogFold:
        """The fold of both sets of logs (they must be distinct files over the same arm)."""
        overlap = set(self.read_counts) & set(other.read_counts)
        if overlap:
            raise InputError(f"{sorted(overlap)[0]}: the same step log is in both folds")
        return LogFold(
            self.arm, self.partial.merge(other.partial), {**self.read_counts, **other.read_counts}
        )

    def result(
        self,
        predicate: str = DEFAULT_PREDICATE,
        window_steps: int = DEFAULT_WINDOW_STEPS,
        *,
        prefill_tokens: int | None = None,
        resamples: int = DEFAULT_RESAMPLES,
        seed: int = DEFAULT_SEED,
    ) -> FoldResult:
        """The fold, with 95% bootstrap intervals (``resamples`` 0 leaves them out)."""
        check = check_arm(self.arm, predicate)
        result = build_result(
            self.arm.legs,
            self.partial,
            self.read_counts,
            check,
            window_steps,
            prefill_tokens=prefill_tokens,
        )
        add_intervals(result, resamples, seed)
        return result


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
) -> FoldResult:
    """Fold the step logs (paths or globs) over the arm's legs: the whole job, no printing.

    ``prefill_tokens``: output tokens per request that no verify step emits (1 for servers, 0
    for llama.cpp's speculative-simple); None learns it from the arm.

    The warm predicate and the recorded throughput fold are checked before any log is read, so
    a mismatch is refused without the cost of reading.
    """
    record = arm if isinstance(arm, ArmRecord) else load_arm(arm)
    if window_steps < 1:
        raise InputError(f"--window must be at least 1 step, got {window_steps}")
    check_resamples(resamples, seed)
    check_arm(record, predicate)
    fold = LogFold(record)
    for path in expand_log_paths(logs):
        fold.add_file(
            path, skip_bad_lines=skip_bad_lines, block_bytes=block_bytes, progress=progress
        )
    return fold.result(
        predicate, window_steps, prefill_tokens=prefill_tokens, resamples=resamples, seed=seed
    )
