"""Trace benchmark: ``--trace`` on a large log stays a file a browser opens, at a bounded cost.

    python benchmarks/trace_scale.py --lines 2000000 --lines 10000000

generates the same seeded log and arm record as ``fold_scale.py`` and, in one child process per
size (so peak memory is its own), folds it and then writes its trace. Printed per size: the
fold's time (the baseline, same run), the trace's time and its ratio to the fold's, the file's
size, its step slices and steps per slice, and the child's peak RssAnon.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fold_scale import _rss_anon_kib, generate_arm, generate_log


def _child(arm: str, log: str, out: str) -> None:
    from fold.api import fold_acceptance
    from fold.folding.timeline_lines import attributed_lines
    from fold.inputs.arm import load_arm
    from fold.present.timeline import write_timeline

    started = time.perf_counter()
    result = fold_acceptance(arm, [log])
    folded = time.perf_counter()
    record = load_arm(arm)
    summary = write_timeline(out, result.to_json(), attributed_lines(record, [log]))
    traced = time.perf_counter()
    print(
        json.dumps(
            {
                "fold_s": folded - started,
                "trace_s": traced - folded,
                "steps": summary.steps,
                "slices": summary.step_slices,
                "per_slice": summary.steps_per_slice,
                "bytes": os.path.getsize(out),
            }
        )
    )


def measure(arm: Path, log: Path, out: Path) -> dict:
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", str(arm), str(log), str(out)],
        stdout=subprocess.PIPE,
        text=True,
    )
    peak = 0
    while child.poll() is None:
        peak = max(peak, _rss_anon_kib(child.pid))
        time.sleep(0.05)
    output = child.stdout.read() if child.stdout else ""
    if child.returncode != 0:
        raise SystemExit(f"the trace run failed (exit {child.returncode})")
    return {**json.loads(output.strip().splitlines()[-1]), "peak_mib": peak / 1024}


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _child(*sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, action="append", help="log sizes (repeatable)")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    arguments = parser.parse_args()
    sizes = arguments.lines or [2_000_000]
    with tempfile.TemporaryDirectory(dir=arguments.dir) as scratch:
        directory = Path(scratch)
        print("| lines | fold (baseline) | trace | trace/fold | file | slices | steps/slice | "
              "peak RssAnon |")  # fmt: skip
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for lines in sizes:
            log, arm = directory / f"steps-{lines}.jsonl", directory / f"arm-{lines}.json"
            generate_log(log, lines)
            generate_arm(arm, lines)
            row = measure(arm, log, directory / "trace.json")
            print(
                f"| {lines:,} | {row['fold_s']:.2f} s | {row['trace_s']:.2f} s | "
                f"{row['trace_s'] / row['fold_s']:.2f} | {row['bytes'] / 2**20:.0f} MiB | "
                f"{row['slices']:,} | {row['per_slice']} | {row['peak_mib']:.0f} MiB |"
            )
            log.unlink()


if __name__ == "__main__":
    main()
