"""The per-position rates' intervals the ledger keeps (``fold.folding.position_intervals``)."""

from __future__ import annotations

import pytest
from ledger_runs import fold_document
from position_reference import reference

from fold.folding.position_intervals import position_intervals
from fold.ledger.figures import figure_rows


def test_identical_legs_have_no_spread():
    # Every leg: 10 steps, 4 accepting nothing, 3 one draft, 3 two: position 1 is accepted by
    # 6 of 10 steps, position 2 by 3 of 10, and by 3 of the 6 that accepted position 1.
    drawn = position_intervals([[4, 3, 3]] * 4, [True, True, False, False], 200, 7)
    for fold in ("warm", "all"):
        assert drawn[(fold, "per_position")] == [
            pytest.approx((0.6, 0.6)),
            pytest.approx((0.3, 0.3)),
        ]
        assert drawn[(fold, "per_position_conditional")] == [
            pytest.approx((0.6, 0.6)),
            pytest.approx((0.5, 0.5)),
        ]


def _kept(document, fold, figure):
    return {
        row.position: (row.ci_low, row.ci_high)
        for row in figure_rows(document)
        if (row.fold, row.figure) == (fold, figure)
    }


def test_the_toy_gate_warm_intervals_agree_with_a_plain_bootstrap(tmp_path, capsys):
    document = fold_document(tmp_path, capsys)
    legs = document["legs"]
    warm = [leg for leg in legs if leg["warm"]]
    kept = _kept(document, "warm", "per_position")
    expected = reference([leg["histogram"] for leg in warm])
    assert len(kept) == len(expected) == 4
    for position, (low, high) in enumerate(expected, start=1):
        # two bootstraps of 1000 and 4000 draws: their quantiles agree to sampling noise
        assert kept[position] == pytest.approx((low, high), abs=0.02)


@pytest.mark.parametrize("fold", ["warm", "all"])
@pytest.mark.parametrize("figure", ["per_position", "per_position_conditional"])
def test_every_kind_and_fold_agrees_with_a_plain_bootstrap(tmp_path, capsys, fold, figure):
    """The conditional rates and the all-legs fold (warm and cold legs redrawn each within
    their own kind) against the plain bootstrap too."""
    document = fold_document(tmp_path, capsys)
    legs = document["legs"]
    chosen = legs if fold == "all" else [leg for leg in legs if leg["warm"]]
    strata = None
    if fold == "all":
        strata = [[i for i, leg in enumerate(legs) if leg["warm"]],
                  [i for i, leg in enumerate(legs) if not leg["warm"]]]  # fmt: skip
    expected = reference([leg["histogram"] for leg in chosen],
                         conditional=figure.endswith("conditional"), strata=strata)  # fmt: skip
    kept = _kept(document, fold, figure)
    assert len(kept) == len(expected) == 4
    for position, (low, high) in enumerate(expected, start=1):
        assert kept[position] == pytest.approx((low, high), abs=0.03), position


def test_no_intervals_without_the_fold_s_bootstrap(tmp_path, capsys):
    document = fold_document(tmp_path, capsys, "--bootstrap", "0")
    rows = [row for row in figure_rows(document) if row.position is not None]
    assert rows and all(row.ci_low is None for row in rows)


def test_a_bootstrap_recorded_as_true_draws_no_intervals(tmp_path, capsys):
    """A saved document whose resamples or seed is JSON's true (a hand edit) is no bootstrap of
    one draw: the ledger draws no intervals from it, as from --bootstrap 0."""
    document = fold_document(tmp_path, capsys)
    assert any(row.ci_low is not None for row in figure_rows(document) if row.position)
    for key in ("resamples", "seed"):
        edited = {**document, "bootstrap": {**document["bootstrap"], key: True}}
        rows = [row for row in figure_rows(edited) if row.position is not None]
        assert rows and all(row.ci_low is None for row in rows), key
