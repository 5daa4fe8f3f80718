"""Oracle arms (vLLM, SGLang, llama.cpp) read as the engines write them, into one unit.

``load_oracle(name, path)`` reads a file, tells the engine from its content
(:mod:`fold.oracles.detect`), and hands it to that engine's module (:mod:`fold.oracles.registry`),
which returns :class:`ArmFigures`: the figures, where each came from, and the population its
counters cover. The accepted inputs are listed in ``docs/oracles.md``. Nothing here prints.
"""

from __future__ import annotations

import os
import re

from fold.errors import InputError
from fold.oracles.detect import detect, normalize_kind
from fold.oracles.figures import (
    ALL_LEGS,
    INTERVAL,
    LAST_INTERVAL,
    OURS_KIND,
    POPULATIONS,
    REQUESTS,
    SINCE_START,
    WARM_LEGS,
    ArmFigures,
    arm_from_counts,
)
from fold.oracles.prometheus import parse_scrapes
from fold.oracles.registry import ENGINES, KINDS
from fold.oracles.source import load_document, parse_document

__all__ = [
    "ALL_LEGS",
    "INTERVAL",
    "KINDS",
    "LAST_INTERVAL",
    "OURS_KIND",
    "POPULATIONS",
    "REQUESTS",
    "SINCE_START",
    "WARM_LEGS",
    "ArmFigures",
    "arm_from_counts",
    "detect_kind",
    "load_oracle",
    "normalize_kind",
    "parse_scrapes",
    "parse_vs_spec",
    "read_oracle",
]

_NAME_RE = re.compile(r"[^\s:=]+")


def parse_vs_spec(text: str) -> tuple[str, str | None, str]:
    """Split ``NAME=PATH`` or ``NAME:KIND=PATH`` into ``(name, kind or None, path)``.

    The split is at the first ``=``, so the path may itself hold ``=`` or ``:``.
    """
    where = f"--vs {text!r}"
    head, sep, path = text.partition("=")
    if not sep or not path:
        raise InputError(f"{where}: expected NAME=PATH or NAME:KIND=PATH, e.g. vllm=vllm-arm.json")
    name, colon, kind_text = head.partition(":")
    if not _NAME_RE.fullmatch(name):
        raise InputError(
            f"{where}: the arm name {name!r} must be non-empty without spaces, ':' or '='"
        )
    kind = normalize_kind(kind_text, where=where) if colon else None
    return name, kind, path


def load_oracle(name: str, path: str | os.PathLike[str], kind: str | None = None) -> ArmFigures:
    """Read one oracle arm from ``path``; the kind is detected from the content unless given."""
    doc = load_document(path)
    return ENGINES[detect(doc, kind)].read(name, doc)


def read_oracle(
    name: str, text: str, kind: str | None = None, *, where: str = "<input>"
) -> ArmFigures:
    """Like :func:`load_oracle`, from the text of the file."""
    doc = parse_document(text, where)
    return ENGINES[detect(doc, kind)].read(name, doc)


def detect_kind(text: str, *, where: str = "<input>") -> str:
    """The engine kind a file's content shows: ``vllm``, ``sglang`` or ``llamacpp``."""
    return detect(parse_document(text, where))
