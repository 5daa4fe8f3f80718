"""A leg's request table (RequestRows) read as the tuple of dicts it replaced: every row, by
index and slice and across the parts an iteration makes, equal to a row built by hand from the
same sums with fold.inputs.acceptance's definitions."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fold.folding import request_rows
from fold.folding.accumulate import REQUEST_KEY
from fold.folding.request_rows import RequestRows, request_tables
from fold.inputs import acceptance

REQUESTS = {
    "leg": pl.Int64,
    "w": pl.String,
    "seq": pl.UInt64,
    "sid": pl.String,
    "lines": pl.Int64,
    "steps": pl.Int64,
    "proposed": pl.Int64,
    "accepted": pl.Int64,
}
DURATIONS = {name: pl.Int64 for name in ("timed_steps", "draft_steps", "verify_steps",
                                         "draft_ns", "verify_ns")}  # fmt: skip


def table(rows: list[tuple]) -> dict[int, RequestRows]:
    requests = pl.DataFrame(rows, schema=REQUESTS, orient="row")
    durations = pl.DataFrame(schema={**{k: REQUESTS[k] for k in REQUEST_KEY}, **DURATIONS})
    return request_tables(requests, None, durations)


def by_hand(w: str, seq: int, sid: str | None, lines: int, steps: int, p: int, a: int) -> dict:
    return {
        "w": w,
        "seq": seq if sid is None else sid,
        "lines": lines,
        "steps": steps,
        "proposed": p,
        "accepted": a,
        "accept_rate": acceptance.accept_rate(a, p),
        "mean_acceptance_length": acceptance.mean_acceptance_length(a, steps),
        "cadence": None,
    }


request = st.tuples(
    st.sampled_from(["a", "b"]),
    st.integers(0, 2**64 - 1),
    st.none() | st.text(max_size=3),
    st.integers(0, 50),
    st.integers(0, 50),
    st.integers(0, 400),
    st.integers(0, 400),
).map(lambda r: (*r[:5], r[5], min(r[5], r[6])))


@given(st.lists(request, max_size=30, unique_by=lambda r: (r[0], r[1] if r[2] is None else r[2])))
@settings(max_examples=150, deadline=None)
def test_rows_read_as_the_dicts_they_replaced(found):
    rows = [(0, w, 0 if sid is not None else seq, sid, *rest) for w, seq, sid, *rest in found]
    tables = table(rows)
    expected = sorted(
        (by_hand(w, seq, sid, *rest) for w, seq, sid, *rest in found),
        # REQUEST_KEY order: writer, then integer ids (sid null first), then string ids
        key=lambda r: (r["w"], isinstance(r["seq"], str), r["seq"]),
    )
    got = tables.get(0, request_rows.EMPTY)
    assert [dict(row) for row in got] == expected
    assert got.to_json() == expected
    assert len(got) == len(expected)
    if expected:
        assert dict(got[-1]) == expected[-1]
        assert dict(got[0]) == expected[0]
        assert [dict(row) for row in got[1:3]] == expected[1:3]
    with pytest.raises(IndexError):
        got[len(expected)]
    assert got == expected
    assert got == table(rows).get(0, request_rows.EMPTY)


def test_an_iteration_crosses_its_parts_without_losing_or_repeating_a_row(monkeypatch):
    monkeypatch.setattr(request_rows, "_ROWS_AT_ONCE", 7)
    rows = [(0, "w", seq, None, 1, 1, 3, seq % 4) for seq in range(23)]
    got = table(rows)[0]
    assert [row["seq"] for row in got] == list(range(23))
    assert [row["accepted"] for row in got] == [seq % 4 for seq in range(23)]


def test_a_table_is_not_changed_through_what_it_hands_out():
    got = table([(0, "w", 1, None, 2, 2, 4, 1)])[0]
    copy = got.table()
    copy[0, "accepted"] = 4
    got.column("accepted")[0] = 4
    assert got[0]["accepted"] == 1
    with pytest.raises(TypeError):
        got[0]["accepted"] = 3  # type: ignore[index]


def test_a_legs_plain_form_carries_its_rows():
    from pathlib import Path

    from fold.api import fold_acceptance
    from fold.folding.leg_figures import plain
    from fold.present.output import dumps

    root = Path(__file__).resolve().parents[1]
    result = fold_acceptance(
        str(root / "fixtures/our-arm.json"), [str(root / "fixtures/steps.jsonl")]
    )
    leg = result.legs[1]
    rows = [dict(row) | {"cadence": dict(row["cadence"])} for row in leg["requests"]]
    assert plain(leg)["requests"] == rows == leg.to_json()["requests"]
    assert len(rows) == 3 and dumps(leg)  # the leg writes as JSON, its requests in it


# ----------------------------------------------------------------------------------------------
# The cadence and the durations put beside the rows: in place when their rows are the table's,
# by a left join otherwise; both give the same table
# ----------------------------------------------------------------------------------------------


def _cadence_of(requests: pl.DataFrame, seed: int) -> pl.DataFrame:
    from fold.folding.cadence import RAW_SCHEMA

    n = requests.height
    return requests.select(REQUEST_KEY).with_columns(
        pl.Series(name, [(i * 7919 + seed * 31 + k) % 1000 for i in range(n)]).cast(dtype)
        for k, (name, dtype) in enumerate(RAW_SCHEMA.items())
    )


@given(
    st.lists(request, max_size=30, unique_by=lambda r: (r[0], r[1] if r[2] is None else r[2])),
    st.integers(0, 100),
    st.randoms(use_true_random=False),
)
@settings(max_examples=60)
def test_the_cadence_and_durations_land_on_their_own_rows_whatever_their_order(rows, seed, rng):
    requests = pl.DataFrame([(0, *row) for row in rows], schema=REQUESTS, orient="row").sort(
        REQUEST_KEY
    )
    cadence = _cadence_of(requests, seed)
    kept = [i for i in range(requests.height) if rng.random() < 0.5]
    durations = requests.select(REQUEST_KEY)[kept].with_columns(
        pl.lit(i, dtype=pl.Int64).alias(name) for i, name in enumerate(DURATIONS, 1)
    )
    aligned = request_tables(requests, cadence, durations)
    order = list(range(cadence.height))
    rng.shuffle(order)
    shuffled = request_tables(requests, cadence[order], durations[::-1])
    fewer = request_tables(requests, cadence[kept], durations)
    assert aligned.keys() == shuffled.keys() == fewer.keys()
    for leg, found in aligned.items():
        assert found == shuffled[leg]
        # by hand: each row's cadence is the one made for its key; durations only where kept
        table = found._table
        assert table["intervals"].to_list() == cadence["intervals"].to_list()
        assert table["interval_max_ns"].to_list() == cadence["max_ns"].to_list()
        assert table["draft_ns"].to_list() == [
            4 if i in kept else None for i in range(requests.height)
        ]
        missing = fewer[leg]._table
        assert missing["intervals"].to_list() == [
            cadence["intervals"][i] if i in kept else 0 for i in range(requests.height)
        ]
        assert missing["interval_max_ns"].to_list() == [
            cadence["max_ns"][i] if i in kept else None for i in range(requests.height)
        ]


beside_keys = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.sampled_from(["0000000000000001", "00000000000000ff", "é"]),
        st.one_of(st.none(), st.sampled_from(["", "7", "ࠀ"])),
        st.one_of(st.none(), st.integers(0, 2**64 - 1), st.integers(0, 3)),
    ),  # in REQUEST_KEY's order: leg, w, sid, seq
    unique=True,
    max_size=12,
)


@given(beside_keys, beside_keys, st.sampled_from(["drawn", "same", "empty table"]))
def test_beside_is_a_left_join_by_the_whole_key(left, right, case):
    """Whatever the two tables' keys (the same rows in the same order, some, none, or an empty
    table), ``beside`` gives every row of the table once, in its order, with the other's value
    for that very key (nulls matched as equal), else null: a left join written out here."""
    if case == "same":
        right = list(left)
    elif case == "empty table":
        left = []
    key = {name: REQUESTS[name] for name in REQUEST_KEY}
    table = pl.DataFrame(
        [(*k, i) for i, k in enumerate(left)], schema={**key, "mine": pl.Int64}, orient="row"
    )
    other = pl.DataFrame(
        [(*k, 100 + i) for i, k in enumerate(right)],
        schema={**key, "theirs": pl.Int64},
        orient="row",
    )
    found = request_rows.beside(table, other)
    assert found.columns == [*REQUEST_KEY, "mine", "theirs"]
    assert found.schema["theirs"] == pl.Int64
    theirs = {k: 100 + i for i, k in enumerate(right)}
    assert found.rows() == [(*k, i, theirs.get(k)) for i, k in enumerate(left)]
