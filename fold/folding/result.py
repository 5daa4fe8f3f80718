"""Assembling a fold's figures from a partial fold, the arm's legs and the warm predicate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from fold.folding.another_k import AnotherK
from fold.folding.cadence import DEFAULT_STALL_FACTOR
from fold.folding.leg_figures import (
    LEG_JSON,
    LegFigures,
    NeedsStepLog,
    PooledFigures,
    frozen,
    plain,
)
from fold.folding.request_rows import RequestRows, sums_table
from fold.folding.step_durations import StepDurations
from fold.folding.step_split import NO_SPLIT, StepSplits
from fold.folding.uncertainty import (
    Replicates,
)
from fold.folding.windows import CHART_POOLS, SHAPE_POOLS, window_pools
from fold.inputs.engine_trace import NO_TIME_STAMPS
from fold.inputs.reader import SkippedLine

JSON_FORMAT = "fold-acceptance/5"
"""The JSON document's format (``docs/document.md``); the annotated record's block says it too."""
# Where a fold's counts came from (FoldResult.step_source): stable codes, which presenters and
# scripts decide on; the words beside them are what people read and may be reworded.
STEP_LOG = "step_log"
ENGINE_TRACE = "engine_trace"
RECORD_COUNTERS = "record_counters"
ORACLE_STEPS = "oracle_steps"
"""An oracle's steps as its engine recorded them per request (``fold.folding.oracle_steps``):
in order, without times."""
STEP_SOURCE_TEXT = {
    STEP_LOG: "step log",
    ENGINE_TRACE: "the engine's trace (VT_SPEC_TRACE stderr)",
    RECORD_COUNTERS: "the record's counters",
    ORACLE_STEPS: "the oracle's per-request steps",
}
NEEDS_STEP_LOG = NeedsStepLog.NEEDS_STEP_LOG.value
# Output tokens per request that no verify step emits: servers (vLLM, SGLang, llama-server)
# sample the first from prefill; llama.cpp's speculative-simple verifies the prompt's last token
# with the first draft, so every output token comes from a verify step (0).
SERVER_PREFILL_TOKENS = 1
PREFILL_CONVENTIONS = (0, 1)
# prefill_tokens.source values, codes: where the prefill tokens per request came from
PREFILL_STATED = "stated"  # --prefill-tokens, or the oracle's steps (a server's 1)
PREFILL_DEFAULT = "default"  # no leg could tell: the servers' 1
PREFILL_LEARNED = "learned_from_the_arm"  # the legs' completion tokens voted
PREFILL_NEEDS_STEP_LOG = "needs_step_log"  # a fold of the record's counters
PREFILL_SOURCE_TEXT = {
    PREFILL_STATED: "stated",
    PREFILL_DEFAULT: "default",
    PREFILL_LEARNED: "learned from the arm",
    PREFILL_NEEDS_STEP_LOG: NEEDS_STEP_LOG,
}


def prefill_convention(
    per_request: int | None, source: str, legs: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The document's ``prefill_tokens``: the tokens per request, where they came from (a code
    of ``PREFILL_SOURCE_TEXT``, its words beside it) and, when learned, each k's votes."""
    found: dict[str, Any] = {
        "per_request": per_request,
        "source": source,
        "source_text": PREFILL_SOURCE_TEXT[source],
    }
    if legs is not None:
        found["legs"] = dict(legs)
    return found


