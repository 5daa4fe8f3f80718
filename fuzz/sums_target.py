"""The sums file's fuzz target (``fuzz/targets.py`` lists it): a host's sums file, as --sums
writes it and damaged or rewritten, folded by --from-sums alone and beside another host's.

Besides the judge's rules, a fold the file is accepted into must say what its rows say: each
leg's S, P and A in the JSON are the sums of the file's rows of that leg. The mutations work on
the file's parts (a cell, a list, a row, the metadata's JSON) and on its bytes; the seeds are
the main log's hosts' files (``host_files``), one with a request the read held whole.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import harness
import mutate as mutations
from harness import MAIN_ARM, MAIN_LOG, QUIET, RESAMPLED, Finding

FORMAT_KEY = "fold-acceptance.format"
PARTIAL_KEY = "fold-acceptance.partial"
_OTHER: dict[str, str] = {}
EDGES = (0, 1, -1, 2, 7, 47, 2**31, 2**32 - 1, 2**32, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1)
_PARTIAL_KEYS = ["legs", "histogram", "bins", "writers", "files", "read_counts", "arm_legs",
                 "step_source", "lines", "steps", "proposed", "accepted", "count", "bin",
                 "max_proposed", "attributed", "unattributed", "skipped_lines"]  # fmt: skip


def host_files() -> dict[str, bytes]:
    """The main log's requests on two hosts (seq 1 and 3 on one, 2 on the other), and the
    first host's with seq 3's lines out of order (held whole): each host's sums file."""
    from fold.api import fold_acceptance
    from fold.folding.host_sums import RefusedWithSums
    from fold.present.sums_file import sums_parquet

    lines = Path(MAIN_LOG).read_bytes().splitlines(keepends=True)
    hosts = {
        "host-a": [line for line in lines if b'"seq":2,' not in line],
        "host-b": [line for line in lines if b'"seq":2,' in line],
    }
    hosts["host-a-held"] = [*hosts["host-a"][:1], *reversed(hosts["host-a"][1:])]
    hosts["host-many"] = _many_requests()
    found = {}
    # In the folder, so the files name their logs the same each time (the seeds' bytes).
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        for name, kept in hosts.items():
            log = Path(f"{name}.jsonl")
            log.write_bytes(b"".join(kept))
            try:
                sums = fold_acceptance(MAIN_ARM, [str(log)], sums=True, resamples=0).sums
            except RefusedWithSums as refused:  # a host short of a warm leg writes all the same
                sums = refused.sums
            assert sums is not None
            found[name] = sums_parquet(sums)
    return found


def _many_requests() -> list[bytes]:
    """A host of three writers, each with an integer and two string ids in the leg "warm" and
    one more in "b" (none the second host's): rows that order by leg, writer, then id, for the
    mutations that move rows, in a file that folds alone (both warm legs have steps)."""
    lines = []
    writers = ("0000000000000aaa", "0000000000000bbb", "00000000000000cc")
    requests: tuple[tuple[int | str, str, int], ...] = (
        (5, "warm", 1764450000001100000),
        ("r-1", "warm", 1764450000001100000),
        ("\u00e9", "warm", 1764450000001100000),
        (6, "b", 1764450000002100000),
    )
    for step in range(3):
        for place, writer in enumerate(writers):
            for which, (request, leg, start) in enumerate(requests):
                n = step * len(requests) + which
                t_ns = start + (step * 12 + place * 4 + which) * 20000
                accepted = (step + place + which) % 5
                seq = json.dumps(request) if isinstance(request, int) else f'"{request}"'
                lines.append(
                    f'{{"v":1,"w":"{writer}","n":{n},"t_ns":{t_ns},"pid":{4300 + place},'
                    f'"seq":{seq},"proposed":4,"accepted":{accepted},"emitted":{accepted + 1},'
                    f'"leg":"{leg}"}}\n'.encode()
                )
    lines.sort(key=lambda line: json.loads(line)["t_ns"])
    return lines


def _other() -> str:
    """The second host's file, written once a process."""
    if not _OTHER:
        folder = tempfile.mkdtemp(prefix="fuzz-sums-")
        path = os.path.join(folder, "host-b.parquet")
        with open(path, "wb") as handle:
            handle.write(host_files()["host-b"])
        _OTHER["path"] = path
    return _OTHER["path"]


