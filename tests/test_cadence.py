"""Step cadence on hand-built logs: every expected figure is worked out by hand from the times.

See ``cadence_logs`` for the runs: leg 1 holds one request with a 3 s start, 50 ms steps and one
2 s gap; leg 2 two concurrent requests stepping every 20 ms and every 40 ms.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from cadence_logs import T0_NS, WRITER_A, Row, S, leg, stall_and_pace_run, write_run
from hypothesis import HealthCheck, assume, given, settings
from rich.console import Console
from strategies import FoldCase, fold_cases, scaled

from fold.api import LogFold, fold_acceptance
from fold.cli import main
from fold.errors import InputError, RefusedError
from fold.folding.uncertainty import decode_steps_per_s
from fold.inputs.arm import load_arm
from fold.present.cadence import cadence_view

approx = pytest.approx


@pytest.fixture
def run(tmp_path: Path) -> tuple[str, str]:
    return stall_and_pace_run(tmp_path)


def test_a_request_with_a_late_start_and_one_stall(run):
    arm, log = run
    result = fold_acceptance(arm, [log])
    (request,) = result.legs[1]["requests"]
    cadence = request["cadence"]
    # 62 lines at 3.00 .. 5.00 s (41, 50 ms apart), then 7.00 .. 8.00 s (21): 61 intervals,
    # 60 of 50 ms and one of 2 s. The leg runs 0 .. 10 s.
    assert cadence["lines"] == 62 and cadence["intervals"] == 61
    assert cadence["first_step_s"] == approx(3.0)
    assert cadence["decode_s"] == approx(5.0)
    assert cadence["tail_s"] == approx(2.0)
    assert cadence["interval_median_s"] == approx(0.05)
    assert cadence["interval_p90_s"] == approx(0.05)  # rank ceil(0.9 * 61) = 55 of 61
    assert cadence["interval_p99_s"] == approx(2.0)  # rank ceil(0.99 * 61) = 61
    assert cadence["interval_max_s"] == approx(2.0)
    # 2 s > 4 x 50 ms: one stall, 2 s - 50 ms beyond the median.
    assert cadence["stalls"] == 1
    assert cadence["stall_s"] == approx(1.95)
    assert cadence["decode_steps_per_s"] == approx(61 / 5.0)
    # One request: the leg's pooled figures and medians are the request's own.
    figures = result.legs[1]["cadence"]
    assert figures["requests"] == 1
    for name in ("first_step_s", "decode_s", "tail_s", "stalls", "stall_s", "decode_steps_per_s"):
        assert figures[name] == approx(cadence[name])
        assert figures["median"][name] == approx(cadence[name])
    assert figures["shares"] == approx(
        {"before_first_step": 0.3, "decode": 0.5, "stalls": 0.195, "tail": 0.2}
    )
    # The acceptance figures still count S without the line that proposed nothing.
    assert result.legs[1]["steps"] == 61 and result.legs[1]["lines"] == 62


def test_concurrent_requests_at_different_paces(run):
    arm, log = run
    figures = fold_acceptance(arm, [log]).legs[2]
    first, second = (request["cadence"] for request in figures["requests"])
    # seq 1: 0.5 .. 2.5 s every 20 ms; seq 2: 0.5 .. 3.3 s every 40 ms; the leg is 4 s.
    assert (first["lines"], second["lines"]) == (101, 71)
    assert (first["first_step_s"], first["decode_s"], first["tail_s"]) == approx((0.5, 2.0, 1.5))
    assert (second["first_step_s"], second["decode_s"], second["tail_s"]) == approx((0.5, 2.8, 0.7))
    assert first["interval_median_s"] == approx(0.02)
    assert first["interval_max_s"] == approx(0.02)
    assert second["interval_median_s"] == approx(0.04)
    assert first["decode_steps_per_s"] == approx(50.0)
    assert second["decode_steps_per_s"] == approx(25.0)
    assert first["stalls"] == second["stalls"] == 0  # a slower request is not stalling
    cadence = figures["cadence"]
    assert cadence["requests"] == 2 and cadence["intervals"] == 170
    assert cadence["median"]["decode_steps_per_s"] == approx(37.5)  # median of 50 and 25
    assert cadence["decode_steps_per_s"] == approx(170 / 4.8)  # all intervals / all decode s
    assert cadence["first_step_s"] == approx(0.5)  # means per request
    assert cadence["decode_s"] == approx(2.4)
    assert cadence["tail_s"] == approx(1.1)
    # 100 intervals of 20 ms and 70 of 40 ms: the 85th and 86th are 20 ms; rank 153 is 40 ms.
    assert cadence["interval_median_s"] == approx(0.02)
    assert cadence["interval_p90_s"] == approx(0.04)
    assert cadence["interval_p99_s"] == approx(0.04)
    # Two requests in a 4 s leg: 8 request-seconds, 1.0 before first steps, 2.2 in tails.
    assert cadence["shares"] == approx(
        {"before_first_step": 0.125, "decode": 0.6, "stalls": 0.0, "tail": 0.275}
    )


def test_the_warm_fold_pools_the_requests_of_the_warm_legs(run):
    arm, log = run
    result = fold_acceptance(arm, [log])
    warm = result.warm["cadence"]
    # Legs 1 and 2: three requests, 61 + 170 intervals, 5 + 4.8 decode seconds.
    assert warm["requests"] == 3 and warm["intervals"] == 231
    assert warm["decode_steps_per_s"] == approx(231 / 9.8)
    assert warm["median"]["decode_steps_per_s"] == approx(25.0)  # of 12.2, 50 and 25
    assert warm["stalls"] == 1
    # Request-seconds: 10 + 4 + 4 = 18; before first steps 3 + 0.5 + 0.5, tails 2 + 1.5 + 0.7.
    assert warm["shares"] == approx(
        {"before_first_step": 4 / 18, "decode": 9.8 / 18, "stalls": 1.95 / 18, "tail": 4.2 / 18}
    )
    assert result.all["cadence"]["requests"] == 4  # the cold leg's request too
    assert result.fold.stall_factor == 4.0 and result.to_json()["stall_factor"] == 4.0


def test_the_stall_factor_decides_what_is_a_stall(run):
    arm, log = run
    # The gap is 40 times the median: a stall at factor 39, not at 40 (longer than, strictly).
    assert fold_acceptance(arm, [log], stall_factor=39).legs[1]["cadence"]["stalls"] == 1
    loose = fold_acceptance(arm, [log], stall_factor=40).legs[1]["cadence"]
    assert loose["stalls"] == 0 and loose["stall_s"] == 0.0
    for bad in (0.5, float("nan"), float("inf")):
        with pytest.raises(InputError, match="--stall-factor"):
            fold_acceptance(arm, [log], stall_factor=bad)


def test_a_coarse_clock_cannot_be_judged_for_stalls(tmp_path: Path):
    # Three lines at one instant and one 1 s later: the median interval is 0.
    times = [T0_NS + S, T0_NS + S, T0_NS + S, T0_NS + 2 * S]
    rows = [Row(WRITER_A, t, seq=1) for t in times]
    arm, log = write_run(tmp_path, [leg(1_764_000_000, 1_764_000_004, run=2)], rows)
    cadence = fold_acceptance(arm, [log]).legs[0]["requests"][0]["cadence"]
    assert cadence["interval_median_s"] == 0.0
    assert cadence["stalls"] is None and cadence["stall_s"] is None
    assert cadence["decode_steps_per_s"] == approx(3.0)


def test_files_split_anywhere_merge_to_the_same_cadence(run, tmp_path: Path):
    arm, log = run
    lines = Path(log).read_text().splitlines(keepends=True)
    parts = []
    for number, chunk in enumerate((lines[:30], lines[30:100], lines[100:])):
        part = tmp_path / f"part{number}.jsonl"
        part.write_text("".join(reversed(chunk)))  # and out of time order
        parts.append(str(part))
    whole_result = fold_acceptance(arm, [log])
    whole = whole_result.to_json()
    first = LogFold(load_arm(arm))
    first.add_file(parts[0])
    rest = LogFold(load_arm(arm))
    rest.add_file(parts[1])
    rest.add_file(parts[2])
    merged_result = first.merge(rest).result()
    merged = merged_result.to_json()
    for index in range(3):
        assert merged["legs"][index]["cadence"] == whole["legs"][index]["cadence"]
        assert [r["cadence"] for r in merged_result.legs[index]["requests"]] == [
            r["cadence"] for r in whole_result.legs[index]["requests"]
        ]
    assert merged["warm"]["cadence"] == whole["warm"]["cadence"]


def test_the_command_prints_the_cadence_and_takes_a_stall_factor(run, tmp_path, capsys):
    arm, log = run
    annotated = tmp_path / "annotated.json"
    assert main([arm, log, "--annotate", str(annotated), "--stall-factor", "39", "--details"]) == 0
    out = capsys.readouterr().out
    cadence = out.split("Another k")[0]  # the table after the cadence numbers its rows too
    rows = {line.split()[0]: line.split() for line in cadence.splitlines() if line.strip()}
    # leg 1: 3 s, 5 s, 2 s; intervals 50 ms, 50 ms, 2 s, 2 s; 1 stall of 1.95 s; 12.2 steps/s
    assert rows["1"][1:] == ["3s", "5s", "2s", "50ms", "50ms", "2s", "2s", "1", "1.95s", "12.20"]
    assert "22.2% before the first step" in out  # 4 of 18 request-seconds
    document = json.loads(annotated.read_text())
    assert document["legs"][1]["acceptance"]["cadence"]["stalls"] == 1
    assert document["acceptance"]["stall_factor"] == 39
    assert document["acceptance"]["warm"]["cadence"]["requests"] == 3
    assert main([arm, log, "--stall-factor", "40", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["legs"][1]["cadence"]["stalls"] == 0
    assert main([arm, log, "--stall-factor", "0.5"]) == 2
    assert "--stall-factor" in capsys.readouterr().err


# Some 60% of the shared strategy's logs are refused whole (most often a warm leg without a
# drafted step), and the invariants are of folded logs, so those are filtered. At that rate,
# hypothesis' filter_too_much check (50 filtered before the first 10 folded) failed an unlucky
# draw now and then: it is off here (the profile's own suppressions kept), and max_examples
# still counts folded logs only.
@settings(
    scaled(0.5),
    suppress_health_check=[*settings.default.suppress_health_check, HealthCheck.filter_too_much],
)
@given(fold_cases())
def test_cadence_invariants(case: FoldCase) -> None:
    """Whatever the log: durations fill the leg window (within the attribution band), the
    interval figures are ordered, stalls fit inside decoding, and shares add up to 1."""
    with tempfile.TemporaryDirectory(prefix="fold-cadence-") as directory:
        path = Path(directory) / "steps.jsonl"
        path.write_bytes(case.log.data())
        try:
            result = case.fold(path)
        except (InputError, RefusedError):
            assume(False)
    for figures in result.legs:
        for request in figures["requests"]:
            cadence = request["cadence"]
            assert (
                cadence["lines"] == request["lines"]
                and cadence["intervals"] == request["lines"] - 1
            )
            spent = cadence["first_step_s"] + cadence["decode_s"] + cadence["tail_s"]
            # a step in the band around the recorded window counts at its edge
            assert spent == pytest.approx(max(0.0, figures["window_secs"]), abs=1e-12)
            if cadence["intervals"]:
                names = ("interval_median_s", "interval_p90_s", "interval_p99_s", "interval_max_s")
                ordered = [cadence[name] for name in names]
                assert ordered == sorted(ordered) and ordered[0] >= 0
            if cadence["stalls"] is not None:
                assert 0 <= cadence["stalls"] <= cadence["intervals"]
                # stalls are between the steps' own times, decode_s is within the window
                assert 0 <= cadence["stall_s"] <= cadence["decode_s"] + 1e-6
        shares = figures["cadence"]["shares"]
        if shares["decode"] is not None:
            total = shares["before_first_step"] + shares["decode"] + shares["tail"]
            assert total == pytest.approx(1.0, rel=1e-9)
            assert shares["stalls"] <= shares["decode"] + 1e-6 / figures["window_secs"]


def test_decode_steps_per_s_interval_is_the_bootstrap_of_each_requests_decode_time(run):
    arm, log = run
    # Every leg warm, so the warm fold's draws are those of a bootstrap over the same legs.
    result = fold_acceptance(arm, [log], predicate="run >= 1", resamples=400, seed=11)
    # By hand from cadence_logs: leg 0 holds one request with one line (no interval, 0 s of
    # decoding); leg 1 one request, 61 intervals over 5.0 s; leg 2 two requests, 100 intervals
    # over 2.0 s and 70 over 2.8 s.
    by_hand = [([0], [0.0]), ([61], [5.0]), ([100, 70], [2.0, 2.8])]
    point, expected = decode_steps_per_s(by_hand, resamples=400, seed=11)
    assert point == approx(231 / 9.8)
    for fold in (result.warm, result.all):
        cadence = fold["cadence"]
        assert cadence["decode_steps_per_s"] == approx(231 / 9.8)
        assert cadence["decode_steps_per_s_ci"] == approx(list(expected))
        low, high = cadence["decode_steps_per_s_ci"]
        assert low < 231 / 9.8 < high


def test_decode_steps_per_s_interval_of_identical_legs_has_no_width(tmp_path):
    # Three legs alike: two requests each at one pace, every 50 ms, one for 1 s (20
    # intervals), the other for 0.5 s (10): any draw of them decodes 20 steps a second.
    legs, rows = [], []
    for number in range(3):
        start = T0_NS + number * 10 * S
        legs.append(leg((start // S), (start // S) + 2, run=2))
        rows += [Row(WRITER_A, start + S // 2 + k * 50_000_000, seq=1) for k in range(21)]
        rows += [Row(WRITER_A, start + S // 2 + k * 50_000_000, seq=2) for k in range(11)]
    arm, log = write_run(tmp_path, legs, rows)
    cadence = fold_acceptance(arm, [log], resamples=200).warm["cadence"]
    assert cadence["decode_steps_per_s"] == approx(20.0)
    assert cadence["decode_steps_per_s_ci"] == approx([20.0, 20.0])


def test_decode_steps_per_s_has_no_interval_without_resamples(run):
    arm, log = run
    cadence = fold_acceptance(arm, [log], resamples=0).warm["cadence"]
    assert cadence["decode_steps_per_s_ci"] is None
    assert cadence["decode_steps_per_s"] == approx(231 / 9.8)


@pytest.mark.parametrize("width", [80, 40])
def test_the_cadence_table_keeps_every_figure_whole(run, width):
    arm, log = run
    console = Console(width=width, record=True, color_system=None)
    console.print(cadence_view(fold_acceptance(arm, [log]).to_json()))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    # leg 1's stall time and leg 2's pooled decode steps/s (170 / 4.8 s), worked out by hand
    for figure in ("1.95s", "35.42", "12.20"):
        assert figure in text.split(), (figure, text)


def test_the_warm_cadence_line_shows_the_decode_interval_as_plus_minus(run, tmp_path, capsys):
    arm, log = run
    out_json = tmp_path / "fold.json"
    assert main([arm, log, "--json", str(out_json), "--details"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    cadence = json.loads(out_json.read_text())["warm"]["cadence"]
    low, high = cadence["decode_steps_per_s_ci"]
    value = 231 / 9.8  # by hand: 61 + 100 + 70 intervals over 5.0 + 2.0 + 2.8 s
    shown = out.split("decode steps/s ", 1)[1].split()
    assert shown[0] == "23.57"
    assert shown[1].startswith("±")
    assert float(shown[1][1:]) == approx(max(value - low, high - value), rel=1e-3)
