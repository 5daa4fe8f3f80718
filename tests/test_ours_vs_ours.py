"""Two runs of ours side by side: the worked example by hand, a run against itself, and the
other run's row against its own standalone fold."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import orjson
import pytest

from fold.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "fixtures" / "ours-vs-ours"
SEED = 20_261_201  # the default --seed
RESAMPLES = 1000


def arm(name: str) -> str:
    return str(EXAMPLE / name / "our-arm.json")


def log(name: str) -> str:
    return str(EXAMPLE / name / "steps.jsonl")


AFTER_VS_BEFORE = [arm("after"), log("after"), "--vs", f"before={arm('before')}",
                   "--vs-log", f"before={log('before')}"]  # fmt: skip


def run_json(capsys, *argv: str) -> dict:
    assert main([*argv, "--json", "-"]) == 0
    return orjson.loads(capsys.readouterr().out)


# ----------------------------------------------------------------------------------------------
# The worked example, by hand from the files
# ----------------------------------------------------------------------------------------------


def by_hand(name: str) -> dict:
    """The example's figures from its files with the standard library only: a line's leg is
    named by its label (the prompt) and its seq (2 requests per run, seqs from 1)."""
    record = json.loads(Path(arm(name)).read_text())
    lines = [json.loads(line) for line in Path(log(name)).read_text().splitlines()]
    legs = record["legs"]
    repeats = record["config"]["repeats"]

    def leg_of(line: dict) -> int:
        return int(line["leg"].split("-")[1]) * repeats + (line["seq"] + 1) // 2 - 1

    warm = [i for i, leg in enumerate(legs) if leg["run"] > 1]
    drafted = [line for line in lines if leg_of(line) in warm and line["proposed"] > 0]
    steps = len(drafted)
    proposed = sum(line["proposed"] for line in drafted)
    accepted = sum(line["accepted"] for line in drafted)
    times = defaultdict(list)
    for line in lines:
        times[(leg_of(line), line["seq"])].append(line["t_ns"])

    def ns(seconds: float) -> int:  # the gate's stamps are whole microseconds
        return round(seconds * 1_000_000) * 1_000

    first = tail = window = decode = intervals = 0
    gaps = set()
    for (leg, _seq), stamps in times.items():
        if leg not in warm:
            continue
        start, end = ns(legs[leg]["generate_start_unix"]), ns(legs[leg]["generate_end_unix"])
        stamps.sort()
        first += stamps[0] - start
        tail += end - stamps[-1]
        window += end - start
        decode += stamps[-1] - stamps[0]
        intervals += len(stamps) - 1
        gaps |= {b - a for a, b in itertools.pairwise(stamps)}
    per_leg_positions = {
        leg: [sum(1 for line in drafted if leg_of(line) == leg and line["accepted"] > i)
              for i in range(4)]
        for leg in warm
    }  # fmt: skip
    per_leg_steps = {leg: sum(1 for line in drafted if leg_of(line) == leg) for leg in warm}
    return {
        "warm": warm,
        "S": steps,
        "P": proposed,
        "A": accepted,
        "length": 1 + accepted / steps,
        "tok_s": statistics.median(legs[i]["tok_s"] for i in warm),
        "leg_tok_s": [legs[i]["tok_s"] for i in warm],
        "f": first / window,
        "t": tail / window,
        "decode_steps_per_s": intervals / (decode / 1e9),
        "gaps": gaps,
        "positions": per_leg_positions,
        "leg_steps": per_leg_steps,
    }


@pytest.fixture(scope="module")
def hand() -> dict:
    return {name: by_hand(name) for name in ("after", "before")}


@pytest.fixture()
def document(capsys) -> dict:
    return run_json(capsys, *AFTER_VS_BEFORE)


def test_the_example_runs_as_made(hand) -> None:
    # every interval between a request's steps is its run's forward, exactly: 160 and 200 us
    assert hand["after"]["gaps"] == {160_000}
    assert hand["before"]["gaps"] == {200_000}
    assert hand["after"]["warm"] == hand["before"]["warm"] == [1, 2, 4, 5, 7, 8, 10, 11]


def test_factors_are_the_hand_computed_ones(document, hand) -> None:
    block = document["comparison"]
    rows = {row["name"]: row for row in block["rows"]}
    assert [row["name"] for row in block["rows"]] == ["ours", "before"]
    for name, side in (("ours", hand["after"]), ("before", hand["before"])):
        assert (rows[name]["steps"], rows[name]["proposed"], rows[name]["accepted"]) == (
            side["S"], side["P"], side["A"])  # fmt: skip
        assert rows[name]["output_throughput_tok_s"] == side["tok_s"]
    gap = block["gaps"]["before"]
    r = hand["after"]["tok_s"] / hand["before"]["tok_s"]
    af = hand["after"]["length"] / hand["before"]["length"]
    assert gap["ratio"] == pytest.approx(r, rel=1e-12)
    assert gap["acceptance_factor"] == pytest.approx(af, rel=1e-12)
    assert gap["speed_factor"] == pytest.approx(r / af, rel=1e-12)
    assert gap["ci_basis"] == dict.fromkeys(
        ("ratio", "acceptance_factor", "speed_factor"), "both_arms"
    )


def test_the_cadence_split_is_the_hand_computed_one(document, hand) -> None:
    speed = document["comparison"]["speed"]["before"]
    a, b = hand["after"], hand["before"]
    # both runs measured: decode steps/s is 1 / forward on each side, so the factor is 200/160
    assert a["decode_steps_per_s"] == pytest.approx(6250) and b["decode_steps_per_s"] == 5000
    assert speed["decode_factor"] == pytest.approx(1.25, rel=1e-12)
    assert speed["steady_factor"] == pytest.approx(1.25, rel=1e-12)  # no stalls: s = 0
    runs = document["runs"]["before"]
    assert runs["decode_factor"] == pytest.approx(1.25, rel=1e-12)
    assert runs["decode_factor_ci"] == pytest.approx([1.25, 1.25], rel=1e-12)
    for side, key in ((a, "shares"), (b, "other_shares")):
        assert speed[key]["before_first_step"] == pytest.approx(side["f"], rel=1e-12)
        assert speed[key]["tail"] == pytest.approx(side["t"], rel=1e-12)
        assert speed[key]["stalls"] == 0
    log_sf = math.log(document["comparison"]["gaps"]["before"]["speed_factor"])
    parts = speed["parts"]
    assert parts["steps"] == pytest.approx(math.log(1.25) / log_sf, rel=1e-9)

    def outside(side: dict, part: str) -> float:
        # a side's time outside steady decoding, log(1 - f - t), shared in proportion
        return side[part] / (side["f"] + side["t"]) * math.log(1 - side["f"] - side["t"])

    for part, key in (("f", "before_first_step"), ("t", "tail")):
        expected = (outside(a, part) - outside(b, part)) / log_sf
        assert parts[key] == pytest.approx(expected, rel=1e-9)
        assert speed["sides"]["ours"][key] == pytest.approx(outside(a, part) / log_sf)
        assert speed["sides"]["before"][key] == pytest.approx(-outside(b, part) / log_sf)
    assert parts["stalls"] == 0
    assert sum(parts.values()) == pytest.approx(1, abs=1e-12)
    assert parts["rest"] == pytest.approx(
        1 - parts["steps"] - parts["before_first_step"] - parts["tail"], abs=1e-12
    )


def stage_one_picks(warm: list[int], legs: int) -> np.ndarray:
    """The bootstrap's first stage as documented: warm legs drawn with replacement from the
    seed's first stream; paired runs share the seed, so they draw the same legs."""
    streams = np.random.SeedSequence(SEED).spawn(1 + legs)
    rng = np.random.default_rng(streams[0])
    return np.asarray(warm)[rng.integers(0, len(warm), size=(RESAMPLES, len(warm)))]


