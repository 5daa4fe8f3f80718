"""Per-request figures and acceptance by output position (docs/per-request.md): a hand-worked
log, a second plain implementation over the raw lines, and properties: both readers, any
split into files and blocks and any merge order give the same figures."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from native_switch import native_switch
from strategies import ONE_SECOND_LEG as LEG
from strategies import canonical_line, fold_cases, leg_bounds_ns

from fold.api import LogFold
from fold.inputs.arm import arm_from_document
from fold.present.charts import charts
from fold.present.per_request import by_position_chart, falling_flag, summary_lines

WRITER, OTHER_WRITER = "5f0c1a2b3c4d5e6f", "0123456789abcdef"
START, _ = leg_bounds_ns(LEG)
T0 = START + 10_000


def line(n: int, t: int, seq: int | str, proposed: int, accepted: int, **extra: Any) -> bytes:
    row = {"v": 1, "w": extra.pop("w", WRITER), "n": n, "t_ns": T0 + t, "pid": 1, "seq": seq,
           "proposed": proposed, "accepted": accepted, **extra}  # fmt: skip
    return canonical_line(row)


def fold_lines(
    tmp_path: Path,
    files: list[list[bytes]],
    *,
    native: bool = True,
    resamples: int = 0,
    block_bytes: int | None = None,
    reverse_merge: bool = False,
) -> dict[str, Any]:
    """The JSON document of the lines folded as the given files over one warm leg; with
    ``reverse_merge`` each file is folded on its own and the folds merged last to first."""
    arm = arm_from_document([LEG])
    options = {} if block_bytes is None else {"block_bytes": block_bytes}
    paths = []
    for number, lines in enumerate(files):
        path = tmp_path / f"part{number}-{native}-{block_bytes}-{reverse_merge}.jsonl"
        path.write_bytes(b"".join(raw + b"\n" for raw in lines))
        paths.append(str(path))
    with native_switch(native):
        if reverse_merge:
            folds = []
            for path in paths:
                one = LogFold(arm)
                one.add_file(path, **options)
                folds.append(one)
            fold = folds[-1]
            for other in reversed(folds[:-1]):
                fold = fold.merge(other)
        else:
            fold = LogFold(arm)
            for path in paths:
                fold.add_file(path, **options)
        return fold.result(resamples=resamples).to_json()


# -- a log worked by hand -------------------------------------------------------------------

# Request 1's lines in time order (written out of order below): (t, proposed, accepted,
# emitted or None) and the position each starts at, by hand: emitted, else accepted + 1.
HAND = [
    (10, 4, 2, 100),  # position 0     -> bucket 0 [0, 128)
    (20, 4, 1, None),  # 100           -> bucket 0
    (30, 0, 0, 30),  # 102, no draft: not counted, but moves the position
    (40, 4, 4, 5),  # 132              -> bucket 1 [128, 256)
    (50, 2, 0, 200),  # 137            -> bucket 1
    (60, 4, 3, None),  # 337           -> bucket 2 [256, 512)
]


def hand_lines() -> list[bytes]:
    lines = []
    for n, (t, proposed, accepted, emitted) in enumerate(HAND):
        extra = {} if emitted is None else {"emitted": emitted}
        lines.append(line(n, t, 1, proposed, accepted, **extra))
    lines.append(line(len(HAND), 15, 2, 4, 0, w=OTHER_WRITER))  # request 2: position 0
    lines.append(line(len(HAND) + 1, 16, 3, 0, 0, w=OTHER_WRITER))  # request 3: no draft
    return list(reversed(lines))


@pytest.mark.parametrize("native", [True, False])
def test_a_hand_worked_log(tmp_path: Path, native: bool):
    warm = fold_lines(tmp_path, [hand_lines()], native=native)["warm"]
    spread = warm["per_request"]
    assert spread["requests"] == 3 and spread["requests_without_drafts"] == 1
    # Request 1: S 5, P 18, A 10; request 2: S 1, P 4, A 0.
    assert spread["pooled"]["accept_rate"] == pytest.approx(10 / 22)
    assert spread["pooled"]["mean_acceptance_length"] == pytest.approx(1 + 10 / 6)
    assert spread["per_request_mean"]["accept_rate"] == pytest.approx((10 / 18 + 0) / 2)
    assert spread["per_request_mean"]["mean_acceptance_length"] == pytest.approx((3 + 1) / 2)
    rates = spread["spread"]["accept_rate"]
    assert rates["min"] == 0 and rates["max"] == pytest.approx(10 / 18)
    assert rates["p50"] == pytest.approx(5 / 18)  # halfway between the two
    assert rates["p10"] == pytest.approx(0.1 * 10 / 18)
    lowest = spread["lowest"]
    assert [(r["w"], r["seq"]) for r in lowest] == [(OTHER_WRITER, 2), (WRITER, 1)]
    assert lowest[0]["leg"] == 0 and lowest[0]["accept_rate"] == 0
    positions = warm["by_output_position"]
    assert positions["edges"] == [0, 128, 256, 512]
    shown = [(b["from"], b["to"], b["requests"], b["steps"], b["proposed"], b["accepted"])
             for b in positions["buckets"]]  # fmt: skip
    assert shown == [(0, 128, 2, 3, 12, 3), (128, 256, 1, 2, 6, 4), (256, 512, 1, 1, 4, 3)]
    assert [b["accept_rate"] for b in positions["buckets"]] == pytest.approx([3 / 12, 4 / 6, 3 / 4])
    # The slope without intervals: weighted by P (12, 6, 4) over buckets 0, 1, 2.
    assert positions["slope"] == pytest.approx(weighted_slope([0.25, 4 / 6, 0.75], [12, 6, 4]))
    assert positions["slope_ci"] is None and positions["falling"] is None


def weighted_slope(rates: list[float], weights: list[float]) -> float:
    total = sum(weights)
    x_mean = sum(w * x for x, w in enumerate(weights)) / total
    y_mean = sum(w * y for y, w in zip(rates, weights, strict=True)) / total
    top = sum(w * (x - x_mean) * (y - y_mean)
              for x, (y, w) in enumerate(zip(rates, weights, strict=True)))  # fmt: skip
    return top / sum(w * (x - x_mean) ** 2 for x, w in enumerate(weights))


# -- a second, plain implementation over the raw lines -----------------------------------------


def reference(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Per request and by position from the raw lines, written from the definitions alone."""
    requests: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for row in lines:
        requests.setdefault((row["w"], row["seq"]), []).append(row)
    rates, lengths, buckets = [], [], {}
    for rows in requests.values():
        steps = [row for row in rows if row["proposed"] > 0]
        if steps:
            proposed = sum(row["proposed"] for row in steps)
            accepted = sum(row["accepted"] for row in steps)
            rates.append(accepted / proposed)
            lengths.append(1 + accepted / len(steps))
        position = 0
        for row in sorted(rows, key=lambda row: row["t_ns"]):
            if row["proposed"] > 0:
                bucket, edge = 0, 128
                while position >= edge:
                    bucket, edge = bucket + 1, edge * 2
                sums = buckets.setdefault(bucket, [0, 0, 0])
                sums[0] += 1
                sums[1] += row["proposed"]
                sums[2] += row["accepted"]
            position += row["emitted"] if "emitted" in row else row["accepted"] + 1
    return {
        "requests": len(requests),
        "without": len(requests) - len(rates),
        "mean_rate": sum(rates) / len(rates) if rates else None,
        "mean_length": sum(lengths) / len(lengths) if lengths else None,
        "median_rate": percentile(sorted(rates), 50) if rates else None,
        "p90_rate": percentile(sorted(rates), 90) if rates else None,
        "buckets": {bucket: tuple(sums) for bucket, sums in buckets.items()},
    }


