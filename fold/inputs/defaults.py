"""The defaults of the fold's settings and the engines ``--matched`` knows, in a module that
imports nothing: the command builds its ``--help`` from them without loading the library
(numpy, polars and the rest load only when a fold runs; docs/performance.md, "Start-up").

Each stage that uses a setting imports it from here under the same name, so the command and the
library cannot drift apart.
"""

from __future__ import annotations

DEFAULT_PREDICATE = "run > 1"
"""The warm-leg predicate (``--warm``), a polars SQL expression over the legs' fields."""
DEFAULT_STALL_FACTOR = 4.0
"""A stall is an interval longer than this many times its request's median (``--stall-factor``)."""
DEFAULT_RESAMPLES = 1000
"""The bootstrap's resamples (``--bootstrap``)."""
DEFAULT_SEED = 20_261_201
"""The bootstrap's seed (``--seed``)."""
DEFAULT_TOLERANCE = 0.02
"""A factor within this of 1 counts as equal in a verdict (``--tolerance``)."""
ENGINES = ("vllm", "sglang", "llamacpp")
"""The engines ``--matched`` makes a setting for."""
