"""The sums file (--sums, docs/sums.md): a row per request, read back by polars and DuckDB.

Its rows are held to the reference reader's requests (tests/reference.py, written apart from
the fold), and docs/sums.md's DuckDB queries, run as written over the files of a log split
across hosts, to the fold of the whole log."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest

from fold.cli import main as cli
from fold.folding.host_sums import FILE_SCHEMA, LENGTH_ROW, POSITION_ROW
from fold.inputs.sums_file import SUMS_FORMAT, SUMS_FORMAT_KEY
from tests.reference import reference_fold

ROOT = Path(__file__).resolve().parents[1]
ARM = ROOT / "fixtures" / "our-arm.json"
STEPS = ROOT / "fixtures" / "steps.jsonl"
GATE = ROOT / "fixtures" / "gate-example"
DOC = ROOT / "docs" / "sums.md"


def fold(tmp_path: Path, logs: list[Path], name: str, *extra: str) -> tuple[dict, pl.DataFrame]:
    out, sums = tmp_path / f"{name}.json", tmp_path / f"{name}.parquet"
    argv = [str(ARM), *map(str, logs), "--json", str(out), "--sums", str(sums), "--quiet"]
    assert cli([*argv, *extra]) == 0
    return json.loads(out.read_bytes()), pl.read_parquet(sums)


def seconds(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e9


CADENCE_COLUMNS = {
    "lines": ("cadence_lines", 1),
    "intervals": ("intervals", 1),
    "first_step_s": ("first_step_ns", 1e9),
    "decode_s": ("decode_ns", 1e9),
    "tail_s": ("tail_ns", 1e9),
    "interval_median_s": ("interval_median_ns", 1e9),
    "interval_p90_s": ("interval_p90_ns", 1e9),
    "interval_p99_s": ("interval_p99_ns", 1e9),
    "interval_max_s": ("interval_max_ns", 1e9),
    "stalls": ("stalls", 1),
    "stall_s": ("stall_ns", 1e9),
}
"""Each figure of the reference's request cadence, and the file's column it is in (the
file in nanoseconds, the reference in seconds)."""


def file_rows(table: pl.DataFrame) -> list[dict]:
    return [
        {
            **{key: row[key] for key in ("leg", "run", "warm", "w", "seq", "lines", "steps",
                                         "proposed", "accepted")},
            "cadence": {
                name: None if row[column] is None else row[column] / scale
                for name, (column, scale) in CADENCE_COLUMNS.items()
            },
        }
        for row in table.iter_rows(named=True)
    ]  # fmt: skip


def reference_rows(expected: dict) -> list[dict]:
    return [
        {
            "leg": leg["index"],
            "run": leg["run"],
            "warm": leg["warm"],
            **{key: request[key] for key in ("w", "seq", "lines", "steps", "proposed",
                                             "accepted")},
            "cadence": {name: request["cadence"][name] for name in CADENCE_COLUMNS},
        }
        for leg in expected["legs"]
        for request in leg["requests"]
    ]  # fmt: skip


def test_every_request_of_the_reference_is_a_row_with_its_sums_and_cadence(tmp_path, capsys):
    _, table = fold(tmp_path, [STEPS], "whole")
    record = json.loads(ARM.read_text())
    expected = reference_fold(record, lambda leg: leg["run"] > 1, "run > 1",
                              [(str(STEPS), STEPS.read_bytes())])  # fmt: skip
    rows = reference_rows(expected)
    assert len(rows) == 27  # the fixture's 27 requests (3 writers of 9), each in one leg
    assert file_rows(table) == rows
    assert table["sid"].null_count() == table.height  # the fixture's ids are integers
    # the leg's start to the first step, decoding and the last step to the end fill the window
    assert (
        table["first_step_ns"] + table["decode_ns"] + table["tail_ns"] == table["window_ns"]
    ).all()
    assert table["stall_ns"].drop_nulls().len() > 0  # the comparison saw a stall's time


def test_each_requests_durations_are_the_sums_of_its_lines(tmp_path, capsys):
    """A log whose lines carry draft_ns and verify_ns (every third line only verify_ns):
    each request's row holds the sums over its lines, counted by hand from the lines."""
    lines = [json.loads(line) for line in STEPS.read_bytes().splitlines()]
    expected: dict[tuple[str, int], list[int]] = {}
    for number, step in enumerate(lines):
        step["verify_ns"] = 1000 + number
        if number % 3:
            step["draft_ns"] = 7 * number
        found = expected.setdefault((step["w"], step["seq"]), [0, 0, 0, 0, 0])
        found[0] += "draft_ns" in step  # timed: both keys
        found[1] += "draft_ns" in step
        found[2] += 1
        found[3] += step.get("draft_ns", 0)
        found[4] += step["verify_ns"]
    log = tmp_path / "timed.jsonl"
    log.write_text("".join(json.dumps(step) + "\n" for step in lines))
    _, table = fold(tmp_path, [log], "timed")
    assert table["lines"].sum() == len(lines)  # every line in a leg: each request whole
    found = {
        (row["w"], row["seq"]): [row["timed_steps"], row["draft_steps"], row["verify_steps"],
                                 row["draft_ns"], row["verify_ns"]]
        for row in table.iter_rows(named=True)
    }  # fmt: skip
    assert found == expected


