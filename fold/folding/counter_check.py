"""A fold held to the engine's own counters: leg by leg, and the gate's pooled block.

When the arm's legs carry the engine's counters, a step log's S, P and A of every leg must
equal them exactly: both count the same verify steps of the same requests, so any difference
means the log and the record describe different work (another run's log, steps attributed to
the wrong leg, a hook that counts something else). The record's ``spec_acceptance`` block is
the gate's own fold of its warm legs' counters; it must equal our warm fold (counts exactly,
ratios to ``RATIO_TOLERANCE``), whichever source our counts came from. Any disagreement is
refused, naming the leg, the field and both values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from fold.errors import RefusedError
from fold.folding.build import MAX_LEGS_NAMED
from fold.folding.leg_figures import Figures, Named
from fold.folding.result import ENGINE_TRACE, FoldResult
from fold.inputs.acceptance import TRIPLE, Counts
from fold.inputs.arm_counters import (
    BLOCK_COUNTS,
    COUNTER_FIELDS,
    BlockFigures,
    EngineCounters,
)
from fold.wording import figures_apart

RATIO_TOLERANCE = 1e-9
"""The gate computes its ratios from the same integers; beyond float rounding they are equal."""

LETTERS = {"steps": "S", "proposed": "P", "accepted": "A"}

WHAT_TO_CHECK = (
    "check that the step log comes from this run (not another run's), that each leg's label "
    "(DFLASH_STEP_LEG) names the record's leg, and that the hook sits where the engine bumps "
    "its counters (GPUModelRunner::sample_tokens_with_rejection, in the per-request loop, "
    "after the per-request count, on both sampling paths)"
)


TRACE_WHAT_TO_CHECK = (
    "check that the stderr files come from this run of the gate and that no [SPECTRACE] line "
    "was skipped (--skip-bad-lines) or lost from them"
)


def _log_name(result: FoldResult) -> str:
    return "the engine's trace" if result.step_source == ENGINE_TRACE else "the step log"


@dataclass(frozen=True, slots=True)
class CounterCheck(Figures):
    """The counter check's part of the result document: what was held to the engine's own
    counters, and how it came out (a disagreement is refused, never reported here)."""

    legs: int
    legs_with_counters: int
    legs_checked: int
    spec_acceptance: str
    """The record's pooled block, a code: ``equal`` (checked, equal to the warm fold), ``null``
    or ``absent`` (not checked); ``spec_acceptance_text`` says it in words."""
    spec_acceptance_text: str
    summary: str
    JSON_ORDER: ClassVar[tuple[str, ...]] = (
        "legs",
        "legs_with_counters",
        "legs_checked",
        "spec_acceptance",
        "spec_acceptance_text",
        "summary",
    )


def check_counters(result: FoldResult, counters: EngineCounters | None) -> CounterCheck:
    """Refuse ``result`` unless it agrees with the record's counters; return what was
    checked."""
    legs = len(result.legs)
    carried = 0 if counters is None else counters.carried
    checked = 0
    if counters is not None and result.from_log and carried:
        checked = _check_legs(result, counters)
    block_state = "absent" if counters is None else counters.block_state
    if counters is not None and counters.spec_acceptance is not None:
        _check_block(result, counters)
        block_state = "equal"
    return CounterCheck(
        legs=legs,
        legs_with_counters=carried,
        legs_checked=checked,
        spec_acceptance=block_state,
        spec_acceptance_text=_BLOCK_WORDS[block_state],
        summary=_summary(result, carried, checked, legs, block_state),
    )


_BLOCK_WORDS = {
    "equal": "equals the warm fold",
    "null": "null in the record: not checked",
    "absent": "not in the record: not checked",
}


def _summary(result: FoldResult, carried: int, checked: int, legs: int, block: str) -> str:
    """One sentence for people: what the fold was checked against, or why it was not."""
    block_text = {
        "equal": "; its spec_acceptance equals the warm fold",
        "null": "; its spec_acceptance is null, so the pooled block was not checked",
        "absent": "",
    }[block]
    if not result.from_log:
        return (
            "folded from the record's counters alone (no step log): per-leg S, P and A are "
            f"the engine's own{block_text}"
        )
    if not carried:
        return (
            "not checked against the engine's own counters: the record's legs carry none "
            f"({', '.join(COUNTER_FIELDS.values())}){block_text}"
        )
    if checked < legs:
        return (
            f"checked against the engine's own counters, leg by leg: S, P and A equal on the "
            f"{checked} legs that carry them; {legs - checked} of {legs} legs carry none"
            f"{block_text}"
        )
    return (
        f"checked against the engine's own counters, leg by leg: S, P and A equal on all "
        f"{legs} legs{block_text}"
    )


def _check_legs(result: FoldResult, counters: EngineCounters) -> int:
    """Every counted leg's S, P and A from the log against its counters; the legs checked."""
    wrong: list[tuple[int, list[str]]] = []
    checked = 0
    for figures, counts in zip(result.legs, counters.legs, strict=True):
        if counts is None:
            continue
        checked += 1
        fields = [name for name in TRIPLE if figures[name] != getattr(counts, name)]
        if fields:
            wrong.append((figures["index"], fields))
    if not wrong:
        return checked
    index, fields = wrong[0]
    figures, counts = result.legs[index], counters.legs[index]
    assert counts is not None
    apart = "; ".join(
        f"{COUNTER_FIELDS[name]} = {getattr(counts, name)} in the record, "
        f"{LETTERS[name]} = {figures[name]} in {_log_name(result)}"
        for name in fields
    )
    more = ""
    if len(wrong) > 1:
        others = ", ".join(str(i) for i, _ in wrong[1:MAX_LEGS_NAMED])
        extra = len(wrong) - MAX_LEGS_NAMED
        legs_disagree = (
            "1 more leg disagrees" if len(wrong) == 2 else f"{len(wrong) - 1} more legs disagree"
        )
        more = f" ({legs_disagree}: {others}{' and more' if extra > 0 else ''})"
    raise RefusedError(
        f"{counters.where}: {_log_name(result)} disagrees with the engine's own counters on "
        f"{counters.describe(index)}: "
        f"{apart}{more}. {_hint(result, counters, index, fields, [i for i, _ in wrong], checked)}"
    )


