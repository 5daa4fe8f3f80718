"""Oracle arms (vLLM, SGLang, llama.cpp) read into one set of figures in one unit.

Every engine's acceptance is brought to the units of ``/work/shared/reference/acceptance-units.md``:

* ``S`` (``steps``): (request, verify step) pairs that carried at least one draft token;
* ``P`` (``proposed``): draft tokens verified;
* ``A`` (``accepted``): draft tokens accepted, never counting the bonus token;
* draft acceptance rate ``A/P`` and mean acceptance length ``1 + A/S`` (vLLM's unit, bonus
  token included);
* SGLang's per-request ``spec_accept_length`` (completion_tokens / spec_verify_ct, which also
  counts the token prefill produced) is a different unit: it is kept in its own field,
  ``completion_tokens_per_step``, and converted to ``1 + A/S`` only when the counts allow it.

A figure that the input does not carry is ``None`` ("not recorded"), never 0; ``sources`` says
where each figure came from, or why it is missing. The accepted input shapes are documented in
``docs/oracles.md``. Nothing here prints.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from fold import acceptance as formulas
from fold.errors import InputError, RefusedError
from fold.uncertainty import Leg

KINDS = ("vllm", "sglang", "llamacpp")
OURS_KIND = "ours"

_KIND_ALIASES = {
    "vllm": "vllm",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "llama.cpp": "llamacpp",
    "llama-cpp": "llamacpp",
    "llama_cpp": "llamacpp",
}

# Counter kinds (vLLM and llama.cpp share one schema under different prefixes).
_PREFIXES = {"vllm": "vllm:", "llamacpp": "llamacpp:"}
_DRAFTS = "spec_decode_num_drafts"
_DRAFT_TOKENS = "spec_decode_num_draft_tokens"
_ACCEPTED = "spec_decode_num_accepted_tokens"
_PER_POS = "spec_decode_num_accepted_tokens_per_pos"
_COUNTER_BASES = (_DRAFTS, _DRAFT_TOKENS, _ACCEPTED, _PER_POS)

# SGLang record fields, in order of preference where there are synonyms.
_SG_ACCEPT_LENGTH = ("spec_accept_length", "accept_length")
_SG_ACCEPTED = ("spec_accepted_drafts", "spec_num_correct_drafts")
_SG_PROPOSED = ("spec_proposed_drafts",)
_SG_VERIFY = ("spec_verify_ct",)
_SG_COMPLETION = ("completion_tokens",)
_SG_SPECIFIC = (*_SG_ACCEPT_LENGTH, *_SG_ACCEPTED, *_SG_PROPOSED, *_SG_VERIFY)
_TOK_S_FIELDS = ("output_throughput_tok_s", "tok_s", "output_throughput")


# --------------------------------------------------------------------------------------------
# The figures
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArmFigures:
    """One arm's throughput and acceptance, in the reference units; ``None`` = not recorded.

    ``per_position[i]`` is the number of steps whose draft position ``i`` was accepted (position
    0 first); ``per_position_rate`` divides it by ``steps``. ``completion_tokens_per_step`` is
    SGLang's own per-request unit and is never mixed with ``mean_acceptance_length``.
    ``verify_steps_per_s`` is ``output_throughput_tok_s / mean_acceptance_length``.
    """

    name: str
    kind: str
    output_throughput_tok_s: float | None = None
    steps: int | None = None
    proposed: int | None = None
    accepted: int | None = None
    accept_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position: tuple[int, ...] | None = None
    completion_tokens_per_step: float | None = None
    verify_steps_per_s: float | None = None
    sources: dict[str, str] = field(default_factory=dict, hash=False, compare=True)
    notes: tuple[str, ...] = ()
    legs: tuple[Leg, ...] | None = field(default=None, hash=False, compare=False, repr=False)
    """Per-leg sums for the bootstrap when the input has legs; None when known by totals."""

    @property
    def per_position_rate(self) -> tuple[float, ...] | None:
        """Unconditional per-position rate ``per_position[i] / steps``; None if not recorded."""
        if self.per_position is None or not self.steps:
            return None
        return tuple(count / self.steps for count in self.per_position)

    def to_json(self) -> dict[str, Any]:
        """A plain dict for the ``oracles`` block: None where a figure is not recorded."""
        rates = self.per_position_rate
        return {
            "name": self.name,
            "kind": self.kind,
            "output_throughput_tok_s": _finite_or_none(self.output_throughput_tok_s),
            "steps": self.steps,
            "proposed": self.proposed,
            "accepted": self.accepted,
            "accept_rate": _finite_or_none(self.accept_rate),
            "mean_acceptance_length": _finite_or_none(self.mean_acceptance_length),
            "per_position": None if self.per_position is None else list(self.per_position),
            "per_position_rate": None if rates is None else [_finite_or_none(r) for r in rates],
            "completion_tokens_per_step": _finite_or_none(self.completion_tokens_per_step),
            "verify_steps_per_s": _finite_or_none(self.verify_steps_per_s),
            "sources": dict(self.sources),
            "notes": list(self.notes),
        }


def _finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return value


def arm_from_counts(
    name: str,
    kind: str,
    *,
    tok_s: float | None = None,
    steps: int | None = None,
    proposed: int | None = None,
    accepted: int | None = None,
    per_position: Sequence[int] | None = None,
    completion_tokens_per_step: float | None = None,
    sources: Mapping[str, str] | None = None,
    notes: Iterable[str] = (),
    where: str = "<input>",
    labels: Mapping[str, str] | None = None,
) -> ArmFigures:
    """Check the counts against each other and derive the rates; the one way to build figures.

    Our own arm is built with ``kind="ours"``. ``sources`` maps a figure's field name
    (``tok_s``, ``steps``, ``proposed``, ``accepted``, ``per_position``,
    ``completion_tokens_per_step``) to where it came from; the derived figures' sources are
    filled in here. ``where`` names the input in error messages and ``labels`` (same keys) the
    counters or fields, e.g. ``{"accepted": "vllm:spec_decode_num_accepted_tokens_total"}``.

    Raises RefusedError when the counts contradict each other (accepted > draft tokens, zero
    drafts, fewer draft tokens than drafts, per-position counts not summing to accepted) and
    InputError when a value is not a count or not a finite positive rate.
    """
    src = dict(sources or {})
    names = dict(labels or {})
    label = {
        "steps": names.get("steps", "drafts (S)"),
        "proposed": names.get("proposed", "draft tokens (P)"),
        "accepted": names.get("accepted", "accepted tokens (A)"),
    }
    for key, value in (("steps", steps), ("proposed", proposed), ("accepted", accepted)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise InputError(
                f"{where}: {label[key]} = {value!r} is not a count (a non-negative integer); "
                "fix the input"
            )
    if tok_s is not None and (not math.isfinite(tok_s) or tok_s <= 0):
        raise InputError(
            f"{where}: tok/s = {tok_s!r} ({src.get('tok_s', 'throughput')}) must be a finite "
            "positive number; fix the input or leave the throughput out"
        )
    if completion_tokens_per_step is not None and (
        not math.isfinite(completion_tokens_per_step) or completion_tokens_per_step <= 0
    ):
        raise InputError(
            f"{where}: {names.get('completion_tokens_per_step', 'accept length')} = "
            f"{completion_tokens_per_step!r} must be a finite positive number"
        )

    fix = "the counters do not come from one run of one server; take them again"
    if accepted is not None and proposed is not None and accepted > proposed:
        raise RefusedError(
            f"{where}: {label['accepted']} = {accepted} exceeds {label['proposed']} = {proposed}: "
            f"more draft tokens accepted than proposed is impossible; {fix}"
        )
    if steps == 0 or (steps is None and proposed == 0):
        nonzero = [
            f"{label[key]} = {value}"
            for key, value in (("proposed", proposed), ("accepted", accepted))
            if value
        ]
        if nonzero:
            raise RefusedError(
                f"{where}: {label['steps']} = 0 but {', '.join(nonzero)}: tokens without drafts "
                f"are impossible; {fix}"
            )
        zero = label["steps"] if steps == 0 else label["proposed"]
        raise RefusedError(
            f"{where}: {zero} = 0: the arm made no speculative step, so it has no "
            "acceptance to compare (scrapes swapped, taken from an idle server, or "
            "speculative decoding off); drop the acceptance counters to compare tok/s only"
        )
    if steps is not None and proposed is not None and proposed < steps:
        raise RefusedError(
            f"{where}: {label['proposed']} = {proposed} is less than {label['steps']} = {steps}: "
            f"every counted step carries at least one draft token; {fix}"
        )

    per_pos: tuple[int, ...] | None = None
    if per_position is not None:
        per_pos = tuple(per_position)
        pp_label = names.get("per_position", "per-position accepted counts")
        for i, count in enumerate(per_pos):
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise InputError(f"{where}: {pp_label}[{i}] = {count!r} is not a count")
            if steps is not None and count > steps:
                raise RefusedError(
                    f"{where}: {pp_label}[{i}] = {count} exceeds {label['steps']} = {steps}: "
                    f"a position cannot be accepted in more steps than there were; {fix}"
                )
        if accepted is not None and sum(per_pos) != accepted:
            raise RefusedError(
                f"{where}: {pp_label} sum to {sum(per_pos)} but {label['accepted']} = "
                f"{accepted}; {fix}"
            )

    accept_rate = None
    if accepted is not None and proposed:
        accept_rate = formulas.accept_rate(accepted, proposed)
        src["accept_rate"] = "A/P"
    else:
        src.setdefault(
            "accept_rate", _missing_because(("accepted", accepted), ("proposed", proposed))
        )
    mean_len = None
    if accepted is not None and steps:
        mean_len = formulas.mean_acceptance_length(accepted, steps)
        src["mean_acceptance_length"] = "1 + A/S"
    else:
        src.setdefault(
            "mean_acceptance_length", _missing_because(("accepted", accepted), ("steps", steps))
        )
    steps_per_s = None
    if tok_s is not None and mean_len is not None:
        steps_per_s = tok_s / mean_len
        src["verify_steps_per_s"] = "tok/s / (1 + A/S)"
    else:
        src["verify_steps_per_s"] = _missing_because(
            ("tok/s", tok_s), ("mean acceptance length", mean_len)
        )
    for key, value in (
        ("tok_s", tok_s),
        ("steps", steps),
        ("proposed", proposed),
        ("accepted", accepted),
        ("per_position", per_pos),
        ("completion_tokens_per_step", completion_tokens_per_step),
    ):
        if value is None:
            src.setdefault(key, "not recorded")
    return ArmFigures(
        name=name,
        kind=kind,
        output_throughput_tok_s=None if tok_s is None else float(tok_s),
        steps=steps,
        proposed=proposed,
        accepted=accepted,
        accept_rate=accept_rate,
        mean_acceptance_length=mean_len,
        per_position=per_pos,
        completion_tokens_per_step=(
            None if completion_tokens_per_step is None else float(completion_tokens_per_step)
        ),
        verify_steps_per_s=steps_per_s,
        sources=src,
        notes=tuple(notes),
    )


def _missing_because(*inputs: tuple[str, object]) -> str:
    missing = [name for name, value in inputs if value is None]
    if missing:
        return "not recorded: no " + " and no ".join(missing)
    return "not recorded"


# --------------------------------------------------------------------------------------------
# --vs NAME[:KIND]=PATH
# --------------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"[^\s:=]+")


def normalize_kind(kind: str, *, where: str = "--vs") -> str:
    """``vllm``, ``sglang`` or ``llamacpp`` (``llama.cpp``, ``llama-cpp`` accepted)."""
    canonical = _KIND_ALIASES.get(kind.strip().lower())
    if canonical is None:
        raise InputError(f"{where}: unknown engine kind {kind!r}; use one of {', '.join(KINDS)}")
    return canonical


def parse_vs_spec(text: str) -> tuple[str, str | None, str]:
    """Split ``NAME=PATH`` or ``NAME:KIND=PATH`` into ``(name, kind or None, path)``.

    The split is at the first ``=``, so the path may itself hold ``=`` or ``:``.
    """
    where = f"--vs {text!r}"
    head, sep, path = text.partition("=")
    if not sep or not path:
        raise InputError(f"{where}: expected NAME=PATH or NAME:KIND=PATH, e.g. vllm=vllm-arm.json")
    name, colon, kind_text = head.partition(":")
    if not _NAME_RE.fullmatch(name):
        raise InputError(
            f"{where}: the arm name {name!r} must be non-empty without spaces, ':' or '='"
        )
    kind = normalize_kind(kind_text, where=where) if colon else None
    return name, kind, path


# --------------------------------------------------------------------------------------------
# Reading a file
# --------------------------------------------------------------------------------------------


def load_oracle(name: str, path: str | os.PathLike[str], kind: str | None = None) -> ArmFigures:
    """Read one oracle arm from ``path``; the kind is detected from the content unless given."""
    where = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise InputError(
            f"{where}: cannot read the oracle arm ({exc.strerror}); check --vs"
        ) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{where}: not UTF-8 text (byte {exc.start}); give a JSON record, SGLang JSONL or "
            "a Prometheus text scrape"
        ) from exc
    return read_oracle(name, text, kind, where=where)


def read_oracle(
    name: str, text: str, kind: str | None = None, *, where: str = "<input>"
) -> ArmFigures:
    """Like :func:`load_oracle`, from the text of the file."""
    if kind is not None:
        kind = normalize_kind(kind, where=where)
    parsed = _parse(text, where)
    detected = _detect(parsed, where, given=kind)
    if parsed.form == "prometheus":
        return _figures_from_prometheus(name, detected, parsed.scrapes, where)
    if parsed.form == "record":
        assert parsed.record is not None
        if detected == "sglang":
            return _figures_from_sglang(name, [(parsed.record, where)], where)
        figures = _figures_from_record(name, detected, parsed.record, where)
        return replace(figures, legs=_record_legs(parsed.record, where))
    return _figures_from_sglang(name, parsed.records, where)


def detect_kind(text: str, *, where: str = "<input>") -> str:
    """The engine kind a file's content shows: ``vllm``, ``sglang`` or ``llamacpp``."""
    return _detect(_parse(text, where), where, given=None)


