"""The whole loop: the example gate runs the toy engine, the fold reads what it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from fold.api import fold_acceptance

ROOT = Path(__file__).resolve().parents[1]


def test_fold_of_a_live_gate_run_equals_the_engines_own_counters(toy_engine, tmp_path):
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DFLASH_")}
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "gate.py"), "--prompts", "3", "--repeats", "3",
         "--concurrency", "4", "--seed", "11", "--out-dir", str(tmp_path),
         "--engine", str(toy_engine)],
        check=True,
        env=environment,
    )  # fmt: skip
    result = fold_acceptance(tmp_path / "our-arm.json", [str(tmp_path / "steps.jsonl")])
    record = orjson.loads((tmp_path / "our-arm.json").read_bytes())
    for figures, leg in zip(result.legs, record["legs"], strict=True):
        counters = leg["engine_counters"]
        assert figures["steps"] == counters["steps"]
        assert figures["proposed"] == counters["proposed"]
        assert figures["accepted"] == counters["accepted"]
        assert figures["emitted"] == counters["emitted"]
        assert len(figures["requests"]) == counters["requests"]
        assert figures["emitted_consistent"] is True
    assert result.fold.unattributed_steps == result.fold.ambiguous_steps == 0
    assert result.fold.torn_lines == result.fold.lost_lines == 0
    warm = [leg["engine_counters"] for leg in record["legs"] if leg["run"] > 1]
    assert result.warm["accepted"] == sum(counters["accepted"] for counters in warm)
    assert result.warm["steps"] == sum(counters["steps"] for counters in warm)