@dataclass(frozen=True, slots=True)
class FoldResult:
    """The fold's part of the result document (``fold.folding.document``): built once, by
    ``build_result`` or ``fold.folding.counter_fold``, and never changed after."""

    predicate: str
    window_steps: int
    legs: tuple[LegFigures, ...]
    warm: PooledFigures
    all: PooledFigures
    files: tuple[Mapping[str, Any], ...]
    writers: tuple[Mapping[str, Any], ...]
    skipped_examples: tuple[SkippedLine, ...] = ()
    stall_factor: float = DEFAULT_STALL_FACTOR
    prefill_tokens: Mapping[str, Any] = field(
        default_factory=lambda: frozen(prefill_convention(SERVER_PREFILL_TOKENS, PREFILL_DEFAULT))
    )
    bootstrap: Mapping[str, Any] | None = None
    """How the intervals were drawn (resamples, seed, level, method); None without intervals."""
    replicates: Mapping[str, Replicates] = field(
        default_factory=lambda: frozen({}), repr=False, compare=False
    )
    """The warm and all-legs folds' bootstrap replicates, which the split propagates."""
    step_split: StepSplits = NO_SPLIT
    """Our step time split into drafting, verifying and the rest (``fold.folding.step_split``)."""
    step_source: str = STEP_LOG
    """Where S, P and A came from: ``STEP_LOG``, ``ENGINE_TRACE`` (steps without times: the
    figures that need times are None), or ``RECORD_COUNTERS`` when no log was given (every
    figure that needs steps is then None)."""
    another_k: AnotherK | None = None
    """The warm fold's figures at another k (``fold.folding.another_k``); None without steps."""
    durations: StepDurations | None = None
    """The steps' drafting and verify durations per leg and request, when the log carried them
    (``fold.folding.step_durations``); not in the JSON until a stage reads them."""

    @property
    def from_log(self) -> bool:
        """Whether steps were read from files (the hook's log or the engine's trace)."""
        return self.step_source != RECORD_COUNTERS

    @property
    def untimed(self) -> str | None:
        """Why the steps have no times (the engine's trace), or None: they have."""
        return untimed(self.step_source)

    @property
    def step_source_text(self) -> str:
        """Where the counts came from, in words."""
        return STEP_SOURCE_TEXT[self.step_source]

    @property
    def lines_read(self) -> int | None:
        return self._line_total(self.files, "lines")

    @property
    def lines_attributed(self) -> int | None:
        return self._line_total(self.files, "attributed")

    def no_times(self) -> str:
        """What the figures built from step times read when there are none."""
        return self.untimed or f"{NEEDS_STEP_LOG} (the steps' times)"

    def _line_total(self, rows: tuple[Mapping[str, Any], ...], key: str) -> int | None:
        # Without a log nothing was read: no count of lines, not a count of 0.
        return sum(row[key] for row in rows) if self.from_log else None

    @property
    def unattributed_steps(self) -> int | None:
        return self._line_total(self.files, "unattributed")

    @property
    def ambiguous_steps(self) -> int | None:
        return self._line_total(self.files, "ambiguous")

    @property
    def torn_lines(self) -> int | None:
        return self._line_total(self.files, "torn")

    @property
    def skipped_lines(self) -> int | None:
        return self._line_total(self.files, "skipped")

    @property
    def lost_lines(self) -> int | None:
        return self._line_total(self.writers, "lost")

    def sources(self) -> dict[str, str]:
        """Where each figure came from: the step log, the engine's trace, the record, or
        nowhere yet."""
        counts = (
            self.step_source_text
            if self.from_log
            else self.step_source_text + " (spec_drafted_request_steps, spec_drafts_proposed, "
            "spec_drafts_accepted)"
        )
        from_steps = self.step_source_text if self.from_log else NEEDS_STEP_LOG
        timed = {} if self.untimed is None else dict.fromkeys(TIMED_FIGURES, self.untimed)
        return {
            "steps": counts,
            "proposed": counts,
            "accepted": counts,
            "accept_rate": counts,
            "mean_acceptance_length": counts,
            "completion_tokens_per_step": f"completion_tokens (arm record) / S ({counts})",
            "step_rate": f"S ({counts}) / the legs' generate windows (arm record)",
            "tok_s": "the legs' tok_s (arm record)",
            **dict.fromkeys(STEP_FIGURES, from_steps),
            **timed,
        }

    def sums_table(self) -> pl.DataFrame | None:
        """Every request of every leg with steps, one row each (the sums file,
        ``docs/sums.md``); None when no leg's counts came with steps (the record's counters)."""
        legs = [
            (leg.index, leg.run, leg.warm, leg["requests"])
            for leg in self.legs
            if leg["requests"] is not None
        ]
        return sums_table(legs) if legs else None

    def to_json(self) -> dict[str, Any]:
        """The fold's keys of the JSON document (``fold.folding.document.Document.to_json``)."""
        document: dict[str, Any] = {
            "predicate": self.predicate,
            "window_steps": self.window_steps,
            "stall_factor": self.stall_factor,
            "legs": [leg_json(leg) for leg in self.legs],
            "warm": {
                **self.warm.to_json(),
                "another_k": None if self.another_k is None else self.another_k.to_json(),
            },
            "all": self.all.to_json(),
            "unattributed_steps": self.unattributed_steps,
            "ambiguous_steps": self.ambiguous_steps,
            "torn_lines": self.torn_lines,
            "skipped_lines": self.skipped_lines,
            "lost_lines": self.lost_lines,
            "lines_read": self.lines_read,
            "lines_attributed": self.lines_attributed,
            "files": [dict(row) for row in self.files],
            "writers": [dict(row) for row in self.writers],
            "skipped_examples": [vars(example) for example in self.skipped_examples],
            "prefill_tokens": dict(self.prefill_tokens),
            "step_source": self.step_source,
            "step_source_text": self.step_source_text,
            "steps_timed": self.untimed is None if self.from_log else None,
            "no_times_text": None if self.from_log and self.untimed is None else self.no_times(),
            "sources": self.sources(),
        }
        if self.bootstrap is not None:
            document["bootstrap"] = dict(self.bootstrap)
        for leg in document["legs"]:
            leg["step_split"] = self.step_split.leg_json(leg["index"])
        document["warm"]["step_split"] = self.step_split.warm_json()
        # the figures inside are read-only views and tuples: the JSON form is plain
        return plain(document)


