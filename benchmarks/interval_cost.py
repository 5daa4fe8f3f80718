"""What the 95% intervals cost a large fold: the bootstrap against the fold itself.

    python benchmarks/interval_cost.py [--lines 10000000] [--resamples 1000] [--repeat 3]

generates the seeded log and 50-leg arm record of ``fold_scale.py`` (about 1,000 requests per
leg at 10 M lines), folds it without intervals and with them, and prints, best of ``--repeat``
in this one run:

- ``fold``: ``fold_acceptance(..., resamples=0)``, the whole fold without intervals (baseline);
- ``intervals``: what ``fold_acceptance(..., resamples=N)`` (both folds' intervals) takes more
  than the fold without them: the bootstrap runs beside the fold's other figures, so its cost
  is the wall it adds, not its own wall;
- ``python loop``: the same two-stage redraw written as a plain Python loop (``random``), timed
  on a few resamples and scaled to ``--resamples``: what the intervals would cost without numpy.

The target: the intervals cost well under a second (taken as at most 0.5 s) at 10 M lines.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fold_scale import generate_arm, generate_log

from fold.api import fold_acceptance
from fold.folding.uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED

TARGET_SECONDS = 0.5
PYTHON_LOOP_RESAMPLES = 5


def python_loop_seconds(legs: list[dict], resamples: int) -> float:
    """Seconds per resample of a plain-Python two-stage redraw of the warm legs' requests."""
    warm = [
        [(r["steps"], r["proposed"], r["accepted"]) for r in leg["requests"]]
        for leg in legs
        if leg["warm"]
    ]
    draw = random.Random(1)
    start = time.perf_counter()
    for _ in range(resamples):
        steps = proposed = accepted = 0
        for _ in warm:
            requests = warm[draw.randrange(len(warm))]
            for _ in requests:
                s, p, a = requests[draw.randrange(len(requests))]
                steps += s
                proposed += p
                accepted += a
    return (time.perf_counter() - start) / resamples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000_000)
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    scratch = Path(args.dir or tempfile.mkdtemp(prefix="interval-cost-"))
    scratch.mkdir(parents=True, exist_ok=True)
    log, arm = scratch / "steps.jsonl", scratch / "arm.json"
    try:
        generate_log(log, args.lines)
        generate_arm(arm, args.lines)
        fold_best = with_intervals_best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = fold_acceptance(arm, [str(log)], resamples=0)
            fold_best = min(fold_best, time.perf_counter() - start)
            start = time.perf_counter()
            fold_acceptance(arm, [str(log)], resamples=args.resamples, seed=DEFAULT_SEED)
            with_intervals_best = min(with_intervals_best, time.perf_counter() - start)
        intervals_best = max(0.0, with_intervals_best - fold_best)
        loop = python_loop_seconds(result.legs, PYTHON_LOOP_RESAMPLES) * args.resamples * 2
    finally:
        if args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    requests = sum(len(leg["requests"]) for leg in result.legs)
    warm_requests = sum(len(leg["requests"]) for leg in result.legs if leg["warm"])
    print(
        f"{args.lines:,} lines, {len(result.legs)} legs, {requests:,} requests "
        f"({warm_requests:,} warm), {args.resamples} resamples, best of {args.repeat}"
    )
    verdict = "met" if intervals_best <= TARGET_SECONDS else "NOT met"
    print("| measured | wall s | baseline | ratio | target |")
    print("|---|---:|---|---:|---|")
    print(f"| fold without intervals | {fold_best:.3f} | | | |")
    print(
        f"| intervals (warm + all) | {intervals_best:.3f} | fold without intervals "
        f"| {intervals_best / fold_best:.2f} | at most {TARGET_SECONDS} s: {verdict} |"
    )
    print(
        f"| intervals (warm + all) | {intervals_best:.3f} | python loop, {loop:.1f} s "
        f"(scaled from {PYTHON_LOOP_RESAMPLES} resamples) | {intervals_best / loop:.4f} | |"
    )


if __name__ == "__main__":
    main()
