"""An oracle's own drafting time, where its output reports one: llama.cpp's speculative-simple
prints its drafters' statistics (``dur(b,g,a)``, at ``-lv 4``). Expectations are the printed
numbers, added by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fold.errors import InputError
from fold.inputs.oracles import load_oracle
from fold.present.step_split import step_split_lines

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "oracles"
LV4 = FIXTURES / "llamacpp-speculative-simple-lv4.txt"
STATS = (
    "0.00.092.834 I spec common_specu: statistics     draft-simple: #calls(b,g,a) =    1 "
    "{calls}     30, #gen drafts =     30, #acc drafts =    26, #gen tokens =    237, #acc "
    "tokens =   104, #mean acc len = 4.47, #acc rate/pos = (0.867, 0.633), dur(b,g,a) = 0.000, "
    "{ms}, 0.003 ms\n"
)


def test_the_drafters_generate_time_is_read_from_its_statistics_line():
    arm = load_oracle("llamacpp", LV4)
    # The real run's line: #calls(b,g,a) = 1 30 30, dur(b,g,a) = 0.000, 18.843, 0.003 ms.
    assert arm.draft_overhead["draft_calls"] == 30
    assert arm.draft_overhead["draft_s"] == pytest.approx(0.018843)
    assert arm.draft_overhead["draft_s_per_call"] == pytest.approx(0.018843 / 30)  # by hand
    assert "without the draft model's pass" in arm.draft_overhead["source"]
    row = arm.to_json()
    assert row["draft_overhead"]["draft_calls"] == 30
    # The counters are read as before.
    assert (arm.proposed, arm.accepted) == (237, 104)


def test_without_the_statistics_line_there_is_no_draft_overhead():
    arm = load_oracle("llamacpp", FIXTURES / "llamacpp-speculative-simple.txt")
    assert arm.draft_overhead is None and "draft_overhead" not in arm.to_json()


def test_several_runs_sum_their_lines(tmp_path):
    text = LV4.read_text()
    path = tmp_path / "two.txt"
    path.write_text(text + text.replace("18.843", "21.157").replace("   30     30", "   20     30"))
    arm = load_oracle("llamacpp", path)
    assert arm.draft_overhead["draft_calls"] == 50
    assert arm.draft_overhead["draft_s"] == pytest.approx(0.040)


def test_a_count_past_the_limit_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "big.txt"
    text = LV4.read_text().replace("   30     30,", f"   {2**63}     30,")
    path.write_text(text)
    with pytest.raises(InputError, match=rf"{path}:12: drafter statistics"):
        load_oracle("llamacpp", path)


@settings(max_examples=80, deadline=None)
@given(
    st.from_regex(r"\d{1,30}", fullmatch=True),
    st.from_regex(r"[-+]?(\d{1,400}\.?\d{0,5}|\.\d{1,5})([eE][-+]?\d{1,4})?", fullmatch=True),
)
def test_any_printed_numbers_read_or_are_refused(tmp_path_factory, calls, ms):
    path = tmp_path_factory.mktemp("stats") / "out.txt"
    text = LV4.read_text()
    cut = text.index("0.00.092.834")
    end = text.index("\n", cut) + 1
    path.write_text(text[:cut] + STATS.format(calls=calls, ms=ms) + text[end:])
    try:
        arm = load_oracle("llamacpp", path)
    except InputError as error:
        assert "drafter statistics" in str(error) or "dur g" in str(error)
        return
    if int(calls) == 0:
        assert arm.draft_overhead is None
    else:
        assert arm.draft_overhead["draft_calls"] == int(calls)
        assert arm.draft_overhead["draft_s"] == pytest.approx(float(ms) / 1e3)


def test_the_line_under_the_speed_split_puts_the_oracle_beside_ours():
    row = load_oracle("llamacpp", LV4).to_json()
    ours = {
        "step_s": 0.001,
        "draft_s": 0.0004,
        "verify_s": 0.0003,
        "rest_s": 0.0003,
        "draft_share": 0.4,
        "verify_share": 0.3,
        "rest_share": 0.3,
        "adds_up": True,
        "tolerance_s": 2e-6,
        "parts_by_share": ["draft", "verify", "rest"],
    }
    document = {"legs": [], "warm": {"step_split": ours}, "comparison": {"rows": [row]}}
    lines = step_split_lines(document, "llamacpp")
    assert lines[0] == "our warm step 1ms: drafting 40.0%, verifying 30.0%, rest 30.0%"
    # 18.843 ms over 30 calls: 0.628 ms a call.
    assert lines[1].startswith(
        "llamacpp reports drafting 628us per draft call (18.8ms over 30 calls; the generate time"
    )
    assert lines[1].endswith("; ours 400us a step")
    assert step_split_lines(document, "other") == lines[:1]


def lv4_with(tmp_path: Path, ms: str, calls: str = "30") -> tuple[Path, int]:
    """The -lv 4 output with its statistics line's generate figures replaced; the line's
    number (1-based)."""
    text = LV4.read_text()
    cut = text.index("0.00.092.834")
    end = text.index("\n", cut) + 1
    path = tmp_path / "out.txt"
    path.write_text(text[:cut] + STATS.format(calls=calls, ms=ms) + text[end:])
    return path, text[:cut].count("\n") + 1


@pytest.mark.parametrize(
    ("printed", "ms"),
    [("18.843e3", 18843.0), ("1.8843E+04", 18843.0), ("18843.", 18843.0), (".5", 0.5),
     ("+2.5", 2.5), ("18843", 18843.0)],
)  # fmt: skip
def test_every_number_form_printf_writes_is_read(tmp_path, printed, ms):
    path, _ = lv4_with(tmp_path, printed)
    arm = load_oracle("llamacpp", path)
    assert arm.draft_overhead is not None
    assert arm.draft_overhead["draft_s"] == pytest.approx(ms / 1e3)


@pytest.mark.parametrize("printed", ["inf", "-inf", "nan", "-nan", "-1.000", "1e999", "1,5", "x"])
def test_a_statistics_line_that_does_not_read_is_refused_by_file_and_line(tmp_path, printed):
    path, line = lv4_with(tmp_path, printed)
    with pytest.raises(InputError, match=rf"{path}:{line}: "):
        load_oracle("llamacpp", path)


def test_a_drafter_without_timings_adds_no_time(tmp_path):
    path = tmp_path / "out.txt"
    text = LV4.read_text()
    path.write_text(text.replace(", dur(b,g,a) = 0.000, 18.843, 0.003 ms", ""))
    assert load_oracle("llamacpp", path).draft_overhead is None
    path.write_text(text.replace("#calls(b,g,a) =    1 ", "#calls(b,g,a) = one "))
    with pytest.raises(InputError, match=rf"{path}:12: a drafter statistics line"):
        load_oracle("llamacpp", path)
