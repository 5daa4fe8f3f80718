"""Another k: the figures had every draft been cut at k', checked against hand-worked logs, the
slow definition over the raw lines (``another_k_reference``; ``test_properties`` also holds the
whole fold to it), and the properties the definition implies."""

from __future__ import annotations

import copy
import json
import math
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from unittest.mock import patch

import polars as pl
import pytest
from another_k_reference import another_k_of, without_prose
from cadence_logs import T0_NS, T0_S, WRITER_A, WRITER_B, Row, leg, write_run
from hypothesis import assume, event, given
from hypothesis import strategies as st
from native_switch import native_switch
from reference import (
    ReferenceBadInput,
    ReferenceRefused,
    arm_legs,
    attribute,
    median,
    read_file,
)
from strategies import FoldCase, fold_cases, scaled

import fold.folding.another_k
from fold.api import fold_acceptance
from fold.cli import main as cli
from fold.errors import InputError, RefusedError
from fold.folding.another_k import MAX_CUT_K, another_k, cut_sums
from fold.folding.step_lengths import ordered_length_sums, step_time_by_length
from fold.folding.uncertainty import bootstrap
from fold.inputs.acceptance import Counts
from fold.inputs.leg_sums import Leg
from fold.inputs.limits import MAX_STEP_TOKENS
from fold.present.another_k import another_k_markdown
from fold.present.charts import charts
from fold.present.markdown import markdown_record
from fold.present.terminal import terminal

approx = pytest.approx
ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "fixtures" / "another-k"
US = 1_000


def hand_run(directory: Path) -> tuple[str, str]:
    """Leg 0 cold (one line); leg 1 warm, 10 s, 100 completion tokens (10 tok/s):

    seq 1 at +0 (P 4, A 4), +1000 ns (P 4, A 2), +3000 ns (P 2, A 1);
    seq 2 at +0 (P 0), +1500 ns (P 4, A 0).
    """
    legs = [leg(T0_S - 30, T0_S - 29, run=1), leg(T0_S, T0_S + 10, run=2)]
    base = T0_NS + 1_000_000
    rows = [
        Row(WRITER_B, (T0_S - 30) * 1_000_000_000 + 1000, seq=9, proposed=3, accepted=1),
        Row(WRITER_A, base, seq=1, proposed=4, accepted=4),
        Row(WRITER_A, base, seq=2, proposed=0, accepted=0),
        Row(WRITER_A, base + 1000, seq=1, proposed=4, accepted=2),
        Row(WRITER_A, base + 1500, seq=2, proposed=4, accepted=0),
        Row(WRITER_A, base + 3000, seq=1, proposed=2, accepted=1),
    ]
    return write_run(directory, legs, rows)


