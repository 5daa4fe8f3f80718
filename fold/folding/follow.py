"""Following growing step logs during a gate: a live fold, with no printing.

A ``Follower`` holds one reader per log file. Each ``poll`` re-globs the patterns (files that
appear later are picked up), checks every file for truncation or replacement (then everything
is re-read from the start, with a notice), and parses only the bytes appended since the last
poll. A final line without its newline is held back until the newline arrives: while the writer
runs it is an unfinished write, not a torn line. Only ``finish`` declares the files complete and
counts what is still held back as torn, exactly as a one-shot fold of the finished files does.

The arm record (``our-arm.json``) is written by the gate at the end of the run. Until it exists
(or while it does not parse, or is refused), the view shows provisional groups
(``fold.folding.provisional``): steps grouped by their ``leg`` label, or by writer when
unlabelled, and split where the steps pause for longer than ``gap_seconds``. When the record
appears or changes, every file is folded again from the start over its legs: the simplest
re-attribution that is always right.

``run_follow`` drives a follower until Ctrl-C or until no data arrived for ``idle_seconds``;
its clock and sleep are injectable, so tests need not wait in real time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import polars as pl

from fold.errors import FoldError, InputError
from fold.folding.accumulate import PartialFold
from fold.folding.cadence import DEFAULT_STALL_FACTOR, check_stall_factor
from fold.folding.document import Document
from fold.folding.line_rows import hold_unsure
from fold.folding.log_fold import LogFold
from fold.folding.logfile import Legs, LogFile
from fold.folding.merge import merge_all
from fold.folding.provisional import DEFAULT_GAP_SECONDS, ProvisionalGroup, ProvisionalGroups
from fold.folding.uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED, check_resamples
from fold.folding.warm import DEFAULT_PREDICATE, check_arm
from fold.inputs.acceptance import DEFAULT_WINDOW_STEPS
from fold.inputs.arm import ArmRecord, load_arm
from fold.inputs.engine_trace import looks_like_engine_trace
from fold.inputs.reader import logs_present, require_regular_file

DEFAULT_INTERVAL_SECONDS = 0.25
"""How often ``run_follow`` polls: a few refreshes a second at most."""
MIN_INTERVAL_SECONDS = 0.1
DEFAULT_FOLLOW_BLOCK_BYTES = 8 * 1024 * 1024
RECENT_NOTICES = 5


@dataclass(frozen=True)
class Notice:
    """Something the follower did that a user should know about (shown, never fatal)."""

    path: str
    message: str


@dataclass
class FollowView:
    """What one poll found: a fold when the arm record folds, else provisional groups."""

    result: Document | None
    provisional: list[ProvisionalGroup]
    status: str | None
    """Why there is no fold yet (no record, a refusal, a file that failed), or None."""
    notices: list[Notice]
    """Notices raised by this poll only."""
    recent_notices: list[Notice]
    """The last few notices of the whole follow, for display."""
    files: dict[str, int]
    """Bytes read so far per file."""
    lines: int
    new_bytes: int
    """Bytes read by this poll: 0 means no new data."""
    held_bytes: int
    """Bytes of unfinished last lines held back, over all files."""

    def to_json(self) -> dict[str, Any]:
        """What the live view shows of this poll: the fold's JSON document (or None), the
        provisional groups, the status, the recent notices and what was read."""
        return {
            "document": None if self.result is None else self.result.to_json(),
            "provisional": [group.to_json() for group in self.provisional],
            "status": self.status,
            "recent_notices": [vars(notice) for notice in self.recent_notices],
            "files": dict(self.files),
            "bytes": sum(self.files.values()),
            "lines": self.lines,
            "held_bytes": self.held_bytes,
        }


class _ResultOptions(TypedDict):
    resamples: int
    seed: int
    stall_factor: float
    prefill_tokens: int | None


@dataclass
class _Tail:
    path: str
    identity: tuple[int, int]
    reader: LogFile


@dataclass
class _ArmState:
    key: tuple[int, int, int] | None = None
    arm: ArmRecord | None = None
    legs: Legs | None = None
    problem: FoldError | None = None
    """Why the record as it is now does not load or is refused (its own error, raised as it
    is by the final fold: a refusal stays a refusal, exit 1)."""


class Follower:
    """Folds growing step logs a poll at a time; see the module docstring."""

    def __init__(
        self,
        arm_path: str | os.PathLike[str],
        log_patterns: list[str],
        *,
        predicate: str = DEFAULT_PREDICATE,
        window_steps: int = DEFAULT_WINDOW_STEPS,
        skip_bad_lines: bool = False,
        block_bytes: int = DEFAULT_FOLLOW_BLOCK_BYTES,
        gap_seconds: float = DEFAULT_GAP_SECONDS,
        resamples: int = DEFAULT_RESAMPLES,
        seed: int = DEFAULT_SEED,
        stall_factor: float = DEFAULT_STALL_FACTOR,
        prefill_tokens: int | None = None,
        sums: bool = False,
    ) -> None:
        if window_steps < 1:
            raise InputError(f"--window must be at least 1 step, got {window_steps}")
        if not log_patterns:
            raise InputError("name at least one step log (a path or a glob) to follow")
        self.arm_path = os.fspath(arm_path)
        self.log_patterns = list(log_patterns)
        self.predicate = predicate
        self.window_steps = window_steps
        self.skip_bad_lines = skip_bad_lines
        self.block_bytes = block_bytes
        self.gap_ns = round(gap_seconds * 1e9)
        # What the final fold and each live view are built with, the same as a one-shot fold's.
        self.result_options: _ResultOptions = {
            "resamples": check_resamples(resamples, seed),
            "seed": seed,
            "stall_factor": check_stall_factor(stall_factor),
            "prefill_tokens": prefill_tokens,
        }
        # The final fold's only: the live views never write a sums file.
        self.sums = sums
        self._tails: dict[str, _Tail] = {}
        self._arm = _ArmState()
        self._failure: FoldError | None = None
        self._polls = 0
        self._recent: list[Notice] = []
        self._dirty = False
        self._reset_sums()

    # -- polling -----------------------------------------------------------------------------

    def poll(self) -> FollowView:
        """Read what was appended since the last poll and return the current view."""
        notices: list[Notice] = []
        new_bytes = self._advance(notices)
        self._polls += 1
        self._recent = (self._recent + notices)[-RECENT_NOTICES:]
        return self._view(notices, new_bytes)

    def finish(self) -> Document:
        """Read to the end, count held-back fragments as torn, and return the final fold.

        Raises what a one-shot fold of the same files would (a record never read or refused, a bad
        line, a warm leg without steps).
        """
        if self._dirty:
            # A poll was interrupted (Ctrl-C) between reading a block and adding it.
            self._restart_all()
        self._advance([])
        # The record as it is now, first, as a one-shot fold takes it before it reads a line:
        # a record that no longer loads ends the follow with its own error (a refusal stays a
        # refusal), not with the legs it last had, nor with a line the read stopped at.
        if self._arm.problem is not None:
            raise self._arm.problem
        arm = self._arm.arm
        if arm is None:
            raise InputError(f"{self.arm_path}: no such arm record (the gate writes it last)")
        if self._failure is not None:
            raise self._failure
        if not self._tails:
            raise InputError(f"{', '.join(self.log_patterns)}: no step log appeared")
        for tail in self._tails.values():
            tail.reader.finish()
        return self._fold(arm).result(
            self.predicate,
            self.window_steps,
            **self.result_options,
            sums=self.sums,
        )

    def _advance(self, notices: list[Notice]) -> int:
        if self._reload_arm(notices):
            self._restart_all()
        for path in self._discover(notices):
            self._tails[path] = self._open_tail(path)
        if self._check_tails(notices):
            self._restart_all()
        return self._read_all()

    # -- the arm record ----------------------------------------------------------------------

    def _reload_arm(self, notices: list[Notice]) -> bool:
        """Load the record when it appears or changes; True when the legs changed."""
        try:
            stat = os.stat(self.arm_path)
        except OSError:
            return False  # not written yet (or gone: keep the legs last read)
        key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if key == self._arm.key:
            return False
        self._arm.key = key
        try:
            arm = load_arm(self.arm_path)
            check_arm(arm, self.predicate)
        except FoldError as error:
            # Half written, or refused: shown as the status until the file changes again.
            self._arm.problem = error
            return False
        had_legs = self._arm.arm is not None
        self._arm.arm, self._arm.legs, self._arm.problem = arm, Legs.of(arm.legs), None
        notices.append(
            Notice(
                self.arm_path,
                f"arm record {'changed' if had_legs else 'appeared'} "
                f"({arm.legs.height} legs): folding every log again over its legs",
            )
        )
        return True

    # -- files -------------------------------------------------------------------------------

    def _discover(self, notices: list[Notice]) -> list[str]:
        """Files matching the patterns that are not followed yet (by real path)."""
        followed = {os.path.realpath(path) for path in self._tails}
        found = []
        for path in self._matches():
            real = os.path.realpath(path)
            if real in followed or os.path.isdir(path):
                continue
            followed.add(real)
            found.append(path)
            if self._polls:
                notices.append(Notice(path, "new step log: following it"))
        return found

    def _matches(self) -> list[str]:
        return logs_present(self.log_patterns)

    def _open_tail(self, path: str) -> _Tail:
        return _Tail(path, _identity(path), self._new_reader(path))

    def _new_reader(self, path: str) -> LogFile:
        require_regular_file(path)
        if looks_like_engine_trace(path):
            # Its steps get legs from run lines printed after them, once a leg is over.
            raise InputError(
                f"{path}: the engine's trace (VT_SPEC_TRACE stderr) is folded once the gate is "
                "done, without --follow; --follow reads the hook's step logs"
            )
        return LogFile(
            path,
            skip_bad_lines=self.skip_bad_lines,
            block_bytes=self.block_bytes,
            keep_seeds=True,
            tally_drafts=self.sums,
        )

    def _check_tails(self, notices: list[Notice]) -> bool:
        """True when a file was truncated or replaced (everything is then read again)."""
        restart = False
        for tail in self._tails.values():
            try:
                stat = os.stat(tail.path)
            except OSError:
                continue  # removed: what was read stays in the fold
            identity = (stat.st_dev, stat.st_ino)
            if identity != tail.identity:
                notices.append(Notice(tail.path, "replaced by a new file: reading it again"))
                tail.identity = identity
                restart = True
            elif stat.st_size < tail.reader.offset:
                notices.append(
                    Notice(
                        tail.path,
                        f"truncated ({stat.st_size} bytes, {tail.reader.offset} were read): "
                        "reading it again",
                    )
                )
                restart = True
        return restart

    def _restart_all(self) -> None:
        for tail in self._tails.values():
            tail.reader = self._new_reader(tail.path)
        self._failure = None
        self._reset_sums()

    def _reset_sums(self) -> None:
        self._partial = PartialFold()
        self._provisional = ProvisionalGroups(self.gap_ns)
        self._lines = 0

    def _read_all(self) -> int:
        new_bytes = 0
        self._dirty = True
        for tail in self._tails.values():
            if self._failure is not None:
                break
            if not os.path.exists(tail.path):
                continue  # removed: what was read stays in the fold
            before = tail.reader.offset
            try:
                for partial, steps in tail.reader.read_available(self._arm.legs, want_steps=True):
                    self._add(partial, steps)
            except FoldError as error:
                self._failure = error
            new_bytes += tail.reader.offset - before
        self._dirty = False
        return new_bytes

    def _add(self, partial: PartialFold | None, steps: pl.DataFrame | None) -> None:
        if steps is not None:
            self._lines += steps.height
            self._provisional.add(steps)
        if partial is not None and self._arm.legs is not None:
            # Lines the reads cannot fold in order are held while the file is there to read.
            merged = merge_all([self._partial, partial])
            self._partial = hold_unsure(merged, self._arm.legs.native)

    # -- the view ----------------------------------------------------------------------------

    def _fold(self, arm: ArmRecord) -> LogFold:
        # Files in the order a one-shot fold reads them, so the final figures match it exactly.
        order = {path: index for index, path in enumerate(self._matches())}
        paths = sorted(self._tails, key=lambda path: order.get(path, len(order)))
        return LogFold(
            arm,
            self._partial,
            {path: self._tails[path].reader.counts for path in paths},
            tally_drafts=self.sums,
        )

    def _view(self, notices: list[Notice], new_bytes: int) -> FollowView:
        result = None
        status = None
        arm = self._arm.arm
        if self._failure is not None:
            status = f"reading stopped: {self._failure}"
        elif arm is None:
            status = str(self._arm.problem or "") or (
                f"waiting for {self.arm_path} (the gate writes it at the end): "
                "provisional groups by leg label or writer"
            )
        else:
            try:
                result = self._fold(arm).result(
                    self.predicate, self.window_steps, **self.result_options
                )
            except FoldError as error:
                status = f"not foldable yet: {error}"
        if self._arm.problem is not None and arm is not None and status is None:
            status = "the arm record changed but does not load; showing its last good legs: " + (
                str(self._arm.problem)
            )
        return FollowView(
            result=result,
            provisional=self._provisional.groups(),
            status=status,
            notices=notices,
            recent_notices=list(self._recent),
            files={path: tail.reader.offset for path, tail in self._tails.items()},
            lines=self._lines,
            new_bytes=new_bytes,
            held_bytes=sum(tail.reader.pending_bytes for tail in self._tails.values()),
        )


def _identity(path: str) -> tuple[int, int]:
    try:
        stat = os.stat(path)
    except OSError:
        return (0, 0)
    return (stat.st_dev, stat.st_ino)


@dataclass
class FollowOutcome:
    """How a follow ended (``"interrupted"`` or ``"idle"``) and the final fold."""

    result: Document
    reason: str
    views: int = 0
    notices: list[Notice] = field(default_factory=list)


def run_follow(
    follower: Follower,
    *,
    on_view: Callable[[FollowView], None] | None = None,
    interval: float = DEFAULT_INTERVAL_SECONDS,
    idle_seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> FollowOutcome:
    """Poll until Ctrl-C (KeyboardInterrupt) or ``idle_seconds`` without new data, then finish.

    ``on_view`` gets every poll's view (the CLI refreshes its live table with it). The final
    fold comes from ``Follower.finish`` and raises what a one-shot fold would; a refusal while
    following is only a status line in the views.
    """
    interval = max(interval, MIN_INTERVAL_SECONDS)
    last_data = clock()
    views = 0
    notices: list[Notice] = []
    reason = "interrupted"
    try:
        while True:
            view = follower.poll()
            views += 1
            notices.extend(view.notices)
            if on_view is not None:
                on_view(view)
            now = clock()
            if view.new_bytes or view.notices:
                last_data = now
            elif idle_seconds is not None and now - last_data >= idle_seconds:
                reason = "idle"
                break
            sleep(interval)
    except KeyboardInterrupt:
        reason = "interrupted"
    return FollowOutcome(follower.finish(), reason, views, notices)
