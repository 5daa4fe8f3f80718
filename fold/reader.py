"""Reading step logs (format v1, ``instrument/FORMAT.md``) into frames, a block at a time.

Each file is read in blocks that end at a newline, so a log never has to fit in memory and a
torn last line never reaches the parser. A block is parsed by the first of three readers
that accepts it, and all three yield the same frame for the same lines:

- the layout path: the writers' key order and number formatting are fixed (FORMAT.md), so the
  block is split at commas by polars' CSV reader (multi-threaded, no JSON tokenizer) and every
  field is checked to be exactly ``"key":value`` in the writers' order, every integer to be
  plain decimal, every string to need no unescaping. Any block with a line of another shape
  (other writers, key orders, escapes, spaces, extra keys) goes on to
- the NDJSON path: polars' NDJSON reader with a fixed schema, plus sanity checks (a missing or
  null field, a line count that does not match, a writer id not in the writers' layout), and
  when that fails to
- the exact path: orjson line by line, which names the file and line of every problem.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import polars as pl

from fold.errors import InputError, RefusedError

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
    "proposed": pl.Int64(),
    "accepted": pl.Int64(),
    "emitted": pl.Int64(),
    "label": pl.String(),
    "line": pl.Int64(),
}
_REQUIRED_INTS = ("n", "t_ns", "pid", "seq", "proposed", "accepted")
_NDJSON_SCHEMA = {
    "v": pl.Int64(),
    "w": pl.String(),
    **{name: STEP_SCHEMA[name] for name in _REQUIRED_INTS},
    "emitted": pl.Int64(),
    "leg": pl.String(),
}
_LINE_START = b'{"v":'
_SKIP_HINT = "fix or remove the line, or pass --skip-bad-lines to count it as skipped and go on"
_MAX_EXAMPLES = 5


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
        line_count = block.count(b"\n")
        self.lines_read += line_count
        frame = _parse_layout(block, first_line, line_count)
        if frame is None:
            frame = _parse_fast(block, first_line, line_count)
        if frame is None:
            frame = self._parse_exact(block, first_line)
        _refuse_impossible_counts(frame, self.path)
        return frame

    def _parse_exact(self, block: bytes, first_line: int) -> pl.DataFrame:
        columns: dict[str, list[Any]] = {name: [] for name in STEP_SCHEMA}
        for offset, raw in enumerate(block.split(b"\n")[:-1]):
            line_number = first_line + offset
            try:
                row = _parse_line(raw)
            except _BadLine as problem:
                row = self._salvage_glued_line(raw)
                if row is None:
                    self._bad_line(line_number, str(problem))
                    continue
            row["line"] = line_number
            for name in STEP_SCHEMA:
                columns[name].append(row[name])
        return pl.DataFrame(columns, schema=STEP_SCHEMA)

    def _salvage_glued_line(self, raw: bytes) -> dict[str, Any] | None:
        """A writer that died mid-line leaves a fragment the next line is appended to.

        When the bad line ends in a whole, valid line, that line is kept and the fragment in
        front of it is counted as torn, as a torn tail would be.
        """
        start = raw.rfind(_LINE_START)
        if start <= 0:
            return None
        try:
            row = _parse_line(raw[start:])
        except _BadLine:
            return None
        self.counts.torn_lines += 1
        return row

    def _bad_line(self, line_number: int, reason: str) -> None:
        if not self.skip_bad_lines:
            raise InputError(f"{self.path}:{line_number}: {reason}; {_SKIP_HINT}")
        self.counts.skipped_lines += 1
        if len(self.counts.skipped_examples) < _MAX_EXAMPLES:
            self.counts.skipped_examples.append(SkippedLine(self.path, line_number, reason))


class _BadLine(Exception):
    pass


def _parse_line(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        raise _BadLine("empty line")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise _BadLine(f"not valid JSON ({error})") from None
    if not isinstance(obj, dict):
        raise _BadLine(f"a JSON {type(obj).__name__}, not an object")
    version = obj.get("v")
    if not _is_int(version):
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
    for name in _REQUIRED_INTS:
        value = obj.get(name)
        if isinstance(value, float) and value.is_integer() and abs(value) >= 2**63:
            # orjson reads an integer literal beyond 64 bits as a float
            raise _BadLine(f"field '{name}' does not fit in 64 bits: {value:.0f}")
        if not _is_int(value):
            raise _BadLine(f"field '{name}' must be an integer, found {_describe(value)}")
        row[name] = value
    emitted = obj.get("emitted")
    if emitted is not None and not _is_int(emitted):
        raise _BadLine(f"field 'emitted' must be an integer, found {_describe(emitted)}")
    row["emitted"] = emitted
    label = obj.get("leg")
    if label is not None and not isinstance(label, str):
        raise _BadLine(f"field 'leg' must be a string, found {_describe(label)}")
    row["label"] = label
    if not 0 <= row["seq"] < 2**64:
        raise _BadLine(f"field 'seq' must be an unsigned 64-bit integer, found {row['seq']}")
    signed = [row[name] for name in _REQUIRED_INTS if name != "seq"]
    if not all(-(2**63) <= value < 2**63 for value in signed) or not (
        emitted is None or -(2**63) <= emitted < 2**63
    ):
        raise _BadLine("an integer field does not fit in a signed 64-bit integer")
    return row


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (missing or null)"
    return f"{type(value).__name__} {orjson.dumps(value).decode()[:40]}"


def _parse_fast(block: bytes, first_line: int, line_count: int) -> pl.DataFrame | None:
    try:
        frame = pl.read_ndjson(block, schema=_NDJSON_SCHEMA)
    except pl.exceptions.PolarsError:
        return None
    if frame.height != line_count:
        return None  # polars passes over blank lines; the exact path names them
    looks_right = frame.select(
        (pl.col("v") == FORMAT_VERSION).all()
        & pl.all_horizontal(pl.col(name).is_not_null().all() for name in _REQUIRED_INTS)
        # The writers' ids are 16 hex digits; any other shape (including a number that the
        # NDJSON reader would quietly turn into a string) goes to the exact path.
        & (pl.col("w").str.len_bytes() == 16).all()
    ).item()
    if not looks_right:
        return None
    return frame.select(
        pl.col("w"),
        *(pl.col(name) for name in _REQUIRED_INTS),
        pl.col("emitted"),
        pl.col("leg").alias("label"),
        pl.int_range(first_line, first_line + line_count, dtype=pl.Int64).alias("line"),
    )


def _parse_layout(block: bytes, first_line: int, line_count: int) -> pl.DataFrame | None:
    """The writers' exact byte layout, read as comma-separated ``"key":value`` fields.

    Returns None (the caller falls back to the NDJSON path) unless every line has the layout:
    ``{"v":1,"w":"<16 hex>","n":..,"t_ns":..,"pid":..,"seq":..,"proposed":..,"accepted":..``
    then optionally ``,"emitted":..`` and optionally ``,"leg":"<label>"``, then ``}``.
    """
    # A backslash means an escaped string; '+' or '\r' cannot occur in the layout's numbers or
    # line ends. Each is one memchr over the block, and such blocks take the general path.
    if b"\\" in block or b"+" in block or b"\r" in block:
        return None
    try:
        # One fused streaming query: the split fields are never all held as strings at once.
        frame = _scan_fields(block).collect(engine="streaming")
    except pl.exceptions.PolarsError:
        return None  # a strict cast failed, a line had too many fields, or bad UTF-8
    if frame.height != line_count or not frame["layout_ok"].all():
        return None
    return frame.drop("layout_ok").with_columns(
        pl.int_range(first_line, first_line + line_count, dtype=pl.Int64).alias("line")
    )


def _scan_fields(source: str | bytes) -> pl.LazyFrame:
    return (
        pl.scan_csv(
            source,
            has_header=False,
            separator=",",
            quote_char=None,
            schema=_LAYOUT_CSV_SCHEMA,
            missing_columns="insert",
        )
        .with_columns(_LAYOUT.parts)
        .select(*_LAYOUT.columns, _LAYOUT.row_ok)
    )


def scan_layout(path: str) -> pl.LazyFrame:
    """Every line of ``path`` read lazily as the writers' layout, for the streaming engine.

    Columns as a parsed block has them but ``line``, plus ``layout_ok``: whether the line has
    the layout. A fold that finds any line without it must read the file the block way.
    """
    return _scan_fields(path)


@dataclass(frozen=True)
class _Layout:
    parts: list[pl.Expr]
    """The fields whose place depends on which optional keys a line has."""
    checks: list[pl.Expr]
    """Each true when every line passes; a check on a missing required field fails."""
    columns: list[pl.Expr]
    """The frame's columns (STEP_SCHEMA but ``line``)."""
    row_ok: pl.Expr
    """Per line: true when the line passes every check."""


