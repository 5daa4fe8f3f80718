"""The ledger under real processes: a writer killed mid-append, and appenders at once.

Every writer here is a separate process (DuckDB's lock is per process), killed with SIGKILL
at a point it reports itself: no exit handler, no rollback, no close runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import orjson
from ledger_runs import ARM, STEPS, document

from fold.ledger.store import keep_run, read_runs

HERE = Path(__file__).resolve().parent
WRITER = str(HERE / "ledger_writer.py")
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}
WAIT = 120  # seconds a child may take on a loaded machine before the test fails


def writer(ledger: Path, doc: dict, label: str, stop: str, hold: float | None = None):
    """A writer process stopped at ``stop``, once it says it got there."""
    path = ledger.parent / f"{label.replace('=', '-')}.json"
    path.write_bytes(orjson.dumps(doc))
    command = [sys.executable, WRITER, str(ledger), str(path), label, "--stop", stop]
    if hold is not None:
        command += ["--hold", str(hold)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                             text=True)  # fmt: skip
    if stop != "none":
        line = child.stdout.readline().strip()
        assert line == stop, (line, child.stderr.read() if child.poll() is not None else "")
    return child


def kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(WAIT)
    assert child.returncode == -signal.SIGKILL


def command(*arguments: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fold.cli", *arguments],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                            text=True)  # fmt: skip


def contents(ledger: Path) -> dict[str, list]:
    """Every row of every table, read straight from DuckDB."""
    with duckdb.connect(str(ledger), read_only=True) as connection:
        return {
            table: sorted(connection.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
            for table in ("runs", "labels", "inputs", "figures")
        }


def test_a_writer_killed_inside_its_transaction_leaves_the_ledger_as_it_was(tmp_path):
    ledger = tmp_path / "gates.duckdb"
    keep_run(ledger, document(0.40, (0.35, 0.45)), {"commit": "a"}, [])
    keep_run(ledger, document(0.41, (0.36, 0.46)), {"commit": "b"}, [])
    before = contents(ledger)
    child = writer(ledger, document(0.60, (0.55, 0.65)), "commit=c", "inserted")
    kill(child)  # every row of run 3 written, not committed
    assert contents(ledger) == before
    assert [run.labels["commit"] for run in read_runs(ledger)] == ["a", "b"]
    # and it takes the next run as if nothing had happened
    assert keep_run(ledger, document(0.60, (0.55, 0.65)), {"commit": "c"}, []).run_id == 3
    assert [run.labels["commit"] for run in read_runs(ledger)] == ["a", "b", "c"]


def test_a_first_writer_killed_inside_its_transaction_leaves_an_empty_ledger(tmp_path):
    ledger = tmp_path / "gates.duckdb"
    kill(writer(ledger, document(0.5, (0.4, 0.6)), "commit=a", "inserted"))
    assert ledger.exists()  # DuckDB made the file when it opened it
    assert read_runs(ledger) == []
    assert keep_run(ledger, document(0.5, (0.4, 0.6)), {"commit": "a"}, []).run_id == 1


def test_a_writer_killed_after_its_commit_keeps_its_run(tmp_path):
    """Killed before it closed the file (before any checkpoint): the committed run is in the
    write-ahead log, which DuckDB replays on the next open."""
    ledger = tmp_path / "gates.duckdb"
    keep_run(ledger, document(0.40, (0.35, 0.45)), {"commit": "a"}, [])
    kill(writer(ledger, document(0.60, (0.55, 0.65)), "commit=b", "committed"))
    runs = read_runs(ledger)
    assert [run.labels["commit"] for run in runs] == ["a", "b"]
    warm = {row.figure: row.value for row in runs[1].figures if row.fold == "warm"}
    assert warm["accept_rate"] == 0.60


def test_an_appender_waits_for_one_holding_the_ledger_and_both_land(tmp_path):
    """The second starts while the first holds the file inside its transaction: it can only
    land by waiting for the first to commit and close."""
    ledger = tmp_path / "gates.duckdb"
    keep_run(ledger, document(0.40, (0.35, 0.45)), {"commit": "a"}, [])
    first = writer(ledger, document(0.41, (0.36, 0.46)), "who=first", "inserted", hold=1.5)
    second = writer(ledger, document(0.42, (0.37, 0.47)), "who=second", "none")
    assert second.wait(WAIT) == 0, second.stderr.read()
    assert first.wait(WAIT) == 0, first.stderr.read()
    assert first.stdout.read().split() == ["kept", "2"]
    assert second.stdout.read().split() == ["kept", "3"]
    labels = [run.labels for run in read_runs(ledger)]
    assert labels == [{"commit": "a"}, {"who": "first"}, {"who": "second"}]


def test_an_appender_past_its_wait_is_refused_and_writes_nothing(tmp_path):
    ledger = tmp_path / "gates.duckdb"
    keep_run(ledger, document(0.40, (0.35, 0.45)), {"commit": "a"}, [])
    before = contents(ledger)
    holder = writer(ledger, document(0.41, (0.36, 0.46)), "who=holder", "inserted")
    out_json = tmp_path / "second.json"
    second = command(ARM, STEPS, "--ledger", str(ledger), "--label", "who=second",
                     "--ledger-wait", "1", "--json", str(out_json), "--quiet")  # fmt: skip
    _, err = second.communicate(timeout=WAIT)
    assert second.returncode == 2
    assert f"process {holder.pid} still holds the ledger after 1." in err
    assert "nothing was written to it" in err and "--ledger-wait SECONDS" in err
    assert "Traceback" not in err
    assert not out_json.exists()  # the refusal came before any other output
    kill(holder)
    assert contents(ledger) == before


def test_two_gates_appending_at_once_both_land(tmp_path):
    ledger = tmp_path / "gates.duckdb"
    gates = [
        command(ARM, STEPS, "--ledger", str(ledger), "--seed", str(seed), "--label",
                f"seed={seed}", "--quiet")
        for seed in (1, 2)
    ]  # fmt: skip
    for gate in gates:
        _, err = gate.communicate(timeout=WAIT)
        assert gate.returncode == 0, err
    runs = read_runs(ledger)
    assert sorted(run.labels["seed"] for run in runs) == ["1", "2"]
    assert sorted(run.run_id for run in runs) == [1, 2]


def test_a_reader_waits_for_a_writer_or_is_refused_past_its_wait(tmp_path, capsys):
    from fold.cli import main

    ledger = tmp_path / "gates.duckdb"
    keep_run(ledger, document(0.40, (0.35, 0.45)), {"commit": "a"}, [])
    holder = writer(ledger, document(0.41, (0.36, 0.46)), "commit=b", "inserted", hold=3)
    assert main(["ledger", str(ledger), "--wait", "0.2"]) == 2
    assert f"process {holder.pid} still holds the ledger" in capsys.readouterr().err
    # DuckDB refuses a reader while a writer holds the file: the reader waits for its commit
    assert [run.labels["commit"] for run in read_runs(ledger, wait_seconds=WAIT)] == ["a", "b"]
    assert holder.wait(WAIT) == 0
