"""The step split: figures worked out by hand, a second implementation straight from step lines,
and the invariants (the parts add up, they fit where every step fits, order does not matter)."""

from __future__ import annotations

import math
import random

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fold.folding.step_split import (
    NO_SPLIT,
    TOLERANCE_NS,
    TOLERANCE_SHARE,
    fold_step_split,
    from_fold,
    split_requests,
)
from fold.present.step_split import step_split_html, step_split_lines, step_split_markdown

approx = pytest.approx
KEY_SCHEMA = {"leg": pl.Int64, "w": pl.String, "sid": pl.String, "seq": pl.UInt64}


def first_of(row: dict) -> int:
    """The request's first line: the earliest time, then the one written first (its place in
    the lists stands for the writer's line number ``n``)."""
    return min(range(len(row["t_ns"])), key=lambda i: (row["t_ns"][i], i))


def tables(rows: list[dict]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The partial fold's per-request duration sums (and the first line's durations) and the
    cadence's, from one dict per request: leg, seq, lines (t_ns list), draft / verify (per-step
    lists, None: not carried)."""
    sums, cadence = [], []
    for row in rows:
        key = {"leg": row["leg"], "w": "w0", "sid": None, "seq": row["seq"]}
        times = sorted(row["t_ns"])
        drafts = [d for d in row["draft"] if d is not None]
        verifies = [v for v in row["verify"] if v is not None]
        first = first_of(row)
        sums.append(
            {
                **key,
                "draft_steps": len(drafts),
                "draft_ns": sum(drafts),
                "verify_steps": len(verifies),
                "verify_ns": sum(verifies),
                "first_draft_ns": row["draft"][first],
                "first_verify_ns": row["verify"][first],
            }
        )
        cadence.append({**key, "intervals": len(times) - 1, "decode_ns": times[-1] - times[0]})
    schema = {**KEY_SCHEMA, **dict.fromkeys(("draft_steps", "draft_ns"), pl.Int64)}
    schema.update(dict.fromkeys(("verify_steps", "verify_ns"), pl.Int64))
    schema.update(dict.fromkeys(("first_draft_ns", "first_verify_ns"), pl.Int64))
    return (
        pl.DataFrame(sums, schema=schema),
        pl.DataFrame(cadence, schema={**KEY_SCHEMA, "intervals": pl.Int64, "decode_ns": pl.Int64}),
    )


def request(leg: int, seq: int, t_ns: list[int], draft: list, verify: list) -> dict:
    return {"leg": leg, "seq": seq, "t_ns": t_ns, "draft": draft, "verify": verify}


def hand_rows() -> list[dict]:
    # Leg 0, request 1: 4 steps 2000 ns apart, drafting 100 ns and verifying 250 ns each.
    # Leg 0, request 2: 4 steps 3000 ns apart, drafting 200 and verifying 300 each.
    # Leg 1, request 3: 3 steps 2000 ns apart, drafting 100 and verifying 300 each.
    return [
        request(0, 1, [0, 2000, 4000, 6000], [100] * 4, [250] * 4),
        request(0, 2, [10, 3010, 6010, 9010], [200] * 4, [300] * 4),
        request(1, 3, [0, 2000, 4000], [100] * 3, [300] * 3),
    ]


def test_figures_worked_out_by_hand():
    requests, cadence = tables(hand_rows())
    split = fold_step_split(split_requests(requests, cadence), [0, 1, 2], [0, 1])
    leg0 = split.legs[0]
    # Leg 0: 6 intervals over 6000 + 9000 ns: 2500 ns a step. Drafting in the decode windows:
    # 3 x 100 + 3 x 200 = 900 ns over 6 intervals = 150 ns; verifying 3 x 250 + 3 x 300 = 1650
    # ns, 275 ns a step; the rest 2500 - 150 - 275 = 2075 ns.
    assert leg0["requests"] == 2 and leg0["intervals"] == 6
    assert leg0["draft_steps"] == 8 and leg0["verify_steps"] == 8
    assert leg0["step_s"] == approx(2500e-9)
    assert leg0["draft_s"] == approx(150e-9)
    assert leg0["verify_s"] == approx(275e-9)
    assert leg0["rest_s"] == approx(2075e-9)
    assert leg0["draft_share"] == approx(0.06)
    assert leg0["verify_share"] == approx(0.11)
    assert leg0["rest_share"] == approx(0.83)
    assert leg0["tolerance_s"] == approx((0.001 * 2500 + 1000) * 1e-9)
    assert leg0["adds_up"] is True and list(leg0["measured"]) == ["draft", "verify"]
    # Leg 1: 2000 ns a step, 100 drafting, 300 verifying, 1600 the rest.
    leg1 = split.legs[1]
    assert (leg1["step_s"], leg1["draft_s"], leg1["verify_s"], leg1["rest_s"]) == approx(
        (2000e-9, 100e-9, 300e-9, 1600e-9)
    )
    # Leg 2 has no step at all: no split.
    assert split.legs[2] is None
    # Warm (legs 0 and 1): 8 intervals over 19000 ns = 2375 ns; drafting 900 + 200 = 1100 ns
    # (137.5 a step); verifying 1650 + 600 = 2250 ns (281.25); rest 1956.25.
    warm = split.warm
    assert warm["requests"] == 3 and warm["intervals"] == 8
    assert (warm["step_s"], warm["draft_s"], warm["verify_s"], warm["rest_s"]) == approx(
        (2375e-9, 137.5e-9, 281.25e-9, 1956.25e-9)
    )


def test_the_first_step_s_parts_lie_before_the_decode_window():
    # One request: a first step whose drafting took 10 us (before the first time stamp), then
    # two steps 1000 ns apart drafting 100 ns each. The decode window holds the later two
    # steps' parts only: drafting 100 ns a step, the rest 900 ns. (Averaged in, the first
    # step's 10 us made drafting 3400 ns a step, past the step: parts that do fit said not to.)
    requests, cadence = tables([request(0, 1, [0, 1000, 2000], [10_000, 100, 100], [0, 0, 0])])
    split = fold_step_split(split_requests(requests, cadence), [0], [0])
    assert split.warm["draft_s"] == approx(100e-9)
    assert split.warm["rest_s"] == approx(900e-9)
    assert split.warm["adds_up"] is True
    # Only the first step carried a duration: nothing inside the window was timed.
    requests, cadence = tables([request(0, 2, [0, 1000], [50, None], [70, None])])
    assert split_requests(requests, cadence).height == 0


def test_a_request_with_one_step_or_no_duration_takes_no_part():
    rows = [
        request(0, 1, [5], [100], [200]),  # one step: no interval
        request(0, 2, [0, 1000], [None, None], [None, None]),  # no duration
        request(0, 3, [0, 1000, 2000], [100, 100, 100], [400, 400, 400]),
    ]
    requests, cadence = tables(rows)
    table = split_requests(requests, cadence)
    assert table["seq"].to_list() == [3]
    split = fold_step_split(table, [0], [0])
    assert split.warm["requests"] == 1 and split.warm["step_s"] == approx(1000e-9)


def test_a_part_carried_by_only_some_requests_is_not_measured():
    rows = [
        request(0, 1, [0, 1000, 2000], [100, 100, 100], [400, 400, 400]),
        request(0, 2, [0, 1000, 2000], [None, None, None], [300, 300, 300]),
    ]
    requests, cadence = tables(rows)
    split = fold_step_split(split_requests(requests, cadence), [0], [0])
    warm = split.warm
    assert list(warm["measured"]) == ["verify"]
    assert warm["draft_s"] is None and warm["draft_share"] is None
    # Verifying: (2 x 400 + 2 x 300) / 4 = 350 ns; the rest (drafting within it) 650 ns.
    assert warm["verify_s"] == approx(350e-9)
    assert warm["rest_s"] == approx(650e-9)


def test_no_duration_anywhere_is_no_split():
    requests, cadence = tables([request(0, 1, [0, 10, 20], [None] * 3, [None] * 3)])
    assert from_fold(requests, cadence, [0], [0]) is NO_SPLIT
    assert from_fold(requests.drop("draft_ns"), cadence, [0], [0]) is NO_SPLIT
    assert NO_SPLIT.warm_json() is None and NO_SPLIT.leg_json(0) is None


# --- a second implementation, straight from the lines -----------------------------------------


def reference(rows: list[dict], legs: set[int]) -> dict | None:
    """The definition applied with loops over each request's lines."""
    intervals = decode = 0
    parts = {"draft": 0.0, "verify": 0.0}
    every = {"draft": True, "verify": True}
    requests = 0
    for row in rows:
        times = sorted(row["t_ns"])
        first = first_of(row)
        carried = {
            part: [x for i, x in enumerate(row[part]) if x is not None and i != first]
            for part in parts
        }
        if row["leg"] not in legs or len(times) < 2 or not any(carried.values()):
            continue
        requests += 1
        intervals += len(times) - 1
        decode += times[-1] - times[0]
        for part, values in carried.items():
            if values:
                parts[part] += sum(values) / len(values) * (len(times) - 1)
            else:
                every[part] = False
    if not requests:
        return None
    step = decode / intervals
    measured = {part: parts[part] / intervals for part in parts if every[part]}
    return {"step": step, **measured, "rest": step - sum(measured.values())}


