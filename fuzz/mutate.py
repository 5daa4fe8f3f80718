"""Mutations that know the formats: they change an input the way a writer, an edit or a cut
could, where libFuzzer's byte mutations mostly make text no reader gets past.

Every mutator takes bytes and a ``random.Random`` and returns bytes; none raises, whatever the
input (a mutator that raises ends a campaign).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from typing import Any

# Values at the edges of what a count, a time or a ratio may be, as a writer could print them.
EDGE_NUMBERS = [
    "0", "-0", "1", "-1", "2", "7", "63", "64", "65535", "65536", "65537", "2147483647",
    "2147483648", "4294967295", "4294967296", "9007199254740993", str(2**60), str(2**61),
    str(2**62), str(2**63 - 1), str(2**63), str(2**64 - 1), str(2**64), "1" + "0" * 40,
    "9" * 320, "0.5", "1.5", "-0.0", "1e-300", "1e308", "1e309", "-1e309", "1.24938e+06",
    "1764450000.0015", "1796000013.02928", "99999999999", "1e2", "nan", "NaN", "+Inf",
    "Infinity", "-Infinity",
]  # fmt: skip
EDGE_VALUES: list[Any] = [
    0, 1, -1, 7, 65536, 65537, 2**31, 2**32, 2**53 + 1, 2**60, 2**61, 2**62, 2**63 - 1, 2**63,
    2**64, 10**40, 0.0, -0.0, 0.5, 1e-300, 1e308, float("inf"), float("nan"), 1764450000.0015,
    1796000013.02928, True, False, None, "", "1", "x", "warm", "run > 1", "length", [], {},
    [1, 2], {"a": None},
]  # fmt: skip
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def numbers(data: bytes, rng: Any) -> bytes:
    """One number in the text replaced by an edge value."""
    found = list(_NUMBER.finditer(data))
    if not found:
        return data
    match = rng.choice(found)
    return data[: match.start()] + rng.choice(EDGE_NUMBERS).encode() + data[match.end() :]


def lines(data: bytes, rng: Any, extra: list[bytes] | None = None) -> bytes:
    """One line deleted, repeated, moved, torn and glued to the next, or one of ``extra``
    inserted."""
    parts = data.split(b"\n")
    place = rng.randrange(len(parts))
    operation = rng.randrange(6 if extra else 5)
    if operation == 0 and len(parts) > 1:
        del parts[place]
    elif operation == 1:
        parts.insert(place, parts[place])
    elif operation == 2 and len(parts) > 1:
        line = parts.pop(place)
        parts.insert(rng.randrange(len(parts) + 1), line)
    elif operation == 3 and place + 1 < len(parts) and parts[place]:
        parts[place : place + 2] = [parts[place][: rng.randrange(len(parts[place]))]
                                    + parts[place + 1]]  # fmt: skip
    elif operation == 4:
        parts[place] = parts[place].replace(b" ", rng.choice([b"  ", b"\t", b" \r"]), 1)
    elif extra:
        parts.insert(place, rng.choice(extra))
    return b"\n".join(parts)


# -- the engine trace: key=value fields ------------------------------------------------------

_FIELD = re.compile(rb"([A-Za-z_]\w*)=(\[[^\[\]\n]*\]|[^\s\[\]=]+)")


def trace_fields(data: bytes, rng: Any) -> bytes:
    """One ``key=value`` of a trace or run line changed: a value swapped for an edge value, a
    field dropped or repeated, or a step made over again with ``k`` (or ``req``) at an edge
    value and the other counts consistent with it, so the step gets past the line's own
    checks into the fold."""
    parts = data.split(b"\n")
    candidates = [index for index, line in enumerate(parts) if _FIELD.search(line)]
    if not candidates:
        return data
    place = rng.choice(candidates)
    line = parts[place]
    found = list(_FIELD.finditer(line))
    match = rng.choice(found)
    operation = rng.randrange(5)
    if operation == 0:
        value = rng.choice(EDGE_NUMBERS).encode()
        if match.group(2).startswith(b"[") and rng.random() < 0.5:
            value = b"[" + b" ".join([rng.choice(EDGE_NUMBERS).encode()] * rng.randrange(4)) + b"]"
        line = line[: match.start(2)] + value + line[match.end(2) :]
    elif operation == 1:
        line = line[: match.start()] + line[match.end() :]
    elif operation == 2:
        line = line[: match.end()] + b" " + match.group(0) + line[match.end() :]
    elif line.lstrip().startswith(b"[SPECTRACE]"):
        key = b"k" if operation == 3 else b"req"
        line = _consistent_step(line, key, rng)
    else:
        line = line[: match.start(2)] + rng.choice(EDGE_NUMBERS).encode() + line[match.end(2) :]
    parts[place] = line
    return b"\n".join(parts)


def _consistent_step(line: bytes, key: bytes, rng: Any) -> bytes:
    values = {m.group(1): m.group(2) for m in _FIELD.finditer(line)}
    big = rng.choice([b"65536", b"65537", b"2147483648", str(2**63).encode(),
                      str(2**64).encode(), b"1" + b"0" * 40, str(2**62).encode()])  # fmt: skip
    values[key] = big
    if key == b"k":
        accepted = rng.choice([0, 1, 2])
        values[b"acc"] = str(accepted).encode()
        values[b"ns"] = str(accepted + 1).encode()
        values[b"emit"] = b"[" + b" ".join([b"11"] * (accepted + 1)) + b"]"
    order = [b"req", b"pos", b"k", b"ns", b"acc", b"draft", b"emit"]
    keys = [k for k in order if k in values] + [k for k in values if k not in order]
    return b"[SPECTRACE] " + b" ".join(k + b"=" + values[k] for k in keys)


# -- JSON documents ------------------------------------------------------------------------------


def _parse(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return _MISSING


_MISSING = object()


def _nodes(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _nodes(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _nodes(item, (*path, index))
    return found


def _get(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


def json_value(data: bytes, rng: Any, keys: list[str] | None = None) -> bytes:
    """One JSON document (or one line of JSON lines) changed at one place: a value swapped for
    an edge value, a key dropped, renamed or added (from ``keys``), a list item repeated or
    dropped. Written back compact or indented, as the writers do."""
    document = _parse(data)
    if document is not _MISSING:
        return _dump(_change(document, rng, keys or []), rng)
    parts = data.split(b"\n")
    found = [(i, _parse(line)) for i, line in enumerate(parts) if line.strip()[:1] in (b"{", b"[")]
    found = [(i, value) for i, value in found if value is not _MISSING]
    if not found:
        return data
    place, value = rng.choice(found)
    parts[place] = _dump(_change(value, rng, keys or []), rng).replace(b"\n", b"")
    return b"\n".join(parts)


def _change(document: Any, rng: Any, keys: list[str]) -> Any:
    path = rng.choice(_nodes(document))
    operation = rng.randrange(6)
    if not path:
        if isinstance(document, dict) and keys:
            document[rng.choice(keys)] = rng.choice(EDGE_VALUES)
        return document
    parent = _get(document, path[:-1])
    last = path[-1]
    if operation <= 1:
        parent[last] = rng.choice(EDGE_VALUES)
    elif operation == 2:
        del parent[last]
    elif operation == 3 and isinstance(parent, list):
        parent.insert(last, json.loads(json.dumps(parent[last])))
    elif operation == 3 and keys:
        parent[rng.choice(keys)] = parent.pop(last)
    elif operation == 4 and isinstance(parent, dict) and keys:
        parent[rng.choice(keys)] = rng.choice(EDGE_VALUES)
    else:
        value = parent[last]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            parent[last] = rng.choice(EDGE_VALUES)
        elif isinstance(value, int):
            parent[last] = value + rng.choice([-1, 1, 2**31, 2**62, -value, value])
        else:
            parent[last] = value * rng.choice([-1.0, 0.5, 2.0, 1000.0, 1e-3]) + rng.choice(
                [0.0, 1e-6, 0.001]
            )
    return document


def _dump(document: Any, rng: Any) -> bytes:
    try:
        if rng.random() < 0.5:
            return json.dumps(document, separators=(",", ":"), sort_keys=True).encode() + b"\n"
        return json.dumps(document, indent=2).encode() + b"\n"
    except (ValueError, RecursionError, TypeError):
        return b"{}"


def repair_arm(data: bytes) -> bytes:
    """The record's own summaries made to agree with its legs again, as the gate would have
    written them: the warm throughput median, the warm and cold leg counts and the
    ``spec_acceptance`` block over the warm legs (``run > 1``). A mutated leg then reaches the
    fold instead of the first consistency check."""
    try:
        return _repaired(data)
    except (ArithmeticError, ValueError, TypeError, RecursionError):  # a median past a float
        return data


def _repaired(data: bytes) -> bytes:
    document = _parse(data)
    legs = document.get("legs") if isinstance(document, dict) else None
    if not isinstance(legs, list) or not all(isinstance(leg, dict) for leg in legs):
        return data
    warm = [leg for leg in legs if _int(leg.get("run")) and leg["run"] > 1]
    rates = [leg.get("tok_s") for leg in warm]
    if all(_finite(rate) for rate in rates) and rates:
        metrics = document.get("metrics")
        if isinstance(metrics, dict) or metrics is None:
            document["metrics"] = {
                **(metrics or {}),
                "output_throughput_tok_s": statistics.median(rates),
            }
    if "warm_legs" in document:
        document["warm_legs"] = len(warm)
    if "cold_legs_discarded" in document:
        document["cold_legs_discarded"] = len(legs) - len(warm)
    if isinstance(document.get("spec_acceptance"), dict):
        block = _block(warm)
        if block is not None:
            document["spec_acceptance"] = {**document["spec_acceptance"], **block}
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode() + b"\n"


_COUNTERS = {"drafted_request_steps": "spec_drafted_request_steps",
             "drafts_proposed": "spec_drafts_proposed",
             "drafts_accepted": "spec_drafts_accepted"}  # fmt: skip


def _block(warm: list[dict]) -> dict | None:
    if not all(all(_int(leg.get(field)) for field in _COUNTERS.values()) for leg in warm):
        return None

    def figures(legs: list[dict]) -> dict:
        sums = {ours: sum(leg[field] for leg in legs) for ours, field in _COUNTERS.items()}
        steps, proposed = sums["drafted_request_steps"], sums["drafts_proposed"]
        accepted = sums["drafts_accepted"]
        return {
            **sums,
            "accept_rate": accepted / proposed if proposed else None,
            "mean_acceptance_length": (accepted + steps) / steps if steps else None,
        }

    per_leg = [{**figures([leg]), "run": leg["run"]} for leg in warm]
    return {**figures(warm), "warm_legs": len(warm), "per_leg": per_leg}


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return _int(value) or (isinstance(value, float) and math.isfinite(value))
