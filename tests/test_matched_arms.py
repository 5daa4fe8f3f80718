"""Matched oracle arms: vLLM run at our acceptance, known from its record's speculative config
or ``--vs NAME:matched``, and the speed factor measured beside the modelled one.

The matched records (``fixtures/oracles/vllm-matched/``, their figures worked in its README) are
in the capture format of ``examples/vllm/offline.py``; the ordinary run is the real recorded
vLLM (``fixtures/oracles/vllm-real/offline``) and ours the real llama-server arm beside it.
Expected factors are worked from the rows' own figures (tok/s, 1 + A/S) by the definitions in
``docs/matched-arms.md``, never from the module under test.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import subprocess
from pathlib import Path

import numpy as np
import orjson
import pytest
from document_schema import validate
from hypothesis import given
from hypothesis import strategies as st
from strategies import scaled

from fold.cli import main
from fold.compare.arm_draws import Side
from fold.compare.gap import attribute_gap
from fold.compare.matched_arms import (
    MODEL_FAILS,
    MODEL_HOLDS,
    NO_MODEL,
    NOT_MATCHED,
    check_matched_arms,
)
from fold.errors import InputError, RefusedError
from fold.folding.uncertainty import Replicates
from fold.inputs.oracles import (
    MatchedAs,
    arm_from_counts,
    load_oracle,
    parse_vs,
    parse_vs_spec,
)
from fold.inputs.oracles.vllm_speculative import SpeculativeSetting, length_to_rates
from fold.inputs.vs_arms import split_spec

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "fixtures" / "oracles" / "vllm-real"
MATCHED = ROOT / "fixtures" / "oracles" / "vllm-matched"
OURS = [str(REAL / "ours" / "our-arm.json"), str(REAL / "ours" / "steps.jsonl")]
BASE = ["--vs", f"vllm={REAL / 'offline' / 'vllm-arm.json'}"]
RATES = [0.7, 0.366667, 0.266667, 0.266667]


def _warm_median(path: Path) -> float:
    legs = json.loads(path.read_text())["legs"]
    return statistics.median(leg["tok_s"] for leg in legs if leg["run"] > 1)


def _run(capsys, *args: str) -> dict:
    assert main([*OURS, *args, "--json", "-"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    validate(document)
    return document


def _rows(document: dict) -> dict:
    return {row["name"]: row for row in document["comparison"]["rows"]}


# --- the record's speculative config ----------------------------------------------------------


def test_the_record_carries_its_synthetic_rates_as_the_capture_writes_them():
    arm = load_oracle("m", MATCHED / "holds.json")
    setting = arm.speculative
    assert setting is not None and setting.synthetic
    assert setting.num_speculative_tokens == 4 and setting.method == "ngram"
    assert setting.rates == tuple(RATES) and setting.length is None
    # 1 + the sum of the unconditional rates: 1 + 0.7 + 0.366667 + 2 x 0.266667
    assert setting.expected_mean_acceptance_length == pytest.approx(2.600001)
    # counters: S = 100, A = 160
    assert arm.mean_acceptance_length == pytest.approx(2.6)
    assert arm.output_throughput_tok_s == pytest.approx((312.0 + 314.4) / 2)


def test_a_target_length_resolves_as_vllm_resolves_it():
    setting = load_oracle("m", MATCHED / "not-matched.json").speculative
    assert setting is not None
    assert setting.length == 4.5 and setting.rates is None
    # vLLM's minimum-variance schedule: 3.5 accepted = three positions at 1, one at 0.5
    assert setting.resolved_rates == (1.0, 1.0, 1.0, 0.5)
    assert length_to_rates(1.0, 3) == (0.0, 0.0, 0.0)
    assert length_to_rates(4.0, 3) == (1.0, 1.0, 1.0)
    assert length_to_rates(2.25, 4) == (1.0, 0.25, 0.0, 0.0)


def test_a_record_without_a_config_or_with_the_standard_one_is_not_matched():
    assert load_oracle("m", MATCHED / "no-config.json").speculative is None
    assert load_oracle("v", REAL / "offline" / "vllm-arm.json").speculative is None
    standard = load_oracle("s", MATCHED / "standard.json").speculative
    assert standard is not None and not standard.synthetic
    assert standard.rejection_sample_method == "standard"


def _with_config(tmp_path: Path, **changes) -> Path:
    record = json.loads((MATCHED / "holds.json").read_text())
    config = record["speculative_config"]
    for key, value in changes.items():
        if value is _DROP:
            config.pop(key, None)
        else:
            config[key] = value
    path = tmp_path / "matched.json"
    path.write_text(json.dumps(record))
    return path


_DROP = object()

REFUSED_CONFIGS = [
    ({"synthetic_acceptance_rates": [0.7, 0.3, 0.2]}, "has 3 entries", RefusedError),
    ({"synthetic_acceptance_rates": [0.7, 0.8, 0.2, 0.1]}, "[1] = 0.8 exceeds", RefusedError),
    ({"synthetic_acceptance_rates": [1.2, 0.8, 0.2, 0.1]}, "[0] = 1.2 is outside", RefusedError),
    ({"synthetic_acceptance_rates": [0.7, -0.1, -0.2, -0.3]}, "[1] = -0.1", RefusedError),
    ({"synthetic_acceptance_rates": "0.7"}, '"0.7" is not a list', InputError),
    ({"synthetic_acceptance_rates": [0.7, True, 0.2, 0.1]}, "[1] true is not a finite number",
     InputError),
    ({"synthetic_acceptance_length": 2.0}, "exactly one of", RefusedError),
    ({"synthetic_acceptance_rates": _DROP}, "exactly one of", RefusedError),
    ({"synthetic_acceptance_rates": _DROP, "synthetic_acceptance_length": 5.5}, "[1, 5]",
     RefusedError),
    ({"synthetic_acceptance_rates": _DROP, "synthetic_acceptance_length": 0.5}, "[1, 5]",
     RefusedError),
    ({"synthetic_acceptance_rates": _DROP, "synthetic_acceptance_length": "2"},
     '"2" is not a finite number', InputError),
    ({"rejection_sample_method": "standard"}, "only with 'synthetic'", RefusedError),
    ({"rejection_sample_method": _DROP}, "only with 'synthetic'", RefusedError),
    ({"rejection_sample_method": "fast"}, "one of standard, synthetic, block", RefusedError),
    ({"num_speculative_tokens": 0}, "integer above 0", RefusedError),
    ({"num_speculative_tokens": 4.5}, "4.5 is not an integer", InputError),
    ({"num_speculative_tokens": -1}, "-1 is negative", InputError),
    ({"num_speculative_tokens": -4.0}, "-4 is negative", InputError),
    ({"num_speculative_tokens": True}, "true is not an integer", InputError),
    ({"num_speculative_tokens": None}, "is missing or null, not an integer", InputError),
    ({"num_speculative_tokens": [4]}, "[4] is not an integer", InputError),
    # past the step-log format's cap (2^16 tokens a step), before any rate is sized by it: refused,
    # as a step past the cap is from every source (docs/command.md)
    ({"num_speculative_tokens": 10**10, "synthetic_acceptance_rates": _DROP,
      "synthetic_acceptance_length": 2}, "exceeds 65536", RefusedError),
    ({"synthetic_acceptance_rates": [10**400, 0, 0, 0]}, "(401 digits) is outside [0, 1]",
     RefusedError),
    ({"synthetic_acceptance_rates": _DROP, "synthetic_acceptance_length": 10**400},
     "(401 digits) is outside [1, 5]", RefusedError),
    ({"synthetic_acceptance_rates": _DROP, "synthetic_acceptance_length": -10**400},
     "is outside [1, 5]", RefusedError),
    ({"rejection_sample_method": ["synthetic"]}, '["synthetic"] is not a string', InputError),
    ({"rejection_sample_method": None}, "is missing or null, not a string", InputError),
    ({"num_speculative_tokens": _DROP}, "num_speculative_tokens is not recorded", InputError),
    ({"method": 3}, "method 3 is not a string", InputError),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "says", "error"), REFUSED_CONFIGS)
def test_a_config_vllm_refuses_is_refused_naming_the_file_and_field(tmp_path, changes, says, error):
    path = _with_config(tmp_path, **changes)
    with pytest.raises(error) as found:
        load_oracle("m", path)
    assert str(path) in str(found.value) and "speculative_config" in str(found.value)
    assert says in str(found.value)


@pytest.mark.parametrize(
    ("changes", "k", "resolved"),
    [
        # pydantic's lax mode takes a float with no fraction for vLLM's int field
        ({"num_speculative_tokens": 4.0}, 4, tuple(RATES)),
        # null is an optional field not given
        ({"synthetic_acceptance_length": None}, 4, tuple(RATES)),
        ({"synthetic_acceptance_rates": None, "synthetic_acceptance_length": 2.5}, 4,
         (1.0, 0.5, 0.0, 0.0)),
        ({"synthetic_acceptance_rates": [1, 1, 0, 0]}, 4, (1.0, 1.0, 0.0, 0.0)),
    ],
)  # fmt: skip
def test_a_config_vllm_takes_is_read(tmp_path, changes, k, resolved):
    setting = load_oracle("m", _with_config(tmp_path, **changes)).speculative
    assert setting is not None and setting.synthetic
    assert setting.num_speculative_tokens == k and type(setting.num_speculative_tokens) is int
    assert setting.resolved_rates == resolved


def test_a_config_that_is_not_an_object_is_refused(tmp_path):
    record = json.loads((MATCHED / "holds.json").read_text())
    record["speculative_config"] = '{"method": "ngram"}'
    path = tmp_path / "m.json"
    path.write_text(json.dumps(record))
    with pytest.raises(
        InputError, match=r'speculative_config "\{\\"method\\": \\"ngram\\"\}" is not an object'
    ):
        load_oracle("m", path)


# --- --vs NAME:matched -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("m:matched=a.json", ("m", None, "a.json", MatchedAs(None))),
        ("m:vllm+matched=a.json", ("m", "vllm", "a.json", MatchedAs(None))),
        ("m:matched+vllm=a:b=c.json", ("m", "vllm", "a:b=c.json", MatchedAs(None))),
        ("m:matched@v0=a.json", ("m", None, "a.json", MatchedAs("v0"))),
        ("m:llama.cpp+MATCHED@base=a.json", ("m", "llamacpp", "a.json", MatchedAs("base"))),
        ("m:vllm=a.json", ("m", "vllm", "a.json", None)),
        ("m=a.json", ("m", None, "a.json", None)),
    ],
)
def test_parse_vs_reads_matched_with_or_without_a_kind(spec, expected):
    assert tuple(parse_vs(spec)) == expected
    assert tuple(split_spec(spec)) == expected


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("m:matched+matched=a", "twice"),
        ("m:vllm+sglang=a", "two engine kinds"),
        ("m:matched@=a", "not an arm name"),
        ("m:matched@a b=x", "not an arm name"),
        ("m:matchd=a", "unknown engine kind"),
    ],
)
def test_parse_vs_refuses_what_it_cannot_read(spec, says):
    with pytest.raises(InputError, match=says):
        parse_vs(spec)


def test_a_run_of_ours_cannot_be_matched_and_the_old_parser_refuses_matched():
    with pytest.raises(InputError, match="takes no other modifier"):
        split_spec("m:ours+matched=a.json")
    with pytest.raises(InputError, match="matched arm"):
        parse_vs_spec("m:matched=a.json")
    assert parse_vs_spec("m:vllm=a.json") == ("m", "vllm", "a.json")


# --- the comparison -----------------------------------------------------------------------------


def _counted_length(path: Path) -> float:
    metrics = json.loads(path.read_text())["metrics"]
    return 1 + (
        metrics["vllm:spec_decode_num_accepted_tokens"] / metrics["vllm:spec_decode_num_drafts"]
    )


def _expected(document: dict, matched: Path, base: Path = REAL / "offline" / "vllm-arm.json"):
    """The factors by hand from the rows and records: measured T_o / T_m and modelled (T_o /
    L_o) / (T_b / L_b), both over the population the ordinary run's gap pairs (all legs:
    vLLM's counters are read once after the last leg); the steps/s of each oracle run, T / L
    over its own counters, and the matched over the ordinary."""
    rows = _rows(document)
    t_o = rows["ours (all legs)"]["output_throughput_tok_s"]
    l_o = rows["ours (all legs)"]["mean_acceptance_length"]
    t_b, l_b = _warm_median(base), _counted_length(base)
    t_m, l_m = _warm_median(matched), _counted_length(matched)
    return {
        "measured": t_o / t_m,
        "modelled": (t_o / l_o) / (t_b / l_b),
        "steps_m": t_m / l_m,
        "steps_b": t_b / l_b,
        "ratio": (t_m / l_m) / (t_b / l_b),
    }


def test_a_matched_run_inside_our_interval_where_the_model_holds(capsys):
    document = _run(capsys, *BASE, "--vs", f"m={MATCHED / 'holds.json'}")
    block = document["comparison"]
    assert block["matched"]["vllm"] is None
    check = block["matched"]["m"]
    expected = _expected(document, MATCHED / "holds.json")
    ours = _rows(document)["ours"]
    assert check["declared"] == "record" and check["base"] == "vllm"
    assert check["acceptance"]["ours"] == pytest.approx(ours["mean_acceptance_length"])
    assert check["acceptance"]["ours_ci"] == ours["mean_acceptance_length_ci"]
    assert check["acceptance"]["oracle"] == pytest.approx(2.6)
    assert check["acceptance"]["configured"] == pytest.approx(2.600001)
    assert check["acceptance"]["matched"] is True and check["acceptance"]["beyond_interval"] == 0
    assert check["measured_speed_factor"] == pytest.approx(expected["measured"])
    # the measured factor is the gap's ratio to the matched arm, with the gap's interval
    assert check["measured_speed_factor"] == pytest.approx(block["gaps"]["m"]["ratio"])
    assert check["measured_speed_factor_ci"] == pytest.approx(block["gaps"]["m"]["ratio_ci"])
    assert check["modelled_speed_factor"] == pytest.approx(expected["modelled"])
    assert check["modelled_speed_factor_ci"] == block["gaps"]["vllm"]["speed_factor_ci"]
    assert check["population"] == "all_legs"
    # 313.2 / 2.6 = 120.4615 steps/s against 338.0606 / 2.80645 = 120.4584
    assert check["steps_per_s"]["oracle"] == pytest.approx(expected["steps_m"])
    assert check["steps_per_s"]["base"] == pytest.approx(expected["steps_b"])
    assert check["step_rate_ratio"] == pytest.approx(expected["ratio"])
    assert abs(check["step_rate_ratio"] - 1) < 1e-4
    low, high = check["step_rate_ratio_ci"]
    assert low < 1 < high and check["step_rate_basis"] == "both_arms"
    assert check["step_rate_basis_text"] == "both arms"
    assert check["acceptance"]["basis"] == "our_interval"
    assert check["acceptance"]["basis_text"] == "our warm 95% interval"
    assert check["model_holds"] is True and check["status"] == MODEL_HOLDS
    assert "the model holds for this pair" in check["verdict"]


def test_a_matched_run_where_the_model_does_not_hold(capsys):
    document = _run(capsys, *BASE, "--vs", f"m={MATCHED / 'fails.json'}")
    check = document["comparison"]["matched"]["m"]
    expected = _expected(document, MATCHED / "fails.json")
    assert check["acceptance"]["matched"] is True
    assert check["measured_speed_factor"] == pytest.approx(expected["measured"])
    assert check["modelled_speed_factor"] == pytest.approx(expected["modelled"])
    # twice the steps/s at the same acceptance: 626.4 / 2.6 = 240.92 against 120.4584
    assert check["step_rate_ratio"] == pytest.approx(expected["ratio"])
    assert check["step_rate_ratio"] == pytest.approx(2.0, abs=1e-4)
    assert check["step_rate_ratio_ci"][0] > 1
    assert check["model_holds"] is False and check["status"] == MODEL_FAILS
    assert "the model does not hold for this pair" in check["verdict"]


def test_a_run_that_did_not_match_says_by_how_much_and_tests_nothing(capsys):
    document = _run(capsys, *BASE, "--vs", f"m={MATCHED / 'not-matched.json'}")
    check = document["comparison"]["matched"]["m"]
    ours = _rows(document)["ours"]
    high = ours["mean_acceptance_length_ci"][1]
    assert high < 4.5  # the fixture's 1 + 350/100 lies above our warm interval
    assert check["acceptance"]["oracle"] == pytest.approx(4.5)
    assert check["acceptance"]["difference"] == pytest.approx(4.5 - ours["mean_acceptance_length"])
    assert check["acceptance"]["beyond_interval"] == pytest.approx(4.5 - high)
    assert check["acceptance"]["matched"] is False and check["status"] == NOT_MATCHED
    assert check["step_rate_ratio"] is None and check["model_holds"] is None
    assert "the run did not match" in check["verdict"]
    assert f"{4.5 - ours['mean_acceptance_length']:.3f}" in check["verdict"]
    # the setting was not ours either: said beside, the verdict goes by the measurement
    assert any("not made from this fold" in note for note in check["notes"])


def test_a_run_inside_our_interval_but_at_its_own_acceptance_is_tested_at_that_acceptance(
    capsys,
):
    """faster-steps.json: holds.json's tok/s at 1 + 100/100 = 2.0, inside our warm interval.
    Its verify steps/s is 313.2 / 2.0 = 156.6: 30% more than an ordinary run at 2.6 whose
    steps/s is 313.2 / 2.6 = 120.46 (no-config.json), so the model fails for that pair, though
    T_o / T_m is the modelled factor to the digit. Against the recorded run (steps/s 120.46 too,
    but from eight legs spread from 274 to 561 tok/s) the same 1.3 is inside the noise."""
    faster = MATCHED / "faster-steps.json"
    steady = MATCHED / "no-config.json"
    document = _run(capsys, "--vs", f"base={steady}", "--vs", f"m={faster}")
    check = document["comparison"]["matched"]["m"]
    expected = _expected(document, faster, steady)
    assert check["acceptance"]["matched"] is True
    assert check["acceptance"]["oracle"] == pytest.approx(2.0)
    assert check["steps_per_s"]["oracle"] == pytest.approx(156.6)
    assert check["steps_per_s"]["base"] == pytest.approx(313.2 / 2.6)
    assert check["step_rate_ratio"] == pytest.approx(expected["ratio"])
    assert check["step_rate_ratio"] == pytest.approx(1.3)
    # the speed factors agree: our acceptance stands in for the run's in the modelled one
    assert check["measured_speed_factor"] == pytest.approx(check["modelled_speed_factor"])
    assert check["step_rate_ratio_ci"][0] > 1
    assert check["status"] == MODEL_FAILS and check["model_holds"] is False
    assert "156.6" in check["verdict"] and "the model does not hold" in check["verdict"]
    noisy = _run(capsys, *BASE, "--vs", f"m={faster}")["comparison"]["matched"]["m"]
    assert noisy["step_rate_ratio"] == pytest.approx(_expected(document, faster)["ratio"])
    low, high = noisy["step_rate_ratio_ci"]
    assert low < 1 < high and noisy["status"] == MODEL_HOLDS


def test_a_run_below_our_interval_did_not_match(capsys):
    document = _run(capsys, *BASE, "--vs", f"m={MATCHED / 'below.json'}")
    check = document["comparison"]["matched"]["m"]
    low = _rows(document)["ours"]["mean_acceptance_length_ci"][0]
    assert low > 1.5  # 1 + 50/100 lies below our warm interval
    assert check["acceptance"]["oracle"] == pytest.approx(1.5)
    assert check["acceptance"]["beyond_interval"] == pytest.approx(low - 1.5)
    assert check["acceptance"]["matched"] is False and check["status"] == NOT_MATCHED
    assert "below our warm" in check["verdict"] and check["step_rate_ratio"] is None


def test_without_intervals_the_match_and_the_model_go_by_the_tolerance(capsys):
    args = ["--bootstrap", "0"]
    holds = _run(capsys, *args, *BASE, "--vs", f"m={MATCHED / 'holds.json'}")
    check = holds["comparison"]["matched"]["m"]
    assert check["acceptance"]["basis"] == "tolerance"
    assert check["acceptance"]["basis_text"] == "--tolerance (no interval of ours)"
    assert check["acceptance"]["ours_ci"] is None and check["step_rate_ratio_ci"] is None
    assert check["status"] == MODEL_HOLDS
    fails = _run(capsys, *args, *BASE, "--vs", f"m={MATCHED / 'fails.json'}")
    assert fails["comparison"]["matched"]["m"]["status"] == MODEL_FAILS
    # 4.5 against 2.6 is far past 2%
    off = _run(capsys, *args, *BASE, "--vs", f"m={MATCHED / 'not-matched.json'}")
    assert off["comparison"]["matched"]["m"]["status"] == NOT_MATCHED


def test_matched_on_the_command_lines_word_for_a_record_without_config(capsys):
    document = _run(capsys, *BASE, "--vs", f"m:matched={MATCHED / 'no-config.json'}")
    check = document["comparison"]["matched"]["m"]
    assert check["declared"] == "command line" and check["setting"] is None
    assert any("command line's word" in note for note in check["notes"])
    assert check["status"] == MODEL_HOLDS
    # without the flag the same record is an ordinary arm
    plain = _run(capsys, *BASE, "--vs", f"m={MATCHED / 'no-config.json'}")
    assert plain["comparison"]["matched"]["m"] is None


def test_matched_on_a_record_whose_config_is_standard_is_refused(capsys):
    path = MATCHED / "standard.json"
    assert main([*OURS, *BASE, "--vs", f"m:matched={path}"]) == 1
    err = capsys.readouterr().err
    assert "refused" in err and str(path) in err and "'standard'" in err


def test_the_ordinary_run_is_named_when_there_are_several(capsys):
    two = [*BASE, "--vs", f"v2={REAL / 'offline' / 'vllm-arm.json'}"]
    unnamed = _run(capsys, *two, "--vs", f"m={MATCHED / 'holds.json'}")
    check = unnamed["comparison"]["matched"]["m"]
    assert check["status"] == NO_MODEL and check["base"] is None
    assert any("vllm, v2" in note for note in check["notes"])
    named = _run(capsys, *two, "--vs", f"m:matched@v2={MATCHED / 'holds.json'}")
    assert named["comparison"]["matched"]["m"]["base"] == "v2"
    alone = _run(capsys, "--vs", f"m={MATCHED / 'holds.json'}")
    assert alone["comparison"]["matched"]["m"]["status"] == NO_MODEL


@pytest.mark.parametrize(
    ("base", "says"),
    [("nope", "no oracle --vs arm is named 'nope'"), ("m2", "is itself a matched arm"),
     ("sg", "sglang data")],
)  # fmt: skip
def test_a_named_ordinary_run_must_be_an_unmatched_arm_of_that_engine(capsys, base, says):
    args = [*OURS, *BASE, "--vs", f"m2={MATCHED / 'fails.json'}",
            "--vs", f"sg={ROOT / 'fixtures' / 'oracles' / 'sglang-legs.jsonl'}",
            "--vs", f"m:matched@{base}={MATCHED / 'holds.json'}"]  # fmt: skip
    assert main(args) == 2
    assert says in capsys.readouterr().err


def test_the_verdict_is_on_the_first_screen_and_in_markdown_and_the_page(capsys, tmp_path):
    args = [*OURS, *BASE, "--vs", f"m={MATCHED / 'fails.json'}"]
    assert main(args) == 0
    screen = capsys.readouterr().out
    flat = " ".join(screen.split())
    assert "matched: m ran at our acceptance" in flat
    assert "the model does not hold for this pair" in flat
    assert all(len(line) <= 80 for line in screen.splitlines())
    assert main([*args, "--details"]) == 0
    assert "aims at 1 + A/S 2.600" in " ".join(capsys.readouterr().out.split())
    md, page = tmp_path / "r.md", tmp_path / "r.html"
    assert main([*args, "--markdown", str(md), "--html", str(page)]) == 0
    assert "  - matched: m ran at our acceptance" in md.read_text()
    assert 'data-arm="m">matched: m ran at our acceptance' in page.read_text()


# --- invariants ---------------------------------------------------------------------------------


def _arm(name: str, kind: str, tok_s: float, steps: int, accepted: int, **extra):
    arm = arm_from_counts(
        name, kind, tok_s=tok_s, steps=steps, proposed=4 * steps, accepted=accepted
    )
    return arm if not extra else _replace(arm, **extra)


def _replace(arm, **changes):
    import dataclasses

    return dataclasses.replace(arm, **changes)


_SYNTHETIC = SpeculativeSetting(
    "m.json", "ngram", 4, "synthetic", rates=(0.5, 0.25, 0.0, 0.0),
    resolved_rates=(0.5, 0.25, 0.0, 0.0),
)  # fmt: skip


def _check(ours, base, matched, tolerance=0.02, replicates=None, paired=None):
    """``paired``: the row of ours the gaps pair (another population), ``ours`` by default."""
    replicates = replicates or {}
    sides = [Side(arm, replicates.get(arm.name)) for arm in (base, matched)]
    mine = Side(ours, replicates.get(ours.name))
    pair = mine if paired is None else Side(paired, replicates.get(paired.name))
    gaps = {arm.name: attribute_gap(pair.row, arm, tolerance) for arm in (base, matched)}
    return check_matched_arms(mine, sides, {"b": pair, "m": pair}, gaps, tolerance)["m"]


tok_s = st.floats(1.0, 1e4)
steps = st.integers(1, 10_000)


@scaled(0.5)
@given(tok_s, steps, st.integers(0, 4), tok_s, steps, st.integers(0, 4))
def test_an_oracle_whose_step_time_does_not_move_measures_the_modelled_factor(
    t_o, s_o, per_o, t_b, s_b, per_b
):
    """Matched at our 1 + A/S with the ordinary run's steps/s: measured = modelled."""
    a_o, a_b = per_o * s_o // 2, per_b * s_b // 2
    ours = _arm("ours", "ours", t_o, s_o, a_o)
    base = _arm("b", "vllm", t_b, s_b, a_b)
    assert ours.mean_acceptance_length is not None and base.mean_acceptance_length is not None
    steps_per_s = t_b / base.mean_acceptance_length
    matched = _arm("m", "vllm", steps_per_s * ours.mean_acceptance_length, s_o, a_o,
                   speculative=_SYNTHETIC)  # fmt: skip
    check = _check(ours, base, matched)
    assert check.matched is True
    assert check.measured_speed_factor == pytest.approx(check.modelled_speed_factor, rel=1e-9)
    assert check.step_rate_ratio == pytest.approx(1, rel=1e-9)
    assert check.status == MODEL_HOLDS


