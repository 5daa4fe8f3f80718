"""Gap attribution, the step-rate check and the rendered comparison.

Expected factors are worked out by hand in the comments.
"""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from fold.compare.gap import (
    ACCEPTANCE,
    NO_GAP,
    NO_SHARE_BELOW,
    SPEED,
    attribute_gap,
    check_step_rate,
    comparison_block,
)
from fold.errors import InputError
from fold.inputs.oracles import ArmFigures, arm_from_counts, load_oracle
from fold.present.comparison import comparison, comparison_table, verdict_lines

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "oracles"
OURS_TOK_S = 14.951


@pytest.fixture
def vllm() -> ArmFigures:
    return load_oracle("vllm", FIXTURES / "vllm-arm.json")


@pytest.fixture
def sglang() -> ArmFigures:
    return load_oracle("sglang", FIXTURES / "sglang-legs.jsonl")


def ours_with(accepted: int, tok_s: float = OURS_TOK_S, steps: int = 310) -> ArmFigures:
    return arm_from_counts(
        "ours", "ours", tok_s=tok_s, steps=steps, proposed=steps * 7, accepted=accepted
    )


def test_same_acceptance_as_vllm_means_the_gap_is_speed(vllm: ArmFigures) -> None:
    gap = attribute_gap(ours_with(1000), vllm)
    # r = 14.951 / 16.111 = 0.92800; acceptance identical, so speed = r
    assert gap.ratio == pytest.approx(0.928000, abs=1e-6)
    assert gap.acceptance_factor == pytest.approx(1.0)
    assert gap.speed_factor == pytest.approx(0.928000, abs=1e-6)
    assert gap.acceptance_share == pytest.approx(0.0, abs=1e-12)
    assert gap.speed_share == pytest.approx(1.0)
    assert gap.dominant == SPEED
    assert gap.verdict == (
        "acceptance within 0.0% of vllm (tolerance 2%): the gap is execution speed"
    )


def test_speed_within_tolerance_means_the_gap_is_acceptance(vllm: ArmFigures) -> None:
    gap = attribute_gap(ours_with(930), vllm)
    # ours 1 + 930/310 = 4.0; af = 4 / (1310/310) = 1240/1310 = 0.946565
    assert gap.acceptance_factor == pytest.approx(0.946565, abs=1e-6)
    # sf = r / af = (14.951 * 1310) / (16.111 * 1240) = 19585.81 / 19977.64 = 0.980387
    assert gap.speed_factor == pytest.approx(0.980387, abs=1e-6)
    assert gap.dominant == ACCEPTANCE
    assert gap.verdict.startswith("verify-step speed within 2.0% of vllm")
    assert gap.verdict.endswith("the gap is acceptance")
    # with a 1% tolerance neither factor is within it; acceptance has the larger log
    tight = attribute_gap(ours_with(930), vllm, tolerance=0.01)
    assert tight.dominant == ACCEPTANCE
    assert "mostly acceptance (tolerance 1%)" in tight.verdict
    # log(0.946565) / log(0.928000) = -0.054915 / -0.074724 = 0.7349
    assert tight.acceptance_share == pytest.approx(0.7349, abs=1e-4)


def test_dominant_speed_when_neither_is_within_tolerance(vllm: ArmFigures) -> None:
    gap = attribute_gap(ours_with(900, tok_s=12.0), vllm)
    # af = (1 + 900/310) / (1 + 1000/310) = 1210/1310 = 0.923664
    # r = 12/16.111 = 0.744833; sf = r/af = 12 * 1310 / (16.111 * 1210) = 15720 / 19494.31
    assert gap.acceptance_factor == pytest.approx(0.923664, abs=1e-6)
    assert gap.speed_factor == pytest.approx(0.806389, abs=1e-6)
    # log shares: -0.079407 / -0.294595 = 0.2695 and -0.215188 / -0.294595 = 0.7305
    assert gap.acceptance_share == pytest.approx(0.2695, abs=1e-4)
    assert gap.speed_share == pytest.approx(0.7305, abs=1e-4)
    assert gap.dominant == SPEED
    assert "verify steps 19.4% slower explains 73%" in gap.verdict
    assert "acceptance length 7.6% shorter explains 27%" in gap.verdict


def test_offsetting_factor_is_called_an_offset(vllm: ArmFigures) -> None:
    gap = attribute_gap(ours_with(700), vllm)
    # af = 1010/1310 = 0.770992; sf = 0.928000 / 0.770992 = 1.203645 (our steps are faster)
    assert gap.speed_factor == pytest.approx(1.203645, abs=1e-5)
    assert gap.dominant == ACCEPTANCE
    assert gap.speed_share is not None and gap.speed_share < 0
    assert "verify steps 20.4% faster offsets" in gap.verdict


