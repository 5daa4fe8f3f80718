"""``--matched ENGINE``: the setting that makes an oracle accept as our warm legs did.

Expected rates are computed here from the steps themselves (a second, plain definition: the
share of warm drafted steps that accepted at least i + 1 drafts), never from the fold's own
per-position figures; vLLM's own checks are restated from its source (0.32.0,
``_resolve_synthetic_acceptance_rates``) and held against the real class in
``tests/test_matched_vllm.py``.
"""

from __future__ import annotations

import ast
import itertools
import json
import shlex
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import scaled

from fold.api import fold_acceptance
from fold.cli import main
from fold.compare.matched import check_rates, matched_settings, parse_base_config
from fold.errors import InputError, RefusedError
from fold.inputs.steplog import format_line
from fold.present.markdown import markdown_record
from fold.present.matched import matched_html, matched_terminal
from fold.present.page import page
from fold.present.terminal import terminal

ROOT = Path(__file__).resolve().parents[1]
BASE_S = 1_800_000_000
NS = 1_000_000_000
LEG_SECONDS = 10

# Cold leg (run 1), then two warm legs (run 2): (proposed, accepted) per line. A line with
# proposed 0 carries no draft and is no verify step S counts.
HAND = [
    (1, [(4, 4), (4, 4)]),
    (2, [(4, 4), (4, 2), (3, 3), (0, 0)]),
    (2, [(2, 0), (4, 1)]),
]
# Warm steps: (4,4) (4,2) (3,3) (2,0) (4,1): S = 5, k = 4, A = 10, P = 17.
# Accepted at least 1: 4 of 5; at least 2: 3; at least 3: 2; at least 4: 1.
HAND_RATES = [4 / 5, 3 / 5, 2 / 5, 1 / 5]


def write_gate(directory: Path, legs: list[tuple[int, list[tuple[int, int]]]]) -> tuple[str, str]:
    """An arm record and its step log: leg i runs ``LEG_SECONDS`` from ``BASE_S + 10 i``, one
    request a leg, its lines 0.1 s apart inside the leg's window."""
    records, lines, n = [], [], 0
    for index, (run, steps) in enumerate(legs):
        start = BASE_S + LEG_SECONDS * index
        emitted = sum(accepted + 1 for proposed, accepted in steps if proposed)
        records.append({"run": run, "finish_reason": "length", "prompt_tokens": 5,
                        "completion_tokens": emitted + 1, "secs": 5.0, "tok_s": 20.0 + index,
                        "generate_start_unix": start, "generate_end_unix": start + 5})  # fmt: skip
        for position, (proposed, accepted) in enumerate(steps):
            t_ns = start * NS + (position + 1) * NS // 10
            lines.append(format_line(writer_id="00000000000000aa", n=n, t_ns=t_ns, pid=7,
                                     seq=index, proposed=proposed, accepted=accepted))  # fmt: skip
            n += 1
    arm, log = directory / "arm.json", directory / "steps.jsonl"
    arm.write_text(json.dumps({"legs": records}))
    log.write_bytes(b"".join(lines))
    return str(arm), str(log)


def expected_rates(legs: list[tuple[int, list[tuple[int, int]]]]) -> list[float]:
    """From the definition: over warm (run > 1) drafted steps, the share accepting > i."""
    steps = [step for run, leg in legs if run > 1 for step in leg if step[0] > 0]
    k = max(proposed for proposed, _ in steps)
    return [sum(accepted > i for _, accepted in steps) / len(steps) for i in range(k)]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- the rates --------------------------------------------------------------------------------


def test_hand_built_log_gives_the_rates_counted_by_hand(tmp_path):
    arm, log = write_gate(tmp_path, HAND)
    assert expected_rates(HAND) == HAND_RATES
    setting = matched_settings(fold_acceptance(arm, [log]), ["vllm"]).settings[0]
    assert [rate.rate for rate in setting.rates] == HAND_RATES
    assert setting.k == 4 and setting.counts.steps == 5
    assert setting.speculative_config == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "rejection_sample_method": "synthetic",
        "synthetic_acceptance_rates": HAND_RATES,
    }
    # 1 + sum of the rates is 1 + A/S = 1 + 10/5: the tokens per step the run must reproduce
    assert setting.counts.mean_acceptance_length == 3.0 == pytest.approx(1 + sum(HAND_RATES))
    # short drafts (P = 17 < k S = 20): said, with the A/P a full-k run would read
    note = setting.cannot_carry[0]
    assert "3.4 tokens on average of k = 4" in note
    assert "A/P then reads 50.0%, ours 58.8%" in note