def test_the_ratio_and_per_position_intervals_are_the_hand_computed_ones(document, hand) -> None:
    warm = hand["after"]["warm"]
    picks = stage_one_picks(warm, 12)
    record = {name: json.loads(Path(arm(name)).read_text())["legs"] for name in hand}
    tok_s = {name: np.array([leg["tok_s"] for leg in legs]) for name, legs in record.items()}
    ratios = np.median(tok_s["after"][picks], axis=1) / np.median(tok_s["before"][picks], axis=1)
    expected = np.quantile(ratios, [0.025, 0.975])
    gap = document["comparison"]["gaps"]["before"]
    assert gap["ratio_ci"] == pytest.approx(list(expected), rel=1e-12)
    rows = document["runs"]["before"]["per_position"]
    for position in range(4):
        shares = {}
        for name, side in hand.items():
            counts = np.zeros(12)
            steps = np.zeros(12)
            for leg in warm:
                counts[leg] = side["positions"][leg][position]
                steps[leg] = side["leg_steps"][leg]
            shares[name] = counts[picks].sum(axis=1) / steps[picks].sum(axis=1)
            pooled = sum(side["positions"][leg][position] for leg in warm) / side["S"]
            assert rows[position]["ours" if name == "after" else "other"] == pytest.approx(pooled)
        low, high = np.quantile(shares["after"] - shares["before"], [0.025, 0.975])
        assert rows[position]["difference_ci"] == pytest.approx([low, high], rel=1e-9, abs=1e-15)


