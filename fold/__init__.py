"""fold-acceptance: speculative-decoding acceptance folded over a benchmark gate's legs.

A gate script gets the command's numbers with::

    import fold

    result = fold.fold_acceptance("our-arm.json", ["steps-*.jsonl"])
    result.warm["mean_acceptance_length"], result.to_json()

``result`` is a ``fold.Document``: immutable, its figures readable by name, and ``to_json()``
the JSON document ``--json`` writes (format ``fold-acceptance/5``, ``docs/document.md``).

The names below load on first use, so that importing a part of the package (the command's
process setup, ``fold.command.process``, above all) does not load numpy first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fold.api import LogFold, fold_acceptance, fold_from_sums
    from fold.errors import FoldError, InputError, RefusedError
    from fold.folding.document import Document
    from fold.folding.host_sums import RefusedWithSums
    from fold.folding.result import FoldResult
    from fold.inputs.arm import ArmRecord, load_arm

_HOMES = {
    "ArmRecord": "fold.inputs.arm",
    "Document": "fold.folding.document",
    "FoldError": "fold.errors",
    "FoldResult": "fold.folding.result",
    "InputError": "fold.errors",
    "LogFold": "fold.api",
    "RefusedError": "fold.errors",
    "RefusedWithSums": "fold.folding.host_sums",
    "fold_acceptance": "fold.api",
    "fold_from_sums": "fold.api",
    "load_arm": "fold.inputs.arm",
}

__all__ = [
    "ArmRecord",
    "Document",
    "FoldError",
    "FoldResult",
    "InputError",
    "LogFold",
    "RefusedError",
    "RefusedWithSums",
    "fold_acceptance",
    "fold_from_sums",
    "load_arm",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'fold' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
