"""``ledger --check``: a kept run against its baseline, the alert a CI job stops on."""

from __future__ import annotations

import json
import math
import statistics
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from ledger_runs import ARM, STEPS, document

from fold.cli import main
from fold.ledger.check import check_run
from fold.ledger.figures import FOLD_FIGURES, GAP_FIGURES, POSITION_FIGURES, REGRESSES, FigureRow
from fold.ledger.history import parse_figure
from fold.ledger.store import KeptRun, keep_run

Z = 1.96  # the test's own rounding of the 95% quantile; the check uses 1.959964


ONE_LESS = Path(STEPS).parent / "ledger" / "one-less.jsonl"


def test_the_planted_log_accepts_one_token_less_at_every_step():
    """fixtures/ledger/one-less.jsonl is the toy gate's log with every step accepting one
    token less (none below 0), and nothing else changed."""
    before = [json.loads(line) for line in Path(STEPS).read_text().splitlines()]
    after = [json.loads(line) for line in ONE_LESS.read_text().splitlines()]
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        fewer = min(old["accepted"], 1)
        assert new == old | {"accepted": old["accepted"] - fewer, "emitted": old["emitted"] - fewer}


@pytest.fixture(scope="module")
def gates(tmp_path_factory) -> Path:
    """Three gates of main (seeds 1-3), a gate of a branch whose every step accepts one token
    less, then an unchanged gate of another branch (seed 5)."""
    folder = tmp_path_factory.mktemp("gates")
    ledger = folder / "gates.duckdb"
    planted = str(ONE_LESS)
    for seed, log, branch in ((1, STEPS, "main"), (2, STEPS, "main"), (3, STEPS, "main"),
                              (4, planted, "slower"), (5, STEPS, "same")):  # fmt: skip
        code = main([ARM, log, "--seed", str(seed), "--ledger", str(ledger),
                     "--label", f"branch={branch}"])  # fmt: skip
        assert code == 0
    return ledger


def test_the_planted_regression_fails_and_says_by_how_much(gates, capsys):
    code = main(["ledger", str(gates), "--check", "A/P", "--run", "4",
                 "--baseline-where", "branch=main", "--json", "-"])  # fmt: skip
    assert code == 1
    (check,) = orjson.loads(capsys.readouterr().out)["checks"]
    assert check["outcome"] == "alert" and check["baseline"]["runs"] == [1, 2, 3]
    assert check["changed"] == [{"key": "branch", "from": "main", "to": "slower"}]
    # By hand from the fixtures: the toy gate's warm A/P is 47.2% for every seed (the seed
    # moves only the bootstrap), the one-less log's 28.3% (docs/ledger.md's example).
    assert round(check["value"], 3) == 0.283 and round(check["baseline"]["mean"], 3) == 0.472
    assert check["baseline"]["spread"] == 0.0  # three runs of one figure: no spread
    assert check["difference_ci"][1] < 0

    assert main(["ledger", str(gates), "--check", "A/P", "--run", "4",
                 "--baseline-where", "branch=main"]) == 1  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ALERT  A/P (warm legs) of run 4: ")
    assert out[0].startswith("ALERT  A/P (warm legs) of run 4: 28.3% (")
    assert (
        "against the baseline's 47.2% (mean of runs 1–3 labelled branch=main): 18.9 points "
        "below, −40.1% (" in out[0]
    )
    assert out[0].endswith("; a fall regresses")
    assert out[1] == "  labels changed since run 3: branch: main → slower"
    assert out[-1] == "1 check of gates.duckdb: 1 alert, 0 holding"


def test_the_unchanged_run_holds(gates, capsys):
    assert main(["ledger", str(gates), "--check", "A/P", "--check", "1+A/S",
                 "--check", "tok/s", "--baseline-where", "branch=main"]) == 0  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[:3]] == ["HOLDS"] * 3
    assert all("of run 5:" in line for line in out[:3])


