"""A ledger that is a folder: any number of processes, on any number of hosts sharing it,
append at once with no lock.

Each kept run is one Parquet file per table (``runs``, ``labels``, ``inputs``, ``figures``),
under ``TABLE/ledger_id=ID/run-N.parquet``: hive-style, so DuckDB, polars and Spark read each
table's folder as one dataset, with the columns of the DuckDB ledger's export (``ledger_id``
from the folder's name). Nothing is ever written in place:

- the folder's identity is ``LEDGER`` (JSON: kind, schema, id, created_at, created_by), made
  by hard-linking a complete temporary file to that name, which fails when another process
  made it first (then that one is read);
- a run's id N is claimed by creating ``claims/ledger_id=ID/run-N`` with O_EXCL, the next free
  N; two writers never hold the same N, and no lock is taken;
- each table's file is written under a hidden temporary name beside its final one, flushed to
  disk and renamed into place; the ``runs`` file is renamed last and is the run's commit. A
  reader reads a run only when its ``runs`` file is there, so a writer killed at any moment
  leaves either the whole run or rows nobody reads; what it left (a temporary file, a claimed
  run with some tables) is named as an unfinished write, never read and never deleted (it may
  be a writer still at work).

Hard links, O_EXCL creates and renames within a folder are atomic on local file systems and
on NFS (v3 and later), which is what makes the folder safe to share.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from fold.errors import InputError
from fold.inputs import limits
from fold.ledger.schema import (
    LEDGER_KIND,
    SCHEMA_VERSION,
    TABLES,
    Kept,
    duckdb_module,
    insert_rows,
    tool_version,
)

LEDGER_FILE = "LEDGER"
DATA_TABLES = ("labels", "inputs", "figures", "runs")
"""The order a run's files are renamed into place: ``runs`` last, as its commit."""
FOLDERS = ("ledger", "claims", "digests", *DATA_TABLES)
IDENTITY_KEYS = ("kind", "schema", "id", "created_at", "created_by")
RUN_FILE = re.compile(r"run-([0-9]+)\.parquet")
CLAIM = re.compile(r"run-([0-9]+)")


def is_folder_ledger(path: str | Path) -> bool:
    """A folder, or a path written with a trailing slash (``gates/``), there yet or not: a
    slash names a folder whatever is found there, so writers that race to create the folder
    all take it as one (checking that it is not there yet, then that it is a folder, left a
    gap in which another writer made it: neither held, and the run was refused)."""
    text = str(path)
    return text.endswith(("/", os.sep)) or Path(text).is_dir()


def read_identity(target: Path) -> dict[str, str] | None:
    """The folder's LEDGER (None when no run was ever kept in it); refused when the folder
    holds other things than a ledger's."""
    path = target / LEDGER_FILE
    if not path.exists():
        strangers = sorted(
            entry.name
            for entry in target.iterdir()
            if entry.name not in FOLDERS and not entry.name.startswith(".")
        )
        if strangers:
            raise InputError(
                f"{target}: not a ledger: a folder without fold-acceptance's {LEDGER_FILE} "
                f"file (it holds {', '.join(strangers[:5])}); name an empty or new folder"
            )
        return None
    try:
        identity = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise InputError(f"{path}: not a ledger's {LEDGER_FILE} file: {error}") from None
    if not isinstance(identity, dict) or identity.get("kind") != LEDGER_KIND:
        raise InputError(f"{path}: not a ledger's {LEDGER_FILE} file (no kind {LEDGER_KIND!r})")
    missing = [key for key in IDENTITY_KEYS if key not in identity]
    if missing:
        raise InputError(
            f"{path}: not a whole {LEDGER_FILE} file: it has no {', '.join(missing)} (a "
            f"ledger's {LEDGER_FILE} has {', '.join(IDENTITY_KEYS)}); restore it or name "
            "another folder"
        )
    schema = limits.integer(str(path), "schema", identity.get("schema"), "restore the file")
    if schema < 1:
        raise InputError(f"{path}: its schema {schema} is not a schema number")
    if schema > SCHEMA_VERSION:
        raise InputError(
            f"{target}: a ledger of schema {schema}, newer than this fold-acceptance "
            f"({tool_version()}) reads (schema {SCHEMA_VERSION}): upgrade fold-acceptance; "
            "nothing was written"
        )
    try:
        uuid.UUID(str(identity.get("id")))  # the id meets paths and SQL: a UUID, nothing else
    except ValueError:
        raise InputError(f"{path}: its id {identity.get('id')!r} is not a UUID") from None
    return {key: str(value) for key, value in identity.items()}


