"""Start-up benchmark: how long the command takes before it does any work.

    python benchmarks/startup.py --repeat 10
    python benchmarks/startup.py --repeat 10 --baseline DIR --importtime

times, in one run and interleaved round by round (so a loaded machine weighs on each the same):

- ``python -c pass``: the interpreter alone, the floor under everything else on this machine;
- ``--help``: the command's help, which needs argparse and the settings' defaults only;
- ``fixture fold``: ``fold-acceptance fixtures/our-arm.json fixtures/steps.jsonl``, the first
  command of the README, folding the shipped fixture (a few hundred lines) and printing its
  table.

Each is a fresh process running the command's entry point as its console script does
(``from fold.cli import main; sys.exit(main())``), with every module's byte-code cached (in a
directory of the run's own, by an untimed first run: as an installed package has it), with
the tree under test first on
``sys.path``: this checkout, and with ``--baseline DIR`` another checkout of the package (its
extension built in place) in the same rounds, a before/after under the same load. The medians,
minima and maxima of the wall times, and the median processor time (user + system, every
thread: what a loaded machine inflates least), are printed as a markdown table with the targets
(``--help`` under 0.3 s, the fixture's fold under 0.5 s: docs/performance.md, "Start-up").

``--importtime`` runs each command once more under ``python -X importtime`` and prints the
third-party packages it loaded and its slowest imports (cumulative), which is where a start-up
regression shows first. Both commands must exit 0 or the script fails.
"""

from __future__ import annotations

import argparse
import atexit
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from fold.cli import main; sys.exit(main())"
)
FIXTURE = ["fixtures/our-arm.json", "fixtures/steps.jsonl"]
TARGETS = {"--help": 0.3, "fixture fold": 0.5}
WATCHED = ("numpy", "polars", "rich", "matplotlib", "duckdb", "orjson", "pyarrow", "pandas")


def commands(tree: Path) -> dict[str, list[str]]:
    python = sys.executable
    return {
        "--help": [python, "-c", ENTRY, str(tree), "--help"],
        "fixture fold": [python, "-c", ENTRY, str(tree), *FIXTURE],
    }


def timed(command: list[str]) -> tuple[float, float]:
    """The command's wall time and its processor time (user + system, all its threads)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, env=_environment())
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{command[-1]}: exit {done.returncode}\n{done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu


_BYTE_CODE = tempfile.mkdtemp(prefix="startup-pycache-")
atexit.register(shutil.rmtree, _BYTE_CODE, ignore_errors=True)


def _environment() -> dict[str, str]:
    # Every module's byte-code is cached once, by the untimed warm-up, in a directory of this
    # run's and not in the trees measured: an installed package has its byte-code (pip compiles
    # it on install), so that is what a user's command loads. Without a cache (a machine that
    # sets PYTHONDONTWRITEBYTECODE, as CI images do) every run compiled the library's 68
    # modules again, 0.11 s no user pays. No colours: a run as a pipe sees it.
    environment = {**os.environ, "PYTHONPYCACHEPREFIX": _BYTE_CODE, "NO_COLOR": "1"}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    return environment


def import_profile(command: list[str], top: int) -> tuple[list[str], list[tuple[float, str]]]:
    """The watched packages a command loads and its ``top`` slowest imports (cumulative s)."""
    done = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_environment(),
    )
    loaded: set[str] = set()
    rows: list[tuple[float, str]] = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        top_name = name.strip().split(".")[0]
        if top_name in WATCHED:
            loaded.add(top_name)
        rows.append((int(cumulative) / 1e6, name.strip()))
    rows.sort(reverse=True)
    return sorted(loaded), rows[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="rounds (default 10)")
    parser.add_argument("--baseline", type=Path, help="another checkout, timed in the same rounds")
    parser.add_argument("--importtime", action="store_true", help="also profile the imports")
    parser.add_argument("--top", type=int, default=8, help="slowest imports shown (default 8)")
    args = parser.parse_args()

    trees = {"this tree": ROOT}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    jobs: dict[tuple[str, str], list[str]] = {
        ("python -c pass", ""): [sys.executable, "-c", "pass"]
    }
    for label, tree in trees.items():
        for name, command in commands(tree).items():
            jobs[(name, label)] = command
    for command in jobs.values():  # warm the file cache and byte-code once, untimed
        timed(command)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in jobs}
    cpu: dict[tuple[str, str], list[float]] = {key: [] for key in jobs}
    for _ in range(args.repeat):
        for key, command in jobs.items():
            wall, processor = timed(command)
            times[key].append(wall)
            cpu[key].append(processor)

    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"{args.repeat} rounds, {os.cpu_count()} cores, load at the end {load}")
    print("| command | tree | median | min | max | processor time, median | target |")
    print("|---|---|---:|---:|---:|---:|---|")
    for (name, label), found in times.items():
        target = TARGETS.get(name)
        median = statistics.median(found)
        verdict = (
            ""
            if target is None
            else f"under {target:g} s: {'met' if median < target else 'NOT met'}"
        )
        print(
            f"| {name} | {label} | {median:.3f} s | {min(found):.3f} s | {max(found):.3f} s | "
            f"{statistics.median(cpu[(name, label)]):.3f} s | {verdict} |"
        )
    if not args.importtime:
        return
    for (name, label), command in jobs.items():
        if not label:
            continue
        loaded, rows = import_profile(command, args.top)
        print(f"\n{name} ({label}): loads {', '.join(loaded) or 'none of ' + ', '.join(WATCHED)}")
        for seconds, module in rows:
            print(f"  {seconds:7.3f} s  {module}")


if __name__ == "__main__":
    main()
