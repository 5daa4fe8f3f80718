"""The command's two streams: what goes wrong writing them is told apart from the rest.

A failed write to standard output (a full disk behind ``>``, ``/dev/full``) is the machine's, not
an input's, and the command says so by name; an error anywhere else must not be blamed on it,
so every write of the answer goes through ``write_stdout``. Standard error only carries the
messages: when it cannot be written (full, or closed), they are dropped and the command still
ends with its own exit status, which is then the only thing it can tell.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO


class StdoutFailed(Exception):
    """A write to standard output failed (a broken pipe excepted: that one is the reader's
    choice, and ``fold.cli`` ends quietly on it)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error


def write_stdout(data: str | bytes) -> None:
    """Write the answer to standard output and flush it, so that a full device shows here."""
    try:
        if isinstance(data, bytes):
            sys.stdout.flush()  # text written before, if any, goes first
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(data)
            sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        raise StdoutFailed(error) from error


class QuietStderr:
    """Standard error for rich's console, where a write that fails is dropped: the message
    it carried cannot be shown anywhere, and the exit status must stay the command's own."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if self._stream is not None:
            try:
                self._stream.write(text)
                self._stream.flush()
            except (OSError, ValueError):  # full, or closed under the command
                self._to_nowhere()
        return len(text)

    def flush(self) -> None:
        if self._stream is not None:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._to_nowhere()

    def _to_nowhere(self) -> None:
        """What the stream still buffers, and what comes later, goes to /dev/null: else the
        interpreter's own flush at exit fails again and exits 120 over the command's status."""
        stream, self._stream = self._stream, None
        if stream is None:
            return
        try:
            nowhere = os.open(os.devnull, os.O_WRONLY)
        except OSError:
            return
        try:
            os.dup2(nowhere, stream.fileno())
            stream.flush()
        except (OSError, ValueError):
            pass
        finally:
            os.close(nowhere)

    @property
    def encoding(self) -> str:
        """The stream's own, so rich draws ASCII where it must (``PYTHONIOENCODING=ascii``)."""
        return getattr(self._stream, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        try:
            return self._stream is not None and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self._stream is None:
            raise OSError("standard error is closed")
        return self._stream.fileno()


def settle_stderr() -> None:
    """Flush standard error as the command ends; what cannot be written there (argparse's
    usage, which it writes itself) goes to /dev/null instead of failing the interpreter's own
    flush at exit."""
    QuietStderr(sys.stderr).flush()
