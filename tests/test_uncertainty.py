"""Bootstrap intervals: zero width without spread, the bootstrap's own variance, coverage on
simulated gates, shrinking with legs, and the same bytes for the same seed.

Expected variances are worked out from the definition of the resampling, not from its output.
"""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fold.api import fold_acceptance
from fold.folding.uncertainty import Leg, bootstrap, decode_steps_per_s, percentile_interval

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GATE = FIXTURES / "gate-example"


def width(interval: tuple[float, float] | None) -> float:
    assert interval is not None
    return interval[1] - interval[0]


def leg(accepted: list[int], proposed: list[int], steps: list[int], tok_s: float = 10.0) -> Leg:
    return Leg(
        requests={"accepted": accepted, "proposed": proposed, "steps": steps},
        values={
            "completion_tokens": sum(steps) + sum(accepted) + len(steps),
            "steps": sum(steps),
            "window_secs": 2.0,
        },
        tok_s=tok_s,
    )


# ----------------------------------------------------------------------------------------------
# No spread, no width
# ----------------------------------------------------------------------------------------------


def test_identical_legs_give_zero_width() -> None:
    same = [leg([30, 30], [70, 70], [10, 10], tok_s=14.9) for _ in range(6)]
    intervals = bootstrap(same, {"warm": list(range(6))}, 500, seed=3)["warm"].intervals()
    # 1 + A/S = 1 + 60/20 = 4; A/P = 60/140; completion/S = (20 + 60 + 2)/20; 20 steps / 2 s.
    expected = {
        "accept_rate": 60 / 140,
        "mean_acceptance_length": 4.0,
        "completion_tokens_per_step": 82 / 20,
        "output_throughput_tok_s": 14.9,
        "step_rate": 10.0,
    }
    assert set(intervals) == set(expected)
    for figure, value in expected.items():
        assert intervals[figure] == pytest.approx((value, value), rel=1e-15), figure
        assert width(intervals[figure]) == 0.0


def test_one_unit_says_nothing_about_spread() -> None:
    single = bootstrap([leg([3], [7], [1])], {"warm": [0]}, 100)["warm"]
    assert single.intervals() == {}  # one leg, one request: no interval, not a zero-width one
    two_requests = bootstrap([leg([3, 5], [7, 7], [1, 1])], {"warm": [0]}, 100)["warm"]
    # A per-request figure can be resampled; a per-leg one (tok/s) cannot.
    assert set(two_requests.intervals()) == {"accept_rate", "mean_acceptance_length"}


def test_a_figure_some_leg_lacks_gets_no_interval() -> None:
    bare = Leg(requests={"steps": [4], "accepted": [3]}, tok_s=None)
    found = bootstrap([bare, bare, bare], {"all": [0, 1, 2]}, 50)["all"].intervals()
    assert set(found) == {"mean_acceptance_length"}


def test_percentile_interval_of_known_values() -> None:
    # numpy's default (linear) quantiles of 0..100 at 2.5% and 97.5% are 2.5 and 97.5.
    assert percentile_interval(np.arange(101.0)) == pytest.approx((2.5, 97.5), rel=1e-12)
    mostly_undefined = np.array([1.0, np.nan, np.nan])
    assert percentile_interval(mostly_undefined) is None


# ----------------------------------------------------------------------------------------------
# The resampling's variance, from its definition
# ----------------------------------------------------------------------------------------------


def plug_in_variance(values: list[float]) -> float:
    return statistics.pvariance(values)


def test_stage_one_variance_matches_the_definition() -> None:
    # One request per leg and P = 7 everywhere: A/P* is the mean of m draws of a_i / 7, whose
    # variance is the plug-in variance of a_i / 7 over m.
    rng = random.Random(11)
    accepted = [rng.randrange(8) for _ in range(9)]
    legs = [leg([a], [7], [1]) for a in accepted]
    resamples = 20_000
    replicates = bootstrap(legs, {"w": list(range(9))}, resamples, seed=5)["w"]
    expected = plug_in_variance([a / 7 for a in accepted]) / 9
    observed = float(np.var(replicates.figures["accept_rate"]))
    # the variance of a variance estimate from B draws is about 2 var^2 / B: 1% relative sd
    assert observed == pytest.approx(expected, rel=0.05)