def test_the_verdict_in_plain_words(document) -> None:
    gap = document["comparison"]["gaps"]["before"]
    af_low, af_high = gap["acceptance_factor_ci"]
    sf_low, sf_high = gap["speed_factor_ci"]
    r_low, r_high = gap["ratio_ci"]
    assert af_high < 1 < sf_low and r_low < 1 < r_high
    expected = (
        f"acceptance fell {(1 - gap['acceptance_factor']) * 100:.1f}% "
        f"[{(1 - af_high) * 100:.1f}, {(1 - af_low) * 100:.1f}]; "
        f"steps are {(gap['speed_factor'] - 1) * 100:.1f}% faster "
        f"[{(sf_low - 1) * 100:.1f}, {(sf_high - 1) * 100:.1f}]; "
        f"no net change: {(gap['ratio'] - 1) * 100:+.1f}% "
        f"[{(r_low - 1) * 100:+.1f}%, {(r_high - 1) * 100:+.1f}%]"
    )
    assert gap["verdict"] == expected
    assert document["runs"]["before"]["verdict"] == expected
    # the same verdict as codes: each part's interval, read above, says which way it went
    assert document["runs"]["before"]["changes"] == {
        "acceptance": "fell",  # af's interval wholly below 1
        "steps": "faster",  # sf's wholly above
        "net": "unchanged",  # r's holds 1
    }
    # the split's own kind: r's interval holds 1, the first of the split's rules
    assert (gap["verdict_kind"], gap["dominant"]) == ("not_distinguishable", "none")


def test_the_example_pairs_and_has_one_workload(document, hand) -> None:
    runs = document["runs"]["before"]
    assert runs["pairing"] == {"paired": True, "reasons": []}
    assert runs["workload_differences"] == []
    assert runs["resampling"] == "paired"
    assert runs["resampling_text"].startswith("paired: ")
    pairs = runs["pairs"]
    assert [pair["index"] for pair in pairs] == list(range(12))
    before = json.loads(Path(arm("before")).read_text())["legs"]
    after = json.loads(Path(arm("after")).read_text())["legs"]
    for pair, a, b in zip(pairs, after, before, strict=True):
        assert pair["tok_s"]["difference"] == pytest.approx(a["tok_s"] - b["tok_s"])
    warm_diffs = sorted(pairs[i]["tok_s"]["difference"] for i in hand["after"]["warm"])
    summary = runs["pair_summary"]["tok_s"]
    assert summary["pairs"] == 8
    assert summary["median"] == pytest.approx((warm_diffs[3] + warm_diffs[4]) / 2)
    assert (summary["min"], summary["max"]) == (warm_diffs[0], warm_diffs[-1])


