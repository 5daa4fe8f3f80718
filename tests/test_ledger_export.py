"""The ledger's Parquet export: the figures of each run's JSON, and the documented query over
many exports."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import duckdb
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_runs import ARM, STEPS, VLLM, document
from position_reference import reference

from fold.cli import main
from fold.ledger.store import keep_run, read_runs

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {
    "ledger": ["ledger_id", "schema", "created_at", "created_by", "runs", "exported_at"],
    "runs": ["ledger_id", "run_id", "kept_at", "digest", "format", "tool_version", "document"],
    "labels": ["ledger_id", "run_id", "key", "value"],
    "inputs": ["ledger_id", "run_id", "role", "path", "name", "bytes"],
    "figures": ["ledger_id", "run_id", "fold", "figure", "position", "versus", "value",
                "ci_low", "ci_high"],
}  # fmt: skip
"""The schema docs/ledger.md documents."""


def query(sql: str, *parameters) -> list[tuple]:
    with duckdb.connect(":memory:") as connection:
        return connection.execute(sql, list(parameters)).fetchall()


def figures_by_hand(doc: dict) -> dict[tuple, tuple]:
    """The figures of one run's JSON document, read from it directly: (fold, figure,
    position, versus) -> (value, ci_low, ci_high)."""
    found = {}
    # The per-position intervals are drawn when the run is kept, so the document has none to
    # compare with: they come from a plain bootstrap of the legs (close, not to the bit).
    legs = doc["legs"]
    strata = [[i for i, leg in enumerate(legs) if leg["warm"]],
              [i for i, leg in enumerate(legs) if not leg["warm"]]]  # fmt: skip
    histograms = [leg["histogram"] for leg in legs]
    drawn = {}
    for name in ("per_position", "per_position_conditional"):
        conditional = name.endswith("conditional")
        drawn["warm", name] = reference([histograms[i] for i in strata[0]], conditional=conditional)
        drawn["all", name] = reference(histograms, conditional=conditional, strata=strata)
    for fold in ("warm", "all"):
        block = doc[fold]
        for name in ("accept_rate", "mean_acceptance_length", "output_throughput_tok_s",
                     "completion_tokens_per_step", "step_rate"):  # fmt: skip
            interval = block.get(f"{name}_ci") or [None, None]
            found[fold, name, None, None] = (block[name], *interval)
        for name in ("per_position", "per_position_conditional", "per_position_of_proposed"):
            for index, rate in enumerate(block[name]):
                interval = (drawn.get((fold, name)) or [None] * (index + 1))[index]
                found[fold, name, index + 1, None] = (rate, *(interval or (None, None)))
    for arm, gap in (doc.get("comparison") or {}).get("gaps", {}).items():
        fold = "all" if gap["populations"]["ours"] == "all_legs" else "warm"
        for name in ("ratio", "acceptance_factor", "speed_factor"):
            found[fold, name, None, arm] = (gap[name], *gap[f"{name}_ci"])
    return found


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A ledger of two real runs (one compared with vLLM) and the --json each wrote."""
    folder = tmp_path_factory.mktemp("export")
    ledger = folder / "gates.duckdb"
    documents = []
    for index, extra in enumerate((["--vs", f"vllm={VLLM}"], ["--seed", "9"])):
        out = folder / f"run{index}.json"
        code = main([ARM, STEPS, *extra, "--json", str(out), "--ledger", str(ledger),
                     "--label", f"commit=c{index}"])  # fmt: skip
        assert code == 0
        documents.append(orjson.loads(out.read_bytes()))
    return ledger, documents


