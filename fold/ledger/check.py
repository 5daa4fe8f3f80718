"""``ledger --check``: does a kept run's figure hold against a baseline of earlier runs?

The test (docs/ledger.md, "A gate that fails the build"): the baseline is the last ``window``
earlier runs that have the figure with its 95% interval, chosen by their labels. From each
interval a standard error is read back as its width over 2 x 1.96. A run's figure is taken as
its true value plus its own noise (that standard error) plus a run-to-run part common to every
run of the row (variance tau^2: another day, another box). tau^2 is estimated as the baseline
figures' sample variance less the mean of their own variances, and 0 when that is negative
(the method of moments of a random-effects model). The difference is the run's figure less
the baseline's mean; its variance is the run's own, plus tau^2 (the run's run-to-run part),
plus the mean's (tau^2 plus the mean own variance, over n). t is the difference over its
standard error; the run is an alert when t lies on the side that regresses past the 97.5%
quantile of Student's t on n - 1 degrees of freedom when tau^2 > 0 (it was estimated from n
runs), past 1.96 when tau^2 = 0. With one baseline run nothing estimates tau^2: it is 0, which
holds only when runs differ by their own noise alone. The false-alarm rates this gives,
simulated, are in docs/ledger.md and held by tests/test_ledger_check.py.

A run without the figure, without an interval for it, or with fewer baseline runs than asked
is its own outcome, never a pass.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from fold.errors import InputError
from fold.ledger.figures import REGRESSES, FigureRow
from fold.ledger.history import FigureKey, label_changes, select
from fold.ledger.store import KeptRun

Z_95 = 1.959963984540054
"""The two-sided 95% normal quantile, the one the fold's intervals are drawn at."""
DEFAULT_WINDOW = 10
DEFAULT_MIN_BASELINE = 2
OUTCOMES = {
    "holds": "the run's figure holds against its baseline",
    "alert": "the run's figure regressed past its baseline",
    "too_few": "too few baseline runs with the figure and its interval for the test",
    "no_figure": "the run has no such figure",
    "no_interval": "the run's figure has no 95% interval",
}
"""Each outcome's code, as the check data and its JSON carry it, and its sentence beside it
(docs/ledger.md lists them). ``holds`` and ``alert`` are decisions; the other three say the
check could not decide."""
UNDECIDED = ("too_few", "no_figure", "no_interval")


def standard_error(row: FigureRow) -> float:
    """The standard error a 95% interval stands for (width over 2 x 1.96)."""
    # check() passes only rows with an interval: the others are "no_interval" before this
    assert row.ci_low is not None and row.ci_high is not None
    return (row.ci_high - row.ci_low) / (2 * Z_95)