def test_the_table_markdown_and_json_carry_the_verdict(capsys) -> None:
    document = run_json(capsys, *AFTER_VS_BEFORE)
    verdict = document["comparison"]["gaps"]["before"]["verdict"]
    assert main([*AFTER_VS_BEFORE, "--markdown", "-"]) == 0
    record = capsys.readouterr().out
    assert f"- **vs before**: {verdict}" in record
    assert "## ours against before" in record and "### Paired legs (ours - before)" in record
    completed = subprocess.run(
        [sys.executable, "-m", "fold.cli", *AFTER_VS_BEFORE, "--details"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "COLUMNS": "80", "TERM": "xterm-256color"},
    )  # fmt: skip
    assert max(len(line) for line in completed.stdout.splitlines()) <= 80
    flat = " ".join(completed.stdout.split())
    assert " ".join(f"verdict: {verdict}".split()) in flat
    assert "decode steps/s, both measured: ours / before = 1.250 [1.250, 1.250]" in flat
    assert "same workload as before, as far as the records tell" in flat


# ----------------------------------------------------------------------------------------------
# A run against itself
# ----------------------------------------------------------------------------------------------


def test_a_run_against_itself_is_exactly_one(capsys) -> None:
    document = run_json(capsys, arm("before"), log("before"), "--vs", f"same={arm('before')}",
                        "--vs-log", f"same={log('before')}")  # fmt: skip
    gap = document["comparison"]["gaps"]["same"]
    assert gap["ratio"] == gap["acceptance_factor"] == gap["speed_factor"] == 1.0
    for key in ("ratio_ci", "acceptance_factor_ci", "speed_factor_ci"):
        assert gap[key] == [1.0, 1.0]
    runs = document["runs"]["same"]
    for pair in runs["pairs"]:
        for figure in ("accept_rate", "mean_acceptance_length", "tok_s"):
            assert pair[figure]["difference"] == 0
    for figure, summary in runs["pair_summary"].items():
        assert summary["min"] == summary["max"] == summary["median"] == 0, figure
    for row in [*runs["per_position"], *runs["histogram"]]:
        assert row["difference"] == 0 and row["difference_ci"] == [0.0, 0.0]
    assert runs["decode_factor"] == 1.0 and runs["decode_factor_ci"] == [1.0, 1.0]
    speed = document["comparison"]["speed"]["same"]
    assert speed["leg_factor"] == speed["decode_factor"] == speed["steady_factor"] == 1.0
    assert speed["parts"] is None  # no speed change to split
    assert gap["verdict"] == (
        "acceptance unchanged: +0.0% [+0.0%, +0.0%]; step speed unchanged: +0.0% "
        "[+0.0%, +0.0%]; no net change: +0.0% [+0.0%, +0.0%]"
    )


# ----------------------------------------------------------------------------------------------
# The other run's row is its own fold
# ----------------------------------------------------------------------------------------------


def test_the_other_runs_row_is_its_standalone_fold(capsys, document) -> None:
    alone = run_json(capsys, arm("before"), log("before"))
    assert document["runs"]["before"]["fold"] == alone
    row = next(row for row in document["comparison"]["rows"] if row["name"] == "before")
    warm = alone["warm"]
    assert (row["steps"], row["proposed"], row["accepted"]) == (
        warm["steps"], warm["proposed"], warm["accepted"])  # fmt: skip
    for figure in ("accept_rate", "mean_acceptance_length", "output_throughput_tok_s",
                   "completion_tokens_per_step"):  # fmt: skip
        assert row[figure] == warm[figure]
        assert row[f"{figure}_ci"] == warm[f"{figure}_ci"]


