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
from fold.ledger.schema import LEDGER_KIND, SCHEMA_VERSION, TABLES, duckdb_module, tool_version

LEDGER_FILE = "LEDGER"
DATA_TABLES = ("labels", "inputs", "figures", "runs")
"""The order a run's files are renamed into place: ``runs`` last, as its commit."""
FOLDERS = ("ledger", "claims", "digests", *DATA_TABLES)
RUN_FILE = re.compile(r"run-([0-9]+)\.parquet")
CLAIM = re.compile(r"run-([0-9]+)")


def is_folder_ledger(path: str | Path) -> bool:
    """A folder, or a path not there yet written with a trailing slash (``gates/``)."""
    text = str(path)
    return Path(text).is_dir() or (not Path(text).exists() and text.endswith(("/", os.sep)))


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
    schema = identity.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise InputError(f"{path}: its schema {schema!r} is not a schema number")
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
    from fold.ledger.store import Kept

    try:
        identity = _ensure(target)
        partition = f"ledger_id={identity['id']}"
        indexed = target / "digests" / digest
        if indexed.exists():
            run_id = int(indexed.read_text())
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
    runs; whether the folder is a ledger yet, and its unfinished writes (paths from the
    folder, with what they are)."""
    identity = read_identity(target)
    if identity is None:
        return False, []
    for name, columns in TABLES.items():
        connection.execute(f"CREATE TABLE {name} ({columns})")
    connection.executemany(
        "INSERT INTO ledger VALUES (?, ?)",
        [[key, identity[key]] for key in ("kind", "schema", "id", "created_at", "created_by")],
    )
    partition = f"ledger_id={identity['id']}"
    found = {table: _run_files(target / table / partition) for table in DATA_TABLES}
    kept = set(found["runs"])
    unfinished = []
    for table in ("runs", "labels", "inputs", "figures"):
        files = [found[table][n] for n in sorted(found[table]) if n in kept]
        unfinished += [
            f"{table}/{partition}/run-{n}.parquet (run {n} has no runs file yet)"
            for n in sorted(set(found[table]) - kept)
        ]
        folder = target / table / partition
        if folder.is_dir():
            unfinished += [
                f"{table}/{partition}/{entry.name} (a temporary file)"
                for entry in sorted(folder.iterdir())
                if entry.name.startswith(".")
            ]
        if files:
            columns = ", ".join(_columns(TABLES[table]))
            listed = ", ".join(f"'{_quoted(path)}'" for path in files)
            connection.execute(
                f"INSERT INTO {table} SELECT {columns} FROM read_parquet([{listed}], "
                "hive_partitioning = false)"
            )
    for folder in sorted(target.glob("*/ledger_id=*")):
        if folder.name != partition and folder.parent.name in FOLDERS:
            unfinished.append(f"{folder.parent.name}/{folder.name} (another ledger's; not read)")
    return True, unfinished


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
    from fold.ledger.store import insert_rows

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