def test_each_rate_interval_redraws_the_warm_legs(tmp_path):
    """A second implementation of the interval: legs redrawn with replacement from the seed's
    first stream (the bootstrap's stage 1; one request a leg leaves nothing for stage 2), the
    position's ratio of sums in each resample, its 2.5% and 97.5% quantiles."""
    legs = [(2, [(3, 3), (3, 1)]), (2, [(3, 0)]), (2, [(3, 2), (3, 3), (2, 2)]), (3, [(3, 1)])]
    arm, log = write_gate(tmp_path, legs)
    resamples, seed = 400, 11
    fold = fold_acceptance(arm, [log], resamples=resamples, seed=seed)
    setting = matched_settings(fold, ["vllm"], resamples=resamples, seed=seed).settings[0]
    stream = np.random.SeedSequence(seed).spawn(1 + len(legs))[0]
    picks = np.random.default_rng(stream).integers(0, len(legs), size=(resamples, len(legs)))
    steps = np.array([sum(p > 0 for p, _ in leg) for _, leg in legs], dtype=float)
    for i, rate in enumerate(setting.rates):
        hits = np.array([sum(a > i for p, a in leg if p) for _, leg in legs], dtype=float)
        drawn = hits[picks].sum(axis=1) / steps[picks].sum(axis=1)
        low, high = np.quantile(drawn, [0.025, 0.975])
        assert rate.interval == pytest.approx((low, high), abs=1e-12)
        assert rate.rate == expected_rates(legs)[i]


def test_no_bootstrap_no_intervals(tmp_path):
    arm, log = write_gate(tmp_path, HAND)
    setting = matched_settings(fold_acceptance(arm, [log]), ["vllm"], resamples=0).settings[0]
    assert [rate.interval for rate in setting.rates] == [None] * 4


step = st.integers(0, 6).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p)))
gates = st.lists(
    st.tuples(st.integers(1, 3), st.lists(step, min_size=1, max_size=8)), min_size=1, max_size=5
).filter(
    # the fold itself refuses a gate without a warm leg, or with a warm leg without a draft
    lambda legs: (
        any(run > 1 for run, _ in legs)
        and all(any(p for p, _ in leg) for run, leg in legs if run > 1)
    )
)


@scaled(0.3)
@given(legs=gates)
def test_rates_are_the_warm_per_position_rates_and_what_vllm_takes(tmp_path_factory, legs):
    arm, log = write_gate(tmp_path_factory.mktemp("gate"), legs)
    fold = fold_acceptance(arm, [log], resamples=20)
    warm_steps = [s for run, leg in legs if run > 1 for s in leg if s[0] > 0]
    setting = matched_settings(fold, ["vllm"], resamples=20).settings[0]
    rates = [rate.rate for rate in setting.rates]
    assert rates == expected_rates(legs) == list(fold.warm["per_position"])
    assert all(0 <= rate <= 1 for rate in rates)
    assert all(later <= earlier for earlier, later in itertools.pairwise(rates))
    assert setting.k == max(p for p, _ in warm_steps) == len(rates)
    assert 1 + sum(rates) == pytest.approx(fold.warm["mean_acceptance_length"])
    assert setting.speculative_config["synthetic_acceptance_rates"] == rates
    check_rates(rates, setting.k)  # vLLM's own checks pass (restated; real ones: oracle)
    # llama-server takes the same rates, comma-separated, parsed back to the same floats
    llamacpp = matched_settings(fold, ["llamacpp"], resamples=0).settings[0]
    values = llamacpp.environment["LLAMA_ARG_SPEC_SYNTH_RATES"].split(",")
    assert [float(value) for value in values] == rates
    assert llamacpp.commands[0][1].endswith(f"--spec-synth-rates {','.join(values)}")
    # SGLang's value is 1 + A/S in its per-step unit, bonus token counted
    sglang = matched_settings(fold, ["sglang"]).settings[0]
    length = 1 + sum(a for _, a in warm_steps) / len(warm_steps)
    assert float(sglang.environment["SGLANG_SIMULATE_ACC_LEN"]) == pytest.approx(length)