def test_two_stage_variance_matches_the_definition() -> None:
    # m legs of n requests, P = 7 on each: A/P* = mean over m leg copies of each copy's mean of
    # n redrawn requests / 7. Var = (plug-in var of leg means + mean of within-leg plug-in
    # variances / n) / m.
    rng = random.Random(12)
    m, n = 6, 5
    table = [[rng.randrange(8) for _ in range(n)] for _ in range(m)]
    legs = [leg(row, [7] * n, [1] * n) for row in table]
    replicates = bootstrap(legs, {"w": list(range(m))}, 20_000, seed=6)["w"]
    rates = [[a / 7 for a in row] for row in table]
    between = plug_in_variance([statistics.fmean(row) for row in rates])
    within = statistics.fmean(plug_in_variance(row) for row in rates) / n
    expected = (between + within) / m
    assert float(np.var(replicates.figures["accept_rate"])) == pytest.approx(expected, rel=0.05)


def test_median_tok_s_replicates_are_medians_of_the_legs() -> None:
    speeds = [14.0, 15.0, 16.0, 17.5]
    legs = [leg([3], [7], [1], tok_s=s) for s in speeds]
    values = bootstrap(legs, {"w": [0, 1, 2, 3]}, 2000, seed=1)["w"].figures[
        "output_throughput_tok_s"
    ]
    # every median of 4 draws from the speeds is a speed or the mean of two of them
    possible = {(a + b) / 2 for a in speeds for b in speeds}
    assert set(np.unique(values)) <= possible
    assert values.min() >= 14.0 and values.max() <= 17.5


def test_warm_and_all_draw_only_their_own_legs() -> None:
    legs = [leg([1], [7], [1], tok_s=1.0), leg([6], [7], [1], tok_s=2.0)] + [
        leg([6], [7], [1], tok_s=2.0) for _ in range(3)
    ]
    found = bootstrap(legs, {"warm": [1, 2, 3, 4], "all": [0, 1, 2, 3, 4]}, 500)
    # the warm legs are identical; the cold leg 0 only widens the all-legs fold
    assert width(found["warm"].interval("accept_rate")) == 0.0
    assert width(found["all"].interval("accept_rate")) > 0.0


# ----------------------------------------------------------------------------------------------
# Coverage and shrinking on simulated gates
# ----------------------------------------------------------------------------------------------

POSITIONS = 7
Q_LOW, Q_HIGH = 0.55, 0.85  # each leg's per-position acceptance q is uniform on this range
TOK_S_MEAN, TOK_S_SD = 15.0, 0.4


def true_accept_rate() -> float:
    """E[A] / E[P] when a step accepts position i with probability q^i and q ~ U(Q_LOW, Q_HIGH).

    E[q^i] = (Q_HIGH^(i+1) - Q_LOW^(i+1)) / ((i + 1)(Q_HIGH - Q_LOW)); every step proposes 7.
    """
    moments = [
        (Q_HIGH ** (i + 1) - Q_LOW ** (i + 1)) / ((i + 1) * (Q_HIGH - Q_LOW))
        for i in range(1, POSITIONS + 1)
    ]
    return sum(moments) / POSITIONS


def simulated_gate(rng: np.random.Generator, legs: int, requests: int, steps: int) -> list[Leg]:
    """A gate whose legs differ (each leg's q) and whose steps accept a prefix of the draft."""
    gate = []
    for _ in range(legs):
        q = rng.uniform(Q_LOW, Q_HIGH)
        draws = rng.random((requests, steps, POSITIONS)) < q
        accepted = np.cumprod(draws, axis=2).sum(axis=2).sum(axis=1)  # prefix lengths
        gate.append(
            Leg(
                requests={
                    "accepted": accepted.tolist(),
                    "proposed": [steps * POSITIONS] * requests,
                    "steps": [steps] * requests,
                },
                tok_s=float(rng.normal(TOK_S_MEAN, TOK_S_SD)),
            )
        )
    return gate


