"""Step logs the page tests make from the recorded fixtures (shared by test_page and
test_browser, so neither test module imports the other)."""

from __future__ import annotations

import json
from pathlib import Path


def timed_copy(source: Path, target: Path) -> Path:
    """The steps of ``source`` with a drafting and a verifying duration on each drafted step,
    so the fold has a step split (no recorded fixture carries them)."""
    lines = []
    for line in source.read_text().splitlines():
        step = json.loads(line)
        if step.get("proposed"):
            step |= {"draft_ns": 40_000, "verify_ns": 90_000}
        lines.append(json.dumps(step, separators=(",", ":")))
    target.write_text("\n".join(lines) + "\n")
    return target