# --- what vLLM would refuse ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rates", "k", "reason"),
    [
        ([0.5, 0.6], 2, "non-increasing"),
        ([0.5, 0.4], 3, "one per draft position"),
        ([1.2, 0.4], 2, r"in \[0, 1\]"),
        ([0.5, -0.1], 2, r"in \[0, 1\]"),
        ([True, 0.5], 2, r"is True: .* in \[0, 1\]"),  # JSON's true is no rate, not 1
        ([0.5, float("nan")], 2, r"in \[0, 1\]"),
        ([], 0, "above zero"),
    ],
)
def test_check_refuses_what_vllm_and_llamacpp_refuse(rates, k, reason):
    with pytest.raises(RefusedError, match=reason) as refused:
        check_rates(rates, k)
    assert "vLLM takes" in str(refused.value) or "vLLM wants" in str(refused.value)
    with pytest.raises(RefusedError, match=reason) as refused:
        check_rates(rates, k, "llamacpp")
    assert "--matched llamacpp" in str(refused.value) and "llama.cpp" in str(refused.value)


def test_refuses_a_k_the_fold_does_not_have(tmp_path):
    arm, log = write_gate(tmp_path, HAND)
    fold = fold_acceptance(arm, [log])
    for k in (3, 5):
        base = {"method": "ngram", "num_speculative_tokens": k}
        with pytest.raises(RefusedError, match=f"num_speculative_tokens {k} is a k our warm"):
            matched_settings(fold, ["vllm"], base)
    same = matched_settings(fold, ["vllm"], {"method": "ngram", "num_speculative_tokens": 4})
    assert same.settings[0].k == 4


def test_refuses_warm_legs_without_a_draft(tmp_path, capsys):
    # The fold refuses first (a drafter that never proposed is no 0% acceptance) ...
    arm, log = write_gate(tmp_path, [(1, [(4, 2)]), (2, [(0, 0), (0, 0)])])
    code, out, err = run_cli(capsys, arm, log, "--matched", "vllm")
    assert code == 1 and out == "" and "no verify step with a draft" in err
    # ... and a warm fold with S = 0 handed to the library is refused as vLLM refuses k = 0.
    empty = SimpleNamespace(
        predicate="run > 1",
        legs=(),
        warm={"legs": [1], "steps": 0, "proposed": 0, "accepted": 0, "per_position": []},
    )
    with pytest.raises(RefusedError, match=r"S = 0.*num_speculative_tokens 0"):
        matched_settings(empty, ["vllm"])
    with pytest.raises(RefusedError, match="no warm legs"):
        matched_settings(
            SimpleNamespace(predicate="run > 9", legs=(), warm={"legs": []}), ["sglang"]
        )


def test_refuses_counters_without_per_position_but_sglang_needs_none(capsys):
    arm = str(ROOT / "fixtures" / "vllmcpp" / "our-arm.json")
    code, _, err = run_cli(capsys, arm, "--matched", "vllm")
    assert code == 1 and "no per-position acceptance" in err and "step log" in err
    code, out, _ = run_cli(capsys, arm, "--matched", "sglang", "--json", "-")
    assert code == 0
    document = json.loads(out)
    warm = document["warm"]
    value = document["matched"]["sglang"]["environment"]["SGLANG_SIMULATE_ACC_LEN"]
    assert float(value) == 1 + warm["accepted"] / warm["steps"]


@pytest.mark.parametrize(
    ("config", "code", "says"),
    [
        ("not json", 2, "not JSON"),
        ('{"method": "ngram", "x": NaN}', 2, "NaN is not a JSON number"),
        ("[1, 2]", 2, "--matched-config: [1, 2] is not an object"),
        ('{"num_speculative_tokens": 4}', 2, "no method"),
        ('{"method": "ngram", "synthetic_acceptance_rates": [1, 1, 1, 1]}', 2, "leave them out"),
        ('{"method": "ngram", "rejection_sample_method": "standard"}', 2, "synthetic"),
        ('{"method": "ngram", "synthetic_acceptance_length": 2.0}', 1, "exactly one"),
        ('{"method": "ngram", "num_speculative_tokens": 7}', 1, "a k our warm steps"),
        # of the wrong kind: malformed, in limits' words, not "a k our warm steps do not have"
        (
            '{"method": "ngram", "num_speculative_tokens": "7"}',
            2,
            'num_speculative_tokens "7" is not an integer',
        ),
        (
            '{"method": "ngram", "num_speculative_tokens": true}',
            2,
            "num_speculative_tokens true is not an integer",
        ),
        ('{"method": 5}', 2, "method 5 is not a string"),
    ],
)
def test_matched_config_refusals(tmp_path, capsys, config, code, says):
    arm, log = write_gate(tmp_path, HAND)
    found, out, err = run_cli(capsys, arm, log, "--matched", "vllm", "--matched-config", config)
    assert (found, out) == (code, "")
    assert says in err and "Traceback" not in err