def _layout() -> _Layout:
    c = pl.col
    # The last field carries the closing brace: `accepted` is last when c8 is missing, and so
    # on; `emitted` and `leg` may each be there or not.
    last7 = c("c8").is_null()
    emitted_here = c("c8").str.starts_with('"emitted":')
    label_in_8 = c("c8").str.starts_with('"leg":"')
    parts = [
        pl.when(last7).then(c("c7").str.strip_suffix("}")).otherwise(c("c7")).alias("accepted"),
        pl.when(emitted_here).then(c("c8").str.strip_suffix("}")).alias("emitted"),
        pl.when(c("c9").is_not_null())
        .then(c("c9"))
        .when(label_in_8)
        .then(c("c8"))
        .alias("label_field"),
    ]
    label = c("label_field").str.slice(7).str.strip_suffix('"}')
    checks = [
        c("c0") == '{"v":1',
        c("c1").str.len_bytes() == 22,
        c("c1").str.starts_with('"w":"'),
        c("c1").str.ends_with('"'),
        # Hex digits only: no quote, escape or control character inside the writer id.
        c("c1")
        .str.slice(5, 16)
        .str.to_integer(base=16, dtype=pl.UInt64, strict=False)
        .is_not_null(),
        c("c10").is_null(),
        c("c7").str.ends_with("}") == last7,
        last7 | emitted_here | label_in_8,
        c("c9").is_null() | (emitted_here & c("c9").str.starts_with('"leg":"')),
        c("c8").is_null() | (c("c8").str.ends_with("}") == c("c9").is_null()),
        c("label_field").is_null() | c("label_field").str.ends_with('"}'),
        # A label needing no unescaping: no quote and no control character (backslashes were
        # ruled out for the whole block).
        c("label_field").is_null() | ~label.str.contains(r'["\\\x00-\x1f]'),
    ]
    columns = [c("c1").str.slice(5, 16).alias("w")]
    integers = [("c2", "n"), ("c3", "t_ns"), ("c4", "pid"), ("c5", "seq"), ("c6", "proposed")]
    for name, key in [*integers, ("accepted", "accepted"), ("emitted", "emitted")]:
        prefix = f'"{key}":'
        column = c(name)
        # Plain JSON integers: no leading zero (a lone 0 is fine); signs take the general
        # path. The strict cast fails the block on anything that is not decimal digits.
        shape = (
            column.str.starts_with(prefix)
            & (~column.str.starts_with(prefix + "0") | (column.str.len_bytes() == len(prefix) + 1))
            & ~column.str.starts_with(prefix + "-")
            & ~column.str.starts_with(prefix + "+")
        )
        checks.append(column.is_null() | shape if key == "emitted" else shape)
        dtype = STEP_SCHEMA[key]
        columns.append(column.str.slice(len(prefix)).cast(dtype).alias(key))
    columns.append(label.alias("label"))
    row_checks = [check.fill_null(False) for check in checks]
    return _Layout(
        parts=parts,
        checks=[check.all().alias(f"check{i}") for i, check in enumerate(row_checks)],
        columns=columns,
        row_ok=pl.all_horizontal(row_checks).alias("layout_ok"),
    )


