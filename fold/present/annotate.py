"""A copy of the arm record with each leg's acceptance and an ``acceptance`` block added
(``--annotate``), written through the one JSON writer (``fold.present.output``)."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from fold.errors import InputError
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


TOP_FIELDS = (
    "format",
    "predicate",
    "stall_factor",
    "warm",
    "all",
    "unattributed_steps",
    "ambiguous_steps",
    "torn_lines",
    "skipped_lines",
    "lost_lines",
    "step_source",
    "step_source_text",
    "sources",
    "counter_check",
    "bootstrap",
)


def annotated_record(arm: ArmRecord, document: dict[str, Any]) -> Any:
    """A copy of the arm record with each leg's acceptance and an ``acceptance`` block added,
    read from the result document's JSON form (``document``).

    A record given as a bare list of legs becomes ``{"legs": [...], "acceptance": {...}}``,
    since a list has nowhere to put the block.
    """
    record = copy.deepcopy(arm.document)
    if isinstance(record, list):
        record = {"legs": record}
    for leg, figures in zip(record["legs"], document["legs"], strict=True):
        leg["acceptance"] = {name: figures[name] for name in LEG_FIELDS}
    block = {name: document[name] for name in TOP_FIELDS if name in document}
    block["warm"], block["all"] = (_with_intervals(document[fold]) for fold in ("warm", "all"))
    record["acceptance"] = block
    return record


def _with_intervals(fold: dict[str, Any]) -> dict[str, Any]:
    """The pooled figures, and the 95% interval beside each that has one."""
    kept = {name: fold[name] for name in POOLED_FIELDS}
    for name in POOLED_FIELDS:
        if f"{name}_ci" in fold:
            kept[f"{name}_ci"] = fold[f"{name}_ci"]
    return kept


def write_annotated(arm: ArmRecord, document: dict[str, Any], out: str | Path) -> None:
    if os.path.exists(out) and os.path.samefile(out, arm.path):
        raise InputError(
            f"{out}: --annotate would overwrite the arm record it reads; name another file"
        )
    write_atomically(out, dumps(annotated_record(arm, document)))