def test_no_gap_beyond_tolerance(vllm: ArmFigures) -> None:
    gap = attribute_gap(ours_with(1000, tok_s=16.2), vllm)
    # r = 16.2 / 16.111 = 1.005524
    assert gap.dominant == NO_GAP
    assert gap.verdict.startswith("throughput within 0.6% of vllm (tolerance 2%)")
    assert "no gap beyond tolerance" in gap.verdict


def test_equal_throughput_has_no_shares(vllm: ArmFigures) -> None:
    gap = attribute_gap(ours_with(930, tok_s=16.111), vllm)
    assert gap.ratio == 1.0
    assert gap.acceptance_share is None and gap.speed_share is None
    assert gap.acceptance_factor is not None and gap.speed_factor is not None
    assert gap.acceptance_factor * gap.speed_factor == pytest.approx(1.0)


def test_oracle_without_acceptance_has_factors_not_recorded(sglang: ArmFigures) -> None:
    gap = attribute_gap(ours_with(1000), sglang)
    # r = 14.951 / 16.034 = 0.932456
    assert gap.ratio == pytest.approx(0.932456, abs=1e-6)
    assert gap.acceptance_factor is None and gap.speed_factor is None
    assert gap.acceptance_share is None and gap.dominant is None
    assert gap.verdict_kind == "cannot_split"
    assert "ours is 6.8% slower than sglang" in gap.verdict
    assert "only SGLang's own unit is known" in gap.verdict
    assert "cannot be split" in gap.verdict


def test_missing_throughput_gives_no_ratio() -> None:
    scrape_only = load_oracle("vprom", FIXTURES / "vllm-scrapes.prom")
    gap = attribute_gap(ours_with(1000), scrape_only)
    assert gap.ratio is None and gap.acceptance_factor is None
    assert "tok/s not recorded for vprom" in gap.verdict
    doc = gap.to_json()
    assert doc["ratio"] is None and doc["dominant"] is None
    assert doc["verdict_kind"] == "cannot_measure"


@pytest.mark.parametrize("tolerance", [-0.01, 1.0, math.nan, math.inf])
def test_bad_tolerance_is_an_input_error(vllm: ArmFigures, tolerance: float) -> None:
    with pytest.raises(InputError, match="--tolerance"):
        attribute_gap(ours_with(1000), vllm, tolerance=tolerance)


positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(
    ours_tok_s=positive,
    oracle_tok_s=positive,
    ours_steps=st.integers(min_value=1, max_value=10**7),
    oracle_steps=st.integers(min_value=1, max_value=10**7),
    ours_per_step=st.integers(min_value=0, max_value=16),
    oracle_per_step=st.integers(min_value=0, max_value=16),
    tolerance=st.floats(min_value=0, max_value=0.5),
)
def test_factors_multiply_back_to_the_ratio(
    ours_tok_s: float,
    oracle_tok_s: float,
    ours_steps: int,
    oracle_steps: int,
    ours_per_step: int,
    oracle_per_step: int,
    tolerance: float,
) -> None:
    ours = arm_from_counts(
        "ours",
        "ours",
        tok_s=ours_tok_s,
        steps=ours_steps,
        proposed=ours_steps * 16,
        accepted=ours_steps * ours_per_step // 2,
    )
    oracle = arm_from_counts(
        "o",
        "vllm",
        tok_s=oracle_tok_s,
        steps=oracle_steps,
        proposed=oracle_steps * 16,
        accepted=oracle_steps * oracle_per_step // 2,
    )
    gap = attribute_gap(ours, oracle, tolerance)
    assert gap.ratio is not None and gap.acceptance_factor is not None
    assert gap.speed_factor is not None
    assert gap.acceptance_factor * gap.speed_factor == pytest.approx(gap.ratio, rel=1e-12)
    # the speed factor is the verify-step rate ratio
    assert ours.verify_steps_per_s is not None and oracle.verify_steps_per_s is not None
    assert gap.speed_factor == pytest.approx(
        ours.verify_steps_per_s / oracle.verify_steps_per_s, rel=1e-9
    )
    if abs(math.log(gap.ratio)) > NO_SHARE_BELOW:
        assert gap.acceptance_share is not None and gap.speed_share is not None
        assert gap.acceptance_share + gap.speed_share == pytest.approx(1.0, rel=1e-6, abs=1e-6)
    assert gap.dominant in (ACCEPTANCE, SPEED, NO_GAP)
    orjson.dumps(gap.to_json())  # finite, serialisable


