"""Every oracle format of the reference, one fixture each, read against hand-computed figures.

The fixtures under fixtures/oracles/ were written from the engines' released sources (see
docs/oracles.md); each expectation below is worked out from the numbers in the fixture, in the
comment beside it, never from the program's output.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from fold.errors import InputError, RefusedError
from fold.inputs.oracles import (
    ALL_LEGS,
    INTERVAL,
    LAST_INTERVAL,
    REQUESTS,
    SINCE_START,
    WARM_LEGS,
    ArmFigures,
    detect_kind,
    load_oracle,
    read_oracle,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "oracles"
ABOVE = (
    "more draft tokens accepted than proposed: the engine miscounts, or the output is not its "
    "own as written; take it again"
)  # the step rule's words (fold.inputs.limits) with the oracles' what to do
GATE_PER_POS = (270, 210, 160, 130, 100, 75, 55)  # sums to 1000


def _read(name: str) -> ArmFigures:
    return load_oracle(name.split(".")[0], FIXTURES / name)


def _check(
    arm: ArmFigures,
    *,
    s: int | None,
    p: int | None,
    a: int | None,
    tok_s: float | None,
    population: str,
) -> None:
    """S, P, A, tok/s and population as given; A/P and 1 + A/S from their definitions."""
    assert (arm.steps, arm.proposed, arm.accepted) == (s, p, a)
    if a is not None and p:
        assert arm.accept_rate == pytest.approx(a / p, rel=1e-12)
    else:
        assert arm.accept_rate is None
    if a is not None and s:
        assert arm.mean_acceptance_length == pytest.approx(1 + a / s, rel=1e-12)
    else:
        assert arm.mean_acceptance_length is None
    if tok_s is None:
        assert arm.output_throughput_tok_s is None
    else:
        assert arm.output_throughput_tok_s == pytest.approx(tok_s, rel=1e-12)
    assert arm.population == population


# --------------------------------------------------------------------------------------------
# vLLM
# --------------------------------------------------------------------------------------------


def test_vllm_two_scrapes_of_one_engine() -> None:
    # after - before: 350 - 40, 2450 - 280, 1121 - 121
    arm = _read("vllm-scrapes.prom")
    _check(arm, s=310, p=2170, a=1000, tok_s=None, population=INTERVAL)
    assert arm.per_position == GATE_PER_POS
    assert f"{arm.accept_rate:.1%}" == "46.1%" and f"{arm.mean_acceptance_length:.2f}" == "4.23"


def test_vllm_scrapes_of_two_engines_are_summed_created_ignored_new_series_from_zero() -> None:
    # engine 0: 200-40 = 160, 1400-280 = 1120, 641-121 = 520;
    # engine 1: 160-10 = 150, 1120-70 = 1050, 510-30 = 480  -> 310, 2170, 1000
    arm = _read("vllm-scrapes-dp.prom")
    _check(arm, s=310, p=2170, a=1000, tok_s=None, population=INTERVAL)
    # per position: engine 0 [140,110,85,65,51,39,30] + engine 1 [130,100,75,65,49,36,25]
    # (engine 1's position 6 is missing from the first scrape: 25 - 0)
    assert arm.per_position == GATE_PER_POS
    assert any(
        "counted from 0" in note and 'engine="1"' in note and note.endswith("position 6")
        for note in arm.notes
    )
    assert detect_kind((FIXTURES / "vllm-scrapes-dp.prom").read_text()) == "vllm"


def test_vllm_gate_arm_as_the_capture_script_writes_it() -> None:
    # get_metrics() names without _total, per-position null, counters read after the last leg
    arm = _read("vllm-gate-arm.json")
    # 1 + 1363/430 = 4.1698, 1363/3010 = 45.28%
    _check(arm, s=430, p=3010, a=1363, tok_s=16.111, population=ALL_LEGS)
    assert arm.per_position is None
    assert arm.sources["per_position"] == (
        "not recorded: vllm:spec_decode_num_accepted_tokens_per_pos is null"
    )
    # warm tok/s sorted: 16.0 16.05 16.111 16.111 16.2 16.3 -> median 16.111, as recorded
    assert "metrics.output_throughput_tok_s" in arm.sources["tok_s"]
    assert "all 9 legs" in arm.population_detail


def test_vllm_bench_serve_result() -> None:
    arm = _read("vllm-bench-serve.json")
    _check(arm, s=310, p=2170, a=1000, tok_s=16.111, population=INTERVAL)
    # per-position rates x 310: 0.8709677 x 310 = 270, ..., 0.1774194 x 310 = 55
    assert arm.per_position == GATE_PER_POS
    assert arm.sources["tok_s"] == "output_throughput"


def test_vllm_bench_serve_appended_runs_are_pooled() -> None:
    # runs: S 100 + 210, P 700 + 1470, A 300 + 700; tok/s median(15.9, 16.3) = 16.1
    arm = _read("vllm-bench-serve-append.jsonl")
    _check(arm, s=310, p=2170, a=1000, tok_s=16.1, population=INTERVAL)
    # (85+185, 65+145, 50+110, 40+90, 30+70, 20+55, 10+45)
    assert arm.per_position == GATE_PER_POS


def test_vllm_spec_decoding_log_lines() -> None:
    # Accepted 600 + 400, Drafted 1302 + 868. No S is printed, but 1 + 600/S rounds to 4.23
    # only for S in [600/3.235, 600/3.225] = [185.5, 186.0]: 186; and 400/S for S = 124.
    arm = _read("vllm-log.txt")
    _check(arm, s=186 + 124, p=2170, a=1000, tok_s=None, population=SINCE_START)
    assert arm.bounds == {}


def test_vllm_log_lines_with_several_possible_step_counts_give_a_bound() -> None:
    line = (
        "INFO [metrics.py:136] SpecDecoding metrics: Mean acceptance length: 3.50, Accepted "
        "throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: 5000 tokens, "
        "Drafted: 9000 tokens, Per-position acceptance rate: 0.9, Avg Draft acceptance rate: "
        "55.6%\n"
    )
    arm = read_oracle("v", line)
    # S in [5000/2.505, 5000/2.495] = [1996.0, 2004.0]: 1996..2004, shown as 2000 +- 4
    assert (arm.steps, arm.bounds) == (2000, {"steps": 4.0})
    assert arm.mean_acceptance_length == pytest.approx(1 + 5000 / 2000)
    # 1 + A/S moves at most to 1 + 5000/1996
    assert arm.mean_acceptance_length_bound == pytest.approx(5000 / 1996 - 5000 / 2000)
    idle = line.replace("length: 3.50", "length: 1.00").replace("Accepted: 5000", "Accepted: 0")
    arm = read_oracle("v", line + idle)  # an interval that accepted nothing: any S fits
    assert arm.steps is None and (arm.accepted, arm.proposed) == (5000, 18000)
    # 1 + 7/S = 3.50 +- 0.005 needs S in [2.794, 2.806]: no whole number
    bad = line.replace("Accepted: 5000", "Accepted: 7").replace("Drafted: 9000", "Drafted: 20")
    with pytest.raises(RefusedError, match="no whole number of drafts"):
        read_oracle("v", bad)


def test_vllm_get_metrics_per_position_as_list_object_or_null() -> None:
    base = {
        "vllm:spec_decode_num_drafts": 10,
        "vllm:spec_decode_num_draft_tokens": 30,
        "vllm:spec_decode_num_accepted_tokens": 15,
    }
    for value, expected in (([7, 5, 3], (7, 5, 3)), ({"0": 7, "1": 5, "2": 3}, (7, 5, 3)),
                            (None, None)):  # fmt: skip
        metrics = {**base, "vllm:spec_decode_num_accepted_tokens_per_pos": value}
        arm = read_oracle("v", orjson.dumps({"metrics": metrics}).decode())
        _check(arm, s=10, p=30, a=15, tok_s=None, population=SINCE_START)
        assert arm.per_position == expected


# --------------------------------------------------------------------------------------------
# SGLang
# --------------------------------------------------------------------------------------------


def _check_sglang_pair(arm: ArmFigures) -> None:
    # S = 60 + 30, A = 196 + 98, P = 420 + 210 (= 90 x 7)
    _check(arm, s=90, p=630, a=294, tok_s=None, population=REQUESTS)
    # SGLang's unit: (257 + 129) / 90 = 4.2889
    assert arm.completion_tokens_per_step == pytest.approx(386 / 90, rel=1e-12)
    # histograms [7,6,9,10,11,8,5,4] + [4,3,4,5,5,4,3,2] = [11,9,13,15,16,12,8,6];
    # steps accepting more than i: 90-11 = 79, 79-9 = 70, 57, 42, 26, 14, 6
    assert arm.per_position == (79, 70, 57, 42, 26, 14, 6)
    assert any("does not measure P" in note for note in arm.notes)


def test_sglang_0_5_23_batch_response() -> None:
    _check_sglang_pair(_read("sglang-generate-0.5.23.json"))


def test_sglang_0_5_16_jsonl_with_deprecated_aliases() -> None:
    _check_sglang_pair(_read("sglang-generate-0.5.16.jsonl"))


def test_sglang_0_5_9_single_response() -> None:
    arm = _read("sglang-generate-0.5.9.json")
    # spec_accept_token_num 196, spec_draft_token_num 420, spec_verify_ct 60
    _check(arm, s=60, p=420, a=196, tok_s=None, population=REQUESTS)
    assert arm.completion_tokens_per_step == pytest.approx(257 / 60, rel=1e-12)
    # histogram [7,6,9,10,11,8,5,4]: 60-7 = 53, 47, 38, 28, 17, 9, 4
    assert arm.per_position == (53, 47, 38, 28, 17, 9, 4)


def test_sglang_0_5_3_only_verify_counts() -> None:
    arm = _read("sglang-generate-0.5.3.jsonl")
    # A = (257 - 1 - 60) + (129 - 1 - 30) = 294; no P in this release
    _check(arm, s=90, p=None, a=294, tok_s=None, population=REQUESTS)
    assert arm.sources["proposed"].startswith("not recorded")


def test_sglang_bench_serving_line_with_infinity() -> None:
    arm = _read("sglang-bench-serving.jsonl")
    # accept_length is the server's 1 + A/S since start; no counts
    assert (arm.steps, arm.proposed, arm.accepted, arm.accept_rate) == (None, None, None, None)
    assert arm.mean_acceptance_length == 4.23
    assert arm.completion_tokens_per_step is None  # not SGLang's per-request unit
    assert arm.output_throughput_tok_s == 16.134
    assert arm.population == SINCE_START
    assert arm.verify_steps_per_s == pytest.approx(16.134 / 4.23, rel=1e-12)


def test_sglang_gate_legs() -> None:
    arm = _read("sglang-legs.jsonl")
    # warm legs are runs 2-4: tok/s median(16.010, 16.034, 16.051), mean of 4.66, 4.67, 4.68
    assert arm.output_throughput_tok_s == 16.034
    assert arm.completion_tokens_per_step == pytest.approx(4.67, rel=1e-12)
    # bare accept lengths: no counts, so S, P, A, A/P and 1 + A/S are not recorded
    assert (arm.steps, arm.proposed, arm.accepted) == (None, None, None)
    assert (arm.accept_rate, arm.mean_acceptance_length) == (None, None)
    assert arm.population == WARM_LEGS


def test_sglang_gauges() -> None:
    arm = _read("sglang-metrics.prom")
    assert (arm.mean_acceptance_length, arm.accept_rate) == (4.23, 0.461)
    assert (arm.steps, arm.proposed, arm.accepted) == (None, None, None)
    assert arm.output_throughput_tok_s is None
    assert arm.population == LAST_INTERVAL


# --------------------------------------------------------------------------------------------
# llama.cpp
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llamacpp-metrics-pair.prom", "llamacpp-metrics-pair.json"])
def test_llamacpp_metrics_pair_fresh_server_and_rounded_counters(name: str) -> None:
    arm = _read(name)
    # before: a fresh server, all 0 and no per-position series; after: S 412345 (exact),
    # P "2.61123e+06" and A "1.24938e+06" (six significant digits: within 5 either way)
    _check(arm, s=412345, p=2611230, a=1249380, tok_s=None, population=INTERVAL)
    assert arm.bounds == {"proposed": 5.0, "accepted": 5.0}
    # A/P moves at most by (1249385/2611225 - 1249380/2611230) = 2.831e-6
    assert arm.accept_rate_bound == pytest.approx(1249385 / 2611225 - 1249380 / 2611230)
    # 1 + A/S moves at most by 5 / 412345 = 1.2126e-5
    assert arm.mean_acceptance_length_bound == pytest.approx(5 / 412345)
    assert any(note.startswith("approximate") and "A ± 5" in note for note in arm.notes)
    # the exact per-position counts sum to 1249383, within the bound of A
    assert arm.per_position == (380000, 290000, 215000, 160000, 112000, 60000, 32383)
    assert any("counted from 0" in note for note in arm.notes)
    assert arm.to_json()["approximate"]["bounds"] == {"proposed": 5.0, "accepted": 5.0}


def test_llamacpp_one_completion_response() -> None:
    arm = _read("llamacpp-completion.json")
    # draft_n 448, draft_n_accepted 301; predicted_per_second = 1000 x 128 / 2000 = 64
    _check(arm, s=None, p=448, a=301, tok_s=64.0, population=REQUESTS)


@pytest.mark.parametrize("name", ["llamacpp-completions.json", "llamacpp-completions.jsonl"])
def test_llamacpp_completion_responses(name: str) -> None:
    arm = _read(name)
    # P 448 + 896 (+ 0: the third drafted nothing and has no draft_n), A 301 + 640;
    # tok/s median(64, 80, 64) = 64
    _check(arm, s=None, p=1344, a=941, tok_s=64.0, population=REQUESTS)
    assert "1 without draft_n" in arm.sources["proposed"]
    assert arm.sources["steps"].startswith("not recorded")


def test_llamacpp_speculative_simple_output() -> None:
    arm = _read("llamacpp-speculative-simple.txt")
    # n_drafted 640, n_accept 301 (accept = 47.031%), speed 80.012 t/s
    _check(arm, s=None, p=640, a=301, tok_s=80.012, population=REQUESTS)
    # one sequence's decode time, prompt excluded: not a leg's tokens over its wall time
    assert arm.tok_s_kind == "one sequence's decode speed (the 'decoded ... speed' line)"
    assert any("compare the two kinds" in note for note in arm.notes)


def test_llamacpp_server_log_lines() -> None:
    arm = _read("llamacpp-server.log")
    # 301/448 and 640/896 per request; S: 1 + 301/S rounds to 3.35 only for S in
    # [301/2.355, 301/2.345] = [127.8, 128.4] -> 128; 1 + 640/S to 3.86 for [223.4, 224.2] -> 224
    _check(arm, s=128 + 224, p=1344, a=941, tok_s=None, population=REQUESTS)
    assert arm.bounds == {}


def test_log_lines_no_engine_prints_are_refused_in_its_terms() -> None:
    """A line with more accepted than drafted, or whose printed length no whole S gives, is
    refused by line number, worded as each engine prints its counts."""
    server = (
        "slot print_timing: id  0 | task 0 | draft acceptance = 0.67188 (  301 accepted /   448 "
        "generated), mean len =  3.35\n"
    )
    too_many = server.replace("  301 accepted /   448", "  449 accepted /   448")
    with pytest.raises(RefusedError) as error:
        read_oracle("l", server + too_many)
    assert str(error.value) == f"<input>:2: accepted 449 exceeds generated 448, {ABOVE}"
    # 1 + 7/S = 3.35 +- 0.005 needs S in [2.972, 2.985]: no whole number
    no_fit = server.replace("  301 accepted /   448", "    7 accepted /    20")
    with pytest.raises(RefusedError, match=r"<input>:1: no whole number of verify steps up to "
                       r"20 gives mean len = 3\.35 with 7 accepted"):  # fmt: skip
        read_oracle("l", no_fit)
    vllm = (
        "INFO [metrics.py:136] SpecDecoding metrics: Mean acceptance length: 3.50, Accepted "
        "throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: 5000 tokens, "
        "Drafted: 9000 tokens, Per-position acceptance rate: 0.9, Avg Draft acceptance rate: "
        "55.6%\n"
    )
    with pytest.raises(RefusedError) as error:
        read_oracle("v", vllm.replace("Accepted: 5000", "Accepted: 9001"))
    assert str(error.value) == f"<input>:1: Accepted 9001 exceeds Drafted 9000, {ABOVE}"
    text = (FIXTURES / "llamacpp-speculative-simple.txt").read_text()
    assert "n_accept  = 301" in text and "n_drafted = 640" in text
    with pytest.raises(RefusedError) as error:
        read_oracle("l", text.replace("n_accept  = 301", "n_accept  = 641"), "llamacpp")
    assert str(error.value) == f"<input>: run 1: n_accept 641 exceeds n_drafted 640, {ABOVE}"


def test_llamacpp_arm_record() -> None:
    arm = _read("llamacpp-arm.json")
    _check(arm, s=200, p=800, a=520, tok_s=15.2, population=SINCE_START)
    # no legs to show the figure is a leg's median: taken as the old gate's predicted_per_second
    assert arm.tok_s_kind is not None and arm.tok_s_kind.startswith("one request's generation")


# --------------------------------------------------------------------------------------------
# Detection: every fixture's engine from its content alone
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("vllm-scrapes.prom", "vllm"),
        ("vllm-scrapes-dp.prom", "vllm"),
        ("vllm-gate-arm.json", "vllm"),
        ("vllm-bench-serve.json", "vllm"),
        ("vllm-bench-serve-append.jsonl", "vllm"),
        ("vllm-bench-serve-sweep.jsonl", "vllm"),
        ("vllm-log.txt", "vllm"),
        ("vllm-arm.json", "vllm"),
        ("vllm-arm-pairs.json", "vllm"),
        ("sglang-generate-0.5.23.json", "sglang"),
        ("sglang-generate-0.5.16.jsonl", "sglang"),
        ("sglang-generate-0.5.9.json", "sglang"),
        ("sglang-generate-0.5.3.jsonl", "sglang"),
        ("sglang-bench-serving.jsonl", "sglang"),
        ("sglang-legs.jsonl", "sglang"),
        ("sglang-metrics.prom", "sglang"),
        ("sglang-requests.jsonl", "sglang"),
        ("llamacpp-metrics-pair.prom", "llamacpp"),
        ("llamacpp-metrics-pair.json", "llamacpp"),
        ("llamacpp-completion.json", "llamacpp"),
        ("llamacpp-completions.json", "llamacpp"),
        ("llamacpp-completions.jsonl", "llamacpp"),
        ("llamacpp-speculative-simple.txt", "llamacpp"),
        ("llamacpp-speculative-simple-lv4.txt", "llamacpp"),
        ("llamacpp-server.log", "llamacpp"),
        ("llamacpp-arm.json", "llamacpp"),
    ],
)
def test_kind_is_told_by_the_content(name: str, kind: str) -> None:
    assert detect_kind((FIXTURES / name).read_text()) == kind


def test_every_fixture_is_in_the_detection_table() -> None:
    listed = {
        p.name for p in FIXTURES.iterdir() if p.is_file()
    }  # a new fixture must get a test above
    tested = set(test_kind_is_told_by_the_content.pytestmark[0].args[1])  # type: ignore[attr-defined]
    assert listed == {name for name, _ in tested}


# --------------------------------------------------------------------------------------------
# Refusals and input errors
# --------------------------------------------------------------------------------------------


def _fixture_json(name: str) -> dict:
    return orjson.loads((FIXTURES / name).read_bytes())


def _text(obj: object) -> str:
    return orjson.dumps(obj).decode()


def test_oracle_legs_must_reproduce_the_recorded_throughput() -> None:
    record = _fixture_json("vllm-gate-arm.json")
    record["metrics"]["output_throughput_tok_s"] = 16.2  # the legs' warm median is 16.111
    with pytest.raises(RefusedError) as info:
        read_oracle("v", _text(record), where="vllm-gate-arm.json")
    message = str(info.value)
    assert "16.2" in message and "16.111" in message and "vllm-gate-arm.json" in message
    # one part in 1e10 is the same figure
    record["metrics"]["output_throughput_tok_s"] = 16.111 * (1 + 1e-10)
    assert read_oracle("v", _text(record)).output_throughput_tok_s == pytest.approx(16.111)


def test_oracle_warm_and_cold_leg_counts_are_checked() -> None:
    record = _fixture_json("vllm-gate-arm.json")
    record["warm_legs"] = 7
    with pytest.raises(RefusedError, match="warm_legs is 7 in the record, but run > 1 selects 6"):
        read_oracle("v", _text(record))
    record = _fixture_json("vllm-gate-arm.json")
    record["cold_legs_discarded"] = 2
    with pytest.raises(RefusedError, match="cold_legs_discarded is 2 in the record, but run > 1 "
                       "leaves 3 legs cold"):  # fmt: skip
        read_oracle("v", _text(record))


def test_bench_serve_ratios_must_agree_with_its_counts() -> None:
    record = _fixture_json("vllm-bench-serve.json")
    record["spec_decode_acceptance_rate"] = 0.4608  # a fraction where vLLM writes percent
    with pytest.raises(RefusedError, match="spec_decode_acceptance_rate / 100"):
        read_oracle("v", _text(record))
    record = _fixture_json("vllm-bench-serve.json")
    record["spec_decode_acceptance_length"] = 4.67  # not 1 + 1000/310
    with pytest.raises(RefusedError, match="spec_decode_acceptance_length"):
        read_oracle("v", _text(record))
    record = _fixture_json("vllm-bench-serve.json")
    record["spec_decode_per_position_acceptance_rates"][0] = 0.8  # 248/310: whole, but
    with pytest.raises(RefusedError, match="sum to"):  # then they no longer sum to A
        read_oracle("v", _text(record))
    record["spec_decode_per_position_acceptance_rates"][0] = 0.87  # 269.7 steps
    with pytest.raises(InputError, match="not a whole number of steps"):
        read_oracle("v", _text(record))


def test_bench_serve_runs_of_different_workloads_are_not_pooled() -> None:
    lines = (FIXTURES / "vllm-bench-serve-append.jsonl").read_text().splitlines()
    second = orjson.loads(lines[1])
    second["max_concurrency"] = 8
    with pytest.raises(InputError, match=":2: this run differs from the first in max_concurrency"):
        read_oracle("v", lines[0] + "\n" + _text(second) + "\n", where="runs.jsonl")


def test_vllm_bench_throughput_is_refused_as_input() -> None:
    result = {"elapsed_time": 10.0, "num_requests": 6, "total_num_tokens": 2736,
              "requests_per_second": 0.6, "tokens_per_second": 273.6}  # fmt: skip
    with pytest.raises(InputError, match="prompt and output tokens"):
        read_oracle("v", _text(result))


def test_sglang_histogram_must_match_the_counts() -> None:
    record = _fixture_json("sglang-generate-0.5.9.json")
    record["meta_info"]["spec_accept_histogram"] = [8, 6, 9, 10, 11, 8, 5, 4]  # 61 steps
    with pytest.raises(RefusedError, match="sums to 61 steps but spec_verify_ct = 60"):
        read_oracle("s", _text(record))
    record["meta_info"]["spec_accept_histogram"] = [6, 7, 9, 10, 11, 8, 5, 4]  # 197 accepted
    with pytest.raises(RefusedError, match="holds 197 accepted drafts"):
        read_oracle("s", _text(record))


def test_sglang_accepted_above_proposed_and_disagreeing_aliases() -> None:
    record = _fixture_json("sglang-generate-0.5.9.json")
    record["meta_info"]["spec_accept_token_num"] = 421
    record["meta_info"].pop("spec_accept_histogram")
    with pytest.raises(RefusedError, match="421 exceeds spec_draft_token_num 420"):
        read_oracle("s", _text(record))
    line = orjson.loads((FIXTURES / "sglang-generate-0.5.16.jsonl").read_text().splitlines()[0])
    line["meta_info"]["spec_accepted_drafts"] = 195
    with pytest.raises(InputError, match="disagree"):
        read_oracle("s", _text(line))


def test_non_finite_numbers_are_read_but_never_taken_as_figures() -> None:
    # the Infinity of the fixture's request_rate is read; a NaN where a figure is needed is not
    bad = (
        (FIXTURES / "sglang-bench-serving.jsonl")
        .read_text()
        .replace('"output_throughput": 16.134', '"output_throughput": NaN')
    )
    with pytest.raises(InputError, match="output_throughput: NaN is not a finite number"):
        read_oracle("s", bad)
    with pytest.raises(InputError, match="count NaN is not an integer"):
        read_oracle("v", "vllm:spec_decode_num_drafts_total NaN\n")


def test_llamacpp_timings_must_be_one_requests() -> None:
    response = _fixture_json("llamacpp-completion.json")
    response["timings"]["predicted_per_second"] = 70.0  # 1000 x 128 / 2000 = 64
    with pytest.raises(RefusedError, match=r"predicted_per_second = 70\.0"):
        read_oracle("l", _text(response))
    response = _fixture_json("llamacpp-completion.json")
    response["timings"]["draft_n_accepted"] = 449
    with pytest.raises(RefusedError) as error:
        read_oracle("l", _text(response))
    assert str(error.value) == (
        f"<input>: timings.draft_n_accepted 449 exceeds timings.draft_n 448, {ABOVE}"
    )
    with pytest.raises(InputError, match="without timings"):
        read_oracle("l", _text([_fixture_json("llamacpp-completion.json"), {"content": "x"}]))


def test_llamacpp_rounded_counters_are_refused_only_beyond_their_bound() -> None:
    scrape = (
        "llamacpp:spec_decode_num_draft_tokens_total 1.24938e+06\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 1.24938e+06\n"
        "llamacpp:spec_decode_num_drafts_total 178483\n"
    )
    arm = read_oracle("l", scrape)  # A = P within the rounding: possible
    assert arm.accept_rate == 1.0 and arm.accept_rate_bound is not None
    worse = scrape.replace("accepted_tokens_total 1.24938e+06", "accepted_tokens_total 1.24940e+06")
    with pytest.raises(RefusedError, match="exceeds"):
        read_oracle("l", worse)  # 1249400 - 5 > 1249380 + 5


def test_a_series_gone_from_the_second_scrape_or_going_down_is_refused() -> None:
    first = 'vllm:spec_decode_num_drafts_total{engine="0"} 10\n'
    first += 'vllm:spec_decode_num_drafts_total{engine="1"} 10\n'
    second = 'vllm:spec_decode_num_drafts_total{engine="0"} 20\n'
    with pytest.raises(RefusedError, match=r'engine="1".* not the second'):
        read_oracle("v", first + second)
    lower = 'vllm:spec_decode_num_drafts_total{engine="0"} 5\n'
    lower += 'vllm:spec_decode_num_drafts_total{engine="1"} 10\n'
    with pytest.raises(RefusedError, match="went down from 10"):
        read_oracle("v", first + lower)


def test_speculative_simple_lines_must_agree() -> None:
    text = (FIXTURES / "llamacpp-speculative-simple.txt").read_text()
    with pytest.raises(RefusedError, match=r"accept = 50\.000%"):
        read_oracle("l", text.replace("47.031%", "50.000%"))
    with pytest.raises(InputError, match="1 n_drafted lines but 0 n_accept"):
        read_oracle("l", text.replace("n_accept  = 301", ""), "llamacpp")


def test_sglang_gauges_of_several_engines_are_refused() -> None:
    text = 'sglang:spec_accept_length{dp="0"} 4.2\nsglang:spec_accept_length{dp="1"} 4.3\n'
    with pytest.raises(InputError, match="cannot be pooled"):
        read_oracle("s", text)


def test_responses_appended_without_newlines_are_read_one_by_one() -> None:
    # `curl ... >> responses.json` writes compact objects back to back, or pretty-printed ones
    responses = orjson.loads((FIXTURES / "llamacpp-completions.json").read_bytes())
    for text in (
        "".join(orjson.dumps(r).decode() for r in responses),
        "".join(orjson.dumps(r, option=orjson.OPT_INDENT_2).decode() for r in responses),
    ):
        arm = read_oracle("l", text)
        _check(arm, s=None, p=1344, a=941, tok_s=64.0, population=REQUESTS)
    with pytest.raises(InputError, match=r"r\.json:2: not JSON"):
        read_oracle("l", '{"timings": {}}\n{"timings": \n', where="r.json")


def test_saved_streams_keep_each_requests_final_response() -> None:
    # llama-server SSE: partial chunks have "stop": false and no timings; the last has both
    final = _fixture_json("llamacpp-completion.json")
    chunks = [{"index": 0, "content": " Paris", "stop": False, "id_slot": 0, "tokens": []}] * 3
    sse = "".join(f"data: {_text(chunk)}\n\n" for chunk in [*chunks, final]) + "data: [DONE]\n"
    _check(read_oracle("l", sse), s=None, p=448, a=301, tok_s=64.0, population=REQUESTS)
    # SGLang streaming: chunks of one request share meta_info.id; only the last is finished
    done = _fixture_json("sglang-generate-0.5.9.json")
    meta = {"id": done["meta_info"]["id"], "finish_reason": None, "completion_tokens": 40}
    partial = {"text": " The", "meta_info": meta}
    stream = "".join(f"data: {_text(r)}\n\n" for r in (partial, partial, done))
    _check(read_oracle("s", stream), s=60, p=420, a=196, tok_s=None, population=REQUESTS)
    with pytest.raises(InputError, match="no finished response"):
        read_oracle("s", f"data: {_text(partial)}\n\ndata: {_text(partial)}\n", "sglang")


def test_sglang_arm_record_with_legs_is_checked_like_ours() -> None:
    legs = [
        orjson.loads(line) for line in (FIXTURES / "sglang-legs.jsonl").read_bytes().splitlines()
    ]
    record = {"engine": "sglang", "legs": legs, "metrics": {"output_throughput_tok_s": 16.034}}
    arm = read_oracle("s", _text(record))
    # warm runs 2-4: median(16.010, 16.034, 16.051) = 16.034; mean of 4.66, 4.67, 4.68
    assert arm.output_throughput_tok_s == 16.034
    assert arm.completion_tokens_per_step == pytest.approx(4.67, rel=1e-12)
    assert arm.population == WARM_LEGS
    record["metrics"]["output_throughput_tok_s"] = 16.022  # the median of all four legs
    with pytest.raises(RefusedError, match=r"16\.022"):
        read_oracle("s", _text(record))


def test_sglang_finished_response_without_spec_keys_verified_nothing() -> None:
    responses = _fixture_json("sglang-generate-0.5.23.json")
    short = {"text": " A", "meta_info": {"id": "c3", "finish_reason": {"type": "stop"},
                                         "prompt_tokens": 20, "completion_tokens": 1}}  # fmt: skip
    arm = read_oracle("s", _text([*responses, short]))
    # the third request adds 0 steps, 0 drafts; its one (prefill) token is not pooled per step
    _check(arm, s=90, p=630, a=294, tok_s=None, population=REQUESTS)
    assert arm.completion_tokens_per_step == pytest.approx(386 / 90, rel=1e-12)
    assert any("count as 0 steps" in note for note in arm.notes)


def test_llamacpp_openai_style_stream_and_prefixed_program_output() -> None:
    final = _fixture_json("llamacpp-completion.json")
    chunk = {"choices": [{"index": 0, "delta": {"content": " Pa"}, "finish_reason": None}]}
    text = f"data: {_text(chunk)}\n\ndata: {_text(final)}\n\ndata: [DONE]\n"
    _check(read_oracle("l", text), s=None, p=448, a=301, tok_s=64.0, population=REQUESTS)
    lines = (FIXTURES / "llamacpp-speculative-simple.txt").read_text().splitlines()
    prefixed = "\n".join(f"0.03.212.117 I {line}" for line in lines)
    _check(read_oracle("l", prefixed), s=None, p=640, a=301, tok_s=80.012, population=REQUESTS)


def test_openmetrics_exemplars_are_ignored() -> None:
    text = (
        'vllm:spec_decode_num_drafts_total{engine="0"} 10.0 # {trace_id="abc"} 1.0 1712345678\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 25.0\n'
        "# EOF\n"
    )
    arm = read_oracle("v", text)
    assert (arm.steps, arm.accepted) == (10, 25)


def test_before_after_scrape_texts_with_a_throughput_beside_them() -> None:
    pair = _fixture_json("llamacpp-metrics-pair.json")
    arm = read_oracle("l", _text({**pair, "output_throughput_tok_s": 60.0}))
    _check(arm, s=412345, p=2611230, a=1249380, tok_s=60.0, population=INTERVAL)
    vllm_text = (FIXTURES / "vllm-scrapes.prom").read_text()
    middle = vllm_text.index("# HELP vllm:num_requests_running", 10)
    record = {"before": vllm_text[:middle], "after": vllm_text[middle:], "tok_s": 16.111}
    arm = read_oracle("v", _text(record))
    assert arm.kind == "vllm"
    _check(arm, s=310, p=2170, a=1000, tok_s=16.111, population=INTERVAL)


def test_llamacpp_gate_arm_with_each_legs_timings() -> None:
    response = _fixture_json("llamacpp-completion.json")
    legs = []
    # run 1 (cold): 50 tok/s, P 400, A 200; runs 2, 3: the fixture's 64 tok/s, P 448, A 301
    for run, n, ms, p, a in ((1, 100, 2000.0, 400, 200), (2, 128, 2000.0, 448, 301),
                             (3, 128, 2000.0, 448, 301)):  # fmt: skip
        timings = {**response["timings"], "predicted_n": n, "predicted_ms": ms}
        timings.update(predicted_per_second=1e3 * n / ms, draft_n=p, draft_n_accepted=a)
        legs.append({"run": run, "tok_s": 1e3 * n / ms, "timings": timings})
    record = {"legs": legs, "metrics": {"output_throughput_tok_s": 64.0}}
    arm = read_oracle("l", _text(record))
    # warm legs only: P 448 x 2, A 301 x 2; tok/s the recorded 64 = median(64, 64)
    _check(arm, s=None, p=896, a=602, tok_s=64.0, population=WARM_LEGS)


def test_oracle_warm_legs_as_a_list_of_indices() -> None:
    record = _fixture_json("vllm-gate-arm.json")
    record["warm_legs"] = [1, 2, 4, 5, 7, 8]  # the legs with run > 1
    assert read_oracle("v", _text(record)).output_throughput_tok_s == 16.111
    record["warm_legs"] = [0, 1, 2, 4, 5, 7]
    with pytest.raises(RefusedError, match=r"but run > 1 selects \[1, 2, 4, 5, 7, 8\]"):
        read_oracle("v", _text(record))


def test_bench_result_with_ratios_but_no_counts() -> None:
    # a backend that exposes no aggregate counters: the result keeps only its ratios
    record = _fixture_json("vllm-bench-serve.json")
    for key in ("spec_decode_num_drafts", "spec_decode_draft_tokens",
                "spec_decode_accepted_tokens"):  # fmt: skip
        record.pop(key)
    arm = read_oracle("v", _text(record))
    assert (arm.steps, arm.proposed, arm.accepted, arm.per_position) == (None,) * 4
    assert arm.accept_rate == pytest.approx(0.4608294930875576, rel=1e-12)  # 46.08...% / 100
    assert arm.mean_acceptance_length == pytest.approx(4.225806451612903, rel=1e-12)
    assert arm.output_throughput_tok_s == 16.111 and arm.population == INTERVAL
    record["spec_decode_num_drafts"] = 310
    with pytest.raises(InputError, match="some of spec_decode_num_drafts"):
        read_oracle("v", _text(record))


def test_a_new_engine_is_one_module_and_one_registry_line(monkeypatch) -> None:
    """The contract a TensorRT-LLM or AIPerf reader would fill: KIND, ALIASES, sniff, read."""
    import types

    from fold.inputs.oracles import arm_from_counts, registry

    engine = types.ModuleType("fold.inputs.oracles.trtllm")
    engine.KIND, engine.ALIASES = "trtllm", ("trtllm", "tensorrt-llm")
    engine.sniff = lambda doc: doc.form == "object" and "totalAcceptedDraftTokens" in doc.record
    engine.read = lambda name, doc: arm_from_counts(
        name,
        "trtllm",
        proposed=doc.record["totalDraftTokens"],
        accepted=doc.record["totalAcceptedDraftTokens"],
        where=doc.where,
    )
    monkeypatch.setitem(registry.ENGINES, engine.KIND, engine)  # the registry line
    for alias in engine.ALIASES:
        monkeypatch.setitem(registry.ALIASES, alias, engine.KIND)
    text = _text({"totalDraftTokens": 40, "totalAcceptedDraftTokens": 30})
    assert detect_kind(text) == "trtllm"
    arm = read_oracle("t", text, "tensorrt-llm")
    assert (arm.kind, arm.proposed, arm.accepted, arm.accept_rate) == ("trtllm", 40, 30, 0.75)


def test_a_byte_order_mark_is_not_part_of_the_content(tmp_path) -> None:
    path = tmp_path / "bench.json"
    path.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "vllm-bench-serve.json").read_bytes())
    _check(load_oracle("v", path), s=310, p=2170, a=1000, tok_s=16.111, population=INTERVAL)


def test_bench_lines_mixed_with_responses_are_refused_as_input() -> None:
    bench = (FIXTURES / "sglang-bench-serving.jsonl").read_text()
    legs = (FIXTURES / "sglang-legs.jsonl").read_text()
    with pytest.raises(InputError, match=r"mixed\.jsonl:5: a bench_serving result"):
        read_oracle("s", legs + bench, where="mixed.jsonl")
    # a bench line whose server had not speculated yet reports 0: not a length
    arm = read_oracle("s", bench.replace('"accept_length": 4.23', '"accept_length": 0.0'))
    assert arm.mean_acceptance_length is None and arm.output_throughput_tok_s == 16.134


def test_sglang_accept_rate_must_be_the_requests_own() -> None:
    record = _fixture_json("sglang-generate-0.5.9.json")
    record["meta_info"]["spec_accept_rate"] = 0.5  # 196/420 = 0.4667
    with pytest.raises(RefusedError, match=r"spec_accept_rate = 0\.5 but"):
        read_oracle("s", _text(record))


def test_finished_responses_sharing_an_id_are_all_counted() -> None:
    # two finished responses with one id (as a client may label them) are two requests
    responses = _fixture_json("sglang-generate-0.5.23.json")
    responses[1]["meta_info"]["id"] = responses[0]["meta_info"]["id"]
    _check(read_oracle("s", _text(responses)), s=90, p=630, a=294, tok_s=None, population=REQUESTS)


def test_llamacpp_response_that_generated_nothing_has_no_speed_to_take() -> None:
    responses = orjson.loads((FIXTURES / "llamacpp-completions.json").read_bytes())
    empty = _fixture_json("llamacpp-completion.json")
    empty["timings"].update(predicted_n=0, predicted_ms=0.0, predicted_per_second=None)
    del empty["timings"]["draft_n"], empty["timings"]["draft_n_accepted"]
    arm = read_oracle("l", _text([*responses, empty]))
    # as before: P 1344, A 941, tok/s median(64, 80, 64); the fourth response is left out
    _check(arm, s=None, p=1344, a=941, tok_s=64.0, population=REQUESTS)
    assert "1 that generated nothing or one token left out" in arm.sources["tok_s"]


def test_llamacpp_response_of_one_token_has_no_generation_step_to_time() -> None:
    """0.3.36 divides predicted_n - 1 generation steps by predicted_ms: one token (from the
    prefill) reports predicted_per_second 0, which is no speed, not a refusal. An older
    server's positive speed for one token is taken; a 0 speed for several tokens is an error."""
    responses = orjson.loads((FIXTURES / "llamacpp-completions.json").read_bytes())
    one = _fixture_json("llamacpp-completion.json")
    one["timings"].update(predicted_n=1, predicted_ms=0.0, predicted_per_second=0.0)
    del one["timings"]["draft_n"], one["timings"]["draft_n_accepted"]
    arm = read_oracle("l", _text([*responses, one]))
    _check(arm, s=None, p=1344, a=941, tok_s=64.0, population=REQUESTS)
    assert "1 that generated nothing or one token left out" in arm.sources["tok_s"]
    older = {**one, "timings": {**one["timings"], "predicted_ms": 12.5,
                                "predicted_per_second": 80.0}}  # fmt: skip
    arm = read_oracle("l", _text([*responses, older]))
    _check(arm, s=None, p=1344, a=941, tok_s=72.0, population=REQUESTS)  # median(64, 80, 64, 80)
    stalled = {**one, "timings": {**one["timings"], "predicted_n": 5, "predicted_ms": 50.0}}
    with pytest.raises(InputError, match=r"predicted_per_second = 0\.0 must be positive"):
        read_oracle("l", _text([*responses, stalled]))