def test_an_unchanged_run_over_a_wandering_baseline_holds(tmp_path, capsys):
    """Runs of one row that wander from day to day (0.40, 0.50, 0.45, each ± 0.01) and an
    unchanged run at 0.38 ± 0.01. By hand: own standard error 0.01 / 1.96 = 0.0051; sample
    variance 0.0025; tau^2 = 0.0025 - 0.0051^2 = 0.002474; error sqrt(0.0051^2 + 0.002474 +
    0.0025 / 3) = 0.0577; t = -0.07 / 0.0577 = -1.21, inside Student's 4.30 (2 degrees of
    freedom): it holds. A test of the runs' own noise alone gives t = -11.9 and alerts."""
    ledger = f"{tmp_path}/gates/"
    for n, rate in enumerate((0.40, 0.50, 0.45, 0.38), start=1):
        keep_run(ledger, document(rate, (rate - 0.01, rate + 0.01)), {"n": str(n)}, [])
    assert main(["ledger", ledger, "--check", "A/P", "--json", "-"]) == 0
    (check,) = orjson.loads(capsys.readouterr().out)["checks"]
    assert check["outcome"] == "holds" and check["baseline"]["runs"] == [1, 2, 3]
    assert check["t"] == pytest.approx(-1.21, abs=0.01)
    assert check["threshold"] == pytest.approx(4.303, abs=1e-3)
    # the same wander, a run 0.25 lower than the mean: t = -0.2125 / 0.0577 = -3.68, still
    # inside 4.30 over three runs; over five (0.40, 0.50, 0.45, 0.41, 0.49: mean 0.45, sample
    # variance 0.00205, tau^2 = 0.002024, error sqrt(0.0051^2 + 0.002024 + 0.00205 / 5) =
    # 0.0496) the threshold is 2.78 and 0.20 alerts (t = -0.25 / 0.0496 = -5.04)
    ledger = f"{tmp_path}/five/"
    for n, rate in enumerate((0.40, 0.50, 0.45, 0.41, 0.49, 0.20), start=1):
        keep_run(ledger, document(rate, (rate - 0.01, rate + 0.01)), {"n": str(n)}, [])
    assert main(["ledger", ledger, "--check", "A/P", "--json", "-"]) == 1
    (check,) = orjson.loads(capsys.readouterr().out)["checks"]
    assert check["t"] == pytest.approx(-5.04, abs=0.01)
    assert check["threshold"] == pytest.approx(2.776, abs=1e-3)


def test_the_newest_run_against_every_earlier_run_in_the_window(gates, capsys):
    # Without --baseline-where the baseline is every earlier run: the window of 2 holds run 5
    # against the planted run 4 and main's run 3.
    assert main(["ledger", str(gates), "--check", "A/P", "--window", "2", "--json", "-"]) == 0
    (check,) = orjson.loads(capsys.readouterr().out)["checks"]
    assert check["run"] == 5 and check["baseline"]["runs"] == [3, 4]
    # A rise counts only with --upper-boundary: run 5 is above the planted run alone.
    args = ["ledger", str(gates), "--check", "A/P", "--window", "1", "--min-baseline", "1"]
    assert main([*args, "--upper-boundary"]) == 1
    capsys.readouterr()
    assert main(args) == 0
    capsys.readouterr()


def test_too_few_baseline_runs_cannot_tell(gates, capsys):
    code = main(["ledger", str(gates), "--check", "A/P", "--run", "2",
                 "--baseline-where", "branch=main"])  # fmt: skip
    assert code == 3
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("CANNOT TELL  A/P (warm legs) of run 2: ")
    assert "the baseline has 1 run (run 1 labelled branch=main), fewer than the 2" in out[0]
    assert out[-1] == "1 check of gates.duckdb: 0 alerts, 0 holding, 1 that cannot tell"
    # An alert outweighs a check that cannot tell: the job fails on the alert.
    assert main(["ledger", str(gates), "--check", "A/P", "--check", "ratio:vllm", "--run",
                 "4", "--baseline-where", "branch=main"]) == 1  # fmt: skip
    assert "CANNOT TELL  tok/s ratio to vllm of run 4: the run has no such figure" in (
        capsys.readouterr().out
    )


