"""The ledger: keeping runs from the command line, once each, and every refusal."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import orjson
import pytest
from ledger_runs import ARM, STEPS, VLLM, document, fold_document

from fold.cli import main
from fold.ledger.schema import SCHEMA_VERSION
from fold.ledger.store import (
    InputFile,
    keep_run,
    parse_labels,
    read_runs,
)


def snapshot(path: Path) -> str | None:
    """The file's bytes (digested), or None when it does not exist: "nothing written"."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def test_a_kept_run_holds_the_document_labels_and_inputs(tmp_path, capsys):
    ledger = tmp_path / "gates.duckdb"
    out = tmp_path / "run.json"
    code = main([ARM, STEPS, "--vs", f"vllm={VLLM}", "--json", str(out), "--ledger", str(ledger),
                 "--label", "commit=3f2a9c1", "--label", "k=4", "--label", "note=a=b"])  # fmt: skip
    assert code == 0
    assert f"kept in {ledger} as run 1" in capsys.readouterr().err
    written = orjson.loads(out.read_bytes())
    assert written["format"] == "fold-acceptance/5"
    # the whole document, as --json wrote it, read as docs/ledger.md says: from its column
    with duckdb.connect(str(ledger), read_only=True) as connection:
        (kept,) = connection.execute("SELECT document FROM runs WHERE run_id = 1").fetchone()
    assert orjson.loads(kept) == written
    (run,) = read_runs(ledger)
    assert run.labels == {"commit": "3f2a9c1", "k": "4", "note": "a=b"}  # split at the first =
    sizes = {found.role: (found.name, found.bytes) for found in run.inputs}
    assert sizes == {
        "arm": ("our-arm.json", Path(ARM).stat().st_size),
        "log": ("steps.jsonl", Path(STEPS).stat().st_size),
        "vs:vllm": ("vllm-gate-arm.json", Path(VLLM).stat().st_size),
    }
    figures = {(r.figure, r.fold, r.position, r.versus): r for r in run.figures}
    warm = written["warm"]
    rate = figures["accept_rate", "warm", None, None]
    assert rate.value == warm["accepted"] / warm["proposed"]
    assert [rate.ci_low, rate.ci_high] == warm["accept_rate_ci"]
    gap = written["comparison"]["gaps"]["vllm"]
    assert figures["ratio", "all", None, "vllm"].value == gap["ratio"]  # vLLM's counters: all legs
    for position, rate in enumerate(warm["per_position"], start=1):
        assert figures["per_position", "warm", position, None].value == rate


def test_the_same_run_is_not_kept_twice(tmp_path, capsys):
    ledger = str(tmp_path / "gates.duckdb")
    assert main([ARM, STEPS, "--ledger", ledger, "--label", "commit=a"]) == 0
    capsys.readouterr()
    assert main([ARM, STEPS, "--ledger", ledger, "--label", "commit=b"]) == 0
    err = capsys.readouterr().err
    assert "already keeps this run (same inputs, same figures) as run 1" in err
    assert "kept with commit=a" in err
    assert [run.labels for run in read_runs(ledger)] == [{"commit": "a"}]
    # other figures (another seed draws other intervals) are another run
    assert main([ARM, STEPS, "--ledger", ledger, "--seed", "2", "--label", "commit=b"]) == 0
    assert "as run 2" in capsys.readouterr().err
    assert [run.run_id for run in read_runs(ledger)] == [1, 2]


def test_same_figures_from_other_inputs_are_another_run(tmp_path):
    ledger = tmp_path / "gates.duckdb"
    doc = document(0.5, (0.4, 0.6))
    first = keep_run(ledger, doc, {}, [InputFile("arm", "a.json", "a.json", 10)])
    second = keep_run(ledger, doc, {}, [InputFile("arm", "a.json", "a.json", 11)])
    again = keep_run(ledger, doc, {"x": "1"}, [InputFile("arm", "a.json", "a.json", 11)])
    assert (first.run_id, second.run_id, again.run_id) == (1, 2, 2)
    assert (first.already_kept, second.already_kept, again.already_kept) == (False, False, True)


@pytest.mark.parametrize("label", ["commit", "=x", " =x"])
def test_a_label_without_a_key_and_equals_is_refused_before_anything(tmp_path, capsys, label):
    ledger, out = tmp_path / "gates.duckdb", tmp_path / "run.json"
    assert main([ARM, STEPS, "--json", str(out), "--ledger", str(ledger), "--label", label]) == 2
    err = capsys.readouterr().err
    assert f"--label {label!r}: expected KEY=VALUE" in err
    assert not ledger.exists() and not out.exists()


