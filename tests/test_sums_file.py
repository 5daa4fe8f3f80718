"""The sums file (--sums, docs/sums.md): a row per request, read back by polars and DuckDB.

Its rows are held to the reference reader's requests (tests/reference.py, written apart from
the fold), and docs/sums.md's DuckDB queries, run as written over the files of a log split
across hosts, to the fold of the whole log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import polars as pl

from fold.cli import main as cli
from fold.folding.request_rows import FILE_SCHEMA, SUMS_FORMAT, SUMS_FORMAT_KEY
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


def test_every_request_of_the_reference_is_a_row_with_its_sums_and_cadence(tmp_path, capsys):
    _, table = fold(tmp_path, [STEPS], "whole")
    record = json.loads(ARM.read_text())
    expected = reference_fold(record, lambda leg: leg["run"] > 1, "run > 1",
                              [(str(STEPS), STEPS.read_bytes())])  # fmt: skip
    rows = []
    for leg in expected["legs"]:
        for request in leg["requests"]:
            cadence = request["cadence"]
            rows.append(
                {
                    "leg": leg["index"],
                    "run": leg["run"],
                    "warm": leg["run"] > 1,
                    "w": request["w"],
                    "seq": request["seq"],
                    "lines": request["lines"],
                    "steps": request["steps"],
                    "proposed": request["proposed"],
                    "accepted": request["accepted"],
                    "intervals": cadence["intervals"],
                    "decode_s": cadence["decode_s"],
                    "first_step_s": cadence["first_step_s"],
                    "median_s": cadence["interval_median_s"],
                    "max_s": cadence["interval_max_s"],
                    "stalls": cadence["stalls"],
                }
            )
    found = [
        {
            "leg": row["leg"],
            "run": row["run"],
            "warm": row["warm"],
            "w": row["w"],
            "seq": row["seq"],
            "lines": row["lines"],
            "steps": row["steps"],
            "proposed": row["proposed"],
            "accepted": row["accepted"],
            "intervals": row["intervals"],
            "decode_s": seconds(row["decode_ns"]),
            "first_step_s": seconds(row["first_step_ns"]),
            "median_s": seconds(row["interval_median_ns"]),
            "max_s": seconds(row["interval_max_ns"]),
            "stalls": row["stalls"],
        }
        for row in table.iter_rows(named=True)
    ]
    assert len(rows) == 27  # the fixture's requests, counted in its legs by hand-checked JSON
    assert found == rows
    assert table["sid"].null_count() == table.height  # the fixture's ids are integers


def test_the_file_names_its_format_and_keeps_the_documented_columns(tmp_path, capsys):
    _, table = fold(tmp_path, [STEPS], "whole")
    metadata = pl.read_parquet_metadata(tmp_path / "whole.parquet")
    assert metadata[SUMS_FORMAT_KEY] == SUMS_FORMAT == "fold-acceptance-sums/1"
    assert table.schema == pl.Schema(FILE_SCHEMA)
    documented = re.findall(r"^\| `([a-z_0-9`, ]+)` \| (\w+) \|", DOC.read_text(), re.M)
    columns = [
        (name.strip("` "), kind)
        for names, kind in documented
        for name in names.replace("`", "").split(",")
    ]
    types = {"int64": pl.Int64, "uint64": pl.UInt64, "string": pl.String,
             "bool": pl.Boolean, "float64": pl.Float64}  # fmt: skip
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
    per_leg, warm = _queries()
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


def test_string_ids_are_in_sid_and_integer_ids_in_seq(tmp_path, capsys):
    lines = STEPS.read_bytes().splitlines()
    mixed = []
    for line in lines:
        step = json.loads(line)
        if step["seq"] % 2:  # odd requests renamed: "7" is a string id, not the integer 7
            step["seq"] = f"r{step['seq']}"
        mixed.append(json.dumps(step).encode())
    log = tmp_path / "mixed.jsonl"
    log.write_bytes(b"\n".join(mixed) + b"\n")
    document, table = fold(tmp_path, [log], "mixed")
    from_json = sorted(
        (leg["index"], r["w"], str(r["seq"]), r["proposed"])
        for leg in document["legs"]
        for r in leg["requests"]
    )
    from_file = sorted(
        (row["leg"], row["w"], row["sid"] if row["seq"] is None else str(row["seq"]),
         row["proposed"])
        for row in table.iter_rows(named=True)
    )  # fmt: skip
    assert from_file == from_json
    assert (
        table.filter(pl.col("sid").is_not_null())["seq"].null_count()
        == table.filter(pl.col("sid").is_not_null()).height
        > 0
    )
    assert (table["seq"].is_null() ^ table["sid"].is_null()).all()


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
    assert table.height == sum(len(leg["requests"] or ()) for leg in document["legs"]) > 0
    assert table["decode_ns"].null_count() == table.height
    assert table["cadence_lines"].null_count() == table.height
    # the README's figures by hand: one run of the four prompts is S 75, P 525, A 177
    assert table["steps"].sum() == 5 * 75
    assert table["proposed"].sum() == 5 * 525
    assert table["accepted"].sum() == 5 * 177
