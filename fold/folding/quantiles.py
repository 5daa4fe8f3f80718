"""Quantiles by numpy's default rule, without ``numpy.quantile``.

``numpy.quantile``'s default ("linear", Hyndman and Fan's type 7) calls ``numpy.unique``, which
imports ``numpy.ma``: about 20 ms of a plain fold's start-up, for the handful of quantiles a
fold takes (docs/performance.md, "Start-up"). This is the same rule with numpy's arithmetic in
numpy's order, so every value is numpy's to the last bit; ``tests/test_quantiles.py`` holds it
to ``numpy.quantile`` on any input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def linear_quantiles(values: np.ndarray, quantiles: Sequence[float]) -> list[float]:
    """Each of ``quantiles`` (each in [0, 1]) of the 1-D, non-empty ``values``, as
    ``numpy.quantile(values, quantiles)`` gives it: NaN throughout where a value is NaN."""
    ordered = np.sort(values)  # NaN sorts last
    count = ordered.size
    if ordered.dtype.kind == "f" and math.isnan(ordered[-1]):
        return [math.nan] * len(quantiles)
    found = []
    for quantile in quantiles:
        virtual = (count - 1) * quantile
        below = math.floor(virtual)
        above = below + 1
        if virtual >= count - 1:  # numpy's index -1 for both: the largest value
            below = above = -1
        gamma = virtual - below
        low, high = ordered[below], ordered[above]
        # Between two infinities of one sign the step is NaN, as numpy's is: said without
        # numpy's warning, since the figure says it.
        with np.errstate(invalid="ignore"):
            step = high - low
            # numpy's _lerp: from the nearer end, so that gamma 1 gives `high` exactly.
            found.append(float(high - step * (1 - gamma) if gamma >= 0.5 else low + step * gamma))
    return found


def row_medians(rows: np.ndarray) -> np.ndarray:
    """Each row's median of the 2-D ``rows`` (no NaN, at least one column), as
    ``numpy.median(rows, axis=1)`` gives it: the middle value, or the mean of the middle two."""
    width = rows.shape[1]
    half = width // 2
    middle = [half] if width % 2 else [half - 1, half]
    # numpy's own last step, the mean of the middle one or two (so -0.0 alone gives 0.0).
    return np.partition(rows, middle, axis=1)[:, middle[0] : half + 1].mean(axis=1)
