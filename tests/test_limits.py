"""What a step and a counter may be (``fold.inputs.limits``), one break per source.

Every source is broken once from the worked example (``fixtures/vllmcpp/``), and each refusal's
words are written here by hand: the same limit reads the same whatever the source. The C++
readers' constants are held to the module's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from native_switch import native_switch

from fold.api import fold_acceptance
from fold.cli import main
from fold.errors import InputError, RefusedError
from fold.folding import native
from fold.folding.result import (
    ENGINE_TRACE,
    ORACLE_STEPS,
    RECORD_COUNTERS,
    STEP_LOG,
    STEP_SOURCE_TEXT,
)
from fold.inputs import limits
from fold.inputs.arm import arm_from_document, load_arm, load_arm_if_written
from fold.inputs.oracles import OURS_KIND, read_oracle, registry
from fold.inputs.oracles.figures import arm_from_counts
from fold.inputs.oracles.source import count
from fold.inputs.steplog import StepLogWriter

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "fixtures" / "vllmcpp"
CAP_WORDS = "exceeds 65536, the most tokens one step may carry (FORMAT.md)"
SUM_WORDS = "takes the sum past 2^63 - 1, the largest count (FORMAT.md)"
TRACE_MISCOUNTS = "the engine's trace is miscounting; no acceptance can be computed from it"


def record(*, counters: bool = True) -> dict:
    document = json.loads((EXAMPLE / "our-arm.json").read_text())
    if not counters:
        document.pop("spec_acceptance")
        for leg in document["legs"]:
            for key in [key for key in leg if key.startswith("spec_")]:
                del leg[key]
    return document


def traces(tmp_path: Path, old: str, new: str) -> list[str]:
    """The four prompts' stderr, the first [SPECTRACE] line (line 4 of prompt 0) edited."""
    paths = []
    for prompt in range(4):
        text = (EXAMPLE / "stderr" / f"prompt-{prompt}.log").read_text()
        if prompt == 0:
            lines = text.split("\n")
            assert lines[3].startswith("[SPECTRACE]") and old in lines[3]
            lines[3] = lines[3].replace(old, new, 1)
            text = "\n".join(lines)
        path = tmp_path / f"prompt-{prompt}.log"
        path.write_text(text)
        paths.append(str(path))
    return paths


# -- the C++ readers and the module hold one set of limits ---------------------------------------


def header_constant(path: Path, name: str) -> int:
    """A constant's value from its definition (``1 << 16``, ``(std::uint64_t{1} << 63) - 1``)."""
    match = re.search(rf"constexpr [\w:]+ {name} = ([^;]+);", path.read_text())
    assert match is not None, f"{name} is not defined in {path}"
    expression = re.sub(r"std::u?int64_t\{(\d+)\}", r"\1", match.group(1))
    assert re.fullmatch(r"[\d\s()<+-]+", expression), expression
    return eval(expression)  # digits, shifts, parentheses and minus only (checked above)


def test_the_native_readers_constants_are_the_modules():
    native = ROOT / "fold" / "inputs" / "native_src"
    assert header_constant(native / "fold_tables.h", "kMaxStepTokens") == limits.MAX_STEP_TOKENS
    assert header_constant(native / "json_scan.h", "kSignedMax") == limits.MAX_COUNT
    assert limits.MAX_STEP_TOKENS == 65_536 and limits.MAX_COUNT == 9_223_372_036_854_775_807


@pytest.mark.parametrize(
    ("check", "largest", "words"),
    [
        (limits.check_count, 9_223_372_036_854_775_807,
         "is past 2^63 - 1, the largest count (FORMAT.md)"),
        (limits.check_request_id, 18_446_744_073_709_551_615,
         "is past 2^64 - 1, the largest integer request id (FORMAT.md)"),
        (limits.check_duration, 9_223_372_036_854_775_807,
         "is past 2^63 - 1 ns, the longest step duration (FORMAT.md)"),
    ],
)  # fmt: skip
def test_each_value_rule_has_one_raising_check_of_one_error_class(check, largest, words):
    """A count, a request id and a duration: 0 and the largest pass; one past it and -1 are
    malformed, the same InputError (exit 2) with the field's words."""
    for good in (0, largest):
        check("f.jsonl:3", "'x'", good, "fix it")
    for bad, said in ((largest + 1, words), (-1, NEGATIVE)):
        with pytest.raises(InputError) as error:
            check("f.jsonl:3", "'x'", bad, "fix it")
        assert type(error.value) is limits.OutOfRange
        assert str(error.value) == f"f.jsonl:3: 'x' {bad} {said}: fix it"
        assert error.value.reason == f"'x' {bad} {said}"


def test_a_printed_request_id_is_read_at_any_length():
    assert limits.decimal_request_id("18446744073709551615", "w", "'req'", "x") == 2**64 - 1
    # a decimal of 50 characters is shown as its first 20 and its length (limits.shown)
    for text, said in (
        ("1" + "0" * 49, f"10000000000000000000... (50 digits) {PAST_ID}"),
        ("-" + "9" * 49, f"-9999999999999999999... (50 digits) {NEGATIVE}"),
    ):
        with pytest.raises(limits.OutOfRange) as error:
            limits.decimal_request_id(text, "w", "'req'", "x")
        assert error.value.reason == f"'req' {said}"


def test_a_long_value_is_shown_shortened_never_in_full():
    assert limits.shown(10**40) == "10000000000000000000... (41 digits)"
    assert limits.shown(2**64) == "18446744073709551616"


# -- the hook's log: both readers ------------------------------------------------------------------


def hook_line(n: int, *, proposed: int = 7, accepted: int = 3) -> str:
    return (
        f'{{"v":1,"w":"5f0c1a2b3c4d5e6f","n":{n},"t_ns":1796000013100000000,"pid":1,"seq":0,'
        f'"proposed":{proposed},"accepted":{accepted}}}\n'
    )


@pytest.mark.parametrize("native", [True, False])
def test_the_hook_log_refuses_a_step_past_the_cap(tmp_path, native):
    log = tmp_path / "steps.jsonl"
    log.write_text(hook_line(0) + hook_line(1, proposed=2**31, accepted=0))
    with native_switch(native), pytest.raises(RefusedError) as error:
        fold_acceptance(arm_from_document(record()), [str(log)])
    assert str(error.value) == (
        f"{log}:2: 'proposed' 2147483648 {CAP_WORDS}: the engine's instrumentation is "
        "miscounting; no acceptance can be computed from this log"
    )


@pytest.mark.parametrize("native", [True, False])
def test_the_hook_log_calls_a_count_past_64_bits_malformed(tmp_path, native):
    log = tmp_path / "steps.jsonl"
    log.write_text(hook_line(0).replace('"n":0', f'"n":{2**63}'))
    with native_switch(native), pytest.raises(InputError) as error:
        fold_acceptance(arm_from_document(record()), [str(log)])
    assert str(error.value).startswith(
        f"{log}:1: field 'n' 9223372036854775808 is past 2^63 - 1, the largest count (FORMAT.md); "
        "fix or remove the line"
    )


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize(
    ("field", "literal", "words"),
    [
        ("seq", "99999999999999999999", "past 2^64 - 1, the largest integer request id"),
        ("proposed", "123456789012345678901234567890", "past 2^63 - 1, the largest count"),
        ("n", "1" + "0" * 40 + "1", "past 2^63 - 1, the largest count"),
    ],
)
def test_a_value_past_64_bits_is_shown_with_the_digits_its_line_wrote(
    tmp_path, native, field, literal, words
):
    """orjson reads such a literal as a float (99999999999999999999 as 1e20); the message
    shows what the line wrote, so that it can be found there, shortened past 40 digits."""
    log = tmp_path / "steps.jsonl"
    line = re.sub(rf'"{field}":[0-9]+', f'"{field}":{literal}', hook_line(0), count=1)
    assert literal in line
    log.write_text(line)
    shown = literal if len(literal) <= 40 else f"{literal[:20]}... ({len(literal)} digits)"
    with native_switch(native), pytest.raises(InputError) as error:
        fold_acceptance(arm_from_document(record()), [str(log)])
    assert str(error.value).startswith(f"{log}:1: field '{field}' {shown} is {words}")


def test_an_arm_record_value_past_64_bits_is_shown_with_its_digits(tmp_path):
    path = tmp_path / "arm.json"
    text = json.dumps(record())
    path.write_text(re.sub(r'"completion_tokens": [0-9]+', '"completion_tokens": 1' + "2" * 29,
                           text, count=1))  # fmt: skip
    with pytest.raises(InputError) as error:
        load_arm(path)
    assert "'completion_tokens' 1" + "2" * 29 + " is past 2^63 - 1" in str(error.value)


# -- the engine's trace --------------------------------------------------------------------------


@pytest.mark.parametrize("counters", [True, False])
@pytest.mark.parametrize(("old", "new", "shown"), [("k=7", "k=2147483648", "2147483648"),
                                                    ("k=7", "k=65537", "65537")])  # fmt: skip
