"""What both llama.cpp gates share: prompts, the binaries and models, and the arm record."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import build  # noqa: E402  (a sibling script, not a package)

# Short prompts the tiny models' vocabulary tokenizes; what they generate is noise either way.
PROMPTS = (
    "the quick brown fox jumps over the lazy dog",
    "once upon a time there was a small engine",
    "speculative decoding drafts tokens and the target verifies them",
    "a gate runs each prompt several times and keeps the warm runs",
    "tell me about the weather in spring",
    "numbers one two three four five six seven",
    "Every verify step writes one line to the log.",
    "what is the capital of the country by the sea",
)

# Speculative decoding with the draft model, greedy so runs repeat exactly.
SPEC_ARGS = ["--spec-type", "draft-simple", "--temp", "0", "--seed", "1"]


def speculative_args(binary: str, model: dict, args) -> list[str]:
    """Both engines' command line up to their own options: the target and draft models,
    greedy speculative decoding, at most ``--draft-max`` drafted tokens a step."""
    return [
        binary,
        "-m",
        str(model["target"]),
        "-md",
        str(model[args.draft]),
        *SPEC_ARGS,
        "--spec-draft-n-max",
        str(args.draft_max),
    ]


def binaries(path: Path | None, jobs: int = 2) -> dict[str, str]:
    """The patched binaries: from --bin-dir when given, else built (or found) in the cache."""
    if path is not None:
        return {target: str(path / target) for target in build.TARGETS}
    return build.ensure_built(jobs=jobs)


def models(directory: Path | None, out_dir: Path) -> dict[str, Path]:
    if directory is not None:
        return {role: directory / f"{role}.gguf" for role in ("target", "draft", "unrelated")}
    import make_models  # needs the engine extra (gguf, numpy) only when models are made here

    return make_models.make_models(out_dir / "models")


def unix_now() -> float:
    """Wall clock at the microsecond the arm record keeps (the fold widens it by 500 ns)."""
    return round(time.time_ns() / 1e9, 6)


def arm_record(engine: str, config: dict, legs: list[dict]) -> dict:
    """An arm record shaped like the benchmark gate's: warm legs are run > 1."""
    warm = [leg for leg in legs if leg["run"] > 1]
    throughput = statistics.median(leg["tok_s"] for leg in warm) if warm else None
    return {
        "arm": "ours",
        "engine": engine,
        "config": config,
        "legs": legs,
        "metrics": {"output_throughput_tok_s": throughput},
        "warm_legs": len(warm),
        "cold_legs_discarded": len(legs) - len(warm),
    }
