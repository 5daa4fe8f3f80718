"""Hand-built gate runs with known step times, shared by the cadence, trace and markdown tests.

Every figure the tests expect is worked out by hand in their comments from the times here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

T0_S = 1_764_000_000  # a leg start, whole seconds since the epoch
T0_NS = T0_S * 1_000_000_000
MS = 1_000_000
S = 1_000_000_000
WRITER_A = "00000000000000a1"
WRITER_B = "00000000000000b2"


@dataclass(frozen=True)
class Row:
    w: str
    t_ns: int
    seq: int
    proposed: int = 4
    accepted: int = 2


def step_lines(rows: list[Row]) -> str:
    """The rows as v1 lines in the writers' layout, each writer counting its lines from 0."""
    counters: dict[str, int] = {}
    lines = []
    for row in rows:
        n = counters.get(row.w, 0)
        counters[row.w] = n + 1
        lines.append(
            f'{{"v":1,"w":"{row.w}","n":{n},"t_ns":{row.t_ns},"pid":{int(row.w, 16)},'
            f'"seq":{row.seq},"proposed":{row.proposed},"accepted":{row.accepted}}}\n'
        )
    return "".join(lines)


def leg(start_s: float, end_s: float, run: int, completion_tokens: int = 100) -> dict:
    secs = end_s - start_s
    return {
        "run": run,
        "finish_reason": "length",
        "prompt_tokens": 10,
        "completion_tokens": completion_tokens,
        "secs": secs,
        "tok_s": completion_tokens / secs,
        "generate_start_unix": start_s,
        "generate_end_unix": end_s,
    }


def one_stall_rows(start_ns: int = T0_NS) -> list[Row]:
    """One request: first step 3 s after the leg starts, then a step every 50 ms (40 of
    them), one 2 s gap, 20 more steps 50 ms apart; the leg ends 2 s after the last step.
    The 11th line proposed nothing (it still counts in the cadence)."""
    times = [start_ns + 3 * S + k * 50 * MS for k in range(41)]
    times += [times[-1] + 2 * S + k * 50 * MS for k in range(21)]
    return [
        Row(WRITER_A, t, seq=1, proposed=0 if index == 10 else 4, accepted=0 if index == 10 else 2)
        for index, t in enumerate(times)
    ]


def two_pace_rows(start_ns: int) -> list[Row]:
    """Two concurrent requests in one batch loop of writer A from 0.5 s into the leg: seq 1
    steps every 20 ms for 2 s (101 lines), seq 2 every 40 ms for 2.8 s (71 lines); where both
    step, their rows share one t_ns as a batch's rows do."""
    rows = []
    for k in range(141):  # ticks of 20 ms from 0.5 s to 3.3 s
        t = start_ns + 500 * MS + k * 20 * MS
        if k <= 100:
            rows.append(Row(WRITER_A, t, seq=1))
        if k % 2 == 0:
            rows.append(Row(WRITER_A, t, seq=2))
    return rows


def write_run(directory: Path, legs: list[dict], rows: list[Row]) -> tuple[str, str]:
    arm = directory / "arm.json"
    log = directory / "steps.jsonl"
    arm.write_text(json.dumps({"legs": legs}))
    log.write_text(step_lines(rows))
    return str(arm), str(log)


def stall_and_pace_run(directory: Path) -> tuple[str, str]:
    """Leg 0 (cold, run 1): nothing. Leg 1 (run 2, 10 s): ``one_stall_rows``. Leg 2 (run 2,
    4 s, starting at 20 s): ``two_pace_rows``."""
    legs = [
        leg(T0_S - 30, T0_S - 29, run=1),
        leg(T0_S, T0_S + 10, run=2),
        leg(T0_S + 20, T0_S + 24, run=2),
    ]
    cold = [Row(WRITER_B, (T0_S - 30) * S + 500 * MS, seq=7)]
    rows = cold + one_stall_rows() + two_pace_rows(T0_NS + 20 * S)
    return write_run(directory, legs, rows)