def test_intervals_cover_the_true_value_at_about_the_nominal_rate() -> None:
    """200 seeded gates of 12 legs x 4 requests x 40 steps; the true A/P, 1 + A/S and median
    tok/s are known in closed form. With 200 gates a 95% coverage has a binomial sd of 1.5%;
    the band [0.90, 0.99] is three sd below nominal (the percentile interval of 12 legs is a
    little narrow) to 2.7 sd above (redrawing requests within legs is a little wide)."""
    rng = np.random.default_rng(2026)
    rate = true_accept_rate()
    truths = {
        "accept_rate": rate,
        "mean_acceptance_length": 1 + POSITIONS * rate,
        "output_throughput_tok_s": TOK_S_MEAN,  # the median of a normal is its mean
    }
    covered = dict.fromkeys(truths, 0)
    gates = 200
    for gate_number in range(gates):
        gate = simulated_gate(rng, legs=12, requests=4, steps=40)
        found = bootstrap(gate, {"warm": list(range(12))}, 1000, seed=gate_number)["warm"]
        for figure, truth in truths.items():
            low, high = found.interval(figure) or (math.nan, math.nan)
            covered[figure] += low <= truth <= high
    for figure, hits in covered.items():
        assert 0.90 <= hits / gates <= 0.99, (figure, hits / gates)


def test_intervals_shrink_as_legs_are_added() -> None:
    rng = np.random.default_rng(7)
    gate = simulated_gate(rng, legs=64, requests=4, steps=40)
    widths = {}
    for legs in (4, 16, 64):
        found = bootstrap(gate[:legs], {"warm": list(range(legs))}, 2000, seed=1)["warm"]
        widths[legs] = {
            figure: width(found.interval(figure))
            for figure in ("accept_rate", "mean_acceptance_length", "output_throughput_tok_s")
        }
    for figure in widths[4]:
        assert widths[4][figure] > widths[16][figure] > widths[64][figure], figure
    # four times the legs: about half the width (1/sqrt(4)) for the ratio figures
    for figure in ("accept_rate", "mean_acceptance_length"):
        assert 0.3 < widths[64][figure] / widths[16][figure] < 0.75, figure


# ----------------------------------------------------------------------------------------------
# The fold's intervals and their reproducibility
# ----------------------------------------------------------------------------------------------


def fold_bytes(**options) -> bytes:
    result = fold_acceptance(GATE / "our-arm.json", [str(GATE / "steps.jsonl")], **options)
    return orjson.dumps(result.to_json(), option=orjson.OPT_SORT_KEYS)


def test_same_seed_gives_same_bytes() -> None:
    assert fold_bytes(seed=9) == fold_bytes(seed=9)
    assert fold_bytes(seed=9) != fold_bytes(seed=10)
    assert fold_bytes() == fold_bytes()


def test_fold_carries_an_interval_beside_each_pooled_figure() -> None:
    result = fold_acceptance(GATE / "our-arm.json", [str(GATE / "steps.jsonl")])
    for fold in (result.warm, result.all):
        for figure in (
            "accept_rate",
            "mean_acceptance_length",
            "completion_tokens_per_step",
            "output_throughput_tok_s",
            "step_rate",
        ):
            low, high = fold[f"{figure}_ci"]
            assert low <= high
            # a percentile interval of ratios of sums stays within the legs' own extremes
            values = (
                [leg[figure] for leg in result.legs if leg["index"] in fold["legs"]]
                if (figure != "output_throughput_tok_s")
                else [leg["tok_s"] for leg in result.legs if leg["index"] in fold["legs"]]
            )
            assert min(values) - 1e-12 <= low and high <= max(values) + 1e-12, figure
    assert result.to_json()["bootstrap"]["resamples"] == 1000


def test_no_resamples_no_intervals() -> None:
    result = fold_acceptance(GATE / "our-arm.json", [str(GATE / "steps.jsonl")], resamples=0)
    assert all(value is None for key, value in result.warm.items() if key.endswith("_ci"))
    assert result.to_json()["bootstrap"]["resamples"] == 0


