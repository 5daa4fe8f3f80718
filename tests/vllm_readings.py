"""A real vLLM output read by ``fold-acceptance --vs``, set against vLLM's own figures.

``vllm_sources`` says what vLLM's outputs state (read without the project's readers, and
checked against each other); this runs the command a user runs and lists every figure of the
oracle row that differs from them. An empty list is the reader agreeing with vLLM.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from vllm_sources import Own

from fold.cli import main as cli


def read_oracle(our_arm: Path, steps: Path, output: Path) -> tuple[int, dict | None, str]:
    """Exit status, the oracle's row of ``--json`` (None unless the status is 0), and stderr."""
    # --json - writes bytes to stdout's buffer: a text stream over bytes, as a terminal has.
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli([str(our_arm), str(steps), "--vs", f"vllm={output}", "--json", "-"])
    out.flush()
    if code != 0:
        return code, None, err.getvalue()
    return code, json.loads(out.buffer.getvalue())["comparison"]["rows"][-1], err.getvalue()


def mismatches(row: dict, own: Own, *, steps_printed: bool = True) -> list[str]:
    """Every figure of ``row`` that is not vLLM's own.

    ``steps_printed`` False for log lines, which print no S: the reading's S must then hold
    vLLM's true S within the bound it states (or be "not recorded")."""
    found = []

    def check(field: str, expected) -> None:
        if row[field] != expected:
            found.append(f"{field}: read {row[field]!r}, vLLM's own {expected!r}")

    check("proposed", own.proposed)
    check("accepted", own.accepted)
    if steps_printed:
        check("steps", own.steps)
    elif row["steps"] is not None and own.steps is not None:
        bound = ((row["approximate"] or {}).get("bounds") or {}).get("steps", 0)
        if abs(row["steps"] - own.steps) > bound:
            found.append(f"steps: read {row['steps']} ± {bound}, vLLM's own {own.steps}")
    expected_pos = None if own.per_position is None else list(own.per_position)
    check("per_position", expected_pos)
    check("output_throughput_tok_s", own.tok_s)
    return found


def reading_problems(our_arm: Path, steps: Path, output: Path, own: Own, **kwargs) -> list[str]:
    """What is wrong with the reading of ``output``: a refusal, or the figures that differ."""
    code, row, stderr = read_oracle(our_arm, steps, output)
    if row is None:
        return [f"{output.name}: fold-acceptance exited {code}: {stderr.strip()}"]
    return [f"{output.name}: {problem}" for problem in mismatches(row, own, **kwargs)]
