"""Reading oracle arms: units, shapes, kind detection and refusals.

Expected figures are worked out by hand in the comments from the fixtures' numbers, not taken
from the program's output.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import orjson
import pytest

from fold.errors import InputError, RefusedError
from fold.inputs.oracles import (
    ArmFigures,
    arm_from_counts,
    detect_kind,
    load_oracle,
    load_oracle_arms,
    parse_scrapes,
    parse_vs_spec,
    read_oracle,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "oracles"
VLLM_PER_POS = (270, 210, 160, 130, 100, 75, 55)  # sums to 1000, each <= 310


def _json(obj: object) -> str:
    return orjson.dumps(obj).decode()


def _jsonl(*objs: object) -> str:
    return "\n".join(_json(o) for o in objs) + "\n"


# --------------------------------------------------------------------------------------------
# The gate's example
# --------------------------------------------------------------------------------------------


def _assert_gate_vllm_counts(arm: ArmFigures) -> None:
    assert (arm.accepted, arm.proposed, arm.steps) == (1000, 2170, 310)
    # A/P = 1000/2170 = 0.46083; 1 + A/S = 1 + 1000/310 = 4.22581
    assert arm.accept_rate == pytest.approx(0.460829, abs=1e-6)
    assert f"{arm.accept_rate * 100:.1f}%" == "46.1%"
    assert arm.mean_acceptance_length == pytest.approx(4.225806, abs=1e-6)
    assert f"{arm.mean_acceptance_length:.2f}" == "4.23"
    assert arm.per_position == VLLM_PER_POS
    assert arm.completion_tokens_per_step is None


def test_vllm_fixture_reads_the_gate_example() -> None:
    arm = load_oracle("vllm", FIXTURES / "vllm-arm.json")
    assert arm.kind == "vllm"
    _assert_gate_vllm_counts(arm)
    assert arm.output_throughput_tok_s == 16.111
    # verify steps/s = 16.111 / (1310/310) = 16.111 * 310 / 1310 = 3.812527
    assert arm.verify_steps_per_s == pytest.approx(3.812527, abs=1e-6)
    assert arm.sources["accepted"].startswith("vllm:spec_decode_num_accepted_tokens_total")
    assert arm.sources["tok_s"] == "output_throughput_tok_s"
    # per-position rate is unconditional: 270/310 for position 0
    assert arm.per_position_rate is not None
    assert arm.per_position_rate[0] == pytest.approx(0.870968, abs=1e-6)


def test_vllm_before_after_pairs_give_the_delta() -> None:
    # after - before: 350-40 = 310, 2450-280 = 2170, 1121-121 = 1000
    arm = load_oracle("vllm", FIXTURES / "vllm-arm-pairs.json")
    _assert_gate_vllm_counts(arm)
    assert "(metrics.after - metrics.before)" in arm.sources["steps"]
    assert arm.population == "between_scrapes"


def test_prometheus_two_scrapes_give_the_delta() -> None:
    arm = load_oracle("vllm", FIXTURES / "vllm-scrapes.prom")
    assert arm.kind == "vllm"
    _assert_gate_vllm_counts(arm)
    assert arm.output_throughput_tok_s is None
    assert arm.verify_steps_per_s is None
    assert arm.sources["tok_s"].startswith("not recorded")
    assert "after - before scrape" in arm.sources["accepted"]
    assert arm.notes == ()


def test_llamacpp_fixture() -> None:
    arm = load_oracle("llama", FIXTURES / "llamacpp-arm.json")
    assert arm.kind == "llamacpp"
    # A/P = 520/800 = 0.65; 1 + 520/200 = 3.6; 15.2 / 3.6 = 4.2222
    assert arm.accept_rate == pytest.approx(0.65)
    assert arm.mean_acceptance_length == pytest.approx(3.6)
    assert arm.verify_steps_per_s == pytest.approx(4.222222, abs=1e-6)
    assert arm.per_position == (170, 140, 120, 90)


def test_sglang_legs_fixture_keeps_its_own_unit() -> None:
    arm = load_oracle("sglang", FIXTURES / "sglang-legs.jsonl")
    assert arm.kind == "sglang"
    # warm legs are runs 2-4: median of 16.010, 16.034, 16.051 (all four would give 16.022)
    assert arm.output_throughput_tok_s == pytest.approx(16.034)
    # plain mean of 4.66, 4.67, 4.68 (with the cold 4.70 it would be 4.6775)
    assert arm.completion_tokens_per_step == pytest.approx(4.67)
    assert arm.mean_acceptance_length is None
    assert arm.accept_rate is None
    # steps/s in SGLang's unit: 16.034 / 4.67 = 3.43340
    assert arm.verify_steps_per_s == pytest.approx(3.433405, abs=1e-6)
    assert arm.population == "warm_legs"
    assert "plain mean" in arm.sources["completion_tokens_per_step"]
    assert "SGLang unit" in arm.sources["completion_tokens_per_step"]
    assert arm.sources["mean_acceptance_length"].startswith("not recorded")


# --------------------------------------------------------------------------------------------
# SGLang conversions
# --------------------------------------------------------------------------------------------


def test_sglang_conversion_from_completion_and_verify_counts() -> None:
    arm = load_oracle("sg", FIXTURES / "sglang-requests.jsonl")
    # A = (257 - 1 - 60) + (129 - 1 - 30) = 196 + 98 = 294 over S = 90 verify steps
    assert (arm.accepted, arm.steps) == (294, 90)
    assert arm.mean_acceptance_length == pytest.approx(1 + 294 / 90)  # 4.2667
    # SGLang's unit pooled: 386 / 90 = 4.2889, not the plain mean (4.2833 + 4.3) / 2 = 4.2917
    assert arm.completion_tokens_per_step == pytest.approx(4.288889, abs=1e-6)
    assert arm.proposed is None and arm.accept_rate is None
    assert "completion_tokens - 1 - spec_verify_ct" in arm.sources["accepted"]
    assert arm.notes  # the derivation is exact only when no step was cut


def test_sglang_pooled_rate_is_a_ratio_of_sums() -> None:
    text = _jsonl(
        {"spec_accepted_drafts": 10, "spec_proposed_drafts": 20, "spec_verify_ct": 5},
        {"spec_accepted_drafts": 90, "spec_proposed_drafts": 100, "spec_verify_ct": 25},
    )
    arm = read_oracle("sg", text)
    # 100/120 = 0.8333 (the mean of per-request ratios would be (0.5 + 0.9)/2 = 0.7)
    assert arm.accept_rate == pytest.approx(100 / 120)
    # 1 + 100/30 = 4.3333
    assert arm.mean_acceptance_length == pytest.approx(4.333333, abs=1e-6)
    assert len(arm.notes) == 1 and "does not measure P" in arm.notes[0]


def test_sglang_correct_drafts_synonym_and_meta_info() -> None:
    text = _jsonl({"meta_info": {"spec_num_correct_drafts": 40, "spec_verify_ct": 20}})
    arm = read_oracle("sg", text)
    assert arm.mean_acceptance_length == pytest.approx(3.0)  # 1 + 40/20
    assert "spec_num_correct_drafts" in arm.sources["accepted"]


def test_sglang_bare_lengths_without_run_use_all_records() -> None:
    arm = read_oracle("sg", _jsonl({"spec_accept_length": 4.0}, {"spec_accept_length": 5.0}))
    assert arm.completion_tokens_per_step == pytest.approx(4.5)
    assert arm.mean_acceptance_length is None
    assert arm.output_throughput_tok_s is None


def test_sglang_missing_counts_on_one_record_leaves_figure_unrecorded() -> None:
    text = _jsonl(
        {"completion_tokens": 50, "spec_verify_ct": 10, "spec_accept_length": 5.0},
        {"spec_accept_length": 4.0},
    )
    arm = read_oracle("sg", text)
    assert arm.accepted is None and arm.mean_acceptance_length is None
    # falls back to the plain mean of the two per-record lengths
    assert arm.completion_tokens_per_step == pytest.approx(4.5)


def test_sglang_run_on_some_records_only_is_an_input_error() -> None:
    text = _jsonl({"run": 2, "accept_length": 4.0}, {"accept_length": 5.0})
    with pytest.raises(InputError, match=":2: no run field"):
        read_oracle("sg", text, where="legs.jsonl")


def test_sglang_refusals() -> None:
    # completion_tokens < 1 + spec_verify_ct
    with pytest.raises(RefusedError, match="completion_tokens = 10"):
        read_oracle("sg", _jsonl({"completion_tokens": 10, "spec_verify_ct": 10}))
    # accepted > proposed on one record
    with pytest.raises(RefusedError, match="exceeds spec_proposed_drafts"):
        read_oracle("sg", _jsonl({"spec_accepted_drafts": 30, "spec_proposed_drafts": 20}))
    # an accept length that is not completion/verify at all
    with pytest.raises(RefusedError, match="mixes units"):
        read_oracle(
            "sg",
            _jsonl({"completion_tokens": 100, "spec_verify_ct": 20, "spec_accept_length": 2.0}),
        )


def test_sglang_disagreeing_synonyms() -> None:
    with pytest.raises(InputError, match="disagree"):
        read_oracle("sg", _jsonl({"accept_length": 4.0, "spec_accept_length": 4.5}))


# --------------------------------------------------------------------------------------------
# Counter shapes
# --------------------------------------------------------------------------------------------


def _vllm_record(metrics: object, **extra: object) -> str:
    return _json({"output_throughput_tok_s": 10.0, "metrics": metrics, **extra})


def test_total_suffix_is_optional() -> None:
    plain = read_oracle(
        "v",
        _vllm_record(
            {
                "vllm:spec_decode_num_drafts": 10,
                "vllm:spec_decode_num_draft_tokens": 30,
                "vllm:spec_decode_num_accepted_tokens": 12,
            }
        ),
    )
    suffixed = read_oracle(
        "v",
        _vllm_record(
            {
                "vllm:spec_decode_num_drafts_total": 10,
                "vllm:spec_decode_num_draft_tokens_total": 30,
                "vllm:spec_decode_num_accepted_tokens_total": 12,
            }
        ),
    )
    for arm in (plain, suffixed):
        assert (arm.steps, arm.proposed, arm.accepted) == (10, 30, 12)
        assert arm.mean_acceptance_length == pytest.approx(2.2)  # 1 + 12/10
    assert "_total" in suffixed.sources["steps"]
    assert "_total" not in plain.sources["steps"]


def test_both_suffixed_and_plain_name_is_an_input_error() -> None:
    with pytest.raises(InputError, match="keep one"):
        read_oracle(
            "v",
            _vllm_record(
                {"vllm:spec_decode_num_drafts": 10, "vllm:spec_decode_num_drafts_total": 10}
            ),
        )


def test_per_counter_pairs_and_float_counts() -> None:
    metrics = {
        "vllm:spec_decode_num_drafts_total": {"before": 5.0, "after": 15.0},
        "vllm:spec_decode_num_draft_tokens_total": {"before": 15, "after": 45},
        "vllm:spec_decode_num_accepted_tokens_total": {"before": 3, "after": 18},
        "vllm:spec_decode_num_accepted_tokens_per_pos_total": {
            "before": {"0": 2, "1": 1, "2": 0},
            "after": {"0": 9, "1": 6, "2": 3},
        },
    }
    arm = read_oracle("v", _vllm_record(metrics))
    assert (arm.steps, arm.proposed, arm.accepted) == (10, 30, 15)
    assert arm.per_position == (7, 5, 3)


def test_mixing_pairs_and_single_values_is_an_input_error() -> None:
    metrics = {
        "vllm:spec_decode_num_drafts_total": {"before": 5, "after": 15},
        "vllm:spec_decode_num_accepted_tokens_total": 10,
    }
    with pytest.raises(InputError, match="same way"):
        read_oracle("v", _vllm_record(metrics))


def test_counter_reset_between_scrapes_is_refused() -> None:
    metrics = {
        "before": {
            "vllm:spec_decode_num_drafts_total": 500,
            "vllm:spec_decode_num_draft_tokens_total": 3500,
        },
        "after": {
            "vllm:spec_decode_num_drafts_total": 20,
            "vllm:spec_decode_num_draft_tokens_total": 140,
        },
    }
    with pytest.raises(RefusedError, match="went down from 500"):
        read_oracle("v", _vllm_record(metrics))


def test_a_counter_missing_before_counts_from_zero_and_one_missing_after_is_refused() -> None:
    metrics = {
        "before": {"vllm:spec_decode_num_drafts_total": 5},
        "after": {
            "vllm:spec_decode_num_drafts_total": 15,
            "vllm:spec_decode_num_accepted_tokens_total": 4,
        },
    }
    arm = read_oracle("v", _vllm_record(metrics))
    assert (arm.steps, arm.accepted) == (10, 4)  # 15 - 5, and 4 - 0
    assert any("counted from 0" in note for note in arm.notes)
    metrics["before"], metrics["after"] = metrics["after"], metrics["before"]
    with pytest.raises(RefusedError, match="not after"):
        read_oracle("v", _vllm_record(metrics))


def test_metrics_as_two_scrape_texts_in_a_json_record() -> None:
    drafts, accepted = "llamacpp:spec_decode_num_drafts", "llamacpp:spec_decode_num_accepted_tokens"
    before = f"{drafts}_total 4\n{accepted}_total 6\n"
    after = f"{drafts}_total 14\n{accepted}_total 26\n"
    arm = read_oracle("l", _vllm_record({"before": before, "after": after}))
    assert arm.kind == "llamacpp"
    assert (arm.steps, arm.accepted) == (10, 20)
    assert arm.mean_acceptance_length == pytest.approx(3.0)
    assert arm.proposed is None and arm.accept_rate is None


def test_per_position_list_or_mapping_with_gap_rejected() -> None:
    with pytest.raises(InputError, match="without gaps"):
        read_oracle(
            "v",
            _vllm_record({"vllm:spec_decode_num_accepted_tokens_per_pos": {"0": 3, "2": 1}}),
        )


def test_tok_s_from_legs_when_not_given_top_level() -> None:
    record = {
        "metrics": {"vllm:spec_decode_num_drafts": 10, "vllm:spec_decode_num_accepted_tokens": 5},
        "legs": [
            {"run": 1, "tok_s": 9.0},
            {"run": 2, "tok_s": 12.0},
            {"run": 3, "tok_s": 11.0},
            {"run": 4, "tok_s": 13.0},
        ],
    }
    arm = read_oracle("v", _json(record))
    assert arm.output_throughput_tok_s == 12.0  # median of 12, 11, 13; the cold 9 dropped
    assert "warm legs of 4 (run > 1)" in arm.sources["tok_s"]


def test_negative_and_fractional_counts_are_input_errors() -> None:
    with pytest.raises(InputError, match="negative"):
        read_oracle("v", _vllm_record({"vllm:spec_decode_num_drafts": -1}))
    with pytest.raises(InputError, match=r"count 2\.5 is not an integer"):
        read_oracle("v", _vllm_record({"vllm:spec_decode_num_drafts": 2.5}))


# --------------------------------------------------------------------------------------------
# Counter refusals
# --------------------------------------------------------------------------------------------


def _counts(s: int | None, p: int | None, a: int | None, pp: list[int] | None = None) -> str:
    metrics: dict[str, object] = {}
    for key, value in (
        ("vllm:spec_decode_num_drafts_total", s),
        ("vllm:spec_decode_num_draft_tokens_total", p),
        ("vllm:spec_decode_num_accepted_tokens_total", a),
        ("vllm:spec_decode_num_accepted_tokens_per_pos_total", pp),
    ):
        if value is not None:
            metrics[key] = value
    return _vllm_record(metrics)


@pytest.mark.parametrize(
    ("s", "p", "a", "pp", "message"),
    [
        (310, 2170, 2200, None, "exceeds vllm:spec_decode_num_draft_tokens_total"),
        (0, 70, 10, None, "tokens without drafts"),
        (0, 0, 0, None, "no speculative step"),
        (None, 0, None, None, "no speculative step"),
        (10, 5, 2, None, "less than vllm:spec_decode_num_drafts_total"),
        (310, 2170, 1000, [300, 300, 300, 99], "sum to 999"),
        (10, 30, 12, [11, 1], r"exceeds vllm:spec_decode_num_drafts_total \(cumulative\) = 10"),
    ],
)
def test_inconsistent_counters_are_refused(
    s: int | None, p: int | None, a: int | None, pp: list[int] | None, message: str
) -> None:
    with pytest.raises(RefusedError, match=message) as info:
        read_oracle("v", _counts(s, p, a, pp), where="vllm-arm.json")
    assert "vllm-arm.json" in str(info.value)
    assert info.value.exit_code == 1


def test_oracle_without_acceptance_data_is_a_row_of_not_recorded() -> None:
    arm = read_oracle("v", _json({"engine": "vllm", "output_throughput_tok_s": 16.0}))
    assert arm.kind == "vllm"
    assert arm.output_throughput_tok_s == 16.0
    for value in (
        arm.steps,
        arm.proposed,
        arm.accepted,
        arm.accept_rate,
        arm.mean_acceptance_length,
        arm.verify_steps_per_s,
        arm.per_position,
    ):
        assert value is None
    assert arm.sources["accepted"].startswith("not recorded")


# --------------------------------------------------------------------------------------------
# Prometheus text
# --------------------------------------------------------------------------------------------


def test_prometheus_parsing_labels_escapes_and_engines() -> None:
    text = "\n".join(
        [
            "# HELP vllm:spec_decode_num_drafts_total Number of drafts.",
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="a \\"b\\" c"} 6.0',
            'vllm:spec_decode_num_drafts_total{engine="1",model_name="a \\"b\\" c"} 4.0',
            'vllm:spec_decode_num_drafts_created{engine="0",model_name="x"} 1.7e9',
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",} 1.2e1 1712345678000',
            "vllm:num_requests_running 3",
            "process_cpu_seconds_total 12.5",
        ]
    )
    scrapes = parse_scrapes(text, where="m.prom")
    assert len(scrapes) == 1
    key = ("vllm:spec_decode_num_drafts_total", (("engine", "0"), ("model_name", 'a "b" c')))
    assert scrapes[0].samples[key].value == 6.0
    arm = read_oracle("v", text)
    assert arm.steps == 10  # summed over the two engines
    assert arm.accepted == 12
    assert arm.notes and "single scrape" in arm.notes[0]


def test_prometheus_three_scrapes_and_bad_lines() -> None:
    one = "vllm:spec_decode_num_drafts_total 1\n"
    with pytest.raises(InputError, match="scrape 3 starts here"):
        parse_scrapes(one * 3, where="m.prom")
    with pytest.raises(InputError, match=r"m\.prom:2: not a Prometheus"):
        parse_scrapes(one + "this is not a sample line\n", where="m.prom")
    with pytest.raises(InputError, match="abc is not a finite number"):
        parse_scrapes("vllm:spec_decode_num_drafts_total abc\n", where="m.prom")


def test_prometheus_per_position_needs_position_label() -> None:
    text = 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0"} 3\n'
    with pytest.raises(InputError, match="without a position label"):
        read_oracle("v", text)


# --------------------------------------------------------------------------------------------
# Kind detection and --vs
# --------------------------------------------------------------------------------------------


def test_kind_detection() -> None:
    assert detect_kind((FIXTURES / "vllm-arm.json").read_text()) == "vllm"
    assert detect_kind((FIXTURES / "vllm-scrapes.prom").read_text()) == "vllm"
    assert detect_kind((FIXTURES / "llamacpp-arm.json").read_text()) == "llamacpp"
    assert detect_kind((FIXTURES / "sglang-legs.jsonl").read_text()) == "sglang"
    assert detect_kind((FIXTURES / "sglang-requests.jsonl").read_text()) == "sglang"


def test_unknown_kind_asks_for_it() -> None:
    text = _jsonl({"tok_s": 10.0}, {"tok_s": 11.0})
    with pytest.raises(InputError, match="NAME:KIND=PATH"):
        read_oracle("x", text)
    # given explicitly it reads, with nothing but tok/s
    arm = read_oracle("x", text, "sglang")
    assert arm.output_throughput_tok_s == pytest.approx(10.5)
    assert arm.completion_tokens_per_step is None


def test_given_kind_must_match_the_content() -> None:
    with pytest.raises(InputError, match="given as llamacpp"):
        read_oracle("x", (FIXTURES / "vllm-arm.json").read_text(), "llama.cpp")
    with pytest.raises(InputError, match="several vLLM records"):
        read_oracle("x", _jsonl({"tok_s": 1.0}, {"tok_s": 2.0}), "vllm")


def test_mixed_engines_in_one_file() -> None:
    metrics = {"vllm:spec_decode_num_drafts": 1, "llamacpp:spec_decode_num_drafts": 1}
    with pytest.raises(InputError, match="shows llamacpp and vllm"):
        read_oracle("x", _vllm_record(metrics))


def test_unreadable_inputs() -> None:
    with pytest.raises(InputError, match="empty"):
        read_oracle("x", "  \n")
    with pytest.raises(InputError, match=r"legs\.jsonl:2: not JSON"):
        read_oracle("x", '{"accept_length": 4}\n{"accept_length": \n', where="legs.jsonl")
    with pytest.raises(InputError, match="cannot read"):
        load_oracle("x", FIXTURES / "does-not-exist.json")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("vllm=vllm-arm.json", ("vllm", None, "vllm-arm.json")),
        ("sg:sglang=primary-legs.jsonl", ("sg", "sglang", "primary-legs.jsonl")),
        ("l:llama.cpp=/tmp/a=b:c.json", ("l", "llamacpp", "/tmp/a=b:c.json")),
    ],
)
def test_parse_vs_spec(spec: str, expected: tuple[str, str | None, str]) -> None:
    assert parse_vs_spec(spec) == expected


@pytest.mark.parametrize("spec", ["vllm", "=x.json", "vllm=", "a b=x", "v:trt=x.json"])
def test_parse_vs_spec_rejects(spec: str) -> None:
    with pytest.raises(InputError):
        parse_vs_spec(spec)


# --------------------------------------------------------------------------------------------
# Our arm and JSON
# --------------------------------------------------------------------------------------------


def test_arm_from_counts_for_our_arm() -> None:
    ours = arm_from_counts(
        "ours", "ours", tok_s=14.951, steps=310, proposed=2170, accepted=930, where="steps.jsonl"
    )
    assert ours.mean_acceptance_length == pytest.approx(4.0)  # 1 + 930/310
    assert ours.accept_rate == pytest.approx(930 / 2170)
    with pytest.raises(InputError, match="tok/s"):
        arm_from_counts("ours", "ours", tok_s=math.nan)
    with pytest.raises(InputError, match=r"drafts \(S\) true is not an integer"):
        arm_from_counts("ours", "ours", steps=True)  # type: ignore[arg-type]


def test_to_json_is_plain_and_has_no_nan() -> None:
    # One file per format; the directories hold whole runs (vllm-real/: tests/test_vllm_real.py).
    for path in sorted(p for p in FIXTURES.iterdir() if p.is_file()):
        for arm in load_oracle_arms(path.stem, path):  # a sweep's runs: an arm each
            doc = arm.to_json()
            encoded = orjson.dumps(doc)
            assert b"NaN" not in encoded and b"Infinity" not in encoded
            assert orjson.loads(encoded) == doc
    sg = load_oracle("sg", FIXTURES / "sglang-legs.jsonl").to_json()
    assert sg["mean_acceptance_length"] is None
    assert sg["accepted"] is None
    assert sg["completion_tokens_per_step"] == pytest.approx(4.67)


def test_a_warm_record_without_tok_s_is_named() -> None:
    """Found by fuzzing the vLLM files (fuzz/regressions/oracle-vllm/): the refusal counted
    the records lacking tok_s but named neither the file nor the record."""
    doc = orjson.loads((FIXTURES / "vllm-gate-arm.json").read_bytes())
    del doc["legs"][1]["tok_s"]  # run 2 of the first prompt: a warm leg
    with pytest.raises(InputError) as error:
        read_oracle("vllm", _json(doc), where="gate.json")
    assert str(error.value).startswith("gate.json: legs[1]: no tok_s, and 1 of the ")


def test_records_without_a_warm_one_are_named() -> None:
    records = [{"run": 1, "tok_s": 10.0, "spec_verify_ct": 3, "completion_tokens": 9}] * 2
    with pytest.raises(RefusedError) as error:
        read_oracle("sglang", _jsonl(*records), where="legs.jsonl")
    assert "no record has run > 1 among the 2 from legs.jsonl:1 on" in str(error.value)


@pytest.mark.parametrize("accepted", [2**63, 10**40, 10**320])
def test_a_count_no_counter_holds_is_refused_naming_it(accepted: int) -> None:
    """Found by fuzzing llama.cpp's server log (fuzz/regressions/oracle-llamacpp/): a
    320-digit 'accepted' ended in an OverflowError (a float past its range) and "this is a
    bug". Any count past 2^63 - 1 is refused, naming the file and the count."""
    text = (FIXTURES / "llamacpp-server.log").read_text()
    line = next(x for x in text.splitlines() if "draft acceptance" in x)
    big = line.split("(")[0] + (
        f"({accepted} accepted / {accepted + 1} generated), mean len =  3.35"
    )
    with pytest.raises(InputError) as error:
        read_oracle("llama", text + big + "\n", where="server.log")
    assert str(error.value).startswith(f"server.log:{text.count(chr(10)) + 1}: ")
    assert "is past 2^63 - 1, the largest count (FORMAT.md)" in str(error.value)
    exact = line.split("(")[0] + f"({2**62} accepted / {2**62} generated), mean len =  3.35"
    assert read_oracle("llama", exact + "\n", where="server.log").accepted == 2**62


def test_synonyms_past_64_bits_are_compared_not_a_bug() -> None:
    """Found by fuzzing SGLang's responses (fuzz/regressions/oracle-sglang/): a deprecated
    synonym beside its new key was compared by orjson, which cannot write an integer past 64
    bits: "Integer exceeds 64-bit range" and "this is a bug"."""
    lines = (FIXTURES / "sglang-generate-0.5.16.jsonl").read_text().splitlines()
    record = orjson.loads(lines[0])
    meta = record["meta_info"]
    assert meta["spec_num_proposed_drafts"] == meta["spec_proposed_drafts"] == 420
    meta["spec_num_proposed_drafts"] = 2**65
    text = json.dumps(record) + "\n" + "\n".join(lines[1:]) + "\n"
    with pytest.raises(InputError) as error:
        read_oracle("sglang", text, where="responses.jsonl")
    assert str(error.value).startswith(
        "responses.jsonl:1: spec_num_proposed_drafts and spec_proposed_drafts disagree ("
    ), str(error.value)