_LAYOUT_CSV_SCHEMA = {f"c{index}": pl.String() for index in range(11)}
_LAYOUT = _layout()


def _refuse_impossible_counts(frame: pl.DataFrame, path: str) -> None:
    """Counts no engine can produce are refused, never skipped: they mean the engine is wrong."""
    if not frame.select(
        pl.any_horizontal(
            (pl.col(name) < 0).any() for name in ("proposed", "accepted", "emitted", "n", "t_ns")
        )
        | (pl.col("accepted") > pl.col("proposed")).any()
    ).item():
        return
    checks = [
        (pl.col("proposed") < 0, "'proposed' is negative"),
        (pl.col("accepted") < 0, "'accepted' is negative"),
        (pl.col("accepted") > pl.col("proposed"), "'accepted' exceeds 'proposed'"),
        (pl.col("emitted") < 0, "'emitted' is negative"),
        (pl.col("n") < 0, "'n' is negative"),
        (pl.col("t_ns") < 0, "'t_ns' is negative"),
    ]
    for condition, reason in checks:
        offending = frame.filter(condition)
        if offending.height:
            first = offending.row(0, named=True)
            raise RefusedError(
                f"{path}:{first['line']}: {reason} (proposed={first['proposed']}, "
                f"accepted={first['accepted']}, emitted={first['emitted']}); "
                f"{offending.height} line(s) in this block are like it. The engine's "
                "instrumentation is miscounting: no acceptance can be computed from this log"
            )
