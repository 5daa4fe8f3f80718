"""The --html page in a real browser: headless Chromium, from a file, with the network off.

`pytest -m browser` (`.ci/run` installs Debian's chromium when it is missing). A probe script,
put first into a copy of the page, records console errors and failed loads and, once the page
has loaded, how many marks each chart laid out; Chromium writes the resulting DOM out. The
original page is also screenshotted and kept under out/browser/ as the test's artifact.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image
from step_logs import timed_copy

from fold.cli import main as cli

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "fixtures" / "gate-example"
VLLM = ROOT / "fixtures" / "oracles" / "vllm-gate-arm.json"
REAL = ROOT / "fixtures" / "oracles" / "vllm-real"
ARTIFACTS = ROOT / "out" / "browser"
CHART_NAMES = [
    "per-position",
    "windows",
    "per-leg",
    "gap",
    "intervals",
    "time-shares",
    "another-k",
    "requests",
    "by-output-position",
]
MIN_MARKS = 10  # the emptiest chart still lays out axes, ticks and its bars or lines

PROBE = """<script>
window.__errors = [];
const original = console.error.bind(console);
console.error = (...args) => { window.__errors.push(args.join(" ")); original(...args); };
window.addEventListener("error", (event) => {
  window.__errors.push("error: " + (event.message || (event.target && event.target.outerHTML)));
}, true);
window.addEventListener("load", () => {
  const charts = {};
  for (const section of document.querySelectorAll("section.chart")) {
    const svg = section.querySelector("svg");
    let marks = 0;
    if (svg) {
      for (const mark of svg.querySelectorAll("path, rect, line, polyline, polygon, use")) {
        const box = mark.getBoundingClientRect();
        if (box.width > 0 || box.height > 0) marks += 1;
      }
    }
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    charts[section.id] = {marks: marks, width: box.width, height: box.height};
  }
  const place = (element) => {
    const box = element.getBoundingClientRect();
    return {top: box.top, bottom: box.bottom, left: box.left, right: box.right};
  };
  const table = document.querySelector("table.comparison");
  const answer = {
    table: table ? place(table) : null,
    verdicts: Array.from(document.querySelectorAll("li.verdict"),
                         (item) => ({arm: item.dataset.arm, ...place(item)})),
    viewport: {width: window.innerWidth, height: window.innerHeight},
  };
  if (window.__print) {
    // the page's print rules, applied on screen: what a printer would lay out on A4
    for (const sheet of document.styleSheets) {
      for (const rule of sheet.cssRules) {
        if (rule.media && rule.media.mediaText.includes("print")) rule.media.mediaText = "all";
      }
    }
  }
  const height = document.documentElement.scrollHeight;
  const text = (cell) => cell.textContent.trim();
  const empty = [];
  for (const table of document.querySelectorAll("table")) {
    const body = Array.from(table.rows).slice(1);
    const width = Math.max(0, ...body.map((row) => row.cells.length));
    for (let column = 1; column < width; column += 1) {
      const cells = body.map((row) => row.cells[column]).filter((cell) => cell);
      if (cells.length && cells.every((cell) => ["not recorded", ""].includes(text(cell)))) {
        empty.push({head: text(table.rows[0]).slice(0, 60), column: column});
      }
    }
  }
  const wide = Array.from(document.querySelectorAll("table"))
    .filter((table) => table.getBoundingClientRect().right > window.innerWidth + 0.5)
    .map((table) => text(table.rows[0]).slice(0, 60));
  const overflow = document.documentElement.scrollWidth > window.innerWidth;
  const disclosures = [];
  for (const details of document.querySelectorAll("details")) {
    // what the disclosure shows beside its summary line
    const summary = details.querySelector("summary");
    const inside = () => details.getBoundingClientRect().height
      - (summary ? summary.getBoundingClientRect().height : 0);
    const closed = inside();
    details.open = true;
    disclosures.push({summary: summary ? text(summary) : "", closed: closed, open: inside()});
  }
  // the contents, half way down the page: still on screen?
  window.scrollTo(0, document.documentElement.scrollHeight / 2);
  const nav = document.querySelector("nav.toc");
  const contents = nav ? {scrolled: window.scrollY, ...place(nav)} : null;
  window.scrollTo(0, 0);
  const toc = document.querySelector("nav.toc");
  const contentsAtTop = toc ? place(toc) : null;
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({charts: charts, errors: window.__errors, answer: answer,
    height: height, empty: empty, wide: wide, overflow: overflow, disclosures: disclosures,
    contents: contents, contents_at_top: contentsAtTop});
  document.body.appendChild(out);
});
</script>"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed: apt-get install chromium (.ci/run does)")
    return found


