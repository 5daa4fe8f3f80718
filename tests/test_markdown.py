"""The --markdown record, parsed back: its tables hold the figures of the JSON from the same run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cadence_logs import stall_and_pace_run

from fold.cli import main
from fold.present.markdown_table import cell, table

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "fixtures" / "gate-example"
ORACLES = ROOT / "fixtures" / "oracles"


def split_row(line: str) -> list[str]:
    """A GFM table row's cells: split at pipes that are not escaped, then unescape."""
    inner = line.strip()[1:-1]
    cells = re.split(r"(?<!\\)\|", inner)
    return [value.strip().replace("\\|", "|").replace("\\\\", "\\") for value in cells]


def parse_tables(markdown: str) -> dict[str, list[dict[str, str]]]:
    """Each '## Section' table as a list of rows keyed by header."""
    tables: dict[str, list[dict[str, str]]] = {}
    section = None
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section = line[3:]
        elif line.startswith("|") and section is not None and section not in tables:
            headers = split_row(line)
            assert re.fullmatch(r"\|(-{3}:?\|)+", lines[index + 1]), lines[index + 1]
            rows = []
            index += 2
            while index < len(lines) and lines[index].startswith("|"):
                values = split_row(lines[index])
                assert len(values) == len(headers), lines[index]
                rows.append(dict(zip(headers, values, strict=True)))
                index += 1
            tables[section] = rows
            continue
        index += 1
    return tables


def percent_of(text: str) -> float:
    return float(text.rstrip("%")) / 100


def test_the_worked_example_record_matches_its_json(tmp_path: Path):
    out_md, out_json = tmp_path / "record.md", tmp_path / "fold.json"
    argv = [str(EXAMPLE / "our-arm.json"), str(EXAMPLE / "steps.jsonl"),
            "--vs", f"vllm={ORACLES / 'vllm-arm.json'}",
            "--vs", f"sglang={ORACLES / 'sglang-legs.jsonl'}",
            "--markdown", str(out_md), "--json", str(out_json)]  # fmt: skip
    assert main(argv) == 0
    markdown = out_md.read_text()
    document = json.loads(out_json.read_text())
    tables = parse_tables(markdown)
    comparison = tables["Comparison"]
    assert list(comparison[0]) == [
        "engine", "tokens per verify step", "accept rate", "steps/s", "tok/s", "source"
    ]  # fmt: skip
    rows = {row["engine"]: row for row in comparison}
    assert list(rows) == ["ours", "vllm", "sglang"]
    for figures in document["comparison"]["rows"]:
        row = rows[figures["name"]]
        for header, key, parse, places in (
            ("tokens per verify step", "mean_acceptance_length", float, 2),
            ("accept rate", "accept_rate", percent_of, 3),
            ("steps/s", "verify_steps_per_s", float, 3),
            ("tok/s", "output_throughput_tok_s", float, 3),
        ):
            if figures[key] is None:
                assert row[header] == "not recorded"
                continue
            shown, _, interval = row[header].partition(" ")
            assert parse(shown) == pytest.approx(figures[key], abs=0.6 * 10**-places)
            # The JSON's interval, as [low, high] in the same format, or none.
            if figures[f"{key}_ci"] is None:
                assert interval == ""
            else:
                low, high = (parse(end) for end in interval.strip("[]").split(", "))
                assert [low, high] == pytest.approx(figures[f"{key}_ci"], abs=0.6 * 10**-places)
    assert rows["vllm"]["source"].startswith("vllm; tok/s: ")
    for name, gap in document["comparison"]["gaps"].items():
        assert f"- **vs {name}**: {gap['verdict']}" in markdown
        # The split's intervals follow the verdict, each [low, high] as the JSON has it.
        lines = markdown.splitlines()
        line = lines[lines.index(f"- **vs {name}**: {gap['verdict']}") + 1]
        assert line.startswith("  - 95% intervals"), line
        for label, key in (("r", "ratio"), ("speed factor", "speed_factor")):
            if gap[f"{key}_ci"] is None:
                continue
            found = re.search(rf"{label} ([\d.]+) \[([\d.]+), ([\d.]+)\]", line)
            assert found is not None, line
            assert [float(value) for value in found.groups()] == pytest.approx(
                [gap[key], *gap[f"{key}_ci"]], abs=0.0006
            )
    warm = next(row for row in tables["Fold"] if row["fold"] == "warm")
    for header, key in (("S", "steps"), ("P", "proposed"), ("A", "accepted")):
        assert int(warm[header]) == document["warm"][key]
    shown, interval = warm["1+A/S"].split(" ", 1)
    assert float(shown) == pytest.approx(document["warm"]["mean_acceptance_length"], abs=0.006)
    ends = [float(end) for end in interval.strip("[]").split(", ")]
    assert ends == pytest.approx(document["warm"]["mean_acceptance_length_ci"], abs=0.006)
    legs = tables["Legs"]
    assert [int(row["leg"]) for row in legs] == [leg["index"] for leg in document["legs"]]
    for row, leg in zip(legs, document["legs"], strict=True):
        assert (int(row["S"]), int(row["P"]), int(row["A"])) == (
            leg["steps"], leg["proposed"], leg["accepted"]
        )  # fmt: skip
        assert row["warm"] == ("yes" if leg["warm"] else "no")
        assert row["shape"].startswith("`")
    cadence = tables["Cadence"]
    assert [row["leg"] for row in cadence] == [*(str(leg["index"]) for leg in document["legs"]),
                                               "warm"]  # fmt: skip
    pooled = document["warm"]["cadence"]
    shown, interval = cadence[-1]["decode steps/s"].split(" ", 1)
    assert float(shown) == pytest.approx(pooled["decode_steps_per_s"], rel=1e-3)
    ends = [float(end) for end in interval.strip("[]").split(", ")]
    assert ends == pytest.approx(pooled["decode_steps_per_s_ci"], rel=1e-3)
    assert int(cadence[-1]["requests"]) == pooled["requests"]