def test_the_engine_trace_refuses_a_step_past_the_cap(tmp_path, counters, old, new, shown):
    arm = arm_from_document(record(counters=counters))
    with pytest.raises(RefusedError) as error:
        fold_acceptance(arm, traces(tmp_path, old, new))
    assert str(error.value) == f"{tmp_path}/prompt-0.log:4: 'k' {shown} {CAP_WORDS}: " + (
        TRACE_MISCOUNTS
    )


@pytest.mark.parametrize(
    ("new", "shown"),
    [
        (f"k={2**63}", "9223372036854775808"),
        (f"k={2**64}", "18446744073709551616"),
        (f"k={10**40}", "10000000000000000000... (41 digits)"),
        ("k=1" + "0" * 5000, "10000000000000000000... (5001 digits)"),
    ],
)
def test_the_engine_trace_calls_a_count_past_64_bits_malformed(tmp_path, new, shown):
    """A count no 64-bit field holds is malformed before it is a step past the cap, as in the
    hook's log; Python will not convert a decimal of more than 4300 digits: the length decides."""
    with pytest.raises(InputError) as error:
        fold_acceptance(arm_from_document(record()), traces(tmp_path, "k=7", new))
    assert str(error.value).startswith(
        f"{tmp_path}/prompt-0.log:4: malformed [SPECTRACE] or run line: field 'k' {shown} is "
        "past 2^63 - 1, the largest count (FORMAT.md); fix or remove the line"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [(2**64, "18446744073709551616"), (10**40, "10000000000000000000... (41 digits)")],
)
def test_the_engine_trace_calls_a_request_id_past_64_bits_malformed(tmp_path, value, shown):
    with pytest.raises(InputError) as error:
        fold_acceptance(arm_from_document(record()), traces(tmp_path, "req=0", f"req={value}"))
    assert str(error.value).startswith(
        f"{tmp_path}/prompt-0.log:4: malformed [SPECTRACE] or run line: field 'req' {shown} is "
        "past 2^64 - 1, the largest integer request id (FORMAT.md); fix or remove the line"
    )


def test_the_engine_trace_takes_the_largest_request_id_exactly(tmp_path):
    """req = 2^64 - 1 is a request like any other: the fold is the example's, unchanged."""
    result = fold_acceptance(
        arm_from_document(record()), traces(tmp_path, "req=0", f"req={2**64 - 1}")
    )
    # By hand (fixtures/vllmcpp/README.md): warm S = 300, P = 2100, A = 708.
    assert (result.warm["steps"], result.warm["proposed"], result.warm["accepted"]) == (
        300, 2100, 708,
    )  # fmt: skip
    first = result.legs[0]["requests"]
    assert sorted(request["seq"] for request in first) == [0, 2**64 - 1]


# -- the record's counters, and other runs of ours read the same way ------------------------------


def test_counters_whose_sum_passes_64_bits_are_refused_at_the_leg(tmp_path):
    """Each leg's 2^60, 2^62, 2^61 is an int64; their sum over two legs is not."""
    document = record()
    document.pop("spec_acceptance")
    for leg in document["legs"]:
        leg["spec_drafted_request_steps"] = 2**60
        leg["spec_drafts_proposed"] = 2**62
        leg["spec_drafts_accepted"] = 2**61
    with pytest.raises(RefusedError) as error:
        arm_from_document(document, "our-arm.json")
    assert str(error.value) == (
        'our-arm.json: leg 1 (run 2 of prompt 0, "Summarise the plot of Hamlet in three s…"): '
        f"'spec_drafts_proposed' 4611686018427387904 {SUM_WORDS}: take the record again "
        "from the gate"
    )


def test_counters_up_to_the_limit_fold_exactly_and_write_their_json(tmp_path):
    """Three legs of 2^62, 2^61, 2^60 steps and tokens sum below 2^63: the fold is exact."""
    document = record()
    document.pop("spec_acceptance")
    for index, value in zip((1, 2, 3), (2**62, 2**61, 2**60), strict=True):
        leg = document["legs"][index]
        leg["spec_drafted_request_steps"] = leg["spec_drafts_proposed"] = value
        leg["spec_drafts_accepted"] = value
    result = fold_acceptance(arm_from_document(document), [])
    # By hand: warm legs 1, 2, 3 carry the three values, the other 13 warm legs the example's.
    example = record()["legs"]
    rest = [leg for i, leg in enumerate(example) if leg["run"] > 1 and i not in (1, 2, 3)]
    steps = 2**62 + 2**61 + 2**60 + sum(leg["spec_drafted_request_steps"] for leg in rest)
    assert result.warm["steps"] == steps < 2**63
    assert orjson.loads(orjson.dumps(result.to_json()))["warm"]["steps"] == steps


def test_a_counter_past_64_bits_is_malformed():
    document = record()
    document["legs"][2]["spec_drafts_proposed"] = 2**63
    with pytest.raises(InputError) as error:
        arm_from_document(document, "our-arm.json")
    assert str(error.value) == (
        'our-arm.json: leg 2 (run 3 of prompt 0, "Summarise the plot of Hamlet in three s…"): '
        "'spec_drafts_proposed' 9223372036854775808 is past 2^63 - 1, the largest count "
        "(FORMAT.md): take the record again from the gate"
    )


def test_token_counts_whose_sum_passes_64_bits_are_refused_at_the_leg():
    document = record(counters=False)
    for leg in document["legs"]:
        leg["completion_tokens"] = 2**62
    with pytest.raises(RefusedError) as error:
        arm_from_document(document, "our-arm.json")
    assert str(error.value) == (
        f"our-arm.json: leg 1 (run 2): 'completion_tokens' 4611686018427387904 {SUM_WORDS}: "
        "take the record again from the gate"
    )


# -- the oracles' counters ----------------------------------------------------------------------


def test_an_oracle_counter_past_64_bits_is_malformed():
    with pytest.raises(InputError) as error:
        count(2**63, "vllm.json: vllm:spec_decode_num_drafts")
    assert str(error.value) == (
        "vllm.json: vllm:spec_decode_num_drafts: count 9223372036854775808 is past 2^63 - 1, the "
        "largest count (FORMAT.md): check the oracle's counters"
    )


def test_an_oracle_sum_past_64_bits_is_refused():
    """An oracle's S is often a sum over its requests: exact, and refused past 2^63 - 1."""
    with pytest.raises(RefusedError) as error:
        arm_from_counts("sglang", "sglang", steps=2**62 * 2, proposed=2**64, accepted=1,
                        where="bench.jsonl")  # fmt: skip
    assert str(error.value) == (
        "bench.jsonl: drafts (S) 9223372036854775808 is a sum past 2^63 - 1, the largest count "
        "(FORMAT.md): check the oracle's counters"
    )


# -- the writers write nothing the readers refuse ------------------------------------------------


def test_the_python_writer_refuses_a_step_past_the_cap(tmp_path):
    log = tmp_path / "steps.jsonl"
    with StepLogWriter(log) as writer:
        writer.record(1, 65536, 65536, 65536)
        for proposed, emitted in ((65537, None), (1, 65537)):
            with pytest.raises(ValueError) as error:
                writer.record(2, proposed, 0, emitted)
            field, value = ("'proposed'", 65537) if emitted is None else ("'emitted'", 65537)
            assert str(error.value) == (
                f"StepLogWriter.record: {field} {value} {CAP_WORDS}: the caller miscounts; "
                "nothing was written"
            )
    assert [orjson.loads(line)["proposed"] for line in log.read_bytes().splitlines()] == [65536]


ORACLES = ROOT / "fixtures" / "oracles"
VLLM_LOG_LINE = (
    "INFO [metrics.py:136] SpecDecoding metrics: Mean acceptance length: 3.50, Accepted "
    "throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: 5000 tokens, "
    "Drafted: 9000 tokens, Per-position acceptance rate: 0.9, Avg Draft acceptance rate: 55.6%\n"
)
WHAT_TO_CHECK = "check the oracle's counters"


def test_printed_oracle_counts_past_64_bits_are_malformed_at_any_length():
    digits = "9" * 5000  # Python converts no decimal this long: it is refused by its length
    with pytest.raises(InputError) as error:
        read_oracle("v", VLLM_LOG_LINE.replace("Drafted: 9000", f"Drafted: {digits}"))
    assert str(error.value) == (
        f"<input>:1: draft tokens (P) {digits[:20]}... (5000 digits) is past 2^63 - 1, the "
        f"largest count (FORMAT.md): {WHAT_TO_CHECK}"
    )
    text = (ORACLES / "llamacpp-speculative-simple.txt").read_text()
    assert "n_drafted = 640" in text
    with pytest.raises(InputError) as error:
        read_oracle("l", text.replace("n_drafted = 640", f"n_drafted = {2**63}"), "llamacpp")
    assert str(error.value) == (
        "<input>: run 1: n_drafted 9223372036854775808 is past 2^63 - 1, the largest count "
        f"(FORMAT.md): {WHAT_TO_CHECK}"
    )