def test_one_key_given_two_values_is_refused():
    with pytest.raises(Exception, match="commit is already given as 'a'"):
        parse_labels(["commit=a", "commit=b"])
    assert parse_labels(["k=7", "k=7"]) == {"k": "7"}


def test_a_label_without_a_ledger_is_refused(capsys):
    assert main([ARM, STEPS, "--label", "k=7"]) == 2
    assert "--label goes with --ledger PATH" in capsys.readouterr().err


def test_a_file_that_is_not_a_ledger_is_refused_and_left_alone(tmp_path, capsys):
    out = tmp_path / "run.json"
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as connection:
        connection.execute("CREATE TABLE measurements (x INTEGER)")
    empty = tmp_path / "empty.duckdb"
    empty.touch()
    for path, why in ((text, "DuckDB cannot open it"),
                      (other, "a DuckDB database without fold-acceptance's tables"),
                      (empty, "an empty file"),
                      (tmp_path, "a folder without fold-acceptance's LEDGER file")):  # fmt: skip
        before = snapshot(path) if path.is_file() else None
        assert main([ARM, STEPS, "--json", str(out), "--ledger", str(path)]) == 2
        err = capsys.readouterr().err
        assert f"{path}: not a ledger: {why}" in err, err
        assert (snapshot(path) if path.is_file() else None) == before
        assert not out.exists()
        assert main(["ledger", str(path)]) == 2
        assert f"{path}: not a ledger" in capsys.readouterr().err


