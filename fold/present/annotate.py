"""A copy of the arm record with each leg's acceptance and an ``acceptance`` block added
(``--annotate``), written through the one JSON writer (``fold.present.output``)."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from fold.errors import InputError
from fold.folding.document import Document
from fold.folding.leg_figures import Named, plain
from fold.folding.result import JSON_FORMAT
from fold.inputs.arm import ArmRecord
from fold.present.output import dumps, write_atomically

LEG_FIELDS = (
    "steps",
    "proposed",
    "accepted",
    "accept_rate",
    "mean_acceptance_length",
    "completion_tokens_per_step",
    "step_rate",
    "per_position",
    "per_position_conditional",
    "per_position_of_proposed",
    "histogram",
    "flags",
    "cadence",
)
POOLED_FIELDS = (
    "legs",
    "steps",
    "proposed",
    "accepted",
    "accept_rate",
    "mean_acceptance_length",
    "completion_tokens_per_step",
    "output_throughput_tok_s",
    "per_position",
    "per_position_conditional",
    "per_position_of_proposed",
    "histogram",
    "cadence",
)


def annotated_record(arm: ArmRecord, result: Document) -> Any:
    """A copy of the arm record with each leg's acceptance and an ``acceptance`` block added.

    A record given as a bare list of legs becomes ``{"legs": [...], "acceptance": {...}}``,
    since a list has nowhere to put the block.
    """
    fold = result.fold
    document = copy.deepcopy(arm.document)
    if isinstance(document, list):
        document = {"legs": document}
    for leg, figures in zip(document["legs"], fold.legs, strict=True):
        leg["acceptance"] = {name: plain(figures[name]) for name in LEG_FIELDS}
    document["acceptance"] = {
        "format": JSON_FORMAT,
        "predicate": fold.predicate,
        "stall_factor": fold.stall_factor,
        "warm": _with_intervals(fold.warm),
        "all": _with_intervals(fold.all),
        "unattributed_steps": fold.unattributed_steps,
        "ambiguous_steps": fold.ambiguous_steps,
        "torn_lines": fold.torn_lines,
        "skipped_lines": fold.skipped_lines,
        "lost_lines": fold.lost_lines,
        "step_source": fold.step_source,
        "sources": fold.sources(),
        "counter_check": result.counter_check.to_json(),
    }
    if fold.bootstrap is not None:
        document["acceptance"]["bootstrap"] = dict(fold.bootstrap)
    return document


def _with_intervals(fold: Named) -> dict[str, Any]:
    """The pooled figures, and the 95% interval beside each that has one."""
    kept = {name: plain(fold[name]) for name in POOLED_FIELDS}
    for name in POOLED_FIELDS:
        if f"{name}_ci" in fold:
            kept[f"{name}_ci"] = fold[f"{name}_ci"]
    return kept


def write_annotated(arm: ArmRecord, result: Document, out: str | Path) -> None:
    if os.path.exists(out) and os.path.samefile(out, arm.path):
        raise InputError(
            f"{out}: --annotate would overwrite the arm record it reads; name another file"
        )
    write_atomically(out, dumps(annotated_record(arm, result)))