def percentile(ordered: list[float], p: float) -> float:
    """Linear between the order statistics at rank p/100 * (n - 1)."""
    rank = p / 100 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@st.composite
def step_lines(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Lines of a few requests of two writers, each request's times distinct (its order is
    then its times'), counts from 0 to past a bucket edge."""
    count = draw(st.integers(1, 40))
    times = draw(st.lists(st.integers(0, 10**8), min_size=count, max_size=count, unique=True))
    rows = []
    for n, t in enumerate(times):
        proposed = draw(st.integers(1 if n == 0 else 0, 8))  # a warm leg needs a draft
        row = {
            "v": 1,
            "w": draw(st.sampled_from([WRITER, OTHER_WRITER])),
            "n": n,
            "t_ns": T0 + t,
            "pid": 1,
            "seq": draw(st.sampled_from([1, 2, 3, "a"])),
            "proposed": proposed,
            "accepted": draw(st.integers(0, proposed)),
        }
        if draw(st.booleans()):
            row["emitted"] = draw(st.sampled_from([0, 1, 5, 60, 127, 128, 300]))
        rows.append(row)
    # Line counters count per writer: renumber so no line reads as lost or read twice.
    counters: dict[str, int] = {}
    for row in rows:
        row["n"] = counters.get(row["w"], 0)
        counters[row["w"]] = row["n"] + 1
    return rows


@settings(max_examples=40, deadline=None)
@given(rows=step_lines(), data=st.data())
def test_both_readers_any_split_and_order_agree_with_the_reference(tmp_path_factory, rows, data):
    expected = reference(rows)
    order = data.draw(st.permutations(list(range(len(rows)))), label="file order")
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(rows) - 1)), max_size=3)))
    raw = [canonical_line(rows[i]) for i in order]
    files = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True) if raw[a:b]]
    block = data.draw(st.sampled_from([None, 160, 700]), label="block bytes")
    tmp = tmp_path_factory.mktemp("positions")
    found = [
        fold_lines(tmp, files, native=native, block_bytes=block, reverse_merge=reverse)["warm"]
        for native in (True, False)
        for reverse in (False, True)
    ]
    for other in found[1:]:
        assert other["per_request"] == found[0]["per_request"]
        assert other["by_output_position"] == found[0]["by_output_position"]
    warm = found[0]
    spread = warm["per_request"]
    assert spread["requests"] == expected["requests"]
    assert spread["requests_without_drafts"] == expected["without"]
    assert spread["per_request_mean"]["accept_rate"] == pytest.approx(expected["mean_rate"])
    mean_length = spread["per_request_mean"]["mean_acceptance_length"]
    assert mean_length == pytest.approx(expected["mean_length"])
    if expected["median_rate"] is not None:
        assert spread["spread"]["accept_rate"]["p50"] == pytest.approx(expected["median_rate"])
        assert spread["spread"]["accept_rate"]["p90"] == pytest.approx(expected["p90_rate"])
    positions = warm["by_output_position"]
    if not expected["buckets"]:
        assert positions is None
        return
    shown = {
        index: (b["steps"], b["proposed"], b["accepted"])
        for index, b in enumerate(positions["buckets"])
        if b["steps"]
    }
    assert shown == expected["buckets"]


