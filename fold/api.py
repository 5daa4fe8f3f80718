"""The library's entry points: fold step logs over an arm record's legs, with no printing.

Gate scripts import from here (or from ``fold``); the work is done in the stages' packages.
"""

from __future__ import annotations

from fold.folding.from_sums import fold_from_sums
from fold.folding.log_fold import LogFold, ProgressCallback, fold_acceptance

__all__ = ["LogFold", "ProgressCallback", "fold_acceptance", "fold_from_sums"]