def test_runs_that_do_not_pair_are_drawn_apart_and_say_why(capsys) -> None:
    # the toy gate's other recorded run: 3 prompts x 3 runs, 3 requests, 64 tokens
    other = [str(ROOT / "fixtures" / "our-arm.json"), str(ROOT / "fixtures" / "steps.jsonl")]
    document = run_json(capsys, arm("after"), log("after"), "--vs", f"old={other[0]}",
                        "--vs-log", f"old={other[1]}")  # fmt: skip
    runs = document["runs"]["old"]
    assert runs["pairing"] == {"paired": False, "reasons": ["ours has 12 legs, old 9"]}
    assert runs["pairs"] is None
    assert runs["resampling"] == "independent"
    assert runs["resampling_text"] == (
        f"independent: each run drawn on its own stream (seeds {SEED}, {SEED + 1})"
    )
    differences = runs["workload_differences"]
    for expected in ("config.concurrency: 2 in ours, 3 in old",
                     "config.max_tokens: 128 in ours, 64 in old",
                     "config.prompts: 4 in ours, 3 in old", "legs: 12 in ours, 9 in old",
                     "warm legs: 8 in ours, 6 in old",
                     "requests per warm leg (concurrency): 2 in ours, 3 in old"):  # fmt: skip
        assert expected in differences
    # drawn on the seed plus its place among the --vs arms, it is still its standalone fold
    alone = run_json(capsys, *other, "--seed", str(SEED + 1))
    assert runs["fold"] == alone


# ----------------------------------------------------------------------------------------------
# Refusals and errors
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        ([f"old={arm('before')}"], 2, "attach its step logs with --vs-log old=LOG"),
        ([f"old={arm('before')}", "--vs-log", "x=y.jsonl"], 2, "no --vs arm is named 'x'"),
        ([f"old:vllm={arm('before')}", "--vs-log", f"old={log('before')}"], 2,
         "step logs go with an arm record of ours"),
        ([f"old:ours={ROOT / 'fixtures' / 'oracles' / 'vllm-arm.json'}", "--vs-log",
          f"old={log('before')}"], 2, "--vs old: "),
        ([f"old={arm('before')}", "--vs-log", "old=/nonexistent/steps.jsonl"], 2,
         "--vs old: /nonexistent/steps.jsonl"),
        ([f"old={arm('before')}", "--vs-log", f"old={log('after')}"], 1,
         "--vs old: 8 warm leg(s) have no verify step"),
        ([f"ours={arm('before')}", "--vs-log", f"ours={log('before')}"], 2, "is taken"),
        ([f"old={ROOT / 'fixtures' / 'our-arm.json'}", "--vs-log",
          f"old={ROOT / 'fixtures' / 'steps.jsonl'}", "--paired"], 1,
         "--paired: the legs of ours and old cannot be paired: ours has 12 legs, old 9"),
    ],
)  # fmt: skip
def test_refusals_name_the_arm(capsys, extra, code, message) -> None:
    assert main([arm("after"), log("after"), "--vs", *extra]) == code
    captured = capsys.readouterr()
    assert message in captured.err
    assert "Traceback" not in captured.err


def test_paired_runs_pass_paired(capsys) -> None:
    assert main([*AFTER_VS_BEFORE, "--paired", "--json", "-"]) == 0
    assert orjson.loads(capsys.readouterr().out)["runs"]["before"]["pairs"]


# ----------------------------------------------------------------------------------------------
# The generator is the toy gate
# ----------------------------------------------------------------------------------------------


def test_the_generator_writes_the_shipped_example(tmp_path) -> None:
    subprocess.run([sys.executable, str(ROOT / "examples" / "make_ours_vs_ours.py"),
                    str(tmp_path)], check=True)  # fmt: skip
    for name in ("before", "after"):
        for file in ("our-arm.json", "steps.jsonl"):
            assert (tmp_path / name / file).read_bytes() == (EXAMPLE / name / file).read_bytes()


