"""Every presenter is a function of the JSON document alone: the terminal text, the markdown
record, the page and the timeline are the same bytes from the document in memory and from the
same document saved by --json and read back; and the terminal, the markdown and the page state
the same figures (each arm's A/P and 1 + A/S, r and its factors, the verdicts' words), worked
out here from the rows' counts."""

from __future__ import annotations

import html
import re
from pathlib import Path

import orjson
import pytest

from fold.api import fold_acceptance
from fold.compare.comparison import compare
from fold.compare.vs_arms import TAKEN_NAMES, fold_vs_arms
from fold.folding.cadence import DEFAULT_STALL_FACTOR
from fold.folding.timeline_lines import attributed_lines
from fold.folding.warm import DEFAULT_PREDICATE
from fold.inputs.acceptance import DEFAULT_WINDOW_STEPS
from fold.inputs.arm import load_arm
from fold.inputs.vs_arms import read_vs_arms
from fold.present.markdown import markdown_record
from fold.present.page import page
from fold.present.terminal import terminal
from fold.present.timeline import timeline

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "fixtures" / "gate-example"
ORACLES = ROOT / "fixtures" / "oracles"
VS = [f"vllm={ORACLES / 'vllm-gate-arm.json'}", f"sglang={ORACLES / 'sglang-legs.jsonl'}"]


OURS_VS_OURS = ROOT / "fixtures" / "ours-vs-ours"
EXAMPLES = {
    # the worked example against vLLM and SGLang
    "two-oracles": (GATE / "our-arm.json", GATE / "steps.jsonl", VS, []),
    # two runs of ours, before and after a change
    "two-runs": (
        OURS_VS_OURS / "after" / "our-arm.json",
        OURS_VS_OURS / "after" / "steps.jsonl",
        [f"before={OURS_VS_OURS / 'before' / 'our-arm.json'}"],
        [f"before={OURS_VS_OURS / 'before' / 'steps.jsonl'}"],
    ),
}


@pytest.fixture(scope="module", params=list(EXAMPLES))
def example(request) -> tuple[dict, object]:
    """A worked example: the document in memory, and the attributed step lines."""
    record, log, vs, vs_logs = EXAMPLES[request.param]
    arm = load_arm(str(record))
    logs = [str(log)]
    options = {
        "resamples": 200,
        "seed": 7,
        "window_steps": DEFAULT_WINDOW_STEPS,
        "skip_bad_lines": False,
        "stall_factor": DEFAULT_STALL_FACTOR,
        "prefill_tokens": None,
    }  # the command's defaults; fmt: skip
    result = fold_acceptance(arm, logs, **options)
    read = read_vs_arms(vs, vs_logs, taken=TAKEN_NAMES)
    oracles = fold_vs_arms(read, main=arm, predicate=DEFAULT_PREDICATE, fold_options=options)
    result = result.with_comparison(compare(result, oracles, record=arm))
    return result.to_json(), attributed_lines(arm, logs)


def reloaded(document: dict) -> dict:
    """The document as --json writes it and a later run reads it."""
    return orjson.loads(orjson.dumps(document))


def test_every_presenter_gives_the_same_bytes_from_a_saved_document(example):
    document, lines = example
    saved = reloaded(document)
    for width in (80, 100):
        for details in (False, True):
            assert terminal(document, width=width, details=details) == terminal(
                saved, width=width, details=details
            )
    assert markdown_record(document) == markdown_record(saved)
    assert page(document) == page(saved)
    assert timeline(document, lines) == timeline(saved, lines)


def _words(text: str) -> str:
    return " ".join(text.split())


def _terminal_row(text: str, name: str) -> list[str]:
    table = text[text.index("Throughput and acceptance in one unit") :]
    line = next(line for line in table.splitlines() if line.startswith(name + " "))
    return line[len(name) :].split()


def _markdown_row(text: str, name: str) -> list[str]:
    section = text[text.index("## Comparison") :]
    line = next(line for line in section.splitlines() if line.startswith(f"| {name} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def _page_row(text: str, name: str) -> list[str]:
    rows = re.findall(r'<tr class="arm">(.*?)</tr>', text)
    row = next(row for row in rows if f"<b>{html.escape(name)}</b>" in row)
    return [
        html.unescape(re.sub(r"<[^>]+>", "", cell))
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)
    ]


def test_the_terminal_the_markdown_and_the_page_state_the_same_figures(example):
    document, _ = example
    text = terminal(document, width=100)
    record = markdown_record(document)
    shown = page(document).decode()
    rows = document["comparison"]["rows"]
    assert [row["name"] for row in rows] in (
        ["ours", "ours (all legs)", "vllm", "sglang"],
        ["ours", "before"],
    )
    for row in rows:
        name = row["name"]
        if row["accepted"] is None:
            expected = ["not recorded", "not recorded"]
        else:  # from the counts, by the definitions: A/P and 1 + A/S
            expected = [
                f"{100 * row['accepted'] / row['proposed']:.1f}%",
                f"{1 + row['accepted'] / row['steps']:.2f}",
            ]
        rate, length = expected
        terminal_cells = " ".join(_terminal_row(text, name))
        markdown_cells = _markdown_row(record, name)
        page_cells = _page_row(shown, name)
        for cells in (terminal_cells, " ".join(markdown_cells), " ".join(page_cells)):
            assert rate in cells and length in cells, (name, cells)
        tok_s = f"{row['output_throughput_tok_s']:.3f}"
        assert tok_s in terminal_cells and tok_s in markdown_cells[4] and tok_s in page_cells[2]
    for name, gap in document["comparison"]["gaps"].items():
        ours = next(row for row in rows if row["name"] == gap["ours"])
        oracle = next(row for row in rows if row["name"] == name)
        r = ours["output_throughput_tok_s"] / oracle["output_throughput_tok_s"]
        assert gap["ratio"] == pytest.approx(r, rel=1e-9)
        factors = [f"{r:.3f}", f"{gap['acceptance_factor']:.3f}", f"{gap['speed_factor']:.3f}"]
        assert gap["acceptance_factor"] * gap["speed_factor"] == pytest.approx(r, rel=1e-9)
        ratio_line = next(line for line in text.splitlines() if line.startswith(f"ours/{name} "))
        page_ratio = re.search(rf"<tr class=\"ratio\"><td>ours/{name}</td>(.*?)</tr>", shown)
        assert page_ratio is not None
        for factor in factors:
            assert factor in ratio_line.split()
            assert factor in page_ratio.group(1)
            assert factor in _words(record[record.index("## Verdict") :])
        verdict = _words(gap["verdict"])
        assert f"vs {name}: " in _words(text) and verdict in _words(text)
        assert f"- **vs {name}**: {gap['verdict']}" in record
        assert f"<b>vs {name}</b>: {html.escape(gap['verdict'])}</li>" in shown


def test_the_timeline_reads_the_leg_windows_from_the_document(example):
    document, lines = example
    events = orjson.loads(timeline(document, lines))["traceEvents"]
    legs = [event for event in events if event.get("cat") == "leg"]
    assert len(legs) == len(document["legs"])
    for event in legs:
        leg = document["legs"][event["args"]["index"]]
        assert event["ts"] == leg["window_start_ns"] / 1000
        assert event["dur"] == (leg["window_end_ns"] - leg["window_start_ns"]) / 1000
        # the window as the record gives it, in seconds, is the same span
        assert event["dur"] / 1e6 == pytest.approx(leg["window_secs"], abs=1e-6)