def test_printed_oracle_counts_summing_past_64_bits_are_refused():
    # each line: P = 2^62, A = 2.5 * 2^60 (1 + A/S = 3.50 for S = 2^60): valid alone
    line = VLLM_LOG_LINE.replace("Accepted: 5000", f"Accepted: {5 * 2**59}").replace(
        "Drafted: 9000", f"Drafted: {2**62}"
    )
    with pytest.raises(RefusedError) as error:
        read_oracle("v", line * 2)
    assert str(error.value).startswith(
        "<input>: draft tokens (P) 9223372036854775808 is a sum past 2^63 - 1, the largest count "
    )


def test_a_run_line_of_any_length_is_a_malformed_line(tmp_path):
    paths = traces(tmp_path, "k=7", "k=7")
    text = (
        Path(paths[0])
        .read_text()
        .replace("vllm-cli: run=1/5", "vllm-cli: run=" + "1" * 5000 + "/5", 1)
    )
    Path(paths[0]).write_text(text)
    with pytest.raises(
        InputError, match=r"run=11111111111111111111\.\.\. \(5000 digits\)/5 is not"
    ):
        fold_acceptance(arm_from_document(record()), paths)


def test_another_run_of_ours_is_read_by_the_same_checks(tmp_path, capsys):
    document = record()
    document.pop("spec_acceptance")
    for leg in document["legs"]:
        leg["spec_drafted_request_steps"] = 2**60
        leg["spec_drafts_proposed"] = 2**62
        leg["spec_drafts_accepted"] = 2**61
    other = tmp_path / "other.json"
    other.write_text(json.dumps(document))
    assert main([str(EXAMPLE / "our-arm.json"), "--vs", f"b:ours={other}"]) == 1
    said = " ".join(capsys.readouterr().err.split())
    assert f"--vs b: {other}: leg 1 (run 2 of prompt 0, " in said
    assert f"'spec_drafts_proposed' 4611686018427387904 {SUM_WORDS}: take the record" in said


# -- one rule, one exit code, whatever the source ------------------------------------------------
#
# One bad value of each rule through every source that carries its field, through the command:
# the exit code and the words are written here by hand (docs/command.md, docs/checks.md), once
# per rule, and each source must give them. The bad inputs are made from the formats
# (instrument/FORMAT.md; the vLLM records as examples/vllm/offline.py and the gate write them,
# docs/oracle-steps.md, ../shared/reference/oracle-formats.md), not from what the code accepts.

PAST_COUNT = "is past 2^63 - 1, the largest count (FORMAT.md)"
NEGATIVE = "is negative: counts, request ids and durations are unsigned (FORMAT.md)"
PAST_ID = "is past 2^64 - 1, the largest integer request id (FORMAT.md)"
PAST_DURATION = "is past 2^63 - 1 ns, the longest step duration (FORMAT.md)"
PAST_TOTAL = "is a sum past 2^63 - 1, the largest count (FORMAT.md)"
ABOVE = "more draft tokens accepted than proposed"
MALFORMED, MISCOUNTED = 2, 1  # docs/command.md: a value the field cannot hold; a broken rule

# One offline request as examples/vllm/offline.py writes it (--per-request-spec-decode-metrics
# detailed): k = 2, three steps accepting 0, 1 and 2 of 2 drafts; S = 3, A = 3, P = 6; 1 + A/S =
# 2.0, A/P = 0.5; 1 + (1 + 2 + 3) = 7 tokens.
VLLM_REQUEST = {
    "leg": 0, "run": 1, "record": 0, "finish_reason": "length", "prompt_tokens": 24,
    "completion_tokens": 7, "secs": 0.5, "tok_s": 14.0, "request_id": "0",
    "spec_decode_metrics": {
        "mean_acceptance_length": 2.0,
        "draft_acceptance_rate": 0.5,
        "acceptance_histogram": [1, 1, 1],
        "num_spec_steps": 3,
        "num_accepted_draft_tokens": 3,
        "num_draft_tokens": 6,
        "num_spec_tokens": 2,
        "per_step_accepted": [0, 1, 2],
        "per_step_drafted": [2, 2, 2],
    },
}  # fmt: skip


def _hook_log(tmp_path: Path, old: str, new: str) -> list[str]:
    """The arm and a log of two lines of the hook's format, the second edited."""
    second = hook_line(1)
    assert old in second
    log = tmp_path / "steps.jsonl"
    log.write_text(hook_line(0) + second.replace(old, new, 1))
    return [_our_arm(tmp_path), str(log)]


def _hook_log_timed(tmp_path: Path, verify_ns: int) -> list[str]:
    """The arm and a log of two lines of one request in a leg, each taking ``verify_ns``."""
    log = tmp_path / "steps.jsonl"
    log.write_text(
        "".join(hook_line(n).replace("}", f',"verify_ns":{verify_ns}}}') for n in range(2))
    )
    return [_our_arm(tmp_path), str(log)]


def _our_arm(tmp_path: Path, legs: dict[str, int] | None = None) -> str:
    """The example's arm record, leg 2's fields set as ``legs`` says."""
    document = record()
    document["legs"][2].update(legs or {})
    arm = tmp_path / "our-arm.json"
    arm.write_text(json.dumps(document))
    return str(arm)


def _trace(tmp_path: Path, old: str, new: str) -> list[str]:
    return [_our_arm(tmp_path), *traces(tmp_path, old, new)]


def _trace_run_line(tmp_path: Path, old: str, new: str) -> list[str]:
    """The arm and the four prompts' stderr, prompt 0's first run line holding ``old`` (line
    25: ``vllm-cli: run=1/5 ... completion_tokens=64 secs=8.829 tok_s=7.249``) edited."""
    arguments = _trace(tmp_path, "k=7", "k=7")
    first = Path(arguments[1])
    lines = first.read_text().split("\n")
    assert lines[24].startswith("vllm-cli: run=1/5") and old in lines[24]
    lines[24] = lines[24].replace(old, new, 1)
    first.write_text("\n".join(lines))
    return arguments


def _vllm_request(tmp_path: Path, **metrics: Any) -> list[str]:
    bad = json.loads(json.dumps(VLLM_REQUEST))
    bad["spec_decode_metrics"].update(metrics)
    oracle = tmp_path / "requests.jsonl"
    oracle.write_text(json.dumps(bad) + "\n")
    return [*_trace(tmp_path, "k=7", "k=7"), "--vs", f"vllm={oracle}"]