def test_matched_config_needs_matched_vllm_and_engines_are_named(tmp_path, capsys):
    arm, log = write_gate(tmp_path, HAND)
    code, _, err = run_cli(capsys, arm, log, "--matched-config", '{"method": "ngram"}')
    assert code == 2 and "--matched vllm" in err
    with pytest.raises(SystemExit) as stopped:
        main([arm, log, "--matched", "trtllm"])
    assert stopped.value.code == 2
    with pytest.raises(InputError, match="engines with a setting"):
        matched_settings(fold_acceptance(arm, [log]), ["trtllm"])
    assert parse_base_config(None) is None


@pytest.mark.parametrize("key", ["synthetic_acceptance_length", "synthetic_acceptance_rates"])
def test_a_null_synthetic_field_in_the_base_config_is_unset_as_vllm_takes_it(tmp_path, capsys, key):
    """vLLM's two synthetic fields are ``| None``: null is the field not given."""
    arm, log = write_gate(tmp_path, HAND)
    base = json.dumps({"method": "ngram", key: None})
    code, out, err = run_cli(
        capsys, arm, log, "--matched", "vllm", "--matched-config", base, "--json", "-"
    )
    assert code == 0, err
    config = json.loads(out)["matched"]["vllm"]["speculative_config"]
    assert config["synthetic_acceptance_rates"] == HAND_RATES


# --- outputs ------------------------------------------------------------------------------------


def test_json_block_and_command_lines_carry_the_config_exactly(tmp_path, capsys):
    arm, log = write_gate(tmp_path, HAND)
    base = '{"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-8B"}'
    code, out, _ = run_cli(
        capsys, arm, log, "--matched", "vllm", "--matched-config", base, "--json", "-"
    )
    assert code == 0
    setting = json.loads(out)["matched"]["vllm"]
    config = setting["speculative_config"]
    assert config == {**json.loads(base), "num_speculative_tokens": 4,
                      "rejection_sample_method": "synthetic",
                      "synthetic_acceptance_rates": HAND_RATES}  # fmt: skip
    assert [rate["rate"] for rate in setting["rates"]] == HAND_RATES
    assert [rate["position"] for rate in setting["rates"]] == [1, 2, 3, 4]
    lines = {command["where"]: command["line"] for command in setting["commands"]}
    words = shlex.split(lines["serve"])
    assert words[:3] == ["vllm", "serve", "$MODEL"] and words[3] == "--speculative-config"
    assert json.loads(words[4]) == config
    offline = lines["offline"]
    assert offline.startswith("LLM(model=MODEL, speculative_config=") and offline.endswith(")")
    assert ast.literal_eval(offline[len("LLM(model=MODEL, speculative_config=") : -1]) == config


def test_terminal_prints_the_answer_then_the_setting_lines_whole(tmp_path, capsys):
    arm, log = write_gate(tmp_path, HAND)
    code, out, _ = run_cli(capsys, arm, log, "--matched", "vllm")
    assert code == 0
    answer = out.index("Fold (warm")
    setting = out.index("Matched vLLM")
    assert answer < setting
    serve = next(line for line in out.splitlines() if "vllm serve" in line)
    assert json.loads(shlex.split(serve)[4])["synthetic_acceptance_rates"] == HAND_RATES
    assert "what the setting cannot carry" in out and "80.0%" in out


def test_presenters_draw_from_the_json_alone(tmp_path):
    arm, log = write_gate(tmp_path, HAND)
    fold = fold_acceptance(arm, [log])
    document = fold.with_matched(matched_settings(fold, ["vllm", "sglang"])).to_json()
    again = json.loads(json.dumps(document))
    assert terminal(document, width=60) == terminal(again, width=60)
    record = markdown_record(again)
    assert "## Matched oracle settings" in record
    assert '"synthetic_acceptance_rates": [0.8, 0.6, 0.4, 0.2]' in record
    assert "SGLANG_SIMULATE_ACC_LEN=3.0" in record
    section = matched_html(again)
    assert section.startswith('<section id="matched">') and "80.0%" in section
    assert "&quot;synthetic_acceptance_rates&quot;: [0.8, 0.6, 0.4, 0.2]" in section
    assert section in page(again).decode()  # below the charts
    assert matched_html(fold.to_json()) == ""
    assert "matched" not in fold.to_json()  # the setting is asked for, never there by default


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@scaled(0.5)
@given(
    text=st.text(max_size=40)
    | st.dictionaries(st.text(max_size=8), json_values, max_size=4).map(json.dumps)
    | st.dictionaries(st.text(max_size=8), json_values, max_size=4).map(
        lambda extra: json.dumps({"method": "ngram", **extra})
    )
)
def test_any_matched_config_is_refused_plainly_or_carried_whole_into_both_lines(
    tmp_path_factory, text
):
    """Whatever --matched-config holds: a refusal of ours, or a setting whose serve line and
    LLM(...) line parse back (shell quoting, Python literal) to the very config recorded."""
    fold = hand_fold(tmp_path_factory)
    try:
        setting = matched_settings(fold, ["vllm"], parse_base_config(text), resamples=0)
    except (InputError, RefusedError):
        return
    config = setting.settings[0].speculative_config
    assert config == {
        **json.loads(text),
        "num_speculative_tokens": 4,
        "rejection_sample_method": "synthetic",
        "synthetic_acceptance_rates": HAND_RATES,
    }
    lines = dict(setting.settings[0].commands)
    assert json.loads(shlex.split(lines["serve"])[4]) == config
    prefix = "LLM(model=MODEL, speculative_config="
    assert ast.literal_eval(lines["offline"][len(prefix) : -1]) == config


