"""The engine's own trace (``fold.inputs.engine_trace``) attributed to the arm's legs and folded
into the same ``PartialFold`` the hook's log gives, so every figure downstream is computed alike.

A trace has no time stamps, so a step's leg comes from its place: the run lines after it in its
file. The gate runs one ``vllm-cli`` process per prompt and appends its legs prompt by prompt,
so the files, in the order given, are the prompts, and each file's legs are its prompt's legs
in run order. Every pairing is checked against what the run lines print (run r/R, the counts,
times and spec counters the gate copied into the record) and refused, naming the line, when
one disagrees; nothing is paired by guess.

Each file is one writer (its path): the engine's ``req`` is a per-process counter, so requests
are told apart per file. A request's steps keep no times (the cadence reads "needs time
stamps"); the within-leg shape cuts each leg's steps, in file order, into the fold's time bins
by position instead of time. One process prints a request's steps in the order it verifies
them (each line's ``pos`` is the last one's plus its ``ns``), so file order is step order and
the figures by output position are made from it.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from fold.errors import RefusedError
from fold.folding.accumulate import (
    FIRST_STEP,
    LINE_LISTS,
    PER_REQUEST_SCHEMA,
    SCHEMAS,
    TIME_BINS_PER_LEG,
    PartialFold,
    assemble,
)
from fold.folding.block_fold import DRAFTED, request_sums, step_histogram
from fold.folding.packed_tokens import packed_tokens
from fold.inputs import limits
from fold.inputs.arm import ArmRecord
from fold.inputs.engine_trace import RUN_PREFIX, EngineTrace, RunLines
from fold.inputs.limits import is_int

# Run-line fields the gate copies into each leg, and how a printed value compares with it.
_INTEGER_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "spec_drafts_proposed",
    "spec_drafts_accepted",
    "spec_drafted_request_steps",
)
_NUMBER_FIELDS = ("secs", "tok_s", "generate_start_unix", "generate_end_unix")
_WHAT_TO_CHECK = (
    "is this stderr from another run of the gate, or are the files out of prompt order? "
    "Files are matched to the prompts in the order given (a glob sorts them): name them in "
    "prompt order"
)


def prompts_of(arm: ArmRecord) -> list[list[dict[str, Any]]]:
    """The arm's legs by prompt: ``workload.repeat`` legs each when the record says so, else
    a new prompt at each ``run`` 1. Each prompt's runs must be 1, 2, ... in order."""
    legs = arm.legs.to_dicts()
    workload = arm.document.get("workload") if isinstance(arm.document, dict) else None
    repeat = workload.get("repeat") if isinstance(workload, dict) else None
    prompts: list[list[dict[str, Any]]] = []
    if is_int(repeat) and repeat > 0:
        if len(legs) % repeat:
            raise RefusedError(
                f"{arm.path}: {len(legs)} legs are not whole prompts of workload.repeat = "
                f"{repeat} runs: the engine's trace cannot be matched to the legs"
            )
        prompts = [legs[start : start + repeat] for start in range(0, len(legs), repeat)]
    else:
        for leg in legs:
            if leg["run"] == 1 or not prompts:
                prompts.append([])
            prompts[-1].append(leg)
    for number, prompt in enumerate(prompts):
        runs = [leg["run"] for leg in prompt]
        if runs != list(range(1, len(prompt) + 1)):
            raise RefusedError(
                f"{arm.path}: prompt {number}'s legs (from leg {prompt[0]['index']}) have runs "
                f"{runs}, not 1..{len(prompt)}: the engine's trace cannot be matched to them"
            )
    return prompts


def engine_trace_fold(traces: list[EngineTrace], arm: ArmRecord) -> PartialFold:
    """The partial fold of the files (one per prompt, in prompt order) over the arm's legs."""
    prompts = prompts_of(arm)
    if len(traces) != len(prompts):
        raise RefusedError(
            f"{len(traces)} files of the engine's trace for the {len(prompts)} prompts of "
            f"{arm.path}: the gate runs one vllm-cli process per prompt; give one stderr file "
            "for each, in prompt order"
        )
    columns: dict[str, list[Any]] = {name: [] for name in STEP_COLUMNS}
    files = []
    for number, (trace, prompt) in enumerate(zip(traces, prompts, strict=True)):
        _match(trace, prompt, number)
        n = 0
        for trace_leg, leg in zip(trace.legs, prompt, strict=True):
            for step in trace_leg.steps:
                _add_step(columns, leg["index"], trace.path, n, step)
                n += 1
        for step in trace.after_last:
            _add_step(columns, None, trace.path, n, step)
            n += 1
        files.append(
            {
                "path": trace.path,
                "lines": n,
                "attributed": n - len(trace.after_last),
                "unattributed": len(trace.after_last),
                "ambiguous": 0,
            }
        )
    steps = pl.DataFrame(columns, schema=STEP_COLUMNS)
    return untimed_fold(steps, pl.DataFrame(files, schema=SCHEMAS["files"]))


