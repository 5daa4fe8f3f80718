"""--from-sums (docs/sums.md): the hosts' sums files fold into the document the fold of their
logs together gives, figure for figure, interval for interval; what cannot be folded so is
refused with the file and the reason.

The expectation is never computed from a sums file: it is the fold of the hosts' logs, read
as logs, by the one-shot fold.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import shutil
from pathlib import Path

import orjson
import polars as pl
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fold.api import fold_acceptance, fold_from_sums
from fold.cli import main as cli
from fold.errors import FoldError, RefusedError
from fold.folding.host_sums import RefusedWithSums, SumsFile, parquet_with_digest
from fold.inputs.arm import arm_from_document
from fold.inputs.sums_file import PARTIAL_KEY, SUMS_FORMAT_KEY
from fold.present.sums_file import sums_parquet
from tests.strategies import fold_cases, scaled

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
NAMED = re.compile(r"(?: \(in [^()]*\))+$")  # a merged file's logs: one per merge
RESAMPLES = 200
WRITER = re.compile(rb'"w": *("(?:[^"\\]|\\.)*")')
SEQ = re.compile(rb'"seq": *("(?:[^"\\]|\\.)*"|-?[0-9]+)')


def host_logs(log: Path, folder: Path, hosts: int, *, by: str = "request") -> list[Path]:
    """``log``'s lines split across ``hosts`` logs: each request's lines on one host (chosen
    by its writer and id), or each leg's (``by="leg"``: a host serves only some legs)."""
    folder.mkdir(parents=True, exist_ok=True)
    pieces: list[list[bytes]] = [[] for _ in range(hosts)]
    for line in log.read_bytes().splitlines(keepends=True):
        step = json.loads(line)
        key = step["leg"] if by == "leg" else f"{step['w']}/{step['seq']}"
        pieces[int.from_bytes(key.encode(), "little") % hosts].append(line)
    paths = []
    for host, lines in enumerate(pieces):
        path = folder / f"host-{host}.jsonl"
        path.write_bytes(b"".join(lines))
        paths.append(path)
    return paths


def sums_of(arm, log: Path, target: Path, **options) -> Path:
    """The host's sums file, written whether or not its own fold is refused."""
    try:
        sums = fold_acceptance(arm, [str(log)], sums=True, **options).sums
    except RefusedWithSums as refused:
        sums = refused.sums
    assert isinstance(sums, SumsFile)
    target.write_bytes(sums_parquet(sums))
    return target


def plain(document) -> bytes:
    """The document's JSON with each log named as the logs' fold names it."""
    found = document.to_json()
    for entry in (*found["files"], *found["skipped_examples"]):
        entry["path"] = NAMED.sub("", entry["path"])
    return orjson.dumps(found)


def both(arm, logs: list[Path], folder: Path, **options):
    """The fold of ``logs`` together, and the fold of their sums files."""
    files = [sums_of(arm, log, folder / f"{log.stem}.parquet", **options) for log in logs]
    together = fold_acceptance(arm, [str(log) for log in logs], **options)
    return together, fold_from_sums(arm, [str(path) for path in files], **options)


def _decoded(text: bytes) -> object:
    """A JSON string or integer as the readers take it ("\\u0030" is "0", not 0)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def shuffled(log: Path, target: Path) -> Path:
    """``log``'s lines in another order: requests the read holds whole (line_rows)."""
    lines = log.read_bytes().splitlines(keepends=True)
    random.Random(3).shuffle(lines)
    target.write_bytes(b"".join(lines))
    return target


@pytest.mark.parametrize(
    "arm, log, by",
    [
        ("our-arm.json", "steps.jsonl", "request"),
        ("gate-example/our-arm.json", "gate-example/steps.jsonl", "request"),
        ("another-k/our-arm.json", "another-k/steps.jsonl", "request"),
        ("ours-vs-ours/after/our-arm.json", "ours-vs-ours/after/steps.jsonl", "request"),
        ("our-arm.json", "steps.jsonl", "leg"),
        ("our-arm.json", "shuffled", "request"),
        ("our-arm.json", "timed", "request"),
    ],
)
def test_eight_hosts_sums_files_fold_to_the_fold_of_their_logs(tmp_path, arm, log, by):
    source = FIXTURES / "steps.jsonl"
    if log == "shuffled":
        path = shuffled(source, tmp_path / "shuffled.jsonl")
    elif log == "timed":
        from tests.step_logs import timed_copy

        path = timed_copy(source, tmp_path / "timed.jsonl")
    else:
        path = FIXTURES / log
    logs = host_logs(path, tmp_path / "hosts", 8, by=by)
    together, merged = both(str(FIXTURES / arm), logs, tmp_path, resamples=RESAMPLES)
    assert plain(merged) == plain(together)
    assert merged.fold.lines_read == together.fold.lines_read > 0
    if log == "shuffled":  # some requests were held whole: their lines are in the files
        held = [
            pl.read_parquet(file)["held_t_ns"].is_not_null().sum()
            for file in tmp_path.glob("*.parquet")
        ]
        assert sum(held) > 0