@dataclass
class _Parsed:
    form: str  # "record" (one JSON object), "records" (JSONL / JSON array), "prometheus"
    record: dict[str, Any] | None = None
    records: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    scrapes: list[_Scrape] = field(default_factory=list)


def _parse(text: str, where: str) -> _Parsed:
    stripped = text.lstrip()
    if not stripped:
        raise InputError(f"{where}: the file is empty; give the oracle's record, legs or scrape")
    if stripped[0] in "{[":
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            return _Parsed("records", records=_parse_jsonl(text, where))
        if isinstance(doc, dict):
            return _Parsed("record", record=doc)
        if isinstance(doc, list):
            records = []
            for i, item in enumerate(doc):
                if not isinstance(item, dict):
                    raise InputError(f"{where}: [{i}] is {type(item).__name__}, not an object")
                records.append((item, f"{where}: [{i}]"))
            return _Parsed("records", records=records)
    return _Parsed("prometheus", scrapes=parse_prometheus_text(text, where=where))


def _parse_jsonl(text: str, where: str) -> list[tuple[dict[str, Any], str]]:
    records = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InputError(
                f"{where}:{lineno}: not JSON ({exc.msg} at column {exc.colno}); the file must "
                "be one JSON object, a JSON array, or JSONL with one object per line"
            ) from exc
        if not isinstance(item, dict):
            raise InputError(f"{where}:{lineno}: a JSONL line must be an object")
        records.append((item, f"{where}:{lineno}"))
    return records


