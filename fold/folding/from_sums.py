"""A fold of many hosts' sums files (``--from-sums``, docs/sums.md): each file holds a host's
partial fold once its logs were read (``fold.folding.host_sums``); their union is merged as the
partials of the logs' blocks are (``fold.folding.merge``) and folded by the same code, so the
document is the one the fold of every host's logs together gives, and no log is read.

Each file is checked whole before it is folded: its format, its columns and their types, its
rows (``fold.folding.sums_checks``), its small tables against its rows, its parts against each
other (``fold.folding.sums_agreement``), and the arm record it was folded over. A request in
two files is refused (its steps would count twice, and the rows a read folds from a request's
lines in order cannot be joined across files).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from fold.errors import InputError, RefusedError
from fold.folding.accumulate import REQUEST_KEY, SCHEMAS, TABLE_KEYS, PartialFold
from fold.folding.cadence import DEFAULT_STALL_FACTOR
from fold.folding.document import Document
from fold.folding.host_sums import ARM_LEGS, FILE_SCHEMA, SMALL_TABLES
from fold.folding.log_fold import LogFold, checked_settings
from fold.folding.merge import merge_all
from fold.folding.request_positions import POSITION_LISTS
from fold.folding.result import ENGINE_TRACE, STEP_LOG
from fold.folding.small_tables import check_small_tables, named_log, read_counts_of
from fold.folding.step_intervals import COLUMNS as STEP_INTERVALS
from fold.folding.sums_agreement import cadence_columns, check_agreement, check_cadence
from fold.folding.sums_checks import check_rows
from fold.folding.uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED
from fold.folding.warm import DEFAULT_PREDICATE
from fold.inputs.acceptance import DEFAULT_WINDOW_STEPS
from fold.inputs.arm import ArmRecord
from fold.inputs.reader import ReadCounts, expand_log_paths
from fold.inputs.sums_file import REDO, SUMS_FORMAT, read_parquet_sums

SOURCES = (STEP_LOG, ENGINE_TRACE)


@dataclass(frozen=True)
class HostPart:
    """One sums file, read and checked: its partial fold and what reading its logs met."""

    path: str
    partial: PartialFold
    read_counts: dict[str, ReadCounts]
    step_source: str
    draft_positions: pl.DataFrame
    """Each request's steps by draft position (``REQUEST_KEY`` as the partial keys it, and
    ``POSITION_LISTS``), as the file's rows carry them, in the partial's order."""
    cadence: pl.DataFrame
    """The rows' cadence columns (``fold.folding.sums_agreement.cadence_columns``)."""


def fold_from_sums(
    arm: ArmRecord | str | Path,
    sums_files: list[str],
    *,
    predicate: str = DEFAULT_PREDICATE,
    window_steps: int = DEFAULT_WINDOW_STEPS,
    prefill_tokens: int | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    stall_factor: float = DEFAULT_STALL_FACTOR,
    sums: bool = False,
) -> Document:
    """The fold of the hosts' sums files (paths or globs) over the arm's legs: the document the
    fold of their logs together gives (the files' paths name each log with its sums file).
    ``sums``: the document carries the union's sums file too (``Document.sums``), the one
    ``--sums`` gives of the logs together but for the logs' names."""
    record, _ = checked_settings(arm, predicate, window_steps, resamples, seed, stall_factor)
    hosts = [read_sums_file(path, record) for path in expand_log_paths(sums_files, "sums file")]
    sources = {host.step_source for host in hosts}
    if len(sources) > 1:
        raise RefusedError(
            f"{hosts[0].path} holds {hosts[0].step_source} steps and "
            f"{next(h.path for h in hosts if h.step_source != hosts[0].step_source)} "
            "another source's: fold one source at a time (both would count the same steps)"
        )
    _refuse_shared_requests(hosts)
    fold = LogFold(
        record,
        merge_all([host.partial for host in hosts]),
        {name: counts for host in hosts for name, counts in host.read_counts.items()},
        hosts[0].step_source,
        # In the merged requests' order, so that they are put beside them without a join.
        draft_positions=_in_request_order(pl.concat([host.draft_positions for host in hosts])),
    )
    return fold.result(
        predicate,
        window_steps,
        prefill_tokens=prefill_tokens,
        resamples=resamples,
        seed=seed,
        stall_factor=stall_factor,
        sums=sums,
        check_lines=lambda lines: check_cadence(
            [(host.path, host.cadence) for host in hosts],
            fold.partial.requests,
            lines.cadence.requests if hosts[0].step_source == STEP_LOG else None,
        ),
    )


def read_sums_file(path: str, record: ArmRecord) -> HostPart:
    """The sums file at ``path``, checked whole and made into its host's partial fold."""
    read = read_parquet_sums(path)
    table = _checked_columns(path, read.table)
    partial_json = read.partial
    _check_arm(path, partial_json.get("arm_legs"), record)
    source = partial_json.get("step_source")
    if source not in SOURCES:
        raise InputError(f"{path}: step_source {source!r} is not one of {SOURCES}; {REDO}")
    check_rows(table, record.legs["index"].to_list(), source == STEP_LOG, path)
    small = check_small_tables(path, partial_json, table)
    check_agreement(path, table, small, record.legs, source == STEP_LOG)
    read_counts = read_counts_of(path, partial_json.get("read_counts"), small["files"])
    renamed = {log: named_log(log, path) for log in read_counts}
    small["files"] = small["files"].with_columns(pl.col("path").replace_strict(renamed))
    # Keyed as a partial keys its requests (a string id's seq 0, not null), in their order.
    keyed = _in_request_order(table.with_columns(pl.col("seq").fill_null(0)))
    return HostPart(
        path,
        _partial(keyed, small, path),
        {renamed[log]: counts for log, counts in read_counts.items()},
        source,
        keyed.select(*REQUEST_KEY, *POSITION_LISTS),
        cadence_columns(table),
    )


