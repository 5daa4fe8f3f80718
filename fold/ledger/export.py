"""The ledger's tables as Parquet files, one schema for every ledger, so that the ledgers of
many gate machines are read as one (DuckDB, Spark, Trino: docs/ledger.md has the query).

Every exported table starts with ``ledger_id``, the ledger's own id drawn when it was
created: run ids count from 1 in every ledger, so (ledger_id, run_id) names a run across
exports.

An export replaces its set of five files at once: they are written into a new hidden folder
beside DIR (``.NAME.exports/VERSION/``), and DIR, a symbolic link, is then pointed at it by
one rename. A reader that resolves DIR once reads one export whole, never a mix of two; a
failed export leaves DIR as it was. The export before is kept (a reader may be inside it),
older ones are removed.
"""

from __future__ import annotations

import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path

from fold.errors import InputError
from fold.ledger.schema import TABLES, duckdb_module
from fold.ledger.store import DEFAULT_WAIT_SECONDS, ledger_id, reading

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
    """Write ``DIR/ledger.parquet``, ``runs``, ``labels``, ``inputs`` and ``figures`` as one
    set; the paths written, in that order."""
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise InputError(f"--export {out}: a file, not a folder")
    strangers = _not_an_export(out)
    if strangers:
        raise InputError(
            f"--export {out}: the folder holds other files than an export "
            f"({', '.join(strangers[:5])}); name a new folder or an earlier export"
        )
    versions = out.parent / f".{out.name}.exports"
    exported = datetime.now(timezone.utc).replace(tzinfo=None)
    version = versions / _version_name(versions, exported)
    with reading(path, wait_seconds) as connection:
        try:
            version.mkdir(parents=True)
        except OSError as error:
            raise InputError(f"--export {out}: cannot create {version}: {error.strerror}") from None
        try:
            stamp = exported.isoformat(timespec="seconds")
            if connection is None:  # a first append was killed before its commit: no tables
                written = _export_empty(version, stamp, out)
            else:
                identity = _literal_id(ledger_id(connection))
                written = _write_all(connection, version, identity, stamp, out)
            _point(out, version)
        except BaseException:
            shutil.rmtree(version, ignore_errors=True)
            raise
    _remove_older(versions, keep=version.name)
    return [out / path.name for path in written]


def _not_an_export(out: Path) -> list[str]:
    """What a real folder at DIR holds besides an export's files (an export made before DIR
    was a link is one)."""
    if out.is_symlink() or not out.is_dir():
        return []
    ours = {f"{name}.parquet" for name in EXPORTED} | {f".{n}.parquet.tmp" for n in EXPORTED}
    return sorted(entry.name for entry in out.iterdir() if entry.name not in ours)


def _point(out: Path, version: Path) -> None:
    """Point the link DIR at ``version`` in one rename (a real folder of an earlier export is
    first moved in among the versions)."""
    link = out.parent / f".{out.name}.{uuid.uuid4().hex}.link"
    link.symlink_to(Path(version.parent.name) / version.name, target_is_directory=True)
    try:
        if out.is_dir() and not out.is_symlink():
            os.rename(out, version.parent / f"{version.name}-before")
        os.replace(link, out)
    except OSError as error:
        link.unlink(missing_ok=True)
        raise InputError(f"--export {out}: cannot point it at the new export: {error}") from None


def _version_name(versions: Path, exported: datetime) -> str:
    """A sequence number one past the highest there (then the time to the microsecond and a
    random part, so that two exports at once still get two folders): versions sort by it,
    where names to the second put two exports of one second in the random part's order."""
    sequence = _highest(versions) + 1
    return f"{sequence:09d}-{exported:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}"


def _highest(versions: Path) -> int:
    if not versions.is_dir():
        return 0
    return max((_sequence(entry.name) for entry in versions.iterdir()), default=0)


def _sequence(name: str) -> int:
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() and len(head) == 9 else 0


def _remove_older(versions: Path, keep: str) -> None:
    found = sorted(
        (entry for entry in versions.iterdir() if entry.is_dir()),
        key=lambda entry: (_sequence(entry.name), entry.name),
    )
    newest_first = [entry for entry in reversed(found) if entry.name != keep]
    # The export just replaced is kept: a reader that resolved DIR before the rename is in it.
    for entry in newest_first[1:]:
        shutil.rmtree(entry, ignore_errors=True)


def _export_empty(folder: Path, exported: str, shown: Path) -> list[Path]:
    connection = duckdb_module().connect(":memory:")
    try:
        for name, columns in TABLES.items():
            connection.execute(f"CREATE TABLE {name} ({columns})")
        return _write_all(connection, folder, "CAST(NULL AS VARCHAR)", exported, shown)
    finally:
        connection.close()


def _write_all(connection, folder: Path, identity: str, exported: str, shown: Path) -> list[Path]:
    """Every table into the new version's folder, which no reader sees until DIR (``shown``)
    points at it."""
    written = []
    for name, query in EXPORTED.items():
        final = folder / f"{name}.parquet"
        select = query.format(id=identity, exported=f"TIMESTAMP '{exported}'")
        try:
            connection.execute(f"COPY ({select}) TO '{_quoted(final)}' (FORMAT parquet)")
        except (OSError, duckdb_module().Error) as error:
            raise InputError(
                f"--export {shown / final.name}: cannot write: {error}; nothing in {shown} "
                "was changed"
            ) from None
        written.append(final)
    return written


def _literal_id(found: str | None) -> str:
    if found is None:
        return "CAST(NULL AS VARCHAR)"
    return f"'{uuid.UUID(found)}'"  # our own id, checked to be a UUID before it meets SQL


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
