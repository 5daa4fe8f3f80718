"""The fuzz targets: each input is one file, handed to the command in the place its format
goes, beside fixed files (``fuzz/context/``, the fixtures), in the ways the command is run.

Every run of the command on an input is judged by ``harness.judge`` (exit status, no
traceback or "this is a bug", a refusal that names a place, 20 s, 3 GiB, output bounded by the
input); a fold's JSON besides by ``harness.check_lists``. The step-log target is
``fuzz/differential.py`` (the two readers against each other) and is listed here with them.

Each target is a ``Target``: ``check(data, directory)`` raises ``harness.Finding``;
``mutate(data, rng)`` is its format-aware mutation (half of the mutations; libFuzzer's byte
mutations are the other half); ``max_len`` bounds an input; ``dictionary`` names its
libFuzzer dictionary in ``fuzz/dicts/``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import differential  # noqa: E402  the step-log target, a sibling script
import follow  # noqa: E402  the follow target, a sibling script
import harness  # noqa: E402
import ledger_target  # noqa: E402  the ledger folder's target, a sibling script
import mutate  # noqa: E402
import sums_target  # noqa: E402  the sums file's target, a sibling script
from harness import Finding  # noqa: E402

ROOT = HERE.parent
CONTEXT = HERE / "context"
# The engine trace of one prompt's process, over its five legs with and without counters.
TRACE_ARMS = (str(CONTEXT / "trace-counters.json"), str(CONTEXT / "trace-bare.json"))
# A small main arm and its step log (three legs, labelled), for what compares with ours.
MAIN_ARM = harness.MAIN_ARM
MAIN_LOG = harness.MAIN_LOG
# The main arm an arm record is compared with as another run of ours, from its counters.
COUNTERS_ARM = str(ROOT / "fixtures" / "vllmcpp" / "our-arm.json")
ORDINARY_VLLM = str(ROOT / "fixtures" / "oracles" / "vllm-real" / "offline" / "vllm-arm.json")
# Step logs an arm record is folded with: the one whose legs' first start is nearest the
# record's (a record mutated from a seed keeps its seed's times, so its log still lands).
ARM_LOGS = (
    (1764450000.0, MAIN_LOG),
    (1796000004.2, str(ROOT / "fixtures" / "vllmcpp" / "steps.jsonl")),
    (1795989956.356641, str(ROOT / "fixtures" / "ours-vs-ours" / "before" / "steps.jsonl")),
    (1796151404.744887, str(ROOT / "fixtures" / "oracles" / "vllm-real" / "ours" / "steps.jsonl")),
)
QUIET = harness.QUIET
RESAMPLED = harness.RESAMPLED


@dataclass(frozen=True)
class Target:
    name: str
    check: Callable[[bytes, str], None]
    mutate: Callable[[bytes, Any], bytes]
    max_len: int
    dictionary: str
    about: str


def _folded(outcome: harness.Outcome, size: int, json_path: str | None = None) -> None:
    """The fold's JSON (stdout, or ``json_path``) of a command that succeeded: the lists in it
    bounded, no negative count."""
    if outcome.status != 0:
        return
    text = outcome.stdout if json_path is None else Path(json_path).read_bytes()
    try:
        document = json.loads(text)
    except ValueError as error:
        raise Finding(f"{outcome.describe()}: the JSON does not parse ({error})") from error
    harness.check_lists(document, size)


def _both_outputs(
    directory: str, fuzzed: str, size: int, head: list[str], tail: tuple[str, ...] = ()
) -> None:
    """The command twice: the JSON to a file with the markdown record on stdout, then the
    terminal table with intervals (16 resamples)."""
    json_path = os.path.join(directory, "out.json")
    if os.path.exists(json_path):
        os.remove(json_path)
    first = harness.run([*head, "--json", json_path, "--markdown", "-", *QUIET, *tail])
    harness.judge(first, fuzzed=fuzzed, input_bytes=size)
    _folded(first, size, json_path)
    second = harness.run([*head, *RESAMPLED, *tail])
    harness.judge(second, fuzzed=fuzzed, input_bytes=size)


def _write(directory: str, name: str, data: bytes) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


# -- the engine trace ----------------------------------------------------------------------------


def check_trace(data: bytes, directory: str) -> None:
    """The input is one vllm-cli process's stderr, folded over one prompt's five legs with the
    counters on the legs (the trace is checked against them) and without (the trace alone
    gives the figures): each as JSON and markdown, as the table, and skipping bad lines."""
    log = _write(directory, "prompt.log", data)
    for arm in TRACE_ARMS:
        _both_outputs(directory, log, len(data), [arm, log])
        skipped = harness.run([arm, log, "--skip-bad-lines", "--json", "-", *QUIET])
        harness.judge(skipped, fuzzed=log, input_bytes=len(data))
        _folded(skipped, len(data))


def mutate_trace(data: bytes, rng: Any) -> bytes:
    choice = rng.randrange(3)
    if choice == 0:
        return mutate.trace_fields(data, rng)
    if choice == 1:
        return mutate.numbers(data, rng)
    return mutate.lines(data, rng, _TRACE_LINES)


_TRACE_LINES = [
    b"[SPECTRACE] req=0 pos=32 k=7 ns=3 acc=2 draft=[1 2 3 4 5 6 7] emit=[1 2 9]",
    b"[SPECTRACE] req=1 pos=8  k=2147483648 ns=1 acc=0 draft=[1] emit=[5]",
    b"vllm-cli: run=1/5 finish_reason=length prompt_tokens=24 completion_tokens=64 secs=4.755 "
    b"tok_s=13.46",
    b"vllm-cli: run=6/5 spec_drafts_proposed=63 spec_drafts_accepted=54 "
    b"spec_drafted_request_steps=9",
    b"vllm-cli: run=2/5 generate_start_unix=1796000098.985280 generate_end_unix=1796000101.883360",
    b"[WARN] [SPECTRACE] req=0 k=1 acc=0 emit=[1]",
    b"",
]


# -- the arm record ------------------------------------------------------------------------------


def _log_for(data: bytes) -> str:
    try:
        document = json.loads(data)
        legs = document.get("legs") if isinstance(document, dict) else document
        start = float(legs[0]["generate_start_unix"])
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        RecursionError,
        OverflowError,
    ):  # OverflowError: a start past a float's range, which the fold refuses in its own words
        return MAIN_LOG
    return min(ARM_LOGS, key=lambda pair: abs(pair[0] - start))[1]


def check_arm(data: bytes, directory: str) -> None:
    """The input is an arm record: folded from its legs' counters alone (JSON and markdown,
    then the table), folded with a step log, and read as another run of ours (``--vs``,
    told by its content) beside vllm.cpp's record."""
    arm = _write(directory, "our-arm.json", data)
    _both_outputs(directory, arm, len(data), [arm])
    with_log = harness.run([arm, _log_for(data), "--json", "-", *QUIET])
    harness.judge(with_log, fuzzed=arm, input_bytes=len(data))
    _folded(with_log, len(data))
    other = harness.run([COUNTERS_ARM, "--vs", f"b={arm}", "--json", "-", *QUIET])
    harness.judge(other, fuzzed=arm, input_bytes=len(data))
    _folded(other, len(data))