@st.composite
def runs(draw, parts_fit: bool = False) -> list[dict]:
    rows = []
    for seq in range(draw(st.integers(1, 6))):
        steps = draw(st.integers(1, 8))
        gaps = draw(st.lists(st.integers(1, 10**7), min_size=steps - 1, max_size=steps - 1))
        start = draw(st.integers(0, 10**9))
        times = [start + sum(gaps[:i]) for i in range(steps)]
        least = min(gaps, default=10**7)
        top = least // 2 if parts_fit else 2 * 10**7
        timed = st.one_of(st.none(), st.integers(0, top)) if not parts_fit else st.integers(0, top)
        # the first step's parts come before the window: any length, fitting or not
        first = st.one_of(st.none(), st.integers(0, 2 * 10**7))
        draft = draw(first.map(lambda x: [x])) + draw(
            st.lists(timed, min_size=steps - 1, max_size=steps - 1)
        )
        verify = draw(first.map(lambda x: [x])) + draw(
            st.lists(timed, min_size=steps - 1, max_size=steps - 1)
        )
        rows.append(request(draw(st.integers(0, 2)), seq, times, draft, verify))
    return rows


@settings(max_examples=150, deadline=None)
@given(runs())
def test_the_split_is_the_definition_applied_to_the_lines(rows):
    requests, cadence = tables(rows)
    split = from_fold(requests, cadence, [0, 1, 2], [0, 2])
    for legs, found in [({0}, split.leg_json(0)), ({1}, split.leg_json(1)),
                        ({0, 2}, split.warm_json())]:  # fmt: skip
        expected = reference(rows, legs)
        if expected is None:
            assert found is None
            continue
        assert found["step_s"] == approx(expected["step"] * 1e-9, rel=1e-12)
        assert found["rest_s"] == approx(expected["rest"] * 1e-9, rel=1e-9, abs=1e-15)
        for part in ("draft", "verify"):
            if part in expected:
                assert found[f"{part}_s"] == approx(expected[part] * 1e-9, rel=1e-12)
            else:
                assert found[f"{part}_s"] is None and part not in found["measured"]


