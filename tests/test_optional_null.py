"""An optional key of the step line written as ``null`` reads as the key absent, in both
readers, as ``instrument/FORMAT.md`` states; any other JSON type makes the line bad."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from native_switch import native_switch

from fold.api import fold_acceptance
from fold.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("emitted", "draft_ns", "verify_ns", "leg")


def gate(directory: Path, extra: dict) -> tuple[str, list[str]]:
    """One leg of one request, three steps; ``extra`` added to every line."""
    start = 1_800_000_000
    arm = directory / "arm.json"
    leg = {"run": 2, "finish_reason": "length", "prompt_tokens": 5, "completion_tokens": 10,
           "secs": 1.0, "tok_s": 9.0, "generate_start_unix": start,
           "generate_end_unix": start + 10}  # fmt: skip
    arm.write_text(json.dumps({"legs": [leg]}))
    lines = []
    for n in range(3):
        row = {"v": 1, "w": "a", "n": n, "t_ns": (start + 1) * 10**9 + n * 10**6, "pid": 1,
               "seq": 0, "proposed": 4, "accepted": 2, "emitted": 3, "draft_ns": 1000,
               "verify_ns": 2000}  # fmt: skip
        row.update(extra)
        lines.append(json.dumps({k: v for k, v in row.items() if v is not ...}))
    log = directory / "steps.jsonl"
    log.write_text("\n".join(lines) + "\n")
    return str(arm), [str(log)]


@pytest.mark.parametrize("name", OPTIONAL)
@pytest.mark.parametrize("native", [True, False])
def test_null_reads_as_absent(tmp_path, name, native):
    null_dir, absent_dir = tmp_path / "null", tmp_path / "absent"
    null_dir.mkdir(), absent_dir.mkdir()
    with native_switch(native):
        with_null = fold_acceptance(*gate(null_dir, {name: None}), resamples=0).to_json()
        without = fold_acceptance(*gate(absent_dir, {name: ...}), resamples=0).to_json()
    for document in (with_null, without):
        document.pop("files"), document.pop("arm", None)
    assert with_null == without


@pytest.mark.parametrize("name", ["draft_ns", "verify_ns", "emitted"])
@pytest.mark.parametrize("native", [True, False])
def test_another_type_makes_the_line_bad(tmp_path, name, native):
    with native_switch(native), pytest.raises(InputError, match=r"steps\.jsonl:1"):
        fold_acceptance(*gate(tmp_path, {name: "12"}), resamples=0)


def test_the_format_says_null_is_absent():
    text = (ROOT / "instrument" / "FORMAT.md").read_text()
    rule = re.search(r"^- `null`[^\n]*(\n  [^\n]*)*", text, re.MULTILINE)
    assert rule is not None, "FORMAT.md states no rule for null"
    sentence = rule.group(0)
    assert "absent" in sentence
    for name in OPTIONAL:
        assert f"`{name}`" in sentence
