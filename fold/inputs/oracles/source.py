"""An oracle file read once into a document every engine reader can look at.

JSON comes as one value, an array, or JSONL; the bare ``Infinity``/``NaN`` tokens Python's
``json.dumps`` writes (SGLang's ``bench_serving`` with the default request rate) are accepted
here, in oracle inputs only. Anything else is text (a Prometheus scrape, a program's output).
Also here: the warm selection and throughput check every engine's legs share.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from fold.errors import InputError, RefusedError
from fold.inputs import limits
from fold.inputs.oracles.figures import ORACLE_COUNT_WHAT_TO_DO
from fold.inputs.populations import ALL_LEGS, WARM_LEGS
from fold.inputs.recorded_fold import RecordedFold, disagreements

# The gate's own check of its throughput fold (fold.folding.warm), applied to an oracle's legs too.
TOK_S_FIELDS = ("output_throughput_tok_s", "tok_s", "output_throughput")

Record = tuple[dict[str, Any], str]
"""A JSON object and where it is (``file:line`` or ``file: [i]``)."""


@dataclass
class OracleFile:
    """An oracle's file as read, before any engine's reader takes it (not the result document:
    that is ``fold.folding.document.Document``). ``form`` is ``object`` (one JSON object),
    ``records`` (a JSON array or JSONL of objects) or ``text``; ``records`` holds the objects
    of both JSON forms with their places."""

    where: str
    text: str
    form: str
    records: list[Record] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def record(self) -> dict[str, Any]:
        return self.records[0][0]


def load_oracle_file(path: str | os.PathLike[str]) -> OracleFile:
    where = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise InputError(
            f"{where}: cannot read the oracle arm ({exc.strerror}); check --vs"
        ) from exc
    try:
        # utf-8-sig: a file saved by an editor or a shell on Windows may start with a BOM
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{where}: not UTF-8 text (byte {exc.start}); give a JSON record, JSONL, a "
            "Prometheus scrape or the program's printed output"
        ) from exc
    return parse_oracle_file(text, where)


def parse_oracle_file(text: str, where: str = "<input>") -> OracleFile:
    stripped = text.lstrip()
    if not stripped:
        raise InputError(f"{where}: the file is empty; give the oracle's record, legs or scrape")
    if stripped.startswith("data:"):
        text = _unwrap_event_stream(text)
        stripped = text.lstrip()
        if not stripped:
            raise InputError(
                f"{where}: a saved event stream with no event but [DONE]; save the whole stream"
            )
    if stripped[0] not in "{[":
        return OracleFile(where, text, "text")
    try:
        value = _loads(text)
    except ValueError:
        return OracleFile(where, text, "records", _jsonl(text, where))
    if isinstance(value, dict):
        return OracleFile(where, text, "object", [(value, where)])
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        # ["<scrape before>", "<scrape after>"]: the texts one after the other
        return OracleFile(where, "\n".join(item.rstrip("\n") for item in value) + "\n", "text")
    if isinstance(value, list):
        records = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise limits.WrongKind(where, f"[{i}]", item, "an object", _ONE_RECORD_EACH)
            records.append((item, f"{where}: [{i}]"))
        if not records:
            raise InputError(f"{where}: an empty list; give at least one record")
        return OracleFile(where, text, "records", records)
    raise InputError(f"{where}: a JSON {type(value).__name__}, not an object or a list")


def _unwrap_event_stream(text: str) -> str:
    """A saved streaming response (``data: {...}`` lines, ``data: [DONE]``) as JSONL; line
    numbers stay those of the file."""
    lines = []
    for line in text.splitlines():
        body = line[len("data:") :].strip() if line.startswith("data:") else ""
        lines.append("" if body == "[DONE]" else body)
    return "\n".join(lines) + "\n"


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # Python's json accepts the non-finite tokens Python's own json.dumps writes.
        return json.loads(text)


def _jsonl(text: str, where: str) -> list[Record]:
    """JSON objects one after another: JSONL, or responses appended with ``curl >>`` (no
    newline between them, or pretty-printed)."""
    decoder = json.JSONDecoder()
    records: list[Record] = []
    position = 0
    while True:
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position >= len(text):
            return records
        lineno = text.count("\n", 0, position) + 1
        try:
            item, end = decoder.raw_decode(text, position)
        except ValueError as exc:
            raise InputError(
                f"{where}:{lineno}: not JSON ({exc}); the file must be one JSON object, a "
                "JSON array, or JSON objects one after another (JSONL)"
            ) from exc
        if not isinstance(item, dict):
            raise limits.WrongKind(f"{where}:{lineno}", "", item, "an object", _ONE_RECORD_EACH)
        records.append((item, f"{where}:{lineno}"))
        position = end


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


def one_workload(records: Sequence[Record], workload_keys: Sequence[str]) -> None:
    """Refuse runs appended to one file that ran different workloads: pooling them would give
    no one run's figures. (``--vs`` never gets here with such a file: it gives each run its
    own arm, see :func:`runs_of`.)"""
    first = records[0][0]
    for record, where in records[1:]:
        differing = [k for k in workload_keys if record.get(k) != first.get(k)]
        if differing:
            raise InputError(
                f"{where}: this run differs from the first in {', '.join(differing)}; pooling "
                "runs of different workloads would give no one run's figures. Read each run "
                "as its own arm (--vs NAME=PATH gives NAME#1, NAME#2, ...; NAME=PATH#N picks "
                "run N)"
            )


@dataclass(frozen=True)
class Run:
    """One run of a file of appended benchmark results, as a document of its own."""

    doc: OracleFile
    workload: tuple[tuple[str, Any], ...]
    """The run's workload settings (key, value), to tell it from the others."""