def test_the_markdown_for_a_ci_summary(gates, tmp_path, capsys):
    summary = tmp_path / "summary.md"
    assert main(["ledger", str(gates), "--check", "A/P", "--run", "4", "--baseline-where",
                 "branch=main", "--markdown", str(summary)]) == 1  # fmt: skip
    text = summary.read_text()
    assert text.startswith("# Acceptance gate: 1 alert\n\n| outcome |")
    (row,) = [line for line in text.splitlines() if line.startswith("| ALERT |")]
    assert row.endswith("| branch: main → slower |")
    assert capsys.readouterr().out.startswith("ALERT  ")  # the terminal still has it


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--check", "A/Q"], "--check 'A/Q': expected A/P"),
        (
            ["--check", "A/P", "--run", "9"],
            "--run 9: no such run in the ledger (it keeps runs 1–5)",
        ),
        (["--window", "3"], "--window goes with --check FIGURE"),
        (["--check", "A/P", "--window", "0"], "--window 0: a count of runs, 1 or more"),
        (["--check", "A/P", "--figure", "A/P"], "--check and --figure are separate jobs"),
        (["--check", "A/P", "--baseline-where", "x"], "--baseline-where 'x': expected KEY=VALUE"),
        (["--check", "A/P", "--where", "branch=none"], "no kept run has the --where labels"),
    ],
)
def test_a_bad_request_exits_2(gates, capsys, arguments, message):
    assert main(["ledger", str(gates), *arguments]) == 2
    assert message in capsys.readouterr().err


def test_every_figure_names_the_direction_that_regresses():
    assert set(REGRESSES) == {*FOLD_FIGURES, *POSITION_FIGURES, *GAP_FIGURES}
    assert set(REGRESSES.values()) <= {"lower", "upper"}


# The statistic by a second, plain implementation: standard errors from 95% intervals; tau^2
# the baseline's sample variance less its mean own variance (0 when negative); the
# difference's variance the run's own + tau^2 + (tau^2 + mean own variance) / n; the 97.5%
# quantile of Student's t from a printed table (n - 1 degrees of freedom) when tau^2 > 0,
# else 1.96.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365}


def reference_t(value, interval, baseline):
    def error(low, high):
        return (high - low) / (2 * Z)

    values = [v for v, _ in baseline]
    n = len(values)
    mean = statistics.fmean(values)
    own = statistics.fmean(error(*i) ** 2 for _, i in baseline)
    excess = statistics.variance(values) - own if n > 1 else -1.0
    tau2 = max(0.0, excess)
    variance = error(*interval) ** 2 + tau2 + (tau2 + own) / n
    if variance == 0:  # every interval of zero width and the runs level: no t to hold to
        return None, None
    t = (value - mean) / math.sqrt(variance)
    # None where the rounding of 1.96 could put tau^2 on the other side of 0
    close = abs(excess) <= 1e-4 * own
    return t, None if close else (T_975[n - 1] if tau2 > 0 else 1.96)


def kept(run_id: int, value: float, interval: tuple[float, float] | None) -> KeptRun:
    low, high = interval or (None, None)
    row = FigureRow("warm", "accept_rate", value, low, high)
    return KeptRun(run_id, datetime(2026, 12, 1) + timedelta(hours=run_id), {}, (), (row,))


