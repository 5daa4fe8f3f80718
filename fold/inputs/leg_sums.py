"""What a reader hands the bootstrap (:mod:`fold.folding.uncertainty`) for one leg of an arm.

It lives apart from the bootstrap so that readers (the oracle readers among them) can fill it
without importing a later stage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Leg"]


@dataclass(frozen=True)
class Leg:
    """One leg of an arm as the bootstrap sees it.

    ``requests`` maps a per-request sum (``steps``, ``proposed``, ``accepted``,
    ``decode_steps``, and ``decode_ns``, the decode time in integer nanoseconds) to one value
    per request of the leg. ``values`` holds what exists only per leg (``completion_tokens``,
    ``steps``, ``window_secs``); ``tok_s`` is
    the leg's throughput. Anything the input does not record is simply absent (or None). A leg
    with counts but no ``tok_s`` generated nothing (a response that stopped at once): it takes
    no part in the median, as it takes none in the pooled one.
    """

    requests: Mapping[str, Sequence[float] | np.ndarray] = field(default_factory=dict)
    values: Mapping[str, float] = field(default_factory=dict)
    tok_s: float | None = None

    def __post_init__(self) -> None:
        # read-only, as every value of the result document: a list of sums becomes a tuple
        requests = {
            name: tuple(found) if isinstance(found, list) else found
            for name, found in self.requests.items()
        }
        object.__setattr__(self, "requests", MappingProxyType(requests))
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))
