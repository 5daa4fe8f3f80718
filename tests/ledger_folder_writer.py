"""A writer of a ledger folder, for tests that run many at once and kill some.

    python ledger_folder_writer.py FOLDER WRITER COUNT [DIE_AT]

Keeps COUNT runs (COUNT 0: until killed) through ``fold.ledger.store.keep_run``, the command's
own path. Run N of writer W is ``document(value(W, N))`` labelled writer=W n=N, so a reader can
tell from a run's labels which figure it must hold. After each append returns it prints
``kept RUN_ID W N``.

DIE_AT kills the writer (SIGKILL, no handler runs) at a set point of its first append:
``claim`` (its run id claimed, no file written), ``copy`` (inside its first table's write,
the temporary file half there), ``rename-K`` (after its K-th file is renamed into place;
``rename-4`` is after the runs file, before the digest).
"""

from __future__ import annotations

import itertools
import os
import signal
import sys

from ledger_runs import document

import fold.ledger.folder as folder_module
from fold.ledger.store import keep_run


def die_at(point: str) -> None:
    """Patch the folder's writing so that the process kills itself at ``point``."""

    def die() -> None:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "claim":
        claim = folder_module._claim
        folder_module._claim = lambda folder: (claim(folder), die())[0]
    elif point == "copy":
        folder_module._flush = lambda path: (path.write_bytes(path.read_bytes()[:20]), die())
    elif point.startswith("rename-"):
        left = [int(point.removeprefix("rename-"))]
        replace = os.replace

        def counted(source, destination) -> None:
            replace(source, destination)
            left[0] -= 1
            if left[0] == 0:
                die()

        folder_module.os.replace = counted
    else:
        raise SystemExit(f"DIE_AT {point!r}: expected claim, copy or rename-K")


def value(writer: int, n: int) -> float:
    return round(0.1 + writer / 100 + n / 100_000, 9)


def main() -> None:
    folder, writer, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if len(sys.argv) > 4:
        die_at(sys.argv[4])
    numbers = itertools.count(1) if count == 0 else range(1, count + 1)
    for n in numbers:
        rate = value(writer, n)
        kept = keep_run(folder, document(rate, (rate - 0.05, rate + 0.05)),
                        {"writer": str(writer), "n": str(n)}, [])  # fmt: skip
        print(f"kept {kept.run_id} {writer} {n}", flush=True)


if __name__ == "__main__":
    main()