def test_a_hand_worked_log(tmp_path: Path):
    arm, log = hand_run(tmp_path)
    found = fold_acceptance(arm, [log], resamples=0).to_json()["warm"]["another_k"]
    # Drafted steps (P, A): (4, 4), (4, 2), (4, 0), (2, 1): S = 4, the largest k 4.
    assert found["largest_k"] == 4 and found["legs"] == [1]
    assert found["draft_lengths"] == [{"proposed": 2, "steps": 1}, {"proposed": 4, "steps": 3}]
    # Intervals: seq 1 1000 ns (to a P 4 step) and 2000 ns (to the P 2 step); seq 2 1500 ns
    # (to a P 4 step; its first line proposed nothing and has no interval).
    assert found["step_times"] == [
        {"proposed": 2, "intervals": 1, "mean_s": approx(2000e-9)},
        {"proposed": 4, "intervals": 2, "mean_s": approx(1250e-9)},
    ]
    rows = {row["k"]: row for row in found["rows"]}
    # k' 1: P' 1+1+1+1, A' 1+1+0+1; k' 2: P' 8, A' 2+2+0+1; k' 3: P' 3+3+3+2, A' 3+2+0+1;
    # k' 4: the log's own P 14, A 7.
    expected = {1: (4, 3), 2: (8, 5), 3: (11, 6), 4: (14, 7)}
    for k, (proposed, accepted) in expected.items():
        row = rows[k]
        assert (row["steps"], row["proposed"], row["accepted"]) == (4, proposed, accepted)
        assert row["accept_rate"] == approx(accepted / proposed)
        assert row["tokens_per_step"] == approx(1 + accepted / 4)
        # The drafted steps' output, S + A = 11 tokens, at 1 + A'/S tokens a step.
        assert row["steps_needed"] == approx(11 / (1 + accepted / 4))
        assert row["recorded"] is (k == 4)
    assert rows[2]["per_position"] == approx([3 / 4, 2 / 4])
    assert rows[4]["per_position"] == approx([3 / 4, 2 / 4, 1 / 4, 1 / 4])
    # Step time at k': each drafted step at the mean time of its cut length. k' 4: three
    # steps at 1250 ns and one at 2000 ns; k' 2: all four at 2000 ns; k' 1 and 3 cut steps to
    # lengths the log never timed (1; 3).
    assert rows[4]["step_time_s"] == approx((3 * 1250 + 2000) / 4 * 1e-9)
    assert rows[2]["step_time_s"] == approx(2000e-9)
    assert rows[1]["step_time_s"] is None and rows[1]["unmeasured_lengths"] == [1]
    assert rows[3]["step_time_s"] is None and rows[3]["unmeasured_lengths"] == [3]
    recorded_rate = 2.75 / ((3 * 1250 + 2000) / 4 * 1e-9)
    assert rows[4]["decode_tok_s"] == approx(recorded_rate)
    assert rows[2]["decode_tok_s"] == approx(2.25 / 2000e-9)
    # The modelled tok/s scales the warm leg's measured 10 tok/s by the decode rate's ratio.
    assert rows[4]["modelled_tok_s"] == approx(10.0)
    assert rows[2]["modelled_tok_s"] == approx(10.0 * (2.25 / 2000e-9) / recorded_rate)
    assert rows[1]["modelled_tok_s"] is None and rows[3]["modelled_tok_s"] is None


def test_one_draft_length_says_the_step_time_is_not_measured(tmp_path: Path):
    legs = [leg(T0_S, T0_S + 10, run=2)]
    rows = [Row(WRITER_A, T0_NS + 1000 * i, seq=1, proposed=3, accepted=i % 4) for i in range(8)]
    arm, log = write_run(tmp_path, legs, rows)
    found = fold_acceptance(arm, [log], resamples=0).to_json()["warm"]["another_k"]
    assert found["step_times"] is None
    assert "one draft length in the log (k = 3)" in found["step_time_note"]
    assert "not measured" in found["step_time_note"]
    assert all(row["modelled_tok_s"] is None for row in found["rows"])
    # Tokens per step are still there: A = 0+1+2+3+0+1+2+3 = 12 over 8 steps at k 3, and at
    # k' 1 the six steps that accepted any.
    assert found["rows"][2]["tokens_per_step"] == approx(1 + 12 / 8)
    assert found["rows"][0]["tokens_per_step"] == approx(1 + 6 / 8)


def test_the_counters_alone_have_no_another_k():
    """Totals have no (proposed, accepted) pairs to cut; vllm.cpp's trace has them, but no
    times: tokens per step only."""
    arm = str(ROOT / "fixtures" / "vllmcpp" / "our-arm.json")
    assert fold_acceptance(arm, [], resamples=0).to_json()["warm"]["another_k"] is None
    traces = sorted(str(path) for path in (ROOT / "fixtures" / "vllmcpp" / "stderr").iterdir())
    found = fold_acceptance(arm, traces, resamples=0).to_json()["warm"]["another_k"]
    assert found["step_times"] is None and "no times" in found["step_time_note"]
    assert found["rows"][-1]["recorded"]


def test_the_recorded_k_reproduces_the_fold_and_its_intervals():
    """On the gate example every leg has one request, so the legs-only bootstrap is the fold's
    own two-stage one: the recorded row's intervals are the fold's, to the bit."""
    gate = ROOT / "fixtures" / "gate-example"
    document = fold_acceptance(
        str(gate / "our-arm.json"), [str(gate / "steps.jsonl")], resamples=200
    ).to_json()
    warm = document["warm"]
    assert all(leg["request_count"] == 1 for leg in document["legs"])
    recorded = warm["another_k"]["rows"][-1]
    assert recorded["recorded"] and recorded["k"] == 7
    assert recorded["accept_rate"] == warm["accept_rate"]
    assert recorded["tokens_per_step"] == warm["mean_acceptance_length"]
    assert recorded["accept_rate_ci"] == warm["accept_rate_ci"]
    assert recorded["tokens_per_step_ci"] == warm["mean_acceptance_length_ci"]