@scaled(0.5)
@given(tok_s, steps, st.integers(0, 4))
def test_our_arm_against_a_matched_copy_of_itself(t_o, s_o, per_o):
    ours = _arm("ours", "ours", t_o, s_o, per_o * s_o // 2)
    base = _replace(ours, name="b", kind="vllm")
    matched = _replace(ours, name="m", kind="vllm", matched_as=MatchedAs(None))
    check = _check(ours, base, matched)
    assert check.measured_speed_factor == pytest.approx(1)
    assert check.modelled_speed_factor == pytest.approx(1)
    assert check.status == MODEL_HOLDS and check.declared == "command line"


@scaled(0.5)
@given(tok_s, steps, st.integers(1, 4), tok_s, st.floats(0.2, 5.0))
def test_the_step_rate_ratio_scales_with_the_matched_runs_speed(t_o, s_o, per_o, t_b, c):
    """(T_m / L_m) / (T_b / L_b): ours does not enter."""
    a_o = per_o * s_o // 2
    ours = _arm("ours", "ours", t_o, s_o, a_o)
    base = _arm("b", "vllm", t_b, s_o, a_o)
    matched = _arm("m", "vllm", t_b * c, s_o, a_o, speculative=_SYNTHETIC)
    check = _check(ours, base, matched)
    assert check.step_rate_ratio == pytest.approx(c, rel=1e-9)
    assert check.model_holds is (abs(c - 1) <= 0.02)
    faster = _check(_replace(ours, output_throughput_tok_s=2 * t_o), base, matched)
    assert faster.step_rate_ratio == pytest.approx(check.step_rate_ratio, rel=1e-9)


@scaled(0.5)
@given(st.integers(0, 30), tok_s)
def test_the_step_rate_is_over_the_matched_runs_own_acceptance(shift, t_b):
    """A run at 1 + A/S inside our interval but not ours, at the ordinary run's tok/s: its
    steps/s is T_b / L_m, so the ratio is L_b / L_m, whatever our acceptance."""
    ours = _arm("ours", "ours", 100.0, 100, 160)
    base = _arm("b", "vllm", t_b, 100, 160)
    matched = _arm("m", "vllm", t_b, 100, 160 - shift, speculative=_SYNTHETIC)
    check = _check(ours, base, matched, tolerance=0.2)
    assert check.matched is True
    assert check.step_rate_ratio == pytest.approx(2.6 / (2.6 - shift / 100), rel=1e-9)
    assert check.model_holds is (abs(check.step_rate_ratio - 1) <= 0.2)


@scaled(0.5)
@given(steps, st.integers(0, 4), st.integers(-40, 40))
def test_a_run_matches_exactly_when_its_length_is_within_the_tolerance(s_o, per_o, shift):
    a_o = per_o * s_o // 2
    ours = _arm("ours", "ours", 100.0, s_o, a_o)
    a_m = min(4 * s_o, max(0, a_o + shift))
    matched = _arm("m", "vllm", 50.0, s_o, a_m, speculative=_SYNTHETIC)
    check = _check(ours, _arm("b", "vllm", 60.0, s_o, a_o), matched)
    l_o, l_m = 1 + a_o / s_o, 1 + a_m / s_o
    assert check.matched is (abs(l_m - l_o) <= 0.02 * l_o)
    assert (check.status == NOT_MATCHED) is (not check.matched)


def test_the_step_rate_ratios_interval_is_drawn_from_the_oracle_arms_own_resamples():
    """With resamples, the ratio in draw i is (T_m[i] / L_m) / (T_b[i] / L_b[i]), each
    length known by totals entering at its value: a second computation from the draws."""
    rng = np.random.default_rng(7)
    n = 400
    ours = _arm("ours", "ours", 100.0, 50, 50)
    base = _arm("b", "vllm", 80.0, 50, 40)
    matched = _arm("m", "vllm", 50.0, 50, 50, speculative=_SYNTHETIC)
    draws = {
        "ours": Replicates(n, {"output_throughput_tok_s": rng.normal(100, 5, n),
                               "mean_acceptance_length": rng.normal(2.0, 0.05, n)}),
        "b": Replicates(n, {"output_throughput_tok_s": rng.normal(80, 4, n),
                            "mean_acceptance_length": rng.normal(1.8, 0.04, n)}),
        "m": Replicates(n, {"output_throughput_tok_s": rng.normal(50, 2, n)}),
    }  # fmt: skip
    check = _check(ours, base, matched, replicates=draws)
    q = (draws["m"].figures["output_throughput_tok_s"] / 2.0) / (
        draws["b"].figures["output_throughput_tok_s"] / draws["b"].figures["mean_acceptance_length"]
    )
    low, high = np.quantile(q, [0.025, 0.975])
    assert check.step_rate_ratio_ci == pytest.approx((low, high), rel=1e-9)
    assert check.step_rate_ratio == pytest.approx((50 / 2.0) / (80 / 1.8))
    assert check.step_rate_basis == "both_arms"
    assert check.model_holds is bool(low <= 1 <= high)
    measured = (
        draws["ours"].figures["output_throughput_tok_s"]
        / draws["m"].figures["output_throughput_tok_s"]
    )
    assert check.measured_speed_factor_ci == pytest.approx(
        tuple(np.quantile(measured, [0.025, 0.975])), rel=1e-9
    )
    assert check.measured_basis == "both_arms"
    assert check.to_json()["measured_basis_text"] == "both arms"
    assert math.isclose(check.ours_length_ci[0], np.quantile(
        draws["ours"].figures["mean_acceptance_length"], 0.025))  # fmt: skip
    # the ordinary run known by totals: its figures enter every draw at their values
    alone = _check(ours, base, matched, replicates={k: draws[k] for k in ("ours", "m")})
    assert alone.step_rate_ratio_ci == pytest.approx(
        tuple(np.quantile(draws["m"].figures["output_throughput_tok_s"] / 2.0 / (80 / 1.8),
                          [0.025, 0.975])), rel=1e-9)  # fmt: skip
    assert alone.step_rate_basis == "matched_run_only"
    assert alone.to_json()["step_rate_basis_text"] == "m's legs only"
    # the matched run known by totals: the ratio rests on the ordinary run's legs, and the
    # measured factor on ours only
    other = _check(ours, base, matched, replicates={k: draws[k] for k in ("ours", "b")})
    assert other.step_rate_basis == "ordinary_run_only" and other.measured_basis == "ours_only"
    assert other.to_json()["step_rate_basis_text"] == "b's legs only"
    assert other.to_json()["measured_basis_text"] == "ours only"
    neither = _check(ours, base, matched, replicates={"ours": draws["ours"]})
    assert neither.step_rate_ratio_ci is None and neither.step_rate_basis is None
    assert neither.to_json()["step_rate_basis_text"] is None
    assert neither.model_holds is (abs(neither.step_rate_ratio - 1) <= 0.02)


@pytest.mark.parametrize(
    ("accepted", "matched"),
    [(100, True), (200, True), (150, True), (99, False), (201, False), (0, False)],
)
def test_a_run_matches_inside_our_interval_and_at_its_edges_only(accepted, matched):
    """Our warm interval is [2.0, 3.0] exactly (half the draws at each end): a run at 1 + A/S
    2.0 or 3.0 matches, 1.99 (below) and 3.01 (above) do not."""
    n = 400
    ours = _arm("ours", "ours", 100.0, 100, 150)
    lengths = np.repeat([2.0, 3.0], n // 2)
    draws = {"ours": Replicates(n, {"output_throughput_tok_s": np.full(n, 100.0),
                                    "mean_acceptance_length": lengths})}  # fmt: skip
    run = _arm("m", "vllm", 50.0, 100, accepted, speculative=_SYNTHETIC)
    check = _check(ours, _arm("b", "vllm", 60.0, 100, 150), run, replicates=draws)
    assert check.ours_length_ci == (2.0, 3.0)
    assert check.matched is matched
    length = 1 + accepted / 100
    assert check.beyond_interval == pytest.approx(max(2.0 - length, length - 3.0, 0.0))
    assert (check.status == NOT_MATCHED) is (not matched)
    if not matched:
        assert ("below" if length < 2.0 else "above") in check.verdict


def test_both_speed_factors_are_over_the_population_the_ordinary_split_pairs():
    """Our warm legs at 100 tok/s, all legs at 80: the gaps pair all legs, so the measured
    factor is 80 / T_m, as the modelled one is over all legs, and the check says which."""
    warm = _arm("ours", "ours", 100.0, 100, 160)
    every = _replace(_arm("ours (all legs)", "ours", 80.0, 100, 160), population="all_legs")
    base = _arm("b", "vllm", 60.0, 100, 160)
    matched = _arm("m", "vllm", 40.0, 100, 160, speculative=_SYNTHETIC)
    check = _check(warm, base, matched, paired=every)
    assert check.population == "all_legs"
    assert check.measured_speed_factor == pytest.approx(80.0 / 40.0)
    assert check.modelled_speed_factor == pytest.approx(80.0 / 60.0)
    assert "(our all legs)" in check.verdict


# --- vLLM's own rules ---------------------------------------------------------------------------

CASES = [  # (synthetic_acceptance_rates, synthetic_acceptance_length); None: absent
    (RATES, None),
    ([1.0, 1.0, 1.0, 1.0], None),
    ([0.0, 0.0, 0.0, 0.0], None),
    ([0.7, 0.3, 0.2], None),
    ([0.7, 0.8, 0.2, 0.1], None),
    ([1.2, 0.8, 0.2, 0.1], None),
    ([0.7, 0.3, 0.3, 0.31], None),
    ([0.7, -0.1, -0.2, -0.3], None),
    (None, 2.6),
    (None, 1.0),
    (None, 5.0),
    (None, 4.5),
    (None, 5.01),
    (None, 0.99),
    (RATES, 2.0),
    (None, None),
]


@pytest.mark.oracle
def test_the_reader_accepts_and_resolves_exactly_what_vllm_does(tmp_path, vllm_python):
    """vLLM 0.32's own resolver (``SpeculativeConfig._resolve_synthetic_acceptance_rates``) on
    each config: accepted with the same rates, or refused by both."""
    script = (
        "import json, sys\n"
        "from vllm.config.speculative import SpeculativeConfig as C\n"
        "out = []\n"
        "for rates, length in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        out.append(C._resolve_synthetic_acceptance_rates(4, rates, length))\n"
        "    except ValueError:\n"
        "        out.append(None)\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [str(vllm_python), "-c", script, json.dumps(CASES)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    assert None in theirs and any(found is not None for found in theirs)
    for (rates, length), resolved in zip(CASES, theirs, strict=True):
        path = _with_config(
            tmp_path,
            synthetic_acceptance_rates=_DROP if rates is None else rates,
            synthetic_acceptance_length=_DROP if length is None else length,
        )
        if resolved is None:
            with pytest.raises(RefusedError):
                load_oracle("m", path)
        else:
            setting = load_oracle("m", path).speculative
            assert setting is not None
            assert list(setting.resolved_rates or ()) == resolved, (rates, length)


# past a float, past the format's cap on a step's tokens, past 2^63: values a reader must
# refuse by name before it converts or sizes anything by them
_huge = st.sampled_from([10**400, -(10**400), 2**16, 2**16 + 1, 10**10, 2**63])
_numbers = (
    _huge
    | st.integers(-3, 7)
    | st.integers()
    | st.floats(-1.5, 6.5)
    | st.integers(-3, 7).map(float)
    | st.floats(allow_nan=True, allow_infinity=True)
)
_values = st.recursive(
    st.none() | st.booleans() | _numbers | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=5),
    max_leaves=8,
)
_configs = st.fixed_dictionaries(
    {},
    optional={
        "method": _values,
        "num_speculative_tokens": st.integers(1, 5) | _numbers | _values,
        "rejection_sample_method": st.just("synthetic")
        | st.sampled_from(["standard", "synthetic", "block", "x"])
        | _values,
        "synthetic_acceptance_rates": st.lists(st.floats(-0.2, 1.2) | _numbers, max_size=5)
        | _values,
        "synthetic_acceptance_length": _huge | _numbers | _values,
    },
)

# a synthetic config whose one number is drawn from anywhere: k, a rate, or the length
_synthetic_configs = st.fixed_dictionaries(
    {
        "rejection_sample_method": st.just("synthetic"),
        "num_speculative_tokens": st.integers(1, 5) | st.integers(1, 5).map(float) | _huge,
    }
).flatmap(
    lambda base: st.one_of(
        st.fixed_dictionaries({"synthetic_acceptance_length": _huge | _numbers}),
        st.fixed_dictionaries({"synthetic_acceptance_rates": st.lists(_huge | _numbers)}),
    ).map(lambda rest: {**base, **rest})
)


@scaled(1.0)
@given(_configs | _synthetic_configs)
def test_any_config_is_read_by_vllms_rules_or_refused_by_name(config):
    """Whatever the config holds, a setting that comes back obeys vLLM's rules, and anything
    else is refused with the field's place, never an unexpected exception."""
    from fold.inputs.oracles.vllm_speculative import read_setting

    try:
        setting = read_setting({"speculative_config": config}, "m.json")
    except (InputError, RefusedError) as error:
        assert str(error).startswith("m.json: speculative_config")
        return
    assert setting is not None
    if not setting.synthetic:
        assert config.get("synthetic_acceptance_rates") is None
        assert config.get("synthetic_acceptance_length") is None
        return
    k = config["num_speculative_tokens"]
    assert setting.num_speculative_tokens == k and 1 <= k <= 2**16
    rates = setting.resolved_rates
    assert rates is not None and len(rates) == k
    assert all(0 <= rate <= 1 for rate in rates)
    assert all(later <= earlier for earlier, later in itertools.pairwise(rates))
    assert 1 <= setting.expected_mean_acceptance_length <= k + 1 + 1e-9
    if setting.length is not None:
        assert setting.expected_mean_acceptance_length == pytest.approx(setting.length)


FIELD_CASES = [  # (field, value): each a change to holds.json's config
    ("num_speculative_tokens", 4),
    ("num_speculative_tokens", 4.0),
    ("num_speculative_tokens", 4.5),
    ("num_speculative_tokens", None),
    ("num_speculative_tokens", [4]),
    ("rejection_sample_method", "synthetic"),
    ("rejection_sample_method", ["synthetic"]),
    ("rejection_sample_method", None),
    ("synthetic_acceptance_length", None),
]


@pytest.mark.oracle
def test_the_reader_takes_the_field_types_vllms_own_fields_take(tmp_path, vllm_python):
    """vLLM 0.32's pydantic fields (``SpeculativeConfig.__pydantic_fields__``, lax mode) on
    each value: the reader reads what they take and refuses what they refuse."""
    script = (
        "import json, sys\n"
        "from typing import Annotated\n"
        "from pydantic import TypeAdapter, ValidationError\n"
        "from vllm.config.speculative import SpeculativeConfig as C\n"
        "out = []\n"
        "for name, value in json.loads(sys.argv[1]):\n"
        "    f = C.__pydantic_fields__[name]\n"
        "    kind = Annotated[f.annotation, *f.metadata] if f.metadata else f.annotation\n"
        "    try:\n"
        "        TypeAdapter(kind).validate_python(value)\n"
        "        out.append(True)\n"
        "    except ValidationError:\n"
        "        out.append(False)\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [str(vllm_python), "-c", script, json.dumps(FIELD_CASES)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    assert True in theirs and False in theirs
    for (name, value), taken in zip(FIELD_CASES, theirs, strict=True):
        path = _with_config(tmp_path, **{name: value})
        if taken:
            assert load_oracle("m", path).speculative is not None, (name, value)
        else:
            with pytest.raises((InputError, RefusedError)):
                load_oracle("m", path)
