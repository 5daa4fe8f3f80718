"""Reading step logs (format v1, ``instrument/FORMAT.md``): the exact line parser and the
polars block reader.

``judge_line`` is the one place that decides whether a line is a v1 step and words why not;
every reader reports bad lines in its words. ``StepLogReader`` is the reference and the
fallback when the native extension is not built (``fold.folding.native``): each file is read in
blocks that end at a newline, so a log never has to fit in memory and a torn last line never
reaches the parser; each line is judged by ``judge_line`` (orjson), which names the file and
line of every problem. It is not fast (about the speed of a plain orjson loop), only right.
"""

from __future__ import annotations

import glob
import json
import math
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import polars as pl

from fold.errors import InputError, RefusedError
from fold.inputs import limits
from fold.inputs.limits import MAX_STEP_TOKENS, is_int

FORMAT_VERSION = 1
DEFAULT_BLOCK_BYTES = 32 * 1024 * 1024

# Columns of a parsed block; `label` is the line's `leg` field, renamed so that `leg` can mean
# the leg a step is attributed to.
STEP_SCHEMA: dict[str, pl.DataType] = {
    "w": pl.String(),
    "n": pl.Int64(),
    "t_ns": pl.Int64(),
    "pid": pl.Int64(),
    "seq": pl.UInt64(),  # the C++ API takes any 64-bit unsigned request id
    "sid": pl.String(),  # a string request id (then seq is 0); null for an integer one
    "proposed": pl.Int64(),
    "accepted": pl.Int64(),
    "emitted": pl.Int64(),
    "draft_ns": pl.Int64(),  # the step's forward's drafting, ns; null: not measured
    "verify_ns": pl.Int64(),  # its target verify forward, ns; null: not measured
    "label": pl.String(),
    "line": pl.Int64(),
}
DURATIONS = ("draft_ns", "verify_ns")
"""The optional durations of a step (FORMAT.md), each 0 .. 2^63 - 1 nanoseconds."""
_REQUIRED_INTS = ("n", "t_ns", "pid", "seq", "proposed", "accepted")
_NUMBERS = tuple(name for name in _REQUIRED_INTS if name != "seq")
_LINE_START = b'{"v":'
_SKIP_HINT = "fix or remove the line, or pass --skip-bad-lines to count it as skipped and go on"
MAX_SKIPPED_EXAMPLES = 5
"""Skipped lines named per file; the rest are counted."""


@dataclass
class SkippedLine:
    path: str
    line: int
    reason: str


@dataclass
class ReadCounts:
    """What reading one file met besides good lines: nothing is dropped without a count."""

    torn_lines: int = 0
    skipped_lines: int = 0
    skipped_examples: list[SkippedLine] = field(default_factory=list)
    kind: str = "step log"
    """What the file is: the hook's step log, or the engine's trace
    (``fold.inputs.engine_trace``)."""
    run_lines: int = 0
    """The engine's trace: its ``vllm-cli: run=`` lines, used to give steps their legs."""
    other_lines: int = 0
    """The engine's trace: the rest of its stderr (loading, warnings), read and set aside."""

    def bad_line(self, path: str, line: int, reason: str, *, skip: bool) -> None:
        """Stop at a bad line (InputError, naming it), or count it and keep the first few."""
        if not skip:
            raise InputError(f"{path}:{line}: {reason}; {_SKIP_HINT}")
        self.skipped_lines += 1
        if len(self.skipped_examples) < MAX_SKIPPED_EXAMPLES:
            self.skipped_examples.append(SkippedLine(path, line, reason))


def expand_log_paths(patterns: list[str]) -> list[str]:
    """Paths and globs to a sorted list of distinct files (by real path: never read twice)."""
    seen: dict[str, str] = {}
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(glob.glob(pattern))
            if not matches:
                raise InputError(f"{pattern}: the glob matches no file")
        else:
            if not os.path.exists(pattern):
                raise InputError(f"{pattern}: no such step log")
            matches = [pattern]
        for match in matches:
            if os.path.isdir(match):
                raise InputError(f"{match}: is a directory; name the step-log files or a glob")
            seen.setdefault(os.path.realpath(match), match)
    return list(seen.values())


