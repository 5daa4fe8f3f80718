"""A ledger folder under real processes: writers at once, writers killed at random moments,
a reader while they write, and DuckDB and polars reading the folder as one dataset.

Every writer is a separate process; a killed one gets SIGKILL (no exit handler runs).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import orjson
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_folder_writer import value
from ledger_runs import ARM, STEPS, document

from fold.cli import main
from fold.errors import InputError
from fold.ledger.figures import figure_rows
from fold.ledger.folder import read_identity
from fold.ledger.store import keep_run, read_runs

HERE = Path(__file__).resolve().parent
WRITER = str(HERE / "ledger_folder_writer.py")
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}
WAIT = 180  # seconds the writers may take on a loaded machine before the test fails


def writers(
    folder: Path, count: int, runs: int, *die_at: str, first: int = 1
) -> list[subprocess.Popen]:
    """COUNT writer processes, numbered from FIRST; DIE_AT: the writer's set point to die at."""
    return [
        subprocess.Popen([sys.executable, WRITER, f"{folder}/", str(w), str(runs), *die_at],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True)
        for w in range(first, first + count)
    ]  # fmt: skip


def reported(outputs: list[str]) -> dict[int, tuple[int, int]]:
    """Run id -> (writer, n) for every append its writer saw return."""
    found = {}
    for output in outputs:
        for line in output.splitlines():
            _, run_id, writer, n = line.split()
            found[int(run_id)] = (int(writer), int(n))
    return found


def assert_whole(runs) -> None:
    """Every run read holds exactly the rows its writer meant: its labels, and the figures of
    the document its labels name, to the bit."""
    for run in runs:
        writer, n = int(run.labels["writer"]), int(run.labels["n"])
        rate = value(writer, n)
        expected = figure_rows(document(rate, (rate - 0.05, rate + 0.05)))
        assert list(run.figures) == expected, run.run_id
        assert set(run.labels) == {"writer", "n"}


def test_eight_writers_at_once_lose_nothing(tmp_path):
    folder = tmp_path / "gates"
    children = writers(folder, 8, 3)  # the folder does not exist: they race to create it
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=WAIT)
        assert child.returncode == 0, err
        outputs.append(out)
    seen = reported(outputs)
    runs = read_runs(folder)
    assert sorted(seen) == list(range(1, 25))  # every id claimed once, none skipped
    assert {run.run_id: (int(run.labels["writer"]), int(run.labels["n"])) for run in runs} == seen
    assert_whole(runs)
    assert len(list((folder / "ledger").glob("ledger_id=*"))) == 1  # one identity won


