"""Outputs refused before any work when writing them would destroy what a run reads or writes:
an output naming an input (the arm record, a step log, an oracle's file, the ledger), a file
inside a folder the run reads, or the same file as another output. A device or a pipe
(``--json /dev/null``) is written in place, never replaced, so it is not checked."""

from __future__ import annotations

import os
from collections.abc import Sequence

from fold.errors import InputError


def check_outputs(
    outputs: Sequence[tuple[str, str | None]], inputs: Sequence[tuple[str, str]]
) -> None:
    """``outputs``: (flag, path or None); ``inputs``: (role, path) as ``run_inputs`` gives
    them, and ``("ledger", PATH)`` for a ledger the run keeps or reads."""
    named = [
        (flag, path) for flag, path in outputs if path not in (None, "", "-") and not _special(path)
    ]
    for flag, out in named:
        real = os.path.realpath(out)
        for role, path in inputs:
            if (flag, role) == ("--ledger", "ledger") or not os.path.exists(path):
                continue
            held = os.path.realpath(path)
            if os.path.isdir(path):
                if real == held or real.startswith(held.rstrip(os.sep) + os.sep):
                    raise InputError(
                        f"{flag} {out}: it is inside {path}, {_what(role)} this run reads, "
                        "and would change it; write it elsewhere"
                    )
            elif os.path.isfile(path) and real == held:
                raise InputError(
                    f"{flag} {out}: it would overwrite {path}, {_what(role)} this run reads; "
                    "name another file"
                )
    seen: dict[str, tuple[str, str]] = {}
    for flag, out in named:
        real = os.path.realpath(out)
        if real in seen:
            first_flag, first = seen[real]
            raise InputError(
                f"{first_flag} {first} and {flag} {out}: two outputs name the same file, and "
                "one would replace the other; name two files"
            )
        seen[real] = (flag, out)


def _special(path: str) -> bool:
    """A device, a pipe or a socket: written in place, so it overwrites nothing."""
    return os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path)


def _what(role: str) -> str:
    kind, _, name = role.partition(":")
    return {
        "arm": "the arm record",
        "log": "a step log",
        "vs": f"the file of --vs {name}",
        "vs-log": f"a step log of --vs-log {name}",
        "ledger": "the ledger",
    }.get(kind, "an input")
