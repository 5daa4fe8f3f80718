"""The bootstrap's stage-2 sums in the extension (``fold.native.resample_sums``) equal numpy's
gathers, which are the reference, and the replicates are the same bits with the extension on
or off.

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

from fold import (
    _native,  # noqa: F401  fails here when the extension was not built
    native,
)
from fold.uncertainty import Leg, bootstrap


@given(
    st.lists(
        st.tuples(st.integers(-(2**40), 2**40), st.integers(0, 2**31 - 1)), min_size=1
    ).flatmap(
        lambda rows: st.tuples(
            st.just(rows),
            st.lists(
                st.lists(st.integers(0, len(rows) - 1), min_size=len(rows), max_size=len(rows)),
                min_size=1,
                max_size=5,
            ),
        )
    )
)
@settings(max_examples=100, deadline=None)
def test_fused_sums_equal_numpy_gathers(case) -> None:
    rows, drawn = case
    values = np.array(rows, dtype=np.int64)
    draws = np.array(drawn, dtype=np.int32)
    out = np.empty((len(drawn), 2), dtype=np.int64)
    native.resample_sums(values, draws, out)
    for column in range(2):
        assert np.array_equal(out[:, column], np.take(values[:, column], draws).sum(axis=1))


def test_fused_sums_refuse_what_they_cannot_read() -> None:
    values = np.arange(6, dtype=np.int64).reshape(3, 2)
    out = np.empty((1, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="not a request index"):
        native.resample_sums(values, np.array([[0, 1, 3]], dtype=np.int32), out)
    with pytest.raises(ValueError, match="8-byte integers"):
        native.resample_sums(values.astype(np.float64), np.zeros((1, 3), np.int32), out)
    with pytest.raises(ValueError, match="shapes"):
        native.resample_sums(values, np.zeros((2, 3), np.int32), out)


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