# -- intervals and the falling flag ---------------------------------------------------------


def long_requests(fall: float, requests: int = 24, steps: int = 120) -> list[bytes]:
    """Requests of ``steps`` drafted steps of k = 4, each emitting accepted + 1 tokens; the
    acceptance falls by ``fall`` per step past the start (deterministic, varied by request)."""
    lines, n = [], 0
    for seq in range(requests):
        for step in range(steps):
            share = max(0.0, 0.9 - fall * step - 0.02 * (seq % 5))
            accepted = min(4, int(share * 4 + ((seq * 7 + step * 3) % 10) / 10))
            lines.append(line(n, seq * 1_000_000 + step * 1000, seq, 4, accepted))
            n += 1
    return lines


@pytest.mark.parametrize(("fall", "falling"), [(0.006, True), (0.0, False)])
def test_a_falling_line_is_flagged_from_its_interval(tmp_path: Path, fall: float, falling: bool):
    document = fold_lines(tmp_path, [long_requests(fall)], resamples=200)
    positions = document["warm"]["by_output_position"]
    assert len([b for b in positions["buckets"] if b["steps"]]) >= 2
    assert positions["falling"] is falling
    low, high = positions["slope_ci"]
    assert low <= positions["slope"] <= high
    for bucket in positions["buckets"]:
        if bucket["accept_rate_ci"] is not None:
            assert (
                bucket["accept_rate_ci"][0] <= bucket["accept_rate"] <= bucket["accept_rate_ci"][1]
            )
    flag = falling_flag(document)
    assert (flag is not None) is falling
    if flag is not None:  # the slope and its interval as the document holds them
        shown = (
            f"output grows: {100 * positions['slope']:+.1f} points per doubling [{100 * low:+.1f}, "
        )
        assert shown + f"{100 * high:+.1f}]\n  within requests, or long requests" in flag.plain
        assert flag.plain.endswith("--details tells which")
    # a falling pooled line carries its caveat as a code; a flat one none
    assert positions["caveat"] == ("within_requests_or_request_mix" if falling else None)
    spread = document["warm"]["per_request"]
    mean = spread["per_request_mean"]
    assert mean["accept_rate_ci"][0] <= mean["accept_rate"] <= mean["accept_rate_ci"][1]


def test_alike_requests_give_a_mean_interval_of_no_width(tmp_path: Path):
    lines = [line(n, n * 1000, n % 6, 4, 2) for n in range(60)]
    spread = fold_lines(tmp_path, [lines], resamples=50)["warm"]["per_request"]
    assert spread["per_request_mean"]["accept_rate_ci"] == pytest.approx([0.5, 0.5])
    assert spread["per_request_mean"]["mean_acceptance_length_ci"] == pytest.approx([3.0, 3.0])


