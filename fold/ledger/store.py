"""The ledger file: a DuckDB database of kept runs, each appended in one transaction.

DuckDB lets one process at a time open a database file for writing and refuses any other
open, for reading too, while that process holds it ("Could not set lock on file"); it does
not queue. So every open here retries until a deadline and then refuses naming the holder,
and every connection is closed as soon as its work is done: an append holds the file for
the length of one transaction, not of a fold.

A transaction that has not committed is not in the file or its write-ahead log, so a writer
killed before its commit leaves the ledger as it was; DuckDB replays a committed one that a
kill interrupted before its checkpoint when the file is next opened.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from fold.errors import InputError
from fold.ledger.figures import FigureRow, check_document, figure_rows
from fold.ledger.folder import check_folder, is_folder_ledger, keep_in_folder, load
from fold.ledger.schema import (
    Kept,
    check_schema,
    duckdb_module,
    ensure_schema,
    insert_rows,
    tool_version,
)

DEFAULT_WAIT_SECONDS = 30.0
_FIRST_RETRY_SECONDS = 0.02
_LONGEST_RETRY_SECONDS = 0.5


@dataclass(frozen=True)
class InputFile:
    """A file the run read: its part in the run (``arm``, ``log``, ``vs:NAME``,
    ``vs-log:NAME``), its path as given, its name and its size in bytes."""

    role: str
    path: str
    name: str
    bytes: int


@dataclass(frozen=True)
class KeptRun:
    """A run as the history reads it (its document stays in the ledger)."""

    run_id: int
    kept_at: datetime
    labels: dict[str, str]
    inputs: tuple[InputFile, ...]
    figures: tuple[FigureRow, ...]


def parse_labels(texts: Sequence[str], flag: str = "--label") -> dict[str, str]:
    """``KEY=VALUE`` labels to a mapping; the split is at the first ``=``. ``flag`` is the
    option they were given with, for the refusal."""
    labels: dict[str, str] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(
                f"{flag} {text!r}: expected KEY=VALUE, e.g. {flag} commit=3f2a9c1 or {flag} k=7"
            )
        if key in labels and labels[key] != value:
            raise InputError(
                f"{flag} {text!r}: {key} is already given as {labels[key]!r}; give each key once"
            )
        labels[key] = value
    return labels


def input_files(
    arm: str,
    logs: Sequence[str],
    vs: Sequence[str] = (),
    vs_logs: Sequence[str] = (),
    sums_files: Sequence[str] = (),
) -> list[InputFile]:
    """The files a run reads, as its command line names them (globs expanded)."""
    from fold.inputs.reader import run_inputs

    return [_input(role, path) for role, path in run_inputs(arm, logs, vs, vs_logs, sums_files)]


def _input(role: str, path: str) -> InputFile:
    try:
        size = _size(Path(path))
    except OSError as error:
        raise InputError(
            f"{path}: cannot read its size for the ledger: {error.strerror}"
        ) from error
    return InputFile(role, path, Path(path).name, size)


def _size(path: Path) -> int:
    if path.is_dir():  # an oracle's folder of outputs
        return sum(child.stat().st_size for child in sorted(path.rglob("*")) if child.is_file())
    return path.stat().st_size


def run_digest(document: dict[str, Any], inputs: Sequence[InputFile]) -> str:
    """What makes a run the same run: its document (every figure, the inputs' paths and
    line counts) and its input files' names and sizes. Labels are not part of it."""
    canonical = orjson.dumps(
        {"document": document, "inputs": [vars(found) for found in inputs]},
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.sha256(canonical).hexdigest()


def check_ledger(path: str | Path) -> None:
    """Refuse, before a fold starts, a path that is not a ledger or is one of a newer schema.

    A path that does not exist yet is fine (the append creates it); a ledger another process
    is writing now is checked again by the append itself.
    """
    duckdb_module()  # a missing extra is said before the fold, not after it
    target = Path(path)
    if is_folder_ledger(path):
        check_folder(target)
        return
    if not target.exists():
        _check_new_path(target)
        return
    _check_file(target)
    try:
        connection = _connect(target, read_only=True, wait_seconds=0.0)
    except LedgerBusy:
        return
    try:
        check_schema(connection, target)
    except duckdb_module().Error as error:
        raise InputError(f"{target}: cannot read the ledger: {error}") from error
    finally:
        connection.close()


def keep_run(
    path: str | Path,
    document: dict[str, Any],
    labels: dict[str, str],
    inputs: Sequence[InputFile],
    *,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
    now: datetime | None = None,
) -> Kept:
    """Append one run (its document, labels, inputs and figures) in one transaction.

    A run already kept (same document, same inputs) is not kept again. The ledger is created
    when ``path`` does not exist.
    """
    check_document(document)
    digest = run_digest(document, inputs)
    rows = figure_rows(document)
    kept_at = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(tzinfo=None)
    target = Path(path)
    if is_folder_ledger(path):
        check_folder(target)
        return keep_in_folder(target, document, labels, inputs, rows, digest, kept_at)
    if not target.exists():
        _check_new_path(target)
    else:
        _check_file(target)
    with _transaction(target, wait_seconds) as connection:
        ensure_schema(connection, target)
        found = connection.execute("SELECT run_id FROM runs WHERE digest = ?", [digest]).fetchone()
        if found is not None:
            return Kept(found[0], True, _labels_of(connection, found[0]))
        run_id = connection.execute("SELECT coalesce(max(run_id), 0) + 1 FROM runs").fetchone()[0]
        connection.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?)",
            [run_id, kept_at, digest, document["format"], tool_version(),
             orjson.dumps(document).decode()],
        )  # fmt: skip
        insert_rows(connection, "labels", [[run_id, k, v] for k, v in sorted(labels.items())])
        insert_rows(
            connection, "inputs", [[run_id, f.role, f.path, f.name, f.bytes] for f in inputs]
        )
        _insert_figures(connection, run_id, rows)
    return Kept(run_id, False, dict(labels))


