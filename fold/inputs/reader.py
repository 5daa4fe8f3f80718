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
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import polars as pl

from fold.errors import InputError
from fold.inputs import limits

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
_INTEGER_FIELDS = ("v", *_REQUIRED_INTS, "emitted", *DURATIONS)
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


def expand_log_paths(patterns: list[str], kind: str = "step log") -> list[str]:
    """Paths and globs to a sorted list of distinct files (by real path: never read twice);
    ``kind`` names the files in an error."""
    seen: dict[str, str] = {}
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(glob.glob(pattern))
            if not matches:
                raise InputError(f"{pattern}: the glob matches no file")
        else:
            if not os.path.exists(pattern):
                raise InputError(f"{pattern}: no such {kind}")
            matches = [pattern]
        for match in matches:
            if os.path.isdir(match):
                raise InputError(f"{match}: is a directory; name the {kind} files or a glob")
            require_regular_file(match)
            seen.setdefault(os.path.realpath(match), match)
    return list(seen.values())


def logs_present(patterns: Sequence[str]) -> list[str]:
    """The files ``patterns`` name now, each glob's sorted: a followed log may appear later,
    so none is missing (the follower asks again at every poll, for files that appeared)."""
    return [
        found
        for pattern in patterns
        for found in (sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern])
        if os.path.exists(found)
    ]


def require_regular_file(path: str) -> None:
    """InputError for a step log that is a pipe or a device: it is read from offsets (in ranges
    on every core, and again where --follow left off), so a pipe would read as empty and its
    lines would be lost without a word."""
    if not os.path.isfile(path):
        raise InputError(
            f"{path}: not a regular file (a pipe or a device); a step log is read from offsets "
            "in the file: save it to a file first (zcat steps.jsonl.gz > steps.jsonl)"
        )


SWEEP_RUN = re.compile(r"(.+)#[1-9][0-9]*")
"""``PATH#N`` in ``--vs NAME=PATH#N``: run N of a sweep file."""


def run_inputs(
    arm: str,
    logs: Sequence[str] = (),
    vs: Sequence[str] = (),
    vs_logs: Sequence[str] = (),
    sums_files: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """The files a run reads, as (role, path), as its command line names them (globs
    expanded): the ledger records them, and no output of the run may overwrite one."""
    found = [("arm", arm)]
    found += [("log", path) for path in expand_log_paths(list(logs))] if logs else []
    if sums_files:
        found += [("sums", path) for path in expand_log_paths(list(sums_files), "sums file")]
    if vs:
        from fold.inputs.vs_arms import split_spec

        for spec in vs:
            parsed = split_spec(spec)  # a run of ours or a matched arm: read like any other
            run = SWEEP_RUN.fullmatch(parsed.path)
            path = run.group(1) if run and not Path(parsed.path).exists() else parsed.path
            found.append((f"vs:{parsed.name}", path))
    for spec in vs_logs:
        name, _, pattern = spec.partition("=")
        if pattern:  # NAME=LOG; a malformed spec is the --vs-log reader's to name
            found += [(f"vs-log:{name}", path) for path in expand_log_paths([pattern])]
    return found


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
            refuse_impossible_step(row, self.path)  # here: the first problem in the file is named
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
        raise _BadLine(limits.kind_reason("", obj, "an object"))
    try:
        return _row(obj)
    except _BadLine:
        # A value orjson made a float of, past 64 bits, is outside every field's range: the
        # line is refused either way, and read again only so the words show its digits.
        if not any(limits.past_64_bits(obj.get(name)) for name in _INTEGER_FIELDS):
            raise
    return _row(limits.exact_integers(raw, obj))


def _row(obj: dict[str, Any]) -> dict[str, Any]:
    """A parsed line's step (``STEP_SCHEMA`` but its line number), or _BadLine."""
    version = _value(obj, "v", limits.integer)
    if version != FORMAT_VERSION:
        raise _BadLine(
            f"format version {version}; this reader knows version {FORMAT_VERSION} "
            "(upgrade fold-acceptance)"
        )
    row: dict[str, Any] = {"w": _value(obj, "w", limits.string)}
    seq = obj.get("seq")
    row["sid"] = seq if isinstance(seq, str) else None
    for name in _REQUIRED_INTS:
        if name == "seq" and row["sid"] is not None:
            row["seq"] = 0
            continue
        row[name] = _integer(obj.get(name), name)
    emitted = obj.get("emitted")
    row["emitted"] = None if emitted is None else _integer(emitted, "emitted")
    for name in DURATIONS:
        value = obj.get(name)
        row[name] = None if value is None else _integer(value, name)
    label = obj.get("leg")
    row["label"] = None if label is None else _value(obj, "leg", limits.string)
    return row


def _value(obj: dict[str, Any], name: str, kind: Callable[[str, str, Any, str], Any]) -> Any:
    """A field's value as ``kind`` (a ``limits`` check) reads it; the line is malformed when
    the value is of another kind."""
    try:
        return kind("a step line", f"field '{name}'", obj.get(name), _FIX_LINE)
    except limits.WrongKind as error:  # the line is named, and maybe skipped, by the caller
        raise _BadLine(error.reason) from None


def _integer(value: Any, name: str) -> int:
    """An integer field's value, within its field's range (``fold.inputs.limits``: a count, the
    request id, a duration); outside it, or not an integer, the line is malformed."""
    check = (
        limits.check_request_id
        if name == "seq"
        else limits.check_duration
        if name in DURATIONS
        else limits.check_count
    )
    wanted = "an integer or a string" if name == "seq" else "an integer"
    field = f"field '{name}'"
    try:
        # an integer literal past 64 bits (orjson reads it as a float) is one; its range is not
        value = limits.integer("a step line", field, value, _FIX_LINE, wanted=wanted)
        check("a step line", field, value, _FIX_LINE)
    except (limits.OutOfRange, limits.WrongKind) as error:  # named, maybe skipped, by the caller
        raise _BadLine(error.reason) from None
    return value


_FIX_LINE = "fix or remove the line"


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
        return limits.strict_json(raw, integer=_json_int)
    except (ValueError, RecursionError):
        raise _BadLine(f"not valid JSON ({problem})") from None


def _json_int(text: str) -> int | float:
    """An integer literal as orjson gives it: an int within 64 bits, else a float (``inf``
    past a double), so a field's range check reads the same whichever parser read it."""
    if len(text) <= 20:
        value = int(text)
        if limits.in_orjson_int_range(value):
            return value
    return float(text)


MISCOUNTING = (
    "the engine's instrumentation is miscounting; no acceptance can be computed from this log"
)


def refuse_impossible_step(
    row: dict[str, Any], path: str, rule: limits.StepRule | None = None
) -> None:
    """A step no engine can take is refused, never skipped: it means the engine is wrong.

    ``rule`` is the one the native reader found the line to break; without it the row's counts
    are checked here. Either way ``fold.inputs.limits`` words it, naming the file and line."""
    counts = (row["proposed"], row["accepted"], row["emitted"])
    rule = rule or limits.step_problem(*counts)
    if rule is not None:
        raise limits.step_refusal(rule, f"{path}:{row['line']}", counts, MISCOUNTING)


def row_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Parsed rows (``judge_line``'s, with ``line``) as a frame of ``STEP_SCHEMA``."""
    return pl.DataFrame(
        {name: [row[name] for row in rows] for name in STEP_SCHEMA}, schema=STEP_SCHEMA
    )
