"""A second, plain bootstrap of the per-position rates' intervals, for tests to hold
``fold.folding.position_intervals`` (and the ledger rows drawn by it) against."""

from __future__ import annotations

import numpy as np


def reference(histograms, resamples=4000, seed=1, conditional=False, strata=None):
    """A second, plain bootstrap: redraw the legs with replacement (within each of
    ``strata``, lists of leg indices, when given: the all-legs fold keeps so many warm and so
    many cold legs), pool their counts, take the 2.5% and 97.5% quantiles of each position's
    rate: over the steps with a draft, or (``conditional``) over the steps that accepted the
    position before."""
    counts = np.array(
        [[sum(found[i + 1 :]) for i in range(len(found) - 1)] for found in histograms], float
    )
    steps = np.array([sum(found) for found in histograms], float)
    generator = np.random.default_rng(seed)
    groups = strata or [list(range(len(steps)))]
    draws = np.concatenate(
        [np.array(group)[generator.integers(0, len(group), (resamples, len(group)))]
         for group in groups], axis=1)  # fmt: skip
    accepted = counts[draws].sum(axis=1)
    below = steps[draws].sum(axis=1)[:, None]
    if conditional:
        below = np.concatenate([below, accepted[:, :-1]], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = accepted / below
    return [tuple(np.nanquantile(rates[:, i], [0.025, 0.975])) for i in range(counts.shape[1])]
