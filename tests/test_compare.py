"""Our fold beside the oracles, through the command: the gate's worked example by hand."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest

from fold.api import fold_acceptance
from fold.cli import main
from fold.compare.comparison import our_figures
from fold.inputs.oracles import load_oracle

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OURS = [
    str(FIXTURES / "gate-example" / "our-arm.json"),
    str(FIXTURES / "gate-example" / "steps.jsonl"),
]
VS = ["--vs", f"vllm={FIXTURES / 'oracles' / 'vllm-arm.json'}",
      "--vs", f"sglang={FIXTURES / 'oracles' / 'sglang-legs.jsonl'}"]  # fmt: skip


def test_gate_example_comparison_block(capsys):
    assert main([*OURS, *VS, "--json", "-"]) == 0
    block = orjson.loads(capsys.readouterr().out)["comparison"]
    rows = {row["name"]: row for row in block["rows"]}
    assert [row["name"] for row in block["rows"]] == ["ours", "vllm", "sglang"]
    # vLLM: A = 1000, P = 2170, S = 310 -> 46.08% and 4.2258.
    assert rows["vllm"]["accept_rate"] == pytest.approx(1000 / 2170)
    assert rows["vllm"]["mean_acceptance_length"] == pytest.approx(1 + 1000 / 310)
    # Our warm legs were built with the same counts, at 14.951 tok/s.
    assert (rows["ours"]["steps"], rows["ours"]["proposed"], rows["ours"]["accepted"]) == (
        310,
        2170,
        1000,
    )
    assert rows["ours"]["output_throughput_tok_s"] == pytest.approx(14.951)
    # SGLang's bare accept lengths stay in their own unit: mean of 4.66, 4.67, 4.68 (warm).
    assert rows["sglang"]["mean_acceptance_length"] is None
    assert rows["sglang"]["completion_tokens_per_step"] == pytest.approx(4.67)
    vllm = block["gaps"]["vllm"]
    assert vllm["ratio"] == pytest.approx(14.951 / 16.111)
    assert vllm["acceptance_factor"] == pytest.approx(1.0)
    assert vllm["speed_factor"] * vllm["acceptance_factor"] == pytest.approx(vllm["ratio"])
    assert "execution speed" in vllm["verdict"]
    sglang = block["gaps"]["sglang"]
    assert sglang["ratio"] == pytest.approx(14.951 / 16.034)
    # SGLang is known only in its own unit, so the split is in that unit: our completion
    # tokens per step over the warm legs are (6 prefill tokens + 310 steps + 1000 accepted) /
    # 310 = 1316/310 = 4.2452, against SGLang's 4.67.
    assert sglang["unit"] == "completion_tokens_per_step"
    assert sglang["unit_text"] == "completion tokens per verify step (SGLang's unit)"
    assert sglang["acceptance_factor"] == pytest.approx((1316 / 310) / 4.67)
    assert sglang["speed_factor"] == pytest.approx((14.951 / 16.034) / ((1316 / 310) / 4.67))
    assert rows["ours"]["completion_tokens_per_step"] == pytest.approx(1316 / 310)
    assert block["gaps"]["vllm"]["populations"] == {
        "ours": "warm_legs",
        "oracle": "since_start",
        "oracle_detail": "cumulative since the engine started (no legs to say more)",
        "same": False,
    }
    check = block["step_rate_check"]
    # Measured: 310 warm steps over the warm windows; derived: 14.951 / 4.2258.
    assert check["expected_steps_per_s"] == pytest.approx(14.951 / (1 + 1000 / 310))
    assert check["flagged"] is False


def test_gate_example_table_reads_46_1_and_4_23(capsys):
    assert main([*OURS, *VS, "--details"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Throughput and acceptance in one unit") :]
    vllm_row = next(line for line in table.splitlines() if line.strip().startswith("vllm"))
    assert "46.1%" in vllm_row and "4.23" in vllm_row
    assert "not recorded" in out


def test_per_position_counts_of_our_row_come_from_the_histogram():
    result = fold_acceptance(OURS[0], [OURS[1]])
    ours = our_figures(result.fold)
    histogram = result.warm["histogram"]
    for position, count in enumerate(ours.per_position):
        assert count == sum(histogram[position + 1 :])
    assert sum(ours.per_position) == ours.accepted
    assert math.isclose(ours.mean_acceptance_length, result.warm["mean_acceptance_length"])


def test_oracle_names_must_be_distinct(capsys):
    vllm = f"vllm={FIXTURES / 'oracles' / 'vllm-arm.json'}"
    assert main([*OURS, "--vs", vllm, "--vs", vllm]) == 2
    assert "taken" in capsys.readouterr().err
    assert main([*OURS, "--vs", f"ours={FIXTURES / 'oracles' / 'vllm-arm.json'}"]) == 2


# --------------------------------------------------------------------------------------------
# Populations: ours folded over what the oracle's counters cover
# --------------------------------------------------------------------------------------------

# The worked example's legs (examples/make_gate_example.py): (run, S, A), k = 7 drafts a step.
EXAMPLE_LEGS = [(1, 40, 120), (2, 52, 168), (3, 52, 168), (1, 41, 125), (2, 52, 168),
                (3, 51, 165), (1, 39, 118), (2, 52, 166), (3, 51, 165)]  # fmt: skip
ALL_S = sum(s for _, s, _ in EXAMPLE_LEGS)  # 430
ALL_A = sum(a for _, _, a in EXAMPLE_LEGS)  # 1363
WARM_S = sum(s for run, s, _ in EXAMPLE_LEGS if run > 1)  # 310
WARM_A = sum(a for run, _, a in EXAMPLE_LEGS if run > 1)  # 1000


def _block(capsys, *vs: str) -> dict:
    args = [item for spec in vs for item in ("--vs", spec)]
    assert main([*OURS, *args, "--json", "-"]) == 0
    return orjson.loads(capsys.readouterr().out)["comparison"]


def test_gate_style_vllm_arm_is_compared_over_all_legs(capsys):
    assert (ALL_S, ALL_A, WARM_S, WARM_A) == (430, 1363, 310, 1000)
    block = _block(capsys, f"vllm={FIXTURES / 'oracles' / 'vllm-gate-arm.json'}")
    rows = {row["name"]: row for row in block["rows"]}
    assert list(rows) == ["ours", "ours (all legs)", "vllm"]
    mine = rows["ours (all legs)"]
    assert (mine["steps"], mine["proposed"], mine["accepted"]) == (430, 7 * 430, 1363)
    assert mine["population"] == "all_legs" and rows["vllm"]["population"] == "all_legs"
    # tok/s stays the warm throughput fold on both sides
    assert mine["output_throughput_tok_s"] == pytest.approx(14.951)
    gap = block["gaps"]["vllm"]
    assert gap["ours"] == "ours (all legs)"
    assert gap["populations"]["same"] is True
    # both 1 + 1363/430: the whole gap 14.951/16.111 is speed
    assert gap["acceptance_factor"] == pytest.approx(1.0, rel=1e-12)
    assert gap["ratio"] == pytest.approx(14.951 / 16.111)
    assert "execution speed" in gap["verdict"]
    # had ours been folded over the warm legs only, it would have read 1 + 1000/310 = 4.2258
    # against 4.1698, 1.3% apart: the population matters
    assert rows["ours"]["mean_acceptance_length"] == pytest.approx(1 + 1000 / 310)


def test_bench_result_is_compared_with_our_warm_legs_and_says_populations_differ(capsys):
    block = _block(capsys, f"bench={FIXTURES / 'oracles' / 'vllm-bench-serve.json'}")
    assert [row["name"] for row in block["rows"]] == ["ours", "bench"]
    gap = block["gaps"]["bench"]
    assert gap["populations"] == {
        "ours": "warm_legs",
        "oracle": "between_scrapes",
        "oracle_detail": (
            "the run of vllm bench serve (the difference of two scrapes around each run)"
        ),
        "same": False,
    }
    assert gap["acceptance_factor"] == pytest.approx(1.0, rel=1e-12)  # 1 + 1000/310 both
    assert main([*OURS, "--vs", f"bench={FIXTURES / 'oracles' / 'vllm-bench-serve.json'}"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "populations differ: ours counts the warm legs, bench the interval between two scrapes"
        in out
    )


def test_sglang_bench_line_splits_in_vllm_units(capsys):
    block = _block(capsys, f"sg={FIXTURES / 'oracles' / 'sglang-bench-serving.jsonl'}")
    gap = block["gaps"]["sg"]
    assert gap["unit"] == "mean_acceptance_length"
    assert gap["unit_text"] == "1 + A/S"
    # (1 + 1000/310) / 4.23 and (14.951 / 16.134) over it
    assert gap["acceptance_factor"] == pytest.approx((1 + 1000 / 310) / 4.23)
    assert gap["speed_factor"] == pytest.approx((14.951 / 16.134) / ((1 + 1000 / 310) / 4.23))


def test_llamacpp_responses_without_steps_state_the_gap_unsplit(capsys):
    block = _block(capsys, f"llama={FIXTURES / 'oracles' / 'llamacpp-completions.json'}")
    gap = block["gaps"]["llama"]
    assert gap["ratio"] == pytest.approx(14.951 / 64.0)
    assert gap["acceptance_factor"] is None and "cannot be split" in gap["verdict"]
    row = block["rows"][1]
    assert row["accept_rate"] == pytest.approx(941 / 1344)


# --------------------------------------------------------------------------------------------
# Tables never cut a figure
# --------------------------------------------------------------------------------------------


def _printed(renderable: object, width: int) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, color_system=None)
    with console.capture() as capture:
        console.print(renderable)
    return capture.get()


def _figures(row) -> list[str]:
    """The figures of a row as the table writes them (three decimals, two, one percent)."""
    shown = []
    if row.output_throughput_tok_s is not None:
        shown.append(f"{row.output_throughput_tok_s:.3f}")
    if row.mean_acceptance_length is not None:
        shown.append(f"{row.mean_acceptance_length:.2f}")
    if row.accept_rate is not None:
        shown.append(f"{100 * row.accept_rate:.1f}%")
    if row.verify_steps_per_s is not None:
        shown.append(f"{row.verify_steps_per_s:.3f}")
    return shown


@pytest.mark.parametrize("width", [80, 60, 40])
def test_comparison_table_prints_every_figure_whole(width):
    from fold.compare.gap import comparison_block
    from fold.inputs.oracles import arm_from_counts
    from fold.present.comparison import comparison_table

    result = fold_acceptance(OURS[0], [OURS[1]])
    rows = [
        our_figures(result.fold),
        arm_from_counts(
            "a-long-oracle-name", "vllm", tok_s=123456.789, steps=310, proposed=2170, accepted=1000
        ),
        load_oracle("llama", FIXTURES / "oracles" / "llamacpp-metrics-pair.prom"),
    ]
    document = {"comparison": orjson.loads(orjson.dumps(comparison_block(rows, {})))}
    text = _printed(comparison_table(document), width)
    assert all(len(line) <= width for line in text.splitlines())
    for row in rows:
        for figure in _figures(row):
            assert figure in text, (figure, text)
    assert "123456.789" in text


def test_legs_table_gives_way_before_cutting_large_counts():
    from rich.table import Table

    from fold.present.table_layout import fit

    table = Table()
    for header in ("leg", "S", "P", "A", "shape"):
        table.add_column(header, no_wrap=True)
    table.add_row("0", "12345678", "86419746", "41234567", "▁▂▃▄▅▆▇█▇▆")
    text = _printed(fit(table, give_way=("shape",)), 40)
    for figure in ("12345678", "86419746", "41234567"):
        assert figure in text
    assert "shape not shown" in text
    narrow = _printed(fit(table, give_way=("shape",)), 20)  # too narrow: one line per figure
    assert all(len(line) <= 20 for line in narrow.splitlines())
    for figure in ("12345678", "86419746", "41234567"):
        assert figure in narrow


@pytest.mark.parametrize(
    "fixture", sorted(p.name for p in (FIXTURES / "oracles").iterdir() if p.is_file())
)
def test_every_oracle_fixture_compares_through_the_command_within_80_columns(fixture, capsys):
    assert main([*OURS, "--vs", f"x={FIXTURES / 'oracles' / fixture}"]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines())
    assert "Throughput and acceptance in one unit" in out


def test_an_oracle_refusal_exits_1_naming_the_file(tmp_path, capsys):
    record = orjson.loads((FIXTURES / "oracles" / "vllm-gate-arm.json").read_bytes())
    record["metrics"]["vllm:spec_decode_num_accepted_tokens"] = 3011  # above P = 3010
    path = tmp_path / "vllm-arm.json"
    path.write_bytes(orjson.dumps(record))
    assert main([*OURS, "--vs", f"vllm={path}"]) == 1
    err = capsys.readouterr().err
    assert "refused" in err and str(path) in err and "3011" in err