def test_the_json_names_which_mean_each_figure_is(tmp_path: Path):
    spread = fold_lines(tmp_path, [hand_lines()])["warm"]["per_request"]
    assert spread["pooled"]["means"].startswith("pooled")
    assert spread["per_request_mean"]["means"].startswith("per-request mean")
    text = "\n".join(summary_lines(fold_lines(tmp_path, [hand_lines()])))
    assert "pooled 45.5%" in text and "per-request mean 27.8%" in text


# -- the chart ------------------------------------------------------------------------------


class Recorder:
    """Stands in for a matplotlib figure: records what the chart draws."""

    def __init__(self) -> None:
        self.calls: dict[str, Any] = {}

    def subplots(self) -> Recorder:
        return self

    def errorbar(self, x, y, yerr, **_: Any) -> None:
        self.calls["errorbar"] = (list(x), list(y), [list(part) for part in yerr])

    def set_xticks(self, places, labels, **_: Any) -> None:
        self.calls["ticks"] = (list(places), list(labels))

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def test_the_chart_shows_the_buckets_it_was_drawn_from(tmp_path: Path):
    document = fold_lines(tmp_path, [hand_lines()], resamples=50)
    chart = by_position_chart(document)
    assert chart.name in [found.name for found in charts(document)]
    recorder = Recorder()
    chart.draw(recorder)
    buckets = document["warm"]["by_output_position"]["buckets"]
    places, y, (below, above) = recorder.calls["errorbar"]
    assert places == list(range(len(buckets)))
    assert y == pytest.approx([100 * b["accept_rate"] for b in buckets])
    for bucket, rate, low, high in zip(buckets, y, below, above, strict=True):
        interval = bucket["accept_rate_ci"] or [bucket["accept_rate"]] * 2
        assert rate - low == pytest.approx(100 * interval[0])
        assert rate + high == pytest.approx(100 * interval[1])
    assert recorder.calls["ticks"][1] == ["0-128", "128-256", "256-512"]


def test_without_steps_in_time_order_the_chart_says_why():
    chart = by_position_chart({"warm": {"by_output_position": None}})
    assert chart.draw is None and "step log" in (chart.missing or "")


def test_the_document_round_trips_through_json(tmp_path: Path):
    document = fold_lines(tmp_path, [hand_lines()], resamples=20)
    again = json.loads(json.dumps(document))
    assert summary_lines(again) == summary_lines(document)


@pytest.mark.parametrize("native", [True, False])
def test_summed_columns_are_drawn_in_the_bootstraps_own_resamples(native: bool):
    """The sums ``bootstrap`` hands out for a selection (``summed``) are of the very requests
    its figures drew: A/P from them is its A/P resample by resample, a column twice another
    sums to twice as much, and a column equal to another (summed once by the extension) or of
    the same total but other values sums as numpy's gathers of the same draws do."""
    import numpy as np

    from fold.folding.uncertainty import bootstrap, ratio
    from fold.inputs.leg_sums import Leg

    def leg(proposed: list[int], accepted: list[int], steps: list[int]) -> Leg:
        columns = {"proposed": proposed, "accepted": accepted, "steps": steps}
        extra = {
            "doubled": [2 * a for a in accepted],
            "accepted again": list(accepted),
            "reversed": accepted[::-1],  # the same total, other values
        }
        return Leg(
            requests={name: np.array(v, dtype=np.int64) for name, v in (columns | extra).items()}
        )

    legs = [
        leg([4, 8, 12, 3], [1, 8, 2, 0], [1, 2, 3, 1]),
        leg([5], [5], [2]),
        leg([7, 7, 9], [3, 6, 1], [2, 2, 3]),
    ]
    wanted = ("accepted", "proposed", "doubled", "accepted again", "reversed")
    found = {}
    for switched in (native, False):
        with native_switch(switched):
            found[switched] = bootstrap(legs, {"all": [0, 1, 2]}, 300, 11, summed={"all": wanted})[
                "all"
            ]
    drawn = found[native]
    sums = drawn.sums
    np.testing.assert_array_equal(
        ratio(sums["accepted"], sums["proposed"]), drawn.figures["accept_rate"]
    )
    np.testing.assert_array_equal(sums["doubled"], 2 * sums["accepted"])
    np.testing.assert_array_equal(sums["accepted again"], sums["accepted"])
    for name in wanted:  # the reference: numpy's gathers, no extension
        np.testing.assert_array_equal(sums[name], found[False].sums[name])
    assert not np.array_equal(sums["reversed"], sums["accepted"])
    lone = [Leg(requests={"proposed": np.array([1]), "accepted": np.array([1])})]
    assert bootstrap(lone, {"all": [0]}, 10, 1, summed={"all": ("accepted",)})["all"].sums == {}


