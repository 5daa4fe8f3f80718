"""Running a fold with the native extension on or off, for tests that compare both paths."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from fold.folding.native import ENVIRONMENT_SWITCH


@contextmanager
def native_switch(on: bool) -> Iterator[None]:
    """``FOLD_ACCEPTANCE_NATIVE`` set for the block, restored after it (hypothesis bodies run
    many times per test, so pytest's per-test monkeypatch does not fit them)."""
    saved = os.environ.get(ENVIRONMENT_SWITCH)
    os.environ[ENVIRONMENT_SWITCH] = "1" if on else "0"
    try:
        yield
    finally:
        if saved is None:
            del os.environ[ENVIRONMENT_SWITCH]
        else:
            os.environ[ENVIRONMENT_SWITCH] = saved