# ----------------------------------------------------------------------------------------------
# Properties of the definition, on drawn (proposed, accepted) counts
# ----------------------------------------------------------------------------------------------


@st.composite
def joints(draw: st.DrawFn) -> dict[int, dict[tuple[int, int], int]]:
    legs = draw(st.integers(1, 4))
    joint = {}
    for index in range(legs):
        pairs = draw(
            st.lists(
                st.integers(1, 9).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p))),
                min_size=1,
                max_size=8,
            )
        )
        counts: dict[tuple[int, int], int] = defaultdict(int)
        for pair in pairs:
            counts[pair] += draw(st.integers(1, 50))
        joint[index] = dict(counts)
    return joint


@st.composite
def step_times(draw: st.DrawFn, joint: dict) -> dict[int, tuple[int, int]]:
    lengths = sorted({p for counts in joint.values() for p, _a in counts})
    timed = draw(st.lists(st.sampled_from(lengths), unique=True)) if lengths else []
    return {p: (draw(st.integers(1, 20)), draw(st.integers(1, 10**9))) for p in timed}


@given(joints(), st.data())
def test_cut_figures_keep_their_order_in_k(joint, data):
    """Tokens per step never fall as k' grows (a longer draft accepts at least as many), A'
    and P' grow, S stays, the steps needed never grow; the recorded row is the log's own
    counts, and each row's per position is the recorded one's first k' positions."""
    times = data.draw(step_times(joint))
    found = another_k(joint, list(joint), step_times=times, tok_s=data.draw(st.floats(1, 1e4)))
    assert found is not None
    steps = sum(sum(counts.values()) for counts in joint.values())
    proposed = sum(p * n for counts in joint.values() for (p, _a), n in counts.items())
    accepted = sum(a * n for counts in joint.values() for (_p, a), n in counts.items())
    rows = found.rows
    assert [row.k for row in rows] == list(range(1, found.largest_k + 1))
    for before, after in pairwise(rows):
        assert after.counts.mean_acceptance_length >= before.counts.mean_acceptance_length
        assert after.counts.accepted >= before.counts.accepted
        assert after.counts.proposed > before.counts.proposed
        assert after.steps_needed <= before.steps_needed
    last = rows[-1]
    assert last.recorded and not any(row.recorded for row in rows[:-1])
    assert last.counts == Counts(steps, proposed, accepted)
    assert last.steps_needed == steps  # exactly: (S + A) S / (S + A)
    for row in rows:
        assert row.counts.steps == steps
        assert row.per_position == last.per_position[: row.k]
        assert row.counts.accept_rate == row.counts.accepted / row.counts.proposed


@given(joints(), st.floats(1, 1e4))
def test_the_recorded_row_models_the_measured_tok_s(joint, tok_s):
    lengths = {p for counts in joint.values() for p, _a in counts}
    times = {p: (3, 1000 * p) for p in lengths}  # every length timed
    found = another_k(joint, list(joint), step_times=times, tok_s=tok_s)
    if len(lengths) == 1:
        assert found.step_times is None and found.rows[-1].modelled_tok_s is None
        return
    assert found.rows[-1].modelled_tok_s == approx(tok_s, rel=1e-12)
    for row in found.rows:
        # A k' is modelled exactly when every length it cuts a step to was timed.
        missing = sorted({min(p, row.k) for p in lengths} - lengths)
        assert list(row.unmeasured_lengths) == missing
        assert (row.modelled_tok_s is None) is bool(missing)


@given(joints())
def test_the_point_figures_depend_only_on_the_pooled_counts(joint):
    """Moving steps between legs changes the intervals, never a point figure."""
    pooled: dict[tuple[int, int], int] = defaultdict(int)
    for counts in joint.values():
        for pair, n in counts.items():
            pooled[pair] += n
    apart = another_k(joint, list(joint))
    together = another_k({0: dict(pooled)}, [0])
    for one, other in zip(apart.rows, together.rows, strict=True):
        assert one.counts == other.counts