def _vllm_gate_arm(tmp_path: Path, metrics: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The gate's vLLM arm (fixtures/oracles/vllm-gate-arm.json) with its counters or its
    speculative_config edited."""
    arm = json.loads((ORACLES / "vllm-gate-arm.json").read_text())
    arm["metrics"].update(metrics)
    arm["speculative_config"].update(config)
    oracle = tmp_path / "vllm-arm.json"
    oracle.write_text(json.dumps(arm))
    return [_our_arm(tmp_path), "--vs", f"vllm={oracle}"]


HOOK_LOG = ("step_log:native", "step_log:reference")  # f"{STEP_LOG}:{reader}"
# (rule, source, the command's arguments made in tmp_path, the field and value as refused)
CASES: list[tuple[str, str, Any, str]] = [
    *(
        case
        for source in HOOK_LOG
        for case in [
            ("count past 2^63 - 1", source,
             lambda t: _hook_log(t, '"proposed":7', f'"proposed":{2**63}'),
             "field 'proposed' 9223372036854775808"),
            ("negative count", source,
             lambda t: _hook_log(t, '"proposed":7,"accepted":3', '"proposed":-1,"accepted":0'),
             "field 'proposed' -1"),
            ("accepted above proposed", source,
             lambda t: _hook_log(t, '"proposed":7,"accepted":3', '"proposed":3,"accepted":4'),
             "'accepted' 4 exceeds 'proposed' 3,"),
            ("step past the cap", source,
             lambda t: _hook_log(t, '"proposed":7,"accepted":3', '"proposed":65537,"accepted":0'),
             "'proposed' 65537"),
            ("request id past 2^64 - 1", source,
             lambda t: _hook_log(t, '"seq":0', f'"seq":{2**64}'),
             "field 'seq' 18446744073709551616"),
            ("negative request id", source,
             lambda t: _hook_log(t, '"seq":0', '"seq":-1'), "field 'seq' -1"),
            ("duration past 2^63 - 1 ns", source,
             lambda t: _hook_log(t, '"accepted":3}', f'"accepted":3,"draft_ns":{2**63}}}'),
             "field 'draft_ns' 9223372036854775808"),
            ("negative duration", source,
             lambda t: _hook_log(t, '"accepted":3}', '"accepted":3,"verify_ns":-1}'),
             "field 'verify_ns' -1"),
            ("count of the wrong kind", source,
             lambda t: _hook_log(t, '"proposed":7', '"proposed":"7"'), "field 'proposed' \"7\""),
            # a float literal where orjson would read an integer literal as an int: a float,
            # not an integer id; past 2^64 it could be either, and is past every id
            ("count of the wrong kind", source,
             lambda t: _hook_log(t, '"seq":0', '"seq":1e19'), "field 'seq' 1e+19"),
            ("request id past 2^64 - 1", source,
             lambda t: _hook_log(t, '"seq":0', '"seq":1e20'),
             "field 'seq' 100000000000000000000"),
        ]
    ),
    ("count past 2^63 - 1", "engine_trace", lambda t: _trace(t, "k=7", f"k={2**63}"),
     "field 'k' 9223372036854775808"),
    ("negative count", "engine_trace", lambda t: _trace(t, "k=7", "k=-1"), "field 'k' -1"),
    ("accepted above proposed", "engine_trace",
     lambda t: _trace(t, "ns=3 acc=2", "ns=9 acc=8"), "'acc' 8 exceeds 'k' 7,"),
    ("step past the cap", "engine_trace", lambda t: _trace(t, "k=7", "k=65537"), "'k' 65537"),
    ("request id past 2^64 - 1", "engine_trace", lambda t: _trace(t, "req=0", f"req={2**64}"),
     "field 'req' 18446744073709551616"),
    ("negative request id", "engine_trace", lambda t: _trace(t, "req=0", "req=-1"),
     "field 'req' -1"),
    ("count of the wrong kind", "engine_trace", lambda t: _trace(t, "k=7", "k=7.5"),
     "field 'k' 7.5"),
    # the run lines the gate copies into the record: read as the gate reads them
    ("count of the wrong kind", "engine_trace",
     lambda t: _trace_run_line(t, "completion_tokens=64", "completion_tokens=64.0"),
     "prompt-0.log:25: completion_tokens 64.0"),
    ("count of the wrong kind", "engine_trace",
     lambda t: _trace_run_line(t, "completion_tokens=64", "completion_tokens=+64"),
     "prompt-0.log:25: completion_tokens +64"),
    ("negative count", "engine_trace",
     lambda t: _trace_run_line(t, "completion_tokens=64", "completion_tokens=-64"),
     "prompt-0.log:25: completion_tokens -64"),
    ("number of the wrong kind", "engine_trace",
     lambda t: _trace_run_line(t, "tok_s=7.249", "tok_s=nan"), "prompt-0.log:25: tok_s nan"),
    ("count of the wrong kind", "record_counters",
     lambda t: [_our_arm(t, {"spec_drafts_proposed": "147"})], "'spec_drafts_proposed' \"147\""),
    ("count of the wrong kind", "record_counters",
     lambda t: [_our_arm(t, {"completion_tokens": True})], "'completion_tokens' true"),
    ("count of the wrong kind", "vllm:requests",
     lambda t: _vllm_request(t, num_draft_tokens="6"), "num_draft_tokens \"6\""),
    ("count of the wrong kind", "vllm:requests",
     lambda t: _vllm_request(t, per_step_drafted=[2, 2.5, 2]), "per_step_drafted[1] 2.5"),
    ("count of the wrong kind", "vllm:arm_record",
     lambda t: _vllm_gate_arm(t, {}, {"num_speculative_tokens": 2.5}),
     "speculative_config.num_speculative_tokens 2.5"),
    ("count of the wrong kind", "vllm:arm_record",
     lambda t: _vllm_gate_arm(t, {"vllm:spec_decode_num_draft_tokens": "2170"}, {}),
     "vllm:spec_decode_num_draft_tokens: count \"2170\""),
    ("count past 2^63 - 1", "record_counters",
     lambda t: [_our_arm(t, {"spec_drafts_proposed": 2**63})],
     "'spec_drafts_proposed' 9223372036854775808"),
    ("negative count", "record_counters",
     lambda t: [_our_arm(t, {"spec_drafts_accepted": -1})], "'spec_drafts_accepted' -1"),
    ("accepted above proposed", "record_counters",
     lambda t: [_our_arm(t, {"spec_drafts_proposed": 147, "spec_drafts_accepted": 148})],
     "'spec_drafts_accepted' 148 exceeds 'spec_drafts_proposed' 147,"),
    ("count past 2^63 - 1", "record_counters",
     lambda t: [_our_arm(t, {"completion_tokens": 2**63})],
     "'completion_tokens' 9223372036854775808"),
    ("negative count", "record_counters",
     lambda t: [_our_arm(t, {"completion_tokens": -1})], "'completion_tokens' -1"),
    ("count past 2^63 - 1", "vllm:requests",
     lambda t: _vllm_request(t, num_draft_tokens=2**63), "num_draft_tokens 9223372036854775808"),
    ("negative count", "vllm:requests",
     lambda t: _vllm_request(t, num_draft_tokens=-1), "num_draft_tokens -1"),
    # a matched arm record's speculative config: its draft length is a count, as anywhere else
    ("negative count", "vllm:arm_record",
     lambda t: _oracle(t, "vllm-matched/standard.json",
                       {'"num_speculative_tokens": 4': '"num_speculative_tokens": -1'}),
     "speculative_config.num_speculative_tokens -1"),
    ("count past 2^63 - 1", "vllm:arm_record",
     lambda t: _oracle(t, "vllm-matched/standard.json",
                       {'"num_speculative_tokens": 4': f'"num_speculative_tokens": {2**63}'}),
     "speculative_config.num_speculative_tokens 9223372036854775808"),
    ("accepted above proposed", "vllm:requests",
     lambda t: _vllm_request(t, per_step_drafted=[2, 2, 1]),
     "step 2: per_step_accepted 2 exceeds per_step_drafted 1,"),
    ("accepted above proposed", "vllm:requests",
     lambda t: _vllm_request(t, num_draft_tokens=2),
     "num_accepted_draft_tokens 3 exceeds num_draft_tokens 2,"),
    ("step past the cap", "vllm:requests",
     lambda t: _vllm_request(t, num_spec_tokens=65537), "num_spec_tokens 65537"),
    ("count past 2^63 - 1", "vllm:arm_record",
     lambda t: _vllm_gate_arm(t, {"vllm:spec_decode_num_draft_tokens": 2**63}, {}),
     "vllm:spec_decode_num_draft_tokens: count 9223372036854775808"),
    ("negative count", "vllm:arm_record",
     lambda t: _vllm_gate_arm(t, {"vllm:spec_decode_num_draft_tokens": -1}, {}),
     "vllm:spec_decode_num_draft_tokens: count -1"),
    ("accepted above proposed", "vllm:arm_record",
     lambda t: _vllm_gate_arm(t, {"vllm:spec_decode_num_accepted_tokens": 3011}, {}),
     "vllm:spec_decode_num_accepted_tokens (read once after the last leg) 3011 exceeds "
     "vllm:spec_decode_num_draft_tokens (read once after the last leg) 3010,"),
    ("step past the cap", "vllm:arm_record",
     lambda t: _vllm_gate_arm(t, {}, {"num_speculative_tokens": 65537}),
     "speculative_config.num_speculative_tokens 65537"),
]  # fmt: skip


def _oracle(t: Path, fixture: str, edits: dict[str, str], kind: str | None = None) -> list[str]:
    """Our example arm against an oracle fixture (``fixtures/oracles/``) with each of ``edits``
    made once, as the engine's own output would carry the bad value."""
    text = (ORACLES / fixture).read_text()
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    oracle = t / fixture
    oracle.parent.mkdir(parents=True, exist_ok=True)
    oracle.write_text(text)
    return [_our_arm(t), "--vs", f"x:{kind}={oracle}" if kind else f"x={oracle}"]


SGLANG_COUNTS = ("spec_num_correct_drafts", "spec_num_proposed_drafts",
                 "spec_correct_drafts_histogram")  # fmt: skip
"""A 0.5.23 response's A, P and histogram: without them it holds a rate and no counts."""


def _sglang_response(t: Path, without: tuple[str, ...] = (), **meta: Any) -> list[str]:
    """The 0.5.23 responses (fixtures/oracles/sglang-generate-0.5.23.json), the first one's
    meta_info edited and ``without`` its keys."""
    responses = json.loads((ORACLES / "sglang-generate-0.5.23.json").read_text())
    info = responses[0]["meta_info"]
    assert all(key in info for key in (*without, *meta))
    info.update(meta)
    for key in without:
        del info[key]
    oracle = t / "sglang-generate-0.5.23.json"
    oracle.write_text(json.dumps(responses, indent=2))
    return [_our_arm(t), "--vs", f"x={oracle}"]


def _sglang_leg(t: Path, without: tuple[str, ...] = (), **meta: Any) -> list[str]:
    """The gate's SGLang legs (fixtures/oracles/sglang-legs.jsonl), leg 2 with the meta_info
    of the 0.5.23 response (fixtures/oracles/sglang-generate-0.5.23.json) edited and
    ``without`` its keys."""
    info = json.loads((ORACLES / "sglang-generate-0.5.23.json").read_text())[0]["meta_info"]
    assert all(key in info for key in (*without, *meta))
    info.update(meta)
    for key in without:
        del info[key]
    lines = (ORACLES / "sglang-legs.jsonl").read_text().splitlines()
    leg = json.loads(lines[1])
    leg["meta_info"] = info
    leg["accept_length"] = info["spec_accept_length"]  # the leg's is its response's
    lines[1] = json.dumps(leg)
    oracle = t / "sglang-legs.jsonl"
    oracle.write_text("\n".join(lines) + "\n")
    return [_our_arm(t), "--vs", f"x={oracle}"]


def _our_record_edited(t: Path, top: dict[str, Any]) -> str:
    """The example's arm record with its top-level keys updated by ``top``."""
    document = record()
    document.update(top)
    arm = t / "our-arm.json"
    arm.write_text(json.dumps(document))
    return str(arm)


def _other_run(t: Path, legs: dict[str, int]) -> list[str]:
    """Another run of ours (``--vs b:ours=``): the example's record, leg 2 edited."""
    document = record()
    document["legs"][2].update(legs)
    other = t / "other.json"
    other.write_text(json.dumps(document))
    return [str(EXAMPLE / "our-arm.json"), "--vs", f"b:ours={other}"]


TWO63 = 2**63  # written by hand below where the message shows it: 9223372036854775808
VLLM_P = 'model_name="meta-llama/Llama-3.1-8B-Instruct"} 280.0'
VLLM_A2 = 'model_name="meta-llama/Llama-3.1-8B-Instruct"} 1121.0'
SERVER_LINE = "  301 accepted /   448 generated"
VLLM_LENGTH_4 = "Mean acceptance length: 4.23, Accepted throughput: 4"  # line 4's
CASES += [
    # vLLM: /metrics scrapes (prometheus_client prints a counter as a float), the periodic log
    # line, `vllm bench serve --save-result`
    ("count past 2^63 - 1", "vllm:scrapes",
     lambda t: _oracle(t, "vllm-scrapes.prom", {VLLM_P: VLLM_P.replace("280.0", "9.3e+18")}),
     'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-'
     'Instruct"}: count 9300000000000000000'),
    ("negative count", "vllm:scrapes",
     lambda t: _oracle(t, "vllm-scrapes.prom", {VLLM_P: VLLM_P.replace("280.0", "-280.0")}),
     'Instruct"}: count -280'),
    # A = 2451 - 121 = 2330 between the scrapes, P = 2450 - 280 = 2170
    ("accepted above proposed", "vllm:scrapes",
     lambda t: _oracle(t, "vllm-scrapes.prom", {VLLM_A2: VLLM_A2.replace("1121.0", "2451.0")}),
     "vllm:spec_decode_num_accepted_tokens_total (after - before scrape) 2330 exceeds "
     "vllm:spec_decode_num_draft_tokens_total (after - before scrape) 2170,"),
    ("count past 2^63 - 1", "vllm:log",
     lambda t: _oracle(t, "vllm-log.txt", {"Drafted: 868 tokens": f"Drafted: {TWO63} tokens"}),
     "vllm-log.txt:4: draft tokens (P) 9223372036854775808"),
    ("negative count", "vllm:log",
     lambda t: _oracle(t, "vllm-log.txt", {"Drafted: 868 tokens": "Drafted: -868 tokens"}),
     "vllm-log.txt:4: draft tokens (P) -868"),
    ("accepted above proposed", "vllm:log",
     lambda t: _oracle(t, "vllm-log.txt", {"Accepted: 400 tokens": "Accepted: 869 tokens"}),
     "vllm-log.txt:4: Accepted 869 exceeds Drafted 868,"),
    ("count past 2^63 - 1", "vllm:bench",
     lambda t: _oracle(t, "vllm-bench-serve.json", {
         '"spec_decode_draft_tokens": 2170': f'"spec_decode_draft_tokens": {TWO63}'}),
     "vllm-bench-serve.json: spec_decode_draft_tokens: count 9223372036854775808"),
    ("negative count", "vllm:bench",
     lambda t: _oracle(t, "vllm-bench-serve.json",
                       {'"spec_decode_draft_tokens": 2170': '"spec_decode_draft_tokens": -1'}),
     "vllm-bench-serve.json: spec_decode_draft_tokens: count -1"),
    ("accepted above proposed", "vllm:bench",
     lambda t: _oracle(t, "vllm-bench-serve.json", {
         '"spec_decode_accepted_tokens": 1000': '"spec_decode_accepted_tokens": 2171'}),
     "spec_decode_accepted_tokens 2171 exceeds spec_decode_draft_tokens 2170,"),
    # SGLang: /generate responses (0.5.23 keys), the gate's legs with meta_info, bench_serving's
    # line (1 + A/S only) and the gauges (ratios only)
    ("count past 2^63 - 1", "sglang:responses",
     lambda t: _oracle(t, "sglang-generate-0.5.23.json", {
         '"spec_num_proposed_drafts": 420': f'"spec_num_proposed_drafts": {TWO63}'}),
     "sglang-generate-0.5.23.json: [0]: spec_num_proposed_drafts: count 9223372036854775808"),
    ("negative count", "sglang:responses",
     lambda t: _oracle(t, "sglang-generate-0.5.23.json", {
         '"spec_num_proposed_drafts": 420': '"spec_num_proposed_drafts": -1'}),
     "sglang-generate-0.5.23.json: [0]: spec_num_proposed_drafts: count -1"),
    ("accepted above proposed", "sglang:responses",
     lambda t: _oracle(t, "sglang-generate-0.5.23.json", {
         '"spec_num_proposed_drafts": 420': '"spec_num_proposed_drafts": 195'}),
     "[0]: spec_num_correct_drafts 196 exceeds spec_num_proposed_drafts 195,"),
    ("negative count", "sglang:legs", lambda t: _sglang_leg(t, spec_verify_ct=-1),
     "sglang-legs.jsonl:2: spec_verify_ct: count -1"),
    ("accepted above proposed", "sglang:legs",
     lambda t: _sglang_leg(t, spec_num_proposed_drafts=195),
     "sglang-legs.jsonl:2: spec_num_correct_drafts 196 exceeds spec_num_proposed_drafts 195,"),
    # a gate leg's accept_length (SGLang's per-request unit) of 0.70: no verify step emits
    # less than one token, in any unit
    ("mean acceptance length below 1", "sglang:legs",
     lambda t: _oracle(t, "sglang-legs.jsonl", {'"accept_length": 4.66': '"accept_length": 0.70'}),
     "sglang-legs.jsonl:2: accept_length = 0.7"),
    # a rate of 1.5 with no counts beside it to hold it against: refused as a rate
    ("accepted above proposed", "sglang:legs",
     lambda t: _sglang_leg(t, SGLANG_COUNTS, spec_accept_rate=1.5),
     "sglang-legs.jsonl:2: spec_accept_rate 1.5 exceeds an A/P of 1,"),
    ("mean acceptance length below 1", "sglang:responses",
     lambda t: _sglang_response(t, spec_accept_length=0.7),
     "sglang-generate-0.5.23.json: [0]: spec_accept_length = 0.7"),
    ("accepted above proposed", "sglang:responses",
     lambda t: _sglang_response(t, SGLANG_COUNTS, spec_accept_rate=1.5),
     "sglang-generate-0.5.23.json: [0]: spec_accept_rate 1.5 exceeds an A/P of 1,"),
    ("mean acceptance length below 1", "sglang:bench",
     lambda t: _oracle(t, "sglang-bench-serving.jsonl",
                       {'"accept_length": 4.23': '"accept_length": 0.23'}),
     "sglang-bench-serving.jsonl: accept_length = 0.23"),
    ("mean acceptance length below 1", "sglang:gauges",
     lambda t: _oracle(t, "sglang-metrics.prom", {'"} 4.23': '"} 0.23'}),
     "sglang-metrics.prom: sglang:spec_accept_length = 0.23"),
    # A/P = 1.2: more accepted than proposed, as a rate
    ("accepted above proposed", "sglang:gauges",
     lambda t: _oracle(t, "sglang-metrics.prom", {'"} 0.461': '"} 1.2'}),
     "sglang-metrics.prom: sglang:spec_accept_rate 1.2 exceeds an A/P of 1,"),
    # llama.cpp: /metrics (six significant digits), llama-speculative-simple's lines,
    # llama-server's per-request line, /completion timings, the gate's arm record
    ("count past 2^63 - 1", "llamacpp:scrapes",
     lambda t: _oracle(t, "llamacpp-metrics-pair.prom", {
         "num_draft_tokens_total 2.61123e+06": "num_draft_tokens_total 9.3e+18"}),
     "llamacpp-metrics-pair.prom:69 llamacpp:spec_decode_num_draft_tokens_total: count "
     "9300000000000000000"),
    ("negative count", "llamacpp:scrapes",
     lambda t: _oracle(t, "llamacpp-metrics-pair.prom", {
         "num_draft_tokens_total 2.61123e+06": "num_draft_tokens_total -2.61123e+06"}),
     "llamacpp-metrics-pair.prom:69 llamacpp:spec_decode_num_draft_tokens_total: count "
     "-2611230"),
    # A = 1249380 against P = 1200000, each within its rounding of half a unit of the 6th digit
    ("accepted above proposed", "llamacpp:scrapes",
     lambda t: _oracle(t, "llamacpp-metrics-pair.prom", {
         "num_draft_tokens_total 2.61123e+06": "num_draft_tokens_total 1.2e+06"}),
     "llamacpp:spec_decode_num_accepted_tokens_total (after - before scrape) 1249380 exceeds "
     "llamacpp:spec_decode_num_draft_tokens_total (after - before scrape) 1200000,"),
    ("count past 2^63 - 1", "llamacpp:speculative_simple",
     lambda t: _oracle(t, "llamacpp-speculative-simple.txt",
                       {"n_drafted = 640": f"n_drafted = {TWO63}"}, "llamacpp"),
     "llamacpp-speculative-simple.txt: run 1: n_drafted 9223372036854775808"),
    ("negative count", "llamacpp:speculative_simple",
     lambda t: _oracle(t, "llamacpp-speculative-simple.txt",
                       {"n_drafted = 640": "n_drafted = -640"}, "llamacpp"),
     "llamacpp-speculative-simple.txt: run 1: n_drafted -640"),
    ("accepted above proposed", "llamacpp:speculative_simple",
     lambda t: _oracle(t, "llamacpp-speculative-simple.txt",
                       {"n_accept  = 301": "n_accept  = 641"}, "llamacpp"),
     "llamacpp-speculative-simple.txt: run 1: n_accept 641 exceeds n_drafted 640,"),
    ("count past 2^63 - 1", "llamacpp:server_log",
     lambda t: _oracle(t, "llamacpp-server.log",
                       {SERVER_LINE: f"  301 accepted / {TWO63} generated"}),
     "llamacpp-server.log:7: draft tokens (P) 9223372036854775808"),
    # %5d prints a miscounted (negative) int with its sign
    ("negative count", "llamacpp:server_log",
     lambda t: _oracle(t, "llamacpp-server.log", {SERVER_LINE: "  301 accepted /  -448 generated"}),
     "llamacpp-server.log:7: draft tokens (P) -448"),
    ("accepted above proposed", "llamacpp:server_log",
     lambda t: _oracle(t, "llamacpp-server.log", {SERVER_LINE: "  449 accepted /   448 generated"}),
     "llamacpp-server.log:7: accepted 449 exceeds generated 448,"),
    ("count past 2^63 - 1", "llamacpp:completions",
     lambda t: _oracle(t, "llamacpp-completion.json", {'"draft_n": 448': f'"draft_n": {TWO63}'}),
     "llamacpp-completion.json: timings.draft_n: count 9223372036854775808"),
    ("negative count", "llamacpp:completions",
     lambda t: _oracle(t, "llamacpp-completion.json", {'"draft_n": 448': '"draft_n": -1'}),
     "llamacpp-completion.json: timings.draft_n: count -1"),
    ("accepted above proposed", "llamacpp:completions",
     lambda t: _oracle(t, "llamacpp-completion.json",
                       {'"draft_n_accepted": 301': '"draft_n_accepted": 449'}),
     "timings.draft_n_accepted 449 exceeds timings.draft_n 448,"),
    ("count past 2^63 - 1", "llamacpp:arm_record",
     lambda t: _oracle(t, "llamacpp-arm.json", {
         '"llamacpp:spec_decode_num_draft_tokens": 800':
         f'"llamacpp:spec_decode_num_draft_tokens": {TWO63}'}),
     "metrics.llamacpp:spec_decode_num_draft_tokens: count 9223372036854775808"),
    ("negative count", "llamacpp:arm_record",
     lambda t: _oracle(t, "llamacpp-arm.json", {
         '"llamacpp:spec_decode_num_draft_tokens": 800':
         '"llamacpp:spec_decode_num_draft_tokens": -1'}),
     "metrics.llamacpp:spec_decode_num_draft_tokens: count -1"),
    ("accepted above proposed", "llamacpp:arm_record",
     lambda t: _oracle(t, "llamacpp-arm.json", {
         '"llamacpp:spec_decode_num_accepted_tokens": 520':
         '"llamacpp:spec_decode_num_accepted_tokens": 801'}),
     "llamacpp:spec_decode_num_accepted_tokens (cumulative) 801 exceeds "
     "llamacpp:spec_decode_num_draft_tokens (cumulative) 800,"),
    # a count of the wrong kind, as each format would carry one
    ("count of the wrong kind", "vllm:arm_record",
     lambda t: _oracle(t, "vllm-gate-arm.json", {'"warm_legs": 6': '"warm_legs": "6"'}),
     'vllm-gate-arm.json: warm_legs "6"'),
    ("count of the wrong kind", "vllm:arm_record",
     lambda t: _oracle(t, "vllm-gate-arm.json",
                       {'"cold_legs_discarded": 3': '"cold_legs_discarded": true'}),
     "vllm-gate-arm.json: cold_legs_discarded true"),
    ("number of the wrong kind", "sglang:responses",
     lambda t: _sglang_response(t, spec_accept_rate="0.46"),
     'sglang-generate-0.5.23.json: [0]: spec_accept_rate "0.46"'),
    # Python's float() takes 1_0.0 and other scripts' digits; no engine prints them
    ("number of the wrong kind", "vllm:scrapes",
     lambda t: _oracle(t, "vllm-scrapes.prom", {VLLM_P: VLLM_P.replace("280.0", "2_80.0")}),
     "vllm:spec_decode_num_draft_tokens_total 2_80.0"),
    ("number of the wrong kind", "vllm:log",
     lambda t: _oracle(t, "vllm-log.txt", {VLLM_LENGTH_4: VLLM_LENGTH_4.replace("4.23", "4_23")}),
     "vllm-log.txt:4: mean acceptance length 4_23"),
    ("number of the wrong kind", "llamacpp:speculative_simple",
     lambda t: _oracle(t, "llamacpp-speculative-simple.txt",
                       {"speed:   80.012 t/s": "speed:   x t/s"}, "llamacpp"),
     "llamacpp-speculative-simple.txt:9: speed x"),
    ("count of the wrong kind", "llamacpp:speculative_simple",
     lambda t: _oracle(t, "llamacpp-speculative-simple.txt",
                       {"decoded  257 tokens": "decoded  2.5e2 tokens"}, "llamacpp"),
     "llamacpp-speculative-simple.txt:9: decoded tokens 2.5e2"),
    ("count of the wrong kind", "llamacpp:speculative_simple",
     lambda t: _oracle(t, "llamacpp-speculative-simple.txt",
                       {"n_drafted = 640": "n_drafted = +640"}, "llamacpp"),
     "llamacpp-speculative-simple.txt: run 1: n_drafted +640"),
    ("count of the wrong kind", "record_counters",
     lambda t: [_our_record_edited(t, {"workload": {"repeat": "5"}})],
     'workload.repeat "5"'),
    ("count of the wrong kind", "vllm:scrapes",
     lambda t: _oracle(t, "vllm-scrapes.prom", {VLLM_P: VLLM_P.replace("280.0", "280.5")}),
     'Instruct"}: count 280.5'),
    ("count of the wrong kind", "vllm:log",
     lambda t: _oracle(t, "vllm-log.txt", {"Drafted: 868 tokens": "Drafted: 868.5 tokens"}),
     "vllm-log.txt:4: draft tokens (P) 868.5"),
    ("count of the wrong kind", "vllm:log",
     lambda t: _oracle(t, "vllm-log.txt", {"Accepted: 400 tokens": "Accepted: abc tokens"}),
     "vllm-log.txt:4: accepted tokens (A) abc"),
    ("count of the wrong kind", "vllm:log",
     lambda t: _oracle(t, "vllm-log.txt", {"Accepted: 400 tokens": "Accepted: +400 tokens"}),
     "vllm-log.txt:4: accepted tokens (A) +400"),
    ("number of the wrong kind", "vllm:log",
     lambda t: _oracle(t, "vllm-log.txt", {VLLM_LENGTH_4: VLLM_LENGTH_4.replace("4.23", "x")}),
     "vllm-log.txt:4: mean acceptance length x"),
    ("mean acceptance length below 1", "vllm:log",
     lambda t: _oracle(t, "vllm-log.txt", {VLLM_LENGTH_4: VLLM_LENGTH_4.replace("4.23", "-4.23")}),
     "vllm-log.txt:4: mean acceptance length = -4.23"),
    ("count of the wrong kind", "vllm:bench",
     lambda t: _oracle(t, "vllm-bench-serve.json", {
         '"spec_decode_draft_tokens": 2170': '"spec_decode_draft_tokens": "2170"'}),
     'vllm-bench-serve.json: spec_decode_draft_tokens: count "2170"'),
    ("count of the wrong kind", "sglang:responses",
     lambda t: _oracle(t, "sglang-generate-0.5.23.json", {
         '"spec_num_proposed_drafts": 420': '"spec_num_proposed_drafts": 420.5'}),
     "sglang-generate-0.5.23.json: [0]: spec_num_proposed_drafts: count 420.5"),
    ("count of the wrong kind", "sglang:legs", lambda t: _sglang_leg(t, spec_verify_ct="60"),
     'sglang-legs.jsonl:2: spec_verify_ct: count "60"'),
    ("number of the wrong kind", "sglang:bench",
     lambda t: _oracle(t, "sglang-bench-serving.jsonl",
                       {'"accept_length": 4.23': '"accept_length": "4.23"'}),
     'sglang-bench-serving.jsonl: accept_length: "4.23"'),
    ("number of the wrong kind", "sglang:gauges",
     lambda t: _oracle(t, "sglang-metrics.prom", {'"} 4.23': '"} four'}),
     "sglang-metrics.prom:3: sglang:spec_accept_length four"),
    ("count of the wrong kind", "llamacpp:scrapes",
     lambda t: _oracle(t, "llamacpp-metrics-pair.prom", {
         "num_draft_tokens_total 2.61123e+06": "num_draft_tokens_total 2611230.5"}),
     "llamacpp-metrics-pair.prom:69 llamacpp:spec_decode_num_draft_tokens_total: count "
     "2611230.5"),
    ("count of the wrong kind", "llamacpp:speculative_simple",
     lambda t: _oracle(t, "llamacpp-speculative-simple.txt",
                       {"n_drafted = 640": "n_drafted = 640.0"}, "llamacpp"),
     "llamacpp-speculative-simple.txt: run 1: n_drafted 640.0"),
    ("count of the wrong kind", "llamacpp:server_log",
     lambda t: _oracle(t, "llamacpp-server.log", {SERVER_LINE: "  abc accepted /   448 generated"}),
     "llamacpp-server.log:7: accepted tokens (A) abc"),
    ("number of the wrong kind", "llamacpp:server_log",
     lambda t: _oracle(t, "llamacpp-server.log", {"mean len =  3.35": "mean len =  x"}),
     "llamacpp-server.log:7: mean acceptance length x"),
    ("count of the wrong kind", "llamacpp:speculative_simple",
     lambda t: _oracle(t, "llamacpp-speculative-simple.txt",
                       {"n_drafted = 640": "n_drafted = abc"}, "llamacpp"),
     "llamacpp-speculative-simple.txt: run 1: n_drafted abc"),
    ("count of the wrong kind", "llamacpp:server_log",
     lambda t: _oracle(t, "llamacpp-server.log", {SERVER_LINE: "  301 accepted /   4e2 generated"}),
     "llamacpp-server.log:7: draft tokens (P) 4e2"),
    ("count of the wrong kind", "llamacpp:completions",
     lambda t: _oracle(t, "llamacpp-completion.json", {'"draft_n": 448': '"draft_n": "448"'}),
     'llamacpp-completion.json: timings.draft_n: count "448"'),
    ("count of the wrong kind", "llamacpp:arm_record",
     lambda t: _oracle(t, "llamacpp-arm.json", {
         '"llamacpp:spec_decode_num_draft_tokens": 800':
         '"llamacpp:spec_decode_num_draft_tokens": false'}),
     "metrics.llamacpp:spec_decode_num_draft_tokens: count false"),
    ("count of the wrong kind", OURS_KIND,
     lambda t: _other_run(t, {"spec_drafts_proposed": 147.0}), "'spec_drafts_proposed' 147.0"),
    # another run of ours, read by the same checks as the main arm
    ("count past 2^63 - 1", OURS_KIND,
     lambda t: _other_run(t, {"spec_drafts_proposed": TWO63}),
     "'spec_drafts_proposed' 9223372036854775808"),
    ("negative count", OURS_KIND,
     lambda t: _other_run(t, {"spec_drafts_accepted": -1}), "'spec_drafts_accepted' -1"),
    ("accepted above proposed", OURS_KIND,
     lambda t: _other_run(t, {"spec_drafts_proposed": 147, "spec_drafts_accepted": 148}),
     "'spec_drafts_accepted' 148 exceeds 'spec_drafts_proposed' 147,"),
]  # fmt: skip

RULES = {
    "count past 2^63 - 1": (MALFORMED, PAST_COUNT),
    "negative count": (MALFORMED, NEGATIVE),
    "request id past 2^64 - 1": (MALFORMED, PAST_ID),
    "negative request id": (MALFORMED, NEGATIVE),
    "duration past 2^63 - 1 ns": (MALFORMED, PAST_DURATION),
    "negative duration": (MALFORMED, NEGATIVE),
    "count of the wrong kind": (MALFORMED, "is not an integer"),
    "number of the wrong kind": (MALFORMED, "is not a finite number"),
    "accepted above proposed": (MISCOUNTED, ABOVE),
    "step past the cap": (MISCOUNTED, CAP_WORDS),
    "mean acceptance length below 1": (
        MISCOUNTED,
        "is below 1: every verify step emits at least one token, so this is not 1 + A/S",
    ),
}
"""Each rule's exit code and words, whatever the source."""


@pytest.mark.parametrize(
    ("rule", "source", "arguments", "named"),
    CASES,
    ids=[f"{rule}: {source}" for rule, source, _, _ in CASES],
)
def test_one_bad_value_of_each_rule_exits_alike_from_every_source(
    tmp_path, capsys, rule, source, arguments, named
):
    code, words = RULES[rule]
    argv = [*arguments(tmp_path), "--bootstrap", "0", "--quiet"]
    with native_switch(source != "step_log:reference"):
        status = main(argv)
    err = " ".join(capsys.readouterr().err.split())
    assert status == code, err
    assert f"{named} {words}" in err, err
    assert str(tmp_path) in err, err  # the file the bad value is in, by its path
    assert "Traceback" not in err


def test_a_duration_sum_past_2_63_exits_alike_from_either_reader(tmp_path, capsys, monkeypatch):
    """Each line's verify_ns is allowed (2^63 - 1), their request's sum (2^64 - 2) is not: the
    rule of a sum past 2^63 - 1 (docs/command.md: exit 1), in its one wording, from either
    reader. The native pass meets the sum in its 64-bit sums and hands the range back
    (``overflow``); the refusal is then the one check's (``limits.check_total``). A request's
    sum is made over every file, so the request is named, not a file."""
    met: list[bool] = []
    fold_range = native._native.fold_range

    def spied(*args: Any, **options: Any) -> dict[str, Any]:
        found = fold_range(*args, **options)
        met.append(found["overflow"])
        return found

    monkeypatch.setattr(native._native, "fold_range", spied)
    said = {}
    for reader in ("native", "reference"):
        argv = [*_hook_log_timed(tmp_path, 2**63 - 1), "--bootstrap", "0", "--quiet"]
        with native_switch(reader == "native"):
            status = main(argv)
        said[reader] = (status, capsys.readouterr().err)
        if reader == "native":
            assert met and all(met)  # the native pass ran, and overflowed
            met.clear()
    assert not met  # the reference reader never asked the native pass
    assert said["native"] == said["reference"]
    status, err = said["native"]
    assert status == MISCOUNTED
    assert err == (
        "fold-acceptance: refused: leg 1, request 0 of writer 5f0c1a2b3c4d5e6f: 'verify_ns' "
        f"18446744073709551614 {PAST_TOTAL}: the engine's step timing is wrong (a step of "
        "anywhere near 2^63 ns is garbage); fix where the hook is given the step's durations\n"
    )
    assert limits.TOTAL_WORDS == PAST_TOTAL


def test_a_run_numbered_below_1_is_refused_alike_by_every_reader_of_runs(tmp_path, capsys):
    """Our arm record's legs and vLLM's per-request records both number runs from 1: a run 0
    is malformed in either (exit 2), in one wording."""
    request = {**VLLM_REQUEST, "run": 0}
    oracle = tmp_path / "requests.jsonl"
    oracle.write_text(json.dumps(request) + "\n")
    (tmp_path / "ours").mkdir()
    sources = {
        "record": [_our_arm(tmp_path / "ours", {"run": 0})],
        "vllm": [*_trace(tmp_path, "k=7", "k=7"), "--vs", f"vllm={oracle}"],
    }
    words = "0 is below 1: runs count from 1, the cold one first"
    assert limits.RUN_WORDS in words
    for where, (name, place) in {
        "record": ("'run'", "leg 2"),
        "vllm": ("run", "requests.jsonl"),
    }.items():
        assert main([*sources[where], "--bootstrap", "0", "--quiet"]) == MALFORMED
        err = capsys.readouterr().err
        assert f"{place}: {name} {words}" in err, err


def package_sources() -> set[str]:
    """Every source of steps and counts the package reads, from the package: the step sources
    a fold names (``STEP_SOURCE_TEXT``; the hook's log has two readers; ``ORACLE_STEPS`` are
    vLLM's per-request steps, the ``vllm:requests`` format), every oracle format the registry
    lists, and another run of ours (``--vs NAME:ours=``)."""
    steps = set(STEP_SOURCE_TEXT) - {STEP_LOG, ORACLE_STEPS}
    return {*steps, *HOOK_LOG, *registry.SOURCES, OURS_KIND}


def test_every_source_of_the_package_has_a_case():
    """A source the package reads with no case above fails here: the list is the package's,
    not the cases'."""
    assert {source for _, source, _, _ in CASES} == package_sources()
    assert {rule for rule, _, _, _ in CASES} == set(RULES)
    assert set(STEP_SOURCE_TEXT) == {STEP_LOG, ENGINE_TRACE, RECORD_COUNTERS, ORACLE_STEPS}
    assert tuple(f"{STEP_LOG}:{reader}" for reader in ("native", "reference")) == HOOK_LOG


def test_every_rule_is_sent_through_every_source_that_carries_it():
    """The hook's log carries every field of the steps' rules; the trace no duration, the
    records and vLLM no integer request id (vLLM's are strings) and no duration; SGLang's
    bench line and gauges carry ratios only."""
    for source in HOOK_LOG:
        assert {rule for rule, s, _, _ in CASES if s == source} == set(RULES) - {
            "mean acceptance length below 1",
            "number of the wrong kind",
        }
    for source in (*registry.SOURCES, OURS_KIND, RECORD_COUNTERS, ENGINE_TRACE):
        rules = {rule for rule, s, _, _ in CASES if s == source}
        if source not in ("sglang:bench",):
            assert "accepted above proposed" in rules, source
        # every source's values can be of the wrong kind: its counts, or its ratios when it
        # carries no count
        ratios_only = source in ("sglang:bench", "sglang:gauges")
        kind = "number of the wrong kind" if ratios_only else "count of the wrong kind"
        assert kind in rules, source


@pytest.mark.parametrize(
    ("fixture", "old", "new", "kind"),
    [
        ("vllm-log.txt", "Accepted: 400 tokens", "Accepted: -400 tokens", "vllm"),
        ("vllm-log.txt", "Drafted: 868 tokens", "Drafted: -868 tokens", "vllm"),
        ("llamacpp-speculative-simple.txt", "n_drafted = 640", "n_drafted = -640", "llamacpp"),
        ("llamacpp-speculative-simple.txt", "n_accept  = 301", "n_accept  = -301", "llamacpp"),
    ],
)
def test_a_negative_count_in_a_printed_output_is_refused_not_skipped(
    tmp_path, capsys, fixture, old, new, kind
):
    """A printed line with a signed count is the engine's line with a value no engine prints:
    malformed (exit 2, the count words), never a line the reader passes over as another's."""
    text = (ROOT / "fixtures" / "oracles" / fixture).read_text()
    assert old in text
    path = tmp_path / fixture
    path.write_text(text.replace(old, new, 1))
    gate = ROOT / "fixtures" / "gate-example"
    argv = [str(gate / "our-arm.json"), str(gate / "steps.jsonl"), f"--vs={kind}={path}"]
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "is negative: counts, request ids and durations are unsigned" in err
    assert str(path) in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("fixture", "old", "new", "marker", "kind"),
    [
        ("vllm-log.txt", ", Drafted: 868 tokens", "", "SpecDecoding metrics:", None),
        ("llamacpp-server.log", "), mean len =  3.35", "", "draft acceptance = ", None),
        # the rate is not read, but a line with no rate there is not llama-server's
        (
            "llamacpp-server.log",
            "draft acceptance = 0.67188",
            "draft acceptance = x",
            "draft acceptance = ",
            None,
        ),
    ],
)
def test_an_engines_line_that_cannot_be_read_is_refused_not_passed_over(
    tmp_path, capsys, fixture, old, new, marker, kind
):
    """A line that begins as the engine's (its marker) but does not read as one, cut or
    edited, is malformed (exit 2) by file and line: passing it over would drop its counts
    from the sums without a word."""
    status = main([*_oracle(tmp_path, fixture, {old: new}, kind), "--bootstrap", "0", "--quiet"])
    err = " ".join(capsys.readouterr().err.split())
    assert status == MALFORMED, err
    line = next(
        number
        for number, text in enumerate((ORACLES / fixture).read_text().splitlines(), start=1)
        if old in text
    )
    assert f"{fixture}:{line}: a {marker!r} line that cannot be read" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        # an oracle's legs number their runs from 1 too (a leg of run 0 folded as a cold one)
        (("vllm-gate-arm.json", '{"run": 2, "record": 0', '{"run": 0, "record": 0'),
         f"run 0 {limits.RUN_WORDS}"),
        (("sglang-legs.jsonl", '"run": 2', '"run": -3'), f"run -3 {NEGATIVE}"),
    ],
)  # fmt: skip
def test_an_oracles_run_below_1_is_refused_as_ours_is(tmp_path, capsys, edit, named):
    fixture, old, new = edit
    status = main([*_oracle(tmp_path, fixture, {old: new}), "--bootstrap", "0", "--quiet"])
    err = " ".join(capsys.readouterr().err.split())
    assert status == MALFORMED, err
    assert named in err and fixture in err, err