_HAND_FOLD = {}


def hand_fold(tmp_path_factory):
    if "fold" not in _HAND_FOLD:
        arm, log = write_gate(tmp_path_factory.mktemp("hand"), HAND)
        _HAND_FOLD["fold"] = fold_acceptance(arm, [log], resamples=0)
    return _HAND_FOLD["fold"]


def test_only_the_gpu_engines_are_said_to_need_a_gpu_box(tmp_path_factory):
    fold = hand_fold(tmp_path_factory)
    document = fold.with_matched(matched_settings(fold, ["vllm", "sglang", "llamacpp"])).to_json()
    blocks = matched_terminal(document).split("\nMatched ")
    runs = {block.split(":")[0].split()[-1]: block for block in blocks}
    assert set(runs) == {"vLLM", "SGLang", "llama.cpp"}
    for engine in ("vLLM", "SGLang"):
        assert "to run it (on a GPU box" in runs[engine]
    assert "GPU" not in runs["llama.cpp"]
    assert "to run it (llama-server runs it on a CPU" in runs["llama.cpp"]


def test_the_default_ngram_drafter_is_noted_as_likely_to_under_accept(tmp_path_factory):
    fold = hand_fold(tmp_path_factory)
    note = "the n-gram drafter"
    for base, noted in (
        (None, True),
        ({"method": "ngram"}, True),
        ({"method": "eagle", "model": "DRAFT"}, False),
    ):
        setting = matched_settings(fold, ["vllm"], base, resamples=0).settings[0].to_json()
        assert any(note in line for line in setting["notes"]) is noted
        assert any("the default" in line for line in setting["notes"]) is (base is None)
        text = matched_terminal(fold.with_matched(matched_settings(fold, ["vllm"], base)).to_json())
        assert (f"note: {note}" in text or "note: no method" in text) is noted
    sglang = matched_settings(fold, ["sglang"]).settings[0].to_json()
    assert sglang["notes"] == []


def test_the_command_without_matched_config_notes_the_default(tmp_path, capsys):
    arm, log = write_gate(tmp_path, HAND)
    assert main([arm, log, "--matched", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "note: no method given (--matched-config), so the default ngram" in out


@pytest.mark.parametrize("width", [80, 100])
def test_the_words_wrap_to_the_screen_and_what_is_copied_stays_whole(tmp_path_factory, width):
    """Every line fits ``width`` but the config and the command lines, which are copied and
    so are printed whole, each on one line."""
    fold = hand_fold(tmp_path_factory)
    document = fold.with_matched(matched_settings(fold, ["vllm", "sglang", "llamacpp"])).to_json()
    text = matched_terminal(document, width=width)
    copied = set()
    for setting in document["matched"].values():
        copied |= {f"  {command['line']}" for command in setting["commands"]}
        if setting["speculative_config"] is not None:
            config = json.dumps(setting["speculative_config"], separators=(", ", ": "))
            copied.add(f"speculative_config: {config}")
        for name, value in (setting["environment"] or {}).items():
            copied.add(f"  {name}={value}")
    lines = text.splitlines()
    assert copied <= set(lines)  # whole, each on a line of its own
    assert [line for line in lines if len(line) > width and line not in copied] == []
    # The words are all there, only wrapped: every cannot-carry note, joined back.
    joined = " ".join(line.strip() for line in lines)
    for setting in document["matched"].values():
        for note in setting["cannot_carry"]:
            assert f"- {note}" in joined