def _match(trace: EngineTrace, prompt: list[dict[str, Any]], number: int) -> None:
    if not trace.legs:
        raise RefusedError(
            f"{trace.path}: no '{RUN_PREFIX}r/R' lines: not the whole stderr of a vllm-cli "
            f"process, so its steps cannot be given legs (it stands for prompt {number})"
        )
    if len(trace.legs) != len(prompt):
        last = trace.legs[-1].run_lines
        raise RefusedError(
            f"{trace.path}:{min(last.lines.values())}: {len(trace.legs)} legs of run lines for "
            f"prompt {number}, whose {len(prompt)} legs start at leg {prompt[0]['index']} of the "
            f"record: {_WHAT_TO_CHECK}"
        )
    for trace_leg, leg in zip(trace.legs, prompt, strict=True):
        _match_leg(trace.path, trace_leg.run_lines, leg, len(prompt), number)


def _match_leg(path: str, lines: RunLines, leg: dict[str, Any], runs: int, prompt: int) -> None:
    where = f"leg {leg['index']} (run {leg['run']} of prompt {prompt})"
    if (lines.run, lines.runs) != (leg["run"], runs):
        raise RefusedError(
            f"{path}:{min(lines.lines.values())}: run={lines.run}/{lines.runs} where {where} "
            f"of {runs} runs is expected: {_WHAT_TO_CHECK}"
        )
    if "counts" not in lines.lines:
        raise RefusedError(
            f"{path}:{min(lines.lines.values())}: run={lines.run}/{lines.runs} has no line "
            "with completion_tokens: its leg cannot be checked against the record"
        )
    printed = lines.fields
    for name in (*_INTEGER_FIELDS, *_NUMBER_FIELDS, "finish_reason"):
        if name not in printed or leg.get(name) is None:
            continue
        text, recorded = printed[name], leg[name]
        if not _same(f"{path}:{lines.line_of(name)}", name, text, recorded):
            raise RefusedError(
                f"{path}:{lines.line_of(name)}: run={lines.run}/{lines.runs} prints "
                f"{name}={text}, but {where} records {recorded}: {_WHAT_TO_CHECK}"
            )


_FIX_RUN_LINE = "give the engine's stderr as it printed it"


def _same(where: str, name: str, text: str, recorded: Any) -> bool:
    """Whether the printed value is the recorded one (the gate parses the same text: a count as
    a decimal, the times and rates as numbers); a printed value of the wrong kind, or a count
    outside its range, is malformed (``limits``: exit 2), as in every source."""
    if name in _INTEGER_FIELDS:
        return bool(limits.decimal_count(text, where, name, _FIX_RUN_LINE) == recorded)
    if name in _NUMBER_FIELDS:
        return limits.printed_number(text, where, name, _FIX_RUN_LINE) == float(recorded)
    return text == str(recorded)


STEP_COLUMNS: dict[str, pl.DataType] = {
    "leg": pl.Int64(),
    "w": pl.String(),
    "seq": pl.UInt64(),
    "sid": pl.String(),
    "n": pl.Int64(),
    "pid": pl.Int64(),
    "proposed": pl.Int64(),
    "accepted": pl.Int64(),
    "emitted": pl.Int64(),
}


def _add_step(columns: dict[str, list[Any]], leg: int | None, path: str, n: int, step) -> None:
    for name, value in (("leg", leg), ("w", path), ("seq", step.req), ("sid", None), ("n", n),
                        ("pid", 0), ("proposed", step.k), ("accepted", step.acc),
                        ("emitted", step.emitted)):  # fmt: skip
        columns[name].append(value)


def untimed_fold(steps: pl.DataFrame, files: pl.DataFrame) -> PartialFold:
    """The sums ``fold.folding.accumulate`` keeps, from steps (``STEP_COLUMNS``) that already
    know their leg and have no times: the engine's trace, an oracle's per-request steps. The
    steps are numbered per writer (file) from 0, so no line counts as lost; ``pid`` is 0 (the
    trace does not print it).

    Each request's steps are numbered (``n``) in the order the engine took them, so ``n``
    stands in for the time in ``step_times`` (with the packed counts beside it), and the
    figures by output position order them by it; the figures that need real times are not
    made from it (``fold.folding.result.untimed``)."""
    per_request = (
        steps.group_by("leg", "w", "seq", "sid")
        .agg(*request_sums(), pl.col("n").alias("t_ns"), packed_tokens())
        # no times and no durations: no first line to tell (the step split needs times)
        .with_columns(pl.lit(None, dtype=pl.Int64).alias(name) for name in FIRST_STEP)
        .cast({name: dtype for name, dtype in PER_REQUEST_SCHEMA.items() if name not in LINE_LISTS})
    )
    drafted = steps.filter(pl.col("leg").is_not_null() & DRAFTED)
    histogram = step_histogram(drafted)
    # The shape's bins by place: the i-th of a leg's m drafted steps, in file order, goes to
    # bin i * bins // m, as a step at the i-th m-th of the leg's window would.
    position = pl.int_range(pl.len()).over("leg")
    bins = (
        drafted.with_columns(
            (position * TIME_BINS_PER_LEG // pl.len().over("leg")).cast(pl.Int64).alias("bin")
        )
        .group_by("leg", "bin")
        .agg(
            pl.len().cast(pl.Int64).alias("steps"),
            pl.col("proposed").sum(),
            pl.col("accepted").sum(),
        )
    )
    return assemble(per_request, histogram, bins, files)
