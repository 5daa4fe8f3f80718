"""One ``RequestSpecDecodeMetrics.to_dict()`` of vLLM 0.32 checked against its definitions
(``vllm/v1/metrics/stats.py``): the counts, the histogram of k + 1 entries that sums to S and
weighs to A, the two ratios at full precision, and with ``detailed`` the per-step arrays. The
file around it (requests, legs, the arm) is ``fold.inputs.oracles.vllm_requests``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fold.errors import InputError, RefusedError
from fold.inputs import limits

_COUNTS = ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens")
_RATIOS = ("mean_acceptance_length", "draft_acceptance_rate")
_ARRAYS = ("per_step_accepted", "per_step_drafted")
_PER_STEP = limits.StepFields(proposed="per_step_drafted", accepted="per_step_accepted")
# vLLM writes the two ratios at full precision from the same integers; a JSON round trip keeps
# every digit, so anything further off than rounding is another record's figure.
_RATIO_SLACK = 1e-9
FIX = "the record is not vLLM's output as written; take it again"


def _count_field(metrics: Mapping[str, Any], key: str, where: str) -> int:
    if key not in metrics:
        raise InputError(f"{where}: {key} is missing; vLLM's to_dict() always writes it")
    return limits.count(where, key, metrics[key], "check the record")


def _int_list(value: Any, where: str, key: str, cap: int | None) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise limits.WrongKind(where, key, value, "a list of counts", FIX)
    for i, item in enumerate(value):
        limits.count(where, f"{key}[{i}]", item, "check the record")
        if cap is not None and item > cap:
            raise RefusedError(
                f"{where}: {key}[{i}] = {item} exceeds num_spec_tokens = {cap}: no step drafts "
                f"or accepts more than k; {FIX}"
            )
    return tuple(value)


def _ratio(metrics: Mapping[str, Any], key: str, where: str) -> float:
    if key not in metrics:
        raise InputError(f"{where}: {key} is missing; vLLM's to_dict() always writes it")
    return limits.finite_number(where, key, metrics[key], FIX)


def _agrees(given: float, derived: float) -> bool:
    return abs(given - derived) <= _RATIO_SLACK * max(1.0, abs(derived))


def read_metrics(metrics: Any, where: str) -> dict[str, Any]:
    """One ``to_dict()`` checked against vLLM's definitions: S, P, A, k, the histogram and the
    per-step arrays (None at the summary level). ``where`` names the record and the field."""
    if not isinstance(metrics, dict):
        raise limits.WrongKind(where, "", metrics, "an object", FIX)
    steps, accepted, proposed, k = (_count_field(metrics, key, where) for key in _COUNTS)
    if k < 1:
        raise RefusedError(
            f"{where}: num_spec_tokens = {k}: vLLM writes these metrics only with speculative "
            f"decoding on (k >= 1); {FIX}"
        )
    limits.check_step_tokens(where, "num_spec_tokens", k, "check the record")
    if "acceptance_histogram" not in metrics:
        raise InputError(f"{where}: acceptance_histogram is missing; vLLM always writes it")
    histogram = _int_list(metrics["acceptance_histogram"], where, "acceptance_histogram", None)
    if len(histogram) != k + 1:
        raise RefusedError(
            f"{where}: acceptance_histogram has {len(histogram)} entries but num_spec_tokens = "
            f"{k} makes it k + 1 = {k + 1} (j = 0 .. k drafts accepted); {FIX}"
        )
    if sum(histogram) != steps:
        raise RefusedError(
            f"{where}: acceptance_histogram sums to {sum(histogram)} steps but num_spec_steps = "
            f"{steps}; {FIX}"
        )
    weight = sum(j * n for j, n in enumerate(histogram))
    if weight != accepted:
        raise RefusedError(
            f"{where}: acceptance_histogram weighs sum j x [j] = {weight} accepted drafts but "
            f"num_accepted_draft_tokens = {accepted}; {FIX}"
        )
    limits.check_accepted(
        where, (("num_draft_tokens", proposed), ("num_accepted_draft_tokens", accepted)), FIX
    )
    if proposed > k * steps:
        raise RefusedError(
            f"{where}: num_draft_tokens = {proposed} exceeds num_spec_tokens x num_spec_steps = "
            f"{k} x {steps}: a step drafts at most k tokens; {FIX}"
        )
    length, rate = (_ratio(metrics, key, where) for key in _RATIOS)
    for key, given, derived, formula in (
        ("mean_acceptance_length", length, 1 + accepted / steps if steps else 1.0,
         "1 + num_accepted_draft_tokens / num_spec_steps"),
        ("draft_acceptance_rate", rate, accepted / proposed if proposed else 0.0,
         "num_accepted_draft_tokens / num_draft_tokens"),
    ):  # fmt: skip
        if not _agrees(given, derived):
            raise RefusedError(f"{where}: {key} = {given!r} but {formula} = {derived!r}; {FIX}")
    arrays = [metrics.get(key) for key in _ARRAYS]
    if all(array is None for array in arrays):
        return {"steps": steps, "proposed": proposed, "accepted": accepted, "k": k,
                "histogram": histogram, "per_step": None}  # fmt: skip
    if any(array is None for array in arrays):
        named = _ARRAYS[0] if arrays[0] is not None else _ARRAYS[1]
        raise InputError(
            f"{where}: {named} without {_ARRAYS[1] if named == _ARRAYS[0] else _ARRAYS[0]}: "
            f"vLLM writes both or neither; {FIX}"
        )
    per_accepted, per_drafted = (
        _int_list(array, where, key, k) for array, key in zip(arrays, _ARRAYS, strict=True)
    )
    for key, array in zip(_ARRAYS, (per_accepted, per_drafted), strict=True):
        if len(array) != steps:
            raise RefusedError(
                f"{where}: {key} has {len(array)} entries but num_spec_steps = {steps}: one "
                f"entry per verify step; {FIX}"
            )
    for i, (a, d) in enumerate(zip(per_accepted, per_drafted, strict=True)):
        limits.check_step(f"{where}: step {i}", (d, a, None), FIX, _PER_STEP)
    for key, array, total, name in (
        ("per_step_accepted", per_accepted, accepted, "num_accepted_draft_tokens"),
        ("per_step_drafted", per_drafted, proposed, "num_draft_tokens"),
    ):
        if sum(array) != total:
            raise RefusedError(f"{where}: {key} sums to {sum(array)} but {name} = {total}; {FIX}")
    counted = [0] * (k + 1)
    for a in per_accepted:
        counted[a] += 1
    if tuple(counted) != histogram:
        raise RefusedError(
            f"{where}: per_step_accepted counted by value gives {counted} but "
            f"acceptance_histogram = {list(histogram)}; {FIX}"
        )
    return {"steps": steps, "proposed": proposed, "accepted": accepted, "k": k,
            "histogram": histogram, "per_step": (per_accepted, per_drafted)}  # fmt: skip