def test_a_json_list_of_two_scrape_texts_is_a_pair() -> None:
    pair = _fixture_json("llamacpp-metrics-pair.json")
    arm = read_oracle("l", _text([pair["before"], pair["after"]]))
    _check(arm, s=412345, p=2611230, a=1249380, tok_s=None, population=INTERVAL)


# -- sweeps: appended runs of different workloads -----------------------------------------------


def test_a_vllm_sweep_gives_each_run_its_own_arm() -> None:
    """``vllm bench serve --append-result`` over three concurrencies: one arm per run, named
    by its place, each with its own counts (the fixture's lines 1-3, by hand)."""
    from fold.inputs.vs_arms import read_vs_arms

    arms = read_vs_arms([f"v={FIXTURES / 'vllm-bench-serve-sweep.jsonl'}"], [])
    assert [arm.name for arm in arms] == ["v#1", "v#2", "v#3"]
    # S, P, A per line; 1 + A/S: 1 + 420/200 = 3.1, 1 + 1710/900 = 2.9, 1 + 5950/3500 = 2.7
    expected = [(200, 800, 420, 21.7), (900, 3600, 1710, 71.3), (3500, 14000, 5950, 180.4)]
    for arm, (s, p, a, tok_s) in zip(arms, expected, strict=True):
        _check(arm, s=s, p=p, a=a, tok_s=tok_s, population=INTERVAL)
    assert arms[0].mean_acceptance_length == pytest.approx(3.1)
    # 0.85 x 200 = 170, 0.6 x 200 = 120, 0.4 x 200 = 80, 0.25 x 200 = 50
    assert arms[0].per_position == (170, 120, 80, 50)
    # the settings that tell the runs apart, and where each run is
    assert arms[1].population_detail.startswith("run 2 of 3 (max_concurrency=4, num_prompts=32),")
    assert "vllm-bench-serve-sweep.jsonl:2" in arms[1].population_detail
    assert arms[2].sources["tok_s"] == (
        "output_throughput of run 3 of 3 (max_concurrency=16, num_prompts=128)"
    )