def test_the_statistic_by_hand():
    # Baseline 0.46 ± 0.02, 0.47 ± 0.02, 0.45 ± 0.04 (own errors 0.0102, 0.0102, 0.0204):
    # mean 0.46, sample variance 0.0001, mean own variance (2 x 0.0102^2 + 0.0204^2) / 3 =
    # 0.000208 > 0.0001, so tau^2 = 0; the run 0.40 ± 0.03 (0.0153): the difference's
    # variance 0.0153^2 + 0.000208 / 3, error 0.01743; t = -0.06 / 0.01743 = -3.44. No spread
    # beyond the runs' own noise was estimated, so the normal 1.96 holds it: an alert.
    runs = [kept(1, 0.46, (0.44, 0.48)), kept(2, 0.47, (0.45, 0.49)),
            kept(3, 0.45, (0.41, 0.49)), kept(4, 0.40, (0.37, 0.43))]  # fmt: skip
    own = (2 * (0.02 / 1.96) ** 2 + (0.04 / 1.96) ** 2) / 3
    error = math.sqrt((0.03 / 1.96) ** 2 + own / 3)
    check = check_run(runs, parse_figure("A/P"))
    assert check["t"] == pytest.approx(-0.06 / error, rel=1e-3)
    assert check["t"] == pytest.approx(-3.44, abs=0.01)
    assert check["threshold"] == pytest.approx(1.96, abs=1e-3)
    assert check["outcome"] == "alert" and check["baseline"]["mean"] == pytest.approx(0.46)
    assert check["baseline"]["spread"] == 0.0
    # Run-to-run spread past the runs' own: 0.50, 0.40, 0.45 ± 0.02 each: sample variance
    # 0.0025, own 0.0102^2 = 0.000104, tau^2 = 0.002396; a run at 0.20 ± 0.02: error
    # sqrt(0.000104 + 0.002396 + 0.0025 / 3) = 0.05774, t = -0.25 / 0.05774 = -4.33, past
    # Student's 4.303 on 2 degrees of freedom (a spread was estimated from 3 runs): an alert,
    # just.
    wander = [kept(1, 0.50, (0.48, 0.52)), kept(2, 0.40, (0.38, 0.42)),
              kept(3, 0.45, (0.43, 0.47)), kept(4, 0.20, (0.18, 0.22))]  # fmt: skip
    check = check_run(wander, parse_figure("A/P"))
    assert check["t"] == pytest.approx(-4.33, abs=0.01) and check["outcome"] == "alert"
    assert check["threshold"] == pytest.approx(4.303, abs=1e-3)
    assert check["baseline"]["spread"] == pytest.approx(math.sqrt(0.0025 - (0.02 / 1.96) ** 2))
    # A baseline run without an interval is left out and named; the window takes the last N.
    runs.insert(0, kept(0, 0.10, None))
    check = check_run(runs, parse_figure("A/P"), window=2)
    assert check["baseline"]["runs"] == [2, 3] and check["baseline"]["without_interval"] == [0]


intervals = st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 0.2)).map(
    lambda pair: (pair[0], (pair[0] - pair[1], pair[0] + pair[1]))
)


@given(st.lists(intervals, min_size=2, max_size=8), intervals,
       st.sampled_from(["lower", "upper", "both"]))  # fmt: skip
@example([(0.013702012789511556, (0.013702012789511556, 0.013702012789511556))] * 3,
         (0.0, (0.0, 0.0)), "lower")  # fmt: skip
def test_an_alert_is_a_difference_interval_wholly_on_the_regressing_side(baseline, run, boundary):
    runs = [kept(i, v, ci) for i, (v, ci) in enumerate([*baseline, run], start=1)]
    check = check_run(runs, parse_figure("A/P"), boundary=boundary)
    low, high = check["difference_ci"]
    below, above = high < 0, low > 0
    expected = {"lower": below, "upper": above, "both": below or above}[boundary]
    if check["t"] is not None and abs(abs(check["t"]) - check["threshold"]) > 1e-9:
        assert (check["outcome"] == "alert") == expected
        t, quantile = reference_t(run[0], run[1], baseline)
        # Level runs of zero-width intervals leave the fold a rounding's spread (its mean of
        # equal floats need not be one of them), so a t where this has none.
        if t is not None:
            assert check["t"] == pytest.approx(t, rel=1e-2)
        if quantile is not None:
            assert check["threshold"] == pytest.approx(quantile, abs=1e-3)


