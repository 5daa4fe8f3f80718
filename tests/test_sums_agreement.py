"""A sums file whose parts disagree (docs/sums.md, ``fold.folding.sums_agreement``), and a row's
steps by draft position that cannot be: each planted, one at a time, in a file --sums wrote
from the shipped fixture, and refused by --from-sums with the file, the reason and the
documented exit code. Also the rules a plant had not reached before: a last step time past
2^63 - 1 ns, and timed steps that cannot be."""

from __future__ import annotations

import orjson
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fold.api import fold_acceptance, fold_from_sums
from fold.cli import main as cli
from fold.errors import RefusedError
from fold.folding.host_sums import RefusedWithSums, parquet_with_digest
from fold.inputs.sums_file import PARTIAL_KEY, SUMS_FORMAT_KEY
from fold.present.sums_file import sums_parquet
from tests.test_from_sums import NAMED, host_logs, plain, sums_of
from tests.test_sums_damage import ARM, STEPS, Plant, _check, _first, meta, rows


def _with_element(column: str, index: int, change: pl.Expr) -> pl.Expr:
    """List ``column`` with its element ``index`` replaced by ``change`` (of ``pl.element()``)."""
    return pl.col(column).list.eval(
        pl.when(pl.int_range(pl.len()) == index).then(change).otherwise(pl.element())
    )


def _reshape_histogram(found: dict) -> None:
    """Leg 0's histogram with two of its (4 proposed, 2 accepted) steps made one that accepted
    1 and one that accepted 3: its S, P, A and largest draft are as they were."""
    histogram = found["histogram"]
    entries = list(zip(histogram["leg"], histogram["proposed"], histogram["accepted"], strict=True))
    for accepted, change in ((1, 1), (2, -2), (3, 1)):
        histogram["count"][entries.index((0, 4, accepted))] += change


def _length(value: int) -> pl.Expr:
    return pl.col("length_rows").list.eval(
        pl.element().struct.with_fields(pl.lit(value, pl.Int64).alias("length"))
    )


PLANTS: dict[str, tuple[Plant, int, str]] = {
    "a position count below 0": (
        rows(_first("accepted_past", _with_element("accepted_past", 1, pl.lit(-1)))),
        2,
        "accepted_past or proposed_past holds a count out of range",
    ),
    "lists of two lengths": (
        rows(_first("accepted_past", pl.col("accepted_past").list.concat(pl.lit([0])))),
        1,
        "are not as long as each other",
    ),
    "no lists where it has steps": (
        rows(
            lambda table: _first("proposed_past", pl.lit([], pl.List(pl.Int64)))(
                _first("accepted_past", pl.lit([], pl.List(pl.Int64)))(table)
            )
        ),
        1,
        "are empty where it has steps",
    ),
    "a position past its largest proposal": (
        rows(
            lambda table: _first("proposed_past", pl.col("proposed_past").list.concat(pl.lit([0])))(
                _first("accepted_past", pl.col("accepted_past").list.concat(pl.lit([0])))(table)
            )
        ),
        1,
        "do not add up to its S, P and A, or run past its largest proposal",
    ),
    "a drafted position counted once more": (
        rows(_first("proposed_past", _with_element("proposed_past", 1, pl.element() + 1))),
        1,
        "do not add up to its S, P and A",
    ),
    "positions growing": (
        rows(_first("accepted_past", pl.col("accepted_past").list.reverse())),
        1,
        "its steps by draft position grow with the position",
    ),
    "a length past its largest proposal": (
        rows(_first("length_rows", _length(65536))),
        1,
        "a length row's draft length is longer than the request's largest proposal",
    ),
    "the histogram reshaped, S, P and A kept": (
        meta(_reshape_histogram),
        1,
        "are not what the metadata's histogram says",
    ),
    "intervals to a length the leg never drafted": (
        rows(_first("length_rows", _length(3))),
        1,
        "leg 0's rows hold more intervals to steps of draft length 3",
    ),
    "a writer renamed": (
        meta(lambda found: found["writers"]["w"].__setitem__(0, "nobody")),
        1,
        "of its rows is not in the metadata's writers",
    ),
    "a row after its leg's window": (
        rows(
            lambda table: _first("first_t_ns", pl.col("first_t_ns") + 10**15)(
                _first("first_ns", pl.col("first_ns") + 10**15)(table)
            )
        ),
        1,
        "step times outside the leg's window",
    ),
    "another run": (rows(_first("run", pl.col("run") + 100)), 1, "has another run than"),
    "a row before its leg's window": (
        rows(
            lambda table: _first("first_t_ns", pl.col("first_t_ns") - 10**15)(
                _first("first_ns", pl.col("first_ns") - 10**15)(table)
            )
        ),
        1,
        "step times outside the leg's window",
    ),
    "a writer that numbered no line as high as a row's first": (
        meta(lambda found: found["writers"]["max_n"].__setitem__(0, 0)),
        1,
        "numbered none as high as a row's first line",
    ),
    "a null among the positions": (
        rows(_first("accepted_past", _with_element("accepted_past", 1, pl.lit(None, pl.Int64)))),
        2,
        "accepted_past holds a null",
    ),
    "a null among the intervals": (
        rows(
            _first(
                "gaps",
                pl.col("gaps").list.eval(
                    pl.when(pl.int_range(pl.len()) == 0).then(None).otherwise(pl.element())
                ),
            )
        ),
        2,
        "gaps holds a null",
    ),
    "one row of a warm leg not warm": (
        rows(
            lambda table: table.with_columns(pl.lit(True).alias("warm")).with_columns(
                pl.when(pl.int_range(pl.len()) == 0)
                .then(False)
                .otherwise(pl.col("warm"))
                .alias("warm")
            )
        ),
        1,
        "a leg's rows are not all warm or all not warm",
    ),
    "a cadence column not its intervals'": (
        rows(_first("interval_median_ns", pl.col("interval_median_ns") + 1)),
        1,
        "its interval_median_ns is",
    ),
    "a window not its leg's": (
        rows(_first("window_ns", pl.col("window_ns") * 2)),
        1,
        "its window_ns is",
    ),
    "a last step time past 2^63 - 1 ns": (
        rows(lambda table: _first("first_t_ns", 2**63 - 2)(_first("first_ns", 2**63 - 2)(table))),
        1,
        "its last step time is past 2^63 - 1 ns",
    ),
}


