"""What the ledger costs: one append, and reading, drawing the history of and exporting a
ledger of many runs.

    python benchmarks/ledger_cost.py --runs 1000

folds the toy gate (fixtures/) once for its JSON document, then in a scratch directory:

- ``append``: ``keep_run`` of that document into a ledger already holding runs (each with
  its own figures, so none is refused as kept before): the median and the slowest of
  ``--appends`` appends, each one open, transaction, commit and close;
- ``again``: the same run offered again, found by its digest and not kept;
- ``read``: ``read_runs`` of the whole ledger (labels, inputs, figures; no documents);
- ``history``: ``figure_history`` of A/P over those runs, and its table;
- ``export``: ``export_ledger`` to Parquet;
- the ledger file's size per run.

The ledger is filled by appending ``--runs`` runs one transaction each, as gates would.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from fold.api import fold_acceptance
from fold.ledger.export import export_ledger
from fold.ledger.history import figure_history, parse_figure
from fold.ledger.store import InputFile, keep_run, read_runs
from fold.present.history import history_table

ROOT = Path(__file__).resolve().parent.parent
INPUTS = [InputFile("arm", "our-arm.json", "our-arm.json", 4811)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--appends", type=int, default=20)
    arguments = parser.parse_args()
    base = fold_acceptance(
        ROOT / "fixtures" / "our-arm.json", [str(ROOT / "fixtures" / "steps.jsonl")]
    ).to_json()
    size = len(orjson.dumps(base))
    with tempfile.TemporaryDirectory() as scratch:
        ledger = Path(scratch) / "gates.duckdb"
        started = time.perf_counter()
        for index in range(arguments.runs):
            keep_run(ledger, _variant(base, index), {"commit": f"c{index}", "k": "4"}, INPUTS)
        filled = time.perf_counter() - started
        times = []
        for index in range(arguments.appends):
            document = _variant(base, arguments.runs + index)
            started = time.perf_counter()
            keep_run(ledger, document, {"commit": "bench"}, INPUTS)
            times.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert keep_run(ledger, document, {}, INPUTS).already_kept
        again = time.perf_counter() - started
        started = time.perf_counter()
        runs = read_runs(ledger)
        read = time.perf_counter() - started
        started = time.perf_counter()
        history_table(figure_history(runs, parse_figure("A/P")))
        history = time.perf_counter() - started
        started = time.perf_counter()
        export_ledger(ledger, Path(scratch) / "export")
        export = time.perf_counter() - started
        total = len(runs)
        print(f"document: {size:,} bytes of JSON; ledger of {total} runs")
        print(f"fill: {arguments.runs} appends in {filled:.1f} s")
        print(f"append: median {1000 * statistics.median(times):.0f} ms, slowest "
              f"{1000 * max(times):.0f} ms over {len(times)}")  # fmt: skip
        print(f"again (found kept, not written): {1000 * again:.0f} ms")
        print(f"read {total} runs: {1000 * read:.0f} ms; A/P history and table: "
              f"{1000 * history:.0f} ms; export: {1000 * export:.0f} ms")  # fmt: skip
        print(f"ledger file: {ledger.stat().st_size / total / 1024:.1f} KiB per run")


def _variant(base: dict, index: int) -> dict:
    """The document with its warm A/P moved a little: another run's figures."""
    warm = dict(base["warm"], accept_rate=base["warm"]["accept_rate"] + index * 1e-6)
    return {**base, "warm": warm}


if __name__ == "__main__":
    main()
