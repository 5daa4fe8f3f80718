"""``Counts``: the one type that carries S, P and A and their two ratios.

Expectations come from the definitions (A/P; 1 + A/S; a pool is a ratio of sums) worked by
hand or by a plain loop, never from the type itself. A guard holds every figure of the fold,
the comparison and the live view to it: a class that declares all three counts is a second
home for them.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fold.folding.leg_figures import COUNT_NAMES, LEG_JSON, POOLED_JSON
from fold.folding.windows import window_pools, windows_from_bins
from fold.inputs.acceptance import CountColumns, Counts
from fold.present.output import dumps

ROOT = Path(__file__).resolve().parent.parent

counts = st.builds(
    Counts,
    st.integers(0, 10**6),
    st.integers(0, 10**7),
    st.integers(0, 10**7),
)


def test_the_ratios_by_hand():
    found = Counts(steps=4, proposed=12, accepted=7)
    assert found.accept_rate == 7 / 12
    assert found.mean_acceptance_length == 1 + 7 / 4 == 2.75
    assert (found["steps"], found["proposed"], found["accepted"]) == (4, 12, 7)
    assert found["accept_rate"] == 7 / 12
    assert found.to_json() == {"steps": 4, "proposed": 12, "accepted": 7, "accept_rate": 7 / 12}
    # read by name it is its JSON, a read-only mapping (as a window was before it)
    assert dict(found) == found.to_json()
    assert list(found) == ["steps", "proposed", "accepted", "accept_rate"]
    assert "steps" in found and "mean_acceptance_length" not in found and len(found) == 4
    assert found.get("accept_rate") == 7 / 12 and found.get("lines") is None
    for name in ("lines", "mean_acceptance_length"):
        with pytest.raises(KeyError):
            found[name]


def test_no_steps_and_no_drafts_have_no_ratio():
    assert Counts(0, 0, 0).accept_rate is None
    assert Counts(0, 0, 0).mean_acceptance_length is None
    # steps that drafted nothing: a tokens-per-step of 1, but no acceptance rate
    assert Counts(3, 0, 0).accept_rate is None
    assert Counts(3, 0, 0).mean_acceptance_length == 1.0


def test_counts_cannot_be_changed():
    found = Counts(1, 2, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.steps = 5  # type: ignore[misc]


@given(st.lists(counts, max_size=12))
def test_a_total_is_the_sum_of_its_parts(parts):
    steps = proposed = accepted = 0
    for part in parts:
        steps, proposed, accepted = (
            steps + part.steps,
            proposed + part.proposed,
            accepted + part.accepted,
        )
    total = Counts.total(parts)
    assert (total.steps, total.proposed, total.accepted) == (steps, proposed, accepted)
    # a pooled rate is the ratio of the sums, whatever the parts' own rates are
    if proposed:
        assert total.accept_rate == pytest.approx(float(Fraction(accepted, proposed)))
    if steps:
        assert total.mean_acceptance_length == pytest.approx(1 + accepted / steps)


# A bin's steps each drafted at least one token: no drafts without a step.
leg_bins = st.lists(
    st.tuples(st.integers(0, 50), st.integers(0, 8), st.integers(0, 8)).map(
        lambda b: (b[0], b[0] * b[1], b[0] * min(b[1], b[2]))
    )
)


@given(leg_bins, st.integers(1, 40))
def test_windows_and_their_pools_read_alike_from_json(bins, window_steps):
    windows = windows_from_bins(bins, window_steps)
    # the windows keep every count of the bins
    sums = [sum(column) for column in zip(*bins, strict=True)] if bins else [0, 0, 0]
    assert Counts.total(windows) == Counts(*sums)
    written = json.loads(dumps(windows))
    read_back = CountColumns(written["steps"], written["proposed"], written["accepted"])
    assert read_back == windows
    for most in (1, 3, 10):
        pools = window_pools(windows, most)
        assert pools == window_pools(read_back, most)
        assert Counts.total(pools) == Counts.total(windows)
        assert len(pools) == min(most, len(windows))


@given(st.lists(counts, max_size=12), st.integers(-14, 14), st.integers(-14, 14))
def test_counts_by_column_read_as_the_parts_and_write_an_array_per_figure(parts, a, b):
    held = CountColumns.of(iter(parts))  # any iterable, read once
    assert len(held) == len(parts)
    assert list(held) == parts
    assert [held[i] for i in range(-len(parts), len(parts))] == parts + parts
    assert list(held[a:b]) == parts[a:b] and isinstance(held[a:b], CountColumns)
    assert list(held[::2]) == parts[::2] and list(held[::-1]) == parts[::-1]
    assert held[a:b:3] == tuple(parts[a:b:3]) == held[a:b:3]
    # equal to the same Counts in a tuple or a list, hashed alike, and to nothing else
    assert held == tuple(parts) and tuple(parts) == held and held == list(parts)
    assert hash(held) == hash(tuple(parts))
    assert held != (*parts, Counts(1, 1, 1)) and held != "steps"
    with pytest.raises(IndexError):
        held[len(parts)]
    # the JSON: an array per figure, part i at index i of each, A/P by the definition
    written = json.loads(dumps({"windows": held}))["windows"]
    assert written == {
        "steps": [part.steps for part in parts],
        "proposed": [part.proposed for part in parts],
        "accepted": [part.accepted for part in parts],
        "accept_rate": [
            float(Fraction(part.accepted, part.proposed)) if part.proposed else None
            for part in parts
        ],
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        held.steps = ()  # type: ignore[misc]


def test_counts_by_column_are_tuples_of_one_length():
    held = CountColumns([1, 2], [4, 8], [0, 3])  # lists handed in are held as tuples
    assert (held.steps, held.proposed, held.accepted) == ((1, 2), (4, 8), (0, 3))
    with pytest.raises(ValueError, match="differ in length"):
        CountColumns((1, 2), (4,), (0, 3))


def test_the_json_keeps_the_counts_where_they_were():
    """The figures hold one ``Counts``; their JSON keeps the five names in the place the
    format has them."""
    for order in (LEG_JSON, POOLED_JSON):
        assert "counts" not in order
        at = order.index("steps")
        assert order[at : at + len(COUNT_NAMES)] == COUNT_NAMES


# ----------------------------------------------------------------------------------------------
# The guard: one home for a count triple
# ----------------------------------------------------------------------------------------------

RECORDED_AS_GIVEN = {
    ("fold/inputs/arm_counters.py", "BlockFigures"): (
        "the gate's spec_acceptance block as written: its ratios are the gate's, checked "
        "against the counts, not made from them"
    ),
    ("fold/inputs/oracles/figures.py", "ArmFigures"): (
        "an oracle's figures as it recorded them: any count may be missing (None) and a ratio "
        "may come printed without the counts"
    ),
    ("fold/inputs/oracles/printed.py", "PrintedSums"): (
        "sums of printed lines, where S is known only when every printed length pins it (None)"
    ),
    ("fold/inputs/oracles/request_steps.py", "OracleRequest"): (
        "an engine's request as it recorded it: its accepted is the per-step list"
    ),
}


def triple_classes(source: str) -> list[str]:
    """Classes of ``source`` that declare ``steps``, ``proposed`` and ``accepted`` fields."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        declared = {
            statement.target.id
            for statement in node.body
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
        }
        if {"steps", "proposed", "accepted"} <= declared:
            found.append(node.name)
    return found


def test_no_figure_declares_the_counts_again():
    seconds = []
    for path in sorted((ROOT / "fold").rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        for name in triple_classes(path.read_text()):
            if where == "fold/inputs/acceptance.py" and name in ("Counts", "CountColumns"):
                continue  # the one home, and the same counts held by column (items: Counts)
            if (where, name) not in RECORDED_AS_GIVEN:
                seconds.append(f"{where}: {name}")
    assert seconds == [], "hold a Counts instead of declaring S, P and A again"


def test_the_guard_finds_a_planted_second_home():
    planted = (
        "from dataclasses import dataclass\n"
        "@dataclass(frozen=True)\n"
        "class Slice:\n"
        "    steps: int\n"
        "    accepted: int\n"
        "    proposed: int\n"
        "    accept_rate: float | None\n"
    )
    assert triple_classes(planted) == ["Slice"]
    assert triple_classes(planted.replace("    proposed: int\n", "")) == []
    assert triple_classes("class Held:\n    counts: Counts\n") == []


def test_every_allowed_class_still_exists():
    for (where, name), _reason in RECORDED_AS_GIVEN.items():
        assert name in triple_classes((ROOT / where).read_text()), (where, name)
