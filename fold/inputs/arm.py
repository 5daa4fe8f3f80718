"""Reading the gate's arm record (``our-arm.json``) into a frame of legs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from fold.errors import InputError
from fold.inputs import limits
from fold.inputs.arm_counters import EngineCounters, read_counters
from fold.inputs.limits import is_int

_REQUIRED_NUMBERS = ("secs", "tok_s", "generate_start_unix", "generate_end_unix")
_REQUIRED_INTS = ("run", "prompt_tokens", "completion_tokens")
_SUMMED_INTS = ("prompt_tokens", "completion_tokens")
_NO_SUCH_LEG = "take the record again from the gate"
_RUNS_FROM_ONE = "the gate numbers each prompt's runs 1, 2, ...; take the record again from it"


@dataclass(frozen=True)
class ArmRecord:
    """The legs of one arm, in run order, and what the gate recorded about their fold.

    ``legs`` has one row per leg: ``index`` (0-based position in the record), every scalar field
    the leg carries (so a warm predicate may use any of them), and ``start_ns``/``end_ns``, the
    generate window in integer nanoseconds, widened by ``WINDOW_SLACK_NS`` on each side.
    """

    path: str
    legs: pl.DataFrame
    recorded_throughput_tok_s: float | None
    recorded_warm_legs: int | list[int] | None
    recorded_cold_legs_discarded: int | None
    document: Any
    counters: EngineCounters | None = None
    """The engine's own acceptance counters on the legs and its ``spec_acceptance`` block."""


# The gate's times are rounded to the microsecond, so the true instant lies within half a
# microsecond of the recorded one; a step inside that band may belong to the leg. Legs of a real
# gate are microseconds to seconds apart, so the band never makes two of them overlap.
WINDOW_SLACK_NS = 500
# A leg's window is cut into time bins by (t - start) * bins // span in 64 bits, which holds
# for windows up to 208 days; no benchmark leg comes near, so a longer one is a wrong field.
MAX_LEG_SECONDS = 100 * 86_400


def epoch_seconds_to_ns(seconds: float) -> int:
    """The gate records epoch seconds with microsecond precision; round there, then scale.

    A double near 1.7e9 has a resolution of about 0.24 us, so the microsecond is recoverable
    exactly, while anything finer in the float is representation noise.
    """
    return round(seconds * 1_000_000) * 1_000


def load_arm(path: str | Path) -> ArmRecord:
    """The gate's arm record at ``path``: its legs, their generate windows and what the gate
    recorded about them (throughput, warm legs, the engine's counters).

    Raises ``InputError`` naming the file when it cannot be read, is not JSON, or is not an arm
    record (what is wrong and where is in the message).
    """
    where = str(path)
    try:
        document = _record_document(_record_bytes(path))
    except orjson.JSONDecodeError as error:
        raise InputError(
            f"{where}: not valid JSON ({error}); expected the gate's arm record"
        ) from error
    return arm_from_document(document, where)


def load_arm_if_written(path: str | Path) -> ArmRecord | None:
    """The arm record at ``path``, or None while the gate has not written it whole: absent,
    or not yet all of its JSON. A whole record that is not one is refused as ``load_arm``
    refuses it, at once (a follow may last hours)."""
    if not Path(path).exists():
        return None
    try:
        document = _record_document(_record_bytes(path))
    except orjson.JSONDecodeError:
        return None  # still being written
    return arm_from_document(document, str(path))


