"""What the ``fold-acceptance`` command sets in its own process before the library loads.

Only the command imports this module, first: a program that imports the library keeps its own
process settings.

numpy's OpenBLAS starts a thread per core when numpy is imported, and each spins for about a
tenth of a second waiting for work. The fold never calls BLAS, so on a two-core machine that
spin only takes a core from the reader's threads (about 0.09 s of a 1 s fold of 10M lines).
One BLAS thread starts none.

polars allocates through its own jemalloc, which keeps freed pages for half a second to a
second before handing them back. The fold's stages each build and drop columns of every request
within less than that, so on a load test's 10^6 requests the pages of one stage were still held
while the next allocated its own: about 140 MiB of the 920 MiB peak. Handing freed pages back
at once costs no measurable time there (``docs/performance.md``).

A value the user set is kept, for either.
"""

from __future__ import annotations

import os

BLAS_THREADS = "OPENBLAS_NUM_THREADS"

POLARS_ALLOCATOR = "_RJEM_MALLOC_CONF"
"""Read by polars' jemalloc when it first allocates: set before polars loads."""

os.environ.setdefault(BLAS_THREADS, "1")
os.environ.setdefault(POLARS_ALLOCATOR, "dirty_decay_ms:0,muzzy_decay_ms:0")
