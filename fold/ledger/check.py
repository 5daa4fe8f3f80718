"""``ledger --check``: does a kept run's figure hold against a baseline of earlier runs?

The test (docs/ledger.md, "A gate that fails the build"): the baseline is the last ``window``
earlier runs that have the figure with its 95% interval, chosen by their labels. From each
interval a standard error is read back as its width over 2 x 1.96. The difference is the run's
figure less the baseline's mean, and its standard error adds three parts in quadrature: the
run's own, the baseline mean's (the baseline runs' standard errors, root-summed over n), and
the baseline's run-to-run spread (the sample standard deviation of its figures; 0 for one run,
and 0 for reruns of the same inputs). z is the difference over that error; the run is an alert
when z lies past 1.96 on the side that regresses, i.e. when the difference's 95% interval lies
wholly on that side of 0.

A run without the figure, without an interval for it, or with fewer baseline runs than asked
is its own outcome, never a pass.
"""

from __future__ import annotations

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
OUTCOMES = ("holds", "alert", "too few", "no figure", "no interval")
"""``holds`` and ``alert`` are decisions; the other three say the check could not decide."""


def standard_error(row: FigureRow) -> float:
    """The standard error a 95% interval stands for (width over 2 x 1.96)."""
    return (row.ci_high - row.ci_low) / (2 * Z_95)


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
            "without_interval": without_interval,
            "mean": None,
            "standard_error": None,
            "spread": None,
        },
        "changed": [] if not baseline else label_changes(baseline[-1][0].labels, run.labels),
        "difference": None,
        "difference_ci": None,
        "relative": None,
        "z": None,
        "threshold": Z_95,
    }
    if row is None:
        result["outcome"] = "no figure"
        return result
    if row.ci_low is None:
        result["outcome"] = "no interval"
        return result
    if len(baseline) < min_baseline:
        result["outcome"] = "too few"
        return result
    values = [found_row.value for _, found_row in baseline]
    n = len(values)
    mean = math.fsum(values) / n
    mean_error = math.sqrt(math.fsum(standard_error(r) ** 2 for _, r in baseline)) / n
    spread = (
        math.sqrt(math.fsum((value - mean) ** 2 for value in values) / (n - 1)) if n > 1 else 0.0
    )
    error = math.sqrt(standard_error(row) ** 2 + mean_error**2 + spread**2)
    difference = row.value - mean
    result["baseline"] |= {"mean": mean, "standard_error": mean_error, "spread": spread}
    result["difference"] = difference
    result["difference_ci"] = [difference - Z_95 * error, difference + Z_95 * error]
    result["relative"] = None if mean == 0 else difference / abs(mean)
    result["z"] = None if error == 0 else difference / error
    result["outcome"] = "alert" if _regressed(difference, error, boundary) else "holds"
    return result


def check_runs(
    runs: Sequence[KeptRun], keys: Sequence[FigureKey], *, ledger: str = "", **options: Any
) -> dict[str, Any]:
    """Every ``keys`` figure checked as ``check_run`` does, with the counts of each outcome."""
    checks = [check_run(runs, key, **options) for key in keys]
    return {
        "ledger": ledger,
        "checks": checks,
        "counts": {outcome: sum(c["outcome"] == outcome for c in checks) for outcome in OUTCOMES},
    }


def _regressed(difference: float, error: float, boundary: str) -> bool:
    below = difference < 0 and (error == 0 or difference / error < -Z_95)
    above = difference > 0 and (error == 0 or difference / error > Z_95)
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
