"""A writer of a ledger folder, for tests that run many at once and kill some.

    python ledger_folder_writer.py FOLDER WRITER COUNT

Keeps COUNT runs (COUNT 0: until killed) through ``fold.ledger.store.keep_run``, the command's
own path. Run N of writer W is ``document(value(W, N))`` labelled writer=W n=N, so a reader can
tell from a run's labels which figure it must hold. After each append returns it prints
``kept RUN_ID W N``.
"""

from __future__ import annotations

import itertools
import sys

from ledger_runs import document

from fold.ledger.store import keep_run


def value(writer: int, n: int) -> float:
    return round(0.1 + writer / 100 + n / 100_000, 9)


def main() -> None:
    folder, writer, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    numbers = itertools.count(1) if count == 0 else range(1, count + 1)
    for n in numbers:
        rate = value(writer, n)
        kept = keep_run(folder, document(rate, (rate - 0.05, rate + 0.05)),
                        {"writer": str(writer), "n": str(n)}, [])  # fmt: skip
        print(f"kept {kept.run_id} {writer} {n}", flush=True)


if __name__ == "__main__":
    main()