def _hint(
    result: FoldResult,
    counters: EngineCounters,
    index: int,
    fields: Sequence[str],
    wrong_legs: Sequence[int],
    checked: int,
) -> str:
    """What most likely explains the difference, from its pattern; else what to check."""
    figures, counts = result.legs[index], counters.legs[index]
    assert counts is not None
    if result.step_source == ENGINE_TRACE:  # no hook and no clock: the hints below do not apply
        return TRACE_WHAT_TO_CHECK[0].upper() + TRACE_WHAT_TO_CHECK[1:]
    logged = Counts(figures["steps"], figures["proposed"], figures["accepted"])
    if list(fields) == ["accepted"] and logged.accepted - counts.accepted == counts.steps:
        return (
            "The log's A exceeds the engine's by exactly S: the hook counts the bonus token "
            "as accepted. Record sampled - 1 accepted tokens per step, as the engine counts"
        )
    if list(fields) == ["steps"]:
        return (
            "P and A agree but S does not: the hook sums a forward's requests into one call "
            "(or splits one request's step). Call record() once per request per verify step "
            f"that carried a draft, where the engine counts it; {WHAT_TO_CHECK}"
        )
    # Steps attributed to the wrong leg move counts between legs: this leg's log then holds
    # another disagreeing leg's counters (legs that agree may share counts by chance: every
    # run of a greedy prompt counts alike).
    for other in wrong_legs:
        if other != index and counters.legs[other] == logged:
            return (
                "The log's counts for this leg are exactly the counters of "
                f"{counters.describe(other)}: steps were attributed to the wrong leg. Check "
                "the legs' generate windows against the log's clock, and the leg labels "
                "(DFLASH_STEP_LEG and the record's 'leg' field)"
            )
    if len(wrong_legs) == checked and checked > 1:
        return f"No leg agrees: the step log most likely comes from another run. {WHAT_TO_CHECK}"
    return WHAT_TO_CHECK[0].upper() + WHAT_TO_CHECK[1:]


def _check_block(result: FoldResult, counters: EngineCounters) -> None:
    """``spec_acceptance`` against our warm fold, and each ``per_leg`` entry against its leg."""
    block = counters.spec_acceptance
    assert block is not None
    warm = result.warm
    source = _log_name(result) if result.from_log else "the legs' counters"
    about = f"the warm fold ({source}, over the legs selected by {result.predicate!r})"
    remedy = (
        "The gate pools spec_acceptance from its warm legs' counters (run > 1): pass the "
        "gate's --warm if it differs; otherwise the block does not come from these legs "
        "(edited, or copied from another run). Take the record again"
    )
    if block.warm_legs != len(warm["legs"]):
        raise RefusedError(
            f"{counters.where}: spec_acceptance.warm_legs is {block.warm_legs} in the record, "
            f"but {about} has {len(warm['legs'])} legs. {remedy}"
        )
    problems = _figure_problems(block.pooled, warm)
    if problems:
        raise RefusedError(
            f"{counters.where}: spec_acceptance disagrees with {about}: "
            f"{'; '.join(problems)}. {remedy}"
        )
    if block.per_leg is None:
        return
    if len(block.per_leg) != len(warm["legs"]):
        raise RefusedError(
            f"{counters.where}: spec_acceptance.per_leg has {len(block.per_leg)} entries in the "
            f"record, but {about} has {len(warm['legs'])} legs. {remedy}"
        )
    for entry, index in zip(block.per_leg, warm["legs"], strict=True):
        figures = result.legs[index]
        problems = _figure_problems(entry, figures)
        if entry.run != figures["run"]:
            problems.insert(0, f"run is {entry.run} in the record, but the leg's run is "
                            f"{figures['run']}")  # fmt: skip
        if problems:
            raise RefusedError(
                f"{entry.where} (the record's figures of {counters.describe(index)}, warm leg "
                f"{warm['legs'].index(index) + 1} of {len(warm['legs'])}) disagrees with the "
                f"leg's fold from {source}: {'; '.join(problems)}. {remedy}"
            )


def _figure_problems(recorded: BlockFigures, ours: Named) -> list[str]:
    problems = []
    for name, key in BLOCK_COUNTS.items():
        value = getattr(recorded, name)
        if value != ours[name]:
            problems.append(f"{key} is {value} in the record, {LETTERS[name]} = {ours[name]} here")
    for key, formula in (("accept_rate", "A/P"), ("mean_acceptance_length", "1 + A/S")):
        value, mine = getattr(recorded, key), ours[key]
        if not _same_ratio(value, mine):
            shown, computed = figures_apart(value, mine)
            problems.append(f"{key} is {shown} in the record, {formula} = {computed} here")
    return problems


def _same_ratio(recorded: float | None, ours: float | None) -> bool:
    if recorded is None or ours is None:
        return recorded is None and ours is None
    return abs(recorded - ours) <= RATIO_TOLERANCE * max(1.0, abs(ours))