def test_the_kept_time_from_the_environment(tmp_path, monkeypatch, capsys):
    ledger = tmp_path / "gates.duckdb"
    monkeypatch.setenv("FOLD_ACCEPTANCE_KEPT_AT", "2026-12-01T09:30:00+01:00")
    assert main([ARM, STEPS, "--ledger", str(ledger), "--bootstrap", "0"]) == 0
    monkeypatch.setenv("FOLD_ACCEPTANCE_KEPT_AT", "yesterday")
    assert main([ARM, STEPS, "--ledger", str(ledger), "--seed", "2"]) == 2
    assert "FOLD_ACCEPTANCE_KEPT_AT='yesterday': not an ISO 8601 time" in capsys.readouterr().err
    monkeypatch.delenv("FOLD_ACCEPTANCE_KEPT_AT")
    assert main(["ledger", str(ledger), "--json", "-"]) == 0
    (run,) = orjson.loads(capsys.readouterr().out)["runs"]
    assert run["kept_at"] == "2026-12-01T08:30:00Z"  # held in UTC


def test_per_position_rates_are_checked_with_their_intervals(gates, capsys):
    # One token less at every step: position 1 is accepted by fewer steps, outside main's
    # baseline; the drafts-reaching-a-position rate has no interval and cannot tell.
    code = main(["ledger", str(gates), "--check", "per_position:1", "--check",
                 "per_position_of_proposed:1", "--run", "4", "--baseline-where", "branch=main",
                 "--json", "-"])  # fmt: skip
    assert code == 1
    first, proposed = orjson.loads(capsys.readouterr().out)["checks"]
    assert first["outcome"] == "alert" and first["ci"] is not None
    assert proposed["outcome"] == "no_interval"
    assert main(["ledger", str(gates), "--check", "per_position_of_proposed:1"]) == 3
    assert "has no 95% interval in the ledger" in capsys.readouterr().out


def false_alarms(n: int, between: float, within: float, trials: int, seed: int) -> float:
    """How often an unchanged run alerts against ``n`` baseline runs, each figure 0.5 plus a
    run-to-run part (sd ``between``) and its own noise (sd ``within``, which its interval
    says). Drawn by numpy, judged by check_run."""
    generator = np.random.default_rng(seed)
    key, alerts = parse_figure("A/P"), 0
    for _ in range(trials):
        values = 0.5 + generator.normal(0, between, n + 1) + generator.normal(0, within, n + 1)
        half = 1.959964 * within
        runs = [kept(i, float(v), (float(v) - half, float(v) + half))
                for i, v in enumerate(values, start=1)]  # fmt: skip
        alerts += check_run(runs, key, min_baseline=1)["outcome"] == "alert"
    return alerts / trials


@pytest.mark.parametrize(
    ("n", "between", "within", "low", "high"),
    [
        (2, 0.02, 1e-6, 0.015, 0.036),  # run-to-run noise only: nominal 2.5%
        (10, 0.02, 1e-6, 0.015, 0.036),
        (3, 1e-6, 0.02, 0.005, 0.030),  # own noise only: at most nominal
        (10, 0.02, 0.02, 0.015, 0.040),  # both, equal
    ],
)
def test_the_false_alarm_rate_of_an_unchanged_run_is_near_its_nominal(
    n, between, within, low, high
):
    """One-sided nominal 2.5%; 2000 seeded trials (the rate's sd about 0.35 points). The
    old test counted each run's noise twice and held a spread from two runs to 1.96: 17% of
    unchanged runs alerted over two baseline runs of run-to-run noise."""
    assert low <= false_alarms(n, between, within, 2000, seed=34) <= high