@pytest.mark.parametrize("name", PLANTS)
def test_parts_that_disagree_are_refused(tmp_path, capsys, name):
    plant, code, words = PLANTS[name]
    _check(tmp_path, capsys, STEPS, plant, code, words)


@pytest.mark.parametrize(
    ("column", "words"),
    [
        ("timed_steps", "its timed steps cannot be true together"),
        ("draft_steps", "its timed steps cannot be true together"),
    ],
)
def test_timed_steps_that_cannot_be_are_refused(tmp_path, capsys, column, words):
    """More steps timed whole than drafted, or drafted lines past the request's lines."""
    from tests.step_logs import timed_copy

    log = timed_copy(STEPS, tmp_path / "timed.jsonl")
    plant = rows(_first(column, pl.col("lines") + 1))
    _check(tmp_path, capsys, log, plant, 1, words)


def _broken(row: dict) -> list[str]:
    """The words of every position-list rule ``row`` breaks (its steps, P, A, lists and
    length rows), evaluated alone."""
    from fold.folding.sums_checks import _position_list_rules

    table = pl.DataFrame(
        [row],
        schema={
            "steps": pl.Int64,
            "proposed": pl.Int64,
            "accepted": pl.Int64,
            "accepted_past": pl.List(pl.Int64),
            "proposed_past": pl.List(pl.Int64),
            "length_rows": pl.List(pl.Struct({"length": pl.Int64})),
        },
    )
    rules = _position_list_rules()
    held = table.select(
        [rule.holds.fill_null(False).alias(str(i)) for i, rule in enumerate(rules)]
    ).row(0)
    return [rule.words for rule, holds in zip(rules, held, strict=True) if not holds]


def _row(steps: list[tuple[int, int]]) -> dict:
    """A request's row from its steps' (proposed, accepted), lists by the definition."""
    longest = max((p for p, _ in steps), default=0)
    return {
        "steps": sum(1 for p, _ in steps if p > 0),
        "proposed": sum(p for p, _ in steps),
        "accepted": sum(a for _, a in steps),
        "accepted_past": [sum(1 for _, a in steps if a > i) for i in range(longest)],
        "proposed_past": [sum(1 for p, _ in steps if p > i) for i in range(longest)],
        "length_rows": [{"length": p} for p in sorted({p for p, _ in steps if p > 0})],
    }


