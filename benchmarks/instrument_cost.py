"""Builds benchmarks/instrument_cost.cc into a temporary directory and runs it.

    python benchmarks/instrument_cost.py [DIR]

DIR is where the benchmark writes its files (default: a fresh temporary directory); the file
system there sets the floor of the enabled figures, so pass the one the engine logs to.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]


def main(argv: list[str]) -> int:
    compiler = shutil.which("g++")
    if compiler is None:
        sys.exit("instrument_cost: g++ is required")
    with tempfile.TemporaryDirectory(prefix="instrument_cost-") as tmp:
        binary = Path(tmp) / "instrument_cost"
        source = ROOT / "benchmarks" / "instrument_cost.cc"
        include = f"-I{ROOT / 'instrument'}"
        subprocess.run([compiler, *FLAGS, include, str(source), "-o", str(binary)], check=True)
        target = argv[0] if argv else tmp
        return subprocess.run([str(binary), target], check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
