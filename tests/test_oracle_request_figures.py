"""An oracle's per-request figures and acceptance by output position, made by the fold code that
makes ours, and set beside ours in the comparison's step figures.

Held to figures worked by hand (a small vLLM record file written here in the format of
``fixtures/oracles/vllm-requests/``), to a plain computation from the recorded real run's
per-step arrays, and to our own fold of the same steps (a property).
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import ONE_SECOND_LEG as LEG
from strategies import canonical_line, leg_bounds_ns

from fold.api import LogFold, fold_acceptance
from fold.cli import main as cli
from fold.compare.step_figures import WARM_LEGS_ONLY, fold_step_figures
from fold.folding.oracle_steps import fold_oracle
from fold.inputs.arm import arm_from_document
from fold.inputs.oracles import load_oracle
from fold.inputs.oracles.request_steps import DETAILED, OracleLeg, OracleRequest, OracleSteps
from fold.present.step_figures import request_rows, step_figures_markdown
from fold.present.step_figures_page import step_figures_html

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = ROOT / "fixtures" / "oracles" / "vllm-requests" / "offline" / "requests.jsonl"
OURS = ROOT / "fixtures" / "oracles" / "vllm-real" / "ours"


def record(leg: int, run: int, request: str, accepted: list[int], drafted: list[int], **metrics):
    """One offline record (``examples/vllm/offline.py``'s line) with k = 4; the totals and the
    histogram are given by hand in ``metrics``."""
    return {
        "leg": leg,
        "run": run,
        "record": 0,
        "finish_reason": "length",
        "prompt_tokens": 8,
        "completion_tokens": metrics.pop("completion_tokens"),
        "secs": 1.0,
        "tok_s": 100.0,
        "request_id": request,
        "spec_decode_metrics": {
            **metrics,
            "num_spec_tokens": 4,
            "per_step_accepted": accepted,
            "per_step_drafted": drafted,
        },
    }


# By hand. Leg 0 (run 1, cold): request a. Warm legs 1 and 2:
# - b: 26 steps drafting 4 and accepting 4 (each emits 5: step i starts at 5 i, positions
#   0..125, bucket [0, 128)), then 14 accepting 0 of 4 (each emits 1: positions 130..143,
#   bucket [128, 256)). In the other order they would start at 0..13 and 14, 19, ..., 139.
# - c: accepted 0, 3, 0, 2 of drafted 4, 4, 0, 2: positions 0, 1, 5, 6, all in bucket 0; the
#   third step's drafts a grammar invalidated (drafted 0): it moves the position by 1 but is
#   not a drafted step (S = 3 in the fold, 4 in vLLM's count).
# - d: accepted 1, 1 of 4, 4: positions 0, 2.
HAND = [
    record(0, 1, "a", [2], [4], completion_tokens=4, acceptance_histogram=[0, 0, 1, 0, 0],
           num_spec_steps=1, num_accepted_draft_tokens=2, num_draft_tokens=4,
           mean_acceptance_length=3.0, draft_acceptance_rate=0.5),
    record(1, 2, "b", [4] * 26 + [0] * 14, [4] * 40, completion_tokens=145,
           acceptance_histogram=[14, 0, 0, 0, 26], num_spec_steps=40,
           num_accepted_draft_tokens=104, num_draft_tokens=160, mean_acceptance_length=3.6,
           draft_acceptance_rate=0.65),
    record(1, 2, "c", [0, 3, 0, 2], [4, 4, 0, 2], completion_tokens=10,
           acceptance_histogram=[2, 0, 1, 1, 0], num_spec_steps=4, num_accepted_draft_tokens=5,
           num_draft_tokens=10, mean_acceptance_length=2.25, draft_acceptance_rate=0.5),
    record(2, 3, "d", [1, 1], [4, 4], completion_tokens=5, acceptance_histogram=[0, 2, 0, 0, 0],
           num_spec_steps=2, num_accepted_draft_tokens=2, num_draft_tokens=8,
           mean_acceptance_length=2.0, draft_acceptance_rate=0.25),
]  # fmt: skip


def hand_file(tmp_path: Path) -> Path:
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in HAND))
    return path


def test_a_hand_worked_file_by_request_and_by_position(tmp_path: Path):
    arm = load_oracle("v", hand_file(tmp_path))
    fold = fold_oracle(arm.requests)
    assert fold is not None
    spread = fold.warm.per_request
    assert spread["requests"] == 3 and spread["requests_without_drafts"] == 0
    # Pooled over b, c, d: A 104 + 5 + 2, P 160 + 10 + 8, S 40 + 3 + 2 (drafted steps).
    assert spread["pooled"]["accept_rate"] == pytest.approx(111 / 178)
    assert spread["pooled"]["mean_acceptance_length"] == pytest.approx(1 + 111 / 45)
    # Per request A/P 0.65, 1/2, 1/4 and 1 + A/S 3.6, 1 + 5/3, 2.
    assert spread["per_request_mean"]["accept_rate"] == pytest.approx((0.65 + 0.5 + 0.25) / 3)
    assert spread["per_request_mean"]["mean_acceptance_length"] == pytest.approx(
        (3.6 + 8 / 3 + 2) / 3
    )
    rates = spread["spread"]["accept_rate"]
    assert (rates["min"], rates["p50"], rates["max"]) == (0.25, 0.5, 0.65)
    assert rates["p25"] == pytest.approx(0.375)  # halfway between 0.25 and 0.5
    assert [(r["leg"], r["seq"]) for r in spread["lowest"]] == [(2, "d"), (1, "c"), (1, "b")]
    positions = fold.warm.by_output_position
    assert positions is not None
    buckets = [
        (b["from"], b["to"], b["requests"], b["steps"], b["proposed"], b["accepted"])
        for b in positions["buckets"]
    ]
    # bucket 0: b's 26 steps (P = A = 104), c's 3 drafted (P 10, A 5), d's 2 (P 8, A 2).
    assert buckets == [(0, 128, 3, 31, 122, 111), (128, 256, 1, 14, 56, 0)]
    # Two buckets: the weighted line through both points, whatever the weights.
    assert positions["slope"] == pytest.approx(0 - 111 / 122)
    assert positions["falling"] is None  # no intervals: not judged
    assert "recorded verify steps" in positions["position"]
    # The cadence still needs times the engine did not record.
    assert fold.warm["cadence"] is None
    assert all(leg["cadence"] is None for leg in fold.legs)


def fold_steps(tmp_path: Path):
    return load_oracle("v", hand_file(tmp_path)).requests


def test_a_fold_of_all_legs_says_why_it_has_neither_block(tmp_path: Path):
    fold = fold_oracle(load_oracle("v", hand_file(tmp_path)).requests)
    assert fold is not None
    figures = fold_step_figures(fold, fold.all, "all_legs")
    assert figures is not None
    assert figures["per_request"] is None and figures["by_output_position"] is None
    assert figures["not_recorded"]["per_request"] == WARM_LEGS_ONLY
    assert figures["not_recorded"]["by_output_position"] == WARM_LEGS_ONLY
    warm = fold_step_figures(fold, fold.warm, "warm_legs", steps=fold_steps(tmp_path))
    assert warm is not None and "positions" not in warm["not_recorded"]  # every token placed
    document = {"comparison": {"rows": [{"name": "all", "step_figures": figures}]}}
    assert dict(request_rows(document)[1])["falling"] == [("not recorded", "")]


def test_the_hand_worked_file_beside_ours_in_every_output(tmp_path: Path, capsys):
    out = tmp_path / "doc.json"
    code = cli(
        [str(OURS / "our-arm.json"), str(OURS / "steps.jsonl"), "--vs",
         f"vllm={hand_file(tmp_path)}", "--json", str(out), "--bootstrap", "200"]
    )  # fmt: skip
    assert code in (0, 1)
    document = json.loads(out.read_text())
    rows = {row["name"]: row["step_figures"] for row in document["comparison"]["rows"]}
    assert rows["ours"]["per_request"] == document["warm"]["per_request"]
    assert rows["ours"]["by_output_position"] == document["warm"]["by_output_position"]
    oracle = rows["vllm"]
    assert oracle["per_request"]["pooled"]["accept_rate"] == pytest.approx(111 / 178)
    assert [b["steps"] for b in oracle["by_output_position"]["buckets"]] == [31, 14]
    assert oracle["by_output_position"]["buckets"][1]["accept_rate_ci"] == [0.0, 0.0]
    names, body = request_rows(document)
    table = dict(body)
    place = names.index("vllm")
    assert table["A/P, pooled"][place][0] == "62.4%"  # 111 / 178
    assert table["A/P, per-request mean"][place][0] == "46.7%"  # 1.4 / 3
    assert table["1+A/S, per-request mean"][place][0] == "2.76"  # (3.6 + 8 / 3 + 2) / 3
    assert table["lowest A/P 1"][place] == ("25.0% of 8", "leg 2, id d")
    assert table["A/P, tokens 128-256 out"][place] == ("0.0% (14 steps)", "[0.0%, 0.0%]")
    assert table["slope of A/P by position"][place][0] == "-91.0 pts"  # -111 / 122
    # ours stops at its last bucket: the oracle's second reads "no steps" there only if ours
    # has no step in it
    ours = names.index("ours")
    assert table["A/P, tokens 0-128 out"][ours][0].startswith("45.3%")
    assert table["A/P, tokens 128-256 out"][ours][0] == "no steps"
    assert "Per request and by output position, side by side" in step_figures_markdown(document)
    assert "lowest A/P 1" in step_figures_html(document)
    capsys.readouterr()
    cli([str(OURS / "our-arm.json"), str(OURS / "steps.jsonl"), "--vs",
         f"vllm={hand_file(tmp_path)}", "--details"])  # fmt: skip
    shown = capsys.readouterr().out
    assert "Per request and by output position, side by side" in shown
    assert "leg 2, id d" in shown


# --- the recorded real run, against a plain computation from its per-step arrays ------------


def plain_figures(path: Path) -> tuple[dict[str, Any], list[tuple[int, int, int, int]]]:
    """Per-request means, spread and buckets of the warm requests (run > 1), from the raw
    arrays: loops only."""
    rates, lengths = [], []
    buckets: dict[int, list[int]] = {}
    for text in path.read_text().splitlines():
        row = json.loads(text)
        if row["run"] <= 1:
            continue
        metrics = row["spec_decode_metrics"]
        steps = proposed = accepted = position = 0
        for a, d in zip(metrics["per_step_accepted"], metrics["per_step_drafted"], strict=True):
            if d > 0:
                bucket = 0
                while position >= 128 << bucket:
                    bucket += 1
                sums = buckets.setdefault(bucket, [0, 0, 0, set()])
                sums[0] += 1
                sums[1] += d
                sums[2] += a
                sums[3].add(row["request_id"])
                steps, proposed, accepted = steps + 1, proposed + d, accepted + a
            position += a + 1
        rates.append(accepted / proposed)
        lengths.append(1 + accepted / steps)
    cuts = statistics.quantiles(rates, n=100, method="inclusive")
    figures = {
        "rate": sum(rates) / len(rates),
        "length": sum(lengths) / len(lengths),
        "spread": {"min": min(rates), "max": max(rates), "p10": cuts[9], "p50": cuts[49],
                   "p90": cuts[89]},
        "requests": len(rates),
    }  # fmt: skip
    shown = [(b, s[0], s[1], s[2], len(s[3])) for b, s in sorted(buckets.items())]
    return figures, shown


def test_the_recorded_run_against_its_per_step_arrays():
    expected, buckets = plain_figures(OFFLINE)
    fold = fold_oracle(load_oracle("vllm", OFFLINE).requests, resamples=100, seed=3)
    assert fold is not None
    spread = fold.warm.per_request
    assert spread["requests"] == expected["requests"] == 8
    assert spread["per_request_mean"]["accept_rate"] == pytest.approx(expected["rate"])
    assert spread["per_request_mean"]["mean_acceptance_length"] == pytest.approx(expected["length"])
    for key, value in expected["spread"].items():
        assert spread["spread"]["accept_rate"][key] == pytest.approx(value)
    low, high = spread["per_request_mean"]["accept_rate_ci"]
    assert low <= expected["rate"] <= high
    found = [
        (number, b["steps"], b["proposed"], b["accepted"], b["requests"])
        for number, b in enumerate(fold.warm.by_output_position["buckets"])
    ]
    assert found == buckets


def test_the_step_figures_say_how_many_output_tokens_no_recorded_step_placed():
    """vLLM records only steps that had drafts: the tokens of the others are in
    completion_tokens and in no step, so the positions are lower bounds, and the block says
    by how much (the recorded run's n-gram drafter often found no match)."""
    unplaced = total = 0
    for text in OFFLINE.read_text().splitlines():
        row = json.loads(text)
        if row["run"] > 1:
            emitted = sum(a + 1 for a in row["spec_decode_metrics"]["per_step_accepted"])
            unplaced += row["completion_tokens"] - 1 - emitted
            total += row["completion_tokens"] - 1
    arm = load_oracle("vllm", OFFLINE)
    fold = fold_oracle(arm.requests)
    assert fold is not None
    figures = fold_step_figures(fold, fold.warm, "warm_legs", steps=arm.requests)
    assert figures is not None
    assert figures["not_recorded"]["positions"].startswith(
        f"{unplaced} of the requests' {total} output tokens after the first"
    )
    assert (unplaced, total) == (330, 504)


# --- an oracle made of our own steps folds to our figures ------------------------------------

START, _ = leg_bounds_ns(LEG)
WRITER = "5f0c1a2b3c4d5e6f"

steps_strategy = st.lists(
    # proposed 0: a step whose drafts a grammar invalidated (the oracle's), a line without a
    # draft (ours): neither is a drafted step, both move the position by 1
    st.tuples(st.integers(0, 4), st.integers(0, 4)).map(lambda p: (p[0], min(p[0], p[1]))),
    min_size=1,
    max_size=70,
)


def ours_of(tmp_path: Path, requests: list[list[tuple[int, int]]], resamples: int):
    """Our fold of the requests' steps as one writer's log over one warm leg (no emitted)."""
    lines, n = [], 0
    for seq, steps in enumerate(requests):
        for place, (proposed, accepted) in enumerate(steps):
            row = {"v": 1, "w": WRITER, "n": n, "t_ns": START + 10_000 + 1000 * place + seq,
                   "pid": 1, "seq": seq, "proposed": proposed, "accepted": accepted}  # fmt: skip
            lines.append(canonical_line(row))
            n += 1
    path = tmp_path / "steps.jsonl"
    path.write_bytes(b"".join(raw + b"\n" for raw in reversed(lines)))
    fold = LogFold(arm_from_document([LEG]))
    fold.add_file(str(path))
    return fold.result(resamples=resamples, seed=7)


def oracle_of(requests: list[list[tuple[int, int]]], resamples: int):
    """The same steps as vLLM's detailed records of one warm leg (ids "0", "1", ...)."""
    made = []
    for seq, steps in enumerate(requests):
        drafted = tuple(p for p, _ in steps)
        accepted = tuple(a for _, a in steps)
        histogram = tuple(sum(a == j for a in accepted) for j in range(5))
        made.append(
            OracleRequest(
                id=str(seq),
                where="f:1",
                steps=len(steps),
                proposed=sum(drafted),
                accepted_total=sum(accepted),
                histogram=histogram,
                accepted=accepted,
                drafted=drafted,
                completion_tokens=1 + sum(a + 1 for a in accepted),
                finish_reason="stop",
            )
        )
    leg = OracleLeg(index=0, label=None, where="f:1", run=2, warm=True, tok_s=10.0, secs=1.0,
                    requests=tuple(made))  # fmt: skip
    steps = OracleSteps(source="v", where="f", level=DETAILED, max_draft=4, predicate="run > 1",
                        legs=(leg,))  # fmt: skip
    return fold_oracle(steps, resamples=resamples, seed=7)


def without_ids(spread: dict[str, Any]) -> dict[str, Any]:
    """The per-request block less the writer (ours: the log's; the oracle's: its file) and
    the id's type (ours an integer, the oracle's a string)."""
    lowest = [{**r, "w": None, "seq": str(r["seq"])} for r in spread["lowest"]]
    return {**spread, "lowest": lowest}


@settings(max_examples=25, deadline=None)
@given(
    requests=st.lists(steps_strategy, min_size=1, max_size=10),
    resamples=st.sampled_from([0, 30]),
)
def test_an_oracle_of_our_steps_gives_our_figures(tmp_path_factory, requests, resamples):
    """Where the definitions coincide (every step recorded, each emitting accepted + 1), the
    two folds agree figure for figure, intervals included: the requests sort alike (ids 0..9
    as integers and as strings), so the bootstrap draws the same. Only the words saying what
    a position counts differ."""
    # a warm leg without a drafted step: ours refuses it, the oracle's fold leaves it out
    assume(any(proposed for steps in requests for proposed, _ in steps))
    ours = ours_of(tmp_path_factory.mktemp("ours"), requests, resamples).to_json()["warm"]
    oracle = oracle_of(requests, resamples)
    assert oracle is not None
    theirs = oracle.to_json()["warm"]
    assert without_ids(theirs["per_request"]) == without_ids(ours["per_request"])
    positions = dict(theirs["by_output_position"])
    assert positions.pop("position") != ours["by_output_position"]["position"]
    assert positions == {k: v for k, v in ours["by_output_position"].items() if k != "position"}


# --- the engine's trace: its lines are in step order too ---------------------------------------

TRACE = ROOT / "fixtures" / "vllmcpp"
TRACE_LINE = re.compile(r"\[SPECTRACE\] req=(\d+) pos=(\d+)\s+k=(\d+) ns=(\d+) acc=(\d+)")


def test_the_trace_prints_each_request_s_steps_in_order_and_folds_by_position_as_the_hook():
    """vllm-cli prints a request's ``pos`` (its tokens before the step): in each file it grows
    by the step's ``ns`` from one line of the request to its next, so file order is step
    order. Folded by that order, the trace's per-request and by-position blocks are the hook
    log's of the same run (``fixtures/vllmcpp/steps.jsonl``), writer names aside."""
    stderr = sorted((TRACE / "stderr").glob("prompt-*.log"))
    checked = 0
    for path in stderr:
        last: dict[str, tuple[int, int]] = {}
        for text in path.read_text().splitlines():
            found = TRACE_LINE.search(text)
            if found is None:
                continue
            req, pos, _, ns, _ = (int(value) for value in found.groups())
            if req in last:
                assert pos == last[req][0] + last[req][1], f"{path}: req {req}"
                checked += 1
            last[req] = (pos, ns)
    assert checked > 200
    arm = str(TRACE / "our-arm.json")
    trace = fold_acceptance(arm, [str(p) for p in stderr], resamples=50).to_json()["warm"]
    hook = fold_acceptance(arm, [str(TRACE / "steps.jsonl")], resamples=50).to_json()["warm"]
    assert trace["by_output_position"] is not None
    words = trace["by_output_position"].pop("position")
    assert "in the order the engine printed them" in words
    assert words != hook["by_output_position"].pop("position")
    assert trace["by_output_position"] == hook["by_output_position"]
    assert without_ids(trace["per_request"]) == without_ids(hook["per_request"])
    assert trace["cadence"] is None  # still no times
