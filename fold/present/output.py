"""The one JSON writer: every JSON file the command writes (the document, the annotated arm
record, the ledger's outputs, the timeline) is made by ``dumps`` and written whole by
``write_atomically``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from fold.errors import InputError
from fold.folding.leg_figures import plain


def dumps(document: Any) -> bytes:
    """Every JSON file the command writes goes through here."""
    return orjson.dumps(
        document, default=plain, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    )


def write_atomically(path: str | Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, then rename: readers never see half a file."""
    target = Path(path)
    if target.is_dir():  # else the rename's "Device or resource busy" or "Is a directory"
        raise InputError(f"{target}: a folder, not a file: name a file to write")
    directory = target.parent if str(target.parent) else Path(".")
    try:
        descriptor, temporary = tempfile.mkstemp(
            dir=directory, prefix=f".{target.name}.", suffix=".tmp"
        )
    except OSError as error:
        raise InputError(f"{target}: cannot write here: {error.strerror}") from error
    try:
        # mkstemp makes the file private (0600); an output is shipped and shared, so it gets
        # the mode any new file of this process gets (0644 under the usual umask)
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(descriptor, 0o666 & ~mask)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(temporary, target)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise InputError(f"{target}: cannot write: {error.strerror}") from error