def test_the_means_and_a_lone_bucket_are_drawn_in_the_pooled_figures_resamples(tmp_path: Path):
    """One bootstrap draws every interval of the warm fold. So where a figure is the pooled
    one by its definition, its interval is the pooled one's: a single bucket of position holds
    every drafted step (the same S, P and A), and with the same P and S in every request the
    per-request means are the pooled ratios (to the means' integer units, 2^-32 and 2^-24).
    A cold leg first and two warm legs: the warm legs' places among all legs are not their
    places among the warm ones, where bootstraps of their own drew other resamples."""
    legs = [
        {**LEG, "run": run, "generate_start_unix": LEG["generate_start_unix"] + at,
         "generate_end_unix": LEG["generate_end_unix"] + at}
        for at, run in enumerate((1, 2, 2))
    ]  # fmt: skip
    lines, n = [], 0
    for leg in range(3):
        for seq in range(8):
            for step in range(2):
                t = leg * 1_000_000_000 + seq * 10_000 + step * 1000
                lines.append(line(n, t, leg * 100 + seq, 4, (seq + step + leg) % 5))
                n += 1
    path = tmp_path / "steps.jsonl"
    path.write_bytes(b"".join(raw + b"\n" for raw in lines))
    fold = LogFold(arm_from_document(legs))
    fold.add_file(str(path))
    warm = fold.result(resamples=300).to_json()["warm"]
    bucket = warm["by_output_position"]["buckets"]
    assert warm["legs"] == [1, 2]
    assert len(bucket) == 1 and bucket[0]["steps"] == warm["steps"] == 32
    assert bucket[0]["accept_rate_ci"] == warm["accept_rate_ci"]
    assert bucket[0]["mean_acceptance_length_ci"] == warm["mean_acceptance_length_ci"]
    assert warm["accept_rate_ci"][0] < warm["accept_rate_ci"][1]  # an interval, not a point
    means = warm["per_request"]["per_request_mean"]
    assert means["accept_rate"] == pytest.approx(warm["accept_rate"])
    assert means["accept_rate_ci"] == pytest.approx(warm["accept_rate_ci"], abs=1e-7)
    assert means["mean_acceptance_length_ci"] == pytest.approx(
        warm["mean_acceptance_length_ci"], abs=1e-6
    )


def _noisy_requests(seed: int, fall: float) -> list[bytes]:
    """12 requests of 90 steps, each of 4 drafts accepted at random with a chance that falls by
    ``fall`` a step: three buckets of position, and noise enough to blur a small fall."""
    import random

    draw, lines, n = random.Random(seed), [], 0
    for seq in range(12):
        for step in range(90):
            chance = max(0.0, 0.5 - fall * step)
            accepted = sum(draw.random() < chance for _ in range(4))
            lines.append(line(n, seq * 1_000_000 + step * 1000, seq, 4, accepted))
            n += 1
    return lines


@pytest.mark.parametrize(("seed", "fall", "falling"), [(3, 0.0, False), (2, 0.0005, True)])
def test_a_negative_slope_whose_interval_holds_zero_is_not_falling(
    tmp_path: Path, seed: int, fall: float, falling: bool
):
    """Falling is judged by the slope's interval, not its sign: seed 3 without a fall draws a
    negative slope whose interval holds 0 (not falling); seed 2 with a fall is wholly below."""
    positions = fold_lines(tmp_path, [_noisy_requests(seed, fall)], resamples=200)["warm"][
        "by_output_position"
    ]
    low, high = positions["slope_ci"]
    assert positions["slope"] < 0
    assert (low < 0 <= high) is not falling
    assert positions["falling"] is falling


# ----------------------------------------------------------------------------------------------
# The sums by output position: the extension, numpy and the definition agree
# ----------------------------------------------------------------------------------------------

position_line = st.tuples(
    st.integers(0, 6),  # few times: ties within a request
    st.integers(0, 9),  # proposed
    st.integers(0, 9),  # accepted (capped at proposed)
    st.one_of(st.none(), st.integers(0, 300)),  # emitted, often missing
)


def packed(proposed: int, accepted: int, emitted: int | None) -> int:
    from fold.folding.packed_tokens import TOKEN_BITS

    plus_one = 0 if emitted is None else emitted + 1
    return proposed | accepted << TOKEN_BITS | plus_one << 2 * TOKEN_BITS