def _record_document(data: bytes) -> Any:
    """The record's JSON; orjson's error where it is not JSON. JSON's numbers have no range
    and orjson's do: a record orjson refuses for a number it cannot hold (a 60-digit second)
    is read again with every number unbounded, so that its field is refused by name. A count
    past 64 bits, which orjson reads as a float, is read again too, for its digits."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            return limits.strict_json(data)
        except (ValueError, RecursionError):
            pass
        raise  # orjson's own words say what is wrong
    if limits.holds_past_64_bits(document):
        document = limits.exact_integers(data, document)  # a count's digits, as written
    return document


def _record_bytes(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise InputError(f"{path}: cannot read the arm record: {error.strerror}") from error


def arm_from_document(document: Any, where: str = "<arm record>") -> ArmRecord:
    metrics: dict[str, Any]
    top: dict[str, Any]
    if isinstance(document, list):
        legs_raw, metrics, top = document, {}, {}
    elif isinstance(document, dict):
        found = document.get("legs")
        if found is not None and not isinstance(found, list):
            raise limits.WrongKind(where, "'legs'", found, "a list of legs", _NO_SUCH_LEG)
        if found is None:
            raise InputError(
                f"{where}: no 'legs' list; the arm record must hold the gate's legs "
                "(an object with 'legs', or a list of legs)"
            )
        legs_raw = found
        given = document.get("metrics")
        if given is not None and not isinstance(given, dict):
            raise limits.WrongKind(where, "'metrics'", given, "an object", _NO_SUCH_LEG)
        metrics = given or {}
        top = document
    else:
        wanted = "an object or a list of legs"
        raise limits.WrongKind(where, "the arm record", document, wanted, _NO_SUCH_LEG)
    if not legs_raw:
        raise InputError(f"{where}: the arm record has no legs")

    rows = [_validated_leg(leg, index, where) for index, leg in enumerate(legs_raw)]
    limits.check_sums(
        (
            (f"{where}: leg {row['index']} (run {row['run']})", f"'{field}'", row[field])
            for row in rows
            for field in _SUMMED_INTS
        ),
        _NO_SUCH_LEG,
    )
    legs = pl.DataFrame(rows, infer_schema_length=None)
    return ArmRecord(
        path=where,
        legs=legs,
        recorded_throughput_tok_s=_optional_number(
            metrics.get("output_throughput_tok_s"), where, "metrics.output_throughput_tok_s"
        ),
        recorded_warm_legs=_recorded_warm_legs(top.get("warm_legs"), where),
        recorded_cold_legs_discarded=_optional_count(
            top.get("cold_legs_discarded"), where, "cold_legs_discarded"
        ),
        document=document,
        counters=read_counters(legs_raw, top, where),
    )


def _validated_leg(leg: Any, index: int, where: str) -> dict[str, Any]:
    if not isinstance(leg, dict):
        raise limits.WrongKind(where, f"leg {index}", leg, "an object", _NO_SUCH_LEG)
    row: dict[str, Any] = {"index": index}
    place = f"{where}: leg {index}"
    for field in _REQUIRED_INTS:
        row[field] = limits.count(place, f"'{field}'", leg.get(field), _NO_SUCH_LEG)
    limits.check_run(f"{where}: leg {index}", "'run'", row["run"], _RUNS_FROM_ONE)
    for field in _REQUIRED_NUMBERS:
        row[field] = limits.finite_number(place, f"'{field}'", leg.get(field), _NO_SUCH_LEG)
    row["finish_reason"] = limits.string(
        place, "'finish_reason'", leg.get("finish_reason"), _NO_SUCH_LEG
    )
    label = leg.get("leg")
    row["leg"] = None if label is None else limits.string(place, "'leg'", label, _NO_SUCH_LEG)
    for key, value in leg.items():
        # A field the fold does not read is kept only when a 64-bit column can hold it.
        if (
            key not in row
            and _is_scalar(value)
            and not (is_int(value) and limits.count_problem(abs(value)))
        ):
            row[key] = value
    for field in ("generate_start_unix", "generate_end_unix"):
        if not limits.is_epoch_seconds(row[field]):
            raise InputError(
                f"{where}: leg {index} field '{field}' is {row[field]!r}, not seconds since the "
                "epoch (1970 to 2262, as time.time() gives them); milliseconds or nanoseconds "
                "would be 10^3 or 10^9 times larger"
            )
    row["start_ns"] = epoch_seconds_to_ns(row["generate_start_unix"]) - WINDOW_SLACK_NS
    row["end_ns"] = epoch_seconds_to_ns(row["generate_end_unix"]) + WINDOW_SLACK_NS
    if row["generate_end_unix"] - row["generate_start_unix"] > MAX_LEG_SECONDS:
        days = (row["generate_end_unix"] - row["generate_start_unix"]) / 86_400
        raise InputError(
            f"{where}: leg {index} lasts {days:.0f} days from generate_start_unix to "
            f"generate_end_unix; no benchmark leg lasts {MAX_LEG_SECONDS // 86_400} days: check "
            "the two fields"
        )
    if row["end_ns"] < row["start_ns"]:
        raise InputError(
            f"{where}: leg {index} ends ({row['generate_end_unix']}) before it starts "
            f"({row['generate_start_unix']}); check generate_start_unix/generate_end_unix"
        )
    for field in ("secs", "tok_s"):  # after the window's checks, which say more
        if row[field] < 0:  # no leg lasts, or generates at, a negative time or rate
            shown = limits.json_shown(leg[field])
            raise InputError(f"{place}: '{field}' {shown} is negative: {_NO_SUCH_LEG}")
    return row


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _optional_number(value: Any, where: str, field: str) -> float | None:
    if value is None:
        return None
    return limits.finite_number(where, f"'{field}'", value, "take the record again from the gate")


def _optional_count(value: Any, where: str, field: str) -> int | None:
    if value is None:
        return None
    return limits.count(where, f"'{field}'", value, "take the record again from the gate")


def _recorded_warm_legs(value: Any, where: str) -> int | list[int] | None:
    """The gate records either how many legs were warm or which ones (0-based indices)."""
    if isinstance(value, list):
        fix = "give the warm legs' indices (0, 1, ...) or their count"
        return sorted(limits.count(where, f"'warm_legs'[{i}]", v, fix) for i, v in enumerate(value))
    return _optional_count(value, where, "warm_legs")