class StepLogReader:
    """Reads one step log from where it last stopped; only whole lines are parsed.

    ``read_available`` yields a frame per block of the bytes appended since the last call and
    holds back a final line that has no newline yet. ``finish`` declares the file complete: a
    held-back fragment is then a torn line and is counted.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        skip_bad_lines: bool = False,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
    ) -> None:
        self.path = str(path)
        self.skip_bad_lines = skip_bad_lines
        self.block_bytes = block_bytes
        self.counts = ReadCounts()
        self.offset = 0
        self.lines_read = 0
        self._pending = b""

    @property
    def pending_bytes(self) -> int:
        return len(self._pending)

    def read_available(self) -> Iterator[pl.DataFrame]:
        """Frames of the whole lines appended since the last call, a block at a time.

        The next block is read and parsed on a worker thread while the caller works on the
        current one (polars releases the GIL), so parsing overlaps folding. Blocks are parsed
        in file order, one at a time, and errors surface in that order.
        """
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed in finally, across yields
        except OSError as error:
            raise InputError(f"{self.path}: cannot read the step log: {error.strerror}") from error
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fold-read")
        try:
            handle.seek(self.offset)
            ahead = pool.submit(self._next_frame, handle)
            while True:
                frame = ahead.result()
                if frame is None:
                    return
                ahead = pool.submit(self._next_frame, handle)
                yield frame
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            handle.close()

    def _next_frame(self, handle: BinaryIO) -> pl.DataFrame | None:
        """Read blocks until one holds a whole line; None at the end of the file."""
        while True:
            data = handle.read(self.block_bytes)
            if not data:
                return None
            self.offset += len(data)
            data = self._pending + data
            cut = data.rfind(b"\n") + 1
            self._pending = data[cut:]
            if cut:
                return self._parse_block(data[:cut])

    def finish(self) -> None:
        if self._pending:
            self.counts.torn_lines += 1
            self._pending = b""

    def _parse_block(self, block: bytes) -> pl.DataFrame:
        first_line = self.lines_read + 1
        self.lines_read += block.count(b"\n")
        return self._parse_exact(block, first_line)

    def _parse_exact(self, block: bytes, first_line: int) -> pl.DataFrame:
        columns: dict[str, list[Any]] = {name: [] for name in STEP_SCHEMA}
        for offset, raw in enumerate(block.split(b"\n")[:-1]):
            line_number = first_line + offset
            row, reason, glued = judge_line(raw)
            if row is None:
                self._bad_line(line_number, reason)
                continue
            self.counts.torn_lines += glued
            row["line"] = line_number
            if _impossible(row):  # refused here, so the first problem in the file is named
                refuse_impossible_counts(row_frame([row]), self.path)
            for name in STEP_SCHEMA:
                columns[name].append(row[name])
        return pl.DataFrame(columns, schema=STEP_SCHEMA)

    def _bad_line(self, line_number: int, reason: str) -> None:
        self.counts.bad_line(self.path, line_number, reason, skip=self.skip_bad_lines)


class _BadLine(Exception):
    pass


def judge_line(raw: bytes) -> tuple[dict[str, Any] | None, str, bool]:
    """(row, reason, glued) for one line without its newline.

    The row is None when the line is not a v1 step, and the reason says why. A writer that
    died mid-line leaves a fragment the next line is appended to: when the bad line ends in a
    whole, valid line, that line's row is returned with ``glued`` true (the fragment in front
    of it counts as torn, as a torn tail would).
    """
    try:
        return _parse_line(raw), "", False
    except _BadLine as problem:
        start = raw.rfind(_LINE_START)
        if start > 0:
            try:
                return _parse_line(raw[start:]), "", True
            except _BadLine:
                pass
        return None, str(problem), False


def _parse_line(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        raise _BadLine("empty line")
    obj = _loads(raw)
    if not isinstance(obj, dict):
        raise _BadLine(f"a JSON {type(obj).__name__}, not an object")
    version = obj.get("v")
    if not is_int(version):
        raise _BadLine(f"field 'v' must be an integer, found {_describe(version)}")
    if version != FORMAT_VERSION:
        raise _BadLine(
            f"format version {version}; this reader knows version {FORMAT_VERSION} "
            "(upgrade fold-acceptance)"
        )
    row: dict[str, Any] = {}
    writer = obj.get("w")
    if not isinstance(writer, str):
        raise _BadLine(f"field 'w' must be a string, found {_describe(writer)}")
    row["w"] = writer
    seq = obj.get("seq")
    row["sid"] = seq if isinstance(seq, str) else None
    for name in _REQUIRED_INTS:
        if name == "seq" and row["sid"] is not None:
            row["seq"] = 0
            continue
        value = obj.get(name)
        if limits.past_64_bits(value):
            # orjson reads an integer literal beyond 64 bits as a float
            raise _BadLine(_past_range(name, f"{value:.0f}"))
        if not is_int(value):
            kind = "an integer or a string" if name == "seq" else "an integer"
            raise _BadLine(f"field '{name}' must be {kind}, found {_describe(value)}")
        row[name] = value
    emitted = obj.get("emitted")
    if emitted is not None and not is_int(emitted):
        raise _BadLine(f"field 'emitted' must be an integer, found {_describe(emitted)}")
    row["emitted"] = emitted
    for name in DURATIONS:
        row[name] = _duration(obj.get(name), name)
    label = obj.get("leg")
    if label is not None and not isinstance(label, str):
        raise _BadLine(f"field 'leg' must be a string, found {_describe(label)}")
    row["label"] = label
    if row["seq"] < 0:
        raise _BadLine(f"field 'seq' must be an unsigned 64-bit integer, found {row['seq']}")
    for name in (*_NUMBERS, "emitted"):
        if row[name] is not None and not -limits.MAX_COUNT - 1 <= row[name] <= limits.MAX_COUNT:
            raise _BadLine(_past_range(name, row[name]))
    return row


def _duration(value: Any, name: str) -> int | None:
    """An optional duration: None when absent or null; an integer within 64 bits (a negative
    one is refused with the impossible counts, by file and line)."""
    if value is None:
        return None
    if limits.past_64_bits(value):
        raise _BadLine(_past_range(name, f"{value:.0f}"))
    if not is_int(value):
        raise _BadLine(f"field '{name}' must be an integer (nanoseconds), found {_describe(value)}")
    if value < -limits.MAX_COUNT - 1 or limits.duration_problem(max(value, 0)) is not None:
        raise _BadLine(_past_range(name, value))
    return value


def _past_range(name: str, value: Any) -> str:
    """The limit's words for an integer field that no 64-bit field holds."""
    if str(value).startswith("-"):
        return f"field '{name}' {limits.shown(value)} is negative: counts and ids are unsigned"
    words = (
        limits.REQUEST_ID_WORDS
        if name == "seq"
        else limits.DURATION_WORDS
        if name in DURATIONS
        else limits.COUNT_WORDS
    )
    return f"field '{name}' {limits.shown(value)} {words}"