def test_the_export_reads_back_in_duckdb_to_each_runs_json(two_runs, tmp_path, capsys):
    ledger, documents = two_runs
    out = tmp_path / "export"
    assert main(["ledger", str(ledger), "--export", str(out)]) == 0
    assert "exported 2 runs" in capsys.readouterr().err
    for table, columns in SCHEMA.items():
        described = query(f"DESCRIBE SELECT * FROM read_parquet('{out}/{table}.parquet')")
        assert [row[0] for row in described] == columns
    for run_id, doc in enumerate(documents, start=1):
        rows = query(
            f"SELECT fold, figure, position, versus, value, ci_low, ci_high FROM "
            f"read_parquet('{out}/figures.parquet') WHERE run_id = ?",
            run_id,
        )
        exported = {tuple(row[:4]): tuple(row[4:]) for row in rows}
        assert len(rows) == len(exported)  # one row per figure
        by_hand = figures_by_hand(doc)
        assert exported.keys() == by_hand.keys()
        for key, found in exported.items():
            if key[1] in ("per_position", "per_position_conditional"):
                assert found[0] == by_hand[key][0]  # the rate, to the bit
                # two bootstraps (the fold's 1000 draws, the plain one's 4000) agree to noise
                assert found[1:] == pytest.approx(by_hand[key][1:], abs=0.03), key
            else:
                assert found == by_hand[key], key  # the document's own figure, to the bit
        (kept,) = query(f"SELECT document FROM read_parquet('{out}/runs.parquet') "
                        "WHERE run_id = ?", run_id)  # fmt: skip
        assert orjson.loads(kept[0]) == doc
        labels = query(f"SELECT key, value FROM read_parquet('{out}/labels.parquet') "
                       "WHERE run_id = ?", run_id)  # fmt: skip
        assert labels == [("commit", f"c{run_id - 1}")]
    names = query(f"SELECT DISTINCT run_id, name, bytes FROM read_parquet('{out}/inputs.parquet') "
                  "WHERE role = 'log'")  # fmt: skip
    assert sorted(names) == [(1, "steps.jsonl", Path(STEPS).stat().st_size),
                             (2, "steps.jsonl", Path(STEPS).stat().st_size)]  # fmt: skip
    ((ids, runs),) = query(f"SELECT count(DISTINCT ledger_id), sum(runs) FROM "
                           f"read_parquet('{out}/ledger.parquet')")  # fmt: skip
    assert (ids, runs) == (1, 2)


def documented_query() -> str:
    """The SQL block under "Reading many exports at once" in docs/ledger.md."""
    text = (ROOT / "docs" / "ledger.md").read_text()
    section = text.split("### Reading many exports at once", 1)[1]
    return re.search(r"```sql\n(.*?)```", section, re.DOTALL).group(1)


def test_the_documented_query_reads_many_exports_at_once(tmp_path, monkeypatch):
    machines = {"gate-a": [(0.40, "a1"), (0.45, "a2")], "gate-b": [(0.50, "b1")]}
    for machine, runs in machines.items():
        ledger = tmp_path / f"{machine}.duckdb"
        for value, commit in runs:
            keep_run(ledger, document(value, (value - 0.05, value + 0.05)),
                     {"commit": commit}, [])  # fmt: skip
        assert main(["ledger", str(ledger), "--export", str(tmp_path / "exports" / machine)]) == 0
    monkeypatch.chdir(tmp_path)  # the query names exports/ relative to where it runs
    rows = query(documented_query())
    assert [(row[1], row[3], row[4]) for row in rows] == [
        (1, "a1", 0.40), (2, "a2", 0.45), (1, "b1", 0.50)
    ]  # fmt: skip
    assert [(row[5], row[6]) for row in rows] == [
        pytest.approx((value - 0.05, value + 0.05)) for value in (0.40, 0.45, 0.50)
    ]
    assert len({row[0] for row in rows}) == 2  # each machine's ledger has its own id


def test_an_export_of_an_empty_ledger_has_the_schema_and_no_rows(tmp_path):
    ledger = tmp_path / "gates.duckdb"
    duckdb.connect(str(ledger)).close()  # what a first append killed before its commit leaves
    assert main(["ledger", str(ledger), "--export", str(tmp_path / "out")]) == 0
    for table, columns in SCHEMA.items():
        path = tmp_path / "out" / f"{table}.parquet"
        assert [row[0] for row in query(f"DESCRIBE SELECT * FROM read_parquet('{path}')")] == (
            columns
        )
        expected = 1 if table == "ledger" else 0
        assert query(f"SELECT count(*) FROM read_parquet('{path}')") == [(expected,)]


