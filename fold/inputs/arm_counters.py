"""The engine's own acceptance counters in an arm record: per leg, and the pooled block.

vllm.cpp's gate writes, on every leg, the deltas of the engine's cumulative counters read just
before and after the leg (``spec_drafted_request_steps`` = S, ``spec_drafts_proposed`` = P,
``spec_drafts_accepted`` = A), and a ``spec_acceptance`` block pooled over its warm legs
(``null`` when no leg carries counters). A leg carries all three or none: the gate refuses a
partial set, so one here was edited or cut. Read here, checked for being counts at all; whether
they agree with a step log or with the block is the fold's business
(``fold.folding.counter_check``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fold.errors import RefusedError
from fold.inputs import limits
from fold.inputs.acceptance import Counts

COUNTER_FIELDS = {
    "steps": "spec_drafted_request_steps",
    "proposed": "spec_drafts_proposed",
    "accepted": "spec_drafts_accepted",
}
"""Our name of each count (S, P, A) and the leg field the gate writes it to."""

# spec_acceptance's own names for the same counts, and its two ratios.
BLOCK_COUNTS = {
    "steps": "drafted_request_steps",
    "proposed": "drafts_proposed",
    "accepted": "drafts_accepted",
}
BLOCK_RATIOS = ("accept_rate", "mean_acceptance_length")

TAKE_AGAIN = "take the record again from the gate"

PROMPT_SHOWN = 40
"""Characters of a prompt's text shown when a message names the prompt a leg ran."""


@dataclass(frozen=True)
class BlockFigures:
    """One set of ``spec_acceptance`` figures: the pooled block, or one ``per_leg`` entry."""

    steps: int
    proposed: int
    accepted: int
    accept_rate: float | None
    mean_acceptance_length: float | None
    run: int | None = None
    where: str = "spec_acceptance"


@dataclass(frozen=True)
class RecordedAcceptance:
    """``spec_acceptance`` as the gate wrote it."""

    warm_legs: int
    pooled: BlockFigures
    per_leg: tuple[BlockFigures, ...] | None


@dataclass(frozen=True)
class LegNames:
    """How a message names a leg: its index, its run and, when it can be told, its prompt."""

    runs: tuple[int, ...]
    prompts: tuple[str, ...] | None
    repeat: int | None
    """``workload.repeat`` when every leg's run is ``index % repeat + 1`` (one process per
    prompt, runs restarting at 1), so a leg's prompt is ``index // repeat``; else None."""

    def describe(self, index: int) -> str:
        """``leg 7 (run 3 of prompt 1, "Explain the difference between a list an…")``."""
        run = self.runs[index]
        if self.repeat is None:
            return f"leg {index} (run {run})"
        prompt = index // self.repeat
        text = ""
        if self.prompts is not None and prompt < len(self.prompts):
            shown = " ".join(self.prompts[prompt].split())
            if len(shown) > PROMPT_SHOWN:
                shown = shown[: PROMPT_SHOWN - 1] + "…"
            text = f', "{shown}"'
        return f"leg {index} (run {run} of prompt {prompt}{text})"


@dataclass(frozen=True)
class EngineCounters:
    """What the record says of acceptance by itself.

    ``legs[i]`` is leg i's counts, or None when it carries none. ``spec_acceptance`` is the
    block, None when the record has it null or lacks it (``block_state`` says which).
    """

    legs: tuple[Counts | None, ...]
    spec_acceptance: RecordedAcceptance | None
    block_state: str
    """``recorded``, ``null`` (the key is there, its value null) or ``absent``."""
    names: LegNames
    where: str = "<arm record>"
    """The record's path, for messages."""

    @property
    def carried(self) -> int:
        """How many legs carry the three counters."""
        return sum(counts is not None for counts in self.legs)

    @property
    def every_leg(self) -> bool:
        return self.carried == len(self.legs)

    def describe(self, index: int) -> str:
        return self.names.describe(index)


def read_counters(
    legs: Sequence[Mapping[str, Any]], top: Mapping[str, Any], where: str
) -> EngineCounters:
    """The counters of a record's legs (already checked to be objects with a ``run``) and its
    ``spec_acceptance`` block; ``top`` is the record's top level (empty for a bare list).

    InputError for a value that is not a count; RefusedError for a leg with some but not all
    three counters, or counts no engine could have counted."""
    runs = tuple(int(leg["run"]) for leg in legs)
    prompts = top.get("prompts")
    names = LegNames(
        runs,
        (
            tuple(prompts)
            if isinstance(prompts, list) and all(isinstance(p, str) for p in prompts)
            else None
        ),
        _repeat(top, runs, where),
    )
    counts = tuple(_leg_counts(leg, index, where, names) for index, leg in enumerate(legs))
    # Each fold sums a counter over legs (all of them, in the all-legs fold): the record is
    # refused when a sum has no 64-bit value, at the leg that takes it past.
    limits.check_sums(
        (
            (f"{where}: {names.describe(index)}", f"'{field_name}'", getattr(leg_counts, ours))
            for index, leg_counts in enumerate(counts)
            if leg_counts is not None
            for ours, field_name in COUNTER_FIELDS.items()
        ),
        TAKE_AGAIN,
    )
    state = "absent"
    block = None
    if "spec_acceptance" in top:
        raw = top["spec_acceptance"]
        state = "null" if raw is None else "recorded"
        if raw is not None:
            block = _block(raw, where)
    return EngineCounters(counts, block, state, names, where)


