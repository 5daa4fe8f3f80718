"""What an oracle with legs hands the bootstrap (:class:`fold.inputs.leg_sums.Leg`): per leg (a
gate leg or one response), the counts its figures sum and the tok/s its median takes.

A count goes in only when every leg has it, as the pooled figure takes it only then; an input
known only by its totals has no legs, and its row says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fold.inputs.acceptance import TRIPLE
from fold.inputs.leg_sums import Leg
from fold.inputs.oracles.source import Record, tok_s_field

LegCounts = Mapping[str, int | None]
"""One leg's ``steps`` (S), ``proposed`` (P), ``accepted`` (A) and ``completion_tokens``."""


def leg_tok_s(records: Sequence[Record]) -> list[float | None]:
    """Each record's tok/s field (as the oracle's median reads it), None where absent."""
    return [tok_s_field(record, where)[0] for record, where in records]


def oracle_legs(
    tok_s: Sequence[float | None],
    counts: Sequence[LegCounts] | None = None,
    accept_lengths: Sequence[float] | None = None,
) -> tuple[Leg, ...] | None:
    """The bootstrap's legs; None when there is nothing to resample (no speed, no counts).

    ``accept_lengths`` are given when the arm's SGLang-unit figure is their plain mean (no
    counts to weight them): each leg then weighs 1 in the ratio of sums the bootstrap takes,
    which is that mean.
    """
    counts = counts if counts is not None else [{} for _ in tok_s]
    complete = [
        column for column in TRIPLE if counts and all(leg.get(column) is not None for leg in counts)
    ]
    # completion tokens per step is a ratio of the legs' sums over legs with a verify step
    per_step = bool(counts) and all(
        leg.get("steps") is not None and leg.get("completion_tokens") is not None for leg in counts
    )
    values: list[dict[str, float]] = [{} for _ in tok_s]
    if per_step:
        values = [
            {"completion_tokens": _known(leg["completion_tokens"]), "steps": _known(leg["steps"])}
            for leg in counts
        ]
    elif accept_lengths is not None:
        values = [{"completion_tokens": length, "steps": 1} for length in accept_lengths]
    legs = tuple(
        Leg(
            requests={column: [_known(leg[column])] for column in complete},
            values=value,
            tok_s=speed,
        )
        for speed, leg, value in zip(tok_s, counts, values, strict=True)
    )
    if not legs or not (complete or any(values) or any(s is not None for s in tok_s)):
        return None
    return legs


def _known(count: int | None) -> int:
    # `complete` names only the columns every leg carries, so None cannot reach here
    assert count is not None
    return count