def test_an_export_onto_a_file_is_refused(tmp_path, capsys):
    ledger = tmp_path / "gates.duckdb"
    keep_run(ledger, document(0.5, (0.4, 0.6)), {}, [])
    target = tmp_path / "file"
    target.write_text("mine\n")
    assert main(["ledger", str(ledger), "--export", str(target)]) == 2
    assert "a file, not a folder" in capsys.readouterr().err
    assert target.read_text() == "mine\n"


finite = st.floats(-1e6, 1e6, allow_nan=False)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(finite, st.one_of(st.none(), st.tuples(finite, finite)),
                          st.lists(finite, max_size=4)), min_size=1, max_size=3))  # fmt: skip
def test_every_kept_figure_comes_back_from_parquet(tmp_path_factory, drawn):
    folder = tmp_path_factory.mktemp("roundtrip")
    ledger = folder / "gates.duckdb"
    for value, interval, positions in drawn:
        keep_run(ledger, document(value, interval, per_position=positions or None), {}, [])
    assert main(["ledger", str(ledger), "--export", str(folder / "out")]) == 0
    rows = query(
        f"SELECT run_id, fold, figure, position, versus, value, ci_low, ci_high "
        f"FROM read_parquet('{folder}/out/figures.parquet')"
    )
    kept = [
        (run.run_id, r.fold, r.figure, r.position, r.versus, r.value, r.ci_low, r.ci_high)
        for run in read_runs(ledger)
        for r in run.figures
    ]
    assert sorted(rows, key=repr) == sorted(kept, key=repr)


def test_an_export_that_fails_partway_leaves_the_previous_export_whole(
    tmp_path, capsys, monkeypatch
):
    import fold.ledger.export as export

    ledger = tmp_path / "gates.duckdb"
    keep_run(ledger, document(0.5, (0.4, 0.6)), {}, [])
    out = tmp_path / "out"
    assert main(["ledger", str(ledger), "--export", str(out)]) == 0
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    assert sorted(before) == sorted(f"{table}.parquet" for table in SCHEMA)
    keep_run(ledger, document(0.6, (0.5, 0.7)), {}, [])
    # The fourth table's query fails, after three tables were written.
    broken = dict(export.EXPORTED, inputs="SELECT * FROM no_such_table")
    monkeypatch.setattr(export, "EXPORTED", broken)
    capsys.readouterr()
    assert main(["ledger", str(ledger), "--export", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--export {out / 'inputs.parquet'}: cannot write" in err, err
    assert f"nothing in {out} was changed" in err
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert len(list((tmp_path / ".out.exports").iterdir())) == 1  # the failed one is gone
    monkeypatch.undo()
    assert main(["ledger", str(ledger), "--export", str(out)]) == 0
    runs = out / "runs.parquet"
    assert query(f"SELECT count(*) FROM read_parquet('{runs}')") == [(2,)]


def test_an_export_replaces_its_five_files_at_once(tmp_path):
    """DIR is a link moved in one rename: after each export it names a folder holding one
    whole export; the export before stays for a reader inside it, older ones go."""
    ledger = tmp_path / "gates.duckdb"
    out = tmp_path / "out"
    seen = []
    for n in range(1, 4):
        keep_run(ledger, document(0.4 + n / 100, (0.3, 0.6)), {}, [])
        assert main(["ledger", str(ledger), "--export", str(out)]) == 0
        assert out.is_symlink()
        folder = out.resolve()
        seen.append(folder)
        assert query(f"SELECT runs FROM read_parquet('{folder}/ledger.parquet')") == [(n,)]
        assert query(f"SELECT count(*) FROM read_parquet('{folder}/runs.parquet')") == [(n,)]
    assert sorted(p.name for p in (tmp_path / ".out.exports").iterdir()) == sorted(
        p.name for p in seen[1:]
    )


def test_an_export_made_before_into_a_real_folder_is_replaced_and_others_refused(tmp_path, capsys):
    ledger = tmp_path / "gates.duckdb"
    keep_run(ledger, document(0.5, (0.4, 0.6)), {}, [])
    out = tmp_path / "out"
    out.mkdir()
    for table in SCHEMA:  # what an export of an earlier version left: five plain files
        (out / f"{table}.parquet").write_bytes(b"old")
    assert main(["ledger", str(ledger), "--export", str(out)]) == 0
    assert out.is_symlink()
    assert query(f"SELECT count(*) FROM read_parquet('{out}/runs.parquet')") == [(1,)]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    capsys.readouterr()
    assert main(["ledger", str(ledger), "--export", str(mine)]) == 2
    assert "the folder holds other files than an export (notes.txt)" in capsys.readouterr().err
    assert (mine / "notes.txt").read_text() == "mine\n"


def test_a_reader_resolving_the_folder_once_never_reads_a_mix(tmp_path):
    """Exports of a ledger that grows between them, read by another process as fast as it
    can: each read's five files agree (the ledger's run count is the runs file's rows, and
    every figure belongs to a run of it)."""
    import subprocess
    import sys

    ledger = tmp_path / "gates.duckdb"
    out = tmp_path / "out"
    keep_run(ledger, document(0.40, (0.3, 0.5)), {}, [])
    assert main(["ledger", str(ledger), "--export", str(out)]) == 0
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(out)], stdout=subprocess.PIPE, text=True
    )
    for n in range(2, 7):
        keep_run(ledger, document(0.40 + n / 100, (0.3, 0.6)), {}, [])
        assert main(["ledger", str(ledger), "--export", str(out)]) == 0
    (tmp_path / "stop").write_text("")
    output, _ = reader.communicate(timeout=120)
    assert reader.returncode == 0, output
    reads = [line.split() for line in output.splitlines()]
    assert len(reads) >= 2 and all(a == b for _, a, b in reads), reads


