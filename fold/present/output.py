"""The one JSON writer: the document, the annotated arm record and the ledger's JSON outputs
are made by ``dumps``; every file the command writes (those, and the timeline, which is
compact JSON of its own) is written whole by ``write_atomically``."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson

from fold.errors import InputError
from fold.folding.leg_figures import plain
from fold.inputs.acceptance import CountColumns, Counts

_SCALARS = frozenset({str, int, float, bool, type(None)})


def dumps(document: Any) -> bytes:
    """Every JSON file the command writes goes through here: indented, but an array of flat
    objects (each value a scalar) has one object a line, written compactly, and an array of
    scalars is written on one line."""
    return orjson.dumps(
        _items_on_lines(document, 0),
        default=plain,
        option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE,
    )


def _items_on_lines(value: Any, depth: int) -> Any:
    """``value`` (at ``depth`` in the document) with each array of flat objects made
    compact JSON of its own, an object a line, indented as orjson indents the rest.

    The files, the writers and the lowest requests are arrays of flat objects: indented, each
    object took a line a value (a leg's 512 windows, an object each until format 5, made a
    document of 50 legs about 5 MB instead of 3). The JSON's content is the same: only where
    the lines break changes."""
    if isinstance(value, dict):
        return {key: _items_on_lines(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        kinds = _value_types(value)
        if kinds is not None and kinds.issubset(_SCALARS):
            return orjson.Fragment(_flat_items(value, depth, str not in kinds))
        if _SCALARS.issuperset(map(type, value)):
            # On one line: a leg's windows are an array per figure (512 numbers each), which a
            # number a line made 2,048 lines a leg.
            return orjson.Fragment(orjson.dumps(value))
        return [_items_on_lines(item, depth + 1) for item in value]
    if type(value) is tuple:
        return _items_on_lines(list(value), depth)  # orjson writes a tuple as its items
    if isinstance(value, CountColumns):
        # orjson would write a dataclass's fields itself, without the rates
        return _items_on_lines(value.to_json(), depth)
    if isinstance(value, MappingProxyType):
        # orjson cannot write one and hands it to ``plain``: so does this, first.
        return _items_on_lines(plain(value), depth)
    return value  # what orjson writes natively, or hands to ``plain``, as before (a tuple
    # subclass included)


def _value_types(items: list[Any]) -> set[type] | None:
    """The types of the values of ``items`` when every item is an object, else None."""
    kinds: set[type] = set()
    keys: set[Any] = set()
    for item in items:
        if isinstance(item, dict):
            kinds.update(map(type, item.values()))
            keys.update(item)
        elif isinstance(item, Counts):  # orjson writes its three fields
            kinds.update((type(item.steps), type(item.proposed), type(item.accepted)))
        else:
            return None
    if any(isinstance(key, str) and "}" in key for key in keys):
        kinds.add(str)  # a key that could read as an object's end: written object by object
    return kinds if items else None


def _flat_items(items: list[Any], depth: int, numbers_only: bool) -> bytes:
    """An array of flat objects at ``depth``: each object compact on a line of its own."""
    inner = _line_break(depth + 1)
    if numbers_only:
        # No string value, and no key with a "}": "},{" can only be where one object ends and
        # the next begins, so one orjson call writes them all (a call per object cost 30 ms
        # for 50 legs' windows).
        compact = orjson.dumps(items, default=plain)[1:-1]
        body = compact.replace(b"},{", b"".join((b"},", inner, b"{")))
    else:
        body = b"".join((b",", inner)).join(orjson.dumps(item, default=plain) for item in items)
    return b"".join((b"[", inner, body, _line_break(depth), b"]"))


def _line_break(depth: int) -> bytes:
    """A new line indented as orjson indents a value at ``depth``."""
    return b"\n" + b"  " * depth


def write_atomically(path: str | Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, then rename: readers never see half a file.

    A symbolic link stays a link: the file it points to is written. A device or a pipe
    (``/dev/null``, ``/dev/stdout``, a FIFO) is written in place, as a shell's ``>`` would:
    a rename would replace it with a file (run as root, ``--json /dev/null`` replaced the
    device node)."""
    target = Path(path)
    try:
        descriptor = _open_descriptor(str(path))
        if descriptor is not None:  # /dev/stdout: the descriptor the shell opened, as it is
            _write_all(descriptor, data)
            return
        if target.is_dir():  # else the rename's "Device or resource busy" or "Is a directory"
            raise InputError(f"{target}: a folder, not a file: name a file to write")
        if target.exists() and not target.is_file():  # a device or a pipe, through any link
            with open(target, "wb") as handle:
                handle.write(data)
            return
        target = Path(os.path.realpath(target))
    except OSError as error:  # a name too long, a full device, a pipe with no reader left
        raise InputError(f"{path}: cannot write: {error.strerror}") from error
    directory = target.parent
    try:
        descriptor, temporary = tempfile.mkstemp(
            dir=directory, prefix=f".{target.name}.", suffix=".tmp"
        )
    except OSError as error:
        raise InputError(f"{path}: cannot write here: {error.strerror}") from error
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
        raise InputError(f"{path}: cannot write: {error.strerror}") from error


_DESCRIPTOR = re.compile(r"/(?:dev|proc/self)/fd/([0-9]+)")
_NAMED_DESCRIPTORS = {"/dev/stdout": 1, "/dev/stderr": 2}


def _open_descriptor(path: str) -> int | None:
    """The descriptor a path names (``/dev/stdout``, ``/dev/fd/3``), or None. Opened again by
    name, a regular file behind it would be truncated or renamed over, where the shell opened
    it for appending (``>> history.txt``)."""
    found = _DESCRIPTOR.fullmatch(path)
    return int(found.group(1)) if found else _NAMED_DESCRIPTORS.get(path)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]