@pytest.mark.parametrize("name", ["before", "after"])
def test_the_real_toy_gate_makes_the_same_runs(toy_engine, tmp_path, name) -> None:
    shipped = json.loads(Path(arm(name)).read_text())
    options = shipped["engine_options"]
    config = shipped["config"]
    command = [sys.executable, str(ROOT / "examples" / "gate.py"), "--engine", str(toy_engine),
               "--out-dir", str(tmp_path), "--max-tokens", str(config["max_tokens"])]  # fmt: skip
    for key in ("prompts", "repeats", "concurrency", "k", "seed"):
        command += [f"--{key}", str(config[key])]
    for key, value in options.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    subprocess.run(command, check=True, capture_output=True)
    real = json.loads((tmp_path / "our-arm.json").read_text())
    assert real["config"] == config and real["engine_options"] == options
    for ran, made in zip(real["legs"], shipped["legs"], strict=True):
        # the clock is real there, so only the times differ
        for key in ("run", "finish_reason", "prompt_tokens", "completion_tokens", "leg", "prompt"):
            assert ran[key] == made[key]
        for key in ("requests", "rows", "steps", "proposed", "accepted", "emitted"):
            assert ran["engine_counters"][key] == made["engine_counters"][key]


def test_a_record_that_reads_as_both_asks_which(tmp_path, capsys) -> None:
    record = json.loads(Path(arm("before")).read_text())
    record["metrics"] |= {"vllm:spec_decode_num_drafts": 10,
                          "vllm:spec_decode_num_draft_tokens": 40,
                          "vllm:spec_decode_num_accepted_tokens": 20}  # fmt: skip
    both = tmp_path / "both.json"
    both.write_text(json.dumps(record))
    assert main([arm("after"), log("after"), "--vs", f"x={both}"]) == 2
    assert "reads both as an arm record of ours" in capsys.readouterr().err
    # said which, it is ours
    assert main([arm("after"), log("after"), "--vs", f"x:ours={both}", "--vs-log",
                 f"x={log('before')}", "--json", "-"]) == 0  # fmt: skip
    assert "x" in orjson.loads(capsys.readouterr().out)["runs"]


def test_workload_blocks_and_prompts_are_compared_key_by_key(tmp_path, capsys) -> None:
    # the layout of vllm.cpp's gate: workload, speculative_config and prompts at the top
    paths = {}
    for name, max_tokens, k, prompts in (("after", 64, 7, ["a", "b"]),
                                         ("before", 128, 7, ["a", "c", "d"])):  # fmt: skip
        record = json.loads(Path(arm(name)).read_text())
        record["workload"] = {"max_tokens": max_tokens, "num_speculative_tokens": k}
        record["speculative_config"] = {"num_speculative_tokens": k}
        record["prompts"] = prompts
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(record))
    vs = ["--vs", f"before={paths['before']}", "--vs-log", f"before={log('before')}"]
    document = run_json(capsys, str(paths["after"]), log("after"), *vs)
    assert document["runs"]["before"]["workload_differences"] == [
        "workload.max_tokens: 64 in ours, 128 in before",
        "prompts: 2 in ours, 3 in before",
    ]
    assert document["runs"]["before"]["pairing"]["paired"]  # the legs still pair


VLLMCPP = ROOT / "fixtures" / "vllmcpp"


