"""A ledger folder read at a bad moment or with damaged files: a run is read whole or not at
all, and what is not read is named, never a crash."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from ledger_runs import document

import fold.ledger.folder as folder_module
from fold.cli import main
from fold.errors import InputError
from fold.ledger.store import keep_run, read_runs


def test_a_run_committed_while_the_folder_is_listed_is_read_whole(tmp_path, monkeypatch):
    """A writer commits a whole run (all four files) while a reader lists the folder, at every
    moment between the reader's listings: the reader sees it with its labels and figures, or
    not at all."""
    for moment in ("runs", "labels", "inputs", "figures"):
        folder = tmp_path / moment
        keep_run(f"{folder}/", document(0.4, (0.3, 0.5)), {"n": "1"}, [])
        real = folder_module._run_files
        state = {"done": False}

        def listing(path: Path, moment=moment, folder=folder, state=state, real=real):
            if path.parent.name == moment and not state["done"]:
                state["done"] = True
                keep_run(folder, document(0.5, (0.4, 0.6)), {"n": "2"}, [])
            return real(path)

        monkeypatch.setattr(folder_module, "_run_files", listing)
        runs = read_runs(folder)
        monkeypatch.setattr(folder_module, "_run_files", real)
        assert state["done"]
        for run in runs:  # six figure rows and one label, by the fixture
            assert (len(run.figures), run.labels) == (6, {"n": str(run.run_id)}), moment
        assert len(read_runs(folder)) == 2


@pytest.mark.parametrize("missing", ["kind", "schema", "id", "created_at", "created_by"])
def test_a_ledger_file_without_a_key_is_refused_by_name(tmp_path, capsys, missing):
    folder = tmp_path / "gates"
    keep_run(f"{folder}/", document(0.4, (0.3, 0.5)), {"n": "1"}, [])
    identity = orjson.loads((folder / "LEDGER").read_bytes())
    del identity[missing]
    (folder / "LEDGER").write_bytes(orjson.dumps(identity))
    with pytest.raises(InputError, match="LEDGER"):
        read_runs(folder)
    assert main(["ledger", f"{folder}/"]) == 2
    err = capsys.readouterr().err
    assert "LEDGER" in err and missing in err and "this is a bug" not in err
    with pytest.raises(InputError, match="LEDGER"):
        keep_run(folder, document(0.5, (0.4, 0.6)), {"n": "2"}, [])


@pytest.mark.parametrize("text", [b"abc", b"999", b"", b"-1", b"\xff\xfe"])
def test_a_damaged_digest_file_refuses_the_keep_and_names_the_file(tmp_path, text):
    folder = tmp_path / "gates"
    for n in range(1, 4):
        keep_run(f"{folder}/", document(0.4 + n / 100, (0.3, 0.6)), {"n": str(n)}, [])
    (digest,) = [p for p in (folder / "digests").iterdir() if not p.name.startswith(".")][:1]
    digest.write_bytes(text)
    # keep the run whose digest this is again: which one it is does not matter, every one of
    # the three digests is tried until the damaged one is met
    for n in range(1, 4):
        try:
            kept = keep_run(folder, document(0.4 + n / 100, (0.3, 0.6)), {"n": str(n)}, [])
        except InputError as error:
            assert digest.name in str(error) and "damaged" in str(error)
            break
        assert kept.already_kept and kept.run_id == n
    else:
        raise AssertionError("the damaged digest was never met")
    assert len(read_runs(folder)) == 3  # nothing kept, nothing lost


def test_a_damaged_or_foreign_run_file_costs_its_run_only(tmp_path, capsys):
    folder = tmp_path / "gates"
    for n in range(1, 6):
        keep_run(f"{folder}/", document(0.4 + n / 100, (0.3, 0.6)), {"n": str(n)}, [])
    partition = next((folder / "runs").glob("ledger_id=*")).name
    (folder / "figures" / partition / "run-2.parquet").write_bytes(b"not parquet at all")
    # a Parquet file with other columns, put where run 3's labels go
    (folder / "labels" / partition / "run-3.parquet").write_bytes(
        (folder / "ledger" / partition / "ledger.parquet").read_bytes()
    )
    # run 1's labels copied as run 4's: another run's rows
    (folder / "labels" / partition / "run-4.parquet").write_bytes(
        (folder / "labels" / partition / "run-1.parquet").read_bytes()
    )
    not_read: list[str] = []
    runs = read_runs(folder, unfinished=not_read)
    assert [(run.run_id, run.labels) for run in runs] == [(1, {"n": "1"}), (5, {"n": "5"})]
    assert all(len(run.figures) == 6 for run in runs)
    for n in (2, 3, 4):
        assert any(f"run {n} not read" in entry for entry in not_read), (n, not_read)
    assert (
        main(["ledger", str(folder), "--check", "A/P", "--json", "-"]) == 3
    )  # too few: two runs left
    err = capsys.readouterr().err
    assert "figures/" in err and "run-2.parquet (run 2 not read" in err
    assert "this is a bug" not in err and "Traceback" not in err


def test_a_run_kept_again_whose_labels_file_is_damaged_is_refused_by_name(tmp_path, capsys):
    """Found by the ledger fuzz target (fuzz/regressions/ledger/damaged-labels-kept-again)."""
    folder = tmp_path / "gates"
    keep_run(f"{folder}/", document(0.4, (0.3, 0.5)), {"n": "1"}, [])
    (labels,) = (folder / "labels").glob("ledger_id=*/run-1.parquet")
    labels.write_bytes(b"\xff" * 70)
    with pytest.raises(InputError, match="labels file is damaged") as refused:
        keep_run(folder, document(0.4, (0.3, 0.5)), {"n": "1"}, [])
    assert str(labels) in str(refused.value)


def test_a_folder_whose_ledger_file_was_replaced_says_so(tmp_path, capsys):
    """Runs kept under one id, then a LEDGER of another id (removed and made again by a new
    writer): not 'no run kept yet', but what happened and what to do."""
    folder = tmp_path / "gates"
    for n in (1, 2):
        keep_run(f"{folder}/", document(0.4 + n / 100, (0.3, 0.6)), {"n": str(n)}, [])
    identity = orjson.loads((folder / "LEDGER").read_bytes())
    replaced = identity | {"id": "00000000-0000-4000-8000-000000000000"}
    (folder / "LEDGER").write_bytes(orjson.dumps(replaced))
    assert main(["ledger", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"holds runs of another ledger (2 in runs/ledger_id={identity['id']})" in err
    assert "LEDGER file was replaced or removed" in err and "no run kept yet" not in err
