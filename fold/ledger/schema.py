"""The ledger's schema: its tables, the checks that a DuckDB database is a ledger this
version reads (tables, columns and their types, the schema number), its creation, and what
both kinds of ledger (a DuckDB file, a folder) share when they append: the rows of a table in
one statement and what an append did (``Kept``)."""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from fold.errors import InputError

SCHEMA_VERSION = 1
LEDGER_KIND = "fold-acceptance ledger"
LEDGER_EXTRA = "pip install 'fold-acceptance[ledger]'"

TABLES = {
    "ledger": "key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL",
    "runs": (
        "run_id BIGINT PRIMARY KEY, kept_at TIMESTAMP NOT NULL, digest VARCHAR NOT NULL "
        "UNIQUE, format VARCHAR NOT NULL, tool_version VARCHAR NOT NULL, "
        "document VARCHAR NOT NULL"
    ),
    "labels": "run_id BIGINT NOT NULL, key VARCHAR NOT NULL, value VARCHAR NOT NULL, "
    "PRIMARY KEY (run_id, key)",
    "inputs": "run_id BIGINT NOT NULL, role VARCHAR NOT NULL, path VARCHAR NOT NULL, "
    "name VARCHAR NOT NULL, bytes BIGINT NOT NULL",
    "figures": (
        "run_id BIGINT NOT NULL, fold VARCHAR NOT NULL, figure VARCHAR NOT NULL, "
        "position INTEGER, versus VARCHAR, value DOUBLE NOT NULL, ci_low DOUBLE, "
        "ci_high DOUBLE"
    ),
}
"""Schema 1. ``kept_at`` is UTC; ``position`` counts draft positions from 1."""


@dataclass(frozen=True)
class Kept:
    """What an append did: the run's id, and whether it was already kept (then nothing was
    written, and ``labels`` are the ones it was kept with)."""

    run_id: int
    already_kept: bool
    labels: dict[str, str]


def insert_rows(connection, table: str, rows: list[list[Any]]) -> None:
    """All of a table's new rows in one statement: a prepared statement per row (executemany)
    took 80 ms of an append's 350 for its few dozen figures."""
    if not rows:
        return
    row = "(" + ", ".join("?" * len(rows[0])) + ")"
    connection.execute(
        f"INSERT INTO {table} VALUES " + ", ".join([row] * len(rows)),
        [value for found in rows for value in found],
    )


@functools.cache
def tool_version() -> str:
    try:
        return metadata.version("fold-acceptance")
    except metadata.PackageNotFoundError:
        return "not installed"


def _tables(connection) -> set[str]:
    return {
        name
        for (name,) in connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()
    }


def check_schema(connection, target: Path) -> bool:
    """Whether the database holds a ledger's tables (False: none at all, which is what a first
    append killed before its commit leaves); refused when it is not a ledger or a newer one."""
    tables = _tables(connection)
    if not tables:
        return False
    if "ledger" not in tables:
        raise InputError(
            f"{target}: not a ledger: a DuckDB database without fold-acceptance's tables "
            f"(it holds {', '.join(sorted(tables)[:5])}); name another path"
        )
    meta = dict(connection.execute("SELECT key, value FROM ledger").fetchall())
    if meta.get("kind") != LEDGER_KIND or not str(meta.get("schema", "")).isdigit():
        raise InputError(f"{target}: not a ledger: its ledger table is not fold-acceptance's")
    schema = int(meta["schema"])
    if schema > SCHEMA_VERSION:
        raise InputError(
            f"{target}: a ledger of schema {schema}, newer than this fold-acceptance "
            f"({tool_version()}) reads (schema {SCHEMA_VERSION}): upgrade fold-acceptance; "
            "nothing was written"
        )
    missing = sorted(set(TABLES) - tables)
    if missing:
        raise InputError(f"{target}: not a ledger: it lacks the tables {', '.join(missing)}")
    _check_columns(connection, target)
    return True


def _expected_columns(definition: str) -> list[tuple[str, str]]:
    """The columns of a table's definition in ``TABLES``, in order: (name, DuckDB type)."""
    parts = re.split(r",\s*(?![^()]*\))", definition)
    return [
        (part.split()[0], part.split()[1])
        for part in parts
        if not part.lstrip().startswith("PRIMARY KEY")
    ]


def _check_columns(connection, target: Path) -> None:
    """A table of the right name with other columns, or with a column of another type, is
    refused by name: the history would otherwise fail later with DuckDB's own words, or read
    a figure from the wrong column or as text."""
    found: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in connection.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall():
        found.setdefault(table, []).append((column, kind))
    for table, definition in TABLES.items():
        expected = _expected_columns(definition)
        if found.get(table) == expected:
            continue
        if [name for name, _ in found.get(table, [])] != [name for name, _ in expected]:
            raise InputError(
                f"{target}: not a ledger: its table {table} has the columns "
                f"{', '.join(name for name, _ in found.get(table, []))}, not fold-acceptance's "
                f"{', '.join(name for name, _ in expected)}; name another path"
            )
        wrong = [
            f"{name} is {kind}, not {want}"
            for (name, kind), (_, want) in zip(found[table], expected, strict=True)
            if kind != want
        ]
        raise InputError(
            f"{target}: not a ledger: in its table {table}, {'; '.join(wrong)}; name another path"
        )


def ensure_schema(connection, target: Path) -> None:
    if check_schema(connection, target):
        return
    for name, columns in TABLES.items():
        connection.execute(f"CREATE TABLE {name} ({columns})")
    connection.executemany(
        "INSERT INTO ledger VALUES (?, ?)",
        [
            ["kind", LEDGER_KIND],
            ["schema", str(SCHEMA_VERSION)],
            ["id", str(uuid.uuid4())],
            ["created_at", datetime.now(timezone.utc).isoformat(timespec="seconds")],
            ["created_by", f"fold-acceptance {tool_version()}"],
        ],
    )


def duckdb_module():
    try:
        import duckdb
    except ImportError as error:
        raise InputError(
            f"the ledger needs duckdb, which the core install leaves out: {LEDGER_EXTRA}"
        ) from error
    return duckdb