@given(joints(), st.integers(1, 12))
def test_cut_sums_from_the_definition(joint, k):
    for counts in joint.values():
        steps = [(p, a) for (p, a), n in counts.items() for _ in range(n)]
        assert cut_sums(counts, k) == (
            len(steps),
            sum(min(p, k) for p, _a in steps),
            sum(min(a, k) for _p, a in steps),
        )


def test_a_long_draft_gets_rows_up_to_the_cap_and_its_own():
    found = another_k({0: {(5000, 3): 2, (2, 1): 1}}, [0])
    assert [row.k for row in found.rows] == [*range(1, MAX_CUT_K + 1), 5000]
    assert found.rows[-1].recorded and found.rows[-1].counts.accepted == 7


@given(joints(), st.integers(0, 2**32))
def test_intervals_hold_their_figure_and_are_seeded(joint, seed):
    assume(len(joint) >= 2)
    first = another_k(joint, list(joint), resamples=50, seed=seed)
    again = another_k(joint, list(joint), resamples=50, seed=seed)
    assert first == again
    for row in first.rows:
        if row.accept_rate_ci is None:
            continue
        low, high = row.accept_rate_ci
        assert 0 <= low <= high <= 1
        low, high = row.tokens_per_step_ci
        assert 1 <= low <= high <= 1 + row.k


@given(joints(), st.integers(0, 2**32), st.sampled_from([None, 1, 2]), st.booleans())
def test_every_k_drawn_at_once_equals_a_bootstrap_per_k(joint, seed, per_call, absent):
    """The k' are drawn in one bootstrap, or a few at a time past a bound on its pools (here
    also one k' a call, or two); each k' alone, with its own three columns, draws the same
    resamples (the same seed and legs), so every interval is the same to the bit. A warm leg
    may have no drafted step (``absent``)."""
    assume(len(joint) >= 2)
    legs = [*joint, max(joint) + 1] if absent else list(joint)
    # the pools' bytes for ``per_call`` k' of three columns (a value a leg and resample)
    bound = 64 * 2**20 if per_call is None else per_call * 3 * 8 * len(legs) * 60
    with patch.object(fold.folding.another_k, "_POOLS_AT_ONCE", bound):
        found = another_k(joint, legs, resamples=60, seed=seed)
    assert found is not None
    for row in found.rows:
        units = []
        for index in legs:
            steps, proposed, accepted = cut_sums(joint.get(index, {}), row.k)
            units.append(
                Leg(requests={"steps": [steps], "proposed": [proposed], "accepted": [accepted]})
            )
        alone = bootstrap(units, {"legs": list(range(len(units)))}, 60, seed)["legs"]
        assert row.accept_rate_ci == alone.interval("accept_rate")
        assert row.tokens_per_step_ci == alone.interval("mean_acceptance_length")


# ----------------------------------------------------------------------------------------------
# The fold's block against the slow definition over the raw lines, both paths, any block size
# ----------------------------------------------------------------------------------------------


def raw_another_k(case: FoldCase, data: bytes) -> dict | None:
    """The slow definition over the log's own lines (the reference's parse and attribution)."""
    legs = arm_legs(case.document)
    warm = [leg.index for leg in legs if case.predicate.holds(leg.fields)]
    record = read_file("log", data, skip_bad_lines=case.skip_bad_lines)
    steps = []
    for step in record.steps:
        _status, index = attribute(step, legs)
        if index in warm:
            steps.append((index, step))
    if not warm:
        raise ReferenceRefused("no warm leg")
    return another_k_of(steps, warm, median([float(legs[index].fields["tok_s"]) for index in warm]))


@scaled(0.5)
@given(fold_cases(), st.sampled_from([True, False]))
def test_the_fold_equals_the_definition_over_the_lines(tmp_path_factory, case, native):
    data = case.log.data()
    log = tmp_path_factory.mktemp("another-k") / "steps.jsonl"
    log.write_bytes(data)
    try:
        expected = raw_another_k(case, data)
    except (ReferenceBadInput, ReferenceRefused):
        return
    try:
        with native_switch(native):
            document = case.fold(log, resamples=0).to_json()
    except (InputError, RefusedError):
        return
    found = without_prose(document["warm"]["another_k"])
    event(f"step times measured: {found is not None and found['step_times'] is not None}")
    assert json.dumps(found, sort_keys=True) == json.dumps(expected, sort_keys=True) or _close(
        expected, found
    )