def sums_by_definition(requests, legs) -> set[tuple]:
    """Per (leg, seq, bucket): S, P and A, one request at a time in (time, counts) order."""
    found: dict[tuple, list[int]] = {}
    for seq, (leg, lines) in enumerate(requests):
        if leg not in legs:
            continue
        before = 0
        for _, _packed, (proposed, accepted, emitted) in sorted(
            (t, packed(p, min(a, p), e), (p, min(a, p), e)) for t, p, a, e in lines
        ):
            if proposed:
                bucket = max(0, before.bit_length() - 7)
                sums = found.setdefault((leg, seq, bucket), [0, 0, 0])
                sums[0] += 1
                sums[1] += proposed
                sums[2] += accepted
            before += accepted + 1 if emitted is None else emitted
    return {(*key, *sums) for key, sums in found.items()}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.lists(position_line, min_size=1, max_size=40)), max_size=8
    ),
    st.randoms(use_true_random=False),
    st.integers(1, 64),
)
def test_the_sums_by_position_against_the_definition(requests, random, lines_per_pass):
    """The definition's table from numpy in passes of any size, each request's lines in any
    order (the native pass's rows are held to it in tests/test_line_rows.py)."""
    import polars as pl

    from fold.folding import by_position

    shuffled = [(leg, random.sample(lines, len(lines))) for leg, lines in requests]
    frame = pl.DataFrame(
        {
            "leg": [leg for leg, _ in shuffled],
            "seq": list(range(len(shuffled))),
            "t_ns": [[t for t, *_ in lines] for _, lines in shuffled],
            "tokens": [[packed(p, min(a, p), e) for _, p, a, e in lines] for _, lines in shuffled],
        },
        schema={
            "leg": pl.Int64,
            "seq": pl.UInt64,
            "t_ns": pl.List(pl.Int64),
            "tokens": pl.List(pl.Int64),
        },
    ).with_row_index("request")
    legs = [0, 2, 3]
    wanted = sums_by_definition(requests, legs)
    columns = ("leg", "seq", "bucket", "steps", "proposed", "accepted")
    saved = by_position.LINES_PER_PASS
    by_position.LINES_PER_PASS = lines_per_pass
    try:
        chosen = frame.filter(pl.col("leg").is_in(legs))
        tables = [by_position.ordered_bucket_sums(chosen)]
        tables = [table.with_columns(frame["leg"].gather(table["request"])) for table in tables]
    finally:
        by_position.LINES_PER_PASS = saved
    seqs = frame["seq"]
    (table,) = tables
    # a row names its request by its row in the frame; the frame gives its id
    keyed = table.with_columns(seqs.gather(table["request"]).alias("seq"))
    assert set(keyed.select(columns).iter_rows()) == wanted
    assert table.height == len(wanted)


@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6)), min_size=0, max_size=40))
def test_the_lowest_requests_are_the_first_of_the_whole_order(counts):
    """The lowest requests, picked among those at or below the tenth lowest A/P, are the
    first ten of every drafted request sorted by the whole key (many ties in A/P here)."""
    from fold.folding.accumulate import REQUEST_KEY
    from fold.folding.per_request import LOWEST_SHOWN, per_request
    from fold.folding.request_rows import EMPTY, request_tables

    requests = [
        {"w": f"w{i % 3}", "seq": i, "steps": 1, "proposed": p, "accepted": min(a, p)}
        for i, (p, a) in enumerate(counts)
    ]
    legs = [(0, requests[::2]), (1, requests[1::2])]
    # the fold's own request tables, in their order (by writer, then id), as the fold hands them
    legs = [(leg, sorted(rows, key=lambda r: (r["w"], r["seq"]))) for leg, rows in legs]
    frame = pl.DataFrame(
        [{"leg": leg, "sid": None, "lines": 1, **r} for leg, rows in legs for r in rows],
        schema={"leg": pl.Int64, "w": pl.String, "sid": pl.String, "seq": pl.UInt64,
                "lines": pl.Int64, "steps": pl.Int64, "proposed": pl.Int64,
                "accepted": pl.Int64},
    )  # fmt: skip
    tables = request_tables(frame, None, frame.select(REQUEST_KEY).clear())
    found = per_request([(leg, tables.get(leg, EMPTY)) for leg, _ in legs], {}, 0, 1)
    every = sorted(
        ((leg, r) for leg, rows in legs for r in rows),
        key=lambda item: (
            item[1]["accepted"] / item[1]["proposed"],
            -item[1]["proposed"],
            item[0],
            item[1]["w"],
            str(item[1]["seq"]),
        ),
    )[:LOWEST_SHOWN]
    assert found is None or [(row["leg"], row["seq"]) for row in found["lowest"]] == [
        (leg, r["seq"]) for leg, r in every
    ]
    assert (found is None) == (not requests)