# ----------------------------------------------------------------------------------------------
# Decode steps per second
# ----------------------------------------------------------------------------------------------


def test_decode_steps_per_s_pools_sums_and_has_an_interval() -> None:
    legs = [([100, 120], [2.0, 2.5]), ([90], [1.5]), ([110, 100, 95], [2.2, 2.0, 2.0])]
    point, interval = decode_steps_per_s(legs, resamples=2000, seed=4)
    assert point == pytest.approx(615 / 12.2)
    assert interval is not None and interval[0] < point < interval[1]
    # per-request rates run from 47.5 to 60: a ratio of resampled sums stays inside them
    assert interval[0] >= 47.5 and interval[1] <= 60.0


def test_decode_steps_per_s_identical_requests_zero_width() -> None:
    point, interval = decode_steps_per_s([([50, 50], [1.0, 1.0])] * 3, resamples=100)
    assert point == 50.0 and interval == (50.0, 50.0)


def test_decode_steps_per_s_without_seconds() -> None:
    assert decode_steps_per_s([([5], [0.0])], resamples=10) == (None, None)


# ----------------------------------------------------------------------------------------------
# Invariants
# ----------------------------------------------------------------------------------------------

request_counts = st.tuples(st.integers(1, 50), st.integers(0, 7)).map(
    lambda pair: (pair[0], pair[0] * 7, min(pair[1] * pair[0], pair[0] * 7))
)  # (S, P, A) of one request with A <= P


@given(
    st.lists(
        st.tuples(st.lists(request_counts, min_size=1, max_size=4), st.floats(1, 100)),
        min_size=2,
        max_size=6,
    ),
    st.integers(0, 2**32),
)
@settings(max_examples=50, deadline=None)
def test_intervals_stay_within_the_extremes_of_what_is_resampled(legs, seed) -> None:
    """A ratio of resampled sums lies between the smallest and largest ratio of the requests
    summed (the mediant inequality); a median of resampled legs between the extreme legs."""
    as_legs = [
        Leg(
            requests={
                "steps": [s for s, _, _ in requests],
                "proposed": [p for _, p, _ in requests],
                "accepted": [a for _, _, a in requests],
            },
            tok_s=tok_s,
        )
        for requests, tok_s in legs
    ]
    found = bootstrap(as_legs, {"all": range(len(legs))}, 200, seed)["all"]
    rates = [a / p for requests, _ in legs for _, p, a in requests]
    low, high = found.interval("accept_rate")
    assert min(rates) - 1e-12 <= low <= high <= max(rates) + 1e-12
    lengths = [1 + a / s for requests, _ in legs for s, _, a in requests]
    low, high = found.interval("mean_acceptance_length")
    assert min(lengths) - 1e-12 <= low <= high <= max(lengths) + 1e-12
    speeds = [tok_s for _, tok_s in legs]
    low, high = found.interval("output_throughput_tok_s")
    assert min(speeds) <= low <= high <= max(speeds)
    # and the same seed draws the same replicates
    again = bootstrap(as_legs, {"all": range(len(legs))}, 200, seed)["all"]
    for figure, values in found.figures.items():
        assert np.array_equal(values, again.figures[figure], equal_nan=True)


def test_threads_do_not_change_the_draws(monkeypatch) -> None:
    rng = np.random.default_rng(3)
    gate = simulated_gate(rng, legs=8, requests=6, steps=5)
    monkeypatch.setattr("fold.folding.request_redraws._THREADS_FROM_DRAWS", 10**12)
    serial = bootstrap(gate, {"warm": range(2, 8), "all": range(8)}, 300, seed=8)
    monkeypatch.setattr("fold.folding.request_redraws._THREADS_FROM_DRAWS", 0)
    threaded = bootstrap(gate, {"warm": range(2, 8), "all": range(8)}, 300, seed=8)
    for name in serial:
        assert serial[name].figures.keys() == threaded[name].figures.keys()
        for figure, values in serial[name].figures.items():
            assert values.tobytes() == threaded[name].figures[figure].tobytes()
