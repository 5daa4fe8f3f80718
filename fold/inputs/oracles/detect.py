"""Which engine wrote an oracle file, told from its content (``--vs NAME:KIND`` overrides)."""

from __future__ import annotations

from fold.errors import InputError
from fold.inputs.oracles.registry import ALIASES, ENGINES, KINDS, shows
from fold.inputs.oracles.source import OracleFile


def normalize_kind(kind: str, *, where: str = "--vs") -> str:
    """``vllm``, ``sglang`` or ``llamacpp`` (``llama.cpp``, ``llama-cpp`` accepted)."""
    canonical = ALIASES.get(kind.strip().lower())
    if canonical is None:
        raise InputError(f"{where}: unknown engine kind {kind!r}; use one of {', '.join(KINDS)}")
    return canonical


def _declared(doc: OracleFile) -> set[str]:
    """Kinds named by the records' own ``engine`` field."""
    found = set()
    for record, _ in doc.records:
        engine = record.get("engine")
        if isinstance(engine, str) and engine.strip().lower() in ALIASES:
            found.add(ALIASES[engine.strip().lower()])
    return found


def detect(doc: OracleFile, given: str | None = None) -> str:
    """The kind ``doc`` shows; ``given`` must agree with it when the content tells."""
    declared = _declared(doc)
    found = declared or {kind for kind in ENGINES if shows(kind, doc)}
    if len(found) > 1:
        raise InputError(
            f"{doc.where}: the content shows {' and '.join(sorted(found))} data; give one engine "
            "per file"
        )
    if given is not None:
        given = normalize_kind(given, where=doc.where)
        if found and given not in found:
            raise InputError(
                f"{doc.where}: the kind is given as {given} but the content is {found.pop()} "
                "data; fix the :KIND in --vs or the file"
            )
        return given
    if not found:
        raise InputError(
            f"{doc.where}: cannot tell the engine from the content (no vllm:/llamacpp: counters, "
            "no SGLang spec_* or accept_length fields, no /completion timings, no "
            "bench result keys, no 'engine' field); give it as --vs NAME:KIND=PATH with KIND "
            f"one of {', '.join(KINDS)}"
        )
    return found.pop()