def test_accepting_past_a_position_more_often_than_drafting_it_is_refused():
    # three steps, drafting position 1 once and accepting past it twice: each list keeps its
    # order, they add up to S = 3, P = 4 and A = 4, and only their positions together cannot be
    assert _broken(_row([(2, 2), (1, 1), (1, 1)])) == []
    row = {
        "steps": 3,
        "proposed": 4,
        "accepted": 4,
        "accepted_past": [2, 2],
        "proposed_past": [3, 1],
        "length_rows": [],
    }
    assert _broken(row) == [
        "its steps by draft position grow with the position, or accept past a position "
        "more often than they drafted it"
    ]


steps = st.integers(0, 6).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p)))


@given(st.lists(steps, max_size=10))
def test_lists_made_from_steps_keep_every_rule(request_steps):
    """No false refusal: a request's lists as its steps give them pass every rule."""
    assert _broken(_row(request_steps)) == []


def test_a_host_folded_with_another_stall_factor_is_not_refused(tmp_path):
    """The stalls depend on the host's --stall-factor, which the file does not record: a union
    folded with another factor checks every cadence column but those, and folds; its stalls
    are the union's factor's, as the logs' fold with that factor gives them."""
    host = tmp_path / "host.parquet"
    document = fold_acceptance(str(ARM), [str(STEPS)], sums=True, resamples=0, stall_factor=1.01)
    assert document.sums is not None
    host.write_bytes(sums_parquet(document.sums))
    assert pl.read_parquet(host)["stalls"].sum() > 0
    merged = fold_from_sums(str(ARM), [str(host)], resamples=0, stall_factor=8.0)
    logs = fold_acceptance(str(ARM), [str(STEPS)], resamples=0, stall_factor=8.0)
    assert plain(merged) == plain(logs)


def test_proposals_of_the_largest_draft_fold_from_their_file_as_from_their_log(tmp_path):
    """Steps of 2^16 proposed tokens (the most a step may carry): the file's steps by draft
    position are checked against its histogram position by position, as many positions as
    the longest proposal, and the file folds as its log does (both refused alike here: the
    log serves one leg of the fixture's gate)."""
    log = tmp_path / "steps.jsonl"
    first = orjson.loads(STEPS.read_bytes().splitlines()[0])
    lines = [
        {**first, "n": n, "t_ns": first["t_ns"] + n, "proposed": 65536, "accepted": n * 331 % 65537,
         "emitted": n * 331 % 65537 + 1}
        for n in range(200)
    ]  # fmt: skip
    log.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    host = tmp_path / "host.parquet"
    try:
        sums = fold_acceptance(str(ARM), [str(log)], sums=True, resamples=0).sums
    except RefusedWithSums as refused:
        sums = refused.sums
    assert sums is not None
    host.write_bytes(sums_parquet(sums))
    assert pl.read_parquet(host)["proposed_past"].list.len().to_list() == [65536]
    outcomes = []
    for fold in (
        lambda: fold_from_sums(str(ARM), [str(host)], resamples=0),
        lambda: fold_acceptance(str(ARM), [str(log)], resamples=0),
    ):
        try:
            outcomes.append(plain(fold()))
        except RefusedError as error:
            outcomes.append(NAMED.sub("", str(error)).encode())
    assert outcomes[0] == outcomes[1]


def test_a_cadence_column_not_its_intervals_is_refused_among_other_files(tmp_path, capsys):
    """In a union of two hosts' files the cadence is checked row by row against the union's
    fold (a join by request, where one file alone lines up with it): the damaged file is
    named, and the row with the value its intervals give."""
    logs = host_logs(STEPS, tmp_path / "logs", 2)
    good, other = (sums_of(str(ARM), log, tmp_path / f"{log.stem}.parquet") for log in logs)
    found = pl.read_parquet_metadata(other)
    table = pl.read_parquet(other)
    damaged = _first("interval_median_ns", pl.col("interval_median_ns") + 1)(table)
    bad = tmp_path / "bad.parquet"
    metadata = {key: found[key] for key in (SUMS_FORMAT_KEY, PARTIAL_KEY)}
    bad.write_bytes(parquet_with_digest(damaged, metadata))
    assert cli([str(ARM), "--from-sums", str(good), "--from-sums", str(other), "--quiet"]) == 0
    capsys.readouterr()
    code = cli([str(ARM), "--from-sums", str(good), "--from-sums", str(bad), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err
    median = table["interval_median_ns"][0]
    assert f"{bad}: row 1 (leg {table['leg'][0]}): its interval_median_ns is {median + 1}" in err
    assert f"give {median}" in err
