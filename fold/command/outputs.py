"""Outputs refused before any work when writing them would destroy what a run reads or writes:
an output naming an input (the arm record, a step log, an oracle's file, the ledger), even one
not written yet (``--follow``) or through a link, a file inside a folder the run reads, a file a
followed glob would pick up as a step log, or the same file as another output. A device or a
pipe (``--json /dev/null``) is written in place, never replaced, so it is not checked."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Sequence

from fold.errors import InputError


def check_outputs(
    outputs: Sequence[tuple[str, str | None]],
    inputs: Sequence[tuple[str, str]],
    *,
    followed: Sequence[str] = (),
    folders: Sequence[tuple[str, str | None, Callable[[str], bool]]] = (),
) -> None:
    """``outputs``: (flag, path or None); ``inputs``: (role, path) as ``run_inputs`` gives
    them, whether or not the file is there yet, and ``("ledger", PATH)`` for a ledger the run
    keeps or reads; ``followed``: the glob patterns ``--follow`` reads again as files appear;
    ``folders``: folder outputs (``--plots``, ``--export``) as (flag, folder, whether a file
    name is one the output may write there)."""
    _check_folders(folders, outputs, inputs)
    named = [
        (flag, path) for flag, path in outputs if path not in (None, "", "-") and not _special(path)
    ]
    for flag, out in named:
        real = os.path.realpath(out)
        for role, path in inputs:
            if (flag, role) == ("--ledger", "ledger"):
                continue
            if os.path.isdir(path):
                held = os.path.realpath(path)
                if real == held or real.startswith(held.rstrip(os.sep) + os.sep):
                    raise InputError(
                        f"{flag} {out}: it is inside {path}, {_what(role)} this run reads, "
                        "and would change it; write it elsewhere"
                    )
            elif _same_file(out, path):
                raise InputError(
                    f"{flag} {out}: it would overwrite {path}, {_what(role)} this run reads; "
                    "name another file"
                )
        for pattern in followed:
            if fnmatch.fnmatchcase(os.path.abspath(out), os.path.abspath(pattern)):
                raise InputError(
                    f"{flag} {out}: it matches {pattern!r}, which --follow reads as step logs "
                    "as they appear; name a file outside it"
                )
    seen: list[tuple[str, str]] = []
    for flag, out in named:
        for first_flag, first in seen:
            if _same_file(out, first):
                raise InputError(
                    f"{first_flag} {first} and {flag} {out}: two outputs name the same file, "
                    "and one would replace the other; name two files"
                )
        seen.append((flag, out))


def _check_folders(
    folders: Sequence[tuple[str, str | None, Callable[[str], bool]]],
    outputs: Sequence[tuple[str, str | None]],
    inputs: Sequence[tuple[str, str]],
) -> None:
    """A file in a folder output's folder under a name it may write is refused: an input
    would be overwritten, another output replaced."""
    files = [(flag, path) for flag, path in outputs if path not in (None, "", "-")]
    files += [(_what(role), path) for role, path in inputs]
    for flag, folder, writes in folders:
        if folder in (None, "", "-"):
            continue
        held = os.path.realpath(folder)
        for owner, path in files:
            real = os.path.realpath(path)
            if os.path.dirname(real) == held and writes(os.path.basename(real)):
                raise InputError(
                    f"{flag} {folder}: it would write over {path} ({owner}) with a file of "
                    "its own; name another folder"
                )


def _same_file(one: str, other: str) -> bool:
    """One file by its path (a link, ``..``; one not written yet) or by what the system says
    (a hard link, a bind mount, a name that differs only in case where case does not count)."""
    if os.path.realpath(one) == os.path.realpath(other):
        return True
    try:
        return os.path.exists(one) and os.path.exists(other) and os.path.samefile(one, other)
    except OSError:
        return False


def _special(path: str) -> bool:
    """A device, a pipe or a socket: written in place, so it overwrites nothing."""
    try:
        return os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path)
    except OSError:  # a name too long: the write names it
        return False


def _what(role: str) -> str:
    kind, _, name = role.partition(":")
    return {
        "arm": "the arm record",
        "log": "a step log",
        "vs": f"the file of --vs {name}",
        "vs-log": f"a step log of --vs-log {name}",
        "ledger": "the ledger",
    }.get(kind, "an input")