@functools.cache
def t_quantile(degrees: int) -> float:
    """The 97.5% quantile of Student's t on ``degrees`` of freedom, by bisection on its
    distribution function (a finite sum for whole degrees of freedom)."""
    if degrees < 1:
        raise ValueError(f"degrees of freedom {degrees}: 1 or more")
    low, high = Z_95, 13.0  # 12.706 for one degree of freedom, 1.96 in the limit
    for _ in range(100):
        middle = (low + high) / 2
        if _t_within(middle, degrees) < 0.95:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _t_within(t: float, degrees: int) -> float:
    """P(|T| < t) for Student's t on whole ``degrees`` of freedom (Abramowitz and Stegun
    26.7.3 and 26.7.4: theta = atan(t / sqrt(degrees)))."""
    theta = math.atan(t / math.sqrt(degrees))
    cos2 = math.cos(theta) ** 2
    if degrees % 2 == 1:
        term, total = 1.0, 1.0 if degrees > 1 else 0.0
        for k in range(1, (degrees - 1) // 2):
            term *= cos2 * (2 * k) / (2 * k + 1)
            total += term
        spread = math.sin(theta) * math.cos(theta) * total if degrees > 1 else 0.0
        return 2 / math.pi * (theta + spread)
    term, total = 1.0, 1.0
    for k in range(1, degrees // 2):
        term *= cos2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


def difference_error(
    values: Sequence[float], errors: Sequence[float], run_error: float
) -> tuple[float, float, float, float]:
    """The baseline's mean, tau (the run-to-run spread beyond each run's own noise), the
    difference's standard error and the quantile it is held to, for a run of standard error
    ``run_error`` against baseline figures ``values`` of standard errors ``errors``."""
    n = len(values)
    mean = math.fsum(values) / n
    own = math.fsum(error**2 for error in errors) / n
    tau2 = 0.0
    if n > 1:
        variance = math.fsum((value - mean) ** 2 for value in values) / (n - 1)
        tau2 = max(0.0, variance - own)
    total = run_error**2 + tau2 + (tau2 + own) / n
    # Student's t when a spread was estimated from the n runs; the normal quantile when none
    # was (the runs agree within their own noise, which each interval gives). Always t cost
    # the test its power at small n: a 3-standard-error drop over 2 runs was never caught.
    quantile = t_quantile(n - 1) if tau2 > 0 else Z_95
    return mean, math.sqrt(tau2), math.sqrt(total), quantile


def check_run(
    runs: Sequence[KeptRun],
    key: FigureKey,
    *,
    run_id: int | None = None,
    where: dict[str, str] | None = None,
    baseline_where: dict[str, str] | None = None,
    window: int = DEFAULT_WINDOW,
    min_baseline: int = DEFAULT_MIN_BASELINE,
    boundary: str | None = None,
) -> dict[str, Any]:
    """One figure of one run against its baseline, as JSON-ready data.

    The run is ``run_id``, or the newest run ``where`` selects; the baseline is drawn from the
    runs kept before it that ``baseline_where`` selects (``where`` when not given). ``boundary``
    is ``lower``, ``upper`` or ``both`` (default: the figure's own, ``REGRESSES``)."""
    where = where or {}
    baseline_where = where if baseline_where is None else baseline_where
    boundary = boundary or REGRESSES[key.figure]
    if boundary not in ("lower", "upper", "both"):
        raise InputError(f"boundary {boundary!r}: expected lower, upper or both")
    if window < 1 or min_baseline < 1:
        raise InputError("--window and --min-baseline are counts of runs: 1 or more")
    if min_baseline > window:
        raise InputError(f"--min-baseline {min_baseline} is more than --window {window}")
    run = _the_run(runs, run_id, where)
    earlier = [found for found in select(runs, baseline_where) if found.run_id < run.run_id]
    with_figure = [(found, row) for found in earlier if (row := _row_of(found, key)) is not None]
    without_interval = [found.run_id for found, row in with_figure if row.ci_low is None]
    usable = [(found, row) for found, row in with_figure if row.ci_low is not None]
    baseline = usable[-window:]
    row = _row_of(run, key)
    result: dict[str, Any] = {
        "figure": key.name,
        "shown": key.shown,
        "fold": key.fold,
        "run": run.run_id,
        "labels": dict(run.labels),
        "boundary": boundary,
        "value": None if row is None else row.value,
        "ci": None if row is None or row.ci_low is None else [row.ci_low, row.ci_high],
        "baseline": {
            "where": dict(baseline_where),
            "window": window,
            "min_runs": min_baseline,
            "runs": [found.run_id for found, _ in baseline],
            "count": len(baseline),
            "without_interval": without_interval,
            "mean": None,
            "standard_error": None,
            "spread": None,
        },
        "changed": [] if not baseline else label_changes(baseline[-1][0].labels, run.labels),
        "difference": None,
        "direction": None,
        "distance": None,
        "difference_ci": None,
        "relative": None,
        "t": None,
        "threshold": None,
    }
    if row is None:
        return _decided(result, "no_figure")
    if row.ci_low is None:
        return _decided(result, "no_interval")
    if len(baseline) < min_baseline:
        return _decided(result, "too_few")
    values = [found_row.value for _, found_row in baseline]
    errors = [standard_error(found_row) for _, found_row in baseline]
    mean, spread, error, quantile = difference_error(values, errors, standard_error(row))
    mean_error = math.sqrt(math.fsum(e**2 for e in errors)) / len(errors)
    difference = row.value - mean
    result["baseline"] |= {"mean": mean, "standard_error": mean_error, "spread": spread}
    result["difference"] = difference
    result["direction"] = "below" if difference < 0 else "above" if difference > 0 else "level"
    result["distance"] = abs(difference)
    result["difference_ci"] = [difference - quantile * error, difference + quantile * error]
    result["relative"] = None if mean == 0 else difference / abs(mean)
    result["t"] = None if error == 0 else difference / error
    result["threshold"] = quantile
    regressed = _regressed(difference, error, boundary, quantile)
    return _decided(result, "alert" if regressed else "holds")


def _decided(result: dict[str, Any], outcome: str) -> dict[str, Any]:
    result["outcome"] = outcome
    result["outcome_text"] = OUTCOMES[outcome]
    return result


def check_runs(
    runs: Sequence[KeptRun],
    keys: Sequence[FigureKey],
    *,
    ledger: str = "",
    boundaries: Sequence[str | None] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Every ``keys`` figure checked as ``check_run`` does (``boundaries``: each one's
    ``boundary``), with the counts of each outcome, of the checks and of those undecided."""
    sides = list(boundaries) if boundaries is not None else [None] * len(keys)
    checks = [
        check_run(runs, key, boundary=side, **options)
        for key, side in zip(keys, sides, strict=True)
    ]
    counts = {outcome: sum(c["outcome"] == outcome for c in checks) for outcome in OUTCOMES}
    return {
        "ledger": ledger,
        "checks": checks,
        "counts": counts,
        "total": len(checks),
        "undecided": sum(counts[outcome] for outcome in UNDECIDED),
    }


def _regressed(difference: float, error: float, boundary: str, quantile: float) -> bool:
    below = difference < 0 and (error == 0 or difference / error < -quantile)
    above = difference > 0 and (error == 0 or difference / error > quantile)
    return {"lower": below, "upper": above, "both": below or above}[boundary]


def _the_run(runs: Sequence[KeptRun], run_id: int | None, where: dict[str, str]) -> KeptRun:
    if run_id is not None:
        found = next((run for run in runs if run.run_id == run_id), None)
        if found is None:
            kept = f"runs {runs[0].run_id}–{runs[-1].run_id}" if runs else "no run"
            raise InputError(f"--run {run_id}: no such run in the ledger (it keeps {kept})")
        return found
    chosen = select(runs, where)
    if not chosen:
        raise InputError(
            "--check: no run to check: "
            + ("the ledger keeps no run yet" if not runs else "no kept run has the --where labels")
        )
    return chosen[-1]


def _row_of(run: KeptRun, key: FigureKey) -> FigureRow | None:
    return next((row for row in run.figures if key.matches(row)), None)
