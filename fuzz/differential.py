"""Differential fuzzer: the native reader against the polars reference, through the command.

Each input is a step log (bytes, any bytes). It is folded over ``fuzz/arm.json`` by
``fold.cli.main`` (the command itself: argument parsing, the reader the environment selects,
the fold, the JSON on stdout, the error handling) four times: native and reference, each with
and without ``--skip-bad-lines``. A finding is any of:

- the two readers differ in exit status, stdout or stderr;
- an exit status other than 0, 1 or 2, or the command's "this is a bug" line (an unexpected
  exception: ``fold.cli`` turns those into a message instead of a traceback);
- a negative count in the JSON, or a histogram or per-position list longer than the format's
  cap on a step's tokens allows (a figure that grew with a value);
- a fold without ``--skip-bad-lines`` that succeeds but differs from the fold with it (with no
  bad line, skipping changes nothing).

Run: ``python fuzz/differential.py [libFuzzer options] CORPUS_DIR...`` (atheris, the ``fuzz``
extra); ``fuzz/run.sh`` runs the short, bounded campaign CI runs. Without atheris,
``python fuzz/differential.py --replay FILE_OR_DIR...`` checks inputs once each.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARM = str(HERE / "arm.json")
SWITCH = "FOLD_ACCEPTANCE_NATIVE"
# The cap on a step's tokens (fold.reader.MAX_STEP_TOKENS, FORMAT.md), repeated so that a
# change to it is a finding until this is changed too.
MAX_STEP_TOKENS = 2**16
_COUNTS = ("steps", "proposed", "accepted", "emitted", "lines", "torn_lines", "skipped_lines",
           "lost_lines", "unattributed_steps", "ambiguous_steps")  # fmt: skip


class Finding(AssertionError):
    """What the fuzzer reports: the input breaks one of the rules above."""


def _command(log: str, *, native: bool, skip: bool) -> tuple[int, bytes, str]:
    """(exit status, stdout, stderr) of ``fold-acceptance ARM LOG --json -`` in this process."""
    from fold import cli

    arguments = [ARM, log, "--json", "-", "--bootstrap", "0", "--quiet"]
    if skip:
        arguments.append("--skip-bad-lines")
    out, err = io.BytesIO(), io.StringIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8")
    previous = os.environ.get(SWITCH)
    os.environ[SWITCH] = "1" if native else "0"
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
            try:
                status = cli.main(arguments)
            except SystemExit as leaving:  # argparse; never expected here
                status = leaving.code if isinstance(leaving.code, int) else 2
            stdout.flush()
    finally:
        if previous is None:
            os.environ.pop(SWITCH, None)
        else:
            os.environ[SWITCH] = previous
    return status, out.getvalue(), err.getvalue()


def _check_document(text: bytes) -> None:
    document = json.loads(text)
    folds = [*document["legs"], document["warm"], document["all"]]
    for fold in folds:
        if len(fold["histogram"]) > MAX_STEP_TOKENS + 1:
            raise Finding(f"a histogram of {len(fold['histogram'])} entries")
        if len(fold["per_position"]) > MAX_STEP_TOKENS:
            raise Finding(f"per_position of {len(fold['per_position'])} entries")
        if any(count < 0 for count in fold["histogram"]):
            raise Finding(f"a negative histogram count: {fold['histogram']}")
    for owner in [*folds, document, *document.get("files", []), *document.get("writers", [])]:
        for key in _COUNTS:
            value = owner.get(key)
            if isinstance(value, int) and value < 0:
                raise Finding(f"{key} = {value}")


def check(data: bytes, directory: str) -> None:
    """Raise ``Finding`` when ``data``, as a step log, breaks a rule (module docstring)."""
    log = os.path.join(directory, "steps.jsonl")
    with open(log, "wb") as handle:
        handle.write(data)
    outcomes = {}
    for skip in (False, True):
        native = _command(log, native=True, skip=skip)
        reference = _command(log, native=False, skip=skip)
        if native != reference:
            raise Finding(
                f"the readers differ (skip_bad_lines={skip}):\n  native    {native!r}\n"
                f"  reference {reference!r}"
            )
        status, stdout, stderr = native
        if status not in (0, 1, 2):
            raise Finding(f"exit status {status}: {stderr}")
        if "this is a bug" in stderr or "Traceback" in stderr:
            raise Finding(f"an unexpected exception: {stderr}")
        if status == 0:
            _check_document(stdout)
        outcomes[skip] = native
    if outcomes[False][0] == 0 and outcomes[False] != outcomes[True]:
        raise Finding("a fold with no bad line changes with --skip-bad-lines")


def _replay(paths: list[str]) -> int:
    files = []
    for name in paths:
        path = Path(name)
        files.extend(sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path])
    failed = 0
    with tempfile.TemporaryDirectory(prefix="fold-fuzz-") as directory:
        for path in files:
            try:
                check(path.read_bytes(), directory)
            except Finding as finding:
                failed += 1
                print(f"{path}: {finding}", file=sys.stderr)
    print(f"replayed {len(files)} inputs, {failed} findings")
    return 1 if failed else 0


def main() -> int:
    if sys.argv[1:2] == ["--replay"]:
        return _replay(sys.argv[2:])
    import atheris

    with atheris.instrument_imports(include=["fold"]):
        import fold.cli  # noqa: F401  imported here to be instrumented

    directory = tempfile.mkdtemp(prefix="fold-fuzz-", dir="/dev/shm" if os.path.isdir(
        "/dev/shm") else None)  # fmt: skip

    def one_input(data: bytes) -> None:
        check(data, directory)

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