def _detect(parsed: _Parsed, where: str, *, given: str | None) -> str:
    found: set[str] = set()
    if parsed.form == "prometheus":
        for scrape in parsed.scrapes:
            found |= scrape.kinds
        what = "the scrape"
    elif parsed.form == "record":
        assert parsed.record is not None
        found = _record_kinds(parsed.record, where)
        what = "the record"
    else:
        if any(_has_any(_flatten_sglang(rec), _SG_SPECIFIC) for rec, _ in parsed.records):
            found = {"sglang"}
        what = "the records"
    if len(found) > 1:
        raise InputError(
            f"{where}: {what} mix {' and '.join(sorted(found))} counters; give one engine per file"
        )
    if given is not None:
        if found and given not in found:
            raise InputError(
                f"{where}: the kind is given as {given} but {what} hold {found.pop()} data; fix "
                "the :KIND in --vs or the file"
            )
        if given == "sglang" and parsed.form == "prometheus":
            raise InputError(f"{where}: SGLang input must be JSON/JSONL records, not a scrape")
        if given != "sglang" and parsed.form == "records":
            raise InputError(
                f"{where}: a {given} arm must be one JSON record or a Prometheus scrape, not "
                "JSONL records"
            )
        return given
    if not found:
        raise InputError(
            f"{where}: cannot tell the engine kind from the content (no vllm:/llamacpp: "
            "spec_decode counters, no SGLang spec_* or accept_length fields, no 'engine' field); "
            f"give it as --vs NAME:KIND=PATH with KIND one of {', '.join(KINDS)}"
        )
    return found.pop()