def untimed(step_source: str) -> str | None:
    """Why steps from ``step_source`` have no times (the engine's trace), or None."""
    if step_source == ORACLE_STEPS:
        return "needs time stamps: the engine's per-request steps have none"
    return NO_TIME_STAMPS if step_source == ENGINE_TRACE else None


def leg_json(leg: LegFigures) -> dict[str, Any]:
    """A leg's JSON: its figures, and of its requests only their count and the lowest (each
    request's row is in the sums file)."""
    document = {name: leg[name] for name in LEG_JSON}
    document["flags"] = list(leg.flags)
    document["cadence"] = None if leg.cadence is None else plain(leg.cadence)
    # Every request's row is in the sums file (--sums), not here: a load test's 10^6 rows made
    # the document most of a gigabyte. The document keeps their count, spread and lowest.
    requests: RequestRows | None = document.pop("requests")
    document["request_count"] = None if requests is None else len(requests)
    document["lowest_request"] = None if requests is None else _lowest(requests)
    windows = document["windows"]
    document["window_pools"] = (
        None
        if windows is None
        else {
            "shape": window_pools(windows, SHAPE_POOLS),
            "chart": window_pools(windows, CHART_POOLS),
        }
    )
    return document


def _lowest(requests: RequestRows) -> dict[str, Any] | None:
    """The request a "request collapse" flag names: the lowest A/P, the first of equals."""
    rates = requests.column("accept_rate")
    if not len(rates) or np.isnan(rates).all():
        return None
    # Its four fields only: a whole row with its cadence, 50 legs over, took 50 ms of a fold.
    at = int(np.nanargmin(rates))
    ((w, request_id),) = requests.ids([at])
    steps = int(requests.column("steps")[at])
    return {"w": w, "seq": request_id, "accept_rate": float(rates[at]), "steps": steps}


STEP_FIGURES = (
    "per_position",
    "per_position_conditional",
    "per_position_of_proposed",
    "histogram",
    "windows",
    "request_count",
    "lines",
    "cadence",
    "emitted",
    "timeline",
)
"""Figures only the steps themselves give: read "needs a step log" (None) without one."""
TIMED_FIGURES = ("cadence", "timeline")
"""Figures that need the steps' times: None from the engine's trace, which has none."""