def _insert_figures(connection, run_id: int, rows: Sequence[FigureRow]) -> None:
    insert_rows(connection, "figures",
            [[run_id, r.fold, r.figure, r.position, r.versus, r.value, r.ci_low, r.ci_high]
             for r in rows])  # fmt: skip


def read_runs(
    path: str | Path,
    *,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
    unfinished: list[str] | None = None,
) -> list[KeptRun]:
    """Every kept run in append order, with its labels, inputs and figures (a folder's
    unfinished writes, not read, are added to ``unfinished``)."""
    with reading(path, wait_seconds, unfinished) as connection:
        if connection is None:
            return []
        runs = connection.execute("SELECT run_id, kept_at FROM runs ORDER BY run_id").fetchall()
        labels: dict[int, dict[str, str]] = {run_id: {} for run_id, _ in runs}
        for run_id, key, value in connection.execute(
            "SELECT run_id, key, value FROM labels ORDER BY run_id, key"
        ).fetchall():
            labels[run_id][key] = value
        inputs: dict[int, list[InputFile]] = {run_id: [] for run_id, _ in runs}
        for run_id, *fields in connection.execute(
            "SELECT run_id, role, path, name, bytes FROM inputs ORDER BY rowid"
        ).fetchall():
            inputs[run_id].append(InputFile(*fields))
        figures: dict[int, list[FigureRow]] = {run_id: [] for run_id, _ in runs}
        for (run_id, fold, figure, position, versus, value, low, high) in connection.execute(
            "SELECT run_id, fold, figure, position, versus, value, ci_low, ci_high "
            "FROM figures ORDER BY rowid"
        ).fetchall():  # fmt: skip
            figures[run_id].append(FigureRow(fold, figure, value, low, high, position, versus))
    return [
        KeptRun(run_id, kept_at, labels[run_id], tuple(inputs[run_id]), tuple(figures[run_id]))
        for run_id, kept_at in runs
    ]


def ledger_id(connection) -> str | None:
    found = connection.execute("SELECT value FROM ledger WHERE key = 'id'").fetchone()
    return None if found is None else found[0]