def check_folder(target: Path) -> None:
    """Refuse, before a fold, a folder that is not a ledger (a new one is fine)."""
    if not target.exists():
        if not target.parent.is_dir():
            raise InputError(f"{target}: no folder {target.parent} to create the ledger in")
        return
    read_identity(target)


def keep_in_folder(
    target: Path,
    document: dict[str, Any],
    labels: dict[str, str],
    inputs: Sequence[Any],
    rows: Sequence[Any],
    digest: str,
    kept_at: datetime,
):
    """Append one run; a run whose digest the folder already indexes is not kept again."""
    try:
        identity = _ensure(target)
        partition = f"ledger_id={identity['id']}"
        indexed = target / "digests" / digest
        if indexed.exists():
            run_id = _indexed_run(target, partition, indexed)
            return Kept(run_id, True, _labels_of(target, partition, run_id))
        run_id = _claim(target / "claims" / partition)
        tables = {
            "labels": [[run_id, k, v] for k, v in sorted(labels.items())],
            "inputs": [[run_id, f.role, f.path, f.name, f.bytes] for f in inputs],
            "figures": [[run_id, r.fold, r.figure, r.position, r.versus, r.value, r.ci_low,
                         r.ci_high] for r in rows],
            "runs": [[run_id, kept_at, digest, document["format"], tool_version(),
                      orjson.dumps(document).decode()]],
        }  # fmt: skip
        # One connection for the four files: opening one took about 0.1 s of an append.
        connection = duckdb_module().connect(":memory:")
        try:
            for table in DATA_TABLES:
                _write_table(connection, target / table / partition, f"run-{run_id}.parquet",
                             table, tables[table])  # fmt: skip
        finally:
            connection.close()
        _link_once(target / "digests", digest, str(run_id).encode())
    except OSError as error:
        raise InputError(
            f"{target}: cannot write to the ledger folder: {error.strerror} "
            f"({error.filename}), so the run was not kept"
        ) from None
    return Kept(run_id, False, dict(labels))