def _record_kinds(record: dict[str, Any], where: str) -> set[str]:
    found: set[str] = set()
    engine = record.get("engine")
    if isinstance(engine, str) and engine.strip().lower() in _KIND_ALIASES:
        found.add(_KIND_ALIASES[engine.strip().lower()])
    metrics = record.get("metrics")
    snapshots: list[Any] = []
    if isinstance(metrics, dict):
        snapshots = [metrics["before"], metrics["after"]] if _is_pair(metrics) else [metrics]
    elif isinstance(metrics, str):
        snapshots = [metrics]
    for snap in snapshots:
        if isinstance(snap, dict):
            found |= _mapping_kinds(snap)
        elif isinstance(snap, str):
            for scrape in parse_prometheus_text(snap, where=f"{where}: metrics"):
                found |= scrape.kinds
    if not found and _has_any(_flatten_sglang(record), _SG_SPECIFIC):
        found.add("sglang")
    return found


def _mapping_kinds(mapping: Mapping[str, Any]) -> set[str]:
    found = set()
    for key in mapping:
        for kind, prefix in _PREFIXES.items():
            if isinstance(key, str) and key.startswith(prefix + "spec_decode_"):
                found.add(kind)
    return found


def _has_any(record: Mapping[str, Any], keys: Iterable[str]) -> bool:
    return any(key in record for key in keys)


# --------------------------------------------------------------------------------------------
# Prometheus text exposition
# --------------------------------------------------------------------------------------------


@dataclass
class _Scrape:
    """One scrape's spec_decode samples: (metric name, labels) -> value, in file order."""

    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)
    first_line: int = 0

    @property
    def kinds(self) -> set[str]:
        return _mapping_kinds({name: None for name, _ in self.samples})


_SAMPLE_RE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$"
)
_LABEL_RE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_prometheus_text(text: str, *, where: str = "<input>") -> list[_Scrape]:
    """The spec_decode samples of one or two concatenated scrapes, in order.

    A new scrape starts where a series (metric name and labels) that the current scrape already
    holds appears again, so ``cat before.prom after.prom`` gives two scrapes. Lines of other
    metrics are skipped. More than two scrapes is an InputError: which pair is the run's would be
    a guess.
    """
    scrapes: list[_Scrape] = []
    current: _Scrape | None = None
    for lineno, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE_RE.match(line)
        if match is None:
            raise InputError(
                f"{where}:{lineno}: not a Prometheus text exposition line: {line[:60]!r}; give "
                "the /metrics scrape as served"
            )
        name = match["name"]
        if not any(name.startswith(p + "spec_decode_") for p in _PREFIXES.values()):
            continue
        if name.endswith("_created"):
            continue
        labels = _parse_labels(match["labels"] or "", f"{where}:{lineno}")
        try:
            value = float(match["value"])
        except ValueError:
            raise InputError(
                f"{where}:{lineno}: {name} has value {match['value']!r}, not a number"
            ) from None
        key = (name, labels)
        if current is None or key in current.samples:
            current = _Scrape(first_line=lineno)
            scrapes.append(current)
            if len(scrapes) > 2:
                raise InputError(
                    f"{where}:{lineno}: a third scrape starts here ({name} repeats); give one "
                    "scrape, or two (before and after the run)"
                )
        current.samples[key] = value
    if not scrapes:
        # A scrape of a server without speculative decoding: valid, but no figures.
        scrapes.append(_Scrape())
    return scrapes


def _parse_labels(text: str, where: str) -> tuple[tuple[str, str], ...]:
    labels = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _LABEL_RE.match(text, pos)
        if match is None:
            raise InputError(f"{where}: cannot read the labels {{{text}}}")
        value = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], match.group(2))
        labels.append((match.group(1), value))
        pos = match.end()
    return tuple(sorted(labels))


# --------------------------------------------------------------------------------------------
# Counter snapshots (vLLM / llama.cpp)
# --------------------------------------------------------------------------------------------


@dataclass
class _Snapshot:
    """Counter values by base name (no prefix, no ``_total``); per-pos as a list."""

    values: dict[str, int | list[int]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # base -> name as written


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where} = {value!r} is not a number; counters are non-negative counts")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise InputError(f"{where} = {value!r} is not a whole count")
        value = int(value)
    if value < 0:
        raise InputError(f"{where} = {value} is negative; counters are non-negative counts")
    return value


def _base_name(key: str, prefix: str) -> str | None:
    if not key.startswith(prefix):
        return None
    base = key[len(prefix) :]
    if base.endswith("_total"):
        base = base[: -len("_total")]
    return base if base in _COUNTER_BASES else None


