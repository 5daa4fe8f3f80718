"""Reading vllm.cpp's own per-step trace: the saved stderr of one ``vllm-cli`` process run with
``VT_SPEC_TRACE=1``.

Each ``[SPECTRACE]`` line is one request's verify step that carried a draft::

    [SPECTRACE] req=0 pos=8  k=8 ns=2 acc=1 draft=[3177 421 682 ...] emit=[3177 34756]

(``k`` the drafts verified, P; ``acc`` the accepted ones, A; ``ns`` the tokens sampled, acc + 1;
``emit`` the tokens appended, counted for ``emitted``; field spacing as it comes). After each
leg's completion the process prints three ``vllm-cli: run=r/R ...`` lines (counts, generate
times, the spec counters); the steps before them are that leg's. Everything else on stderr
(model loading, warnings) is counted as other log lines. There is no time stamp.

This module only reads: ``read_engine_trace`` turns one file into its legs (the run lines'
fields and the steps before them), judging every line; matching files to the arm's legs and
folding is ``fold.folding.engine_trace_fold``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from fold.errors import InputError, RefusedError
from fold.inputs import limits
from fold.inputs.reader import ReadCounts

TAG = "[SPECTRACE]"
RUN_PREFIX = "vllm-cli: run="
NO_TIME_STAMPS = "needs time stamps: the engine's trace has none"
_SNIFF_BYTES = 64 * 1024
_FIELD = re.compile(r"([A-Za-z_]\w*)=(\[[^\[\]]*\]|[^\s\[\]=]+)")
_RUN = re.compile(r"vllm-cli: run=(\d+)/(\d+)((?:[ \t]+\S+=\S+)+)[ \t]*")
_INTEGER = re.compile(r"0|[1-9][0-9]*")
_SIGNED = re.compile(r"-?(?:0|[1-9][0-9]*)")
_REQUIRED = ("req", "k", "acc", "emit")
_COUNTS = ("req", "pos", "k", "ns", "acc")
_LIST_FIELDS = ("draft", "emit")
_STEP_FIELDS = limits.StepFields(proposed="'k'", accepted="'acc'", emitted="'emit'")
_FIX = "fix or remove the line"
MISCOUNTING = "the engine's trace is miscounting; no acceptance can be computed from it"
# Which of a leg's three run lines a line is, by a field only it carries.
RUN_LINE_KINDS = {
    "completion_tokens": "counts",
    "generate_start_unix": "times",
    "spec_drafts_proposed": "spec",
}


def looks_like_engine_trace(path: str) -> bool:
    """Whether ``path`` holds the engine's stderr rather than the hook's JSON lines, told from
    its content: the hook's first line is a JSON object; the engine's stderr carries its tag or
    its run lines somewhere (after however long a model-loading log)."""
    markers = (TAG.encode(), RUN_PREFIX.encode())
    try:
        with open(path, "rb") as handle:
            sample = handle.read(_SNIFF_BYTES)
            first = next((line.strip() for line in sample.split(b"\n") if line.strip()), b"")
            if first.startswith(b"{"):
                return False
            overlap = max(len(marker) for marker in markers)
            while sample:
                if any(marker in sample for marker in markers):
                    return True
                more = handle.read(_SNIFF_BYTES)
                sample = sample[-overlap:] + more if more else b""
    except OSError:
        pass  # the step-log reader words the error
    return False


@dataclass(frozen=True)
class TraceStep:
    line: int
    req: int
    k: int
    acc: int
    emitted: int


@dataclass
class RunLines:
    """One leg's ``vllm-cli: run=r/R`` lines: their fields as printed, and where they are."""

    run: int
    runs: int
    lines: dict[str, int] = field(default_factory=dict)
    """Line number of each kind present (``RUN_LINE_KINDS``' values)."""
    fields: dict[str, str] = field(default_factory=dict)

    def line_of(self, name: str) -> int:
        """The line that printed field ``name``."""
        kind = "spec" if name.startswith("spec_") else "times" if "unix" in name else "counts"
        return self.lines.get(kind) or min(self.lines.values())