@contextmanager
def reading(
    path: str | Path, wait_seconds: float, unfinished: list[str] | None = None
) -> Iterator[Any]:
    """A read-only connection to an existing ledger (None for one a killed first append left
    without tables), closed on leaving. A folder's kept runs are read into memory, its
    unfinished writes named in ``unfinished``."""
    target = Path(path)
    if not target.exists():
        raise InputError(f"{target}: no such ledger (fold-acceptance ... --ledger {target} "
                         "keeps a run and creates it)")  # fmt: skip
    if target.is_dir():
        connection = duckdb_module().connect(":memory:")
        try:
            try:
                ready, left = load(target, connection)
            except OSError as error:
                raise InputError(
                    f"{target}: cannot read the ledger folder: {error.strerror} ({error.filename})"
                ) from None
            if unfinished is not None:
                unfinished += left
            yield connection if ready else None
        except duckdb_module().Error as error:
            raise InputError(f"{target}: cannot read the ledger folder: {error}") from error
        finally:
            connection.close()
        return
    _check_file(target)
    connection = _connect(target, read_only=True, wait_seconds=wait_seconds)
    try:
        yield connection if check_schema(connection, target) else None
    except duckdb_module().Error as error:  # a file DuckDB opened but cannot read through
        raise InputError(f"{target}: cannot read the ledger: {error}") from error
    finally:
        connection.close()


class LedgerBusy(InputError):
    """Another process held the ledger for longer than the wait allowed."""


@contextmanager
def _transaction(target: Path, wait_seconds: float) -> Iterator[Any]:
    connection = _connect(target, read_only=False, wait_seconds=wait_seconds)
    try:
        connection.execute("BEGIN TRANSACTION")
        try:
            yield connection
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
    except duckdb_module().Error as error:
        raise InputError(f"{target}: the run was not kept: {error}") from error
    finally:
        connection.close()


def _connect(target: Path, *, read_only: bool, wait_seconds: float):
    duckdb = duckdb_module()
    started = time.monotonic()
    delay = _FIRST_RETRY_SECONDS
    while True:
        try:
            return duckdb.connect(str(target), read_only=read_only)
        except duckdb.Error as error:
            if not _is_lock_conflict(error):
                raise _not_a_ledger(target, error) from error
            waited = time.monotonic() - started
            if waited >= wait_seconds:
                raise LedgerBusy(_busy_message(target, error, waited)) from error
            time.sleep(min(delay, wait_seconds - waited))
            delay = min(2 * delay, _LONGEST_RETRY_SECONDS)


def _is_lock_conflict(error: Exception) -> bool:
    return "lock" in str(error).lower() and "conflicting" in str(error).lower()


def _busy_message(target: Path, error: Exception, waited: float) -> str:
    holder = re.search(r"\(PID (\d+)\)", str(error))
    who = f"process {holder.group(1)}" if holder else "another process"
    return (
        f"{target}: {who} still holds the ledger after {waited:.1f} s of waiting, so nothing "
        "was written to it; run again once that process is done, or wait longer with "
        "--ledger-wait SECONDS (fold) or --wait SECONDS (ledger)"
    )


def _not_a_ledger(target: Path, error: Exception) -> InputError:
    detail = str(error)
    if "permission denied" in detail.lower():
        # A ledger this user may read but not write opens read-only and reads; only an append
        # lands here, and the file is no less a ledger for it.
        return InputError(
            f"{target}: cannot write to the ledger: permission denied, so the run was not "
            "kept; make the file and its folder writable for this user (DuckDB writes a .wal "
            "beside it), or keep the run in another ledger"
        )
    if "read-only file system" in detail.lower():  # EROFS: a read-only mount
        return InputError(
            f"{target}: the ledger is read-only here ({detail}), so the run was not kept; keep "
            "it where the ledger can be written, or keep the run in another ledger"
        )
    if "version" in detail.lower():
        return InputError(
            f"{target}: written by a newer DuckDB than this one ({duckdb_module().__version__}) "
            f"reads: {detail}; upgrade duckdb or read it where it was written"
        )
    if target.is_file() and target.stat().st_size == 0:  # DuckDB refuses it, writes nothing
        return InputError(
            f"{target}: not a ledger: an empty file; remove it, or name a path that does not "
            "exist and the first kept run creates the ledger there"
        )
    return InputError(f"{target}: not a ledger: DuckDB cannot open it ({detail})")


def _check_new_path(target: Path) -> None:
    if not target.parent.is_dir():
        raise InputError(f"{target}: no folder {target.parent} to create the ledger in")


def _check_file(target: Path) -> None:
    if not target.is_file():
        raise InputError(f"{target}: not a ledger: not a regular file")


def _labels_of(connection, run_id: int) -> dict[str, str]:
    return dict(
        connection.execute(
            "SELECT key, value FROM labels WHERE run_id = ? ORDER BY key", [run_id]
        ).fetchall()
    )