def _per_pos_list(value: Any, where: str) -> list[int]:
    if isinstance(value, list):
        return [_count(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        by_pos: dict[int, int] = {}
        for key, count in value.items():
            try:
                pos = int(key)
            except (TypeError, ValueError):
                raise InputError(
                    f"{where}: position {key!r} is not an integer; give {{position: count}}"
                ) from None
            if pos in by_pos:
                raise InputError(f"{where}: position {pos} is given twice")
            by_pos[pos] = _count(count, f"{where}[{key!r}]")
        return _positions_to_list(by_pos, where)
    raise InputError(f"{where} must be a list of counts or a {{position: count}} object")


def _positions_to_list(by_pos: Mapping[int, int], where: str) -> list[int]:
    if sorted(by_pos) != list(range(len(by_pos))):
        raise InputError(
            f"{where}: positions {sorted(by_pos)} are not 0..{len(by_pos) - 1} without gaps"
        )
    return [by_pos[i] for i in range(len(by_pos))]


def _snapshot_from_mapping(mapping: Mapping[str, Any], prefix: str, where: str) -> _Snapshot:
    snap = _Snapshot()
    for key, value in mapping.items():
        base = _base_name(key, prefix) if isinstance(key, str) else None
        if base is None:
            continue
        if base in snap.names:
            raise InputError(
                f"{where}: both {snap.names[base]} and {key} are given; keep one of them"
            )
        snap.names[base] = key
        field_where = f"{where}.{key}"
        if base == _PER_POS:
            snap.values[base] = _per_pos_list(value, field_where)
        else:
            snap.values[base] = _count(value, field_where)
    return snap


def _snapshot_from_scrape(scrape: _Scrape, prefix: str, where: str) -> _Snapshot:
    snap = _Snapshot()
    per_pos: dict[int, int] = {}
    series: dict[str, int] = {}
    for (name, labels), value in scrape.samples.items():
        base = _base_name(name, prefix)
        if base is None:
            continue
        series_where = f"{where}:{scrape.first_line}+ {name}"
        count = _count(value, series_where)
        if base in snap.names and snap.names[base] != name:
            raise InputError(f"{where}: both {snap.names[base]} and {name} appear in one scrape")
        snap.names[base] = name
        series[base] = series.get(base, 0) + 1
        if base == _PER_POS:
            label_map = dict(labels)
            if "position" not in label_map:
                raise InputError(f"{series_where}: a per-position sample without a position label")
            try:
                pos = int(label_map["position"])
            except ValueError:
                raise InputError(
                    f"{series_where}: position label {label_map['position']!r} is not an integer"
                ) from None
            per_pos[pos] = per_pos.get(pos, 0) + count
        else:
            snap.values[base] = int(snap.values.get(base, 0)) + count
    if per_pos:
        snap.values[_PER_POS] = _positions_to_list(per_pos, f"{where}: {snap.names[_PER_POS]}")
    return snap


def _is_pair(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"before", "after"}


def _delta(before: _Snapshot, after: _Snapshot, where: str) -> _Snapshot:
    if set(before.values) != set(after.values):
        only_after = sorted(after.names[b] for b in set(after.values) - set(before.values))
        only_before = sorted(before.names[b] for b in set(before.values) - set(after.values))
        detail = "; ".join(
            part
            for part in (
                f"only after: {', '.join(only_after)}" if only_after else "",
                f"only before: {', '.join(only_before)}" if only_before else "",
            )
            if part
        )
        raise InputError(
            f"{where}: the before and after snapshots hold different counters ({detail}); "
            "scrape the same server twice"
        )
    out = _Snapshot(names=dict(after.names))
    for base, after_value in after.values.items():
        before_value = before.values[base]
        name = after.names[base]
        if isinstance(after_value, list) or isinstance(before_value, list):
            assert isinstance(after_value, list) and isinstance(before_value, list)
            if len(after_value) != len(before_value):
                raise InputError(
                    f"{where}: {name} has {len(before_value)} positions before and "
                    f"{len(after_value)} after; scrape the same server twice"
                )
            diffs = [a - b for a, b in zip(after_value, before_value, strict=True)]
            for pos, diff in enumerate(diffs):
                if diff < 0:
                    _refuse_negative(where, f"{name}[{pos}]", before_value[pos], after_value[pos])
            out.values[base] = diffs
        else:
            if after_value < before_value:
                _refuse_negative(where, name, before_value, after_value)
            out.values[base] = after_value - before_value
    return out


def _refuse_negative(where: str, name: str, before: int, after: int) -> None:
    raise RefusedError(
        f"{where}: {name} went down from {before} (before) to {after} (after): the counter was "
        "reset between the scrapes (server restart) or before/after are swapped; re-run with "
        "both scrapes around one run of one server process"
    )


def _figures_from_snapshot(
    name: str,
    kind: str,
    snap: _Snapshot,
    how: str,
    where: str,
    *,
    tok_s: float | None,
    tok_s_source: str,
    notes: Sequence[str],
) -> ArmFigures:
    prefix = _PREFIXES[kind]
    sources = {"tok_s": tok_s_source}
    fields = {
        "steps": _DRAFTS,
        "proposed": _DRAFT_TOKENS,
        "accepted": _ACCEPTED,
        "per_position": _PER_POS,
    }
    values: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for figure, base in fields.items():
        if base in snap.values:
            values[figure] = snap.values[base]
            labels[figure] = snap.names[base] + (" delta" if "delta" in how else "")
            sources[figure] = f"{snap.names[base]} {how}"
        else:
            values[figure] = None
            sources[figure] = f"not recorded: no {prefix}{base} counter"
    sources["completion_tokens_per_step"] = "not recorded: SGLang's unit only"
    return arm_from_counts(
        name,
        kind,
        tok_s=tok_s,
        steps=values["steps"],
        proposed=values["proposed"],
        accepted=values["accepted"],
        per_position=values["per_position"],
        sources=sources,
        notes=notes,
        where=where,
        labels=labels,
    )


_SINGLE_SCRAPE_NOTE = (
    "single scrape: counters are cumulative since server start and include warm-up traffic; "
    "scrape before and after the run for the run's own figures"
)


def _figures_from_prometheus(
    name: str,
    kind: str,
    scrapes: list[_Scrape],
    where: str,
    *,
    tok_s: float | None = None,
    tok_s_source: str = "not recorded: a Prometheus scrape carries no tok/s",
) -> ArmFigures:
    prefix = _PREFIXES[kind]
    if len(scrapes) == 2:
        before = _snapshot_from_scrape(scrapes[0], prefix, where)
        after = _snapshot_from_scrape(scrapes[1], prefix, where)
        snap = _delta(before, after, where)
        how = "delta (after - before scrape)"
        notes: list[str] = []
    else:
        snap = _snapshot_from_scrape(scrapes[0], prefix, where)
        how = "(single scrape, cumulative)"
        notes = [_SINGLE_SCRAPE_NOTE] if snap.values else []
    return _figures_from_snapshot(
        name, kind, snap, how, where, tok_s=tok_s, tok_s_source=tok_s_source, notes=notes
    )


def _figures_from_record(name: str, kind: str, record: dict[str, Any], where: str) -> ArmFigures:
    tok_s, tok_s_source = _record_tok_s(record, where)
    prefix = _PREFIXES[kind]
    metrics = record.get("metrics")
    mwhere = f"{where}: metrics"
    if metrics is None:
        return _figures_from_snapshot(
            name,
            kind,
            _Snapshot(),
            "",
            where,
            tok_s=tok_s,
            tok_s_source=tok_s_source,
            notes=(),
        )
    if isinstance(metrics, str):
        scrapes = parse_prometheus_text(metrics, where=mwhere)
        return _figures_from_prometheus(
            name, kind, scrapes, mwhere, tok_s=tok_s, tok_s_source=tok_s_source
        )
    if not isinstance(metrics, dict):
        raise InputError(f"{mwhere} must be an object of counters or a Prometheus text string")
    if _is_pair(metrics):
        halves = []
        for half in ("before", "after"):
            value = metrics[half]
            hwhere = f"{mwhere}.{half}"
            if isinstance(value, str):
                scrapes = parse_prometheus_text(value, where=hwhere)
                if len(scrapes) != 1:
                    raise InputError(f"{hwhere}: holds {len(scrapes)} scrapes; give one")
                halves.append(_snapshot_from_scrape(scrapes[0], prefix, hwhere))
            elif isinstance(value, dict):
                halves.append(_snapshot_from_mapping(value, prefix, hwhere))
            else:
                raise InputError(f"{hwhere} must be an object of counters or a scrape text")
        snap = _delta(halves[0], halves[1], mwhere)
        how = "delta (metrics.after - metrics.before)"
    else:
        pairs = {k: v for k, v in metrics.items() if _base_name(str(k), prefix) and _is_pair(v)}
        singles = {
            k: v for k, v in metrics.items() if _base_name(str(k), prefix) and not _is_pair(v)
        }
        if pairs and singles:
            raise InputError(
                f"{mwhere}: {', '.join(sorted(pairs))} are before/after pairs but "
                f"{', '.join(sorted(singles))} are single values; a single value may be cumulative "
                "since server start, so give every counter the same way"
            )
        if pairs:
            before = _snapshot_from_mapping(
                {k: v["before"] for k, v in pairs.items()}, prefix, f"{mwhere}(before)"
            )
            after = _snapshot_from_mapping(
                {k: v["after"] for k, v in pairs.items()}, prefix, f"{mwhere}(after)"
            )
            snap = _delta(before, after, mwhere)
            how = "delta (after - before)"
        else:
            snap = _snapshot_from_mapping(singles, prefix, mwhere)
            how = "(as given)"
    return _figures_from_snapshot(
        name, kind, snap, how, where, tok_s=tok_s, tok_s_source=tok_s_source, notes=()
    )


def _positive_float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where} = {value!r} is not a number")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{where} = {value!r} must be a finite positive number")
    return value


