"""The step lines a timeline needs, read again and attributed: the timeline's input.

The fold keeps no per-step rows beyond each request's times, so ``--trace`` reads the logs a
second time. The native pass hands back every attributed line (``fold.folding.native.read_range``
with ``want_lines``); without the extension, or for a file the pass cannot take, the polars
reference reader (``fold.inputs.reader.StepLogReader``) and the fold's attribution
(``fold.folding.attribute``) read the same lines with the same errors, more slowly. The tests hold
both to the same lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from fold.errors import InputError
from fold.folding import native
from fold.folding.accumulate import REQUEST_KEY, checked_durations
from fold.folding.attribute import ATTRIBUTED, attribute
from fold.folding.block_fold import duration_sums
from fold.folding.logfile import Legs
from fold.inputs.arm import ArmRecord
from fold.inputs.engine_trace import NO_TIME_STAMPS, looks_like_engine_trace
from fold.inputs.reader import ReadCounts, StepLogReader, expand_log_paths


@dataclass(frozen=True)
class TraceLines:
    """Every attributed line in the columns a timeline draws, each writer's pid, and the logs
    they came from."""

    lines: pl.DataFrame
    pids: dict[str, int]
    paths: list[str]
    arm: str = ""
    """The arm record whose legs the lines were attributed to."""


def attributed_lines(
    arm: ArmRecord, logs: list[str], *, skip_bad_lines: bool = False
) -> TraceLines:
    """The attributed lines of ``logs`` (paths or globs) over ``arm``'s legs.

    The engine's own trace has no time stamps to lay out: it is refused here, before any read.
    """
    paths = expand_log_paths(logs)
    for path in paths:
        if looks_like_engine_trace(path):
            raise InputError(
                f"--trace {path}: the time axis {NO_TIME_STAMPS}; the hook's step log "
                "(DFLASH_STEP_LOG) has them"
            )
    lines, pids = _read(arm, paths, skip_bad_lines)
    return TraceLines(lines, pids, paths, arm.path)


_LINE_SCHEMA = {
    "leg": pl.Int32,
    "w": pl.Categorical,
    "seq": pl.UInt64,
    "sid": pl.String,
    "t_ns": pl.Int64,
    "proposed": pl.Int32,
    "accepted": pl.Int32,
    "emitted": pl.Int32,
}


def _read(
    arm: ArmRecord, paths: list[str], skip_bad_lines: bool
) -> tuple[pl.DataFrame, dict[str, int]]:
    """The attributed lines, in the few narrow columns the trace needs (a log of millions of
    lines is held whole), and each writer's pid. The native pass hands them back when it is
    built (a file it cannot take goes to the polars reader, as a fold's does)."""
    legs = Legs.of(arm.legs)
    frames = []
    pids: dict[str, int] = {}

    def keep(lines: pl.DataFrame) -> None:
        for w, pid in lines.group_by("w").agg(pl.col("pid").max()).iter_rows():
            pids[w] = max(pid, pids.get(w, pid))
        frames.append(lines.select(pl.col(name).cast(dtype) for name, dtype in
                                   _LINE_SCHEMA.items()))  # fmt: skip

    for path in paths:
        read = None
        if native.available():
            read = native.read_range(
                path,
                arm.legs,
                legs.windows,
                legs.native,
                ReadCounts(),
                skip_bad_lines=skip_bad_lines,
                want_lines=True,
            )
        if read is not None and read.attributed_lines is not None:
            keep(read.attributed_lines)
            continue
        reader = StepLogReader(path, skip_bad_lines=skip_bad_lines)
        durations = []
        for block in reader.read_available():
            attributed = attribute(block, legs.windows).filter(pl.col("status") == ATTRIBUTED)
            keep(attributed)
            durations.append(attributed.group_by(REQUEST_KEY).agg(duration_sums()))
        reader.finish()
        # The native pass sums each request's durations as it reads and refuses a sum past
        # 2^63 - 1 ns; the lines read here are held to the same check, so either way of reading
        # gives the trace the same lines or the same refusal.
        if durations:
            checked_durations(
                pl.concat(durations)
                .group_by(REQUEST_KEY)
                .agg(pl.col("draft_ns", "verify_ns").sum())
            )
    lines = pl.concat(frames) if frames else pl.DataFrame(schema=_LINE_SCHEMA)
    return lines, pids
