"""The page shows what is there: no column and no row of "not recorded", what only our folds
record in our block with one line naming what the oracles do not record, long tables folded
under a one-line summary, the lowest requests as a table equal to the document's, and contents
that lead to every section. The terminal draws no column of nothing either.

Pages are read back with the standard library's HTML parser; expectations come from the
document's counts (accepted / proposed), not from the presenters' helpers.
"""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from step_logs import timed_copy

from fold.cli import main as cli
from fold.present.page import page
from fold.present.terminal import terminal

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "fixtures" / "gate-example"
ORACLES = ROOT / "fixtures" / "oracles"
REAL = ORACLES / "vllm-real"
NOT_RECORDED = "not recorded"


class Page(HTMLParser):
    """The tables (rows of cell texts, with whether each sits in a disclosure), the ids, the
    contents' links, the h2 headings and the disclosures' summaries of one page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self.ids: list[str] = []
        self.links: list[str] = []
        self.headings: list[tuple[str, str]] = []  # (its section's id, text)
        self.summaries: list[str] = []
        self._open: list[str] = []
        self._sections: list[str] = []
        self._details = 0
        self._text: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if "id" in found:
            self.ids.append(found["id"])
        if tag == "a" and "nav" in self._open:
            self.links.append(found["href"].removeprefix("#"))
        if tag in ("nav", "main"):
            self._open.append(tag)
        if tag == "section":
            self._sections.append(found.get("id", ""))
        if tag == "details":
            self._details += 1
        if tag == "table":
            self.tables.append({"rows": [], "folded": self._details > 0})
        elif tag == "tr":
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th", "h2", "summary"):
            self._text = []

    def handle_endtag(self, tag):
        if tag in ("nav", "main"):
            self._open.remove(tag)
        if tag == "section":
            self._sections.pop()
        if tag == "details":
            self._details -= 1
        if self._text is None:
            return
        text = " ".join("".join(self._text).split())
        if tag in ("td", "th"):
            self.tables[-1]["rows"][-1].append(text)
        elif tag == "h2" and "main" in self._open:
            self.headings.append((self._sections[-1] if self._sections else "", text))
        elif tag == "summary":
            self.summaries.append(text)
        else:
            return
        self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def empty_columns(table: dict) -> list[int]:
    """The columns past the first whose every body cell is "not recorded" (or blank)."""
    _, *body = table["rows"]
    if not body:
        return []
    width = max(len(row) for row in table["rows"])
    return [
        column
        for column in range(1, width)
        if all(row[column] in (NOT_RECORDED, "") if column < len(row) else True for row in body)
    ]


def empty_rows(table: dict) -> list[str]:
    """The rows whose every figure cell (past the label) reads "not recorded"."""
    return [
        row[0]
        for row in table["rows"][1:]
        if len(row) > 1 and all(cell == NOT_RECORDED for cell in row[1:])
    ]


def _document(tmp_path: Path, argv: list[str]) -> dict:
    out = tmp_path / "fold.json"
    assert cli([*argv, "--json", str(out), "--bootstrap", "100", "--quiet"]) in (0, 1)
    return json.loads(out.read_bytes())


def pages(tmp_path: Path) -> dict[str, list[str]]:
    timed = timed_copy(REAL / "ours" / "steps.jsonl", tmp_path / "timed.jsonl")
    return {
        "worked example": [
            str(GATE / "our-arm.json"),
            str(GATE / "steps.jsonl"),
            f"--vs=vllm={ORACLES / 'vllm-gate-arm.json'}",
            f"--vs=sglang={ORACLES / 'sglang-legs.jsonl'}",
        ],
        "real vLLM": [
            str(REAL / "ours" / "our-arm.json"),
            str(REAL / "ours" / "steps.jsonl"),
            f"--vs=vllm={REAL / 'offline' / 'vllm-arm.json'}",
        ],
        "matched, step durations": [
            str(REAL / "ours" / "our-arm.json"),
            str(timed),
            f"--vs=vllm={REAL / 'offline' / 'vllm-arm.json'}",
            f"--vs=vllm-matched={ORACLES / 'vllm-matched' / 'holds.json'}",
        ],
    }


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> dict[str, dict]:
    tmp_path = tmp_path_factory.mktemp("pages")
    return {name: _document(tmp_path, argv) for name, argv in pages(tmp_path).items()}


@pytest.mark.parametrize("name", ["worked example", "real vLLM", "matched, step durations"])
def test_no_table_has_a_column_or_a_row_of_nothing(documents, name):
    document = documents[name]
    found = Page(page(document).decode())
    assert found.tables
    for table in found.tables:
        assert empty_columns(table) == [], table["rows"][0]
        assert empty_rows(table) == [], table["rows"][0]
    if name == "matched, step durations":
        assert "step-split" in found.ids and "matched" not in found.ids  # arms, not --matched


def test_the_checks_see_a_column_and_a_row_of_nothing():
    control = Page(
        "<main><table><tr><th>figure</th><th>ours</th><th>vllm</th></tr>"
        "<tr><td>a</td><td>1</td><td>not recorded</td></tr>"
        "<tr><td>b</td><td>not recorded</td><td>not recorded</td></tr></table></main>"
    )
    (table,) = control.tables
    assert empty_columns(table) == [2]
    assert empty_rows(table) == ["b"]


def test_a_figure_only_ours_records_is_in_our_block_with_one_line(documents):
    document = documents["worked example"]
    text = page(document).decode()
    found = Page(text)
    # The oracles hold no steps: nothing is set side by side; our step figures are folded in
    # our block, a column per fold of ours, and one line names what the oracles lack.
    assert "step-figures" not in found.ids
    ours = text[
        text.index('<section id="ours">') : text.index("</section>", text.index('id="ours"'))
    ]
    assert "vllm and sglang do not record these figures, so they are ours alone: " in ours
    (steps,) = [table for table in found.tables if table["rows"][0][0] == "figure"]
    assert steps["folded"]
    assert steps["rows"][0] == ["figure", "ours", "ours (all legs)"]
    rows = {row[0]: row[1:] for row in steps["rows"][1:]}
    figures = next(r for r in document["comparison"]["rows"] if r["name"] == "ours")
    first = figures["step_figures"]["per_position"][0]
    assert rows["pos 1, of steps"][0].startswith(f"{100 * first:.1f}%")


def test_a_comparison_column_only_ours_records_moves_to_our_block(tmp_path):
    """Against vLLM alone, SGLang len* (completion tokens per verify step) is ours alone: the
    comparison has no such column, our fold's table has it, and the line names it. The
    terminal drops it too (SGLang's unit beside no SGLang arm compares with nothing) and its
    caption no longer defines it; mean len and rate, the verdict's unit, stay."""
    document = _document(
        tmp_path,
        [
            str(GATE / "our-arm.json"),
            str(GATE / "steps.jsonl"),
            f"--vs=vllm={ORACLES / 'vllm-gate-arm.json'}",
        ],
    )
    text = page(document).decode()
    found = Page(text)
    comparison, ours = found.tables[0], found.tables[1]
    assert "SGLang len*" not in comparison["rows"][0]
    assert "SGLang len* is SGLang's own unit" not in text  # the caption names no absent column
    assert ours["rows"][0][-1] == "completion/S"
    warm = document["warm"]
    completion = sum(leg["completion_tokens"] for leg in document["legs"] if leg["warm"])
    assert completion / warm["steps"] == pytest.approx(warm["completion_tokens_per_step"])
    assert ours["rows"][1][-1] == f"{warm['completion_tokens_per_step']:.2f}"
    assert "completion tokens per verify step (SGLang len*, our completion/S)" in text
    for width in (80, 120):
        shown = terminal(document, width=width)
        table = shown[shown.index("Throughput and acceptance") :]
        assert "SGLang len*" not in table and NOT_RECORDED not in table.split("vs vllm")[0]
        assert "mean len" in table and "rate" in table


def test_a_column_no_arm_records_is_drawn_nowhere(documents):
    document = copy.deepcopy(documents["real vLLM"])
    block = document["comparison"]
    for row in block["rows"]:
        row["completion_tokens_per_step"] = None
    assert "SGLang len*" not in terminal(documents["real vLLM"], width=120)  # no SGLang arm
    assert "SGLang len*" in terminal(documents["worked example"], width=120)  # an SGLang arm
    assert "SGLang len*" not in terminal(document, width=120)
    assert "SGLang len*" not in Page(page(document).decode()).tables[0]["rows"][0]


def test_the_terminal_sets_no_column_of_nothing_beside_the_step_figures(documents):
    text = terminal(documents["worked example"], width=160, details=True)
    side = text[text.index("Step figures side by side") :]
    header = side.splitlines()[1]
    assert "ours" in header and "vllm" not in header and "sglang" not in header


@pytest.mark.parametrize("name", ["worked example", "real vLLM"])
def test_the_lowest_requests_are_one_table_of_the_documents_requests(documents, name):
    document = documents[name]
    found = Page(page(document).decode())
    (table,) = [t for t in found.tables if t["rows"][0] == ["leg", "request id", "A/P", "P"]]
    lowest = [r for r in document["warm"]["per_request"]["lowest"] if r["proposed"]][:5]
    assert table["rows"][1:] == [
        [str(r["leg"]), str(r["seq"]), f"{100 * r['accepted'] / r['proposed']:.1f}%",
         f"{r['proposed']:,}"]
        for r in lowest
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["worked example", "real vLLM", "matched, step durations"])
def test_the_contents_lead_to_every_section_and_long_tables_fold(documents, name):
    found = Page(page(documents[name]).decode())
    assert found.links and all(link in found.ids for link in found.links)
    # every h2 is a section's, and the contents list those sections in page order
    sections = [section for section, _ in found.headings]
    assert all(sections)
    assert [link for link in found.links if link in sections] == sections
    assert all(text.endswith("?") or section == "answer" for section, text in found.headings)
    assert found.summaries and all(summary for summary in found.summaries)
    positions = [t for t in found.tables if t["rows"][0][0] == "tokens already out"]
    assert positions and all(table["folded"] for table in positions)


def test_the_page_carries_its_print_rules(documents):
    text = page(documents["worked example"]).decode()
    assert "@page { size: A4" in text and "@media print" in text
    assert "details::details-content" in text  # disclosures print open


def test_a_group_an_arm_beside_ours_fills_anywhere_stays_side_by_side(tmp_path):
    """Two runs of ours: ``before`` fills windows 1-4 but has no window 5. The line in our
    block must not say ``before`` does not record windows; windows stay side by side, whole."""
    runs = ROOT / "fixtures" / "ours-vs-ours"
    document = _document(
        tmp_path,
        [
            str(runs / "after" / "our-arm.json"),
            str(runs / "after" / "steps.jsonl"),
            f"--vs=before={runs / 'before' / 'our-arm.json'}",
            f"--vs-log=before={runs / 'before' / 'steps.jsonl'}",
            f"--vs=vllm={ORACLES / 'vllm-gate-arm.json'}",
        ],
    )
    before = next(r for r in document["comparison"]["rows"] if r["name"] == "before")
    after = next(r for r in document["comparison"]["rows"] if r["name"] == "ours")
    filled = [w for w in before["step_figures"]["windows"] if w["accept_rate"] is not None]
    assert 0 < len(filled) < len(after["step_figures"]["windows"])  # the case at hand
    text = page(document).decode()
    start = text.find('class="recorded">')
    line = text[start:].split("</p>", 1)[0] if start >= 0 else ""
    assert "windows" not in line
    found = Page(text)
    side = next(
        t for t in found.tables if t["rows"][0][:1] == ["figure"] and "before" in t["rows"][0]
    )
    windows = [row[0] for row in side["rows"][1:] if row[0].startswith("window ")]
    assert len(windows) == len(after["step_figures"]["windows"])  # window 5 too, beside the rest


def test_against_sglang_alone_the_line_names_every_column_left_to_our_block(tmp_path):
    """SGLang records neither 1 + A/S nor A/P: those columns go to our block, the line names
    them, and the caption defines only the columns drawn."""
    document = _document(
        tmp_path,
        [
            str(GATE / "our-arm.json"),
            str(GATE / "steps.jsonl"),
            f"--vs=sglang={ORACLES / 'sglang-legs.jsonl'}",
        ],
    )
    (sglang,) = [r for r in document["comparison"]["rows"] if r["name"] == "sglang"]
    assert sglang["mean_acceptance_length"] is None and sglang["accept_rate"] is None
    text = page(document).decode()
    head = Page(text).tables[0]["rows"][0]
    assert "mean len (1 + A/S)" not in head and "rate (A/P)" not in head
    assert "SGLang len*" in head and "verify steps/s" in head
    start = text.index('class="recorded">')
    line = text[start : text.index("</p>", start)]
    assert "mean len (1 + A/S)" in line and "rate (A/P)" in line
    caption = text[text.index('<p class="caption">') :].split("</p>", 1)[0]
    assert "mean len" not in caption and "rate = A/P" not in caption
    assert "SGLang len*" in caption and "steps/s" in caption


def test_the_terminal_sets_our_request_figures_beside_nothing_only_once(documents):
    """No arm beside ours has per-request figures in the worked example: the side-by-side
    table would repeat ours alone, so --details draws it not; the per-request lines stay."""
    document = documents["worked example"]
    gaps = document["comparison"]["gaps"]
    beside = [r for r in document["comparison"]["rows"] if r["name"] in gaps]
    assert all((r["step_figures"] or {}).get("per_request") is None for r in beside)
    text = terminal(document, width=100, details=True)
    assert "side by side" in text  # the step figures' table is still drawn
    assert "Per request and by output position, side" not in text
    lowest = next(r for r in document["warm"]["per_request"]["lowest"] if r["proposed"])
    shown = f"{100 * lowest['accepted'] / lowest['proposed']:.1f}% of {lowest['proposed']}"
    assert text.count(shown) == 1, text


def test_each_chart_section_holds_what_its_heading_asks_and_the_step_split_sits_by_the_time(
    documents,
):
    """The gap per oracle and the what-if have their own questions, and the step split sits
    right above the time charts (it sat above the acceptance charts)."""
    document = documents["matched, step durations"]
    text = page(document).decode()
    found = Page(text)
    sections = [section for section, _ in found.headings]
    headings = dict(found.headings)
    assert sections.index("step-split") + 1 == sections.index("time-charts"), sections

    def charts_in(section: str) -> list[str]:
        start = text.index(f'<section id="{section}"')
        end = text.index("</div></section>", start)
        return [chart for chart in ("gap", "another-k", "per-position", "per-leg")
                if f'id="{chart}"' in text[start:end]]  # fmt: skip

    assert charts_in("time-charts") == ["per-leg"]
    assert charts_in("gap-charts") == ["gap"] and "oracle" in headings["gap-charts"]
    assert charts_in("acceptance-charts") == ["per-position"]
    assert charts_in("another-k-charts") == ["another-k"]
    assert document["comparison"]["gaps"]


def test_a_folded_table_is_summed_up_by_rows_groups_and_columns(documents):
    """The summary names its rows, what they hold and its columns in one plain line (it read
    "(ours and ours (all legs))")."""
    found = Page(page(documents["worked example"]).decode())
    (steps,) = [table for table in found.tables if table["rows"][0][0] == "figure"]
    names = steps["rows"][0][1:]
    (summary,) = [s for s in found.summaries if s.startswith("Our step figures")]
    assert summary.startswith(f"Our step figures, {len(steps['rows']) - 1} rows of per position")
    assert summary.endswith(f"{len(names)} columns: {', '.join(names)}")
    assert "((" not in summary and "))" not in summary
