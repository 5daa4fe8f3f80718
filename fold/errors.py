"""The two ways a fold can fail, each with the exit code the command documents."""

from __future__ import annotations


class FoldError(Exception):
    """Base of the errors the library raises; ``exit_code`` is what the command exits with."""

    exit_code = 2


class InputError(FoldError):
    """An input is unreadable or malformed (exit 2): fix the file or the command line."""

    exit_code = 2


class RefusedError(FoldError):
    """The inputs parse but disagree with each other (exit 1): a number would be wrong."""

    exit_code = 1


def placed(error: FoldError, where: str) -> FoldError:
    """``error`` with ``where`` before its words, of the same kind (so the same exit code): a
    subclass that carries parts of its own (``limits.OutOfRange``) is raised as its kind."""
    kind: type[FoldError] = FoldError
    for known in (InputError, RefusedError):
        if isinstance(error, known):
            kind = known
    return kind(f"{where}: {error}")