def test_path_hash_n_picks_one_run() -> None:
    from fold.inputs.vs_arms import read_vs_arms

    (arm,) = read_vs_arms([f"v={FIXTURES / 'vllm-bench-serve-sweep.jsonl'}#2"], [])
    assert arm.name == "v"
    _check(arm, s=900, p=3600, a=1710, tok_s=71.3, population=INTERVAL)
    assert arm.population_detail.startswith("run 2 of 3 (max_concurrency=4, num_prompts=32)")
    # runs of one workload are pooled unless one is picked: line 2 alone, S 210, P 1470, A 700
    (pooled,) = read_vs_arms([f"v={FIXTURES / 'vllm-bench-serve-append.jsonl'}"], [])
    _check(pooled, s=310, p=2170, a=1000, tok_s=16.1, population=INTERVAL)
    (second,) = read_vs_arms([f"v={FIXTURES / 'vllm-bench-serve-append.jsonl'}#2"], [])
    _check(second, s=210, p=1470, a=700, tok_s=16.3, population=INTERVAL)
    assert second.population_detail.startswith("run 2 of 2, ")


def test_a_run_that_is_not_there_or_a_file_without_runs_is_an_error(tmp_path: Path) -> None:
    from fold.inputs.vs_arms import read_vs_arms

    with pytest.raises(InputError, match=r"sweep\.jsonl#4: the file holds 3 run\(s\); pick 1 to 3"):
        read_vs_arms([f"v={FIXTURES / 'vllm-bench-serve-sweep.jsonl'}#4"], [])
    with pytest.raises(InputError, match="#N picks one run of a file of appended benchmark"):
        read_vs_arms([f"v={FIXTURES / 'vllm-gate-arm.json'}#1"], [])
    # A file whose name ends in #N is that file.
    named = tmp_path / "bench.json#2"
    named.write_bytes((FIXTURES / "vllm-bench-serve.json").read_bytes())
    (arm,) = read_vs_arms([f"v={named}"], [])
    _check(arm, s=310, p=2170, a=1000, tok_s=16.111, population=INTERVAL)