def _loads(raw: bytes) -> Any:
    """The line's JSON value, with orjson; JSON's numbers have no range, orjson's do.

    orjson refuses a number beyond a double's range (``1e999``, a 400-digit integer), which
    FORMAT.md allows in an unknown key. A line orjson refuses is read again by the standard
    library's parser, made as strict as orjson otherwise (no NaN or Infinity, no unpaired
    surrogate, UTF-8 only); when that fails too, orjson's words name the problem.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        problem = error
    try:
        obj = json.loads(
            raw.decode("utf-8"),
            parse_int=_json_int,
            parse_float=float,
            parse_constant=_no_constant,
        )
        valid = not _has_lone_surrogate(obj)
    except (ValueError, RecursionError):
        valid = False
    if not valid:
        raise _BadLine(f"not valid JSON ({problem})") from None
    return obj


def _json_int(text: str) -> int | float:
    """An integer literal as orjson gives it: an int within 64 bits, else a float (``inf``
    past a double), so a field's range check reads the same whichever parser read it."""
    if len(text) <= 20:
        value = int(text)
        if limits.in_orjson_int_range(value):
            return value
    return float(text)


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(item) for item in value)
    return False


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (missing or null)"
    if isinstance(value, float) and not math.isfinite(value):
        return "a number beyond a double's range"
    return f"{type(value).__name__} {orjson.dumps(value).decode()[:40]}"


