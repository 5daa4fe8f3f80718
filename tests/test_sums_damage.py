"""A damaged or hand-made sums file (docs/sums.md): each invariant the merge and the figures
assume is planted broken in a file --sums wrote, one at a time, and --from-sums refuses it
with the file, the place, the reason and the documented exit code, never a traceback."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import orjson
import polars as pl
import pytest

from fold.api import fold_acceptance
from fold.cli import main as cli
from fold.folding.host_sums import RefusedWithSums, parquet_with_digest
from fold.folding.step_intervals import LONG
from fold.inputs.sums_file import PARTIAL_KEY, SUMS_FORMAT, SUMS_FORMAT_KEY
from fold.present.sums_file import sums_parquet

ROOT = Path(__file__).resolve().parents[1]
ARM = ROOT / "fixtures" / "our-arm.json"
STEPS = ROOT / "fixtures" / "steps.jsonl"

Plant = Callable[[pl.DataFrame, dict], tuple[pl.DataFrame, dict]]


def _first(column: str, value: pl.Expr | object) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """The table with ``column`` of its first (or first held) row set to ``value``."""

    def planted(table: pl.DataFrame) -> pl.DataFrame:
        held = table["held_t_ns"].is_not_null()
        index = int(held.arg_true()[0]) if held.any() else 0
        chosen = pl.int_range(pl.len()) == index
        expr = value if isinstance(value, pl.Expr) else pl.lit(value, table.schema[column])
        return table.with_columns(
            pl.when(chosen).then(expr).otherwise(pl.col(column)).alias(column)
        )

    return planted


def rows(change: Callable[[pl.DataFrame], pl.DataFrame]) -> Plant:
    return lambda table, meta: (change(table), meta)


def meta(change: Callable[[dict], None]) -> Plant:
    def planted(table: pl.DataFrame, found: dict) -> tuple[pl.DataFrame, dict]:
        change(found)
        return table, found

    return planted


def _set(table: str, column: str, value: object, index: int = 0) -> Callable[[dict], None]:
    def change(found: dict) -> None:
        found[table][column][index] = value

    return change


def _add(table: str, column: str, amount: int) -> Callable[[dict], None]:
    def change(found: dict) -> None:
        found[table][column][0] += amount

    return change


def _writer_twice(found: dict) -> None:
    for column in found["writers"]:
        found["writers"][column][1] = found["writers"][column][0]


def _set_key(key: str, value: object) -> Callable[[dict], None]:
    return lambda found: found.__setitem__(key, value)


ROW_PLANTS: dict[str, tuple[Plant, int, str]] = {
    "steps past lines": (rows(_first("steps", pl.col("lines") + 1)), 1, "steps (S) exceed"),
    "a leg not in the arm": (rows(_first("leg", 99)), 2, "not one of the arm record's legs"),
    "two ids": (rows(_first("sid", "7")), 2, "both an integer id (seq) and a string id"),
    "no lines": (rows(_first("lines", 0)), 2, "lines is not between 1"),
    "a null count": (rows(_first("accepted", None)), 2, "accepted is null"),
    "A above P": (
        rows(_first("accepted", pl.col("proposed") + 1)),
        1,
        "S, P and A cannot be true together",
    ),
    "an interval too few": (
        rows(_first("gaps", pl.col("gaps").list.slice(1))),
        1,
        "not one fewer than its lines",
    ),
    "a long interval unwritten": (
        rows(_first("gaps", pl.concat_list(pl.lit(LONG, pl.UInt32), pl.col("gaps").list.slice(1)))),
        1,
        "are not the gaps written 2^32 - 1",
    ),
    "a short long interval": (
        rows(_first("long_gaps", pl.lit([5], pl.List(pl.Int64)))),
        2,
        "a long interval is under 2^32 - 1",
    ),
    "past the last time": (
        rows(_first("first_ns", 2**63 - 2)),
        1,
        "first_ns is not first_t_ns",
    ),
    "no first line": (rows(_first("first_t_ns", None)), 2, "first_t_ns and first_n are null"),
    "positions short of S": (
        rows(
            _first(
                "position_rows",
                pl.col("position_rows").list.eval(
                    pl.struct(
                        pl.element().struct.field("bucket"),
                        pl.element().struct.field("steps") + 1,
                        pl.element().struct.field("proposed") + 1,
                        pl.element().struct.field("accepted"),
                    )
                ),
            )
        ),
        1,
        "its position rows do not add up to its S, P and A",
    ),
    "a bucket past the last": (
        rows(
            _first(
                "position_rows",
                pl.col("position_rows").list.eval(
                    pl.element().struct.with_fields(pl.lit(48, pl.Int64).alias("bucket"))
                ),
            )
        ),
        2,
        "a position row is out of range",
    ),
    "a position row accepting more than it proposed": (
        rows(
            _first(
                "position_rows",
                pl.col("position_rows").list.eval(
                    pl.element().struct.with_fields(
                        (pl.element().struct.field("proposed") + 1).alias("accepted")
                    )
                ),
            )
        ),
        1,
        "a position row's S, P and A cannot be true together",
    ),
    "a bucket twice": (
        rows(
            _first(
                "position_rows",
                pl.concat_list(pl.col("position_rows"), pl.col("position_rows")),
            )
        ),
        1,
        "buckets do not increase",
    ),
    "a length of 0": (
        rows(
            _first(
                "length_rows",
                pl.col("length_rows").list.eval(
                    pl.element().struct.with_fields(pl.lit(0, pl.Int64).alias("length"))
                ),
            )
        ),
        2,
        "a length row is out of range",
    ),
    "more intervals than lines": (
        rows(
            _first(
                "length_rows",
                pl.col("length_rows").list.eval(
                    pl.element().struct.with_fields(pl.lit(10**6, pl.Int64).alias("intervals"))
                ),
            )
        ),
        1,
        "hold more intervals or time than its steps span",
    ),
    "held lines and rows": (
        rows(_first("held_t_ns", pl.lit([1], pl.List(pl.Int64)))),
        1,
        "held_t_ns and held_tokens are not both null",
    ),
    "one duration": (rows(_first("timed_steps", 1)), 1, "are not all null or all set"),
    "a first duration alone": (
        rows(_first("first_draft_ns", 5)),
        2,
        "its first line's durations are out of range or set without",
    ),
    "a request twice": (
        rows(lambda table: pl.concat([table, table.head(1)])),
        1,
        "the request has two rows",
    ),
    "an extra column": (
        rows(lambda table: table.with_columns(pl.lit(1).alias("extra"))),
        2,
        "column extra is not in fold-acceptance-sums/3",
    ),
    "a column missing": (rows(lambda table: table.drop("gaps")), 2, "column gaps is missing"),
    "a column of another type": (
        rows(lambda table: table.with_columns(pl.col("lines").cast(pl.Int32))),
        2,
        "column lines is Int32, not Int64",
    ),
}
HELD_PLANTS: dict[str, tuple[Plant, int, str]] = {
    "a held time moved": (
        rows(_first("held_t_ns", pl.col("held_t_ns").list.eval(pl.element() + 1))),
        1,
        "its held lines' times are not the times of its intervals",
    ),
    "a held line short": (
        rows(_first("held_tokens", pl.col("held_tokens").list.slice(1))),
        1,
        "its held lines are not as many as its lines",
    ),
    "held counts past P": (
        rows(_first("held_tokens", pl.col("held_tokens").list.eval(pl.element() + 1))),
        1,
        "its held lines' counts do not add up",
    ),
    "a held step accepting more than it drafted": (
        rows(_first("held_tokens", pl.col("held_tokens").list.eval(pl.element() + (5 << 17)))),
        2,
        "a held line's counts are out of range",
    ),
}
META_PLANTS: dict[str, tuple[Plant, int, str]] = {
    "a leg's S": (
        meta(_add("legs", "steps", 1)),
        1,
        "the metadata's legs do not add up to its rows",
    ),
    "the histogram": (
        meta(_add("histogram", "count", 1)),
        1,
        "the metadata's legs do not add up to its histogram",
    ),
    "a bin's S": (meta(_add("bins", "steps", 1)), 1, "do not add up to its bins"),
    "a bin accepting more than it proposed": (
        meta(lambda found: found["bins"]["accepted"].__setitem__(0, 10**6)),
        1,
        "a time bin's S, P and A cannot be true together",
    ),
    "a bin past the last": (meta(_set("bins", "bin", 512)), 2, "a bin is out of range"),
    "the files' lines": (
        meta(_add("files", "unattributed", 1)),
        1,
        "a file's lines are not its attributed",
    ),
    "the writers' lines": (meta(_add("writers", "lines", 1)), 1, "its writers' lines are not"),
    "a writer twice": (meta(_writer_twice), 2, "names a w twice"),
    "a largest draft past the cap": (
        meta(_set("legs", "max_proposed", 70000)),
        2,
        "a max_proposed is out of range",
    ),
    "a step accepting more than proposed": (
        meta(_set("histogram", "accepted", 9)),
        1,
        "a step accepts more than it proposed",
    ),
    "a string count": (
        meta(_set("legs", "lines", "47")),
        2,
        "the metadata's legs is not as --sums writes it",
    ),
    "no read counts": (
        meta(lambda found: found.pop("read_counts")),
        2,
        "does not name every file its files table names",
    ),
    "a step source": (meta(_set_key("step_source", "oracle")), 2, "step_source 'oracle'"),
    "no arm": (meta(_set_key("arm_legs", [])), 2, "arm_legs is not as --sums writes it"),
    "another arm": (
        meta(lambda found: found["arm_legs"]["end_ns"].__setitem__(0, 1)),
        1,
        "was folded over another arm record",
    ),
}


def _written(log: Path, folder: Path) -> tuple[pl.DataFrame, dict]:
    try:
        sums = fold_acceptance(str(ARM), [str(log)], sums=True, resamples=0).sums
    except RefusedWithSums as refused:  # a host refused alone still writes
        sums = refused.sums
    assert sums is not None
    path = folder / "good.parquet"
    path.write_bytes(sums_parquet(sums))
    return pl.read_parquet(path), orjson.loads(pl.read_parquet_metadata(path)[PARTIAL_KEY])


def _check(tmp_path: Path, capsys, log: Path, plant: Plant, code: int, words: str) -> None:
    table, found = _written(log, tmp_path)
    assert cli([str(ARM), "--from-sums", str(tmp_path / "good.parquet"), "--quiet"]) == 0
    capsys.readouterr()
    table, found = plant(table, found)
    bad = tmp_path / "bad.parquet"
    metadata = {SUMS_FORMAT_KEY: SUMS_FORMAT, PARTIAL_KEY: orjson.dumps(found).decode()}
    bad.write_bytes(parquet_with_digest(table, metadata))
    got = cli([str(ARM), "--from-sums", str(bad), "--quiet"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert words in err, err
    assert f"{bad}" in err
    assert got == code, err


@pytest.mark.parametrize("name", ROW_PLANTS)
def test_a_broken_row_is_refused_with_its_place(tmp_path, capsys, name):
    plant, code, words = ROW_PLANTS[name]
    _check(tmp_path, capsys, STEPS, plant, code, words)


@pytest.mark.parametrize("name", HELD_PLANTS)
def test_a_broken_held_request_is_refused(tmp_path, capsys, name):
    lines = STEPS.read_bytes().splitlines(keepends=True)
    random.Random(3).shuffle(lines)
    log = tmp_path / "shuffled.jsonl"
    log.write_bytes(b"".join(lines))
    plant, code, words = HELD_PLANTS[name]
    _check(tmp_path, capsys, log, plant, code, words)


@pytest.mark.parametrize("name", META_PLANTS)
def test_a_broken_small_table_is_refused(tmp_path, capsys, name):
    plant, code, words = META_PLANTS[name]
    _check(tmp_path, capsys, STEPS, plant, code, words)


def test_a_row_error_names_the_row_its_leg_writer_and_request(tmp_path, capsys):
    plant, _, _ = ROW_PLANTS["steps past lines"]
    _check(tmp_path, capsys, STEPS, plant, 1, "steps (S) exceed its lines")
    table = pl.read_parquet(tmp_path / "good.parquet")
    first = table.row(0, named=True)
    assert cli([str(ARM), "--from-sums", str(tmp_path / "bad.parquet"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert (
        f"{tmp_path / 'bad.parquet'}: row 1 (leg {first['leg']}, writer '{first['w']}', "
        f"request {first['seq']}): steps (S) exceed its lines"
    ) in err


@pytest.mark.parametrize("damage", ["a byte flipped", "cut short", "a page zeroed"])
def test_pages_changed_after_they_were_written_are_refused_before_they_are_decoded(
    tmp_path, capsys, damage
):
    """The digest --sums writes beside the pages: a copy cut short or changed is refused
    without handing its pages to the Parquet reader (which can abort on them)."""
    _written(STEPS, tmp_path)
    data = bytearray((tmp_path / "good.parquet").read_bytes())
    if damage == "a byte flipped":
        data[100] ^= 0x10
    elif damage == "cut short":
        data = data[: len(data) // 2]
    else:
        data[200:264] = bytes(64)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    assert cli([str(ARM), "--from-sums", str(bad), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert (
        f"{bad}: its pages are not the ones --sums wrote" in err
        or f"{bad}: not a Parquet file this tool can read" in err
    ), err


def test_a_first_duration_past_the_requests_sum_is_refused(tmp_path, capsys):
    """A request's first line's drafting cannot take longer than all its lines' drafting: the
    step split would give a negative share."""
    from tests.step_logs import timed_copy

    log = timed_copy(STEPS, tmp_path / "timed.jsonl")
    plant = rows(_first("first_draft_ns", pl.col("draft_ns") + 1))
    _check(tmp_path, capsys, log, plant, 1, "its first line's durations exceed the request's sums")