@pytest.mark.parametrize(
    ("edit", "named", "words"),
    [
        ({"warm_legs": [1, -1]}, "'warm_legs'[1] -1", NEGATIVE),
        ({"warm_legs": [1, "2"]}, "'warm_legs'[1] \"2\"", "is not an integer"),
    ],
)
def test_our_records_warm_leg_indices_are_counts(tmp_path, capsys, edit, named, words):
    document = record()
    document.update(edit)
    arm = tmp_path / "our-arm.json"
    arm.write_text(json.dumps(document))
    assert main([str(arm), "--bootstrap", "0", "--quiet"]) == MALFORMED
    err = " ".join(capsys.readouterr().err.split())
    assert f"{named} {words}" in err, err


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"tok_s": -5.0}, "leg 2: 'tok_s' -5.0 is negative"),
        ({"secs": -1}, "leg 2: 'secs' -1 is negative"),
        ({"tok_s": "fast"}, "leg 2: 'tok_s' \"fast\" is not a finite number"),
    ],
)
def test_a_legs_negative_time_or_rate_is_refused_not_printed(tmp_path, capsys, edit, said):
    """A leg's seconds and tokens per second are never negative: a record holding one is
    refused (exit 2), never folded into a throughput of -5.00 tok/s."""
    assert main([_our_arm(tmp_path, edit), "--bootstrap", "0", "--quiet"]) == MALFORMED
    err = " ".join(capsys.readouterr().err.split())
    assert said in err, err