def test_a_ledger_of_a_newer_schema_is_refused_and_left_alone(tmp_path, capsys):
    ledger = tmp_path / "gates.duckdb"
    keep_run(ledger, document(0.5, (0.4, 0.6)), {}, [])
    with duckdb.connect(str(ledger)) as connection:
        connection.execute(
            "UPDATE ledger SET value = ? WHERE key = 'schema'", [str(SCHEMA_VERSION + 1)]
        )
    before = snapshot(ledger)
    out = tmp_path / "run.json"
    assert main([ARM, STEPS, "--json", str(out), "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err
    assert f"a ledger of schema {SCHEMA_VERSION + 1}, newer than this fold-acceptance" in err
    assert snapshot(ledger) == before and not out.exists()
    assert main(["ledger", str(ledger)]) == 2
    assert f"schema {SCHEMA_VERSION + 1}" in capsys.readouterr().err
    assert snapshot(ledger) == before


def test_a_missing_ledger_is_refused_by_the_reader_and_not_created(tmp_path, capsys):
    ledger = tmp_path / "none.duckdb"
    assert main(["ledger", str(ledger)]) == 2
    assert "no such ledger" in capsys.readouterr().err
    assert not ledger.exists()
    assert main([ARM, STEPS, "--ledger", str(tmp_path / "no" / "dir.duckdb")]) == 2
    assert "no folder" in capsys.readouterr().err


def test_ledger_as_the_first_argument_is_the_command_and_dot_slash_is_the_arm(
    tmp_path, capsys, monkeypatch
):
    """The exact rule: a first argument of exactly "ledger" is the subcommand, always; an arm
    record named ledger is reached as ./ledger (or any other spelling of its path)."""
    monkeypatch.chdir(tmp_path)
    Path("ledger").write_bytes(Path(ARM).read_bytes())
    assert main(["./ledger", STEPS, "--json", "-"]) == 0
    folded = orjson.loads(capsys.readouterr().out)
    assert folded["warm"]["steps"] > 0
    # "ledger" first: the subcommand, which finds no ledger in the arm record and says how to
    # fold it instead
    assert main(["ledger", STEPS]) == 2
    err = capsys.readouterr().err
    assert "not a ledger" in err and "To fold an arm record named ledger, name it ./ledger" in err
    assert main(["ledger"]) == 2
    assert "name it ./ledger" in capsys.readouterr().err
    # anywhere but first, "ledger" is a path like any other
    assert main(["--quiet", "ledger", STEPS, "--json", "-"]) == 0
    assert orjson.loads(capsys.readouterr().out) == folded


def test_the_run_list_shows_every_kept_run(tmp_path, capsys):
    ledger = str(tmp_path / "gates.duckdb")
    for seed in (1, 2):
        assert main([ARM, STEPS, "--ledger", ledger, "--seed", str(seed),
                     "--label", f"seed={seed}"]) == 0  # fmt: skip
    first = fold_document(tmp_path, capsys, "--seed", "1")
    capsys.readouterr()
    assert main(["ledger", ledger]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["run", "kept", "(UTC)"]
    assert lines[2].startswith("1 ") and "seed=1" in lines[2] and "our-arm.json" in lines[2]
    assert f"{100 * first['warm']['accept_rate']:.1f}%" in lines[2]
    assert lines[3].startswith("2 ") and "seed=2" in lines[3]
    assert lines[-1] == "2 runs kept (warm legs' figures, 95% intervals)"
    assert main(["ledger", ledger, "--json", "-"]) == 0
    listing = orjson.loads(capsys.readouterr().out)
    assert [run["labels"] for run in listing["runs"]] == [{"seed": "1"}, {"seed": "2"}]
    assert listing["runs"][0]["accept_rate_ci"] == first["warm"]["accept_rate_ci"]
    assert main(["ledger", ledger, "--where", "seed=2", "--json", "-"]) == 0
    assert [run["run"] for run in orjson.loads(capsys.readouterr().out)["runs"]] == [2]
    assert main(["ledger", ledger, "--by", "seed"]) == 2
    assert "--by groups a figure's history: give --figure too" in capsys.readouterr().err


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.25])
def test_a_damaged_ledger_is_refused_by_name_without_a_traceback(tmp_path, capsys, keep):
    ledger = tmp_path / "gates.duckdb"
    for value in (0.3, 0.4):
        keep_run(ledger, document(value, (value - 0.1, value + 0.1)), {}, [])
    data = ledger.read_bytes()
    ledger.write_bytes(data[: int(len(data) * keep)])  # cut short, as a full disk leaves it
    for argv in (["ledger", str(ledger)], ["ledger", str(ledger), "--figure", "A/P"],
                 [ARM, STEPS, "--ledger", str(ledger)]):  # fmt: skip
        code = main(argv)
        err = capsys.readouterr().err
        if code == 0:  # the cut took only free blocks: then both runs read back whole
            rates = [next(r.value for r in run.figures if r.figure == "accept_rate")
                     for run in read_runs(ledger)]  # fmt: skip
            assert rates[:2] == [0.3, 0.4]
            continue
        assert code == 2, err
        assert str(ledger) in err and "this is a bug" not in err and "Traceback" not in err


def test_without_the_ledger_extra_the_run_is_refused_before_the_fold(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "duckdb", None)  # import duckdb fails
    ledger, out = tmp_path / "gates.duckdb", tmp_path / "run.json"
    assert main([ARM, STEPS, "--json", str(out), "--ledger", str(ledger)]) == 2
    assert "pip install 'fold-acceptance[ledger]'" in capsys.readouterr().err
    assert not ledger.exists() and not out.exists()
    assert main([ARM, STEPS, "--ledger", str(ledger), "--ledger-wait", "-1"]) == 2
    assert "--ledger-wait must be 0 or more seconds" in capsys.readouterr().err


def test_a_ledger_whose_table_has_other_columns_is_refused_by_table(tmp_path, capsys):
    path = tmp_path / "gates.duckdb"
    assert main([ARM, STEPS, "--ledger", str(path)]) == 0
    capsys.readouterr()
    with duckdb.connect(str(path)) as connection:
        connection.execute("ALTER TABLE figures DROP COLUMN ci_high")
    before = snapshot(path)
    assert main([ARM, STEPS, "--ledger", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        f"{path}: not a ledger: its table figures has the columns run_id, fold, figure, "
        "position, versus, value, ci_low, not fold-acceptance's run_id, fold, figure, "
        "position, versus, value, ci_low, ci_high" in err
    ), err
    assert snapshot(path) == before
    assert main(["ledger", str(path)]) == 2
    assert "its table figures has the columns" in capsys.readouterr().err


def test_a_ledger_whose_column_has_another_type_is_refused_by_column(tmp_path, capsys):
    path = tmp_path / "gates.duckdb"
    assert main([ARM, STEPS, "--ledger", str(path), "--bootstrap", "0"]) == 0
    capsys.readouterr()
    with duckdb.connect(str(path)) as connection:  # the same names, the figures kept as text
        connection.execute("ALTER TABLE figures ALTER value TYPE VARCHAR")
        connection.execute("ALTER TABLE inputs ALTER bytes TYPE INTEGER")
    before = snapshot(path)
    assert main([ARM, STEPS, "--ledger", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: not a ledger: in its table inputs, bytes is INTEGER, not BIGINT" in err
    assert snapshot(path) == before
    assert main(["ledger", str(path)]) == 2
    assert "in its table inputs, bytes is INTEGER, not BIGINT" in capsys.readouterr().err


def test_a_ledger_on_a_read_only_file_system_says_read_only(tmp_path, capsys):
    """A real read-only mount (a tmpfs remounted read-only, which needs root): keeping a run
    in a ledger file or folder there says read-only, not "not a ledger", and both read."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a file system needs root")
    mount = tmp_path / "mount"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mount)],
                          capture_output=True, text=True)  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"root, but this machine refuses a mount: {made.stderr.strip()}")
    try:
        path, folder = mount / "gates.duckdb", f"{mount}/gates/"
        assert main([ARM, STEPS, "--ledger", str(path)]) == 0
        assert main([ARM, STEPS, "--ledger", folder]) == 0
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        capsys.readouterr()
        assert main([ARM, STEPS, "--seed", "2", "--ledger", str(path)]) == 2
        err = capsys.readouterr().err
        assert f"{path}: the ledger is read-only here (" in err and "not a ledger" not in err
        assert main([ARM, STEPS, "--seed", "2", "--ledger", folder]) == 2
        err = capsys.readouterr().err
        assert "cannot write to the ledger folder: Read-only file system" in err
        assert main(["ledger", str(path), "--json", "-"]) == 0
        assert main(["ledger", folder, "--json", "-"]) == 0
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _keep_as_another_user(path: Path) -> str:
    """Keep a run in ``path`` as a user who may read but not write it; returns the refusal.

    Root writes any file whatever its mode, so as root the append runs in a child that has
    given up root, as an ordinary user would run it."""
    import os

    path.chmod(0o444)
    if os.geteuid() != 0:
        return _keep_refusal(path)
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            os.close(reader)
            os.setgid(65534)
            os.setuid(65534)
            try:
                said = _keep_refusal(path)
            except BaseException as error:  # the parent's assertion shows what went wrong
                said = f"{type(error).__name__}: {error}"
            os.write(writer, said.encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(child, 0)
    return text


def _keep_refusal(path: Path) -> str:
    from fold.errors import InputError
    from fold.ledger.store import keep_run

    try:
        keep_run(path, document(0.5, (0.4, 0.6)), {}, [])
    except InputError as error:
        return str(error)
    return "kept"


def test_a_ledger_this_user_may_only_read_is_read_and_its_append_refused_as_such(capsys):
    import tempfile

    # Not tmp_path: pytest's own folder is closed to other users.
    with tempfile.TemporaryDirectory() as folder:
        Path(folder).chmod(0o755)
        _read_only_ledger(Path(folder) / "gates.duckdb", capsys)


def _read_only_ledger(path: Path, capsys) -> None:
    assert main([ARM, STEPS, "--ledger", str(path)]) == 0
    before = snapshot(path)
    refusal = _keep_as_another_user(path)
    assert refusal.startswith(f"{path}: cannot write to the ledger: permission denied"), refusal
    assert "not a ledger" not in refusal
    assert snapshot(path) == before
    capsys.readouterr()
    assert main(["ledger", str(path)]) == 0


def test_a_saved_document_of_an_earlier_format_is_kept_and_an_older_one_refused():
    """Formats 4 and 5 moved only what the ledger does not keep (the requests' rows, the
    windows' layout), so a saved format-3 or format-4 document is kept as it is."""
    from fold.errors import InputError
    from fold.ledger.figures import check_document, figure_rows

    for kept in ("fold-acceptance/3", "fold-acceptance/4", "fold-acceptance/5"):
        saved = {**document(0.5, (0.4, 0.6)), "format": kept}
        assert check_document(saved) is saved
        assert [(row.fold, row.figure, row.value) for row in figure_rows(saved)][:2] == [
            ("warm", "accept_rate", 0.5),
            ("warm", "output_throughput_tok_s", 100.0),
        ]
    kept = "'fold-acceptance/3', 'fold-acceptance/4' and 'fold-acceptance/5' documents"
    with pytest.raises(InputError, match=f"'fold-acceptance/2' document; this ledger keeps {kept}"):
        check_document({**document(0.5, None), "format": "fold-acceptance/2"})


def test_a_run_compared_with_another_run_of_ours_is_kept(tmp_path, capsys):
    """The inputs the ledger records include a --vs NAME:ours arm and its --vs-log: listing
    them once took ':ours' for an engine's kind and refused the run after its fold."""
    runs = Path(__file__).resolve().parent.parent / "fixtures" / "ours-vs-ours"
    ledger = tmp_path / "gates.duckdb"
    argv = [str(runs / "after" / "our-arm.json"), str(runs / "after" / "steps.jsonl"),
            f"--vs=before:ours={runs / 'before' / 'our-arm.json'}",
            f"--vs-log=before={runs / 'before' / 'steps.jsonl'}", "--bootstrap", "20",
            "--ledger", str(ledger), "--quiet"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["ledger", str(ledger), "--json", "-"]) == 0
    (run,) = orjson.loads(capsys.readouterr().out)["runs"]
    assert run["inputs"] == 4  # the arm, its log, the other run's arm and its log
    assert run["versus"] == ["before"]
