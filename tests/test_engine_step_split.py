"""The step split on real llama.cpp runs with the hook's timed record (``pytest -m engine``).

Every step line of the patched engines carries ``draft_ns`` and ``verify_ns``; each step's two
parts fit, within the stated tolerance, in the interval since its request's step before (the
step time, as the cadence measures it); and the fold's split equals the definition applied to
the lines with plain loops, its parts and rest adding up to its step time.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from fold.api import fold_acceptance
from fold.cli import main as cli
from fold.folding.step_split import TOLERANCE_NS, TOLERANCE_SHARE

pytestmark = pytest.mark.engine

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llamacpp"
sys.path.insert(0, str(EXAMPLE))

import gate_server  # noqa: E402
import gate_speculative  # noqa: E402


@pytest.fixture(scope="module")
def spec_run(tmp_path_factory, llamacpp_bin_dir, gguf_models) -> Path:
    out = tmp_path_factory.mktemp("spec-split")
    common = [
        "--bin-dir",
        str(llamacpp_bin_dir),
        "--models",
        str(gguf_models),
        "--out-dir",
        str(out),
    ]
    assert gate_speculative.main([*common, "--prompts", "2", "--repeat", "3"]) == 0
    return out


@pytest.fixture(scope="module")
def server_run(tmp_path_factory, llamacpp_bin_dir, gguf_models) -> Path:
    out = tmp_path_factory.mktemp("server-split")
    common = [
        "--bin-dir",
        str(llamacpp_bin_dir),
        "--models",
        str(gguf_models),
        "--out-dir",
        str(out),
    ]
    shape = ["--prompts", "2", "--repeat", "2", "--parallel", "2", "--concurrency", "2"]
    assert gate_server.main([*common, *shape, "--log", "steps-%p.jsonl"]) == 0
    return out


def lines_by_request(paths: list[Path]) -> dict[tuple, list[dict]]:
    found: dict[tuple, list[dict]] = defaultdict(list)
    for path in paths:
        for text in path.read_text().splitlines():
            row = json.loads(text)
            found[(row["w"], row["seq"])].append(row)
    for rows in found.values():
        rows.sort(key=lambda row: (row["t_ns"], row["n"]))
    return found


def assert_every_step_fits(requests: dict[tuple, list[dict]]) -> int:
    """Each step after a request's first: drafting + verifying within the interval since the
    request's step before, to the split's tolerance. Returns the steps checked."""
    checked = 0
    for rows in requests.values():
        for row in rows:
            assert isinstance(row["draft_ns"], int) and isinstance(row["verify_ns"], int), row
            assert row["draft_ns"] >= 0 and row["verify_ns"] > 0, row
        for before, row in itertools.pairwise(rows):
            interval = row["t_ns"] - before["t_ns"]
            parts = row["draft_ns"] + row["verify_ns"]
            assert parts <= interval + TOLERANCE_SHARE * interval + TOLERANCE_NS, (before, row)
            checked += 1
    return checked


def reference_split(requests: dict[tuple, list[dict]]) -> dict[str, float]:
    """The split's definition with loops: per request, each part's mean over the steps after
    its first (whose parts come before the decode window) times its intervals, pooled over the
    intervals. The rows are in (t_ns, n) order and every step carries both parts."""
    intervals = decode = draft = verify = 0.0
    for rows in requests.values():
        if len(rows) < 2:
            continue
        steps = len(rows) - 1
        intervals += steps
        decode += rows[-1]["t_ns"] - rows[0]["t_ns"]
        inside = rows[1:]
        draft += sum(row["draft_ns"] for row in inside) / len(inside) * steps
        verify += sum(row["verify_ns"] for row in inside) / len(inside) * steps
    step = decode / intervals
    return {
        "step_s": step / 1e9,
        "draft_s": draft / intervals / 1e9,
        "verify_s": verify / intervals / 1e9,
        "rest_s": (step - (draft + verify) / intervals) / 1e9,
    }


def assert_split_adds_up(split: dict) -> None:
    assert list(split["measured"]) == ["draft", "verify"]
    total = split["draft_s"] + split["verify_s"] + split["rest_s"]
    assert total == pytest.approx(split["step_s"], rel=1e-12)
    assert split["rest_s"] >= -split["tolerance_s"] and split["adds_up"] is True
    assert split["draft_s"] > 0 and split["verify_s"] > 0


def warm_requests(requests: dict[tuple, list[dict]], document: dict) -> dict[tuple, list[dict]]:
    """The requests of the warm legs, by their windows (a process is one leg)."""
    warm_windows = [
        (leg["window_start_ns"], leg["window_end_ns"]) for leg in document["legs"] if leg["warm"]
    ]
    return {
        key: rows
        for key, rows in requests.items()
        if any(start <= rows[0]["t_ns"] <= end for start, end in warm_windows)
    }


def test_speculative_simple_every_step_carries_both_parts_and_they_fit(spec_run):
    requests = lines_by_request([spec_run / "steps.jsonl"])
    assert len(requests) == 6  # one request per process
    assert assert_every_step_fits(requests) > 100


def test_speculative_simple_split_is_the_definition_and_adds_up(spec_run, capsys):
    requests = lines_by_request([spec_run / "steps.jsonl"])
    result = fold_acceptance(spec_run / "our-arm.json", [str(spec_run / "steps.jsonl")])
    document = result.to_json()
    warm = document["warm"]["step_split"]
    assert_split_adds_up(warm)
    expected = reference_split(warm_requests(requests, document))
    for name, value in expected.items():
        assert warm[name] == pytest.approx(value, rel=1e-9)
    # The step time is the cadence's: the inverse of its pooled decode steps/s.
    assert warm["step_s"] == pytest.approx(1 / document["warm"]["cadence"]["decode_steps_per_s"])
    for leg in document["legs"]:
        assert_split_adds_up(leg["step_split"])
    # The command shows it under --details.
    arm = str(spec_run / "our-arm.json")
    assert cli([arm, str(spec_run / "steps.jsonl"), "--details"]) == 0
    out = capsys.readouterr().out
    assert "Step split: our step time into drafting, verifying and the rest" in out
    assert "our warm step " in out


def test_server_every_step_carries_both_parts_and_they_fit(server_run):
    paths = sorted(server_run.glob("steps-*.jsonl"))
    requests = lines_by_request(paths)
    assert assert_every_step_fits(requests) > 20
    result = fold_acceptance(server_run / "our-arm.json", [str(p) for p in paths])
    assert_split_adds_up(result.to_json()["warm"]["step_split"])