def test_writers_killed_at_set_points_and_random_moments_leave_no_torn_run(tmp_path, capsys):
    folder = tmp_path / "gates"
    keep_run(folder.as_posix() + "/", document(0.5, (0.4, 0.6)), {"writer": "0", "n": "1"}, [])
    partition = next((folder / "runs").glob("ledger_id=*")).name
    # One writer after another, each killed inside its first append at a set point, so each
    # one's run id is known: 2, 3, ... in the order of POINTS.
    points = ("claim", "copy", "rename-1", "rename-2", "rename-3", "rename-4")
    for w, point in enumerate(points, start=1):
        (child,) = writers(folder, 1, 1, point, first=w)
        out, err = child.communicate(timeout=WAIT)
        assert child.returncode == -signal.SIGKILL, (point, err)
        assert out == ""  # killed before its append returned
    ids = {point: n for n, point in enumerate(points, start=2)}
    claims = {p.name for p in (folder / "claims" / partition).iterdir()}
    assert claims == {f"run-{n}" for n in range(1, 8)}

    # Then writers killed at random moments of their appends: each is killed only after its
    # first append returned, at a random offset into the ones after.
    generator = random.Random(34)
    children = writers(folder, 4, 0, first=10)
    outputs = []
    for child in children:
        first_line = child.stdout.readline()
        assert first_line.startswith("kept "), child.stderr.read()
        time.sleep(generator.uniform(0.0, 0.5))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=WAIT)
        assert child.returncode == -signal.SIGKILL
        outputs.append(first_line + out)

    not_read: list[str] = []
    runs = read_runs(folder, unfinished=not_read)
    seen = reported(outputs)
    found = {run.run_id for run in runs}
    assert len(seen) >= 4 and set(seen) <= found  # nothing an append returned for is lost
    assert_whole([run for run in runs if run.labels["writer"] != "0"])
    # the set points: killed before the runs file, the run is not read and its files named;
    # killed after it (before its digest), the run is whole
    assert ids["claim"] not in found  # a gap in the ids, nothing to name
    assert f"labels/{partition}/" in "".join(not_read)
    temporary = [e for e in not_read if "a temporary file" in e]
    assert any(e.startswith(f"labels/{partition}/.run-{ids['copy']}.parquet.") for e in temporary)
    for point, tables in (("rename-1", 1), ("rename-2", 2), ("rename-3", 3)):
        n = ids[point]
        assert n not in found
        named = {e.split("/")[0] for e in not_read if f"/run-{n}.parquet (" in e}
        assert named == set(("labels", "inputs", "figures")[:tables]), (point, not_read)
    assert ids["rename-4"] in found
    assert all("a temporary file" in e or "no runs file yet" in e for e in not_read), not_read

    assert main(["ledger", str(folder), "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert f".run-{ids['copy']}.parquet." in captured.err and "not read" in captured.err
    assert len(orjson.loads(captured.out)["runs"]) == len(runs)
    # and the folder takes the next run after all of that
    kept = keep_run(folder, document(0.9, (0.8, 1.0)), {"writer": "0", "n": "2"}, [])
    assert kept.run_id > max(found) and not kept.already_kept


def test_a_reader_while_they_write_sees_only_whole_runs(tmp_path):
    folder = tmp_path / "gates"
    keep_run(folder.as_posix() + "/", document(0.1, (0.05, 0.15)), {"writer": "0", "n": "1"}, [])
    children = writers(folder, 4, 4)
    reads, before = 0, set()
    while any(child.poll() is None for child in children) or reads < 3:
        runs = read_runs(folder)
        ids = {run.run_id for run in runs}
        assert before <= ids  # a run once read never goes away
        assert_whole([run for run in runs if run.labels["writer"] != "0"])
        before, reads = ids, reads + 1
    for child in children:
        assert child.wait(WAIT) == 0, child.stderr.read()
    assert len(read_runs(folder)) == 17 and reads >= 3


def test_duckdb_and_polars_read_the_folder_as_the_export(tmp_path, capsys):
    folder = tmp_path / "gates"
    for seed, branch in ((1, "main"), (2, "main"), (3, "slower")):
        assert main([ARM, STEPS, "--seed", str(seed), "--quiet", "--ledger", f"{folder}/",
                     "--label", f"branch={branch}", "--label", "k=4"]) == 0  # fmt: skip
    capsys.readouterr()
    exported = tmp_path / "export"
    assert main(["ledger", str(folder), "--export", str(exported)]) == 0
    connection = duckdb.connect()
    for table in ("runs", "labels", "inputs", "figures"):
        from_folder = connection.execute(
            f"SELECT * FROM read_parquet('{folder}/{table}/*/*.parquet', hive_partitioning = true)"
        )
        columns = [column[0] for column in from_folder.description]
        rows = from_folder.fetchall()
        export = connection.execute(f"SELECT * FROM '{exported}/{table}.parquet'")
        export_columns = [column[0] for column in export.description]
        assert sorted(columns) == sorted(export_columns)  # ledger_id comes from the folder name
        order = [columns.index(name) for name in export_columns]
        assert sorted((tuple(row[i] for i in order) for row in rows), key=repr) == sorted(
            export.fetchall(), key=repr
        )
    # The query docs/ledger.md shows: every run's warm A/P with its branch label.
    query = f"""
        SELECT r.run_id, b.value AS branch, f.value AS accept_rate
        FROM read_parquet('{folder}/figures/*/*.parquet', hive_partitioning = true) AS f
        JOIN read_parquet('{folder}/runs/*/*.parquet', hive_partitioning = true) AS r
          USING (ledger_id, run_id)
        JOIN (SELECT ledger_id, run_id, value
              FROM read_parquet('{folder}/labels/*/*.parquet', hive_partitioning = true)
              WHERE key = 'branch') AS b USING (ledger_id, run_id)
        WHERE f.fold = 'warm' AND f.figure = 'accept_rate' AND f.position IS NULL
        ORDER BY r.run_id"""
    found = connection.execute(query).fetchall()
    runs = read_runs(folder)
    assert found == [
        (run.run_id, run.labels["branch"],
         next(r.value for r in run.figures if (r.fold, r.figure, r.position) ==
              ("warm", "accept_rate", None)))
        for run in runs
    ]  # fmt: skip
    frame = pl.scan_parquet(folder / "figures", hive_partitioning=True).collect()
    assert frame.height == sum(len(run.figures) for run in runs)
    assert "ledger_id" in frame.columns


def test_a_run_kept_again_and_a_folder_that_is_not_a_ledger(tmp_path, capsys):
    folder = tmp_path / "gates"
    first = keep_run(f"{folder}/", document(0.4, (0.3, 0.5)), {"commit": "a"}, [])
    again = keep_run(folder, document(0.4, (0.3, 0.5)), {"commit": "b"}, [])
    assert (first.run_id, again.run_id, again.already_kept) == (1, 1, True)
    assert again.labels == {"commit": "a"}
    stranger = tmp_path / "photos"
    stranger.mkdir()
    (stranger / "cat.jpg").write_bytes(b"")
    assert main(["ledger", str(stranger)]) == 2
    assert "not a ledger: a folder without fold-acceptance's LEDGER file" in (
        capsys.readouterr().err
    )
    identity = orjson.loads((folder / "LEDGER").read_bytes())
    (folder / "LEDGER").write_bytes(orjson.dumps(identity | {"schema": 2}))
    assert main(["ledger", str(folder)]) == 2
    assert "a ledger of schema 2, newer than this fold-acceptance" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_every_command_reads_either_kind(tmp_path, capsys, kind):
    path = f"{tmp_path}/gates.duckdb" if kind == "file" else f"{tmp_path}/gates/"
    for n, rate in enumerate((0.45, 0.46, 0.44, 0.30), start=1):
        keep_run(path, document(rate, (rate - 0.03, rate + 0.03)), {"n": str(n)}, [])
    assert main(["ledger", path, "--check", "A/P", "--json", "-"]) == 1
    (check,) = orjson.loads(capsys.readouterr().out)["checks"]
    assert check["run"] == 4 and check["baseline"]["runs"] == [1, 2, 3]
    assert main(["ledger", path, "--figure", "A/P", "--json", "-"]) == 0
    assert orjson.loads(capsys.readouterr().out)["flagged"] == 1
    assert main(["ledger", path, "--export", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    counted = duckdb.connect().execute(f"SELECT count(*) FROM '{tmp_path}/out/runs.parquet'")
    assert counted.fetchone() == (4,)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    st.one_of(
        st.binary(max_size=200),
        st.dictionaries(
            st.sampled_from(["kind", "schema", "id", "created_at", "created_by"]),
            st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=40)),
        ).map(lambda found: orjson.dumps(found | {"kind": "fold-acceptance ledger"})),
    )
)
def test_any_ledger_file_reads_or_is_refused_by_name(tmp_path, data):
    """A shared folder's LEDGER is outside input: whatever it holds, reading it gives the
    ledger or a refusal naming the file, never another error."""
    folder = tmp_path / "shared"
    folder.mkdir(exist_ok=True)
    (folder / "LEDGER").write_bytes(data)
    try:
        identity = read_identity(folder)
    except InputError as error:
        assert "LEDGER" in str(error) or "schema" in str(error)
    else:
        assert identity is not None and identity["kind"] == "fold-acceptance ledger"