def test_a_ratio_within_float_noise_of_one_is_no_gap_even_at_zero_tolerance() -> None:
    # Found by the property above: r = 0.001 / 0.0010000000000000002 is 1 - 2e-16, whose log is
    # too small to divide by, while af = 1/2 and sf = 2 are far from 1.
    ours = arm_from_counts("ours", "ours", tok_s=0.001, steps=1, proposed=16, accepted=0)
    oracle = arm_from_counts(
        "o", "vllm", tok_s=0.0010000000000000002, steps=1, proposed=16, accepted=1
    )
    gap = attribute_gap(ours, oracle, 0.0)
    assert gap.dominant == NO_GAP
    assert gap.acceptance_factor == pytest.approx(0.5)
    assert (gap.acceptance_share, gap.speed_share) == (None, None)


def test_check_step_rate() -> None:
    # expected = 14.951 / 4.0 = 3.73775; 3.2 / 3.73775 - 1 = -0.143870
    expected, diff, flagged = check_step_rate(3.2, 14.951, 4.0)
    assert expected == pytest.approx(3.73775)
    assert diff == pytest.approx(-0.143870, abs=1e-6)
    assert flagged is True
    # 3.75 / 3.73775 - 1 = +0.33%: within 2%
    assert check_step_rate(3.75, 14.951, 4.0).flagged is False
    assert check_step_rate(3.75, 14.951, 4.0, tolerance=0.001).flagged is True
    assert check_step_rate(None, 14.951, 4.0) == (None, None, None)
    assert check_step_rate(3.2, 14.951, None) == (None, None, None)
    with pytest.raises(InputError):
        check_step_rate(-1.0, 14.951, 4.0)


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _render(renderable: object, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None)
    with console.capture() as capture:
        console.print(renderable)
    return capture.get()


def _document(rows, gaps, check=None, measured=None) -> dict:
    """The JSON document's part the comparison presenters read."""
    return {"comparison": orjson.loads(orjson.dumps(comparison_block(rows, gaps, check, measured)))}


def test_rendered_table_reads_the_gate_example(vllm: ArmFigures, sglang: ArmFigures) -> None:
    ours = ours_with(930)
    gaps = {o.name: attribute_gap(ours, o) for o in (vllm, sglang)}
    text = _render(comparison_table(_document([ours, vllm, sglang], gaps)))
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    vllm_line = next(line for line in lines if line.lstrip().startswith("vllm"))
    assert "16.111" in vllm_line and "4.23" in vllm_line and "46.1%" in vllm_line
    assert "3.813" in vllm_line  # 16.111 * 310 / 1310
    sglang_line = next(line for line in lines if line.lstrip().startswith("sglang"))
    assert "4.67" in sglang_line and "16.034" in sglang_line
    assert "not" in sglang_line  # mean len and rate "not recorded" (may wrap)
    assert " 0.00" not in text and "0.0%" not in text  # missing is never shown as zero
    assert "SGLang's own unit" in text.replace("\n", " ")
    ratio_line = next(line for line in lines if line.lstrip().startswith("ours/vllm"))
    # r = 0.928, af = 0.947, sf = 0.980
    assert "0.928" in ratio_line and "0.947" in ratio_line and "0.980" in ratio_line


def test_full_comparison_and_verdict_lines(vllm: ArmFigures, sglang: ArmFigures) -> None:
    ours = ours_with(1000)
    gaps = {o.name: attribute_gap(ours, o) for o in (vllm, sglang)}
    check = check_step_rate(3.2, OURS_TOK_S, ours.mean_acceptance_length)
    document = _document([ours, vllm, sglang], gaps, check, 3.2)
    lines = [line.plain for line in verdict_lines(document)]
    joined = "\n".join(lines)
    assert "the gap is execution speed" in joined
    assert "share of the log-gap: acceptance 0%, speed 100%" in joined
    assert "cannot be split" in joined
    assert "disagree beyond 2%" in joined and "prefill or stalls" in joined
    text = _render(comparison(document, details=True))
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "vllm:spec_decode_num_accepted_tokens_total" in text  # the sources table
    assert "plain mean" in text


def test_comparison_block_is_plain_json(vllm: ArmFigures, sglang: ArmFigures) -> None:
    ours = ours_with(930)
    gaps = {o.name: attribute_gap(ours, o) for o in (vllm, sglang)}
    check = check_step_rate(3.2, OURS_TOK_S, ours.mean_acceptance_length)
    block = comparison_block([ours, vllm, sglang], gaps, check, measured_steps_per_s=3.2)
    encoded = orjson.dumps(block)
    assert b"NaN" not in encoded
    decoded = orjson.loads(encoded)
    assert [row["name"] for row in decoded["rows"]] == ["ours", "vllm", "sglang"]
    assert decoded["gaps"]["sglang"]["acceptance_factor"] is None
    assert decoded["gaps"]["vllm"]["acceptance_factor"] == pytest.approx(0.946565, abs=1e-6)
    assert decoded["step_rate_check"]["flagged"] is True
