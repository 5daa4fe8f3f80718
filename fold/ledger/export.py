"""The ledger's tables as Parquet files, one schema for every ledger, so that the ledgers of
many gate machines are read as one (DuckDB, Spark, Trino: docs/ledger.md has the query).

Every exported table starts with ``ledger_id``, the ledger's own id drawn when it was
created: run ids count from 1 in every ledger, so (ledger_id, run_id) names a run across
exports. All five files are written beside their final names before any is renamed into
place, so a failed export leaves the previous one whole and a reader never sees half of a file.
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone
from pathlib import Path

from fold.errors import InputError
from fold.ledger.store import DEFAULT_WAIT_SECONDS, TABLES, duckdb_module, ledger_id, reading

EXPORTED = {
    "ledger": (
        "SELECT {id} AS ledger_id, CAST((SELECT value FROM ledger WHERE key = 'schema') "
        "AS INTEGER) AS schema, (SELECT value FROM ledger WHERE key = 'created_at') AS "
        "created_at, (SELECT value FROM ledger WHERE key = 'created_by') AS created_by, "
        "(SELECT count(*) FROM runs) AS runs, {exported} AS exported_at"
    ),
    "runs": "SELECT {id} AS ledger_id, run_id, kept_at, digest, format, tool_version, document "
    "FROM runs ORDER BY run_id",
    "labels": "SELECT {id} AS ledger_id, run_id, key, value FROM labels ORDER BY run_id, key",
    "inputs": "SELECT {id} AS ledger_id, run_id, role, path, name, bytes FROM inputs "
    "ORDER BY run_id, rowid",
    "figures": "SELECT {id} AS ledger_id, run_id, fold, figure, position, versus, value, "
    "ci_low, ci_high FROM figures ORDER BY run_id, rowid",
}
"""Export schema 1: the file ``DIR/<name>.parquet`` holds the rows of each query."""


def export_ledger(
    path: str | Path, directory: str | Path, *, wait_seconds: float = DEFAULT_WAIT_SECONDS
) -> list[Path]:
    """Write ``DIR/ledger.parquet``, ``runs``, ``labels``, ``inputs`` and ``figures``; the
    paths written, in that order."""
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise InputError(f"--export {out}: a file, not a folder")
    exported = datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")
    with reading(path, wait_seconds) as connection:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(
                f"--export {out}: cannot create the folder: {error.strerror}"
            ) from None
        if connection is None:  # a first append was killed before its commit: no tables yet
            return _export_empty(out, exported)
        found = ledger_id(connection)
        return _write_all(connection, out, _literal_id(found), exported)


def _export_empty(out: Path, exported: str) -> list[Path]:
    connection = duckdb_module().connect(":memory:")
    try:
        for name, columns in TABLES.items():
            connection.execute(f"CREATE TABLE {name} ({columns})")
        return _write_all(connection, out, "CAST(NULL AS VARCHAR)", exported)
    finally:
        connection.close()


def _write_all(connection, out: Path, identity: str, exported: str) -> list[Path]:
    # Every table is written before any is renamed into place, so a failure leaves DIR's
    # previous export whole instead of a mix of two.
    staged: list[tuple[Path, Path]] = []
    try:
        for name, query in EXPORTED.items():
            final = out / f"{name}.parquet"
            temporary = out / f".{name}.parquet.tmp"
            select = query.format(id=identity, exported=f"TIMESTAMP '{exported}'")
            try:
                connection.execute(f"COPY ({select}) TO '{_quoted(temporary)}' (FORMAT parquet)")
            except (OSError, duckdb_module().Error) as error:
                raise InputError(
                    f"--export {final}: cannot write: {error}; nothing in {out} was changed"
                ) from None
            staged.append((temporary, final))
        for temporary, final in staged:
            os.replace(temporary, final)
    except BaseException:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
        raise
    return [final for _, final in staged]


def _literal_id(found: str | None) -> str:
    if found is None:
        return "CAST(NULL AS VARCHAR)"
    return f"'{uuid.UUID(found)}'"  # our own id, checked to be a UUID before it meets SQL


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
