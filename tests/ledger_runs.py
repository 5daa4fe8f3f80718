"""Runs to keep in a ledger: real folds of the toy gate, and small documents built by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from fold.cli import main

ROOT = Path(__file__).resolve().parent.parent
ARM = str(ROOT / "fixtures" / "our-arm.json")
STEPS = str(ROOT / "fixtures" / "steps.jsonl")
VLLM = str(ROOT / "fixtures" / "oracles" / "vllm-gate-arm.json")


def fold_document(tmp_path: Path, capsys, *extra: str) -> dict[str, Any]:
    """The toy gate folded with ``extra`` arguments, its JSON document as --json writes it."""
    out = tmp_path / f"run-{len(list(tmp_path.glob('run-*.json')))}.json"
    assert main([ARM, STEPS, "--json", str(out), *extra]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return orjson.loads(out.read_bytes())


def document(
    accept_rate: float,
    interval: tuple[float, float] | None,
    *,
    tok_s: float = 100.0,
    per_position: list[float] | None = None,
) -> dict[str, Any]:
    """A minimal fold-acceptance/5 document with a warm fold's A/P (and its interval)."""
    warm: dict[str, Any] = {
        "accept_rate": accept_rate,
        "accept_rate_ci": None if interval is None else list(interval),
        "output_throughput_tok_s": tok_s,
        "per_position": per_position or [accept_rate],
    }
    return {"format": "fold-acceptance/5", "warm": warm, "all": dict(warm)}