def test_a_drop_of_four_standard_errors_is_caught_most_of_the_time():
    """Power beside the false-alarm rate: own noise only, 5 baseline runs, the run 4 of its
    standard errors lower; simulated 78% (2000 trials), held above 70%."""
    generator = np.random.default_rng(7)
    key, caught = parse_figure("A/P"), 0
    for _ in range(2000):
        values = 0.5 + generator.normal(0, 0.02, 6)
        values[-1] -= 4 * 0.02
        half = 1.959964 * 0.02
        runs = [kept(i, float(v), (float(v) - half, float(v) + half))
                for i, v in enumerate(values, start=1)]  # fmt: skip
        caught += check_run(runs, key)["outcome"] == "alert"
    assert caught / 2000 > 0.70


def test_the_documented_ci_job_checks_its_own_run_and_pastes_nothing_into_the_script():
    """docs/ledger.md's GitHub Actions job: the check selects the run by the label only this
    job's keep set, and no ``${{ }}`` expression reaches a ``run:`` script."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "ledger.md").read_text()
    (job,) = [block.split("```")[0] for block in page.split("```yaml\n")[1:]]
    assert "${{" not in job
    keep, check = job.split("- name: ")[1:]
    unique = '"ci_run=$GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT"'
    assert f"--label {unique}" in keep and f"--where {unique}" in check
    assert "--where branch" not in check


def test_min_baseline_past_the_window_is_refused(gates, capsys):
    assert main(["ledger", str(gates), "--check", "A/P", "--window", "3",
                 "--min-baseline", "5"]) == 2  # fmt: skip
    assert "--min-baseline 5 is more than --window 3" in capsys.readouterr().err
    assert main(["ledger", str(gates), "--check", "A/P", "--min-baseline", "11"]) == 2
    assert "more than --window 10" in capsys.readouterr().err


def test_a_direction_for_one_figure_only(gates, capsys):
    """Run 5 (unchanged, seed 5) against the planted run 4 alone: A/P and per_position:1 rose.
    --upper-boundary=A/P alerts on A/P's rise; per_position:1 keeps its own direction (a
    fall) and holds."""
    args = ["ledger", str(gates), "--check", "A/P", "--check", "per_position:1", "--window",
            "1", "--min-baseline", "1", "--json", "-"]  # fmt: skip
    assert main([*args, "--upper-boundary=A/P"]) == 1
    first, second = orjson.loads(capsys.readouterr().out)["checks"]
    assert (first["boundary"], first["outcome"]) == ("upper", "alert")
    assert (second["boundary"], second["outcome"]) == ("lower", "holds")
    assert main([*args, "--upper-boundary"]) == 1  # bare: every figure
    assert [c["boundary"] for c in orjson.loads(capsys.readouterr().out)["checks"]] == [
        "upper", "upper"]  # fmt: skip
    assert main([*args, "--upper-boundary=tok/s"]) == 2
    assert "--upper-boundary=tok/s: not a --check figure" in capsys.readouterr().err


def test_the_markdown_shows_labels_as_text_and_a_folder_is_refused(tmp_path, capsys):
    ledger = f"{tmp_path}/gates/"
    for rate, label in ((0.45, "main"), (0.46, "main"), (0.30, "<b>*hi*</b>|x")):
        keep_run(ledger, document(rate, (rate - 0.01, rate + 0.01)), {"branch": label}, [])
    assert main(["ledger", ledger, "--check", "A/P", "--markdown", "-"]) == 1
    out = capsys.readouterr().out
    assert "branch: main → \\<b\\>\\*hi\\*\\</b\\>\\|x |" in out
    assert "<b>" not in out
    assert main(["ledger", ledger, "--check", "A/P", "--markdown", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: a folder, not a file" in err and "busy" not in err