def load(target: Path, connection) -> tuple[bool, list[str]]:
    """Fill the ledger's tables in ``connection`` (an in-memory DuckDB) with the folder's kept
    runs; whether the folder is a ledger yet, and what was not read (paths from the folder,
    with what they are: unfinished writes, unreadable files)."""
    identity = read_identity(target)
    if identity is None:
        return False, []
    for name, columns in TABLES.items():
        connection.execute(f"CREATE TABLE {name} ({columns})")
    connection.executemany(
        "INSERT INTO ledger VALUES (?, ?)", [[key, identity[key]] for key in IDENTITY_KEYS]
    )
    partition = f"ledger_id={identity['id']}"
    # runs/ is listed first: a run's other files are renamed into place before its runs file,
    # so every run listed here has all of them when they are listed after. Listed the other
    # way round, a run committed between two listings would be read without its labels.
    found = {"runs": _run_files(target / "runs" / partition)}
    kept = set(found["runs"])
    for table in DATA_TABLES[:-1]:
        found[table] = _run_files(target / table / partition)
    not_read = []
    for table in ("runs", *DATA_TABLES[:-1]):
        not_read += [
            f"{table}/{partition}/run-{n}.parquet (an unfinished write: run {n} has no runs "
            "file yet)"
            for n in sorted(set(found[table]) - kept)
        ]
        folder = target / table / partition
        if folder.is_dir():
            not_read += [
                f"{table}/{partition}/{entry.name} (an unfinished write: a temporary file)"
                for entry in sorted(folder.iterdir())
                if entry.name.startswith(".")
            ]
    for run_id in sorted(kept):
        files = {table: found[table].get(run_id) for table in ("runs", *DATA_TABLES[:-1])}
        problem = _read_run(connection, run_id, files)
        if problem is not None:
            table, why = problem
            not_read.append(f"{table}/{partition}/run-{run_id}.parquet (run {run_id} not read: "
                            f"{why})")  # fmt: skip
    orphans = {
        folder.name: len(_run_files(folder))
        for folder in sorted(target.glob("runs/ledger_id=*"))
        if folder.name != partition and _run_files(folder)
    }
    if orphans and not kept:
        counted = ", ".join(f"{runs} in runs/{name}" for name, runs in orphans.items())
        raise InputError(
            f"{target / LEDGER_FILE}: names ledger {identity['id']}, which keeps no run, but the "
            f"folder holds runs of another ledger ({counted}): its {LEDGER_FILE} file was "
            f"replaced or removed; put the {LEDGER_FILE} file of that id back"
        )
    for folder in sorted(target.glob("*/ledger_id=*")):
        if folder.name != partition and folder.parent.name in FOLDERS:
            not_read.append(
                f"{folder.parent.name}/{folder.name} (a folder of another ledger, not the one "
                f"{LEDGER_FILE} names; not read)"
            )
    return True, not_read


def _read_run(connection, run_id: int, files: dict[str, Path | None]) -> tuple[str, str] | None:
    """Insert one run's four files as one transaction; the table whose file is wrong and what
    is wrong with it (the run is then left out whole), or None. Read file by file so that
    one damaged or foreign file costs its run, not the ledger."""
    error_type = duckdb_module().Error
    connection.execute("BEGIN TRANSACTION")
    try:
        for table, path in files.items():
            if path is None:
                raise _Unreadable(table, "its file is missing")
            columns = ", ".join(_columns(TABLES[table]))
            try:
                (count,) = connection.execute(
                    f"INSERT INTO {table} SELECT {columns} FROM "
                    f"read_parquet('{_quoted(path)}', hive_partitioning = false)"
                ).fetchone()
                (own,) = connection.execute(
                    f"SELECT count(*) FROM {table} WHERE run_id = ?", [run_id]
                ).fetchone()
            except error_type as error:
                first = str(error).strip().splitlines()[0] if str(error).strip() else ""
                raise _Unreadable(table, f"not a ledger's file: {first[:200]}") from None
            if own != count:
                raise _Unreadable(table, "it holds rows of another run")
            if table == "runs" and count != 1:
                raise _Unreadable(table, f"it holds {count} rows, not one")
    except _Unreadable as problem:
        connection.execute("ROLLBACK")
        return problem.args
    connection.execute("COMMIT")
    return None


class _Unreadable(Exception):
    """A run's files that cannot be read as the run (the message says why)."""


def _ensure(target: Path) -> dict[str, str]:
    target.mkdir(exist_ok=True)
    identity = read_identity(target)
    if identity is None:
        made = {
            "kind": LEDGER_KIND,
            "schema": SCHEMA_VERSION,
            "id": str(uuid.uuid4()),
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "created_by": f"fold-acceptance {tool_version()}",
        }
        _link_once(target, LEDGER_FILE, orjson.dumps(made, option=orjson.OPT_INDENT_2))
        identity = read_identity(target)
        # the link either made the file or found another process's, written whole either way
        assert identity is not None
    partition = f"ledger_id={identity['id']}"
    for folder in FOLDERS:
        (target / folder / partition if folder != "digests" else target / folder).mkdir(
            parents=True, exist_ok=True
        )
    meta = target / "ledger" / partition / "ledger.parquet"
    if not meta.exists():
        _write_meta(meta, identity)
    return identity


