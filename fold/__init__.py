"""fold-acceptance: speculative-decoding acceptance folded over a benchmark gate's legs.

A gate script gets the command's numbers with::

    import fold

    result = fold.fold_acceptance("our-arm.json", ["steps-*.jsonl"])
    result.warm["mean_acceptance_length"], result.to_json()
"""

from fold.api import LogFold, fold_acceptance
from fold.arm import ArmRecord, load_arm
from fold.errors import FoldError, InputError, RefusedError
from fold.result import FoldResult

__all__ = [
    "ArmRecord",
    "FoldError",
    "FoldResult",
    "InputError",
    "LogFold",
    "RefusedError",
    "fold_acceptance",
    "load_arm",
]