@dataclass
class TraceLeg:
    run_lines: RunLines
    steps: list[TraceStep]


@dataclass
class EngineTrace:
    """One stderr file read: its legs in order, the steps after its last run line (in no leg),
    and what else it held."""

    path: str
    legs: list[TraceLeg]
    after_last: list[TraceStep]
    counts: ReadCounts
    other_lines: int = 0
    run_lines: int = 0
    lines: int = 0


def read_engine_trace(path: str, *, skip_bad_lines: bool = False) -> EngineTrace:
    """Every line of ``path`` judged: steps, run lines, other log lines, bad lines (named, or
    counted with ``skip_bad_lines``). Counts no engine can produce, and run lines that leave a
    step's leg in doubt, are refused (never skipped), naming the line."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise InputError(f"{path}: cannot read the engine's trace: {error.strerror}") from error
    trace = EngineTrace(path, [], [], ReadCounts())
    pending: list[TraceStep] = []
    block: RunLines | None = None  # the run lines being read, steps not yet after them
    *complete, tail = data.split(b"\n")
    if tail:
        complete.append(tail)  # stderr may end without a newline: its last line still counts
    for number, raw in enumerate(complete, start=1):
        trace.lines += 1
        text = raw.decode("utf-8", "replace").rstrip("\r")
        stripped = text.strip()
        if stripped.startswith(TAG):
            step = _step(path, number, stripped[len(TAG) :], trace.counts, skip_bad_lines)
            if step is None:
                continue
            if block is not None:
                trace.legs.append(TraceLeg(block, pending))
                pending, block = [], None
            pending.append(step)
        elif stripped.startswith(RUN_PREFIX):
            parsed = _run_line(path, number, stripped, trace.counts, skip_bad_lines)
            if parsed is None:
                continue
            trace.run_lines += 1
            run, runs, fields, kinds = parsed
            if block is not None and (block.run, block.runs) != (run, runs):
                trace.legs.append(TraceLeg(block, pending))
                pending, block = [], None
            if block is None:
                last = trace.legs[-1].run_lines if trace.legs else None
                if last is not None and (last.run, last.runs) == (run, runs):
                    _refuse_split_leg(path, number, last, pending)
                block = RunLines(run, runs)
            for kind in kinds:
                if kind in block.lines:
                    raise RefusedError(
                        f"{path}:{number}: a second '{kind}' run line for run={run}/{runs} (the "
                        f"first is line {block.lines[kind]}): the leg's steps cannot be told "
                        "apart; is this the stderr of two processes?"
                    )
                block.lines[kind] = number
            block.fields.update(fields)
        elif TAG in text:
            trace.counts.bad_line(
                path, number, f"a {TAG} record not at the start of its line (output of two "
                "writers interleaved?)", skip=skip_bad_lines,
            )  # fmt: skip
        else:
            trace.other_lines += 1
    if block is not None:
        trace.legs.append(TraceLeg(block, pending))
        pending = []
    trace.after_last = pending
    return trace


def _refuse_split_leg(path: str, number: int, last: RunLines, steps: list[TraceStep]) -> None:
    between = f"line {steps[0].line}" if steps else "a line"
    raise RefusedError(
        f"{path}:{number}: a run line of run={last.run}/{last.runs} after {TAG} {between}, "
        f"which follows that run's other run lines (line {min(last.lines.values())}): the "
        "step's leg cannot be told; the engine prints a leg's run lines together"
    )


def _step(path: str, number: int, rest: str, counts: ReadCounts, skip: bool) -> TraceStep | None:
    values: dict[str, str] = {}
    position = 0
    for match in _FIELD.finditer(rest):
        if rest[position : match.start()].strip():
            _bad(path, number, f"cannot read {rest[position:match.start()].strip()!r}",
                        counts, skip)  # fmt: skip
            return None
        key, value = match.group(1), match.group(2)
        if key in values:
            _bad(path, number, f"field '{key}' twice", counts, skip)
            return None
        values[key] = value
        position = match.end()
    if rest[position:].strip():
        _bad(path, number, f"cannot read {rest[position:].strip()!r}", counts, skip)
        return None
    missing = [key for key in _REQUIRED if key not in values]
    if missing:
        _bad(path, number, f"no {', '.join(missing)} field", counts, skip)
        return None
    numbers: dict[str, int] = {}
    for key in _COUNTS:
        if key in values:
            # A sign is read, so a negative count (a miscount printed signed) is refused in the
            # words every source refuses it with; anything else is no integer at all.
            text = values[key]
            if not _SIGNED.fullmatch(text):
                reason = limits.kind_reason(f"field '{key}'", None, "an integer", text)
                _bad(path, number, reason, counts, skip)
                return None
            read = limits.decimal_request_id if key == "req" else limits.decimal_count
            try:
                numbers[key] = read(text, f"{path}:{number}", f"field '{key}'", _FIX)
            except limits.OutOfRange as error:  # a malformed line, which may be skipped
                _bad(path, number, error.reason, counts, skip)
                return None
    for key in _LIST_FIELDS:
        if key in values and not values[key].startswith("["):
            reason = limits.kind_reason(f"field '{key}'", None, "a [...] list", values[key])
            _bad(path, number, reason, counts, skip)
            return None
    emitted = values["emit"][1:-1].split()
    if not all(_INTEGER.fullmatch(token) for token in emitted):
        reason = limits.kind_reason("field 'emit'", None, "a list of token ids", values["emit"])
        _bad(path, number, reason, counts, skip)
        return None
    step = TraceStep(number, numbers["req"], numbers["k"], numbers["acc"], len(emitted))
    _check_counts(path, number, step, numbers.get("ns"))
    return step


def _check_counts(path: str, number: int, step: TraceStep, sampled: int | None) -> None:
    """Counts no engine can print are refused, as the hook's impossible lines are: the step's
    rule (``fold.inputs.limits``), then what the trace adds to it (``ns`` and ``emit``)."""
    where = f"{path}:{number}"
    limits.check_step(where, (step.k, step.acc, step.emitted), MISCOUNTING, _STEP_FIELDS)
    problem = None
    if sampled is not None and sampled != step.acc + 1:
        problem = f"ns={sampled} is not acc + 1 = {step.acc + 1}"
    elif step.emitted > step.acc + 1:
        problem = f"emit lists {step.emitted} tokens, more than acc + 1 = {step.acc + 1}"
    if problem is not None:
        raise RefusedError(f"{where}: {problem}: {MISCOUNTING}")


def _run_line(
    path: str, number: int, text: str, counts: ReadCounts, skip: bool
) -> tuple[int, int, dict[str, str], list[str]] | None:
    """(run, runs, fields, kinds) of a run line. A line of none of the three known kinds (a
    later engine's) is still one of its leg's, its kind named by its first field."""
    match = _RUN.fullmatch(text)
    if match is None:
        _bad(path, number, f"a {RUN_PREFIX}r/R line that cannot be read", counts, skip)
        return None
    if limits.past_every_limit(match.group(1)) or limits.past_every_limit(match.group(2)):
        shown = f"{limits.shown(match.group(1))}/{limits.shown(match.group(2))}"
        _bad(path, number, f"run={shown} is not a run of a gate", counts, skip)
        return None
    run, runs = int(match.group(1)), int(match.group(2))
    if not 1 <= run <= runs:
        _bad(path, number, f"run={run}/{runs} is not a run of {runs}", counts, skip)
        return None
    fields: dict[str, str] = {}
    for item in match.group(3).split():
        key, value = item.split("=", 1)
        if key in fields:
            _bad(path, number, f"field '{key}' twice", counts, skip)
            return None
        fields[key] = value
    kinds = [kind for key, kind in RUN_LINE_KINDS.items() if key in fields]
    return run, runs, fields, kinds or [f"other ({next(iter(fields))})"]


def _bad(path: str, number: int, reason: str, counts: ReadCounts, skip: bool) -> None:
    counts.bad_line(path, number, f"malformed {TAG} or run line: {reason}", skip=skip)
    return None