def test_hosts_that_each_serve_some_legs_are_refused_alone_and_folded_together(tmp_path, capsys):
    """A host that served no step of a warm leg: its own fold is refused (exit 1) and its file
    is written all the same; the union has every leg and folds."""
    arm = FIXTURES / "our-arm.json"
    logs = host_logs(FIXTURES / "steps.jsonl", tmp_path / "hosts", 3, by="leg")
    files = []
    for log in logs:
        target = tmp_path / f"{log.stem}.parquet"
        code = cli([str(arm), str(log), "--sums", str(target), "--quiet", "--bootstrap", "0"])
        err = capsys.readouterr().err
        assert code == 1
        assert "warm leg(s) have no verify step" in err
        assert f"--sums {target} is written all the same" in err
        files.append(target)
    out = tmp_path / "union.json"
    argv = [str(arm), "--from-sums", str(tmp_path / "host-*.parquet"), "--json", str(out)]
    assert cli([*argv, "--quiet"]) == 0
    logs_out = tmp_path / "logs.json"
    assert cli([str(arm), *map(str, logs), "--json", str(logs_out), "--quiet"]) == 0
    union, together = json.loads(out.read_bytes()), json.loads(logs_out.read_bytes())
    for document in (union, together):
        for entry in document["files"]:
            entry["path"] = NAMED.sub("", entry["path"])
    assert union == together


def test_hosts_pass_the_records_counters_only_together(tmp_path):
    """vllm.cpp's record carries its counters over every request, one a leg: one host's part
    misses legs and is refused, with its file written; the hosts' files are checked against
    the counters together, and agree, as their logs do."""
    arm = str(FIXTURES / "vllmcpp" / "our-arm.json")
    logs = host_logs(FIXTURES / "vllmcpp" / "steps.jsonl", tmp_path / "hosts", 3)
    for log in logs:
        with pytest.raises(RefusedWithSums):
            fold_acceptance(arm, [str(log)], sums=True, resamples=0)
    together, merged = both(arm, logs, tmp_path, resamples=RESAMPLES)
    assert plain(merged) == plain(together)
    assert merged.counter_check.legs_checked == 20


def test_the_engines_trace_folds_from_its_sums_file(tmp_path):
    """The trace is one host's (a file per prompt process, together): its file folds back."""
    arm = str(FIXTURES / "vllmcpp" / "our-arm.json")
    traces = [str(path) for path in sorted((FIXTURES / "vllmcpp" / "stderr").glob("*.log"))]
    whole = fold_acceptance(arm, traces, sums=True, resamples=RESAMPLES)
    assert whole.sums is not None
    (tmp_path / "trace.parquet").write_bytes(sums_parquet(whole.sums))
    merged = fold_from_sums(arm, [str(tmp_path / "trace.parquet")], resamples=RESAMPLES)
    assert plain(merged) == plain(whole)
    assert merged.fold.step_source == "engine_trace"