def test_a_run_of_ours_without_a_log_is_folded_from_its_counters(capsys) -> None:
    # vllm.cpp's record carries the engine's three counters on every leg
    document = run_json(capsys, str(VLLMCPP / "our-arm.json"), str(VLLMCPP / "steps.jsonl"),
                        "--vs", f"counted={VLLMCPP / 'our-arm.json'}")  # fmt: skip
    alone = run_json(capsys, str(VLLMCPP / "our-arm.json"))  # its counters-only fold
    runs = document["runs"]["counted"]
    assert runs["fold"] == alone
    gap = document["comparison"]["gaps"]["counted"]
    # the hook log and the counters agree leg by leg, so the split is exactly 1
    assert gap["ratio"] == gap["acceptance_factor"] == gap["speed_factor"] == 1.0
    assert runs["per_position"] is None and runs["histogram"] is None
    assert runs["decode_factor"] is None
    assert runs["lines"].startswith("no step log")
    assert all(pair["accept_rate"]["difference"] == 0 for pair in runs["pairs"])
    lacks = document["comparison"]["speed"]["counted"]["oracle_lacks"]
    assert lacks[0].startswith("counted was folded from its counters, without a step log")


def test_a_record_without_log_or_counters_says_what_to_add(capsys) -> None:
    assert main([arm("after"), log("after"), "--vs", f"old={arm('before')}"]) == 2
    err = capsys.readouterr().err
    assert "no step log and no engine counters" in err
    assert "attach its step logs with --vs-log old=LOG" in err


MASK = (1 << 64) - 1


def splitmix_draws(key: int, row: int, requests: int) -> list[int]:
    """Row ``row`` of a leg's request draws as docs/intervals.md documents them: draw i is
    SplitMix64's output after i + 1 steps from the leg's key, scaled to [0, requests) by the
    high half of its 128-bit product with ``requests``."""
    found = []
    for i in range(row * requests, (row + 1) * requests):
        z = (key + (i + 1) * 0x9E3779B97F4A7C15) & MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        found.append((z * requests) >> 64)
    return found


def test_the_acceptance_and_speed_factor_intervals_are_the_hand_computed_ones(
    document, hand
) -> None:
    warm = hand["after"]["warm"]
    picks = stage_one_picks(warm, 12)
    keys = [int(stream.generate_state(1, np.uint64)[0])
            for stream in np.random.SeedSequence(SEED).spawn(13)[1:]]  # fmt: skip
    lengths, speeds = {}, {}
    for name in ("after", "before"):
        lines = [json.loads(line) for line in Path(log(name)).read_text().splitlines()]
        requests: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
        for line in lines:
            leg = int(line["leg"].split("-")[1]) * 3 + (line["seq"] + 1) // 2 - 1
            sums = requests[leg][line["seq"]]
            sums[0] += line["proposed"] > 0
            sums[1] += line["accepted"] if line["proposed"] > 0 else 0
        ordered = {leg: [found[seq] for seq in sorted(found)] for leg, found in requests.items()}
        length = np.empty(RESAMPLES)
        for row in range(RESAMPLES):
            steps = accepted = 0
            for column, leg in enumerate(picks[row]):
                # the m-th draw of a leg (row by row) takes the leg's m-th redraw of requests
                copy = int(np.sum(picks[:row] == leg) + np.sum(picks[row, :column] == leg))
                for request in splitmix_draws(keys[leg], copy, len(ordered[leg])):
                    steps += ordered[leg][request][0]
                    accepted += ordered[leg][request][1]
            length[row] = 1 + accepted / steps
        lengths[name] = length
        legs = json.loads(Path(arm(name)).read_text())["legs"]
        speeds[name] = np.median(np.array([leg["tok_s"] for leg in legs])[picks], axis=1)
    factor = lengths["after"] / lengths["before"]
    ratio = speeds["after"] / speeds["before"]
    gap = document["comparison"]["gaps"]["before"]
    assert gap["acceptance_factor_ci"] == pytest.approx(
        list(np.quantile(factor, [0.025, 0.975])), rel=1e-12
    )
    assert gap["speed_factor_ci"] == pytest.approx(
        list(np.quantile(ratio / factor, [0.025, 0.975])), rel=1e-12
    )


def runs_verdict(ours, other, intervals=None) -> str:
    """The gap's verdict as the comparison makes it for another run of ours, at 2%."""
    from fold.compare.gap import attribute_gap

    return attribute_gap(ours, other, 0.02, intervals, of_ours=True).verdict