@settings(max_examples=150, deadline=None)
@given(runs())
def test_the_parts_and_the_rest_add_up_to_the_step(rows):
    requests, cadence = tables(rows)
    split = from_fold(requests, cadence, [0, 1, 2], [0, 1, 2])
    for found in [split.warm_json(), *(split.leg_json(i) for i in range(3))]:
        if found is None:
            continue
        measured = [found[f"{part}_s"] for part in found["measured"]]
        assert sum(measured) + found["rest_s"] == approx(found["step_s"], rel=1e-9)
        shares = [found[f"{part}_share"] for part in (*found["measured"], "rest")]
        assert math.fsum(shares) == approx(1.0)
        tolerance = TOLERANCE_SHARE * found["step_s"] + TOLERANCE_NS * 1e-9
        assert found["tolerance_s"] == approx(tolerance)
        assert found["adds_up"] is (found["rest_s"] >= -found["tolerance_s"])


@settings(max_examples=100, deadline=None)
@given(runs(parts_fit=True))
def test_parts_that_fit_in_every_interval_fit_in_the_step(rows):
    # Every step's drafting and verifying together within its request's shortest interval: the
    # split's rest is never below 0, in every leg and warm.
    requests, cadence = tables(rows)
    split = from_fold(requests, cadence, [0, 1, 2], [0, 1, 2])
    for found in [split.warm_json(), *(split.leg_json(i) for i in range(3))]:
        if found is not None:
            assert found["rest_s"] >= -1e-15 and found["adds_up"]


@settings(max_examples=60, deadline=None)
@given(runs(), st.randoms(use_true_random=False))
def test_the_order_of_the_requests_changes_nothing(rows, rnd: random.Random):
    requests, cadence = tables(rows)
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    other_requests, other_cadence = tables(shuffled)
    first = from_fold(requests, cadence, [0, 1, 2], [0, 1], resamples=50)
    second = from_fold(other_requests, other_cadence, [0, 1, 2], [0, 1], resamples=50)
    assert first.warm_json() == second.warm_json()
    assert [first.leg_json(i) for i in range(3)] == [second.leg_json(i) for i in range(3)]