_ARM_KEYS = [
    "legs", "run", "leg", "finish_reason", "prompt_tokens", "completion_tokens", "secs",
    "tok_s", "generate_start_unix", "generate_end_unix", "spec_drafts_proposed",
    "spec_drafts_accepted", "spec_drafted_request_steps", "spec_acceptance", "warm_legs",
    "cold_legs_discarded", "metrics", "output_throughput_tok_s", "workload", "repeat",
    "prompts", "per_leg", "drafted_request_steps", "drafts_proposed", "drafts_accepted",
    "accept_rate", "mean_acceptance_length", "record", "engine",
]  # fmt: skip


def mutate_arm(data: bytes, rng: Any) -> bytes:
    if rng.randrange(4) == 0:
        data = mutate.numbers(data, rng)
    else:
        data = mutate.json_value(data, rng, _ARM_KEYS)
    if rng.random() < 0.6:
        data = mutate.repair_arm(data)
    return data


# -- oracle files --------------------------------------------------------------------------------


def _oracle_check(kind: str, matched: bool = False) -> Callable[[bytes, str], None]:
    def check(data: bytes, directory: str) -> None:
        """The input is an oracle file beside our small arm: ``--vs`` telling the engine from
        the content (JSON and markdown, then the table), then with the kind given."""
        path = _write(directory, "oracle", data)
        _both_outputs(directory, path, len(data), [MAIN_ARM, MAIN_LOG, "--vs", f"o={path}"])
        given = harness.run([MAIN_ARM, MAIN_LOG, "--vs", f"o:{kind}={path}", "--json", "-",
                             *QUIET])  # fmt: skip
        harness.judge(given, fuzzed=path, input_bytes=len(data))
        _folded(given, len(data))
        if matched:
            # as a matched arm beside the recorded ordinary run (docs/matched-arms.md)
            both = ["--vs", f"b={ORDINARY_VLLM}", "--vs", f"o:{kind}+matched={path}"]
            as_matched = harness.run([MAIN_ARM, MAIN_LOG, *both, "--json", "-", *QUIET])
            harness.judge(as_matched, fuzzed=path, input_bytes=len(data))
            _folded(as_matched, len(data))

    check.__doc__ = f"{kind}: " + (check.__doc__ or "")
    return check


def _oracle_mutate(keys: list[str]) -> Callable[[bytes, Any], bytes]:
    def mutated(data: bytes, rng: Any) -> bytes:
        choice = rng.randrange(3)
        if choice == 0:
            return mutate.numbers(data, rng)
        if choice == 1:
            return mutate.lines(data, rng)
        return mutate.json_value(data, rng, keys)

    return mutated


