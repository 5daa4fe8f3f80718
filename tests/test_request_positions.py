"""Each request's steps by draft position (``fold.folding.request_positions``), the sums file's
``accepted_past`` and ``proposed_past``: by hand, against a loop over the steps written from
the definition, and through the library with and without asking for them."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from fold.api import fold_acceptance
from fold.folding.accumulate import SCHEMAS, PartialFold
from fold.folding.line_rows import draft_counts
from fold.folding.packed_tokens import TOKEN_BITS
from fold.folding.request_positions import POSITION_LISTS, request_positions
from fold.folding.step_intervals import encode

REQUEST_SCHEMA = {name: SCHEMAS["step_times"][name] for name in ("leg", "w", "seq", "sid")}

ROOT = Path(__file__).resolve().parents[1]


def packed(proposed: int, accepted: int, emitted: int | None = None) -> int:
    """A line's counts as ``fold.folding.packed_tokens.packed_tokens`` packs them."""
    return proposed + (accepted << TOKEN_BITS) + ((0 if emitted is None else emitted + 1) << 34)


def positions(requests: list[list[tuple[int, int]]]) -> pl.DataFrame:
    """``request_positions`` of requests held by the polars reference: request r (writer "w",
    seq r, leg r % 2) with the (proposed, accepted) of its lines, counted by ``draft_counts``."""
    step_times = encode(
        pl.DataFrame(
            {
                "leg": [r % 2 for r in range(len(requests))],
                "w": ["w"] * len(requests),
                "seq": list(range(len(requests))),
                "sid": [None] * len(requests),
                "t_ns": [list(range(len(lines))) for lines in requests],
            },
            schema={**REQUEST_SCHEMA, "t_ns": pl.List(pl.Int64)},
        )
    )
    held = pl.DataFrame(
        {
            "request": list(range(len(requests))),
            "t_ns": [list(range(len(lines))) for lines in requests],
            "tokens": [[packed(p, a, a + 1) for p, a in lines] for lines in requests],
        },
        schema=SCHEMAS["held_lines"],
    )
    partial = PartialFold(step_times=step_times, held_lines=held)
    return request_positions(step_times, draft_counts(partial))


def test_by_hand():
    # steps (3, 1), (3, 3), (2, 0): accepted past 0 by 2 of them, past 1 and 2 by one (the 3);
    # proposed past 0 and 1 by all three, past 2 by the two that proposed 3
    found = positions([[(3, 1), (3, 3), (2, 0)], [(0, 0)], []])
    assert found["accepted_past"].to_list() == [[2, 1, 1], [], []]
    assert found["proposed_past"].to_list() == [[3, 3, 2], [], []]
    assert found.select("leg", "w", "seq").rows() == [(0, "w", 0), (1, "w", 1), (0, "w", 2)]


def by_definition(lines: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    longest = max((p for p, _ in lines), default=0)
    return (
        [sum(1 for _, a in lines if a > i) for i in range(longest)],
        [sum(1 for p, _ in lines if p > i) for i in range(longest)],
    )


steps = st.integers(0, 9).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p)))


@given(st.lists(st.lists(steps, max_size=12), max_size=8))
def test_each_request_against_the_definition(requests):
    found = positions(requests)
    assert found["seq"].to_list() == list(range(len(requests)))
    for lines, accepted_past, proposed_past in zip(
        requests, found["accepted_past"].to_list(), found["proposed_past"].to_list(), strict=True
    ):
        assert (accepted_past, proposed_past) == by_definition(lines)
        # each step counts once at every position below its count: the lists sum to A and P
        assert sum(accepted_past) == sum(a for _, a in lines)
        assert sum(proposed_past) == sum(p for p, _ in lines)


def test_only_a_fold_asked_for_them_makes_them():
    arm, log = ROOT / "fixtures" / "our-arm.json", str(ROOT / "fixtures" / "steps.jsonl")
    plain = fold_acceptance(arm, [log], resamples=0).fold.sums_table()
    asked = fold_acceptance(arm, [log], resamples=0, sums=True).fold.sums_table()
    assert plain is not None and asked is not None
    for name in POSITION_LISTS:
        assert plain[name].null_count() == plain.height
        assert asked[name].null_count() == 0
    # every other column is the same
    assert plain.drop(*POSITION_LISTS).equals(asked.drop(*POSITION_LISTS))
    assert (asked["accepted_past"].list.sum() == asked["accepted"]).all()
    assert (asked["proposed_past"].list.sum() == asked["proposed"]).all()