def _write_meta(path: Path, identity: dict[str, str]) -> None:
    """The export's ledger table for this folder: ``runs`` and ``exported_at`` are null (the
    runs are the runs folder's, and nothing was exported)."""
    temporary = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    connection = duckdb_module().connect(":memory:")
    try:
        connection.execute(
            f"COPY (SELECT CAST(? AS INTEGER) AS schema, CAST(? AS VARCHAR) AS created_at, "
            f"CAST(? AS VARCHAR) AS created_by, CAST(NULL AS BIGINT) AS runs, "
            f"CAST(NULL AS TIMESTAMP) AS exported_at) TO '{_quoted(temporary)}' "
            "(FORMAT parquet)",
            [int(identity["schema"]), identity["created_at"], identity["created_by"]],
        )
    finally:
        connection.close()
    _flush(temporary)
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)


def _indexed_run(target: Path, partition: str, indexed: Path) -> int:
    """The run a digest file names. A digest is linked only after its run's runs file is in
    place, so a digest that names no kept run is damaged; keeping the run past it would be
    reported as kept before, and it is not: refused, naming the file."""
    text = indexed.read_bytes()[:40].decode("utf-8", "replace").strip()
    run_id = int(text) if text.isascii() and text.isdigit() and int(text) > 0 else None
    if run_id is None or not (target / "runs" / partition / f"run-{run_id}.parquet").exists():
        said = f"run {run_id}, which the ledger does not keep" if run_id else f"{text[:20]!r}"
        raise InputError(
            f"{indexed}: this run's digest file is damaged (it says {said}), so the run was not "
            "kept: remove that file and keep the run again"
        )
    return run_id


def _claim(folder: Path) -> int:
    taken = [int(m.group(1)) for e in os.scandir(folder) if (m := CLAIM.fullmatch(e.name))]
    run_id = max(taken, default=0) + 1
    while True:
        try:
            os.close(os.open(folder / f"run-{run_id}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return run_id
        except FileExistsError:
            run_id += 1


def _write_table(connection, folder: Path, name: str, table: str, rows: list[list[Any]]) -> None:
    temporary = folder / f".{name}.{uuid.uuid4().hex}.tmp"
    connection.execute(f"CREATE TABLE {table} ({TABLES[table]})")
    insert_rows(connection, table, rows)
    connection.execute(f"COPY {table} TO '{_quoted(temporary)}' (FORMAT parquet)")
    _flush(temporary)
    os.replace(temporary, folder / name)


def _link_once(folder: Path, name: str, data: bytes) -> bool:
    """Make ``folder/name`` hold ``data`` unless it exists; whether this call made it."""
    temporary = folder / f".{name}.{uuid.uuid4().hex}.tmp"
    temporary.write_bytes(data)
    _flush(temporary)
    try:
        os.link(temporary, folder / name)
        return True
    except FileExistsError:
        return False
    finally:
        temporary.unlink(missing_ok=True)


def _flush(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _labels_of(target: Path, partition: str, run_id: int) -> dict[str, str]:
    path = target / "labels" / partition / f"run-{run_id}.parquet"
    if not path.exists():
        return {}
    connection = duckdb_module().connect(":memory:")
    try:
        return dict(
            connection.execute(
                f"SELECT key, value FROM read_parquet('{_quoted(path)}') ORDER BY key"
            ).fetchall()
        )
    except duckdb_module().Error:
        raise InputError(
            f"{path}: the ledger keeps this run as run {run_id}, but that run's labels file is "
            "damaged (not a ledger's Parquet file): nothing was kept; restore or remove the "
            "run's files"
        ) from None
    finally:
        connection.close()


def _run_files(folder: Path) -> dict[int, Path]:
    if not folder.is_dir():
        return {}
    return {
        int(match.group(1)): Path(entry.path)
        for entry in os.scandir(folder)
        if (match := RUN_FILE.fullmatch(entry.name))
    }


def _columns(definition: str) -> list[str]:
    parts = re.split(r",\s*(?![^()]*\))", definition)
    return [part.split()[0] for part in parts if not part.lstrip().startswith("PRIMARY KEY")]


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
