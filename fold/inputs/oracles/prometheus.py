"""Prometheus text exposition, as ``/metrics`` serves it: one scrape, or two concatenated.

Hand-written rather than ``prometheus_client.parser``: that parser hands back floats, while
llama.cpp's six-significant-digit rounding can only be judged from the digits as written
(``1.24938e+06``); its errors are bare ValueErrors without a line number; and the scrape
boundary of ``cat before after`` would still have to be found by hand. Comments are used here to
find that boundary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fold.errors import InputError
from fold.inputs import limits

Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]


@dataclass(frozen=True)
class Sample:
    value: float
    text: str  # the value as written, e.g. "1.24938e+06"
    line: int


@dataclass
class Scrape:
    """One scrape: (metric name, sorted labels) -> sample, in file order."""

    samples: dict[SeriesKey, Sample] = field(default_factory=dict)
    first_line: int = 0

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}


_SAMPLE_RE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)"
    r'(?:\{(?P<labels>(?:[^}"]|"(?:[^"\\]|\\.)*")*)\})?'
    r"\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$"
)
_COMMENT_RE = re.compile(r"^#\s*(HELP|TYPE)\s+(\S+)")
_LABEL_RE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_VALUE_WORDS = {
    "+inf": float("inf"),
    "-inf": float("-inf"),
    "inf": float("inf"),
    "nan": float("nan"),
}


def looks_like_scrape(text: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a sample or HELP/TYPE line of a metric under one of ``prefixes`` is present."""
    for line in text.splitlines():
        line = line.strip()
        comment = _COMMENT_RE.match(line)
        name = comment.group(2) if comment else line.split("{", 1)[0].split(" ", 1)[0]
        if name.startswith(prefixes):
            return True
    return False


def parse_scrapes(text: str, *, where: str = "<input>", most: int = 2) -> list[Scrape]:
    """The scrapes in ``text``, in order (``cat before.prom after.prom`` gives two).

    A new scrape starts where a series, or a HELP/TYPE line for a metric, that the current
    scrape already holds appears again. More than ``most`` scrapes is an InputError: which pair
    is the run's would be a guess.
    """
    scrapes: list[Scrape] = []
    current: Scrape | None = None
    described: set[tuple[str, str]] = set()

    def start(lineno: int) -> Scrape:
        nonlocal described
        described = set()
        scrape = Scrape(first_line=lineno)
        scrapes.append(scrape)
        if len(scrapes) > most:
            raise InputError(
                f"{where}:{lineno}: scrape {len(scrapes)} starts here; give one scrape, or two "
                "(before and after the run)"
            )
        return scrape

    for lineno, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line:
            continue
        if line.startswith("#"):
            comment = _COMMENT_RE.match(line)
            if comment:
                key = (comment.group(1), comment.group(2))
                if current is None or key in described:
                    current = start(lineno)
                described.add(key)
            continue
        match = _SAMPLE_RE.match(line)
        if match is None and " # " in line:  # an OpenMetrics exemplar after the value
            match = _SAMPLE_RE.match(line.split(" # ", 1)[0].rstrip())
        if match is None:
            raise InputError(
                f"{where}:{lineno}: not a Prometheus text exposition line: {line[:60]!r}; give "
                "the /metrics scrape as served"
            )
        name = match["name"]
        labels = _parse_labels(match["labels"] or "", f"{where}:{lineno}")
        text_value = match["value"]
        try:
            value = _VALUE_WORDS.get(text_value.lower())
            if value is None:
                if not limits.is_printed_number(text_value):
                    raise ValueError(text_value)
                value = float(text_value)
        except ValueError:
            fix = "give the /metrics scrape as served"
            raise limits.WrongKind(
                f"{where}:{lineno}", name, None, "a finite number", fix, written=text_value
            ) from None
        key = (name, labels)
        if current is None or key in current.samples:
            current = start(lineno)
        current.samples[key] = Sample(value, text_value, lineno)
    if not scrapes:
        raise InputError(f"{where}: no Prometheus samples; give the /metrics scrape as served")
    return scrapes


def _parse_labels(text: str, where: str) -> Labels:
    labels = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _LABEL_RE.match(text, pos)
        if match is None:
            raise InputError(f"{where}: cannot read the labels {{{text}}}")
        value = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], match.group(2))
        labels.append((match.group(1), value))
        pos = match.end()
    return tuple(sorted(labels))
