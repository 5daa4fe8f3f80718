"""What the ``fold-acceptance`` command sets in its own process before the library loads.

Only the command imports this module, first: a program that imports the library keeps its own
process settings.

numpy's OpenBLAS starts a thread per core when numpy is imported, and each spins for about a
tenth of a second waiting for work. The fold never calls BLAS, so on a two-core machine that
spin only takes a core from the reader's threads (about 0.09 s of a 1 s fold of 10M lines).
One BLAS thread starts none. A value the user set is kept.
"""

from __future__ import annotations

import os

BLAS_THREADS = "OPENBLAS_NUM_THREADS"

os.environ.setdefault(BLAS_THREADS, "1")
