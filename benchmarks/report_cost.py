"""What the charts cost on a large fold: --html and --plots beside the fold and --json.

    python benchmarks/report_cost.py --lines 10000000

generates fold_scale's seeded log and 50-leg arm record, folds it once, then times, in the same
process and run (best of ``--repeat``):

- ``fold``: ``fold.api.fold_acceptance``, the baseline every other figure is a ratio to;
- ``json``: ``FoldResult.to_json()`` and its bytes, what ``--json`` writes;
- ``page``: ``to_json()`` and the whole ``--html`` page (every chart drawn as SVG);
- ``plots``: ``to_json()`` and every chart as PNG and SVG, what ``--plots`` writes.

Targets (issue: "writes its page in seconds and the page stays under a few MB"): the page in
at most 5 s at 10M lines and at most 3 MB. The charts draw a mark per leg, window or position,
never per step, so their cost follows the legs, not the lines.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fold_scale import generate_arm, generate_log

import fold.command.process  # noqa: F401  one BLAS thread, as the command runs
from fold.api import fold_acceptance
from fold.present.output import dumps
from fold.present.page import page, write_plots

PAGE_SECONDS, PAGE_BYTES = 5.0, 3 * 1024 * 1024


def best_of(repeat: int, job) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        value = job()
        best = min(best, time.perf_counter() - started)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="report-cost-") as scratch_dir:
        scratch = Path(scratch_dir)
        arm, log = scratch / "arm.json", scratch / "steps.jsonl"
        generate_arm(arm, args.lines)
        generate_log(log, args.lines)
        fold_s, result = best_of(args.repeat, lambda: fold_acceptance(str(arm), [str(log)]))
        json_s, data = best_of(args.repeat, lambda: dumps(result.to_json()))
        page_s, html = best_of(args.repeat, lambda: page(result.to_json()))
        plots_s, _ = best_of(
            args.repeat, lambda: write_plots(str(scratch / "plots"), result.to_json())
        )
        plot_bytes = sum(path.stat().st_size for path in (scratch / "plots").iterdir())
    print(f"{args.lines:,} lines, 50 legs, best of {args.repeat}")
    print("| measured | time | ratio to the fold | size | target |")
    print("|---|---:|---:|---:|---|")
    print(f"| fold (baseline) | {fold_s:.2f} s | 1.00 | | |")
    print(f"| --json | {json_s:.2f} s | {json_s / fold_s:.2f} | {len(data) / 1e6:.1f} MB | |")
    page_met = page_s <= PAGE_SECONDS and len(html) <= PAGE_BYTES
    print(
        f"| --html page | {page_s:.2f} s | {page_s / fold_s:.2f} | {len(html) / 1e6:.2f} MB | "
        f"at most {PAGE_SECONDS:g} s and 3 MB: {'met' if page_met else 'NOT met'} |"
    )
    print(
        f"| --plots | {plots_s:.2f} s | {plots_s / fold_s:.2f} | {plot_bytes / 1e6:.2f} MB "
        "(all files) | |"
    )


if __name__ == "__main__":
    main()
