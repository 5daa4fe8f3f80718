"""The bootstrap's stage-2 draws: defined by hand (SplitMix64, scaled), the same in numpy
(``fold.folding.request_redraws.request_draws``, the reference) and in the extension's fused
draws and sums (``fold.folding.native.resample_sums``), and the replicates the same bits with
the extension on or off.

The extension is imported at the top: when it was not built, this module fails, it is not
skipped.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from native_switch import native_switch
from test_uncertainty import simulated_gate

from fold import _native  # noqa: F401  fails here when the extension was not built
from fold.folding import native
from fold.folding.request_redraws import request_draws
from fold.folding.uncertainty import Leg, bootstrap


@st.composite
def value_rows(draw: st.DrawFn) -> np.ndarray:
    """1 to 300 requests of 1 to 16 int64 columns (each column count has its own unrolled
    loop in the extension), values up to the int64 edges so that sums wrap."""
    columns = draw(st.integers(1, 16))
    bound = draw(st.sampled_from([2**31 - 1, 2**40, 2**63 - 1]))
    value = st.integers(-bound - 1, bound)
    rows = draw(
        st.lists(st.lists(value, min_size=columns, max_size=columns), min_size=1, max_size=300)
    )
    return np.array(rows, dtype=np.int64)


@given(value_rows(), st.integers(0, 2**64 - 1), st.integers(0, 10**6), st.integers(1, 6))
@settings(max_examples=200, deadline=None)
def test_fused_draws_and_sums_equal_numpy_gathers_of_the_reference_draws(
    values, key, first_row, resamples
) -> None:
    out = np.empty((resamples, values.shape[1]), dtype=np.int64)
    native.resample_sums(values, key, first_row, out)
    drawn = request_draws(key, first_row, resamples, len(values))
    assert drawn.shape == (resamples, len(values))
    assert drawn.min() >= 0 and drawn.max() < len(values)
    for column in range(values.shape[1]):
        # numpy's int64 sums wrap as the extension's do.
        expected = np.take(values[:, column], drawn).sum(axis=1)
        assert np.array_equal(out[:, column], expected)


def test_draws_are_splitmix64_scaled_as_written_by_hand() -> None:
    """Draw i is SplitMix64's output after i + 1 steps, times the request count, over 2^64:
    the definition in Python integers, independent of both implementations."""
    key, requests = 0x0123456789ABCDEF, 1000
    mask = 2**64 - 1

    def splitmix64(i: int) -> int:
        z = (key + (i + 1) * 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    expected = [splitmix64(i) * requests >> 64 for i in range(3 * requests)]
    assert request_draws(key, 0, 3, requests).ravel().tolist() == expected
    values = np.arange(requests, dtype=np.int64).reshape(requests, 1)
    out = np.empty((3, 1), dtype=np.int64)
    native.resample_sums(values, key, 0, out)
    rows = [expected[row * requests : (row + 1) * requests] for row in range(3)]
    assert out[:, 0].tolist() == [sum(row) for row in rows]


def test_draws_are_uniform_over_the_requests() -> None:
    """Each request is drawn about equally often: a chi-square of 100,000 draws over 10
    requests stays far from its 1-in-a-million tail (27.9 for 9 degrees of freedom)."""
    drawn = request_draws(20261201, 0, 10_000, 10).ravel()
    counts = np.bincount(drawn, minlength=10)
    expected = drawn.size / 10
    assert ((counts - expected) ** 2 / expected).sum() < 27.9


def test_fused_sums_refuse_what_they_cannot_read() -> None:
    values = np.arange(6, dtype=np.int64).reshape(3, 2)
    out = np.empty((1, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="8-byte integers"):
        native.resample_sums(values.astype(np.float64), 1, 0, out)
    with pytest.raises(ValueError, match="differ in columns"):
        native.resample_sums(values, 1, 0, np.empty((1, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="1 to 16 columns"):
        native.resample_sums(np.zeros((3, 17), dtype=np.int64), 1, 0, np.empty((1, 17), np.int64))


def test_replicates_are_the_same_bits_with_and_without_the_extension() -> None:
    rng = np.random.default_rng(5)
    gate = simulated_gate(rng, legs=6, requests=9, steps=7)
    with_decode = [
        Leg(
            requests={
                **leg.requests,
                "decode_steps": [int(s) - 1 for s in leg.requests["steps"]],
                "decode_ns": rng.integers(10**6, 10**10, len(leg.requests["steps"])).tolist(),
            },
            values=leg.values,
            tok_s=leg.tok_s,
        )
        for leg in gate
    ]
    found = {}
    for on in (True, False):
        with native_switch(on):
            found[on] = bootstrap(with_decode, {"warm": range(2, 6), "all": range(6)}, 300, 9)
    for name in found[True]:
        assert found[True][name].figures.keys() == found[False][name].figures.keys()
        assert "decode_steps_per_s" in found[True][name].figures
        for figure, values in found[True][name].figures.items():
            assert values.tobytes() == found[False][name].figures[figure].tobytes(), figure


@given(st.integers(17, 40), st.integers(0, 2**32), st.integers(2, 9))
@settings(max_examples=15, deadline=None)
def test_more_columns_than_a_pass_takes_are_the_same_bits_with_and_without_the_extension(
    columns: int, seed: int, requests: int
) -> None:
    """The fold's own bootstrap with more summed columns than the extension draws in one pass
    (16), some of them equal to others (summed once, as twins) and some with another's sum in
    another order (not twins): the sums and every figure are the same bits with the extension
    on or off (numpy's gathers of the same draws)."""
    rng = np.random.default_rng(seed)
    legs = []
    for _ in range(5):
        steps = rng.integers(1, 30, requests)
        extra: dict[str, list[int]] = {}
        for i in range(columns):
            if i % 7 == 6:  # a copy of the one before it: a twin
                extra[f"c{i}"] = extra[f"c{i - 1}"]
            elif i % 5 == 3:  # the one before reversed: the same sum, not a twin
                extra[f"c{i}"] = extra[f"c{i - 1}"][::-1]
            else:
                extra[f"c{i}"] = rng.integers(0, 2**40, requests).tolist()
        legs.append(
            Leg(
                requests={
                    "steps": steps.tolist(),
                    "proposed": (steps * 4).tolist(),
                    "accepted": (steps * 2).tolist(),
                    **extra,
                },
                tok_s=float(rng.uniform(10, 20)),
            )
        )
    summed = [f"c{i}" for i in range(columns)]
    found = {}
    for on in (True, False):
        with native_switch(on):
            found[on] = bootstrap(
                legs, {"warm": range(1, 5), "all": range(5)}, 50, seed,
                summed={"warm": summed, "all": summed},
            )  # fmt: skip
    for name in ("warm", "all"):
        assert found[True][name].sums.keys() == set(summed)
        for column in summed:
            assert found[True][name].sums[column].tobytes() == (
                found[False][name].sums[column].tobytes()
            ), column
        for figure, values in found[True][name].figures.items():
            assert values.tobytes() == found[False][name].figures[figure].tobytes(), figure