_IMPOSSIBLE = [
    (pl.col("proposed") < 0, "'proposed' is negative"),
    (pl.col("accepted") < 0, "'accepted' is negative"),
    (pl.col("accepted") > pl.col("proposed"), "'accepted' exceeds 'proposed'"),
    (pl.col("emitted") < 0, "'emitted' is negative"),
    (pl.col("n") < 0, "'n' is negative"),
    (pl.col("t_ns") < 0, "'t_ns' is negative"),
    (pl.col("draft_ns") < 0, "'draft_ns' is negative"),
    (pl.col("verify_ns") < 0, "'verify_ns' is negative"),
    (pl.col("proposed") > MAX_STEP_TOKENS, "proposed"),
    (pl.col("emitted") > MAX_STEP_TOKENS, "emitted"),
]
"""Each impossible count and its reason; a bare field name is a count past the step cap,
worded by ``fold.inputs.limits``."""
MISCOUNTING = (
    "the engine's instrumentation is miscounting; no acceptance can be computed from this log"
)


def _impossible(row: dict[str, Any]) -> bool:
    counts = (
        row["proposed"], row["accepted"], row["emitted"] or 0, row["n"], row["t_ns"],
        *(row[name] or 0 for name in DURATIONS),
    )  # fmt: skip
    return (
        row["accepted"] > row["proposed"]
        or min(counts) < 0
        or max(row["proposed"], row["emitted"] or 0) > MAX_STEP_TOKENS
    )


def refuse_impossible_counts(frame: pl.DataFrame, path: str) -> None:
    """Counts no engine can produce are refused, never skipped: they mean the engine is wrong.

    The first such line in the file's order is named (``frame`` has a ``line`` column), with
    the first of the reasons above that holds for it.
    """
    flags = [condition.fill_null(False) for condition, _ in _IMPOSSIBLE]
    offending = frame.filter(pl.any_horizontal(flags))
    if offending.height == 0:
        return
    first = offending.sort("line").head(1)
    reasons = first.select(flag.alias(str(i)) for i, flag in enumerate(flags)).row(0)
    reason = next(text for (_, text), holds in zip(_IMPOSSIBLE, reasons, strict=True) if holds)
    row = first.row(0, named=True)
    where = f"{path}:{row['line']}"
    if reason in STEP_SCHEMA:
        raise limits.step_cap(where, f"'{reason}'", row[reason], MISCOUNTING)
    timed = next((name for name in DURATIONS if reason == f"'{name}' is negative"), None)
    if timed is not None:
        raise RefusedError(
            f"{where}: {reason} ({row[timed]}): the engine's step timing is wrong (a clock read "
            "out of order); fix where the hook is given the step's durations"
        )
    raise RefusedError(
        f"{where}: {reason} (proposed={row['proposed']}, "
        f"accepted={row['accepted']}, emitted={row['emitted']}). The engine's "
        "instrumentation is miscounting: no acceptance can be computed from this log"
    )


def row_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Parsed rows (``judge_line``'s, with ``line``) as a frame of ``STEP_SCHEMA``."""
    return pl.DataFrame(
        {name: [row[name] for row in rows] for name in STEP_SCHEMA}, schema=STEP_SCHEMA
    )
