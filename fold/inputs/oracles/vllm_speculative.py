"""The ``speculative_config`` a vLLM arm record carries: the setting the run was made with.

The gate's capture script (``examples/vllm/offline.py``) writes the object it passed to
``LLM(speculative_config=...)`` as it was given, under the record's top-level
``speculative_config``. A run made with ``"rejection_sample_method": "synthetic"`` accepted its
draft tokens at the rates it was told, whatever the drafter proposed: an arm run at a chosen
acceptance (a matched arm, ``fold.compare.matched_arms``).

Field names and validity rules are vLLM 0.32's (``vllm/config/speculative.py``,
``SpeculativeConfig._resolve_synthetic_acceptance_rates`` and ``__post_init__``):

* ``rejection_sample_method`` is ``standard`` (the default), ``synthetic`` or ``block``;
* ``synthetic`` takes exactly one of ``synthetic_acceptance_rates`` (per-position
  *unconditional* rates: entry i is the probability that the first i + 1 draft tokens are all
  accepted; ``num_speculative_tokens`` entries, each in [0, 1], non-increasing) and
  ``synthetic_acceptance_length`` (in [1, k + 1], resolved to rates by the minimum-variance
  schedule: whole positions at 1, one fractional, the rest 0);
* either of the two with another method is refused;
* ``num_speculative_tokens`` is an integer above 0 (pydantic's lax mode: a float with no
  fraction, ``4.0``, is the integer 4); null stands for a field not given where vLLM's type
  allows None (the two synthetic fields), and is refused where it does not
  (``num_speculative_tokens``, ``rejection_sample_method``).

A config vLLM would refuse did not make the run the record says it made: it is refused here,
naming the field. A field of the wrong JSON type (a list for a string, a string for a number)
is an input error. ``num_speculative_tokens`` is bounded by the step-log format's cap
(``fold.inputs.limits.MAX_STEP_TOKENS``): the rates are one per position. Nothing here prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fold.errors import InputError, RefusedError
from fold.inputs import limits

FIELD = "speculative_config"
METHODS = ("standard", "synthetic", "block")
SYNTHETIC = "synthetic"
SOURCE = "vllm/config/speculative.py (vLLM 0.32)"


@dataclass(frozen=True)
class SpeculativeSetting:
    """What the record's ``speculative_config`` says, checked as vLLM checks it.

    ``rates`` and ``length`` are as configured (one of them, with ``synthetic``);
    ``resolved_rates`` are the per-position unconditional rates vLLM runs with.
    """

    where: str
    method: str | None
    num_speculative_tokens: int | None
    rejection_sample_method: str
    rates: tuple[float, ...] | None = None
    length: float | None = None
    resolved_rates: tuple[float, ...] | None = None

    @property
    def synthetic(self) -> bool:
        return self.rejection_sample_method == SYNTHETIC

    @property
    def expected_mean_acceptance_length(self) -> float | None:
        """1 + A/S the setting aims at: one plus the sum of the unconditional rates (the
        expected number of draft tokens accepted per step, for drafts of full length)."""
        if self.resolved_rates is None:
            return None
        return 1.0 + math.fsum(self.resolved_rates)

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "num_speculative_tokens": self.num_speculative_tokens,
            "rejection_sample_method": self.rejection_sample_method,
            "synthetic_acceptance_rates": None if self.rates is None else list(self.rates),
            "synthetic_acceptance_length": self.length,
            "resolved_rates": (None if self.resolved_rates is None else list(self.resolved_rates)),
            "expected_mean_acceptance_length": self.expected_mean_acceptance_length,
        }


def read_setting(record: dict[str, Any], where: str) -> SpeculativeSetting | None:
    """The record's ``speculative_config``, or None when it carries none."""
    config = record.get(FIELD)
    if config is None:
        return None
    at = f"{where}: {FIELD}"
    if not isinstance(config, dict):
        raise limits.WrongKind(where, FIELD, config, "an object", "give the config passed to vLLM")
    method = config.get("method")
    if method is not None:
        limits.string(where, f"{FIELD}.method", method, "give the drafter's name or leave it out")
    k = _speculative_tokens(config, where)
    rejection = config.get("rejection_sample_method", "standard")
    rejection = limits.string(
        where, f"{FIELD}.rejection_sample_method", rejection,
        f"vLLM takes one of {', '.join(METHODS)} and no other type ({SOURCE})",
    )  # fmt: skip
    if rejection not in METHODS:
        raise RefusedError(
            f"{at}.rejection_sample_method = {rejection!r}: vLLM takes one of "
            f"{', '.join(METHODS)} ({SOURCE})"
        )
    rates_value = config.get("synthetic_acceptance_rates")
    length_value = config.get("synthetic_acceptance_length")
    if rejection != SYNTHETIC:
        if rates_value is not None or length_value is not None:
            raise RefusedError(
                f"{at}: synthetic_acceptance_rates / synthetic_acceptance_length are set but "
                f"rejection_sample_method is {rejection!r}; vLLM takes them only with "
                f"'synthetic' ({SOURCE})"
            )
        return SpeculativeSetting(where, method, k, rejection)
    if k is None:
        raise InputError(
            f"{at}: rejection_sample_method is 'synthetic' but num_speculative_tokens is not "
            "recorded, so the rates cannot be checked; write the config as it was passed"
        )
    if (rates_value is None) == (length_value is None):
        raise RefusedError(
            f"{at}: rejection_sample_method 'synthetic' takes exactly one of "
            f"synthetic_acceptance_rates and synthetic_acceptance_length, as vLLM does ({SOURCE})"
        )
    if rates_value is not None:
        rates = _rates(rates_value, k, f"{at}.synthetic_acceptance_rates")
        return SpeculativeSetting(where, method, k, rejection, rates=rates, resolved_rates=rates)
    length = _length(length_value, k, where)
    return SpeculativeSetting(
        where, method, k, rejection, length=length, resolved_rates=length_to_rates(length, k)
    )