# --- intervals --------------------------------------------------------------------------------


def test_requests_all_alike_give_intervals_of_no_width():
    rows = [
        request(leg, seq, [0, 1000, 2000, 3000], [100] * 4, [500] * 4)
        for leg in range(3)
        for seq in range(4)
    ]
    requests, cadence = tables(rows)
    warm = from_fold(requests, cadence, [0, 1, 2], [0, 1, 2], resamples=200).warm_json()
    for name in ("step_s", "draft_s", "verify_s", "rest_s", "draft_share", "rest_share"):
        low, high = warm[f"{name}_ci"]
        assert low == approx(warm[name]) and high == approx(warm[name])


def test_intervals_hold_the_spread_of_the_requests_and_none_for_one_request():
    rows = [
        request(0, seq, [0, 1000 + 100 * seq, 2000 + 200 * seq], [100 + 10 * seq] * 3, [400] * 3)
        for seq in range(6)
    ] + [request(1, 9, [0, 1000, 2000], [100] * 3, [400] * 3)]
    requests, cadence = tables(rows)
    split = from_fold(requests, cadence, [0, 1], [0, 1], resamples=400)
    leg0 = split.leg_json(0)
    low, high = leg0["step_s_ci"]
    # Requests' step times run from 1000 to 1500 ns: the pooled one's interval lies inside and
    # has width.
    assert 1000e-9 <= low < leg0["step_s"] < high <= 1500e-9
    low, high = leg0["rest_share_ci"]
    assert low < leg0["rest_share"] < high
    # One request in leg 1: nothing to redraw below the leg.
    assert split.leg_json(1)["step_s_ci"] is None
    # The warm interval redraws the legs too: it exists.
    assert split.warm_json()["step_s_ci"] is not None


def test_the_same_seed_gives_the_same_intervals():
    requests, cadence = tables(
        [request(0, s, [0, 900 + s, 2000 + 7 * s], [100 + s] * 3, [300] * 3) for s in range(5)]
    )
    first = from_fold(requests, cadence, [0], [0], resamples=100, seed=7).warm_json()
    again = from_fold(requests, cadence, [0], [0], resamples=100, seed=7).warm_json()
    other = from_fold(requests, cadence, [0], [0], resamples=100, seed=8).warm_json()
    assert first == again and first["step_s_ci"] != other["step_s_ci"]


# --- presenters, from the JSON alone -----------------------------------------------------------


def split_document() -> dict:
    requests, cadence = tables(hand_rows())
    split = from_fold(requests, cadence, [0, 1], [0, 1])
    return {
        "legs": [
            {"index": 0, "warm": True, "step_split": split.leg_json(0)},
            {"index": 1, "warm": False, "step_split": split.leg_json(1)},
        ],
        "warm": {"step_split": split.warm_json()},
    }


def test_the_line_under_the_speed_split_names_the_parts_largest_first():
    (line,) = step_split_lines(split_document())
    # Warm: 2375 ns a step; rest 82.4%, verifying 11.8%, drafting 5.8%.
    assert line == "our warm step 2.38us: rest 82.4%, verifying 11.8%, drafting 5.8%"


def test_the_markdown_and_page_sections_show_every_leg_and_warm():
    text = step_split_markdown(split_document())
    assert text.startswith("## Step split\n\n| leg |")
    assert "| 0 | 2 | 8 | 2.5us | 0.15us 6.0% | 0.275us 11.0% | 2.08us 83.0% | yes |" in text
    assert "| 1c | 1 | 3 | 2us | 0.1us 5.0% | 0.3us 15.0% | 1.6us 80.0% | yes |" in text
    assert "| warm | 3 | 11 | 2.38us | 0.138us 5.8% | 0.281us 11.8% | 1.96us 82.4% | yes |" in text
    page = step_split_html(split_document())
    assert page.startswith('<section id="step-split"><h2>Where does a step\'s time go?</h2>')
    assert "<td>1c</td>" in page and "<td>warm</td>" in page


def test_without_durations_the_sections_say_so():
    document = {"legs": [{"index": 0, "warm": True, "step_split": None}], "warm": {}}
    assert step_split_lines(document) == []
    assert "no step carried draft_ns or verify_ns" in step_split_markdown(document)
    assert step_split_html(document) == ""