def _run_offline(arguments: list[str]) -> subprocess.CompletedProcess:
    """Chromium with no network: a namespace without interfaces where one can be made, and in
    any case a proxy that refuses every connection."""
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
        "--enable-logging=stderr",
        "--v=0",
        *arguments,
    ]
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"]).returncode == 0:
        command = ["unshare", "-n", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _probe(page: Path, tmp_path: Path, window: str = "1280,800", printed: bool = False) -> dict:
    probed = tmp_path / f"probed-{page.name}"
    flag = "<script>window.__print = true;</script>" if printed else ""
    probed.write_text(page.read_text().replace("<head>", "<head>" + flag + PROBE, 1))
    completed = _run_offline(
        [f"--window-size={window}", "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()]
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', completed.stdout, re.DOTALL)
    assert found, f"the probe did not run:\n{completed.stderr[-2000:]}"
    text = found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
    return json.loads(text.replace("&amp;", "&"))


@pytest.fixture(scope="module")
def gate_page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("page") / "report.html"
    argv = [str(GATE / "our-arm.json"), str(GATE / "steps.jsonl"), f"--vs=vllm={VLLM}"]
    assert cli([*argv, "--html", str(out), "--quiet"]) == 0
    return out


PAGES = {
    # the worked example against two oracles, as the README runs it
    "two-oracles": [
        str(GATE / "our-arm.json"),
        str(GATE / "steps.jsonl"),
        f"--vs=vllm={VLLM}",
        f"--vs=sglang={ROOT / 'fixtures' / 'oracles' / 'sglang-legs.jsonl'}",
    ],
    # a real vLLM run on a CPU, whose factors are far from 1
    "vllm-real": [
        str(REAL / "ours" / "our-arm.json"),
        str(REAL / "ours" / "steps.jsonl"),
        f"--vs=vllm={REAL / 'offline' / 'vllm-arm.json'}",
    ],
    # two runs of ours, an oracle of ours among them
    "two-runs": [
        str(ROOT / "fixtures" / "ours-vs-ours" / "after" / "our-arm.json"),
        str(ROOT / "fixtures" / "ours-vs-ours" / "after" / "steps.jsonl"),
        f"--vs=before={ROOT / 'fixtures' / 'ours-vs-ours' / 'before' / 'our-arm.json'}",
        f"--vs-log=before={ROOT / 'fixtures' / 'ours-vs-ours' / 'before' / 'steps.jsonl'}",
        f"--vs=vllm={VLLM}",
    ],
}
SCREEN = (1280, 800)


@pytest.mark.parametrize("name", list(PAGES))
def test_the_first_screen_holds_the_comparison_and_every_verdict(name, tmp_path):
    out = tmp_path / f"{name}.html"
    assert cli([*PAGES[name], "--html", str(out), "--quiet"]) == 0
    probe = _probe(out, tmp_path, f"{SCREEN[0]},{SCREEN[1]}")
    answer = probe["answer"]
    assert answer["viewport"]["width"] <= SCREEN[0]
    height = answer["viewport"]["height"]
    assert answer["table"] is not None, "the page has no comparison table"
    assert answer["table"]["top"] >= 0 and answer["table"]["bottom"] <= height, answer
    assert answer["table"]["right"] <= answer["viewport"]["width"], answer
    arms = [item["arm"] for item in answer["verdicts"]]
    given = [spec.removeprefix("--vs=") for spec in PAGES[name] if spec.startswith("--vs=")]
    gaps = [spec.split("=", 1)[0] for spec in given]
    assert arms == gaps
    for item in answer["verdicts"]:
        assert item["bottom"] <= height and item["right"] <= answer["viewport"]["width"], item
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"first-screen-{name}.png"
    shot.unlink(missing_ok=True)
    completed = _run_offline(
        [f"--window-size={SCREEN[0]},{SCREEN[1]}", "--virtual-time-budget=10000",
         f"--screenshot={shot}", out.as_uri()]
    )  # fmt: skip
    assert shot.exists(), completed.stderr[-2000:]


def test_the_screen_check_sees_a_verdict_below_the_fold(tmp_path):
    """The check above can fail: a verdict pushed below the first screen is measured there."""
    low = tmp_path / "low.html"
    low.write_text(
        '<!DOCTYPE html><html><head></head><body><table class="comparison"><tr><td>x</td></tr>'
        '</table><div style="height:2000px"></div><ul><li class="verdict" data-arm="a">late'
        "</li></ul></body></html>"
    )
    answer = _probe(low, tmp_path)["answer"]
    assert answer["verdicts"][0]["bottom"] > answer["viewport"]["height"]


def test_every_chart_renders_with_no_console_error(gate_page, tmp_path):
    probe = _probe(gate_page, tmp_path)
    assert probe["errors"] == []
    assert sorted(probe["charts"]) == sorted(CHART_NAMES)
    for name, found in probe["charts"].items():
        assert found["marks"] >= MIN_MARKS, (name, found)
        assert found["width"] > 300 and found["height"] > 100, (name, found)


def test_the_probe_sees_an_error_and_an_empty_chart(tmp_path):
    """The check above can fail: a page with a console error and a chart with no marks."""
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><head></head><body>"
        '<section class="chart" id="empty"><svg width="400" height="200"></svg></section>'
        '<img src="missing.png"><script>console.error("drawn wrong")</script></body></html>'
    )
    probe = _probe(broken, tmp_path)
    assert probe["charts"] == {"empty": {"marks": 0, "width": 400, "height": 200}}
    assert "drawn wrong" in probe["errors"]
    assert any("missing.png" in error for error in probe["errors"])


def test_a_screenshot_of_the_page_is_kept_and_not_blank(gate_page):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    completed = _run_offline(
        [
            "--window-size=1280,5200",
            "--virtual-time-budget=10000",
            f"--screenshot={shot}",
            gate_page.as_uri(),
        ]
    )
    assert shot.exists(), completed.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 5200)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50, completed.stderr[-2000:]
    blank = max(count for count, _ in colours)
    assert blank < 0.97 * image.size[0] * image.size[1], (
        f"the page rendered (almost) empty:\n{completed.stderr[-2000:]}"
    )
    assert "CONSOLE" not in completed.stderr, completed.stderr[-2000:]


# --- the whole page: nothing empty, every disclosure opens, half as tall, prints on A4 -------

# The worked example's page (PAGES["two-oracles"]) laid out at 1280 x 800 by this probe's
# document.documentElement.scrollHeight, on main at 2359b57, before the page folded its long
# tables and set its charts two abreast: 8222 px. It may be at most half that now.
HEIGHT_BEFORE = 8222
A4_WIDTH = 703  # CSS px across A4 (210 mm) less the page's 12 mm margins, at 96 px an inch


def _page(tmp_path: Path, name: str) -> Path:
    if name == "matched, step durations":
        timed = timed_copy(REAL / "ours" / "steps.jsonl", tmp_path / "timed.jsonl")
        argv = [
            str(REAL / "ours" / "our-arm.json"),
            str(timed),
            f"--vs=vllm={REAL / 'offline' / 'vllm-arm.json'}",
            f"--vs=vllm-matched={ROOT / 'fixtures' / 'oracles' / 'vllm-matched' / 'holds.json'}",
        ]
    else:
        argv = PAGES[name]
    out = tmp_path / "page.html"
    assert cli([*argv, "--html", str(out), "--quiet"]) == 0
    return out


WHOLE_PAGES = [*PAGES, "matched, step durations"]


@pytest.mark.parametrize("name", WHOLE_PAGES)
def test_no_column_of_nothing_and_every_disclosure_opens(name, tmp_path):
    probe = _probe(_page(tmp_path, name), tmp_path)
    assert probe["errors"] == []
    assert probe["empty"] == []
    assert probe["disclosures"], "the page folds no table"
    for found in probe["disclosures"]:
        assert found["summary"] and found["closed"] < 1 and found["open"] > 20, found


def test_the_worked_example_is_at_most_half_as_tall_as_before(tmp_path):
    probe = _probe(_page(tmp_path, "two-oracles"), tmp_path)
    assert probe["height"] <= HEIGHT_BEFORE / 2, probe["height"]
    # and its contents stay in reach: half way down, the side column is still on screen
    contents = probe["contents"]
    assert contents["scrolled"] > 1000, contents
    assert 0 <= contents["top"] < 100 and contents["bottom"] > 200, contents


@pytest.mark.parametrize("name", WHOLE_PAGES)
def test_printed_on_a4_no_table_runs_off_and_every_disclosure_is_open(name, tmp_path):
    probe = _probe(_page(tmp_path, name), tmp_path, f"{A4_WIDTH},1000", printed=True)
    assert probe["wide"] == [] and not probe["overflow"], probe["wide"]
    for found in probe["disclosures"]:
        assert found["closed"] > 20, found


def test_the_page_checks_see_a_column_of_nothing_a_shut_disclosure_and_a_tall_page(tmp_path):
    """The checks above can fail: a column of "not recorded", a disclosure with nothing to
    open, a page taller than the bound, contents that scroll away and a table wider than A4
    are each measured so."""
    control = tmp_path / "control.html"
    control.write_text(
        "<!DOCTYPE html><html><head></head><body>"
        "<table><tr><th>figure</th><th>ours</th><th>vllm</th></tr>"
        "<tr><td>a</td><td>1</td><td>not recorded</td></tr>"
        "<tr><td>b</td><td>2</td><td>not recorded</td></tr></table>"
        "<details><summary>nothing inside</summary></details>"
        "<details open><summary>open already</summary><p>shown before a click</p></details>"
        "<details><summary>shut in print</summary><p>no print rule opens it</p></details>"
        '<table style="width:900px"><tr><th>wide</th></tr><tr><td>x</td></tr></table>'
        '<nav class="toc"><a href="#x">contents that scroll away</a></nav>'
        f'<div style="height:{HEIGHT_BEFORE}px"></div></body></html>'
    )
    probe = _probe(control, tmp_path)
    assert [found["column"] for found in probe["empty"]] == [2]
    shut, already, _ = probe["disclosures"]
    assert shut["summary"] == "nothing inside" and shut["open"] < 20
    assert already["summary"] == "open already" and already["closed"] >= 1  # not folded
    assert probe["height"] > HEIGHT_BEFORE / 2
    assert probe["contents"]["scrolled"] > 1000 and probe["contents"]["bottom"] < 0
    printed = _probe(control, tmp_path, f"{A4_WIDTH},1000", printed=True)
    assert printed["wide"] == ["wide"] and printed["overflow"]
    assert printed["disclosures"][2]["closed"] < 1


NARROW = (900, 800)


@pytest.mark.parametrize("name", WHOLE_PAGES)
def test_on_a_narrow_window_the_answer_comes_before_the_contents(name, tmp_path):
    """Below 60rem the contents leave the side: they follow the answer, so the table and every
    verdict are still on the first screen (the matched page's fell below it)."""
    probe = _probe(_page(tmp_path, name), tmp_path, f"{NARROW[0]},{NARROW[1]}")
    answer = probe["answer"]
    assert answer["viewport"]["width"] <= NARROW[0]
    assert answer["table"] is not None and answer["table"]["top"] >= 0, answer
    assert answer["verdicts"], answer
    for item in answer["verdicts"]:
        assert item["bottom"] <= answer["viewport"]["height"], item
    nav = probe["contents_at_top"]
    assert nav is not None and nav["top"] > answer["verdicts"][-1]["bottom"], nav
