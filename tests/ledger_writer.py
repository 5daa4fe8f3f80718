"""A ledger writer that stops at a chosen point of its append, for tests that kill it there.

    python ledger_writer.py LEDGER DOCUMENT.json LABEL=VALUE --stop {inserted,committed,none}
        [--hold SECONDS]

It keeps the document as a run through ``fold.ledger.store.keep_run``, the command's own path,
and at the stop point prints one line (``inserted`` once every row of the run is written inside
the open transaction, ``committed`` once the commit returned but before the connection closed)
and sleeps: for ``--hold`` seconds, then finishes the append, or until it is killed. With
``none`` it appends without stopping: a second appender that starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import orjson

from fold.ledger import store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("ledger")
    parser.add_argument("document")
    parser.add_argument("label")
    parser.add_argument("--stop", choices=("inserted", "committed", "none"), required=True)
    parser.add_argument("--hold", type=float, default=None)
    arguments = parser.parse_args()

    def stop(point: str) -> None:
        print(point, flush=True)
        time.sleep(arguments.hold if arguments.hold is not None else 3600)

    if arguments.stop == "inserted":
        insert = store._insert_figures

        def insert_then_stop(connection, run_id, rows):
            insert(connection, run_id, rows)
            stop("inserted")

        store._insert_figures = insert_then_stop
    elif arguments.stop == "committed":
        duckdb = store.duckdb_module()

        class Connection:
            """A DuckDB connection that stops right after its commit."""

            def __init__(self, connection) -> None:
                self._connection = connection

            def execute(self, query, *parameters):
                found = self._connection.execute(query, *parameters)
                if query == "COMMIT":
                    stop("committed")
                return found

            def __getattr__(self, name):
                return getattr(self._connection, name)

        class Module:
            Error = duckdb.Error
            __version__ = duckdb.__version__

            @staticmethod
            def connect(*args, **kwargs):
                return Connection(duckdb.connect(*args, **kwargs))

        store.duckdb_module = lambda: Module

    key, _, value = arguments.label.partition("=")
    document = orjson.loads(Path(arguments.document).read_bytes())
    kept = store.keep_run(arguments.ledger, document, {key: value}, [])
    print(f"kept {kept.run_id}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