def check(data: bytes, directory: str) -> None:
    """The input as the only host's file (JSON and markdown), then beside the second host's
    (the table with intervals) with the union's sums file written, which must fold again."""
    path = os.path.join(directory, "host.parquet")
    with open(path, "wb") as handle:
        handle.write(data)
    json_path = os.path.join(directory, "out.json")
    if os.path.exists(json_path):
        os.remove(json_path)
    alone = harness.run(
        [MAIN_ARM, "--from-sums", path, "--json", json_path, "--markdown", "-", *QUIET]
    )
    harness.judge(alone, fuzzed=path, input_bytes=len(data))
    if alone.status == 0:
        document = json.loads(Path(json_path).read_bytes())
        harness.check_lists(document, len(data))
        _agrees(document, data, alone)
    _as_in_order(data, alone, json_path, directory, path)
    merged, union_json, again_json = (
        os.path.join(directory, name) for name in ("merged.parquet", "union.json", "again.json")
    )
    for stale in (merged, union_json, again_json):
        if os.path.exists(stale):
            os.remove(stale)
    union = harness.run(
        [MAIN_ARM, "--from-sums", path, "--from-sums", _other(), "--sums", merged,
         "--json", union_json, *RESAMPLED]
    )  # fmt: skip
    harness.judge(union, fuzzed=path, input_bytes=len(data))
    if union.status in (0, 1) and os.path.exists(merged):
        _folds_again(merged, union, union_json, again_json, path, len(data))


_NAMED = re.compile(r"(?: \(in [^()]*\))+$")


def _folds_again(
    merged: str, union: harness.Outcome, union_json: str, again_json: str, path: str, size: int
) -> None:
    """The union's own file (--sums beside --from-sums; a refused union writes it too) folds
    as the union did: the same exit, and the same document but for the logs' names."""
    again = harness.run([MAIN_ARM, "--from-sums", merged, "--json", again_json, *RESAMPLED])
    harness.judge(again, fuzzed=path, input_bytes=size)
    _alike(again, union.status, union_json, again_json, "the union's own sums file")


def _alike(
    again: harness.Outcome, status: int, first_json: str, again_json: str, what: str
) -> None:
    """``again`` exits as the first fold did (``status``) and, where both folded, its document
    (``again_json``) is the first's (``first_json``) but for the logs' names."""
    if again.status != status:
        raise Finding(f"{again.describe()}: {what} exits {again.status}, the first fold {status}")
    if status != 0:
        return
    documents = [json.loads(Path(name).read_bytes()) for name in (first_json, again_json)]
    for found in documents:
        for entry in (*found["files"], *found["skipped_examples"]):
            entry["path"] = _NAMED.sub("", entry["path"])
    if documents[0] != documents[1]:
        raise Finding(f"{again.describe()}: {what} folds to another document")


def _as_in_order(
    data: bytes, alone: harness.Outcome, json_path: str, directory: str, path: str
) -> None:
    """A file whose pages are its digest's and whose rows are out of request order folds as
    the same rows in order (as --sums writes them): the same exit, and when it folds, the same
    document but for the logs' names."""
    import polars as pl

    from fold.folding.accumulate import REQUEST_KEY
    from fold.folding.host_sums import parquet_with_digest
    from fold.inputs.sums_file import pages_hold

    try:
        metadata = pl.read_parquet_metadata(io.BytesIO(data))
        if not pages_hold(data, metadata):
            return  # refused before its rows are read, whatever their order
        rows = pl.read_parquet(io.BytesIO(data))
        ordered = rows.sort(REQUEST_KEY)
    except (Exception, pl.exceptions.PanicException):  # not a table the fold can order
        return
    if ordered.equals(rows) or not all(key in metadata for key in (FORMAT_KEY, PARTIAL_KEY)):
        return
    in_order = os.path.join(directory, "in-order.parquet")
    ordered_json = os.path.join(directory, "in-order.json")
    if os.path.exists(ordered_json):
        os.remove(ordered_json)
    kept = {key: metadata[key] for key in (FORMAT_KEY, PARTIAL_KEY)}
    with open(in_order, "wb") as handle:
        handle.write(parquet_with_digest(ordered.cast(rows.schema), kept))
    again = harness.run([MAIN_ARM, "--from-sums", in_order, "--json", ordered_json, *QUIET])
    harness.judge(again, fuzzed=in_order, input_bytes=len(data))
    _alike(again, alone.status, json_path, ordered_json, "the file's rows in request order")


def _agrees(document: dict, data: bytes, outcome: harness.Outcome) -> None:
    """Each leg's S, P and A are its rows' sums."""
    import polars as pl

    rows = pl.read_parquet(io.BytesIO(data))
    sums = {
        leg: (steps, proposed, accepted)
        for leg, steps, proposed, accepted in rows.group_by("leg")
        .agg(pl.col("steps", "proposed", "accepted").sum())
        .iter_rows()
    }
    for leg in document["legs"]:
        expected = sums.get(leg["index"], (0, 0, 0))
        found = (leg["steps"], leg["proposed"], leg["accepted"])
        if found != expected:
            raise Finding(
                f"{outcome.describe()}: leg {leg['index']} folds S, P, A {found}, "
                f"its rows sum to {expected}"
            )