def runs_of(doc: OracleFile, is_run: Any, workload_keys: Sequence[str]) -> list[Run] | None:
    """Each run of a file whose records are all benchmark results (``is_run``), with its
    workload; None for any other document."""
    if doc.form == "text" or not doc.records or not all(is_run(r) for r, _ in doc.records):
        return None
    return [
        Run(
            OracleFile(where, doc.text, "object", [(record, where)]),
            tuple((key, record.get(key)) for key in workload_keys),
        )
        for record, where in doc.records
    ]


_ONE_RECORD_EACH = "give each record (a request, a leg, a run) as a JSON object"


def count(value: Any, where: str) -> int:
    """A counter's value as an int: whole floats (``310.0``) are fine, fractions are not."""
    return limits.count(where, "count", value, ORACLE_COUNT_WHAT_TO_DO, whole_floats=True)


def positive(value: Any, where: str) -> float:
    number = limits.finite_number(where, "", value, "give the figure as printed")
    if number <= 0:
        raise InputError(f"{where} = {limits.json_shown(value)} must be positive")
    return number


def pick(record: Mapping[str, Any], keys: Sequence[str], where: str) -> tuple[Any, str | None]:
    """The first of ``keys`` the record holds (not null); synonyms that disagree are an error."""
    present = [k for k in keys if record.get(k) is not None]
    if not present:
        return None, None
    # json, not orjson: a synonym may hold an integer past 64 bits, which orjson cannot write
    if len(present) > 1 and len({json.dumps(record[k]) for k in present}) > 1:
        raise InputError(
            f"{where}: {' and '.join(present)} disagree "
            f"({', '.join(repr(record[k]) for k in present)}); keep one of them"
        )
    return record[present[0]], present[0]


def tok_s_field(record: Mapping[str, Any], where: str) -> tuple[float | None, str | None]:
    value, key = pick(record, TOK_S_FIELDS, where)
    if value is None:
        return None, None
    return positive(value, f"{where}: {key}"), key


# --------------------------------------------------------------------------------------------
# Legs: the warm ones, and the recorded throughput they must reproduce
# --------------------------------------------------------------------------------------------


def run_number(record: Mapping[str, Any], where: str) -> int | None:
    run = record.get("run")
    if run is None:
        return None
    return limits.run(where, "run", run, "number the runs 1, 2, ... (1 is the cold leg)")


@dataclass(frozen=True)
class Selection:
    """The records an oracle's figures are taken over, and how they were chosen."""

    records: list[Record]
    total: int
    by_run: bool

    @property
    def population(self) -> str:
        return WARM_LEGS if self.by_run else ALL_LEGS

    @property
    def description(self) -> str:
        if self.by_run:
            return f"the {len(self.records)} warm records of {self.total} (run > 1)"
        return f"all {self.total} records (none has a run field)"


def warm(records: Sequence[Record]) -> Selection:
    """Records with ``run > 1`` when they carry ``run`` (all must), else all of them."""
    runs = [run_number(rec, rwhere) for rec, rwhere in records]
    with_run = [r for r in runs if r is not None]
    if not with_run:
        return Selection(list(records), len(records), by_run=False)
    if len(with_run) != len(runs):
        missing = next(rwhere for (_, rwhere), r in zip(records, runs, strict=True) if r is None)
        raise InputError(
            f"{missing}: no run field while other records have one; give run on every record "
            "or on none"
        )
    chosen = [item for item, run in zip(records, runs, strict=True) if run is not None and run > 1]
    if not chosen:
        raise RefusedError(
            f"no record has run > 1 among the {len(records)} from {records[0][1]} on: every "
            "one is a cold leg, so there is no warm figure to compare"
        )
    return Selection(chosen, len(records), by_run=True)


