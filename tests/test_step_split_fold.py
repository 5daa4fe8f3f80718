"""The step split through the whole fold: hand-built logs whose lines carry durations, read by
the hook's readers, folded, shown by every presenter; expectations worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cadence_logs import MS, T0_NS, T0_S, leg

from fold.api import fold_acceptance
from fold.cli import main
from fold.present.markdown import markdown_record
from fold.present.page import page
from fold.present.terminal import terminal

approx = pytest.approx
US = 1_000
LV4 = Path(__file__).resolve().parent.parent / "fixtures" / "oracles"
LV4 = LV4 / "llamacpp-speculative-simple-lv4.txt"


def timed_lines(rows: list[tuple[str, int, int, int | None, int | None]]) -> str:
    """(writer, t_ns, seq, draft_ns, verify_ns) as v1 lines in the writers' layout, the
    durations after ``emitted`` where given."""
    counters: dict[str, int] = {}
    out = []
    for w, t_ns, seq, draft, verify in rows:
        n = counters.get(w, 0)
        counters[w] = n + 1
        parts = "" if draft is None else f',"draft_ns":{draft}'
        parts += "" if verify is None else f',"verify_ns":{verify}'
        out.append(
            f'{{"v":1,"w":"{w}","n":{n},"t_ns":{t_ns},"pid":{int(w, 16)},"seq":{seq},'
            f'"proposed":4,"accepted":2,"emitted":3{parts}}}\n'
        )
    return "".join(out)


@pytest.fixture
def run(tmp_path: Path) -> tuple[str, str]:
    """Leg 0 (cold): request 1, 5 steps 10 ms apart, drafting 2 ms and verifying 6 ms each.
    Leg 1 (warm, 10 s later): request 2, 5 steps 20 ms apart, drafting 4 ms, verifying 12 ms;
    and request 3, 3 steps 10 ms apart, drafting 1 ms, verifying 5 ms."""
    legs = [leg(T0_S, T0_S + 1, run=1), leg(T0_S + 10, T0_S + 11, run=2)]
    start0, start1 = T0_NS + 100 * MS, T0_NS + 10_100 * MS
    rows = [("00000000000000a1", start0 + k * 10 * MS, 1, 2 * MS, 6 * MS) for k in range(5)]
    rows += [("00000000000000a2", start1 + k * 20 * MS, 2, 4 * MS, 12 * MS) for k in range(5)]
    rows += [("00000000000000a2", start1 + k * 10 * MS, 3, 1 * MS, 5 * MS) for k in range(3)]
    rows.sort(key=lambda row: row[1])
    arm, log = tmp_path / "arm.json", tmp_path / "steps.jsonl"
    arm.write_text(json.dumps({"legs": legs}))
    log.write_text(timed_lines(rows))
    return str(arm), str(log)


def test_the_fold_splits_each_leg_and_the_warm_legs(run):
    document = fold_acceptance(*run[:1], [run[1]], resamples=200).to_json()
    leg0, leg1 = (leg["step_split"] for leg in document["legs"])
    # Leg 0: 4 intervals of 10 ms; drafting 2 ms and verifying 6 ms a step; rest 2 ms.
    assert leg0["intervals"] == 4 and leg0["draft_steps"] == leg0["verify_steps"] == 5
    assert (leg0["step_s"], leg0["draft_s"], leg0["verify_s"], leg0["rest_s"]) == approx(
        (0.010, 0.002, 0.006, 0.002)
    )
    assert leg0["step_s_ci"] is None  # one request: nothing to redraw below the leg
    # Leg 1: request 2, 4 intervals over 80 ms, parts 4 x 4 ms and 4 x 12 ms in its window;
    # request 3, 2 intervals over 20 ms, parts 2 x 1 ms and 2 x 5 ms: 100 ms over 6 intervals,
    # drafting 18 ms / 6 = 3 ms, verifying 58 ms / 6 = 9.67 ms, rest 16.67 - 12.67 = 4 ms.
    assert leg1["requests"] == 2 and leg1["intervals"] == 6
    assert (leg1["step_s"], leg1["draft_s"], leg1["verify_s"], leg1["rest_s"]) == approx(
        (0.1 / 6, 0.018 / 6, 0.058 / 6, 0.024 / 6)
    )
    assert leg1["adds_up"] is True and leg1["step_s_ci"] is not None
    # Warm is leg 1 alone; the step time is the cadence's.
    warm = document["warm"]["step_split"]
    assert warm["step_s"] == approx(leg1["step_s"])
    assert warm["step_s"] == approx(1 / document["warm"]["cadence"]["decode_steps_per_s"])
    low, high = warm["draft_share_ci"]
    assert low <= warm["draft_share"] <= high


def test_a_log_without_durations_has_no_split(tmp_path, run):
    arm, log = run
    plain = tmp_path / "plain.jsonl"
    plain.write_text(
        "".join(
            json.dumps({k: v for k, v in json.loads(line).items() if not k.endswith("_ns")
                        or k == "t_ns"}, separators=(",", ":")) + "\n"
            for line in Path(log).read_text().splitlines()
        )
    )  # fmt: skip
    document = fold_acceptance(arm, [str(plain)]).to_json()
    assert document["warm"]["step_split"] is None
    assert all(leg["step_split"] is None for leg in document["legs"])
    assert "no step carried draft_ns or verify_ns" in markdown_record(document)


def test_every_presenter_shows_it(run):
    document = fold_acceptance(*run[:1], [run[1]]).to_json()
    text = terminal(document, width=120, details=True)
    assert "Step split: our step time into drafting, verifying and the rest" in text
    # Two requests: a resample draws request 2 (verifying 60%, rest 20%, drafting 20% of its
    # 20 ms steps) or request 3 (50%, 40%, 10% of 10 ms) twice or once each, so the intervals
    # run between the two requests' own shares.
    assert (
        "our warm step 16.7ms: verifying 58.0% [50.0%, 60.0%], rest 24.0% [20.0%, 40.0%], "
        "drafting 18.0% [10.0%, 20.0%]"
    ) in text
    assert "Step split" not in terminal(document, width=120)  # the first screen stays the answer
    markdown = markdown_record(document)
    assert "## Step split" in markdown and "| warm | 2 | 8 | 16.7ms |" in markdown
    assert b'<section id="step-split">' in page(document)


def test_against_an_oracle_that_reports_drafting_the_line_sets_them_side_by_side(run, capsys):
    arm, log = run
    assert main([arm, log, "--vs", f"llamacpp={LV4}", "--details"]) in (0, 1)
    out = capsys.readouterr().out
    assert "our warm step 16.7ms" in out
    assert "llamacpp reports drafting 628us per draft call" in out
    assert "; ours 3ms a step" in out


@pytest.mark.parametrize("native", [True, False])
def test_the_first_steps_parts_come_before_the_window_and_are_left_out(tmp_path, native):
    """A request whose first step verified for 50 ms (the prompt's forward, before its first
    step's time) and whose three later steps, 10 ms apart, draft 2 ms and verify 6 ms each: the
    window holds the later three steps' parts only, so drafting is 2 ms, verifying 6 ms and the
    rest 2 ms a step. Averaging the first step in (the mean of 50, 6, 6, 6 ms is 17 ms a step)
    would put verifying past the step and call the parts not adding up. A second line at the
    first one's time, written after it (n), is not the first."""
    from native_switch import native_switch

    start = T0_NS + 100 * MS
    rows = [("00000000000000a1", start, 1, 0, 50 * MS)]
    rows += [("00000000000000a1", start + k * 10 * MS, 1, 2 * MS, 6 * MS) for k in (1, 2, 3)]
    arm, log = tmp_path / "arm.json", tmp_path / "steps.jsonl"
    arm.write_text(json.dumps({"legs": [leg(T0_S, T0_S + 1, run=2)]}))
    log.write_text(timed_lines(rows))
    with native_switch(native):
        split = fold_acceptance(str(arm), [str(log)]).to_json()["legs"][0]["step_split"]
    assert split["intervals"] == 3 and split["requests"] == 1
    assert (split["step_s"], split["draft_s"], split["verify_s"], split["rest_s"]) == approx(
        (0.010, 0.002, 0.006, 0.002)
    )
    assert split["adds_up"] is True
    # the first step's time shared by a later line (written after it): still the first
    tied = [rows[0], ("00000000000000a1", start, 1, 2 * MS, 6 * MS), *rows[1:]]
    log.write_text(timed_lines(tied))
    with native_switch(native):
        split = fold_acceptance(str(arm), [str(log)]).to_json()["legs"][0]["step_split"]
    # 4 intervals (one of 0 ms) over 30 ms; the four later lines' parts: 8 and 24 ms
    assert split["intervals"] == 4
    assert (split["step_s"], split["draft_s"], split["verify_s"]) == approx(
        (0.030 / 4, 0.008 / 4, 0.024 / 4)
    )