def test_parts_past_the_step_are_shown_as_such():
    # steps 1000 ns apart, each later one drafting 2200 ns: 1200 ns past the step
    requests, cadence = tables([request(0, 1, [0, 1000, 2000], [0, 2200, 2200], [0] * 3)])
    document = {
        "legs": [
            {
                "index": 0,
                "warm": True,
                "step_split": from_fold(requests, cadence, [0], [0]).leg_json(0),
            }
        ],
        "warm": {"step_split": None},
    }
    assert "no: parts exceed the step by 1.2us" in step_split_markdown(document)


def test_a_warm_leg_without_durations_is_named_and_its_step_kept_apart():
    # Legs 0 and 1 warm. Leg 0: one timed request, steps 1000 ns apart. Leg 1: one request
    # with no duration, steps 4000 ns apart. The split is over leg 0 alone (1000 ns a step);
    # the cadence's warm step is over both: (2000 + 8000) / 4 intervals = 2500 ns.
    rows = [
        request(0, 1, [0, 1000, 2000], [100] * 3, [300] * 3),
        request(1, 2, [0, 4000, 8000], [None] * 3, [None] * 3),
    ]
    requests, cadence = tables(rows)
    split = from_fold(requests, cadence, [0, 1], [0, 1])
    warm = split.warm
    assert warm["requests"] == 1 and warm["step_s"] == approx(1000e-9)
    assert list(warm["untimed_legs"]) == [1] and warm["untimed_requests"] == 1
    assert warm["cadence_step_s"] == approx(2500e-9)
    assert split.legs[1] is None
    assert split.legs[0]["untimed_requests"] == 0 and list(split.legs[0]["untimed_legs"]) == []
    assert split.legs[0]["cadence_step_s"] == approx(1000e-9)
    document = {
        "legs": [
            {"index": 0, "warm": True, "step_split": split.leg_json(0)},
            {"index": 1, "warm": True, "step_split": split.leg_json(1)},
        ],
        "warm": {"step_split": split.warm_json()},
    }
    line = step_split_lines(document)[0]
    assert "over the timed legs only" in line and "leg 1" in line and "2.5us" in line
    record = step_split_markdown(document)
    assert "leg 1: no step carried a duration" in record
    assert "leg 1: no step carried a duration" in step_split_html(document)


def test_nothing_left_out_the_split_s_step_is_the_cadence_s():
    requests, cadence = tables(hand_rows())
    split = from_fold(requests, cadence, [0, 1], [0, 1])
    assert split.warm["cadence_step_s"] == split.warm["step_s"]
    assert list(split.warm["untimed_legs"]) == [] and split.warm["untimed_requests"] == 0
    document = {
        "legs": [{"index": i, "warm": True, "step_split": split.leg_json(i)} for i in (0, 1)],
        "warm": {"step_split": split.warm_json()},
    }
    assert "timed legs only" not in step_split_lines(document)[0]


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=8, unique=True),
    st.data(),
)
def test_only_requests_with_a_cadence_row_are_split(keys, data):
    """A request whose durations have no cadence row beside them (a request the cadence did not
    see in its leg) is not split, as an inner join of the two would leave it out; every other
    request with a part inside its decode window is, with the cadence's own decode figures."""
    from fold.folding.step_split import split_requests

    key = {"leg": pl.Int64, "w": pl.String, "sid": pl.String, "seq": pl.UInt64}
    ordered = sorted(keys)
    requests = pl.DataFrame(
        [
            {"leg": leg, "w": "w", "sid": None, "seq": seq, "draft_steps": 3, "draft_ns": 30,
             "verify_steps": 3, "verify_ns": 60, "first_draft_ns": 10, "first_verify_ns": 20}
            for leg, seq in ordered
        ],
        schema={**key, "draft_steps": pl.Int64, "draft_ns": pl.Int64, "verify_steps": pl.Int64,
                "verify_ns": pl.Int64, "first_draft_ns": pl.Int64, "first_verify_ns": pl.Int64},
    )  # fmt: skip
    seen = data.draw(st.lists(st.sampled_from(ordered), unique=True).map(sorted))
    cadence = pl.DataFrame(
        [
            {"leg": leg, "w": "w", "sid": None, "seq": seq, "intervals": 2 + leg, "decode_ns": 7}
            for leg, seq in seen
        ],
        schema={**key, "intervals": pl.Int64, "decode_ns": pl.Int64},
    )
    found = split_requests(requests, cadence)
    assert found.select("leg", "seq").rows() == seen
    assert found["decode_steps"].to_list() == [2 + leg for leg, _ in seen]
    assert found["decode_ns"].to_list() == [7] * len(seen)