def _repeat(top: Mapping[str, Any], runs: tuple[int, ...], where: str) -> int | None:
    workload = top.get("workload")
    repeat = workload.get("repeat") if isinstance(workload, Mapping) else None
    if repeat is None:
        return None
    # a count when given ("5" or 5.0 would silently fall back to splitting at run 1)
    repeat = limits.count(where, "workload.repeat", repeat, TAKE_AGAIN)
    if repeat < 1:
        return None
    if any(run != index % repeat + 1 for index, run in enumerate(runs)):
        return None
    return repeat


def _leg_counts(leg: Mapping[str, Any], index: int, where: str, names: LegNames) -> Counts | None:
    present = {ours: leg[field] for ours, field in COUNTER_FIELDS.items() if field in leg}
    if not present:
        return None
    if len(present) < len(COUNTER_FIELDS):
        missing = [field for ours, field in COUNTER_FIELDS.items() if ours not in present]
        carried = [COUNTER_FIELDS[ours] for ours in present]
        raise RefusedError(
            f"{where}: {names.describe(index)} carries {', '.join(carried)} but not "
            f"{', '.join(missing)}: the engine's gate writes all three counters on a leg or "
            "none, so this record was edited or cut. Take the record again from the gate"
        )
    place = f"{where}: {names.describe(index)}"
    for ours, value in present.items():
        limits.count(place, f"'{COUNTER_FIELDS[ours]}'", value, TAKE_AGAIN)
    counts = Counts(**present)
    limits.check_accepted(
        place,
        ((f"'{COUNTER_FIELDS['proposed']}'", counts.proposed),
         (f"'{COUNTER_FIELDS['accepted']}'", counts.accepted)),
        _NOT_AROUND_THE_LEG,
    )  # fmt: skip
    problem = impossible(counts.steps, counts.proposed)
    if problem:
        raise RefusedError(f"{place}: {problem}; {_NOT_AROUND_THE_LEG}")
    return counts


_NOT_AROUND_THE_LEG = "the counters were not read around this leg alone (take the record again)"


def impossible(steps: int, proposed: int) -> str | None:
    """Why S and P cannot come from one engine's counting, or None when they can (A against P
    is the step's rule, ``fold.inputs.limits.check_accepted``)."""
    if proposed < steps:
        return (
            f"spec_drafts_proposed = {proposed} is less than spec_drafted_request_steps = "
            f"{steps}: every counted step carries at least one draft token"
        )
    if steps == 0 and proposed:
        return (
            f"spec_drafted_request_steps = 0 but spec_drafts_proposed = {proposed}: draft "
            "tokens without a drafted step"
        )
    return None


def _block(raw: Any, where: str) -> RecordedAcceptance:
    place = f"{where}: spec_acceptance"
    if not isinstance(raw, Mapping):
        raise limits.WrongKind(where, "spec_acceptance", raw, "an object or null", TAKE_AGAIN)
    warm_legs = limits.count(place, "warm_legs", raw.get("warm_legs"), TAKE_AGAIN)
    per_leg_raw = raw.get("per_leg")
    per_leg = None
    if per_leg_raw is not None:
        if not isinstance(per_leg_raw, list):
            raise limits.WrongKind(place, "per_leg", per_leg_raw, "a list", TAKE_AGAIN)
        per_leg = tuple(
            _figures(entry, f"{place}.per_leg[{position}]", with_run=True)
            for position, entry in enumerate(per_leg_raw)
        )
    return RecordedAcceptance(warm_legs, _figures(raw, place, with_run=False), per_leg)


def _figures(raw: Any, place: str, *, with_run: bool) -> BlockFigures:
    if not isinstance(raw, Mapping):
        raise limits.WrongKind(place, "", raw, "an object", TAKE_AGAIN)
    counts: dict[str, int] = {}
    for ours, key in BLOCK_COUNTS.items():
        counts[ours] = limits.count(place, key, raw.get(key), TAKE_AGAIN)
    ratios: dict[str, float | None] = {}
    for key in BLOCK_RATIOS:
        value = raw.get(key)
        ratios[key] = None if value is None else limits.finite_number(place, key, value, TAKE_AGAIN)
    run = raw.get("run") if with_run else None
    if with_run:
        run = limits.run(place, "run", run, "give the leg's run (1 is the cold one)")
    return BlockFigures(
        counts["steps"], counts["proposed"], counts["accepted"], ratios["accept_rate"],
        ratios["mean_acceptance_length"], run=run, where=place,
    )  # fmt: skip