def _record_tok_s(record: Mapping[str, Any], where: str) -> tuple[float | None, str]:
    for key in _TOK_S_FIELDS:
        if record.get(key) is not None:
            return _positive_float(record[key], f"{where}: {key}"), key
    legs = record.get("legs")
    if legs is None:
        return None, "not recorded: no output_throughput_tok_s, tok_s, output_throughput or legs"
    if not isinstance(legs, list) or not all(isinstance(leg, dict) for leg in legs):
        raise InputError(f"{where}: legs must be a list of objects")
    warm, how = _warm([(leg, f"{where}: legs[{i}]") for i, leg in enumerate(legs)], where)
    return _median_tok_s(warm, how.replace("records", "legs"))


def _run_number(record: Mapping[str, Any], where: str) -> int | None:
    run = record.get("run")
    if run is None:
        return None
    if isinstance(run, bool) or not isinstance(run, int):
        raise InputError(f"{where}: run = {run!r} must be an integer (1 is the cold leg)")
    return run


def _warm(
    records: Sequence[tuple[Mapping[str, Any], str]], where: str
) -> tuple[list[tuple[Mapping[str, Any], str]], str]:
    """The warm records: run > 1 when records carry ``run`` (all must), else all of them.

    Also returns how they were chosen, worded to follow "over" or "of" in a source line.
    """
    runs = [_run_number(rec, rwhere) for rec, rwhere in records]
    with_run = [r for r in runs if r is not None]
    if not with_run:
        return list(records), f"the {len(records)} records (no run field: all taken)"
    if len(with_run) != len(runs):
        missing = next(rwhere for (_, rwhere), r in zip(records, runs, strict=True) if r is None)
        raise InputError(
            f"{missing}: no run field while other records have one; give run on every record "
            "or on none"
        )
    warm = [item for item, run in zip(records, runs, strict=True) if run is not None and run > 1]
    return warm, f"the {len(warm)} warm records of {len(records)} (run > 1)"