def test_plain_verdict_wording() -> None:
    from fold.compare.gap_intervals import BOTH_ARMS, SplitIntervals
    from fold.inputs.oracles import arm_from_counts

    def arms(tok_s: float, accepted: int):
        return arm_from_counts("ours", "ours", tok_s=tok_s, steps=100, proposed=400,
                               accepted=accepted)  # fmt: skip

    old = arm_from_counts("old", "ours", tok_s=100.0, steps=100, proposed=400, accepted=200)
    # 1 + A/S: 3.2 against 3.0 (rose 6.7%); r = 0.9, so steps are 0.9 / (3.2/3) - 1 slower
    assert runs_verdict(arms(90.0, 220), old) == (
        "acceptance rose 6.7%; steps are 15.6% slower; net 10.0% slower"
    )
    assert runs_verdict(arms(101.0, 201), old) == (
        "acceptance unchanged: +0.3% (tolerance 2%); step speed unchanged: +0.7% (tolerance 2%); "
        "no net change: +1.0% (tolerance 2%)"
    )
    found = SplitIntervals((0.85, 0.95), (1.05, 1.09), (0.80, 0.88),
                           dict.fromkeys(("ratio", "acceptance_factor", "speed_factor"),
                                         BOTH_ARMS))  # fmt: skip
    assert runs_verdict(arms(90.0, 220), old, found) == (
        "acceptance rose 6.7% [5.0, 9.0]; steps are 15.6% slower [12.0, 20.0]; "
        "net 10.0% slower [5.0, 15.0]"
    )


def test_changes_beyond_twice_read_as_multiples() -> None:
    from fold.inputs.oracles import arm_from_counts

    old = arm_from_counts("old", "ours", tok_s=1000.0, steps=100, proposed=400, accepted=200)
    new = arm_from_counts("ours", "ours", tok_s=100.0, steps=100, proposed=400, accepted=200)
    # same 1 + A/S, a tenth of the tok/s: steps and net are 10x slower, not "90.0% slower"
    assert runs_verdict(new, old) == (
        "acceptance unchanged: +0.0% (tolerance 2%); steps are 10.00x slower; net 10.00x slower"
    )


def test_requests_are_said_to_pair_only_when_each_leg_holds_the_same_ones(tmp_path, capsys):
    """A paired resample draws a leg's requests by their place in it, so the label says the
    requests pair only when both legs hold the same request ids in the same places."""
    steps = Path(log("after")).read_bytes()
    again = tmp_path / "again.jsonl"  # the same steps from another writer (a new process)
    again.write_bytes(steps.replace(b'"w":"00000000000000b0"', b'"w":"00000000000000c0"'))
    moved = tmp_path / "moved.jsonl"  # the same counts under other request ids
    moved.write_bytes(
        re.sub(rb'"seq":(\d+)', lambda found: b'"seq":%d' % (int(found[1]) + 100), steps)
    )
    document = run_json(capsys, arm("after"), log("after"),
                        "--vs", f"again={arm('after')}", "--vs-log", f"again={again}",
                        "--vs", f"moved={arm('after')}", "--vs-log", f"moved={moved}")  # fmt: skip
    runs = document["runs"]
    assert (runs["again"]["resampling"], runs["moved"]["resampling"]) == (
        "paired",
        "paired_by_legs",
    )
    assert runs["again"]["resampling_text"] == (
        "paired: the same legs (and requests within them) drawn on both sides"
    )
    assert runs["moved"]["resampling_text"] == (
        "paired by legs: the same legs drawn on both sides; the requests within them are not "
        "matched (leg 0 holds 2 request(s): 1, 2 in ours, 2 request(s): 101, 102 in moved)"
    )
    # The draws do pair by place: the same requests drawn on both sides give every resample
    # the same acceptance, so the factor's interval is 1 exactly.
    assert document["comparison"]["gaps"]["again"]["acceptance_factor_ci"] == [1.0, 1.0]
