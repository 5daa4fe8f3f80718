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

glibc, which numpy, Python and the extension allocate through, maps an array of 128 KiB or
more by itself and unmaps it when freed, until it frees one such array: from then on it puts
arrays up to that size in its heap, where a freed one stays with the process. The fold's
stages each free columns and arrays of every request (a load test's 10^6: several MiB each)
that the next stage, allocating through polars, never reuses, so they stayed held beneath
its peak: some 40 MiB under each of the read's, the cadence's and the document's peaks.
The threshold is fixed at 4 MiB: an array of half a million integers or more is mapped, and
handed back when freed. Fixed at glibc's own 128 KiB, the many smaller arrays the bootstraps
make and drop were mapped and faulted in afresh each time, some 0.4 s of a load test's 7 s;
at 4 MiB the peaks are as low and the cost is a third of that (``docs/performance.md``).

A value the user set is kept, for each.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

BLAS_THREADS = "OPENBLAS_NUM_THREADS"

POLARS_ALLOCATOR = "_RJEM_MALLOC_CONF"
"""Read by polars' jemalloc when it first allocates: set before polars loads."""

os.environ.setdefault(BLAS_THREADS, "1")
os.environ.setdefault(POLARS_ALLOCATOR, "dirty_decay_ms:0,muzzy_decay_ms:0")

GLIBC_MMAP_THRESHOLD = "MALLOC_MMAP_THRESHOLD_"
"""glibc's own variable for the threshold, read when the process starts: set, it is kept."""
_M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)
_MMAP_THRESHOLD = 4 * 1024 * 1024

if sys.platform.startswith("linux") and GLIBC_MMAP_THRESHOLD not in os.environ:
    # A C library without mallopt keeps its own ways.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
