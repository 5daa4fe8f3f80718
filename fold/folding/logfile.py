"""One step-log file read, attributed and folded from where it last stopped.

Both the one-shot fold (``fold.folding.log_fold``) and the follower (``fold.folding.follow``) read
files through ``LogFile``: the native reader (``fold.folding.native``) when it is built, else the
polars reference reader (``fold.inputs.reader.StepLogReader``) with
``fold.folding.block_fold.partial_fold``. Only whole lines are read; a last line without its
newline is held back, and ``finish`` (the file is complete) counts it as torn.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass

import polars as pl

from fold.errors import InputError
from fold.folding import native
from fold.folding.accumulate import REQUEST_KEY, PartialFold
from fold.folding.attribute import LegWindows, leg_windows
from fold.folding.block_fold import partial_fold
from fold.inputs.reader import DEFAULT_BLOCK_BYTES, ReadCounts, StepLogReader

FOLLOW_CHUNK_BYTES = 64 * 1024 * 1024
"""A follower reads a large backlog this much at a time: its per-line columns stay bounded."""


@dataclass(frozen=True)
class Legs:
    """An arm record's legs with their windows, indexed once for every file."""

    legs: pl.DataFrame
    windows: LegWindows
    native: native.NativeLegs

    @classmethod
    def of(cls, legs: pl.DataFrame) -> Legs:
        windows = leg_windows(legs)
        return cls(legs, windows, native.NativeLegs.of(legs, windows))


_NO_LEGS = native.NativeLegs.of(None, None)


class LogFile:
    """One file; ``read_available`` folds what was appended since the last call."""

    def __init__(
        self,
        path: str,
        *,
        skip_bad_lines: bool = False,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
        keep_seeds: bool = False,
        tally_drafts: bool = False,
    ) -> None:
        """``keep_seeds``: each native read goes on from where the last left the requests
        (``fold.folding.native.read_range``'s seeds), so that a file read in many pieces (a
        follower's) needs none of its lines read again (``fold.folding.line_rows``).
        ``tally_drafts``: the native reads count the drafted lines by (proposed, accepted),
        for the sums file's steps by draft position."""
        self.path = path
        self.keep_seeds = keep_seeds
        self.tally_drafts = tally_drafts
        self._seeds: pl.DataFrame | None = None
        self.skip_bad_lines = skip_bad_lines
        self.block_bytes = block_bytes
        self.counts = ReadCounts()
        self.lines_read = 0
        self._consumed = 0  # the native reader's next line start
        self._seen = 0  # bytes of the file looked at, held-back bytes included
        self._polars: StepLogReader | None = None

    @property
    def offset(self) -> int:
        """Bytes read so far, an unfinished last line included."""
        return self._polars.offset if self._polars is not None else self._seen

    @property
    def pending_bytes(self) -> int:
        if self._polars is not None:
            return self._polars.pending_bytes
        return self._seen - self._consumed

    def read_available(
        self, legs: Legs | None, *, want_steps: bool = False
    ) -> Iterator[tuple[PartialFold | None, pl.DataFrame | None]]:
        """(partial fold, steps) per piece read: the partial over ``legs`` (None without legs),
        and with ``want_steps`` the folded lines' ``w``, ``label``, ``t_ns``, ``proposed``,
        ``accepted`` (else None). Raises the exact parser's errors, naming file and line."""
        if self._polars is None and native.available():
            if (yield from self._read_native(legs, want_steps)):
                return
            # A range the native pass could not take: the polars reader, from the same line.
            self._polars = self._polars_reader()
            self._polars.offset = self._consumed
            self._polars.lines_read = self.lines_read
        if self._polars is None:
            self._polars = self._polars_reader()
        for frame in self._polars.read_available():
            self.lines_read = self._polars.lines_read
            partial = (
                None if legs is None else partial_fold(frame, legs.windows, legs.legs, self.path)
            )
            yield partial, frame.drop("line") if want_steps else None

    def _read_native(
        self, legs: Legs | None, want_steps: bool
    ) -> Generator[tuple[PartialFold | None, pl.DataFrame | None], None, bool]:
        """Yields what ``read_available`` yields; returns False where the native pass could not
        take a range (the polars reader goes on from the same line), else True."""
        try:
            size = os.path.getsize(self.path)
        except OSError as error:
            raise InputError(f"{self.path}: cannot read the step log: {error.strerror}") from error
        chunk = FOLLOW_CHUNK_BYTES
        while self._consumed < size:
            end = min(size, self._consumed + chunk) if want_steps else -1
            try:
                read = self._native_range(legs, end, want_steps)
            except OSError as error:
                raise InputError(
                    f"{self.path}: cannot read the step log: {error.strerror}"
                ) from error
            if read is None:
                return False
            self.lines_read += read.lines
            self._seen = max(self._seen, read.end)
            if self.keep_seeds:
                self._keep(read.seeds)
            advanced = read.consumed > self._consumed
            self._consumed = read.consumed
            yield (None if legs is None else read.partial), read.steps
            if not want_steps or read.end >= size:
                break
            chunk = chunk if advanced else 2 * chunk  # a line longer than the chunk
        return True

    def _keep(self, seeds: pl.DataFrame | None) -> None:
        """The requests' seeds after a read: its own, over those of the reads before."""
        if seeds is None:  # none may go on from this read: every request starts anew
            self._seeds = None
        elif self._seeds is None or not self._seeds.height:
            self._seeds = seeds
        else:
            older = self._seeds.join(seeds, on=REQUEST_KEY, how="anti", nulls_equal=True)
            self._seeds = pl.concat([older, seeds])

    def _native_range(
        self, legs: Legs | None, end: int, want_steps: bool
    ) -> native.RangeRead | None:
        return native.read_range(
            self.path,
            None if legs is None else legs.legs,
            None if legs is None else legs.windows,
            _NO_LEGS if legs is None else legs.native,
            self.counts,
            begin=self._consumed,
            end=end,
            first_line=self.lines_read + 1,
            skip_bad_lines=self.skip_bad_lines,
            want_steps=want_steps,
            seeds=self._seeds,
            keep_seeds=self.keep_seeds,
            tally_drafts=self.tally_drafts,
        )

    def _polars_reader(self) -> StepLogReader:
        reader = StepLogReader(
            self.path, skip_bad_lines=self.skip_bad_lines, block_bytes=self.block_bytes
        )
        reader.counts = self.counts  # one file, one set of counts, whichever reader
        return reader

    def finish(self) -> None:
        """The file is complete: an unfinished last line is torn."""
        if self._polars is not None:
            self._polars.finish()
        elif self._seen > self._consumed:
            self.counts.torn_lines += 1
            self._consumed = self._seen