def mixed_or_within(within: bool) -> list[bytes]:
    """Ten long requests (120 steps of k = 4), and with ``within`` False ten short ones too.

    Within: each long request accepts 3 of 4 on its first 64 steps and 1 of 4 after, so each
    request's own acceptance falls. Mixed: the long requests accept 1 of 4 throughout and the
    short ones (20 steps) 4 of 4: no request's acceptance falls, yet the pooled line does,
    because only the long requests reach the second bucket."""
    lines, n = [], 0
    for seq in range(10):
        for step in range(120):
            accepted = (3 if step < 64 else 1) if within else 1
            lines.append(line(n, seq * 1_000_000 + step * 1000, seq, 4, accepted))
            n += 1
    if not within:
        for seq in range(10, 20):
            for step in range(20):
                lines.append(line(n, seq * 1_000_000 + step * 1000, seq, 4, 4))
                n += 1
    return lines


def test_the_long_requests_alone_tell_a_fall_within_requests_from_a_mix(tmp_path: Path):
    # Positions by hand: a step's position is what the request emitted before it.
    # Mixed: a long request emits 2 a step, so steps 0-63 sit below 128 (bucket 0) and steps
    # 64-119 in bucket 1; a short one emits 5 a step, 100 tokens in all: bucket 0.
    #   pooled bucket 0: A = 10*64*1 + 10*20*4 = 1440 of P = 4 * (640 + 200) = 3360
    #   pooled bucket 1: A = 10*56 = 560 of P = 2240, so the pooled line falls;
    #   the long requests alone: 640/2560 and 560/2240, 25% in both: flat.
    for name in ("mixed", "within"):
        (tmp_path / name).mkdir()
    mixed = fold_lines(tmp_path / "mixed", [mixed_or_within(False)], resamples=100)
    positions = mixed["warm"]["by_output_position"]
    rates = [b["accept_rate"] for b in positions["buckets"] if b["steps"]]
    assert rates == [pytest.approx(1440 / 3360), pytest.approx(560 / 2240)]
    assert positions["falling"] is True
    assert positions["caveat"] == "within_requests_or_request_mix"
    alone = positions["long_requests"]
    assert alone["requests"] == 10 and alone["reach_bucket"] == 1
    assert [(b["steps"], b["proposed"], b["accepted"]) for b in alone["buckets"]] == [
        (640, 2560, 640),
        (560, 2240, 560),
    ]
    assert [b["accept_rate"] for b in alone["buckets"]] == [0.25, 0.25]
    # Within: steps 0-63 emit 4 each (positions 0-252), so bucket 0 holds steps 0-31 (3 of 4)
    # and bucket 1 (128-255) steps 32-63 (3 of 4); steps 64-119 start at 256 and emit 2 each
    # (256-366): bucket 2. The same ten requests in every bucket: alone = pooled.
    within = fold_lines(tmp_path / "within", [mixed_or_within(True)], resamples=100)
    positions = within["warm"]["by_output_position"]
    alone = positions["long_requests"]
    assert alone["requests"] == 10 and alone["reach_bucket"] == 2
    assert [b["accept_rate"] for b in alone["buckets"]] == [0.75, 0.75, 0.25]
    assert alone["buckets"] == [
        {key: b[key] for key in ("steps", "proposed", "accepted", "accept_rate")}
        for b in positions["buckets"]
    ]
    lines = summary_lines(within)
    assert any(
        "the 10 requests that reached the last bucket, alone" in found
        and "tokens 0-128: 75.0%, tokens 128-256: 75.0%, tokens 256-512: 25.0%" in found
        for found in lines
    )


# -- the means' draws, made by the fold's one bootstrap ----------------------------------


