"""The result document: the parts each stage built, composed once, and its JSON.

The fold builds its part (``fold.folding.result.FoldResult``), the counter check its own
(``fold.folding.counter_check.CounterCheck``), the comparison its own with the speed split and
the runs of ours inside it (``fold.compare.comparison.Comparison``). A document holds them
side by side and changes none: ``with_comparison`` makes a new document. ``to_json`` is the
documented machine-readable form (``docs/document.md``, schema in
``docs/fold-acceptance-5.schema.json``).

It lives in the fold's stage, not the comparison's, so the fold can hand back a document of its
own; the comparison is held by what it promises (``ComparisonPart``), not by its type.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from fold.folding.counter_check import CounterCheck
from fold.folding.host_sums import SumsFile
from fold.folding.leg_figures import LegFigures, PooledFigures, plain
from fold.folding.result import JSON_FORMAT, FoldResult


class MatchedPart(Protocol):
    """What a document needs of the matched setting (``fold.compare.matched.Matched``)."""

    def to_json(self) -> dict[str, Any]:
        """The ``matched`` block: a setting per engine."""
        ...


class ComparisonPart(Protocol):
    """What a document needs of the comparison stage's part."""

    def to_json(self) -> dict[str, Any]:
        """The ``comparison`` block: rows, gaps, step_rate_check, speed."""
        ...

    def runs_json(self) -> dict[str, Any] | None:
        """The ``runs`` block (other runs of ours), or None when there are none."""
        ...


@dataclass(frozen=True, slots=True)
class Document:
    """One fold's result document. ``legs``, ``warm``, ``all`` and ``to_json`` are the
    library's API; the fold's other figures are read through ``fold``."""

    fold: FoldResult
    counter_check: CounterCheck
    comparison: ComparisonPart | None = None
    matched: MatchedPart | None = None
    sums: SumsFile | None = field(default=None, compare=False, repr=False)
    """The sums file (``--sums``), when the fold was asked for it: made from the fold's partial
    before the figures, not from this document (``fold.folding.host_sums``)."""

    @property
    def legs(self) -> tuple[LegFigures, ...]:
        return self.fold.legs

    @property
    def warm(self) -> PooledFigures:
        return self.fold.warm

    @property
    def all(self) -> PooledFigures:
        return self.fold.all

    def with_comparison(self, comparison: ComparisonPart) -> Document:
        """This document with the comparison's part beside the fold's (a new document)."""
        return replace(self, comparison=comparison)

    def with_matched(self, matched: MatchedPart) -> Document:
        """This document with the matched setting beside the fold's (a new document)."""
        return replace(self, matched=matched)

    def to_json(self) -> dict[str, Any]:
        """The JSON form ``--json`` writes (``docs/fold-acceptance-5.schema.json``): plain
        dicts, lists and numbers, which every presenter reads."""
        # The fold's part is plain already (its per-request records are most of a large
        # document): only the parts built of read-only views are made plain here.
        document = {"format": JSON_FORMAT, **self.fold.to_json()}
        document["counter_check"] = plain(self.counter_check.to_json())
        if self.comparison is not None:
            document["comparison"] = plain(self.comparison.to_json())
            runs = self.comparison.runs_json()
            if runs is not None:
                document["runs"] = plain(runs)
        if self.matched is not None:
            document["matched"] = plain(self.matched.to_json())
        return document
