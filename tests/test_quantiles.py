"""fold.folding.quantiles against numpy.quantile, the rule it reproduces, bit for bit."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fold.folding.quantiles import linear_quantiles, row_medians


def bits(values: list[float]) -> list[bytes]:
    # Every NaN alike: a NaN's payload is not a figure (the JSON writes null).
    return [b"nan" if value != value else struct.pack("<d", value) for value in values]


def numpy_quantiles(values: np.ndarray, quantiles: list[float]) -> list[float]:
    with np.errstate(invalid="ignore"):  # numpy warns of the NaN between two infinities
        return [float(value) for value in np.quantile(values, quantiles)]


floats = hnp.arrays(
    np.float64,
    st.integers(1, 40),
    elements=st.floats(allow_nan=True, allow_infinity=True, width=64),
)
ints = hnp.arrays(np.int64, st.integers(1, 40), elements=st.integers(-(2**40), 2**40))
fractions = st.lists(
    st.one_of(
        st.sampled_from([0.0, 0.025, 0.1, 0.25, 0.5, 0.75, 0.9, 0.975, 1.0]), st.floats(0, 1)
    ),
    min_size=1,
    max_size=6,
)


@given(st.one_of(floats, ints), fractions)
def test_every_quantile_is_numpys_to_the_bit(values: np.ndarray, quantiles: list[float]) -> None:
    assert bits(linear_quantiles(values, quantiles)) == bits(numpy_quantiles(values, quantiles))


@given(floats)
def test_percentiles_as_numpy_percentile_gives_them(values: np.ndarray) -> None:
    percentiles = [10, 25, 50, 75, 90]
    with np.errstate(invalid="ignore"):  # numpy warns of the NaN between two infinities
        expected = [float(value) for value in np.percentile(values, percentiles)]
    assert bits(linear_quantiles(values, [p / 100 for p in percentiles])) == bits(expected)


@given(
    hnp.arrays(
        st.sampled_from([np.float64, np.int64]),
        st.tuples(st.integers(1, 8), st.integers(1, 9)),
        elements=st.integers(-(2**40), 2**40),
    )
    | hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 8), st.integers(1, 9)),
        elements=st.floats(allow_nan=False, allow_infinity=True),
    )
)
@example(np.array([[-0.0]]))  # numpy's mean of one middle value: 0.0, not -0.0
@example(np.array([[-0.0, -0.0]]))
def test_row_medians_are_numpys_to_the_bit(rows: np.ndarray) -> None:
    assert bits(row_medians(rows).tolist()) == bits(np.median(rows, axis=1).tolist())


def test_by_hand() -> None:
    # Sorted 1, 2, 4, 8: position (4 - 1) * q, linear between its neighbours.
    values = np.array([8.0, 1.0, 4.0, 2.0])
    assert linear_quantiles(values, [0, 0.25, 0.5, 0.9, 1]) == pytest.approx([1, 1.75, 3, 6.8, 8])
    assert linear_quantiles(np.array([5]), [0, 0.5, 1]) == [5.0, 5.0, 5.0]
    assert all(np.isnan(linear_quantiles(np.array([1.0, np.nan]), [0.1, 0.9])))
    rows = np.array([[3.0, 1.0, 2.0], [4.0, 1.0, 3.0]])
    assert row_medians(rows).tolist() == [2.0, 3.0]
    assert row_medians(rows[:, :2]).tolist() == [2.0, 2.5]