def _close(expected, actual) -> bool:
    if isinstance(expected, dict):
        return expected.keys() == actual.keys() and all(
            _close(expected[key], actual[key]) for key in expected
        )
    if isinstance(expected, list):
        return len(expected) == len(actual) and all(map(_close, expected, actual))
    if isinstance(expected, float):
        return math.isclose(expected, actual, rel_tol=1e-12)
    return expected == actual


# ----------------------------------------------------------------------------------------------
# The toy gate with several draft lengths (fixtures/another-k), and the presenters
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy() -> dict:
    return fold_acceptance(
        str(TOY / "our-arm.json"), [str(TOY / "steps.jsonl")], resamples=200
    ).to_json()


def test_the_toy_gate_measures_a_step_time_per_draft_length(toy):
    found = toy["warm"]["another_k"]
    assert [time["proposed"] for time in found["step_times"]][-3:] == [4, 5, 6]
    by_length = {time["proposed"]: time for time in found["step_times"]}
    # The toy engine sleeps 400 us a forward and 100 us per token of its longest draft, and
    # its forwards take the lengths 2, 4 and 6 in turn: each longer draft takes longer.
    assert by_length[2]["mean_s"] < by_length[4]["mean_s"] < by_length[6]["mean_s"]
    assert by_length[6]["mean_s"] > 1000e-6 > by_length[2]["mean_s"] > 600e-6
    assert all(row["modelled_tok_s"] is not None for row in found["rows"])
    assert found["rows"][-1]["modelled_tok_s"] == approx(toy["warm"]["output_throughput_tok_s"])


def test_the_terminal_shows_it_under_details_only(toy):
    plain = terminal(toy, width=120)
    detailed = terminal(toy, width=120, details=True)
    assert "Another k" not in plain
    assert "Another k" in detailed
    words = " ".join(detailed.split())
    assert "chain drafter whose first k' tokens would be the same" in words
    assert "steps that follow alike" in words
    assert "measured from the log at draft lengths" in words
    rows = toy["warm"]["another_k"]["rows"]
    table = detailed[detailed.index("Another k") :]
    for row in rows:
        shown = f"{100 * row['accept_rate']:.1f}%"
        assert shown in table


def test_the_markdown_section_carries_the_figures_and_the_assumption(toy):
    section = another_k_markdown(toy)
    assert section in markdown_record(toy)
    lines = [line for line in section.splitlines() if line.startswith("| ") and "k'" not in line]
    rows = toy["warm"]["another_k"]["rows"]
    assert len(lines) == len(rows)
    for line, row in zip(lines, rows, strict=True):
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[0] == f"{row['k']}{'*' if row['recorded'] else ''}"
        assert cells[1] == str(row["proposed"]) and cells[2] == str(row["accepted"])
        low, high = row["tokens_per_step_ci"]
        assert cells[4] == f"{row['tokens_per_step']:.2f} [{low:.2f}, {high:.2f}]"
    assert "chain drafter" in section and "steps needed =" in section


def test_the_page_has_the_chart(tmp_path: Path, toy):
    page = tmp_path / "page.html"
    arm, log = str(TOY / "our-arm.json"), str(TOY / "steps.jsonl")
    assert cli([arm, log, "--html", str(page), "--quiet", "--bootstrap", "0"]) == 0
    text = page.read_text()
    assert 'id="another-k"' in text
    assert text.index('id="per-position"') < text.index('id="another-k"')


def test_one_line_when_the_warm_legs_drafted_nothing():
    assert another_k({0: {}}, [0]) is None
    document = {"warm": {"another_k": None}}
    assert another_k_markdown(document) is None


def drawn_marks(document: dict) -> tuple[list, list, list, list]:
    """The chart's marks read back from matplotlib: (k', tokens per step) of the first line,
    (k', tok/s) of the twin axis's line (empty without one)."""
    from matplotlib.figure import Figure

    (chart,) = [chart for chart in charts(document) if chart.name == "another-k"]
    figure = Figure()
    chart.draw(figure)
    tokens_line = figure.axes[0].lines[0]
    rate_lines = figure.axes[1].lines if len(figure.axes) > 1 else []
    rate_x = list(rate_lines[0].get_xdata()) if rate_lines else []
    rate_y = list(rate_lines[0].get_ydata()) if rate_lines else []
    return list(tokens_line.get_xdata()), list(tokens_line.get_ydata()), rate_x, rate_y