READER = """
import os, sys, time, duckdb
out = sys.argv[1]
stop = os.path.join(os.path.dirname(out), "stop")
connection = duckdb.connect()
while not os.path.exists(stop):
    folder = os.path.realpath(out)
    try:
        (said,) = connection.execute(f"SELECT runs FROM '{folder}/ledger.parquet'").fetchone()
        (rows,) = connection.execute(f"SELECT count(*) FROM '{folder}/runs.parquet'").fetchone()
        (strays,) = connection.execute(
            f"SELECT count(*) FROM '{folder}/figures.parquet' WHERE run_id NOT IN "
            f"(SELECT run_id FROM '{folder}/runs.parquet')").fetchone()
    except duckdb.IOException:
        continue  # an export two swaps old, removed while this read was in it
    print("read", said, rows + strays, flush=True)
"""


def test_exports_in_one_second_keep_the_one_just_replaced(tmp_path, monkeypatch):
    """Four exports within one second, the random part of their names falling: the folder
    DIR named before each export (a reader may be in it) is still there after it."""
    import uuid

    import fold.ledger.export as export_module

    ledger = tmp_path / "gates.duckdb"
    out = tmp_path / "out"
    keep_run(ledger, document(0.4, (0.3, 0.5)), {}, [])
    falling = iter(uuid.UUID(int=(9 - n) << 124) for n in range(9))
    monkeypatch.setattr(export_module.uuid, "uuid4", lambda: next(falling))
    frozen = datetime(2026, 12, 3, 12, 0, 0)

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            return frozen.replace(tzinfo=tz)

    monkeypatch.setattr(export_module, "datetime", Clock)
    before = None
    for _ in range(4):
        assert main(["ledger", str(ledger), "--export", str(out)]) == 0
        if before is not None:
            assert before.is_dir()  # the export just replaced stays for its readers
        before = out.resolve()
    assert len(list((tmp_path / ".out.exports").iterdir())) == 2