def _speculative_tokens(config: dict[str, Any], where: str) -> int | None:
    """``num_speculative_tokens`` as vLLM's pydantic field reads it (an int above 0, lax: 4.0
    is 4), or None when it is not given; bounded by the most tokens a step may carry."""
    if "num_speculative_tokens" not in config:
        return None
    at = f"{where}: {FIELD}"
    # vLLM takes no other type, null included; a whole float is an integer to its pydantic
    k = limits.integer(
        where, f"{FIELD}.num_speculative_tokens", config["num_speculative_tokens"],
        f"vLLM takes an integer above 0 ({SOURCE})", whole_floats=True,
    )  # fmt: skip
    # A negative count is malformed (exit 2) as it is in every source; 0 is a count vLLM
    # refuses, so a record holding it does not hold the config its run was made with.
    limits.check_count(where, f"{FIELD}.num_speculative_tokens", k, "check the record")
    if k == 0:
        raise RefusedError(
            f"{at}.num_speculative_tokens = {k!r}: vLLM takes an integer above 0 ({SOURCE}); "
            "the record does not hold the config its run was made with"
        )
    limits.check_step_tokens(where, f"{FIELD}.num_speculative_tokens", k, "check the record")
    return k


def _within(value: int | float, low: float, high: float) -> bool:
    """``low <= value <= high`` for a finite value; an int of any size is compared exactly
    (converting it to a float may overflow)."""
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return low <= value <= high


def _rates(value: Any, k: int, at: str) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise limits.WrongKind(at, "", value, "a list", f"give one rate per draft token ({SOURCE})")
    for i, rate in enumerate(value):
        if not limits.is_number(rate):  # a number of any size is the range check's below
            fix = f"vLLM takes one ({SOURCE})"
            raise limits.WrongKind(at, f"[{i}]", rate, "a finite number", fix)
    if len(value) != k:
        raise RefusedError(
            f"{at} has {len(value)} entries but num_speculative_tokens is {k}: vLLM takes one "
            f"per speculative token ({SOURCE})"
        )
    for i, rate in enumerate(value):
        if not _within(rate, 0, 1):
            raise RefusedError(f"{at}[{i}] = {limits.shown(rate)} is outside [0, 1], which "
                               f"vLLM refuses ({SOURCE})")  # fmt: skip
        if i and rate > value[i - 1]:
            raise RefusedError(
                f"{at}[{i}] = {rate!r} exceeds entry {i - 1} = {value[i - 1]!r}: the rates are "
                "unconditional (the first i + 1 tokens all accepted), so vLLM refuses rates that "
                f"rise ({SOURCE})"
            )
    return tuple(float(rate) for rate in value)


def _length(value: Any, k: int, where: str) -> float:
    at = f"{where}: {FIELD}.synthetic_acceptance_length"
    if not limits.is_number(value):
        field = f"{FIELD}.synthetic_acceptance_length"
        raise limits.WrongKind(where, field, value, "a finite number", f"vLLM takes one ({SOURCE})")
    if not _within(value, 1, k + 1):
        raise RefusedError(
            f"{at} = {limits.shown(value)} is outside [1, {k + 1}] (1 to num_speculative_tokens "
            f"+ 1), which vLLM refuses ({SOURCE})"
        )
    return float(value)


def length_to_rates(length: float, k: int) -> tuple[float, ...]:
    """vLLM's minimum-variance schedule for a target mean acceptance length: as many positions
    as whole accepted tokens at rate 1, the fraction at the next, 0 after."""
    accepted = length - 1
    whole = int(accepted)
    return tuple(([1.0] * whole + [accepted - whole] + [0.0] * (k - whole - 1))[:k])