def marks_agree(document: dict, figures: dict) -> bool:
    """The marks equal the rows of ``figures`` (the block the chart should show)."""
    ks, tokens, rate_k, rate = drawn_marks(document)
    rows = figures["rows"]
    modelled = [row for row in rows if row["modelled_tok_s"] is not None]
    return (
        ks == [row["k"] for row in rows]
        and tokens == approx([row["tokens_per_step"] for row in rows])
        and rate_k == [row["k"] for row in modelled]
        and rate == approx([row["modelled_tok_s"] for row in modelled])
    )


def test_the_chart_draws_the_figures_it_was_given(toy):
    found = toy["warm"]["another_k"]
    assert marks_agree(toy, found)
    # The recorded k is the hollow mark on the tokens-per-step line.
    ks, _, rate_k, _ = drawn_marks(toy)
    assert len(ks) == len(rate_k) == found["largest_k"]
    # Drawn from other figures (k' rows shifted by one), the same check fails.
    shifted = copy.deepcopy(toy)
    rows = shifted["warm"]["another_k"]["rows"]
    values = [row["tokens_per_step"] for row in rows]
    for row, value in zip(rows, values[1:] + values[:1], strict=True):
        row["tokens_per_step"] = value
    assert not marks_agree(shifted, found)


def test_the_chart_without_a_measured_step_time_draws_tokens_per_step_only():
    gate = ROOT / "fixtures" / "gate-example"
    document = fold_acceptance(
        str(gate / "our-arm.json"), [str(gate / "steps.jsonl")], resamples=0
    ).to_json()
    ks, tokens, rate_k, _ = drawn_marks(document)
    rows = document["warm"]["another_k"]["rows"]
    assert ks == list(range(1, 8)) and rate_k == []
    assert tokens == approx([1 + row["accepted"] / row["steps"] for row in rows])


# ----------------------------------------------------------------------------------------------
# The step time per draft length: the extension, numpy and the definition agree
# ----------------------------------------------------------------------------------------------

request_lines = st.lists(
    st.tuples(
        st.one_of(st.integers(0, 50), st.integers(0, 2**63 - 1)),  # ties and far-apart times
        st.sampled_from([0, 1, 2, 4, 7, MAX_STEP_TOKENS]),
    ),
    min_size=1,
    max_size=12,
)


@given(st.lists(st.tuples(st.integers(0, 3), request_lines), min_size=1, max_size=8))
def test_the_step_time_per_length_against_the_definition(requests):
    """Per draft length, the count and exact sum of intervals to a line of that length, each
    request's lines taken in (time, proposed) order: worked out here one request at a time.
    (The native pass's rows are held to these in tests/test_line_rows.py.)"""
    lines = pl.DataFrame(
        {
            "request": list(range(len(requests))),
            "t_ns": [[t for t, _ in lines] for _, lines in requests],
            # Each line's counts packed (accepted and emitted do not enter the step time).
            "tokens": [[p for _, p in lines] for _, lines in requests],
        },
        schema={"request": pl.UInt32, "t_ns": pl.List(pl.Int64), "tokens": pl.List(pl.Int64)},
    )
    step_times = pl.DataFrame({"leg": [index for index, _ in requests]})
    legs = [0, 2, 3]
    expected: dict[int, list[int]] = defaultdict(list)
    by_request: dict[tuple[int, int], list[int]] = defaultdict(list)
    for row, (index, request) in enumerate(requests):
        for (before, _), (after, proposed) in pairwise(sorted(request)):
            if proposed:
                by_request[(row, proposed)].append(after - before)
                if index in legs:
                    expected[proposed].append(after - before)
    sums = ordered_length_sums(lines)
    assert {
        (row["request"], row["length"]): (row["intervals"], row["ns"])
        for row in sums.iter_rows(named=True)
    } == {key: (len(gaps), sum(gaps)) for key, gaps in by_request.items()}
    wanted = {p: (len(gaps), sum(gaps)) for p, gaps in expected.items()}
    assert step_time_by_length(sums, step_times, legs) == wanted
