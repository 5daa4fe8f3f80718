"""fold-acceptance: speculative-decoding acceptance folded over a benchmark gate's legs."""

from fold.errors import FoldError, InputError, RefusedError

__all__ = ["FoldError", "InputError", "RefusedError"]