@settings(
    scaled(0.5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    case=fold_cases(string_ids=True),
    hosts=st.integers(1, 4),
    seed=st.integers(0, 2**32),
)
def test_any_log_split_across_hosts_folds_from_sums_as_its_logs_or_is_refused(
    tmp_path_factory, case, hosts, seed
):
    """A generated log (torn and lost lines, other writers' layouts, string ids, bad lines)
    split across hosts by request: the fold of the hosts' files is the fold of their logs, or
    both are refused alike; a request whose lines went to two hosts is refused by name."""
    folder = tmp_path_factory.mktemp("split")
    rng = random.Random(seed)
    owner: dict[object, int] = {}
    pieces: list[list[bytes]] = [[] for _ in range(hosts)]
    for line in case.log.lines:
        # By its bytes, not json.loads (which refuses an integer of 5000 digits the readers
        # skip as a key they do not know); a torn fragment's line glued after it is its own.
        step = line[max(0, line.rfind(b'{"v"')) :]
        writer, seq = WRITER.search(step), SEQ.search(step)
        key = (_decoded(writer.group(1)), _decoded(seq.group(1))) if writer and seq else None
        host = owner.setdefault(key, rng.randrange(hosts)) if key else rng.randrange(hosts)
        pieces[host].append(line + b"\n")
    logs = []
    for host, lines in enumerate(pieces):
        path = folder / f"host-{host}.jsonl"
        path.write_bytes(b"".join(lines) + (case.log.tail if host == 0 else b""))
        logs.append(path)
    arm = arm_from_document(case.document)
    options = {
        "predicate": case.predicate.sql,
        "window_steps": case.window_steps,
        "resamples": 16,
    }
    try:
        together = fold_acceptance(
            arm, [str(log) for log in logs], skip_bad_lines=case.skip_bad_lines, **options
        )
    except FoldError as error:
        together = error
    files = []
    for log in logs:
        try:
            files.append(
                str(sums_of(arm, log, folder / f"{log.stem}.parquet",
                            skip_bad_lines=case.skip_bad_lines, **options))
            )  # fmt: skip
        except FoldError as error:  # a host's own log refused as it was read: so are the logs
            assert type(together) is type(error), str(error)
            event("a host's log refused as it was read")
            return
    try:
        merged = fold_from_sums(arm, files, **options)
    except RefusedError as error:
        if "both hold" in str(error):
            raise AssertionError("a request split by request cannot be in two files") from error
        assert isinstance(together, RefusedError), str(error)
        assert NAMED.sub("", str(error)) == str(together)  # the same refusal, in the same words
        event("refused from sums and from the logs")
        return
    assert not isinstance(together, FoldError), str(together)
    assert plain(merged) == plain(together)
    # The union's own sums file is the logs' together, row for row.
    assert _rows(_sums(fold_from_sums, arm, files, **options)) == _rows(
        _sums(
            fold_acceptance,
            arm,
            [str(log) for log in logs],
            skip_bad_lines=case.skip_bad_lines,
            **options,
        )
    )
    event(f"folded alike, {hosts} host(s)")


def _sums(fold, arm, inputs, **options) -> SumsFile:
    try:
        sums = fold(arm, inputs, sums=True, **options).sums
    except RefusedWithSums as refused:
        sums = refused.sums
    assert isinstance(sums, SumsFile)
    return sums


def _rows(sums: SumsFile) -> list[tuple]:
    """The file's rows in key order (a union lists its requests in its files' order)."""
    return sorted(sums.table.rows(), key=lambda row: repr(row[:6]))


def test_sums_files_merge_into_one_as_the_logs_fold_into_one(tmp_path, capsys):
    """Eight hosts' files merged in two stages (--from-sums with --sums): the last file holds
    the rows --sums of all the logs together writes, and folds to their document."""
    arm = str(FIXTURES / "our-arm.json")
    logs = host_logs(shuffled(FIXTURES / "steps.jsonl", tmp_path / "s.jsonl"), tmp_path, 8)
    files = [sums_of(arm, log, tmp_path / f"{log.stem}.parquet", resamples=0) for log in logs]
    halves = []
    for half, chosen in enumerate((files[:4], files[4:])):
        target = tmp_path / f"half-{half}.parquet"
        inputs = [item for path in chosen for item in ("--from-sums", str(path))]
        assert cli([arm, *inputs, "--sums", str(target), "--quiet"]) in (0, 1)
        halves.append(str(target))
    capsys.readouterr()
    whole = tmp_path / "whole.parquet"
    inputs = [item for path in halves for item in ("--from-sums", path)]
    assert cli([arm, *inputs, "--sums", str(whole), "--quiet"]) == 0
    together = fold_acceptance(arm, [str(log) for log in logs], sums=True, resamples=RESAMPLES)
    assert together.sums is not None
    table = pl.read_parquet(whole)
    assert _rows(SumsFile(table, ())) == _rows(together.sums)
    assert table["held_t_ns"].is_not_null().sum() > 0  # lines held whole went through both
    merged = fold_from_sums(arm, [str(whole)], resamples=RESAMPLES)
    assert plain(merged) == plain(together)
    names = [entry["path"] for entry in merged.to_json()["files"]]
    assert (
        f"{tmp_path / 'host-0.jsonl'} (in {tmp_path / 'host-0.parquet'}) "
        f"(in {tmp_path / 'half-0.parquet'}) (in {whole})"
    ) in names


def test_a_file_rewritten_in_another_row_order_folds_alike(tmp_path):
    """Rows are a set: a file another tool wrote back with its rows in any order (here reversed,
    and shuffled) folds to the document of the file as --sums wrote it. Later stages order
    what they read themselves, so this holds docs/sums.md's promise; the reader's own ordering
    is held to a sort below."""
    arm = str(FIXTURES / "our-arm.json")
    written = sums_of(arm, FIXTURES / "steps.jsonl", tmp_path / "written.parquet")
    expected = plain(fold_from_sums(arm, [str(written)], resamples=RESAMPLES))
    table = pl.read_parquet(written)
    found = pl.read_parquet_metadata(written)
    metadata = {key: found[key] for key in (SUMS_FORMAT_KEY, PARTIAL_KEY)}
    order = list(range(table.height))
    random.Random(5).shuffle(order)
    for name, rows in (("reversed", table.reverse()), ("shuffled", table[order])):
        assert not rows["seq"].equals(table["seq"])
        path = tmp_path / f"{name}.parquet"
        # cast: polars reverses an all-null List(Int64) column into List(Null)
        path.write_bytes(parquet_with_digest(rows.cast(dict(table.schema)), metadata))
        assert plain(fold_from_sums(arm, [str(path)], resamples=RESAMPLES)) == expected


def test_a_request_in_two_files_is_refused(tmp_path, capsys):
    arm = FIXTURES / "our-arm.json"
    first = sums_of(str(arm), FIXTURES / "steps.jsonl", tmp_path / "a.parquet", resamples=0)
    shutil.copy(first, tmp_path / "b.parquet")
    code = cli([str(arm), "--from-sums", str(tmp_path / "*.parquet"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{tmp_path / 'a.parquet'} and {tmp_path / 'b.parquet'} both hold leg 0's" in err
    assert "27 rows of shared requests" not in err  # every request is shared: all 54 rows
    assert "54 rows of shared requests" in err


def test_a_file_folded_over_another_arm_is_refused(tmp_path, capsys):
    gate = FIXTURES / "gate-example"
    sums = sums_of(str(gate / "our-arm.json"), gate / "steps.jsonl", tmp_path / "g.parquet")
    code = cli([str(FIXTURES / "our-arm.json"), "--from-sums", str(sums), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{sums} was folded over another arm record" in err


def test_files_of_two_step_sources_are_refused(tmp_path, capsys):
    arm = FIXTURES / "vllmcpp" / "our-arm.json"
    traces = sorted((FIXTURES / "vllmcpp" / "stderr").glob("*.log"))
    whole = fold_acceptance(str(arm), [str(path) for path in traces], sums=True, resamples=0)
    assert whole.sums is not None
    trace = tmp_path / "t.parquet"
    trace.write_bytes(sums_parquet(whole.sums))
    log = sums_of(str(arm), FIXTURES / "vllmcpp" / "steps.jsonl", tmp_path / "s.parquet")
    code = cli([str(arm), "--from-sums", str(log), "--from-sums", str(trace), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert "fold one source at a time" in err


@pytest.mark.parametrize(
    "extra, words",
    [
        (["STEPS"], "is a step log: fold one or the other"),
        (["--follow"], "--follow does not go with --from-sums"),
        (["--trace", "t.json"], "--trace does not go with --from-sums"),
        (["--skip-bad-lines"], "--skip-bad-lines does not go with --from-sums"),
    ],
)
def test_what_does_not_go_with_from_sums_is_refused_before_any_read(tmp_path, capsys, extra, words):
    arm = FIXTURES / "our-arm.json"
    extra = [str(FIXTURES / "steps.jsonl") if item == "STEPS" else item for item in extra]
    extra = [
        str(tmp_path / item) if item.endswith((".json", ".parquet")) else item for item in extra
    ]
    code = cli([str(arm), *extra, "--from-sums", str(tmp_path / "none.parquet"), "--quiet"])
    assert code == 2
    assert words in capsys.readouterr().err


def test_files_that_are_not_sums_files_are_named_with_what_they_are(tmp_path, capsys):
    arm = str(FIXTURES / "our-arm.json")
    good = sums_of(arm, FIXTURES / "steps.jsonl", tmp_path / "good.parquet", resamples=0)
    table = pl.read_parquet(good)
    metadata = pl.read_parquet_metadata(good)
    cases = {
        "missing.parquet": None,
        "text.parquet": b'{"not": "parquet"}\n',
        "empty.parquet": b"",
    }
    for name, data in cases.items():
        if data is not None:
            (tmp_path / name).write_bytes(data)
    old = tmp_path / "old.parquet"
    table.select(table.columns[:28]).write_parquet(
        old, metadata={"fold-acceptance.format": "fold-acceptance-sums/2"}
    )
    other = tmp_path / "other.parquet"
    table.write_parquet(other)
    expected = {
        "missing.parquet": "no such sums file",
        "text.parquet": "not a Parquet file this tool can read",
        "empty.parquet": "not a Parquet file this tool can read",
        "old.parquet": "format fold-acceptance-sums/2 holds the requests' figures but not the "
        "fold's partial",
        "other.parquet": "not a sums file (its metadata fold-acceptance.format is None",
    }
    for name, words in expected.items():
        code = cli([arm, "--from-sums", str(tmp_path / name), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2, name
        assert f"{tmp_path / name}: {words}" in err, err
        assert "Traceback" not in err
    assert metadata[PARTIAL_KEY]


def test_two_hosts_logs_of_one_name_stay_two_files(tmp_path):
    """Hosts write their logs under the same path: each is named with its sums file, so the
    files table keeps both, with their own lines."""
    arm = str(FIXTURES / "our-arm.json")
    logs = host_logs(FIXTURES / "steps.jsonl", tmp_path / "split", 2)
    files = []
    for host, log in enumerate(logs):
        folder = tmp_path / f"host-{host}"
        folder.mkdir()
        (folder / "steps.jsonl").write_bytes(log.read_bytes())
        with contextlib.chdir(folder):  # each host's log at the same path, steps.jsonl
            files.append(str(sums_of(arm, Path("steps.jsonl"), folder / "sums.parquet")))
    merged = fold_from_sums(arm, files, resamples=0).to_json()["files"]
    expected = [
        (f"steps.jsonl (in {file})", len(log.read_bytes().splitlines()))
        for log, file in zip(logs, files, strict=True)
    ]
    assert [(entry["path"], entry["lines"]) for entry in merged] == expected
    assert len({entry["lines"] for entry in merged}) == 2  # two hosts, not one file twice


request_keys = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.sampled_from(["0000000000000001", "00000000000000ff", "é", ""]),
        st.one_of(st.integers(0, 2**64 - 1), st.sampled_from(["", "7", "ࠀ", "r-1"])),
    ),
    unique_by=lambda key: key,
    max_size=14,
)


@given(request_keys, st.randoms(use_true_random=False))
def test_a_files_rows_come_in_request_order_as_a_sort_puts_them(keys, rng):
    """``_in_request_order`` (the rows of a file read back) against polars' sort of the whole
    table: the same rows in the same order, for rows given in any order; a table already in
    order is handed back as it is, with no copy."""
    from fold.folding.from_sums import _in_request_order

    rows = [
        (leg, w, None, request) if isinstance(request, int) else (leg, w, request, 0)
        for leg, w, request in keys
    ]
    rng.shuffle(rows)
    table = pl.DataFrame(
        [(*row, place) for place, row in enumerate(rows)],
        schema={
            "leg": pl.Int64,
            "w": pl.String,
            "sid": pl.String,
            "seq": pl.UInt64,
            "row": pl.Int64,
        },
        orient="row",
    )
    expected = table.sort(["leg", "w", "sid", "seq"])
    assert _in_request_order(table).equals(expected)
    assert _in_request_order(expected) is expected


def test_keys_of_other_types_are_not_the_same_keys():
    """polars finds an unsigned and a signed column (or an integer and a float one) equal
    where their values are; rows are put beside each other only with keys of the same types."""
    from fold.folding.request_rows import same_keys

    keys = {"leg": [0, 1], "w": ["a", "b"], "sid": [None, None], "seq": [2**53 + 1, 3]}
    schema = {"leg": pl.Int64, "w": pl.String, "sid": pl.String, "seq": pl.UInt64}
    table = pl.DataFrame(keys, schema=schema)
    assert same_keys(table, table.clone())
    signed = table.with_columns(pl.col("seq").cast(pl.Int64))
    assert signed.equals(table)  # what polars says
    assert not same_keys(table, signed)
    assert not same_keys(table, table.with_columns(pl.col("seq").cast(pl.Float64)))
