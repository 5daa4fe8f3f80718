"""The command run in this process on one input, and the rules every outcome must keep.

Shared by the fuzz targets (``fuzz/targets.py``); the step-log target keeps its own runner
(``fuzz/differential.py``), whose rules are the readers' agreement besides these.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import resource
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# A small main arm and its step log (three legs, labelled), which most targets fold beside
# their input.
MAIN_ARM = str(HERE / "arm.json")
MAIN_LOG = str(HERE / "context" / "steps.jsonl")
QUIET = ("--bootstrap", "0", "--quiet")
RESAMPLED = ("--bootstrap", "16", "--quiet")
SWITCH = "FOLD_ACCEPTANCE_NATIVE"
# The cap on a step's tokens (FORMAT.md): no list in the output may be longer than it allows.
MAX_STEP_TOKENS = 2**16
SECONDS = 20.0
RSS_BYTES = 3 * 2**30
# What the output of one command may hold whatever the values in its input: the fold's
# document with every per-position list and histogram at the cap (a step of 2^16 tokens in a
# leg of the main run and of another run of ours gives about 40 MB) plus a bounded amount per
# input byte. Past it, some figure grew with a value instead of with the input; the lists in
# a JSON document are held to the cap itself (check_lists).
OUTPUT_BASE = 96 * 2**20
OUTPUT_PER_INPUT_BYTE = 64
UNEXPECTED = ("this is a bug", "Traceback (most recent call last)")
# Where a message may say the trouble is, besides the input's own path: a line, a leg, a
# field, a request, a position, a run.
PLACE = re.compile(
    r":\d+:|\bline \d+|\blines? \d|\bleg \d+|\blegs? (?:\d|of)|\bfield\b|\bfields\b|"
    r"\brun \d+|\brun=\d+/\d+|\bpositions?\b|\brequest\b|\bspec_acceptance\b|\bmetrics\.\w+|"
    r"'[a-z][a-z_.]*'"
)


def import_library() -> None:
    """Every module of ``fold``, imported now: under ``atheris.instrument_imports`` this is what
    gets the coverage instrumentation. ``import fold.cli`` alone is not enough: the command
    imports the library where a run needs it (docs/performance.md, "Start-up"), and a module
    first imported inside a run is never instrumented."""
    import importlib
    import pkgutil

    import fold

    for module in pkgutil.walk_packages(fold.__path__, "fold."):
        importlib.import_module(module.name)


class Finding(AssertionError):
    """An input breaks one of the rules: what a campaign reports and a replay fails on."""


@dataclass(frozen=True)
class Outcome:
    arguments: tuple[str, ...]
    status: int
    stdout: bytes
    stderr: str
    seconds: float
    """Processor time the command took (all threads): what a loaded machine does not inflate."""

    def describe(self) -> str:
        return f"fold-acceptance {' '.join(self.arguments)} -> {self.status}"


@contextlib.contextmanager
def reader(native: bool | None) -> Iterator[None]:
    """The step-log reader switched to the native one or the polars reference for the block
    (None: the environment's choice), the switch restored after it."""
    previous = os.environ.get(SWITCH)
    if native is not None:
        os.environ[SWITCH] = "1" if native else "0"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(SWITCH, None)
        else:
            os.environ[SWITCH] = previous


def run(arguments: Sequence[str], *, native: bool | None = None) -> Outcome:
    """``fold-acceptance ARGUMENTS`` through ``fold.cli.main`` in this process. ``native``
    picks the step-log reader (None: the environment's choice)."""
    from fold import cli

    # Real files, not buffers: libFuzzer's timeout report writes to the streams by descriptor,
    # and the command writes bytes to sys.stdout.buffer.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        started = time.process_time()
        with reader(native), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
            try:
                status = cli.main(list(arguments))
            except SystemExit as leaving:  # argparse; never expected here
                status = leaving.code if isinstance(leaving.code, int) else 2
            stdout.flush()
        seconds = time.process_time() - started
        stdout.detach()
        out.seek(0)
        err.seek(0)
        return Outcome(tuple(arguments), status, out.read(), err.read(), seconds)


def judge(outcome: Outcome, *, fuzzed: str, input_bytes: int) -> None:
    """Raise ``Finding`` unless the outcome keeps every rule:

    - the exit status is 0, 1 or 2, and no traceback or "this is a bug" line is printed;
    - a refusal or error names a place: the fuzzed file, a line, a leg, a field (``PLACE``);
    - the command took at most ``SECONDS`` of processor time (libFuzzer's ``-timeout`` bounds
      the wall time of a whole input, every command of it) and the process stayed below
      ``RSS_BYTES``;
    - the output is bounded by the input's size, not by a value in it.
    """
    said = outcome.stderr + outcome.stdout.decode("utf-8", "replace")
    if outcome.status not in (0, 1, 2):
        raise Finding(f"{outcome.describe()}: exit status {outcome.status}\n{outcome.stderr}")
    for line in UNEXPECTED:
        if line in said:
            raise Finding(f"{outcome.describe()}: an unexpected exception\n{outcome.stderr}")
    if outcome.status != 0:
        message = outcome.stderr
        named = fuzzed in message or os.path.basename(fuzzed) in message
        if not named and not PLACE.search(message):
            raise Finding(f"{outcome.describe()}: a refusal that names no place\n{message}")
    if outcome.seconds > SECONDS:
        raise Finding(f"{outcome.describe()}: {outcome.seconds:.1f} s of processor time")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if rss > RSS_BYTES:
        raise Finding(f"{outcome.describe()}: the process reached {rss / 2**30:.1f} GiB")
    size = len(outcome.stdout) + len(outcome.stderr.encode())
    if size > OUTPUT_BASE + OUTPUT_PER_INPUT_BYTE * input_bytes:
        raise Finding(
            f"{outcome.describe()}: {size} bytes of output from {input_bytes} bytes of input"
        )


def check_lists(document: Any, input_bytes: int) -> None:
    """No list anywhere in a fold's JSON longer than a step's cap allows (a histogram has one
    entry per count of accepted tokens, 0 to the cap) or than the input has bytes (lists of
    legs, files, writers, rows grow with the input); no negative count in a fold."""
    longest = max(MAX_STEP_TOKENS + 1, input_bytes)
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key in ("steps", "proposed", "accepted", "emitted"):
                count = value.get(key)
                if isinstance(count, int) and not isinstance(count, bool) and count < 0:
                    raise Finding(f"{key} = {count}")
            histogram = value.get("histogram")
            if isinstance(histogram, list) and any(isinstance(n, int) and n < 0 for n in histogram):
                raise Finding(f"a negative histogram count: {histogram[:20]}...")
            stack.extend(value.values())
        elif isinstance(value, list):
            if len(value) > longest:
                raise Finding(f"a list of {len(value)} entries from {input_bytes} bytes")
            stack.extend(value)
