"""The C++ extension (``fold._native``), loaded once for the native reader, the cadence and the
bootstrap (``fold.folding.native``): only when it was built from these very sources."""

from __future__ import annotations

import importlib
from typing import Any

INTERFACE = 2
"""The extension's ``INTERFACE`` these sources call (``fold/_native.cc``)."""


def interface_problem(module: Any) -> str | None:
    """Why ``module`` (the built extension) cannot serve these sources, or None: one built
    from other sources (an editable install not built again) takes other arguments."""
    found = getattr(module, "INTERFACE", None)
    if found == INTERFACE:
        return None
    return (
        f"{getattr(module, '__file__', 'fold._native')} was built from other sources "
        f"(interface {found}, these need {INTERFACE}): the slower polars reader folds instead. "
        "Build it again (pip install -e ., or python setup.py build_ext --inplace)"
    )


def load_extension() -> tuple[Any, str | None]:
    """The extension, or None when it was built without a compiler or Python headers (the
    polars reader remains) or from other sources; and in that last case why."""
    try:
        module = importlib.import_module("fold._native")
    except ImportError:
        return None, None
    problem = interface_problem(module)
    return (None if problem else module), problem