def test_the_file_names_its_format_and_keeps_the_documented_columns(tmp_path, capsys):
    _, table = fold(tmp_path, [STEPS], "whole")
    metadata = pl.read_parquet_metadata(tmp_path / "whole.parquet")
    assert metadata[SUMS_FORMAT_KEY] == SUMS_FORMAT == "fold-acceptance-sums/3"
    assert table.schema == pl.Schema(FILE_SCHEMA)
    documented = re.findall(r"^\| `([a-z_0-9`, ]+)` \| ([\w\[\]]+) \|", DOC.read_text(), re.M)
    columns = [
        (name.strip("` "), kind)
        for names, kind in documented
        for name in names.replace("`", "").split(",")
    ]
    types = {"int64": pl.Int64, "uint64": pl.UInt64, "string": pl.String,
             "bool": pl.Boolean, "float64": pl.Float64,
             "int64[]": pl.List(pl.Int64), "uint32[]": pl.List(pl.UInt32),
             "position_row[]": pl.List(POSITION_ROW),
             "length_row[]": pl.List(LENGTH_ROW)}  # fmt: skip
    assert [(name.strip(), types[kind]) for name, kind in columns] == list(FILE_SCHEMA.items())


def _queries() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOC.read_text(), re.S)


def _run(query: str, folder: Path) -> list[tuple]:
    text = query.replace("'sums/*.parquet'", f"'{folder}/*.parquet'")
    assert text != query  # the doc's path was found and replaced
    return duckdb.connect().execute(text).fetchall()


def test_the_docs_queries_over_hosts_files_give_the_whole_logs_figures(tmp_path, capsys):
    """Each host serves some of every leg's requests (a request is served on one host): its
    log folded apart with --sums and the hosts' files unioned by docs/sums.md's queries give,
    per leg and warm, the figures of the whole log folded at once."""
    whole, _ = fold(tmp_path, [STEPS], "whole")
    lines = STEPS.read_bytes().splitlines(keepends=True)
    hosts = tmp_path / "sums"
    hosts.mkdir()
    for host in range(3):
        log = tmp_path / f"host-{host}.jsonl"
        log.write_bytes(b"".join(line for line in lines if json.loads(line)["seq"] % 3 == host))
        assert log.stat().st_size > 0
        fold(tmp_path, [log], f"host-{host}")
        (tmp_path / f"host-{host}.parquet").rename(hosts / f"host-{host}.parquet")
    per_leg, warm, per_leg_positions, warm_positions = _queries()
    legs = {leg["index"]: leg for leg in whole["legs"]}
    found = _run(per_leg, hosts)
    assert [row[0] for row in found] == sorted(index for index, leg in legs.items() if leg["steps"])
    for index, run, is_warm, steps, proposed, accepted, rate, length in found:
        leg = legs[index]
        assert (run, is_warm, steps, proposed, accepted) == (
            leg["run"], leg["warm"], leg["steps"], leg["proposed"], leg["accepted"]
        )  # fmt: skip
        assert rate == leg["accept_rate"]
        assert length == leg["mean_acceptance_length"]
    ((count, steps, proposed, accepted, rate, length),) = _run(warm, hosts)
    assert count == len(whole["warm"]["legs"]) == sum(leg["warm"] for leg in whole["legs"])
    assert (steps, proposed, accepted) == (
        whole["warm"]["steps"], whole["warm"]["proposed"], whole["warm"]["accepted"]
    )  # fmt: skip
    assert rate == whole["warm"]["accept_rate"]
    assert length == whole["warm"]["mean_acceptance_length"]
    # the per-position rates, per leg and warm, exactly the whole log's (the fold makes them
    # from each leg's histogram of (proposed, accepted), not from these lists)
    found = _run(per_leg_positions, hosts)
    for index, leg in legs.items():
        rows = [row for row in found if row[0] == index]
        assert [row[1] for row in rows] == list(range(len(leg["per_position"])))
        assert [row[2] for row in rows] == leg["per_position"]
        assert [row[3] for row in rows] == leg["per_position_of_proposed"]
    found = _run(warm_positions, hosts)
    assert [row[0] for row in found] == list(range(len(whole["warm"]["per_position"])))
    assert [row[1] for row in found] == whole["warm"]["per_position"]
    assert [row[2] for row in found] == whole["warm"]["per_position_of_proposed"]


