"""The gap split by measurement through a run of the oracle at our acceptance, and every other
case saying what its split rests on.

Expected figures are worked from the arms' own tok/s and counts by the definitions in
``docs/matched-arms.md`` (r = T_o / T_b = (T_o / T_m) x (T_m / T_b); the model's error is the
measured speed factor over (T_o / L_o) / (T_b / L_b)), never from the module under test; the
intervals are held to a second computation from the hand-made draws, the model's error by its
algebraic form T_b L_o / (T_m L_b).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
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
from fold.compare.gap import (
    ACCEPTANCE,
    AT_OUR_ACCEPTANCE,
    AT_OUR_ACCEPTANCE_WORD,
    DID_NOT_MATCH,
    MATCHED_RUN,
    MATCHED_RUN_WORD,
    NO_MATCHED_RUN,
    NOT_CHECKED,
    OTHER_TOK_S,
    SPEED,
    SPLIT_REASONS,
    attribute_gap,
    split_gap,
)
from fold.compare.matched_arms import check_matched_arms
from fold.compare.measured_split import split_bases
from fold.folding.uncertainty import Replicates
from fold.inputs.oracles import MatchedAs, arm_from_counts
from fold.inputs.oracles.vllm_speculative import SpeculativeSetting
from fold.ledger.figures import figure_rows

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "fixtures" / "oracles" / "vllm-real"
MATCHED = ROOT / "fixtures" / "oracles" / "vllm-matched"
OURS = [str(REAL / "ours" / "our-arm.json"), str(REAL / "ours" / "steps.jsonl")]
BASE = ["--vs", f"vllm={REAL / 'offline' / 'vllm-arm.json'}"]

_SYNTHETIC = SpeculativeSetting(
    "m.json", "ngram", 4, "synthetic", rates=(0.5, 0.25, 0.0, 0.0),
    resolved_rates=(0.5, 0.25, 0.0, 0.0),
)  # fmt: skip


def _arm(name, kind, tok_s, steps, accepted, **changes):
    arm = arm_from_counts(name, kind, tok_s=tok_s, steps=steps, proposed=4 * steps,
                          accepted=accepted)  # fmt: skip
    return dataclasses.replace(arm, **changes) if changes else arm


def _matched(name, tok_s, steps, accepted, **changes):
    return _arm(name, "vllm", tok_s, steps, accepted, speculative=_SYNTHETIC, **changes)


def _gaps(ours, *oracles, tolerance=0.02, replicates=None):
    """The gaps as the comparison makes them: modelled splits, the matched checks, the bases,
    then each gap once."""
    replicates = replicates or {}
    sides = {arm.name: Side(arm, replicates.get(arm.name)) for arm in oracles}
    mine = Side(ours, replicates.get(ours.name))
    paired = dict.fromkeys(sides, mine)
    splits = {name: split_gap(ours, side.row) for name, side in sides.items()}
    checks = check_matched_arms(mine, list(sides.values()), paired, splits, tolerance)
    bases = split_bases(checks, sides, paired, splits, tolerance)
    gaps = {
        name: attribute_gap(ours, sides[name].row, tolerance, None, bases[name]) for name in sides
    }
    return gaps, checks


# --- the triple, by hand ----------------------------------------------------------------

T_O, T_M, T_B = 570.5, 536.7, 100.0
OURS_ARM = _arm("ours", "ours", T_O, 1000, 2395)  # 1 + A/S 3.395
BASE_ARM = _arm("b", "vllm", T_B, 1000, 4)  # 1.004: an unrelated drafter accepts next to nothing
MATCHED_ARM = _matched("m", T_M, 1000, 2342)  # 3.342, within 2% of ours


def test_the_gap_to_the_ordinary_run_is_split_by_measurement():
    gaps, checks = _gaps(OURS_ARM, BASE_ARM, MATCHED_ARM)
    gap = gaps["b"]
    measured = gap.basis.measured
    r, msf, maf = T_O / T_B, T_O / T_M, T_M / T_B
    assert gap.basis.split == "measured" and gap.basis.reason == MATCHED_RUN
    assert measured.ratio == pytest.approx(r) and gap.ratio == pytest.approx(r)
    assert measured.speed_factor == pytest.approx(1.0630, abs=5e-5)
    assert measured.speed_factor == pytest.approx(msf)
    assert measured.acceptance_factor == pytest.approx(maf)
    assert measured.speed_factor * measured.acceptance_factor == pytest.approx(r, rel=1e-12)
    share_a = math.log(maf) / math.log(r)
    assert measured.acceptance_share == pytest.approx(share_a)
    assert measured.speed_share == pytest.approx(1 - share_a)
    assert round(share_a * 100) == 96  # the issue: acceptance is about 96% of the gap
    # the model, beside it: acceptance length 3.395 / 1.004, steps/s ratio (T_o / L_o) / (T_b / L_b)
    modelled = (T_O / 3.395) / (T_B / 1.004)
    assert gap.acceptance_factor == pytest.approx(3.395 / 1.004)
    assert gap.speed_factor == pytest.approx(modelled)
    assert measured.modelled_speed_factor == pytest.approx(modelled)
    assert measured.model_error == pytest.approx(msf / modelled)
    assert measured.model_error == pytest.approx(T_B * 3.395 / (T_M * 1.004))  # its algebra
    # the verdict is the measured one, and names the model's error
    assert gap.dominant == ACCEPTANCE
    assert gap.to_json()["verdict_kind"] == "larger_share"  # neither factor within 2%
    assert gap.verdict.startswith("measured with m: ours is 5.71x faster than b, mostly acceptance")
    assert "m at our acceptance 5.37x faster than b explains 96% of the log-gap" in gap.verdict
    assert "ours 6.3% faster than m at the same acceptance explains 4%" in gap.verdict
    assert f"the model's error {msf / modelled:.3f}" in gap.verdict
    assert "3.38x longer" not in gap.verdict  # the model's words are beside it, not in it
    # the matched run's own gap: all speed, measured
    own = gaps["m"]
    assert own.basis.reason == AT_OUR_ACCEPTANCE and own.dominant == SPEED
    assert own.to_json()["verdict_kind"] == "speed_at_our_acceptance"
    assert own.basis.measured.speed_factor == pytest.approx(msf)
    assert own.basis.measured.acceptance_factor == 1.0
    assert checks["m"].measured_speed_factor == pytest.approx(msf)


def test_the_json_says_which_split_each_gap_rests_on():
    gaps, _ = _gaps(OURS_ARM, BASE_ARM, MATCHED_ARM)
    document = {name: gap.to_json() for name, gap in gaps.items()}
    assert document["b"]["split"] == "measured" and document["b"]["split_reason"] == MATCHED_RUN
    assert document["b"]["split_text"].startswith("measured: m is b run at our acceptance")
    assert document["b"]["measured"]["speed_factor"] == pytest.approx(T_O / T_M)
    assert document["b"]["measured"]["model_test"] == "model_does_not_hold"
    # the factors of the document stay the model's: their history keeps one meaning
    assert document["b"]["speed_factor"] == pytest.approx((T_O / 3.395) / (T_B / 1.004))
    assert document["m"]["split"] == "measured"


def test_a_matched_run_that_did_not_match_leaves_the_model_standing():
    far = _matched("m", T_M, 1000, 1000)  # 1 + A/S 2.0 against our 3.395
    gaps, _ = _gaps(OURS_ARM, BASE_ARM, far)
    plain = attribute_gap(OURS_ARM, BASE_ARM)
    gap = gaps["b"]
    assert gap.basis.split == "modelled" and gap.basis.reason == DID_NOT_MATCH
    assert gap.basis.measured is None
    assert gap.verdict == plain.verdict and gap.dominant == plain.dominant
    # by how much it missed: 2.0 - 3.395, its share of ours
    assert f"{3.395 - 2.0:.3f} ({(3.395 - 2.0) / 3.395:.1%}) below" in gap.basis.text
    assert gap.basis.text.endswith("the model stands")
    assert gaps["m"].basis.reason == DID_NOT_MATCH


def test_a_matched_run_without_an_ordinary_run_measures_the_speed_factor_only():
    gaps, checks = _gaps(OURS_ARM, MATCHED_ARM)
    gap = gaps["m"]
    assert checks["m"].base is None
    assert gap.basis.split == "measured" and gap.basis.reason == AT_OUR_ACCEPTANCE
    assert gap.basis.measured.speed_factor == pytest.approx(T_O / T_M)
    assert gap.basis.measured.base is None and gap.basis.measured.model_error is None
    assert "the measured speed factor is all there is" in gap.basis.text
    assert gap.verdict == (
        f"measured: m ran at our acceptance, so the gap to it is speed: ours is 6.3% faster "
        f"(ratio {T_O / T_M:.3f})"
    )


def test_a_run_matched_on_the_command_lines_word_is_measured_with_that_caveat():
    word = _arm("m", "sglang", T_M, 1000, 2342, matched_as=MatchedAs(None))
    base = _arm("b", "sglang", T_B, 1000, 4)
    gaps, checks = _gaps(OURS_ARM, base, word)
    assert checks["m"].declared == "command line"
    assert gaps["b"].basis.reason == MATCHED_RUN_WORD and gaps["b"].basis.split == "measured"
    assert gaps["m"].basis.reason == AT_OUR_ACCEPTANCE_WORD
    for gap in gaps.values():
        assert "matched on the command line's word" in gap.basis.text
        assert "the only evidence it ran at ours" in gap.basis.text
    assert gaps["b"].basis.measured.speed_factor == pytest.approx(T_O / T_M)


def test_a_matched_run_that_cannot_be_checked_measures_nothing():
    unknown = _matched("m", None, 1000, 2342)
    gaps, _ = _gaps(OURS_ARM, BASE_ARM, unknown)
    assert gaps["b"].basis.reason == NOT_CHECKED and gaps["b"].basis.split == "modelled"
    assert gaps["b"].verdict == attribute_gap(OURS_ARM, BASE_ARM).verdict
    assert "tok/s not recorded" in gaps["b"].basis.text


_ONE_REQUEST = "one request's generation speed (predicted_per_second)"
_TWO_KINDS = "; r compares two kinds of tok/s: "


def test_a_matched_run_of_another_kind_of_tok_s_measures_nothing():
    """T_o / T_m with T_m one request's speed divides one kind by another: the measured split
    is refused for both gaps it would give, and the model stands with its own caveat."""
    other = dataclasses.replace(MATCHED_ARM, tok_s_kind=_ONE_REQUEST)
    gaps, _ = _gaps(OURS_ARM, BASE_ARM, other)
    for name, oracle in (("b", BASE_ARM), ("m", other)):
        gap = gaps[name]
        assert gap.basis.reason == OTHER_TOK_S and gap.basis.split == "modelled"
        assert gap.basis.measured is None and gap.to_json()["measured"] is None
        assert gap.verdict == attribute_gap(OURS_ARM, oracle).verdict
        assert f"m's is {_ONE_REQUEST}" in gap.basis.text
    # the matched run's own r is the two kinds', and says so; b's r is one kind
    assert gaps["m"].verdict.endswith("ours a leg's completion tokens over its wall time")
    assert _TWO_KINDS in gaps["m"].verdict and _TWO_KINDS not in gaps["b"].verdict


def test_an_ordinary_run_of_another_kind_of_tok_s_is_not_split_by_measurement():
    """T_m / T_b with T_b one request's speed is no acceptance factor: b's gap stays modelled;
    m, of ours's kind, still measures its own gap."""
    other = dataclasses.replace(BASE_ARM, tok_s_kind=_ONE_REQUEST)
    gaps, _ = _gaps(OURS_ARM, other, MATCHED_ARM)
    assert gaps["b"].basis.reason == OTHER_TOK_S and gaps["b"].basis.measured is None
    assert gaps["b"].verdict == attribute_gap(OURS_ARM, other).verdict
    assert _TWO_KINDS in gaps["b"].verdict and f"b's is {_ONE_REQUEST}" in gaps["b"].basis.text
    assert gaps["m"].basis.reason == AT_OUR_ACCEPTANCE
    assert gaps["m"].basis.measured.speed_factor == pytest.approx(T_O / T_M)