def mutate(data: bytes, rng: Any) -> bytes:
    import polars as pl

    from fold.folding.host_sums import parquet_with_digest
    from fold.inputs.sums_file import DIGEST_KEY, pages_hold

    try:
        metadata = pl.read_parquet_metadata(io.BytesIO(data))
        # Pages the digest does not cover are never decoded: the reader can abort on them.
        if not pages_hold(data, metadata):
            return _bytes(data, rng)
        table = pl.read_parquet(io.BytesIO(data))
    except (Exception, pl.exceptions.PanicException):  # the reader panics on some damage
        return _bytes(data, rng)
    choice = rng.randrange(6)
    if choice == 0:
        return _bytes(data, rng)
    if choice == 1 and table.height:
        table = _cell(table, rng)
    elif choice == 2 and table.height:
        table = _list(table, rng)
    elif choice == 3 and table.height:
        # A row dropped, repeated, or moved (the same rows in another order, as a tool that
        # writes the file again may leave them).
        index = rng.randrange(table.height)
        row = table.slice(index, 1)
        rest = table.filter(pl.int_range(pl.len()) != index)
        pick = rng.randrange(3)
        if pick == 0:
            table = rest
        elif pick == 1:
            table = pl.concat([table, row])
        else:
            place = rng.randrange(rest.height + 1)
            table = pl.concat([rest.slice(0, place), row, rest.slice(place)])
    elif choice == 4 and PARTIAL_KEY in metadata:
        text = mutations.json_value(metadata[PARTIAL_KEY].encode(), rng, _PARTIAL_KEYS)
        metadata[PARTIAL_KEY] = text.decode(errors="replace")
    else:
        metadata[FORMAT_KEY] = rng.choice(
            ["fold-acceptance-sums/2", "fold-acceptance-sums/4", "", "fold-acceptance-sums/3"]
        )
    metadata.pop("ARROW:schema", None)
    metadata.pop(DIGEST_KEY, None)
    # With the digest of its pages, as --sums writes it, so that the checks past it are reached
    # (a file whose bytes changed is refused by the digest: the byte mutations do that).
    try:
        return parquet_with_digest(table, metadata)
    except Exception:  # a value the writer will not take: the bytes instead
        return _bytes(data, rng)


def _bytes(data: bytes, rng: Any) -> bytes:
    if not data:
        return b"PAR1"
    cut = rng.randrange(len(data))
    choice = rng.randrange(3)
    if choice == 0:  # cut short, as a copy killed mid-way leaves it
        return data[:cut]
    if choice == 1:
        return data[:cut] + bytes([data[cut] ^ (1 << rng.randrange(8))]) + data[cut + 1 :]
    return data[:cut] + bytes(min(64, len(data) - cut)) + data[cut + 64 :]


def _cell(table: Any, rng: Any) -> Any:
    """One cell set to an edge value of its type, or null, or another row's."""
    import polars as pl

    name = rng.choice(table.columns)
    dtype = table.schema[name]
    index = rng.randrange(table.height)
    if rng.random() < 0.2:
        value: Any = None
    elif rng.random() < 0.2:
        value = table[name][rng.randrange(table.height)]
    elif dtype == pl.String:
        value = rng.choice(["", "7", "x" * 300, "\u00e9", "5f0c1a2b3c4d5e6f"])
    elif dtype == pl.Boolean:
        value = rng.random() < 0.5
    elif dtype.is_integer() or dtype.is_float():
        value = rng.choice(EDGES) + rng.choice((0, 0, 1, -1))
    else:
        return _list(table, rng)
    try:
        column = table[name].scatter(index, value)
    except Exception:
        return table
    return table.with_columns(column)


def _list(table: Any, rng: Any) -> Any:
    """A list column of one row: an element dropped, repeated, or changed."""
    import polars as pl

    lists = [name for name, dtype in table.schema.items() if isinstance(dtype, pl.List)]
    name = rng.choice(lists)
    index = rng.randrange(table.height)
    values = table[name][index]
    if values is None or not len(values):
        return table
    items = values.to_list()
    at = rng.randrange(len(items))
    choice = rng.randrange(3)
    if choice == 0:
        del items[at]
    elif choice == 1:
        items.insert(at, items[at])
    elif isinstance(items[at], dict):
        field = rng.choice(list(items[at]))
        items[at] = {**items[at], field: rng.choice(EDGES[:11])}
    else:
        items[at] = rng.choice(EDGES[:11])
    try:
        column = table[name].scatter(index, pl.Series([items], dtype=table.schema[name]))
    except Exception:
        return table
    return table.with_columns(column)