def test_a_sweep_name_must_be_free() -> None:
    from fold.inputs.vs_arms import read_vs_arms

    sweep = FIXTURES / "vllm-bench-serve-sweep.jsonl"
    with pytest.raises(InputError, match="the name 'v#2' is taken"):
        read_vs_arms([f"v#2={FIXTURES / 'vllm-bench-serve.json'}", f"v={sweep}"], [])


def test_an_sglang_bench_sweep_gives_each_run_its_own_arm(tmp_path: Path) -> None:
    """bench_serving appends a line per run; runs at two concurrencies are two arms, each with
    its own tok/s and the accept length its line recorded (cumulative since server start)."""
    from fold.inputs.vs_arms import read_vs_arms

    line = (FIXTURES / "sglang-bench-serving.jsonl").read_text().splitlines()[0]
    second = line.replace('"max_concurrency": 1', '"max_concurrency": 8')
    second = second.replace('"output_throughput": 16.134', '"output_throughput": 90.5')
    second = second.replace('"accept_length": 4.23', '"accept_length": 4.1')
    assert second.count("90.5") == 1 and '"accept_length": 4.1' in second
    path = tmp_path / "bench.jsonl"
    path.write_text(line + "\n" + second + "\n")
    first, last = read_vs_arms([f"s={path}"], [])
    assert (first.name, last.name) == ("s#1", "s#2")
    assert (first.output_throughput_tok_s, last.output_throughput_tok_s) == (16.134, 90.5)
    assert (first.mean_acceptance_length, last.mean_acceptance_length) == (4.23, 4.1)
    assert first.population == last.population == SINCE_START
    assert "run 2 of 2 (max_concurrency=8)" in last.population_detail


def test_a_sweep_shows_a_row_per_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fold.cli import main

    example = FIXTURES.parent / "gate-example"
    sweep = FIXTURES / "vllm-bench-serve-sweep.jsonl"
    markdown = tmp_path / "record.md"
    arguments = [str(example / "our-arm.json"), str(example / "steps.jsonl"), "--bootstrap", "0",
                 "--vs", f"vllm={sweep}", "--markdown", str(markdown), "--json", "-"]  # fmt: skip
    assert main(arguments) == 0
    document = orjson.loads(capsys.readouterr().out)
    rows = {row["name"]: row for row in document["comparison"]["rows"]}
    assert {"vllm#1", "vllm#2", "vllm#3"} <= set(rows)
    assert rows["vllm#3"]["accepted"] == 5950
    assert "| vllm#2 | 2.90 | 47.5% |" in markdown.read_text()
    assert "run 2 of 3 (max_concurrency=4, num_prompts=32)" in markdown.read_text()