def test_string_ids_are_in_sid_and_integer_ids_in_seq(tmp_path, capsys):
    """Odd requests are renamed to the string of their number: "7" is a request of its own
    beside the integer 7 of another writer, and the file keeps which is which."""
    lines = STEPS.read_bytes().splitlines()
    mixed, strings = [], set()
    for line in lines:
        step = json.loads(line)
        if step["seq"] % 2:
            step["seq"] = str(step["seq"])
            strings.add((step["w"], step["seq"]))
        mixed.append(json.dumps(step).encode())
    log = tmp_path / "mixed.jsonl"
    log.write_bytes(b"\n".join(mixed) + b"\n")
    _, table = fold(tmp_path, [log], "mixed")
    with_strings = table.filter(pl.col("sid").is_not_null())
    assert {(row["w"], row["sid"]) for row in with_strings.iter_rows(named=True)} == strings
    assert with_strings["seq"].null_count() == with_strings.height > 0
    integers = table.filter(pl.col("sid").is_null())
    assert integers["seq"].null_count() == 0
    evens = {(step["w"], step["seq"]) for step in map(json.loads, lines) if step["seq"] % 2 == 0}
    assert set(integers.select("w", "seq").iter_rows()) == evens
    assert table.height == 27  # no request lost or merged with its namesake


def test_a_fold_from_the_records_counters_has_no_sums_to_write(tmp_path, capsys):
    record = ROOT / "fixtures" / "vllmcpp" / "our-arm.json"
    code = cli([str(record), "--sums", str(tmp_path / "s.parquet")])
    err = capsys.readouterr().err
    assert code == 2
    assert "--sums needs a step log" in err
    assert not (tmp_path / "s.parquet").exists()


def test_steps_without_times_write_no_cadence(tmp_path, capsys):
    """The engine's trace has no step times: its rows hold sums and a null cadence."""
    folder = ROOT / "fixtures" / "vllmcpp"
    traces = sorted((folder / "stderr").glob("prompt-*.log"))
    sums, out = tmp_path / "t.parquet", tmp_path / "t.json"
    argv = [str(folder / "our-arm.json"), *map(str, traces), "--sums", str(sums)]
    assert cli([*argv, "--json", str(out), "--quiet"]) == 0
    table = pl.read_parquet(sums)
    document = json.loads(out.read_bytes())
    assert document["step_source"] == "engine_trace"
    assert table.height == sum(leg["request_count"] for leg in document["legs"]) > 0
    assert table["decode_ns"].null_count() == table.height
    assert table["cadence_lines"].null_count() == table.height
    # the README's figures by hand: one run of the four prompts is S 75, P 525, A 177
    assert table["steps"].sum() == 5 * 75
    assert table["proposed"].sum() == 5 * 525
    assert table["accepted"].sum() == 5 * 177


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("-", "the sums file is Parquet, written to a file"),
        ("", "the sums file is Parquet, written to a file"),
        ("{tmp}/out/", "a folder, not a file"),
        ("{tmp}", "a folder, not a file"),
        ("{tmp}/missing/s.parquet", "no folder"),
    ],
)
def test_a_sums_path_that_cannot_be_written_is_refused_before_the_fold(
    tmp_path, capsys, path, words
):
    out = tmp_path / "d.json"
    argv = [str(ARM), str(STEPS), "--sums", path.format(tmp=tmp_path), "--json", str(out)]
    assert cli(argv) == 2
    assert words in capsys.readouterr().err
    assert not out.exists()  # refused before the fold wrote anything


@pytest.mark.parametrize("flag", ["--sums", "--json"])
def test_an_output_never_overwrites_an_input(tmp_path, capsys, flag):
    log, arm = tmp_path / "steps.jsonl", tmp_path / "arm.json"
    log.write_bytes(STEPS.read_bytes())
    arm.write_bytes(ARM.read_bytes())
    for target in (log, arm):
        assert cli([str(arm), str(log), flag, str(target)]) == 2
        assert f"it would overwrite {target}, " in capsys.readouterr().err
    assert log.read_bytes() == STEPS.read_bytes()
    assert arm.read_bytes() == ARM.read_bytes()


def test_the_sums_file_is_readable_by_others_as_any_new_file(tmp_path, capsys):
    fold(tmp_path, [STEPS], "mode")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "mode.parquet").stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_followed_fold_writes_the_same_sums_file_as_a_one_shot_fold(tmp_path, capsys):
    """--follow --sums: the final fold is asked for the steps by draft position too."""
    once = tmp_path / "once.parquet"
    followed = tmp_path / "followed.parquet"
    assert cli([str(ARM), str(STEPS), "--sums", str(once), "--quiet"]) == 0
    argv = [str(ARM), str(STEPS), "--follow", "--idle", "0.3", "--sums", str(followed)]
    assert cli([*argv, "--quiet"]) == 0
    written = pl.read_parquet(followed)
    assert written["accepted_past"].null_count() == 0
    assert written.equals(pl.read_parquet(once))
