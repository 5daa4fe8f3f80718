"""An oracle's per-request steps (``fold.inputs.oracles.request_steps``) folded by the code that
folds ours: a :class:`fold.folding.result.FoldResult`, built by ``build_result`` from the same
``PartialFold`` tables the step log gives.

Each recorded step becomes a step line of its request in its leg (proposed = the drafts it
verified, accepted = the drafts it accepted; no ``emitted``, so each counts accepted + 1 output
tokens), numbered in file order, as the engine's trace is
(``fold.folding.engine_trace_fold.untimed_fold``). The steps have no times: the cadence reads
"needs time stamps", and the within-leg windows cut each leg's drafted steps, in file order,
into the fold's bins by place. They do have their order (vLLM appends each request's steps as
they verify), so the number stands in for a time where only the order counts: the figures by
output position (``fold.folding.by_position``, the code that makes ours). A leg's window is
its recorded ``secs`` (none: no step rate); a leg without ``tok_s`` has NaN there, which no
figure of the steps uses.

A leg none of whose requests verified a draft is left out (the arm's totals count its zeros).
Only the detailed level has steps; the summary level's figures come from its histograms
(``fold.compare.step_figures``), so :func:`fold_oracle` returns None for it.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any

import polars as pl

from fold.folding.accumulate import SCHEMAS
from fold.folding.build import build_result
from fold.folding.engine_trace_fold import STEP_COLUMNS, untimed_fold
from fold.folding.result import ORACLE_STEPS, SERVER_PREFILL_TOKENS, FoldResult
from fold.folding.uncertainty import DEFAULT_SEED
from fold.folding.warm import ThroughputCheck
from fold.inputs import acceptance
from fold.inputs.arm import WINDOW_SLACK_NS
from fold.inputs.oracles.request_steps import DETAILED, OracleSteps
from fold.inputs.reader import ReadCounts

_LEG_SCHEMA: dict[str, pl.DataType] = {
    "index": pl.Int64(),
    "run": pl.Int64(),
    "leg": pl.String(),
    "finish_reason": pl.String(),
    "tok_s": pl.Float64(),
    "completion_tokens": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
}


def arm_legs(steps: OracleSteps) -> pl.DataFrame:
    """The oracle's legs in the shape of an arm record's (``fold.inputs.arm``): ``run`` 0 where
    the input has none (every leg is then warm), the window its recorded seconds."""
    rows = []
    for leg in steps.legs:
        seconds = 0 if leg.secs is None else round(leg.secs * 1e9)
        reasons = {request.finish_reason for request in leg.requests}
        rows.append(
            {
                "index": leg.index,
                "run": leg.run or 0,
                "leg": leg.label,
                "finish_reason": reasons.pop() if len(reasons) == 1 else None,
                "tok_s": math.nan if leg.tok_s is None else leg.tok_s,
                "completion_tokens": leg.completion_tokens,
                "start_ns": 0,
                "end_ns": seconds + 2 * WINDOW_SLACK_NS,
            }
        )
    return pl.DataFrame(rows, schema=_LEG_SCHEMA)


def step_lines(steps: OracleSteps) -> pl.DataFrame:
    """Every recorded step as a step line (``STEP_COLUMNS``): writer = the file, the request by
    its id, numbered in file order (each request's steps in the order the engine took them)."""
    columns: dict[str, list[Any]] = {name: [] for name in STEP_COLUMNS}
    n = 0
    for leg in steps.legs:
        for request in leg.requests:
            assert request.accepted is not None and request.drafted is not None
            for proposed, accepted in zip(request.drafted, request.accepted, strict=True):
                for name, value in (("leg", leg.index), ("w", steps.where), ("seq", 0),
                                    ("sid", request.id), ("n", n), ("pid", 0),
                                    ("proposed", proposed), ("accepted", accepted),
                                    ("emitted", None)):  # fmt: skip
                    columns[name].append(value)
                n += 1
    return pl.DataFrame(columns, schema=STEP_COLUMNS)


def fold_oracle(
    steps: OracleSteps,
    *,
    window_steps: int = acceptance.DEFAULT_WINDOW_STEPS,
    resamples: int = 0,
    seed: int = DEFAULT_SEED,
) -> FoldResult | None:
    """The oracle's fold, of the type ours is; None at the summary level (no steps)."""
    if steps.level != DETAILED:
        return None
    # A leg whose requests never verified a draft (an output that ended first) has no step to
    # fold; ours refuses such a warm leg as a drafter that never proposed, so it is left out
    # here (the arm's totals count its zeros).
    steps = dataclasses.replace(
        steps, legs=tuple(leg for leg in steps.legs if any(r.steps for r in leg.requests))
    )
    lines = step_lines(steps)
    files = pl.DataFrame(
        [{"path": steps.where, "lines": lines.height, "attributed": lines.height,
          "unattributed": 0, "ambiguous": 0}],
        schema=SCHEMAS["files"],
    )  # fmt: skip
    partial = untimed_fold(lines, files)
    warm = steps.warm_legs
    speeds = [leg.tok_s for leg in warm if leg.tok_s is not None]
    check = ThroughputCheck(
        predicate=steps.predicate,
        warm_legs=[leg.index for leg in warm],
        output_throughput_tok_s=statistics.median(speeds) if len(speeds) == len(warm) else None,
    )
    return build_result(
        arm_legs(steps),
        partial,
        {steps.where: ReadCounts(kind=steps.source)},
        check,
        window_steps,
        prefill_tokens=SERVER_PREFILL_TOKENS,
        resamples=resamples,
        seed=seed,
        step_source=ORACLE_STEPS,
    )
