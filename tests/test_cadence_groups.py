"""A group's medians (fold.folding.cadence_groups), taken a figure at a time in numpy, are
polars' own: held to ``median`` over the same requests' figures, group by group, and
``_median`` to polars' ``Series.median`` over any values, nulls and ties included."""

from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from fold.folding.cadence import KEY, RAW_SCHEMA
from fold.folding.cadence_groups import REQUEST_FIGURES, _median, _request_columns, group_medians

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
values = st.lists(
    st.one_of(
        st.none(),
        finite,
        st.integers(-(2**53), 2**53).map(float),
        st.sampled_from([0.1, 0.7, 1e-9]),
    ),
    max_size=30,
)


@given(values)
def test_a_median_is_polars_median(drawn):
    import numpy as np

    series = pl.Series(drawn, dtype=pl.Float64)
    assert _median(np.array([np.nan if v is None else v for v in drawn], dtype=np.float64)) == (
        series.median()
    )


nanoseconds = st.integers(0, 10**13)
request = st.fixed_dictionaries(
    {
        "leg": st.integers(0, 4),
        "lines": st.integers(1, 50),
        "intervals": st.integers(0, 49),
        "first_step_ns": nanoseconds,
        "decode_ns": st.one_of(st.just(0), nanoseconds),
        "tail_ns": nanoseconds,
        "window_ns": nanoseconds,
        "median_ns": st.one_of(st.none(), nanoseconds.map(lambda n: n / 2)),
        "p90_ns": st.one_of(st.none(), nanoseconds),
        "p99_ns": st.one_of(st.none(), nanoseconds),
        "max_ns": st.one_of(st.none(), nanoseconds),
        "stalls": st.one_of(st.none(), st.integers(0, 5)),
        "stall_ns": st.one_of(st.none(), nanoseconds.map(lambda n: n / 2)),
    }
)
group = st.lists(st.integers(0, 5), max_size=6).map(lambda legs: sorted(set(legs)))


@given(st.lists(request, max_size=40), st.lists(group, max_size=8))
def test_each_groups_medians_are_polars_over_its_requests(rows, groups):
    """Any requests in key order (several a leg, some legs without any), any groups (one leg,
    several, every leg, a leg with no request, none): each figure's median over a group's
    requests is polars' median of that figure over those very rows, None without a value."""
    groups = [*groups, [0, 1, 2, 3, 4], [0], [5]]
    rows = [{**row, "w": "0000000000000001", "sid": None, "seq": i} for i, row in enumerate(rows)]
    requests = pl.DataFrame(
        rows,
        schema={
            "leg": pl.Int64,
            "w": pl.String,
            "sid": pl.String,
            "seq": pl.UInt64,
            **RAW_SCHEMA,
        },
    ).sort(KEY)
    found = group_medians(requests, groups)
    figures = requests.with_columns(_request_columns())
    for legs, medians in zip(groups, found, strict=True):
        mine = figures.filter(pl.col("leg").is_in(legs))
        assert set(medians) == set(REQUEST_FIGURES)
        for name in REQUEST_FIGURES:
            wanted = mine[name].cast(pl.Float64).median() if mine.height else None
            assert medians[name] == wanted, (legs, name)


def test_requests_out_of_leg_order_are_refused():
    """A leg's rows are taken as one run of the key-ordered table: rows out of that order are
    refused, not read as several legs."""
    import pytest

    rows = [{"leg": leg, **dict.fromkeys(RAW_SCHEMA, 1)} for leg in (1, 0, 1)]
    requests = pl.DataFrame(rows, schema={"leg": pl.Int64, **RAW_SCHEMA})
    with pytest.raises(ValueError, match="sorted by leg"):
        group_medians(requests, [[0], [1]])