def median_tok_s(selection: Selection) -> tuple[float | None, str]:
    """The median tok/s of the selected records, as the gate folds its warm legs."""
    values = []
    lacking = []
    for rec, rwhere in selection.records:
        value, _ = tok_s_field(rec, rwhere)
        if value is not None:
            values.append(value)
        else:
            lacking.append(rwhere)
    how = selection.description
    if not values:
        return None, f"not recorded: no tok_s on {how}"
    if lacking:
        raise InputError(
            f"{lacking[0]}: no tok_s, and {len(lacking)} of {how} lack it; a median over the "
            "others would be another fold"
        )
    return statistics.median(values), f"median tok_s of {how}"


def legs_of(record: Mapping[str, Any], where: str) -> list[Record] | None:
    legs = record.get("legs")
    if legs is None:
        return None
    if not isinstance(legs, list):
        raise limits.WrongKind(where, "legs", legs, "a list of objects", _ONE_RECORD_EACH)
    for i, leg in enumerate(legs):
        if not isinstance(leg, dict):
            raise limits.WrongKind(where, f"legs[{i}]", leg, "an object", _ONE_RECORD_EACH)
    if not legs:
        raise InputError(f"{where}: legs is empty")
    return [(leg, f"{where}: legs[{i}]") for i, leg in enumerate(legs)]


def arm_tok_s(record: Mapping[str, Any], where: str) -> tuple[float | None, str]:
    """An arm record's tok/s, checked against its legs as our own arm's is.

    The recorded figure (``metrics.output_throughput_tok_s`` as the gate writes it, or a
    top-level one) must be the median tok_s of the warm legs (run > 1) to 1e-9, and
    ``warm_legs`` / ``cold_legs_discarded`` must match; else the record is refused with both
    figures. Without a recorded figure the legs' median is used.
    """
    metrics = record.get("metrics")
    recorded, key = None, None
    if isinstance(metrics, dict):
        recorded, key = tok_s_field(metrics, f"{where}: metrics")
        key = key and f"metrics.{key}"
    if recorded is None:
        recorded, key = tok_s_field(record, where)
    legs = legs_of(record, where)
    if legs is None:
        if recorded is None:
            return (
                None,
                "not recorded: no output_throughput_tok_s, tok_s, output_throughput or legs",
            )
        return recorded, str(key)
    selection = warm(legs)
    median, how = median_tok_s(selection)
    how = how.replace("records", "legs")
    # Leg counts are checked only where the legs say which are warm (a run field on each).
    counts = selection.by_run
    warm_legs = _warm_legs(record.get("warm_legs"), where)
    cold = record.get("cold_legs_discarded")
    if cold is not None:
        cold = limits.count(where, "cold_legs_discarded", cold, _TAKE_AGAIN)
    recorded_fold = RecordedFold(
        recorded, str(key), warm_legs if counts else None, cold if counts else None
    )
    warm_indices = [
        i for i, (leg, _) in enumerate(legs) if not counts or (run_number(leg, "") or 0) > 1
    ]
    problems = disagreements(
        recorded_fold,
        warm_indices,
        len(legs),
        median,
        rule="run > 1",
        chosen=selection.description.replace("records", "legs"),
    )
    if problems:
        raise RefusedError(
            f"{where}: the oracle's recorded throughput fold does not come out of its own legs: "
            + "; ".join(problems)
            + ". The record was edited or its legs belong to another run; take it again"
        )
    if recorded is not None:
        return recorded, f"{key} (= {how})"
    return median, how


_TAKE_AGAIN = "take the record again from the gate"


def _warm_legs(value: Any, where: str) -> int | list[int] | None:
    """A record's ``warm_legs``: how many legs were warm, or which (0-based indices); each a
    count, so one of the wrong kind or negative is malformed as anywhere else."""
    if value is None:
        return None
    if isinstance(value, list):
        return [
            limits.count(where, f"warm_legs[{i}]", item, _TAKE_AGAIN)
            for i, item in enumerate(value)
        ]
    return limits.count(where, "warm_legs", value, _TAKE_AGAIN)
