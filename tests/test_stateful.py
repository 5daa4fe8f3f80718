"""A step log growing under several writers, folded after every change.

The state machine appends lines for several writers to one file (steps anywhere on the time
line, lost lines, writers dying mid-line so that a torn fragment ends the file or has the next
line glued to it) while the arm record gains legs. After each rule the file is folded by the
library and by the reference (``tests/reference.py``) from the model's own list of steps: the
reader, the attribution and the figures must agree with what was written, not with what was read.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from hypothesis import note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from reference import (
    FileRecord,
    ReferenceRefused,
    Step,
    differences,
    fold_records,
    with_request_rows,
    without_intervals,
)
from strategies import BASE_US, LABELS, STEP_LABELS, canonical_line, timestamps

from fold.api import fold_acceptance
from fold.errors import RefusedError
from fold.inputs.arm import arm_from_document

PREDICATE = "run > 1"


def warm(leg: dict[str, Any]) -> bool:
    return leg["run"] > 1


def leg(start_us: int, end_us: int, run: int, label: str | None) -> dict[str, Any]:
    value: dict[str, Any] = {
        "run": run,
        "secs": (end_us - start_us) / 1e6,
        "tok_s": 50.0 + run,
        "prompt_tokens": 10,
        "completion_tokens": 40,
        "finish_reason": "stop",
        "generate_start_unix": start_us / 1e6,
        "generate_end_unix": end_us / 1e6,
    }
    if label is not None:
        value["leg"] = label
    return value


class GrowingStepLog(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="fold-stateful-")
        self.path = os.path.join(self.directory, "steps.jsonl")
        open(self.path, "wb").close()
        self.legs = [
            leg(BASE_US, BASE_US + 20, 1, "cold"),
            leg(BASE_US + 30, BASE_US + 60, 2, None),
        ]
        self.writers: dict[str, dict[str, int]] = {}
        self.steps: list[Step] = []
        self.torn = 0
        self.ends_torn = False

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def _append(self, data: bytes) -> None:
        with open(self.path, "ab") as handle:
            handle.write(data)

    @rule(writer=st.integers(0, 2**64 - 1), pid=st.integers(1, 2**22))
    def new_writer(self, writer: int, pid: int) -> None:
        w = f"{writer:016x}"
        if w not in self.writers:
            self.writers[w] = {"pid": pid, "n": 0}

    def _row(self, data: st.DataObject) -> tuple[dict[str, Any], str]:
        w = data.draw(st.sampled_from(sorted(self.writers)), label="writer")
        proposed = data.draw(st.integers(0, 7), label="proposed")
        accepted = data.draw(st.integers(0, proposed), label="accepted")
        row = {
            "v": 1,
            "w": w,
            "n": self.writers[w]["n"],
            "t_ns": data.draw(timestamps(self.legs), label="t_ns"),
            "pid": self.writers[w]["pid"],
            "seq": data.draw(st.integers(0, 3), label="seq"),
            "proposed": proposed,
            "accepted": accepted,
            "emitted": data.draw(st.none() | st.integers(0, accepted + 1), label="emitted"),
            "leg": data.draw(st.none() | st.sampled_from(STEP_LABELS), label="label"),
        }
        self.writers[w]["n"] += 1
        return row, w

    @precondition(lambda self: self.writers)
    @rule(data=st.data(), count=st.integers(1, 4))
    def append_steps(self, data: st.DataObject, count: int) -> None:
        for _ in range(count):
            row, _ = self._row(data)
            self._append(canonical_line(row) + b"\n")
            self.steps.append(
                Step(**{key: row[key] for key in ("w", "n", "t_ns", "pid", "seq", "proposed",
                                                   "accepted", "emitted")}, label=row["leg"])
            )  # fmt: skip
            self.ends_torn = False

    @precondition(lambda self: self.writers)
    @rule(data=st.data())
    def lose_a_line(self, data: st.DataObject) -> None:
        """A failed write: the writer's counter moves on, nothing reaches the file."""
        w = data.draw(st.sampled_from(sorted(self.writers)), label="writer")
        self.writers[w]["n"] += 1

    @precondition(lambda self: self.writers)
    @rule(data=st.data())
    def writer_dies_mid_line(self, data: st.DataObject) -> None:
        """The writer's last write is cut short; the writer is gone."""
        row, w = self._row(data)
        line = canonical_line(row) + b"\n"
        cut = data.draw(st.integers(1, len(line) - 1), label="bytes written")
        self._append(line[:cut])
        del self.writers[w]
        # A torn line is a piece of the file between newlines that is not a whole line: a second
        # fragment right after the first extends the same torn line (its n is a lost line).
        if not self.ends_torn:
            self.torn += 1
        self.ends_torn = True

    @rule(
        layout=st.sampled_from(["gap", "adjacent", "overlap"]),
        duration=st.integers(0, 40),
        run=st.integers(1, 4),
        label=st.none() | st.sampled_from(LABELS),
    )
    def new_leg(self, layout: str, duration: int, run: int, label: str | None) -> None:
        last_end = round(self.legs[-1]["generate_end_unix"] * 1e6)
        start = {"gap": last_end + 7, "adjacent": last_end, "overlap": last_end - 3}[layout]
        self.legs.append(leg(start, start + duration, run, label))

    @invariant()
    def fold_equals_model(self) -> None:
        record = FileRecord(self.path, steps=list(self.steps), torn=self.torn)
        try:
            expected = fold_records(self.legs, warm, PREDICATE, [record], 32)
        except ReferenceRefused as reason:
            note(f"refused: {reason}")
            expected = None
        try:
            result = fold_acceptance(arm_from_document(self.legs), [self.path], resamples=0)
            actual = without_intervals(with_request_rows(result.to_json(), result))
        except RefusedError as error:
            assert expected is None, f"the library refused ({error}), the model did not"
            return
        assert expected is not None, "the model refuses, the library did not"
        actual["skipped_examples"] = []
        problems = differences(expected, actual)
        assert not problems, "\n".join(problems[:20])


GrowingStepLog.TestCase.settings = settings(
    settings.default,
    max_examples=max(5, settings.default.max_examples // 2),
    stateful_step_count=20,
)
test_growing_step_log = GrowingStepLog.TestCase