@settings(max_examples=30, deadline=None)
@given(case=fold_cases(), native=st.booleans())
def test_a_fold_draws_its_means_from_the_requests_it_shows(tmp_path_factory, case, native):
    """The fold's bootstrap draws the per-request means' columns from the requests' S, P and
    A in the order the legs' request tables hold them: every fold takes those draws (none is
    refused as made from other requests, which would fail the fold)."""
    from fold.errors import InputError, RefusedError
    from fold.folding import per_request as module

    log = tmp_path_factory.mktemp("means") / "steps.jsonl"
    log.write_bytes(case.log.data())
    used: list[bool] = []
    made_from = module.MeanDraws.made_from

    def watched(self, *args):
        used.append(made_from(self, *args))
        return used[-1]

    try:
        module.MeanDraws.made_from = watched  # type: ignore[method-assign]
        with native_switch(native):
            document = case.fold(log, resamples=40, seed=11)
    except (InputError, RefusedError):
        return
    finally:
        module.MeanDraws.made_from = made_from  # type: ignore[method-assign]
    if document.warm["per_request"] is None:
        return
    assert used == [True]
    shown = document.warm["per_request"]["per_request_mean"]["accept_rate_ci"]
    event(f"means with intervals: {shown is not None}")


def test_the_means_are_taken_only_from_draws_of_their_own_requests():
    import numpy as np

    from fold.folding.per_request import MeanDraws, _means, mean_columns

    counts = [
        {"steps": np.array([3, 5, 2]), "proposed": np.array([12, 20, 8]),
         "accepted": np.array([6, 11, 1])},
        {"steps": np.array([4, 1]), "proposed": np.array([16, 4]),
         "accepted": np.array([16, 0])},
    ]  # fmt: skip
    assert mean_columns(counts)[1]["counted"].tolist() == [1, 1]
    # Three resamples' sums, made up: the intervals are their quantiles, worked out here.
    sums = {
        "rate": np.array([2.0, 2.5, 3.0]) * 2**32,
        "length": np.array([4.0, 5.0, 6.0]) * 2**24,
        "counted": np.array([5, 5, 5]),
    }
    rate, length = _means(counts, 3, 7, MeanDraws(tuple(counts), 3, 7, sums))
    assert rate == pytest.approx(np.quantile([0.4, 0.5, 0.6], [0.025, 0.975]))
    assert length == pytest.approx([1 + x for x in np.quantile([0.8, 1.0, 1.2], [0.025, 0.975])])
    assert _means(counts, 0, 7, None) == (None, None)
    assert _means(counts, 3, 7, MeanDraws(tuple(counts), 3, 7, None)) == (None, None)
    other = [dict(counts[0]), counts[1]]
    other[0]["accepted"] = np.array([6, 11, 2])
    for drawn in (
        None,
        MeanDraws(tuple(other), 3, 7, sums),
        MeanDraws(tuple(counts), 4, 7, sums),
        MeanDraws(tuple(counts), 3, 8, sums),
        MeanDraws(tuple(counts[:1]), 3, 7, sums),
    ):
        with pytest.raises(ValueError, match="not made from these requests"):
            _means(counts, 3, 7, drawn)


def test_the_lowest_requests_are_placed_in_their_legs_past_an_empty_one():
    """The lowest requests are found in the concatenated requests of all the legs and placed
    back in their legs: with a leg of no request before and between, each shown request is the
    one of its own leg and id (worked out by hand)."""
    from fold.folding.per_request import per_request
    from fold.folding.request_rows import SCHEMA, RequestRows

    def rows(requests: list[tuple[int, int, int, int]]) -> RequestRows:
        table = pl.DataFrame(
            {
                "w": [WRITER] * len(requests),
                "seq": [seq for seq, *_ in requests],
                "steps": [steps for _, steps, _, _ in requests],
                "proposed": [proposed for *_, proposed, _ in requests],
                "accepted": [accepted for *_, accepted in requests],
            },
            schema_overrides={"seq": pl.UInt64},
        )
        missing = [
            pl.lit(None, dtype=t).alias(n) for n, t in SCHEMA.items() if n not in table.columns
        ]
        return RequestRows(table.with_columns(missing).select(list(SCHEMA)))

    legs = [
        (3, rows([])),
        (5, rows([(10, 2, 8, 6), (11, 2, 8, 1)])),  # 6/8, 1/8
        (6, rows([])),
        (8, rows([(20, 1, 4, 0), (21, 1, 4, 4), (22, 0, 0, 0)])),  # 0/4, 4/4, no draft
    ]
    pooled = {"accept_rate": None, "accept_rate_ci": None}
    found = per_request(legs, pooled, 0, 1)  # type: ignore[arg-type]
    assert found is not None
    assert found["requests"] == 5 and found["requests_without_drafts"] == 1
    shown = [(low["leg"], low["seq"], low["accepted"], low["proposed"]) for low in found["lowest"]]
    assert shown == [(8, 20, 0, 4), (5, 11, 1, 8), (5, 10, 6, 8), (8, 21, 4, 4)]
