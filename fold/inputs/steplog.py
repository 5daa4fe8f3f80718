"""A Python writer of step-log v1 lines, byte-compatible with the C++ instrument.

Python engines (and the tests) use it to produce the same lines the header writes; the layout is
specified in ``instrument/FORMAT.md``. Like the C++ writer it hands each line to the kernel with
one ``write(2)`` on an ``O_APPEND`` descriptor, so concurrent writers never interleave, and it
never retries a failed write.
"""

from __future__ import annotations

import os
import secrets
import time

from fold.inputs import limits
from fold.inputs.limits import is_int

FORMAT_VERSION = 1
_FIX = "the caller miscounts; nothing was written"
MAX_ID_ESCAPED = 256
"""Bytes of an escaped string request id, at most (the C++ writer drops longer ones)."""

_SHORT_ESCAPES = {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}


def escape_json_string(text: str) -> str:
    """Escape ``text`` the way both writers do (FORMAT.md): short escapes, else ``\\u00xx``."""
    out = []
    for char in text:
        code = ord(char)
        if code in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[code])
        elif code < 0x20:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")  # a lone surrogate is not UTF-8: replaced, as the C++ writer does
        else:
            out.append(char)
    return "".join(out)


def format_line(
    *,
    writer_id: str,
    n: int,
    t_ns: int,
    pid: int,
    seq: int | str,
    proposed: int,
    accepted: int,
    emitted: int | None = None,
    leg: str | None = None,
    draft_ns: int | None = None,
    verify_ns: int | None = None,
) -> bytes:
    """One v1 line, newline included, in the writers' fixed key order. A string ``seq`` (a
    request id such as ``cmpl-...``) is written as a JSON string, escaped as the leg label;
    ``draft_ns`` and ``verify_ns``, when measured, follow ``emitted``."""
    seq_text = f'"{escape_json_string(seq)}"' if isinstance(seq, str) else _integer(seq)
    line = (
        f'{{"v":{FORMAT_VERSION},"w":"{writer_id}","n":{n},"t_ns":{t_ns},"pid":{pid},'
        f'"seq":{seq_text},"proposed":{proposed},"accepted":{accepted}'
    )
    if emitted is not None:
        line += f',"emitted":{emitted}'
    if draft_ns is not None:
        line += f',"draft_ns":{draft_ns}'
    if verify_ns is not None:
        line += f',"verify_ns":{verify_ns}'
    if leg is not None:
        line += f',"leg":"{escape_json_string(leg)}"'
    return (line + "}\n").encode("utf-8")


def _integer(value: int) -> str:
    # A bool is an int to Python but not a request id; a float would print as one.
    if not is_int(value):
        raise TypeError(f"seq must be an int or a str, got {type(value).__name__}")
    return str(value)


def new_writer_id() -> str:
    return f"{secrets.randbits(64):016x}"


class StepLogWriter:
    """Appends v1 lines for one process; a failed write is counted in ``dropped``, never retried."""

    def __init__(self, path: str | os.PathLike[str], *, leg: str | None = None) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self._leg = leg or None  # as the instrument: an empty label writes no "leg" key
        self._writer_id = new_writer_id()
        self._pid = os.getpid()
        self._next_n = 0
        self.dropped = 0

    @property
    def writer_id(self) -> str:
        return self._writer_id

    def record(
        self,
        seq: int | str,
        proposed: int,
        accepted: int,
        emitted: int | None = None,
        *,
        t_ns: int | None = None,
        draft_ns: int | None = None,
        verify_ns: int | None = None,
    ) -> None:
        """One line for one verify step of request ``seq``; ``draft_ns`` and ``verify_ns`` are
        the step's forward's drafting and verify durations (None: not measured).

        A count or a step the readers would refuse is never written: ``ValueError``, in the
        words of ``fold.inputs.limits``. It is the caller's bug, not a bad input (this runs in
        the engine, not in the command), so it is Python's error for a wrong argument, not
        one of the command's errors with an exit code."""
        where = "StepLogWriter.record"
        for name, value in (("draft_ns", draft_ns), ("verify_ns", verify_ns)):
            if value is not None and not is_int(value):
                raise ValueError(f"{name} must be an int in 0 .. 2^63 - 1 or None, got {value!r}")
        counts = (proposed, accepted, emitted)
        try:
            for name, value in (("draft_ns", draft_ns), ("verify_ns", verify_ns)):
                if value is not None:
                    limits.check_duration(where, f"'{name}'", value, _FIX)
            for name, count in zip(("'proposed'", "'accepted'", "'emitted'"), counts, strict=True):
                if count is not None:
                    limits.check_count(where, name, count, _FIX)
        except limits.OutOfRange as error:
            raise ValueError(str(error)) from None
        rule = limits.step_problem(proposed, accepted, emitted)
        if rule is not None:
            raise ValueError(str(limits.step_refusal(rule, where, counts, _FIX)))
        if isinstance(seq, str) and len(escape_json_string(seq).encode()) > MAX_ID_ESCAPED:
            raise ValueError(f"a string seq is at most {MAX_ID_ESCAPED} bytes once escaped")
        line = format_line(
            writer_id=self._writer_id,
            n=self._next_n,
            t_ns=time.time_ns() if t_ns is None else t_ns,
            pid=self._pid,
            seq=seq,
            proposed=proposed,
            accepted=accepted,
            emitted=emitted,
            leg=self._leg,
            draft_ns=draft_ns,
            verify_ns=verify_ns,
        )
        self._next_n += 1
        try:
            written = os.write(self._fd, line)
        except OSError:
            written = -1
        if written != len(line):
            self.dropped += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> StepLogWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