def test_hand_built_cadence_in_the_record(tmp_path: Path, capsys):
    arm, log = stall_and_pace_run(tmp_path)
    assert main([arm, log, "--markdown", "-"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("# Acceptance fold\n")
    tables = parse_tables(markdown)
    assert "Comparison" not in tables  # no --vs
    rows = {row["leg"]: row for row in tables["Cadence"]}
    # leg 1: 3 s before the first step, 5 s decoding, 2 s tail, one stall of 1.95 s
    assert [rows["1"][h] for h in ("first step", "decode", "tail", "p50", "p99", "stalls",
                                   "stall", "decode steps/s")] == [
        "3s", "5s", "2s", "50ms", "2s", "1", "1.95s", "12.20"
    ]  # fmt: skip
    # leg 2: requests at 50 and 25 steps/s: pooled 170 / 4.8 s, median request 37.5
    assert rows["2"]["requests"] == "2"
    assert rows["2"]["decode steps/s"] == "35.42" and rows["2"]["median request"] == "37.50"
    assert "warm leg time: 22.2% before the first step" in markdown


def test_cells_escape_pipes_and_parse_back():
    text = table(["a|b", "c"], [["x | y", "back\\slash"]], [False, True])
    header, rule, row = text.splitlines()
    assert split_row(header) == ["a|b", "c"]
    assert split_row(row) == ["x | y", "back\\slash"]
    assert rule == "|---|---:|"
    assert cell("two\nlines") == "two lines"


def test_markdown_and_json_cannot_share_stdout(capsys):
    argv = [str(EXAMPLE / "our-arm.json"), str(EXAMPLE / "steps.jsonl"), "--markdown", "-",
            "--json", "-"]  # fmt: skip
    assert main(argv) == 2
    assert "stdout" in capsys.readouterr().err