def test_an_arm_records_metrics_of_the_wrong_kind_is_refused(tmp_path, capsys):
    for metrics, shown in (([], "[]"), (0, "0"), ("", '""')):
        document = record()
        document["metrics"] = metrics
        arm = tmp_path / "our-arm.json"
        arm.write_text(json.dumps(document))
        assert main([str(arm), "--bootstrap", "0", "--quiet"]) == MALFORMED
        err = " ".join(capsys.readouterr().err.split())
        assert f"'metrics' {shown} is not an object" in err, err


def test_a_vllm_requests_finish_reason_of_the_wrong_kind_is_refused(tmp_path, capsys):
    """A finish_reason of 5 was taken as none; the figures by request read it."""
    oracle = tmp_path / "requests.jsonl"
    oracle.write_text(json.dumps({**VLLM_REQUEST, "finish_reason": 5}) + "\n")
    argv = [*_trace(tmp_path, "k=7", "k=7"), "--vs", f"vllm={oracle}", "--bootstrap", "0"]
    assert main([*argv, "--quiet"]) == MALFORMED
    err = " ".join(capsys.readouterr().err.split())
    assert "requests.jsonl: finish_reason 5 is not a string" in err, err


@pytest.mark.parametrize("depth", [330, 1000])
def test_an_arm_record_with_a_deeply_nested_unknown_value_folds(tmp_path, depth):
    """orjson reads a value nested up to 1,024 deep; the search for integers past 64 bits
    walks the whole record and must not run out of Python's recursion (an unknown key's
    value is the record's writer's business), whether it finds one or not."""
    nested = "[" * depth + "]" * depth
    deep = orjson.loads(nested)
    for counters in ({}, {"spec_future_counter": 2**64}):
        document = record()
        document["notes"] = None  # written by hand below: no encoder nests this deep
        document["legs"][0].update(counters)
        path = tmp_path / "arm.json"
        path.write_text(json.dumps(document).replace('"notes": null', f'"notes": {nested}'))
        assert len(load_arm(path).legs) == len(document["legs"])
    assert limits.holds_past_64_bits(orjson.loads(b'{"a": [' * 1 + b"18446744073709551616]}"))
    assert not limits.holds_past_64_bits(deep)


def test_an_arm_record_number_beyond_a_double_is_refused_by_its_field(tmp_path):
    """JSON's numbers have no range; orjson's do. A record orjson cannot hold a number of is
    read again with numbers unbounded, so that the field is refused by name, by load_arm and
    by a follow's reload alike (which would otherwise wait for it to be written whole)."""
    start = "1" + "0" * 319  # beyond a double: orjson refuses the record
    text = re.sub(r'"generate_start_unix": [0-9.]+', f'"generate_start_unix": {start}',
                  json.dumps(record()), count=1)  # fmt: skip
    path = tmp_path / "arm.json"
    path.write_text(text)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)  # what made this case: orjson refuses it
    for load in (load_arm, load_arm_if_written):
        with pytest.raises(InputError) as error:
            load(path)
        assert str(error.value).startswith(f"{path}: leg 0")
        assert "'generate_start_unix' " in str(error.value)
    # the standard library's reading is held to orjson's strictness otherwise
    assert '"run"' in text
    path.write_text(text.replace('"run"', '"\\ud800run"', 1))
    with pytest.raises(InputError, match="not valid JSON"):
        load_arm(path)
    assert load_arm_if_written(path) is None