def test_the_matched_check_names_each_ratio_that_divides_two_kinds_of_tok_s():
    """T_o / T_m (measured), T_o / T_b (modelled) and T_m / T_b (steps/s): each ratio whose two
    arms' tok/s differ in kind is named in the check's line, and only those."""
    other = dataclasses.replace(MATCHED_ARM, tok_s_kind=_ONE_REQUEST)
    _, checks = _gaps(OURS_ARM, BASE_ARM, other)
    assert checks["m"].verdict.endswith(
        "; the measured speed factor and the steps/s ratio divide two kinds of tok/s "
        f"(m's is {_ONE_REQUEST})"
    )
    both = dataclasses.replace(BASE_ARM, tok_s_kind=_ONE_REQUEST)
    _, checks = _gaps(OURS_ARM, both, other)
    assert "; the measured speed factor and the modelled one divide two kinds" in (
        checks["m"].verdict
    )
    assert "steps/s ratio" not in checks["m"].verdict
    _, checks = _gaps(OURS_ARM, BASE_ARM, MATCHED_ARM)
    assert "kinds" not in checks["m"].verdict


def test_the_schema_lists_every_split_reason():
    schema = json.loads((ROOT / "docs" / "fold-acceptance-5.schema.json").read_text())
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "split_reason" in node and isinstance(node["split_reason"], dict):
                found.append(node["split_reason"]["enum"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert found and all(set(enum) == set(SPLIT_REASONS) for enum in found)
    table = (ROOT / "docs" / "matched-arms.md").read_text()
    for reason, split in SPLIT_REASONS.items():
        assert f"| `{reason}` | {split} |" in table


def test_without_a_matched_run_every_gap_is_modelled():
    gaps, _ = _gaps(OURS_ARM, BASE_ARM)
    assert gaps["b"].basis.reason == NO_MATCHED_RUN and gaps["b"].basis.split == "modelled"
    assert gaps["b"].to_json()["measured"] is None


def test_the_measured_factors_intervals_come_from_the_three_arms_resamples():
    """Each draw i: r = T_o[i] / T_b[i], speed T_o[i] / T_m[i], acceptance T_m[i] / T_b[i];
    the model's error T_b[i] L_o[i] / (T_m[i] L_b[i]): a second computation from the draws."""
    rng = np.random.default_rng(3)
    n = 400
    draws = {
        "ours": {"output_throughput_tok_s": rng.normal(T_O, 20, n),
                 "mean_acceptance_length": rng.normal(3.395, 0.05, n)},
        "m": {"output_throughput_tok_s": rng.normal(T_M, 30, n)},
        "b": {"output_throughput_tok_s": rng.normal(T_B, 5, n),
              "mean_acceptance_length": rng.normal(1.004, 0.001, n)},
    }  # fmt: skip
    replicates = {name: Replicates(n, figures) for name, figures in draws.items()}
    gaps, _ = _gaps(OURS_ARM, BASE_ARM, MATCHED_ARM, replicates=replicates)
    measured = gaps["b"].basis.measured
    t_o, t_m, t_b = (draws[k]["output_throughput_tok_s"] for k in ("ours", "m", "b"))

    def q(values):
        return tuple(np.quantile(values, [0.025, 0.975]))

    assert measured.ratio_ci == pytest.approx(q(t_o / t_b), rel=1e-12)
    assert measured.speed_factor_ci == pytest.approx(q(t_o / t_m), rel=1e-12)
    assert measured.acceptance_factor_ci == pytest.approx(q(t_m / t_b), rel=1e-12)
    l_o, l_b = draws["ours"]["mean_acceptance_length"], draws["b"]["mean_acceptance_length"]
    assert measured.model_error_ci == pytest.approx(q(t_b * l_o / (t_m * l_b)), rel=1e-9)
    assert measured.basis == "every_arm" and measured.basis_text == "three arms"
    assert measured.resampled == ("ours", "m", "b")
    # every arm resampled: the verdict reads from the intervals
    assert "measured speed factor (ours over m)" in gaps["b"].verdict
    # the ordinary run by totals: it enters every draw at its value, and the basis says so
    alone = {k: replicates[k] for k in ("ours", "m")}
    partly = _gaps(OURS_ARM, BASE_ARM, MATCHED_ARM, replicates=alone)[0]["b"].basis.measured
    assert partly.acceptance_factor_ci == pytest.approx(q(t_m / T_B), rel=1e-12)
    assert partly.basis == "some_arms"
    assert partly.basis_text == "ours, m resampled; b by totals"
    # speed's interval over ours and m holds 1 (by the draws): no share of the gap is claimed
    # for it, though the tolerance (2%) would call 6.3% a speed gap
    assert q(t_o / t_m)[0] < 1 < q(t_o / t_m)[1]
    verdict = _gaps(OURS_ARM, BASE_ARM, MATCHED_ARM, replicates=alone)[0]["b"].verdict
    assert "not told apart from m on the spread of ours, m" in verdict
    assert "the gap is acceptance;" in verdict and "faster than m" not in verdict


def test_only_our_spread_gives_no_interval_to_what_rests_on_totals_and_no_claim_it_holds():
    """Ours resampled, m and b by totals: m over b is one value in every draw, so it has no
    interval (null, not a zero-width one); speed's interval, from our spread alone, holds 1
    (T_o / T_m = 1.063, ours drawn with a spread of 60), so neither verdict calls ours faster."""
    rng = np.random.default_rng(5)
    t_o, l_o = rng.normal(T_O, 60, 400), rng.normal(3.395, 0.05, 400)
    lo, hi = np.quantile(t_o / T_M, [0.025, 0.975])
    assert lo < 1 < hi  # the premise, from the draws
    figures = {"output_throughput_tok_s": t_o, "mean_acceptance_length": l_o}
    replicates = {"ours": Replicates(400, figures)}
    gaps, _ = _gaps(OURS_ARM, BASE_ARM, MATCHED_ARM, replicates=replicates)
    measured = gaps["b"].basis.measured
    assert measured.acceptance_factor_ci is None
    assert gaps["b"].to_json()["measured"]["acceptance_factor_ci"] is None
    assert measured.speed_factor_ci == pytest.approx((lo, hi), rel=1e-12)
    assert "not told apart from m on the spread of ours (ours resampled; m, b by totals)" in (
        gaps["b"].verdict
    )
    assert "6.3% faster" not in gaps["b"].verdict
    # the model's error, T_b L_o / (T_m L_b), spreads with our 1 + A/S alone, and says so
    error_ci = np.quantile(T_B * l_o / (T_M * 1.004), [0.025, 0.975])
    assert measured.model_error_ci == pytest.approx(tuple(error_ci), rel=1e-9)
    assert "its interval from our 1 + A/S alone (m, b by totals)" in gaps["b"].verdict
    assert gaps["m"].basis.measured.dominant == "none"
    assert "not told apart from 1 on the spread of ours" in gaps["m"].verdict
    assert "6.3% faster" not in gaps["m"].verdict


@scaled(0.5)
@given(
    st.floats(1.0, 1e4), st.floats(1.0, 1e4), st.floats(1.0, 1e4), st.integers(0, 3),
    st.integers(0, 3),
)  # fmt: skip
def test_speed_times_acceptance_is_the_gap_exactly(t_o, t_m, t_b, per_o, per_b):
    ours = _arm("ours", "ours", t_o, 100, 50 * per_o)
    base = _arm("b", "vllm", t_b, 100, 50 * per_b)
    matched = _matched("m", t_m, 100, 50 * per_o)
    gap = _gaps(ours, base, matched)[0]["b"]
    measured = gap.basis.measured
    assert measured.speed_factor == pytest.approx(t_o / t_m, rel=1e-12)
    assert measured.acceptance_factor == pytest.approx(t_m / t_b, rel=1e-12)
    assert measured.speed_factor * measured.acceptance_factor == pytest.approx(t_o / t_b, rel=1e-12)
    if measured.speed_share is not None:
        assert measured.speed_share + measured.acceptance_share == pytest.approx(1, abs=1e-9)
    assert gap.dominant in ("acceptance", "speed", "none")


# --- the command, on the recorded real run ------------------------------------------------------


def _warm_median(path: Path) -> float:
    legs = json.loads(path.read_text())["legs"]
    return statistics.median(leg["tok_s"] for leg in legs if leg["run"] > 1)


def _run(capsys, *args: str) -> dict:
    assert main([*OURS, *args, "--json", "-"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    validate(document)
    return document


def test_the_command_splits_the_gap_to_the_ordinary_run_by_the_matched_run(capsys):
    document = _run(capsys, *BASE, "--vs", f"m={MATCHED / 'fails.json'}")
    gap = document["comparison"]["gaps"]["vllm"]
    rows = {row["name"]: row for row in document["comparison"]["rows"]}
    t_o = _warm_median(REAL / "ours" / "our-arm.json")  # ours's tok/s is its warm legs'
    t_b = _warm_median(REAL / "offline" / "vllm-arm.json")
    t_m = _warm_median(MATCHED / "fails.json")
    measured = gap["measured"]
    assert gap["split"] == "measured" and gap["split_reason"] == MATCHED_RUN
    assert measured["speed_factor"] == pytest.approx(t_o / t_m)
    assert measured["acceptance_factor"] == pytest.approx(t_m / t_b)
    assert measured["population"] == "all_legs" and measured["basis"] == "every_arm"
    assert measured["basis_text"] == "three arms"
    # the model's error by its algebra, T_b L_o / (T_m L_b): L_b from the record's counters,
    # L_o our all-legs 1 + A/S (the population the split is over)
    counters = json.loads((REAL / "offline" / "vllm-arm.json").read_text())["metrics"]
    l_b = 1 + (
        counters["vllm:spec_decode_num_accepted_tokens"] / counters["vllm:spec_decode_num_drafts"]
    )
    l_o = rows["ours (all legs)"]["mean_acceptance_length"]
    assert measured["model_error"] == pytest.approx(t_b * l_o / (t_m * l_b), rel=1e-9)
    assert measured["model_test"] == "model_does_not_hold"
    assert gap["verdict"].startswith("measured with m:")
    # one draw of ours for both: the measured speed factor's interval is the check's
    check = document["comparison"]["matched"]["m"]
    assert measured["speed_factor_ci"] == check["measured_speed_factor_ci"]
    assert measured["ratio_ci"] == gap["ratio_ci"]


def test_the_verdict_is_shown_everywhere_and_kept_in_the_ledger(capsys, tmp_path):
    args = [*OURS, *BASE, "--vs", f"m={MATCHED / 'fails.json'}"]
    document = _run(capsys, *args[2:])
    gap = document["comparison"]["gaps"]["vllm"]
    msf, maf = gap["measured"]["speed_factor"], gap["measured"]["acceptance_factor"]
    factors = f"= speed {msf:.3f} x acceptance {maf:.3f} (measured with m)"
    assert main(args) == 0
    screen = " ".join(capsys.readouterr().out.split())
    assert factors in screen
    assert " ".join(gap["verdict"].split()) in screen
    assert "modelled: acceptance" in screen and "the model does not hold for this pair" in screen
    md, page = tmp_path / "r.md", tmp_path / "r.html"
    assert main([*args, "--markdown", str(md), "--html", str(page)]) == 0
    text = md.read_text()
    assert f"- **vs vllm**: {gap['verdict']}" in text and factors in text
    answer = page.read_text().split('<section id="answer">')[1].split("</section>")[0]
    assert factors in answer and "measured with m:" in answer
    rows = [row for row in figure_rows(document) if row.figure == "measured_speed_factor"]
    assert {row.versus: row.value for row in rows} == {
        "vllm": pytest.approx(msf),
        "m": pytest.approx(document["comparison"]["gaps"]["m"]["ratio"]),
    }
    assert (rows[0].ci_low, rows[0].ci_high) == tuple(gap["measured"]["speed_factor_ci"])


def test_a_run_that_did_not_match_says_so_under_the_gap_it_leaves_modelled(capsys):
    args = [*OURS, *BASE, "--vs", f"m={MATCHED / 'not-matched.json'}"]
    assert main(args) == 0
    screen = " ".join(capsys.readouterr().out.split())
    assert "split: modelled: the matched run m did not match" in screen
    assert "the model stands" in screen


# --- a recorded llama-server triple -------------------------------------------------------------

TRIPLE = ROOT / "fixtures" / "oracles" / "llamacpp-triple"


def test_a_recorded_llama_server_triple_is_split_by_measurement(capsys):
    """fixtures/oracles/llamacpp-triple (its README): ours with the noisy-copy drafter, the
    ordinary server with the unrelated drafter, and that server at the rates --matched llamacpp
    printed for ours. The factors are held to the runs' own tok/s, read from their records."""
    from triple_figures import measured_factors

    ours = TRIPLE / "ours" / "our-arm.json"
    args = [str(ours), str(TRIPLE / "ours" / "steps.jsonl"),
            "--vs", f"base={TRIPLE / 'base' / 'llamacpp-arm.json'}",
            "--vs", f"m:matched@base={TRIPLE / 'matched' / 'llamacpp-arm.json'}"]  # fmt: skip
    assert main([*args, "--json", "-"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    validate(document)
    assert document["comparison"]["matched"]["m"]["acceptance"]["matched"] is True
    gap = document["comparison"]["gaps"]["base"]
    measured = gap["measured"]
    expected = measured_factors(ours, TRIPLE / "base", TRIPLE / "matched")
    assert gap["split"] == "measured"
    assert gap["split_reason"] == "matched_run_on_the_command_line"
    assert gap["ratio"] == pytest.approx(expected["ratio"], rel=1e-12)
    assert measured["speed_factor"] == pytest.approx(expected["speed"], rel=1e-12)
    assert measured["acceptance_factor"] == pytest.approx(expected["acceptance"], rel=1e-12)
    assert measured["population"] == "warm_legs"
    # the server arms' tok/s is ours's kind: the median of their warm legs' tok_s
    sources = {row["name"]: row["sources"]["tok_s"] for row in document["comparison"]["rows"]}
    for name in ("base", "m"):
        assert sources[name] == (
            "output_throughput_tok_s (= median tok_s of the 12 warm legs of 16 (run > 1))"
        )
    assert measured["model_error"] == pytest.approx(expected["model_error"], rel=1e-9)
    share = math.log(expected["acceptance"]) / math.log(expected["ratio"])
    assert measured["acceptance_share"] == pytest.approx(share)
    assert gap["verdict"].startswith("measured with m:")
    assert f"the model's error {measured['model_error']:.3f}" in gap["verdict"]
    assert main(args) == 0
    screen = " ".join(capsys.readouterr().out.split())
    assert "(measured with m)" in screen and "command line's word" in screen


def test_an_arm_of_one_request_s_speed_is_named_another_kind_of_tok_s(capsys):
    """Folded from its /completion responses, the server arm's tok/s is one request's
    predicted_per_second: the comparison says r mixes two kinds. Folded from the gate's arm
    record its tok/s is the legs' median, ours's kind, and nothing is said."""
    ours = [str(TRIPLE / "ours" / "our-arm.json"), str(TRIPLE / "ours" / "steps.jsonl")]
    warm = TRIPLE / "base" / "completions-warm.jsonl"
    assert main([*ours, "--vs", f"c={warm}"]) == 0
    screen = " ".join(capsys.readouterr().out.split())
    assert "note (c): tok/s is one request's own generation speed" in screen
    assert "r and the speed factor against this arm compare the two kinds" in screen
    assert main([*ours, "--vs", f"c={warm}", "--json", "-"]) == 0
    verdict = orjson.loads(capsys.readouterr().out)["comparison"]["gaps"]["c"]["verdict"]
    assert verdict.endswith(
        "; r compares two kinds of tok/s: c's is one request's generation speed "
        "(predicted_per_second), ours a leg's completion tokens over its wall time"
    )
    assert main([*ours, "--vs", f"base={TRIPLE / 'base' / 'llamacpp-arm.json'}"]) == 0
    assert "kinds" not in capsys.readouterr().out


def _triple(capsys, *args: str) -> dict:
    assert main([*args, "--json", "-"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    validate(document)
    return document


def _old_way(record: Path, out: Path) -> Path:
    """The arm record as the llama.cpp gate wrote it before it kept its legs: engine, the warm
    scrape pair and, as tok/s, the median predicted_per_second of the warm responses."""
    old = json.loads(record.read_text())
    kept = {
        "engine": old["engine"],
        "output_throughput_tok_s": old["median_request_predicted_per_second"],
        "metrics": old["metrics"],
    }
    out.write_text(json.dumps(kept))
    return out


def test_a_llamacpp_arm_record_without_legs_is_one_request_s_speed(tmp_path, capsys):
    """A record without legs cannot show its tok/s is a leg's; from llama.cpp's gate it was the
    median predicted_per_second, so every verdict against it says r mixes two kinds."""
    ours = [str(TRIPLE / "ours" / "our-arm.json"), str(TRIPLE / "ours" / "steps.jsonl")]
    base = _old_way(TRIPLE / "base" / "llamacpp-arm.json", tmp_path / "base.json")
    document = _triple(capsys, *ours, "--vs", f"b={base}")
    rows = {row["name"]: row for row in document["comparison"]["rows"]}
    # the record's own figure, untouched: the kind is said, the number is the record's
    assert rows["b"]["output_throughput_tok_s"] == pytest.approx(193.85780320952625, rel=1e-12)
    assert any("tok/s is taken as one request's generation speed" in n for n in rows["b"]["notes"])
    verdict = document["comparison"]["gaps"]["b"]["verdict"]
    assert verdict.endswith(
        "; r compares two kinds of tok/s: b's is one request's generation speed (an arm record "
        "without legs, as the llama.cpp gate wrote the median predicted_per_second before it "
        "kept its legs), ours a leg's completion tokens over its wall time"
    )


def test_a_triple_recorded_without_legs_keeps_the_model_and_says_why(tmp_path, capsys):
    """Both server arms as the llama.cpp gate wrote them before it kept its legs: their tok/s
    is one request's speed, so no factor is measured from them, on every screen and in the
    ledger's figures."""
    ours = [str(TRIPLE / "ours" / "our-arm.json"), str(TRIPLE / "ours" / "steps.jsonl")]
    base = _old_way(TRIPLE / "base" / "llamacpp-arm.json", tmp_path / "base.json")
    matched = _old_way(TRIPLE / "matched" / "llamacpp-arm.json", tmp_path / "m.json")
    args = [*ours, "--vs", f"base={base}", "--vs", f"m:matched@base={matched}"]
    document = _triple(capsys, *args)
    for name in ("base", "m"):
        gap = document["comparison"]["gaps"][name]
        assert (gap["split"], gap["split_reason"], gap["measured"]) == (
            "modelled",
            "other_tok_s",
            None,
        )
        assert _TWO_KINDS in gap["verdict"] or name == "base"
        assert "so no factor is measured from them" in gap["split_text"]
    # base's gap divides by both arms' tok/s, m's own by m's alone
    texts = {name: gap["split_text"] for name, gap in document["comparison"]["gaps"].items()}
    assert "(m's and base's are one request's generation speed" in texts["base"]
    assert "(m's is one request's generation speed" in texts["m"]
    assert "measured_speed_factor" not in {row.figure for row in figure_rows(document)}
    assert main(args) == 0
    screen = " ".join(capsys.readouterr().out.split())
    assert "measured with m" not in screen
    assert "the tok/s are of two kinds" in screen


def test_a_matched_triple_is_kept_and_its_measured_speed_factor_has_a_history(tmp_path, capsys):
    """--ledger with a matched arm's spec (NAME:matched@BASE=PATH) keeps the run, its input
    files named; the measured speed factor's history reads back the figure each run measured,
    held to the records' own tok/s."""
    from triple_figures import measured_factors

    ledger = tmp_path / "runs.duckdb"
    ours = TRIPLE / "ours" / "our-arm.json"
    args = [str(ours), str(TRIPLE / "ours" / "steps.jsonl"),
            "--vs", f"base={TRIPLE / 'base' / 'llamacpp-arm.json'}",
            "--vs", f"m:matched@base={TRIPLE / 'matched' / 'llamacpp-arm.json'}",
            "--ledger", str(ledger)]  # fmt: skip
    for seed in (1, 2):
        assert main([*args, "--seed", str(seed)]) == 0
    capsys.readouterr()
    assert (
        main(["ledger", str(ledger), "--figure", "measured_speed_factor:base", "--json", "-"]) == 0
    )
    history = orjson.loads(capsys.readouterr().out)
    (group,) = history["groups"]
    expected = measured_factors(ours, TRIPLE / "base", TRIPLE / "matched")["speed"]
    assert [entry["value"] for entry in group["runs"]] == [
        pytest.approx(expected, rel=1e-12),
        pytest.approx(expected, rel=1e-12),
    ]
    assert main(["ledger", str(ledger), "--figure", "measured_speed_factor:base"]) == 0
    assert f"{expected:.3f}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        main(["ledger", "--help"])
    assert done.value.code == 0
    assert "measured_speed_factor:ARM" in " ".join(capsys.readouterr().out.split())


def test_where_the_gap_is_split_by_measurement_the_models_figures_are_named_modelled(
    tmp_path, capsys
):
    """The ratio row and the speed split under a measured gap hold the model's speed factor
    ((T_o / L_o) / (T_b / L_b)): terminal, markdown and page name it modelled; without a
    matched run nothing is."""
    from triple_figures import legs_tok_s, our_length, server_length

    ours = [str(TRIPLE / "ours" / "our-arm.json"), str(TRIPLE / "ours" / "steps.jsonl")]
    base = TRIPLE / "base" / "llamacpp-arm.json"
    modelled = (
        legs_tok_s(TRIPLE / "ours" / "our-arm.json") / our_length(TRIPLE / "ours" / "our-arm.json")
    ) / (legs_tok_s(base) / server_length(base))
    matched = ["--vs", f"m:matched@base={TRIPLE / 'matched' / 'llamacpp-arm.json'}"]
    args = [*ours, "--vs", f"base={base}", *matched]
    md, page = tmp_path / "r.md", tmp_path / "r.html"
    assert main([*args, "--details", "--markdown", str(md), "--html", str(page)]) == 0
    screen = capsys.readouterr().out
    # at 80 columns the mark may fold under the label
    assert re.search(r"^ours/base (\(modelled\)|[^\n]*\n\(modelled\))", screen, re.M)
    assert "modelled speed factor vs base" in screen
    assert "(modelled): the model's factors" in " ".join(screen.split())
    assert f"- modelled speed factor {modelled:.3f} over leg windows" in md.read_text()
    answer = page.read_text().split('<section id="answer">')[1].split("</section>")[0]
    assert "<td>ours/base (modelled)</td>" in answer and f"{modelled:.3f}" in answer
    assert main([*ours, "--vs", f"base={base}", "--details"]) == 0
    plain = capsys.readouterr().out
    assert "(modelled)" not in plain and "modelled speed factor" not in plain
