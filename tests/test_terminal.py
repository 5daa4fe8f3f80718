"""What the command prints: the worked example against two oracles fits a screen (at most 60
lines at 100 columns, no word broken at 80), the verdicts come last, --details adds the
sources, the cadence, the speed splits and the line accounting, and a flag, a lost line or a
failed check is never left to --details."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fold.cli import main as cli
from fold.present.terminal import terminal

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "fixtures" / "gate-example"
ORACLES = ROOT / "fixtures" / "oracles"
REAL = ORACLES / "vllm-real"
EXAMPLE = [
    str(GATE / "our-arm.json"),
    str(GATE / "steps.jsonl"),
    "--vs",
    f"vllm={ORACLES / 'vllm-gate-arm.json'}",
    "--vs",
    f"sglang={ORACLES / 'sglang-legs.jsonl'}",
]
SCREEN_LINES = 60


def printed(argv: list[str], capsys, monkeypatch, width: int) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    assert cli([*argv, "--quiet"]) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("doc") / "fold.json"
    assert cli([*EXAMPLE, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_bytes())


@pytest.mark.parametrize("width", [80, 100])
def test_the_worked_example_fits_a_screen_with_the_verdicts_last(width, capsys, monkeypatch):
    text = printed(EXAMPLE, capsys, monkeypatch, width)
    lines = text.rstrip("\n").splitlines()
    if width == 100:
        assert len(lines) <= SCREEN_LINES, len(lines)
    assert all(len(line) <= width for line in lines)
    order = [
        text.index("Acceptance per leg"),
        text.index("Fold (warm: run > 1)"),
        text.index("Throughput and acceptance in one unit"),
        text.index("vs vllm: "),
        text.index("vs sglang: "),
        text.index("our verify steps/s measured"),
    ]
    assert order == sorted(order)
    assert "verdict: acceptance within 0.0% of vllm" in " ".join(text.split())
    for hidden in ("Sources", "Step cadence", "speed factor vs", "lines:", "warm per-position"):
        assert hidden not in text


def test_no_word_is_broken_at_80_columns(capsys, monkeypatch):
    """Every word printed at 80 columns is a word of the same output at 300, where nothing
    wraps: a cell cut mid-word ("recorde" / "d") would print a word the wide one lacks."""
    for details in ([], ["--details"]):
        wide = set(printed([*EXAMPLE, *details], capsys, monkeypatch, 300).split())
        narrow = set(printed([*EXAMPLE, *details], capsys, monkeypatch, 80).split())
        assert {word for word in narrow - wide if set(word) != {"─"}} == set()  # rules aside


def test_the_check_sees_a_broken_word(document):
    """The check above can fail: a column narrower than "recorded" cuts it."""
    from rich.console import Console
    from rich.table import Table

    table = Table()
    table.add_column("figure", overflow="fold", width=6)
    table.add_row("not recorded")
    console = Console(width=80, record=True, color_system=None)
    console.print(table)
    assert {"recorded"} - set(console.export_text().split())


def test_details_add_the_sources_the_cadence_the_splits_and_the_lines(capsys, monkeypatch):
    text = printed([*EXAMPLE, "--details"], capsys, monkeypatch, 100)
    for shown in ("Sources", "Step cadence per leg", "speed factor vs vllm", "lines:",
                  "warm per-position acceptance", "95% intervals"):  # fmt: skip
        assert shown in text, shown
    # the verdicts are still last
    assert text.index("Sources") < text.index("Throughput and acceptance in one unit")
    assert text.index("Step cadence") < text.index("vs vllm: ")


def test_a_lost_line_shows_without_details(tmp_path, capsys, monkeypatch):
    lines = (GATE / "steps.jsonl").read_text().splitlines(keepends=True)
    log = tmp_path / "steps.jsonl"
    log.write_text("".join(lines[:100] + lines[101:]))  # writer counter 100 never arrives
    text = printed([str(GATE / "our-arm.json"), str(log)], capsys, monkeypatch, 100)
    assert "lines not in a leg: 1 lost of 429 read" in text


def test_a_flagged_leg_shows_without_details(document):
    flagged = copy.deepcopy(document)
    flagged["legs"][3]["flags"] = ["collapse"]
    text = terminal(flagged, width=100)
    assert any(line.split()[:2] == ["3!", "1"] for line in text.splitlines() if line.strip())
    assert "leg 3! collapse: a window's acceptance fell under half" in text


def test_a_failed_step_rate_check_and_differing_populations_show_without_details(
    capsys, monkeypatch
):
    argv = [str(REAL / "ours" / "our-arm.json"), str(REAL / "ours" / "steps.jsonl")]
    text = " ".join(printed([*argv, f"--vs=vllm={REAL / 'offline' / 'vllm-arm.json'}"],
                            capsys, monkeypatch, 100).split())  # fmt: skip
    assert "disagree beyond 2%, so prefill or stalls take a share" in text
    gate = [str(GATE / "our-arm.json"), str(GATE / "steps.jsonl")]
    text = " ".join(printed([*gate, f"--vs=vllm={ORACLES / 'vllm-arm.json'}"], capsys,
                            monkeypatch, 100).split())  # fmt: skip
    assert "populations differ: ours counts the warm legs" in text


def test_a_record_folded_from_its_counters_says_so_without_details(tmp_path, document):
    counted = copy.deepcopy(document)
    counted["step_source"] = "record_counters"
    assert "S, P, A per leg from the record's counters" in " ".join(
        terminal(counted, width=100).split()
    )