def _in_request_order(table: pl.DataFrame) -> pl.DataFrame:
    """``table`` sorted by ``REQUEST_KEY`` (each request once: ``check_rows``). A file written
    by ``--sums`` is in that order already, and sorting a load test's table whole copied every
    column (450 MB), so only the keys are sorted, and the rows gathered only when they move."""
    order = table.select(REQUEST_KEY).with_row_index("row").sort(REQUEST_KEY)["row"]
    if order.equals(pl.int_range(table.height, dtype=order.dtype, eager=True)):
        return table
    return table[order]


def _checked_columns(path: str, table: pl.DataFrame) -> pl.DataFrame:
    """``table``, whose columns are the format's, each of its type."""
    expected = pl.Schema(FILE_SCHEMA)
    if table.schema != expected:
        for name, dtype in expected.items():
            if name not in table.schema:
                raise InputError(f"{path}: column {name} is missing; {REDO}")
            if table.schema[name] != dtype:
                raise InputError(
                    f"{path}: column {name} is {table.schema[name]}, not {dtype}; {REDO}"
                )
        extra = next(name for name in table.schema if name not in expected)
        raise InputError(f"{path}: column {extra} is not in {SUMS_FORMAT}; {REDO}")
    return table


def _check_arm(path: str, found: object, record: ArmRecord) -> None:
    legs = record.legs
    expected = {
        name: legs[name].to_list() if name in legs.columns else [None] * legs.height
        for name in ARM_LEGS
    }
    if found == expected:
        return
    if not isinstance(found, dict) or set(found) != set(ARM_LEGS):
        raise InputError(f"{path}: its metadata's arm_legs is not as --sums writes it; {REDO}")
    raise RefusedError(
        f"{path} was folded over another arm record than {record.path} (the legs' windows or "
        "labels differ): fold each host's log over the gate's one record"
    )


def _partial(keyed: pl.DataFrame, small: dict[str, pl.DataFrame], path: str) -> PartialFold:
    """The host's partial fold of its rows, ``keyed`` and in order as a partial's requests."""
    numbered = keyed.with_row_index("request")
    held = numbered.filter(pl.col("held_t_ns").is_not_null())
    rows = {
        "requests": keyed.select(list(SCHEMAS["requests"])),
        "step_times": keyed.select(*REQUEST_KEY, *STEP_INTERVALS),
        "durations": keyed.filter(pl.col("timed_steps").is_not_null()).select(
            list(SCHEMAS["durations"])
        ),
        "held_lines": held.select(
            "request", pl.col("held_t_ns").alias("t_ns"), pl.col("held_tokens").alias("tokens")
        ),
        "position_rows": numbered.select("request", "position_rows")
        .explode("position_rows", keep_nulls=False, empty_as_null=False)
        .unnest("position_rows"),
        "length_rows": numbered.select("request", "length_rows")
        .explode("length_rows", keep_nulls=False, empty_as_null=False)
        .unnest("length_rows"),
        # Rows folded in order by one read of one file stand as they are (fold.folding.line_rows).
        "line_spans": numbered.filter(pl.col("held_t_ns").is_null()).select(
            "request",
            pl.lit(path, pl.Categorical).alias("path"),
            pl.lit(0, pl.Int64).alias("first_offset"),
            pl.lit(0, pl.Int64).alias("last_end"),
            pl.lit(1, pl.Int64).alias("unseeded"),
            pl.lit(False).alias("unordered"),
        ),
    }
    tables = {
        name: frame.cast(SCHEMAS[name]).select(list(SCHEMAS[name])) for name, frame in rows.items()
    }
    for name in SMALL_TABLES:
        tables[name] = small[name].sort(TABLE_KEYS[name]).select(list(SCHEMAS[name]))
    return PartialFold(**tables)


def _refuse_shared_requests(hosts: list[HostPart]) -> None:
    """A request (leg, writer, id) in two files: its steps would count twice, or its rows
    folded from its lines in order would be joined from two reads that cannot be."""
    if len(hosts) < 2:
        return
    keys = pl.concat(
        [
            host.partial.step_times.select(REQUEST_KEY).with_columns(
                pl.lit(index, pl.UInt32).alias("file")
            )
            for index, host in enumerate(hosts)
        ]
    )
    shared = keys.filter(pl.struct(REQUEST_KEY).is_duplicated())
    if not shared.height:
        return
    first = shared.row(0, named=True)
    files = shared.filter(
        pl.all_horizontal(pl.col(name).eq_missing(first[name]) for name in REQUEST_KEY)
    )["file"].to_list()
    request = first["seq"] if first["sid"] is None else repr(first["sid"])
    raise RefusedError(
        f"{hosts[files[0]].path} and {hosts[files[1]].path} both hold leg {first['leg']}'s "
        f"request {request} of writer {first['w']!r} ({shared.height} rows of shared requests): "
        "its steps would count twice; each host's sums file is of its own log, folded once"
    )