_VLLM_KEYS = [
    "output_throughput", "spec_decode_num_drafts", "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens", "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length", "spec_decode_per_position_acceptance_rates", "model_id",
    "endpoint_type", "metrics", "before", "after", "legs", "run", "tok_s",
    "output_throughput_tok_s", "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos", "warm_legs", "engine",
    "speculative_config", "rejection_sample_method", "synthetic_acceptance_rates",
    "synthetic_acceptance_length", "num_speculative_tokens",
]  # fmt: skip
_VLLM_REQUESTS_KEYS = [
    "spec_decode_metrics", "metrics", "speculative_decoding", "mean_acceptance_length",
    "draft_acceptance_rate", "acceptance_histogram", "num_spec_steps",
    "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens", "per_step_accepted",
    "per_step_drafted", "request_id", "id", "leg", "run", "record", "tok_s", "secs",
    "completion_tokens", "usage", "choices", "finish_reason", "engine",
]  # fmt: skip
_SGLANG_KEYS = [
    "meta_info", "spec_verify_ct", "spec_num_correct_drafts", "spec_num_proposed_drafts",
    "spec_accept_rate", "spec_accept_length", "spec_correct_drafts_histogram",
    "spec_accepted_drafts", "spec_proposed_drafts", "spec_accept_token_num",
    "spec_draft_token_num", "spec_accept_histogram", "accept_length", "output_throughput",
    "completion_tokens", "prompt_tokens", "e2e_latency", "legs", "run", "engine",
]  # fmt: skip
_LLAMACPP_KEYS = [
    "timings", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_second",
    "draft_n", "draft_n_accepted", "before", "after", "legs", "run", "tok_s", "engine",
    "tokens_predicted", "content",
]  # fmt: skip


# -- another run of ours -------------------------------------------------------------------------


def check_vs_log(data: bytes, directory: str) -> None:
    """The input is the step log of another run of ours (``--vs b=ARM --vs-log b=LOG``) beside
    the main arm and its log: the two readers give the same JSON; then the markdown and the
    table, the legs required to pair (``--paired``)."""
    log = _write(directory, "other-steps.jsonl", data)
    head = [MAIN_ARM, MAIN_LOG, "--vs", f"b={MAIN_ARM}", "--vs-log", f"b={log}"]
    found = []
    for native in (True, False):
        outcome = harness.run([*head, "--json", "-", *QUIET], native=native)
        harness.judge(outcome, fuzzed=log, input_bytes=len(data))
        _folded(outcome, len(data))
        found.append((outcome.status, outcome.stdout, outcome.stderr))
    if found[0] != found[1]:
        raise Finding(f"the readers differ:\n  native    {found[0]!r}\n  reference {found[1]!r}")
    _both_outputs(directory, log, len(data), head, ("--paired",))


def mutate_vs_log(data: bytes, rng: Any) -> bytes:
    return differential.mutate_lines(data, rng)


def check_steplog(data: bytes, directory: str) -> None:
    differential.check(data, directory)


TARGETS = {
    target.name: target
    for target in (
        Target(
            "steplog",
            check_steplog,
            mutate_vs_log,
            4096,
            "steplog.dict",
            "the hook's step log: the native reader against the polars reference",
        ),
        Target(
            "follow",
            follow.check,
            follow.mutate,
            4096,
            "steplog.dict",
            "--follow: the step log appended in pieces and followed, against the one-shot fold",
        ),
        Target(
            "trace",
            check_trace,
            mutate_trace,
            16384,
            "trace.dict",
            "the engine trace (vllm.cpp's [SPECTRACE] stderr), records with and without counters",
        ),
        Target(
            "arm",
            check_arm,
            mutate_arm,
            16384,
            "arm.dict",
            "the arm record: every field, with and without a log, and as --vs ours",
        ),
        Target(
            "oracle-vllm",
            _oracle_check("vllm", matched=True),
            _oracle_mutate(_VLLM_KEYS),
            16384,
            "vllm.dict",
            "vLLM's files for --vs: scrapes, bench results, logs, records",
        ),
        Target(
            "oracle-vllm-requests",
            _oracle_check("vllm"),
            _oracle_mutate(_VLLM_REQUESTS_KEYS),
            16384,
            "vllm-requests.dict",
            "vLLM's per-request spec-decode metrics: offline dumps, served bodies and streams",
        ),
        Target(
            "oracle-sglang",
            _oracle_check("sglang"),
            _oracle_mutate(_SGLANG_KEYS),
            16384,
            "sglang.dict",
            "SGLang's files for --vs: responses, bench_serving, scrapes",
        ),
        Target(
            "oracle-llamacpp",
            _oracle_check("llamacpp"),
            _oracle_mutate(_LLAMACPP_KEYS),
            16384,
            "llamacpp.dict",
            "llama.cpp's files for --vs: scrapes, /completion, logs, speculative-simple",
        ),
        Target(
            "vs-log",
            check_vs_log,
            mutate_vs_log,
            8192,
            "steplog.dict",
            "--vs-log: the step log of another run of ours",
        ),
        Target(
            "ledger",
            ledger_target.check,
            ledger_target.mutate,
            16384,
            "ledger.dict",
            "a ledger folder's files: LEDGER, a digest, a run's Parquet files, a temporary file",
        ),
        Target(
            "sums",
            sums_target.check,
            sums_target.mutate,
            65536,
            "sums.dict",
            "--from-sums: a host's sums file (Parquet: its rows and its metadata's tables)",
        ),
    )
}