def _median_tok_s(
    selected: Sequence[tuple[Mapping[str, Any], str]], how: str
) -> tuple[float | None, str]:
    """The median tok/s of the selected records, as the gate folds its warm legs."""
    values = []
    for rec, rwhere in selected:
        for key in _TOK_S_FIELDS:
            if rec.get(key) is not None:
                values.append(_positive_float(rec[key], f"{rwhere}: {key}"))
                break
    if not values:
        return None, f"not recorded: no tok_s on {how}"
    lacking = len(selected) - len(values)
    note = f"; {lacking} lack tok/s" if lacking else ""
    return statistics.median(values), f"median tok_s of {how}{note}"


# --------------------------------------------------------------------------------------------
# SGLang records
# --------------------------------------------------------------------------------------------


def _flatten_sglang(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record with its ``meta_info`` (SGLang's response field) folded in; top level wins."""
    flat: dict[str, Any] = {}
    meta = record.get("meta_info")
    if isinstance(meta, dict):
        flat.update(meta)
    flat.update(record)
    return flat


def _pick(record: Mapping[str, Any], keys: Sequence[str], where: str) -> tuple[Any, str | None]:
    present = [k for k in keys if record.get(k) is not None]
    if not present:
        return None, None
    if len(present) > 1 and len({orjson.dumps(record[k]) for k in present}) > 1:
        raise InputError(
            f"{where}: {' and '.join(present)} disagree "
            f"({', '.join(repr(record[k]) for k in present)}); keep one of them"
        )
    return record[present[0]], present[0]


@dataclass
class _SgRecord:
    where: str
    accept_length: float | None
    accept_length_key: str | None
    verify: int | None
    completion: int | None
    accepted: int | None
    accepted_key: str | None
    proposed: int | None


def _sg_record(raw: Mapping[str, Any], where: str) -> _SgRecord:
    rec = _flatten_sglang(raw)
    length, length_key = _pick(rec, _SG_ACCEPT_LENGTH, where)
    if length is not None:
        length = _positive_float(length, f"{where}: {length_key}")
    counts: dict[str, tuple[int | None, str | None]] = {}
    for figure, keys in (
        ("verify", _SG_VERIFY),
        ("completion", _SG_COMPLETION),
        ("accepted", _SG_ACCEPTED),
        ("proposed", _SG_PROPOSED),
    ):
        value, key = _pick(rec, keys, where)
        counts[figure] = (None if value is None else _count(value, f"{where}: {key}"), key)
    verify, completion = counts["verify"][0], counts["completion"][0]
    accepted, accepted_key = counts["accepted"]
    proposed = counts["proposed"][0]
    if verify is not None and completion is not None:
        if completion < 1 + verify:
            raise RefusedError(
                f"{where}: completion_tokens = {completion} is less than 1 + spec_verify_ct = "
                f"{1 + verify}: every verify step emits a token after the prefill token; the "
                "fields come from different requests"
            )
        if length is not None:
            expected = completion / verify if verify else None
            if expected is not None and abs(length - expected) > max(0.05, 0.01 * expected):
                raise RefusedError(
                    f"{where}: {length_key} = {length} but completion_tokens / spec_verify_ct = "
                    f"{completion}/{verify} = {expected:.4f}: the record mixes units or requests"
                )
    if accepted is not None and proposed is not None and accepted > proposed:
        raise RefusedError(
            f"{where}: {accepted_key} = {accepted} exceeds spec_proposed_drafts = {proposed}: "
            "more drafts accepted than proposed is impossible"
        )
    return _SgRecord(
        where=where,
        accept_length=length,
        accept_length_key=length_key,
        verify=verify,
        completion=completion,
        accepted=accepted,
        accepted_key=accepted_key,
        proposed=proposed,
    )


def _figures_from_sglang(
    name: str, records: Sequence[tuple[dict[str, Any], str]], where: str
) -> ArmFigures:
    if not records:
        raise InputError(f"{where}: no records; give one JSON object per leg or request")
    warm, how = _warm([(_flatten_sglang(r), w) for r, w in records], where)
    tok_s, tok_s_source = _median_tok_s(warm, how)
    recs = [_sg_record(rec, rwhere) for rec, rwhere in warm]
    n = len(recs)
    sources: dict[str, str] = {"tok_s": tok_s_source}
    notes: list[str] = []

    steps = accepted = proposed = None
    if recs and all(r.verify is not None for r in recs):
        steps = sum(r.verify for r in recs if r.verify is not None)
        sources["steps"] = f"sum of spec_verify_ct over {how}"
    else:
        sources["steps"] = f"not recorded: spec_verify_ct missing on some of {how}"
    if recs and all(r.accepted is not None for r in recs):
        accepted = sum(r.accepted for r in recs if r.accepted is not None)
        keys = sorted({r.accepted_key for r in recs if r.accepted_key})
        sources["accepted"] = f"sum of {'/'.join(keys)} over {how}"
    elif recs and all(
        r.accepted is not None or (r.completion is not None and r.verify is not None) for r in recs
    ):
        accepted = 0
        derived = 0
        for r in recs:
            if r.accepted is not None:
                accepted += r.accepted
            else:
                assert r.completion is not None and r.verify is not None
                accepted += r.completion - 1 - r.verify
                derived += 1
        sources["accepted"] = (
            f"sum over {how} of completion_tokens - 1 - spec_verify_ct "
            f"(SGLang accounting; derived on {derived} of {n})"
        )
        notes.append(
            "SGLang accepted drafts derived as completion_tokens - 1 - spec_verify_ct: exact "
            "when no step was cut by a stop condition"
        )
    else:
        sources["accepted"] = (
            "not recorded: neither spec_accepted_drafts nor completion_tokens with "
            f"spec_verify_ct on every one of {how}"
        )
    if recs and all(r.proposed is not None for r in recs):
        proposed = sum(r.proposed for r in recs if r.proposed is not None)
        sources["proposed"] = f"sum of spec_proposed_drafts over {how}"
    else:
        sources["proposed"] = f"not recorded: spec_proposed_drafts missing on some of {how}"
    sources["per_position"] = "not recorded: SGLang records carry no per-position counts"

    per_step = None
    if recs and all(r.completion is not None and r.verify is not None for r in recs):
        total_verify = sum(r.verify or 0 for r in recs)
        if total_verify:
            per_step = formulas.completion_tokens_per_step(
                sum(r.completion or 0 for r in recs), total_verify
            )
            sources["completion_tokens_per_step"] = (
                f"sum completion_tokens / sum spec_verify_ct over {how} (SGLang unit: counts "
                "the prefill token)"
            )
    if per_step is None:
        lengths = [r.accept_length for r in recs if r.accept_length is not None]
        if lengths:
            per_step = statistics.fmean(lengths)
            keys = sorted({r.accept_length_key for r in recs if r.accept_length_key})
            sources["completion_tokens_per_step"] = (
                f"plain mean of {len(lengths)} per-record {'/'.join(keys)} values over {how} "
                "(SGLang unit, counts the prefill token; no counts to weight or convert it)"
            )
        else:
            sources["completion_tokens_per_step"] = "not recorded: no accept length or counts"
    if accepted is None or steps is None:
        sources["mean_acceptance_length"] = (
            "not recorded: the records lack the counts to convert SGLang's accept length to "
            "1 + A/S; it is shown only in the SGLang-unit column"
        )
    figures = arm_from_counts(
        name,
        "sglang",
        tok_s=tok_s,
        steps=steps,
        proposed=proposed,
        accepted=accepted,
        completion_tokens_per_step=per_step,
        sources=sources,
        notes=notes,
        where=where,
    )
    return replace(figures, legs=_sglang_legs(recs, [record for record, _ in warm]))


# --------------------------------------------------------------------------------------------
# Legs for the bootstrap (fold.uncertainty): what an oracle with legs hands over
# --------------------------------------------------------------------------------------------


def _record_legs(record: Mapping[str, Any], where: str) -> tuple[Leg, ...] | None:
    """The warm legs' tok/s, when the record's throughput is their median (not a total)."""
    if any(record.get(key) is not None for key in _TOK_S_FIELDS):
        return None
    legs = record.get("legs")
    if not isinstance(legs, list) or not legs:
        return None
    warm, _ = _warm([(leg, f"{where}: legs[{i}]") for i, leg in enumerate(legs)], where)
    return tuple(Leg(tok_s=_first_tok_s(leg)) for leg, _ in warm)


def _sglang_legs(
    records: Sequence[_SgRecord], raw: Sequence[Mapping[str, Any]]
) -> tuple[Leg, ...] | None:
    """One leg per warm SGLang record (a leg or a request), with its counts and tok/s.

    A count goes to the bootstrap only when every record has it, as for the pooled figure.
    """
    if not records:
        return None
    accepted = [
        r.accepted
        if r.accepted is not None
        else (
            r.completion - 1 - r.verify
            if r.completion is not None and r.verify is not None
            else None
        )
        for r in records
    ]
    columns = {
        "steps": [r.verify for r in records],
        "proposed": [r.proposed for r in records],
        "accepted": accepted,
    }
    complete = {name: values for name, values in columns.items() if None not in values}
    legs = []
    for position, (record, source) in enumerate(zip(records, raw, strict=True)):
        values: dict[str, float] = {}
        if all(r.verify is not None and r.completion is not None for r in records):
            assert record.verify is not None and record.completion is not None
            values = {"completion_tokens": record.completion, "steps": record.verify}
        legs.append(
            Leg(
                requests={name: [values_[position]] for name, values_ in complete.items()},
                values=values,
                tok_s=_first_tok_s(source),
            )
        )
    return tuple(legs)


def _first_tok_s(record: Mapping[str, Any]) -> float | None:
    for key in _TOK_S_FIELDS:
        value = record.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None
