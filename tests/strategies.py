"""Hypothesis generators of arm records and step logs, and the hypothesis profiles.

Profiles (select with the environment variable HYPOTHESIS_PROFILE; default ``ci``):

* ``ci``: few examples per property, so the suite stays fast on two cores;
* ``thorough``: many more examples, for a local hunt before a release.

Slow tests (one subprocess per example) take a fraction of the profile's count through
``scaled``.
"""

from __future__ import annotations

import json
import os
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

settings.register_profile(
    "ci",
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def scaled(fraction: float, *, at_least: int = 3) -> settings:
    """Settings for a test that runs ``fraction`` of the profile's examples."""
    return settings(max_examples=max(at_least, int(settings.default.max_examples * fraction)))


# Around 2025-11-29 in epoch microseconds: leg times are microseconds, step times nanoseconds.
BASE_US = 1_764_450_000_000_000
LABELS = ["warm", "cold", "a", "b"]
STEP_LABELS = [*LABELS, "elsewhere"]


@dataclass(frozen=True)
class Predicate:
    """A warm predicate as the library takes it (polars SQL) and as the reference evaluates it."""

    sql: str
    holds: Callable[[dict[str, Any]], bool]

    def __repr__(self) -> str:
        return f"Predicate({self.sql!r})"


PREDICATES = [
    Predicate("run > 1", lambda leg: leg["run"] > 1),
    Predicate("run >= 1", lambda leg: leg["run"] >= 1),
    Predicate("run > 2", lambda leg: leg["run"] > 2),
    Predicate("run = 1", lambda leg: leg["run"] == 1),
    Predicate("finish_reason = 'stop'", lambda leg: leg["finish_reason"] == "stop"),
    Predicate("tok_s > 100", lambda leg: leg["tok_s"] > 100),
    Predicate(
        "run > 1 AND finish_reason = 'length'",
        lambda leg: leg["run"] > 1 and leg["finish_reason"] == "length",
    ),
    Predicate("run <> 2 OR tok_s < 50", lambda leg: leg["run"] != 2 or leg["tok_s"] < 50),
]


def ns(us: int) -> int:
    return us * 1000


# Leg windows are widened by this much on each side (docs/decisions.md, "Leg windows").
WINDOW_SLACK_NS = 500
# One warm leg of one second, for tests that fold a handful of hand-written lines.
ONE_SECOND_LEG = {
    "run": 2,
    "secs": 1.0,
    "tok_s": 10.0,
    "prompt_tokens": 1,
    "completion_tokens": 4,
    "finish_reason": "stop",
    "generate_start_unix": 1764450000.0,
    "generate_end_unix": 1764450001.0,
}


def recorded_bounds_ns(leg: dict[str, Any]) -> tuple[int, int]:
    return (
        round(leg["generate_start_unix"] * 1_000_000) * 1000,
        round(leg["generate_end_unix"] * 1_000_000) * 1000,
    )


def leg_bounds_ns(leg: dict[str, Any]) -> tuple[int, int]:
    """The widened window, both ends included."""
    start, end = recorded_bounds_ns(leg)
    return start - WINDOW_SLACK_NS, end + WINDOW_SLACK_NS


@st.composite
def arm_legs(draw: st.DrawFn, max_legs: int = 5) -> list[dict[str, Any]]:
    """Legs with windows that are apart, adjacent (shared end point), overlapping, identical,
    nested or empty (start == end)."""
    count = draw(st.integers(1, max_legs))
    labelling = draw(st.sampled_from(["all", "none", "some"]))
    legs: list[dict[str, Any]] = []
    start = BASE_US + draw(st.integers(0, 10**6))
    end = start
    for index in range(count):
        if index:
            layout = draw(st.sampled_from(["gap", "adjacent", "overlap", "same", "inside"]))
            previous_start, previous_end = start, end
            if layout == "gap":
                start = previous_end + draw(st.integers(1, 50))
            elif layout == "adjacent":
                start = previous_end
            elif layout == "overlap":
                start = draw(st.integers(previous_start, previous_end))
            elif layout == "same":
                start = previous_start
            else:
                start = draw(st.integers(previous_start, previous_end))
        duration = draw(st.sampled_from([0, 1, 2]) | st.integers(0, 100))
        if index and layout == "same":
            end = previous_end
        elif index and layout == "inside":
            end = draw(st.integers(start, max(start, previous_end)))
        else:
            end = start + duration
        run = 1 if index == 0 else draw(st.sampled_from([1, 2, 2, 3, 4]))
        leg: dict[str, Any] = {
            "run": run,
            "secs": (end - start) / 1e6,
            "tok_s": draw(st.floats(1, 1000, allow_nan=False, allow_infinity=False)),
            "prompt_tokens": draw(st.integers(1, 100)),
            "completion_tokens": draw(st.integers(0, 200)),
            "finish_reason": draw(st.sampled_from(["stop", "length"])),
            "generate_start_unix": start / 1e6,
            "generate_end_unix": end / 1e6,
        }
        if labelling == "all" or (labelling == "some" and draw(st.booleans())):
            leg["leg"] = draw(st.sampled_from(LABELS))
        legs.append(leg)
    return legs


@st.composite
def arm_documents(
    draw: st.DrawFn, predicate: Predicate, *, consistent: bool | None = None
) -> dict[str, Any] | list[dict[str, Any]]:
    """An arm record; what it records about the throughput fold agrees with ``predicate``
    unless ``consistent`` is False (None: drawn, mostly agreeing)."""
    legs = draw(arm_legs())
    if consistent is None:
        consistent = draw(st.sampled_from([True] * 9 + [False]))
    warm = [index for index, leg in enumerate(legs) if predicate.holds(leg)]
    shape = draw(st.sampled_from(["list", "bare", "metrics", "metrics+count", "metrics+list"]))
    if shape == "list" and consistent:
        return legs
    document: dict[str, Any] = {"legs": legs}
    throughput = statistics.median([legs[i]["tok_s"] for i in warm]) if warm else None
    if shape != "bare" and throughput is not None:
        document["metrics"] = {"output_throughput_tok_s": throughput}
    if shape == "metrics+count":
        document["warm_legs"] = len(warm)
        document["cold_legs_discarded"] = len(legs) - len(warm)
    if shape == "metrics+list":
        document["warm_legs"] = warm
    if not consistent:
        wrong = draw(st.sampled_from(["throughput", "count", "cold"]))
        if wrong == "throughput":
            document["metrics"] = {"output_throughput_tok_s": (throughput or 100.0) * 1.001}
        elif wrong == "count":
            document["warm_legs"] = len(warm) + 1
        else:
            document["cold_legs_discarded"] = len(legs) - len(warm) + 1
    return document


def legs_of(document: dict[str, Any] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return document if isinstance(document, list) else document["legs"]


@st.composite
def timestamps(draw: st.DrawFn, legs: list[dict[str, Any]]) -> int:
    """A step time: on a window edge +-0/1 ns (often; the widened or the recorded edge),
    inside, between or outside the legs."""
    bounds = [leg_bounds_ns(leg) for leg in legs]
    first = min(start for start, _ in bounds)
    last = max(end for _, end in bounds)
    where = draw(st.sampled_from(["edge", "edge", "recorded edge", "inside", "between",
                                  "before", "after"]))  # fmt: skip
    if where in ("edge", "recorded edge"):
        index = draw(st.integers(0, len(legs) - 1))
        edges = bounds[index] if where == "edge" else recorded_bounds_ns(legs[index])
        return draw(st.sampled_from(edges)) + draw(st.sampled_from([-1, 0, 0, 1]))
    if where == "inside":
        start, end = draw(st.sampled_from(bounds))
        return draw(st.integers(start, end))
    if where == "between":
        return draw(st.integers(first, last))
    if where == "before":
        return first - draw(st.integers(1, 10**9))
    return last + draw(st.integers(1, 10**9))


STRING_IDS = ["a", "B", "", "é", "e\u0301", "日本", "\U0001f600", 'a"b', "0", "ab"]
"""String request ids: unsigned byte order differs from code points and case (``"B" < "a"``,
``"é"`` past ``"e\u0301"``), one needs an escape (a line the native pass defers), one is empty
and one reads like a number."""


def canonical_line(row: dict[str, Any]) -> bytes:
    """The writers' layout (FORMAT.md), built with the standard library's JSON encoder."""
    keys = ["v", "w", "n", "t_ns", "pid", "seq", "proposed", "accepted", "emitted", "draft_ns"]
    keys += ["verify_ns", "leg"]
    ordered = {key: row[key] for key in keys if row.get(key) is not None}
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# Numbers valid in JSON that no double holds (JSON sets no range): a reader must take them in
# a key it does not know, as it takes any other value there (FORMAT.md).
HUGE_NUMBERS = [
    b"1" + b"0" * 250 + b"e99",
    b"1e999",
    b"-1E+400",
    b"9" * 400,
    b"2.5e-999",
    b"1" * 5000,
]
_HUGE_PLACE = "\u0000huge"  # a string no row holds, replaced by the literal


def odd_line(row: dict[str, Any], rng: random.Random) -> bytes:
    """Another writer's shape: keys shuffled, spaces, and keys the reader must ignore (one
    sometimes holding a number beyond a double's range)."""
    items = [(key, value) for key, value in row.items() if value is not None]
    items.append(("future_key", {"x": [1, 2.5, None]}))
    huge = rng.random() < 0.3
    if huge:
        items.append(("big", [_HUGE_PLACE]))
    rng.shuffle(items)
    encoded = json.dumps(dict(items), ensure_ascii=False).encode("utf-8")
    if huge:
        placeholder = json.dumps(_HUGE_PLACE).encode()
        encoded = encoded.replace(placeholder, rng.choice(HUGE_NUMBERS))
    return encoded


BAD_LINES = [
    b"",
    b"   ",
    b"not json",
    b"[1, 2]",
    b'{"v":2,"w":"00000000000000ff","n":0}',
    b'{"v":1,"w":7}',
    b'{"v":1}',
    b"\xff\xfe",
]


# Counts at and past what FORMAT.md allows a step (2^16 tokens; beyond, the line is refused),
# and near 2^63, where a sum of two would wrap.
MAX_STEP_TOKENS = 2**16
LARGE_PROPOSALS = [MAX_STEP_TOKENS, MAX_STEP_TOKENS + 1, 2**31]
LARGE_EMITTED = [MAX_STEP_TOKENS, MAX_STEP_TOKENS + 1, 2**62, 2**63 - 1]
# A step's optional durations (FORMAT.md): absent (every log before them), or nanoseconds up
# to the longest a real step takes; and the largest allowed, where two in one request take its
# sum past 2^63 - 1 (the fold refuses it).
DURATION_VALUES = st.sampled_from([0, 1, 10**12]) | st.integers(0, 10**7)
DURATIONS = st.none() | DURATION_VALUES
LARGE_DURATIONS = [2**62, 2**63 - 1]


@dataclass
class StepLog:
    """Rows of a step log and the bytes they make."""

    rows: list[dict[str, Any]]
    lines: list[bytes]
    """Whole lines without their newline, in file order (glued fragments included)."""
    tail: bytes = b""
    """A torn last line (no newline), or nothing."""
    bad_lines: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def data(self) -> bytes:
        return b"".join(line + b"\n" for line in self.lines) + self.tail


@st.composite
def step_proposals(draw: st.DrawFn, extreme: int) -> st.SearchStrategy[int]:
    """How a log's steps propose: any count per step; one k on every drafted step (vLLM's
    fixed k: per position of the proposed equals vLLM's per position); or k with some steps
    proposing fewer (adaptive budgets, a drafter cut short), where the two differ."""
    k = draw(st.integers(1, 7))
    return draw(
        st.sampled_from(
            [
                st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7] * 4 + LARGE_PROPOSALS * extreme),
                st.sampled_from([0, k, k, k]),
                st.sampled_from([0, k, k, k]) | st.integers(1, k),
            ]
        )
    )


def draw_drafting(draw: st.DrawFn, proposals: st.SearchStrategy[int]) -> int:
    """A proposal of 1 to 7 in the log's style, drawn again until one is: a filter on the
    style with the large proposals rejected most draws and, now and then, failed Hypothesis's
    health check."""
    for _ in range(50):
        proposed = draw(proposals)
        if 0 < proposed <= 7:
            return proposed
    return 1


@st.composite
def step_rows(
    draw: st.DrawFn,
    legs: list[dict[str, Any]],
    *,
    seeded: bool = True,
    string_ids: bool = False,
) -> list[dict[str, Any]]:
    """Steps of 1-3 writers; each row's ``fate`` says whether it is written, lost or torn.

    ``seeded`` adds a step with a draft inside most legs, labelled with the leg's label, so that
    warm legs usually have steps (the fold refuses a warm leg without one). ``string_ids``
    mixes string request ids (``STRING_IDS``) among the integer ones.
    """
    writer_ids = draw(
        st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=3, unique=True).map(
            lambda ids: [f"{value:016x}" for value in ids]
        )
    )
    pids = {w: draw(st.integers(1, 2**22)) for w in writer_ids}
    # One log in eight may hold counts at or past the cap on a step, or near 2^63 (refused
    # logs are drawn again by most properties, so they stay rare).
    extreme = int(draw(st.integers(0, 7)) == 0)
    ids = st.integers(0, 4) | st.sampled_from(STRING_IDS) if string_ids else st.integers(0, 4)
    counters = dict.fromkeys(writer_ids, 0)
    # Most logs carry no durations (as every log before them); the others both on every line,
    # or each key on some lines only (a writer timing one part, or some forwards).
    timing = draw(st.sampled_from(["none", "none", "both", "some"]))

    def duration() -> int | None:
        if timing == "none" or (timing == "some" and draw(st.booleans())):
            return None
        return draw(DURATION_VALUES)

    def row(w: str, t_ns: int, label: str | None, proposed: int) -> dict[str, Any]:
        accepted = draw(st.integers(0, proposed))
        emitted = draw(
            st.sampled_from(["none", "full", "cut"] * 3 + ["large"] * extreme).flatmap(
                lambda kind: (
                    st.just(None)
                    if kind == "none"
                    else st.just(accepted + 1)
                    if kind == "full"
                    else st.sampled_from(LARGE_EMITTED)
                    if kind == "large"
                    else st.integers(0, accepted + 1)
                )
            )
        )
        fate = draw(st.sampled_from(["written"] * 8 + ["lost", "torn"]))
        value = {
            "v": 1,
            "w": w,
            "n": counters[w],
            "t_ns": t_ns,
            "pid": pids[w],
            "seq": draw(ids),
            "proposed": proposed,
            "accepted": accepted,
            "emitted": emitted,
            "draft_ns": duration(),
            "verify_ns": duration(),
            "leg": label,
            "fate": fate,
        }
        counters[w] += 1
        return value

    proposals = draw(step_proposals(extreme))
    rows = []
    if seeded:
        for leg in legs:
            if draw(st.integers(0, 4)) == 0:
                continue
            start, end = leg_bounds_ns(leg)
            w = draw(st.sampled_from(writer_ids))
            drafts = draw_drafting(draw, proposals)
            seed = row(w, draw(st.integers(start, end)), leg.get("leg"), drafts)
            seed["fate"] = "written"
            rows.append(seed)
    for _ in range(draw(st.integers(0, 30))):
        w = draw(st.sampled_from(writer_ids))
        label = draw(st.none() | st.sampled_from(STEP_LABELS))
        rows.append(row(w, draw(timestamps(legs)), label, draw(proposals)))
    return rows


@st.composite
def step_logs(
    draw: st.DrawFn,
    legs: list[dict[str, Any]],
    *,
    bad_lines: bool = False,
    seeded: bool = True,
    tears: bool = True,
    string_ids: bool = False,
) -> StepLog:
    """A step log file over ``legs``: rows in any order, some in another writer's shape, lost
    lines (gaps in ``n``), torn fragments glued to the next line or left as a torn tail, and
    (with ``bad_lines``) lines that are not v1 steps."""
    rows = draw(step_rows(legs, seeded=seeded, string_ids=string_ids))
    rows = draw(st.permutations(rows))
    rng = random.Random(draw(st.integers(0, 2**32)))
    lines: list[bytes] = []
    fragment = b""
    written = []
    tail = b""
    for value in rows:
        body = {key: item for key, item in value.items() if key != "fate"}
        if value["fate"] == "lost" or (value["fate"] == "torn" and not tears):
            continue
        if value["fate"] == "torn":
            if fragment:  # one fragment per line: a second torn write in a row is lost
                continue
            whole = canonical_line(body)
            fragment = whole[: draw(st.integers(1, len(whole)))]
            continue
        # A fragment can only be told from the line glued to it when that line starts the way
        # the writers' lines do; other layouts after a fragment would make a bad line.
        odd = not fragment and rng.random() < 0.2
        encoded = odd_line(body, rng) if odd else canonical_line(body)
        lines.append(fragment + encoded)
        fragment = b""
        written.append(value)
    tail = fragment
    count_bad = 0
    if bad_lines:
        for _ in range(draw(st.integers(0, 3))):
            position = draw(st.integers(0, len(lines)))
            lines.insert(position, draw(st.sampled_from(BAD_LINES)))
            count_bad += 1
    return StepLog(rows=written, lines=lines, tail=tail, bad_lines=count_bad)


@dataclass
class FoldCase:
    document: dict[str, Any] | list[dict[str, Any]]
    predicate: Predicate
    log: StepLog
    skip_bad_lines: bool
    window_steps: int
    block_bytes: int

    @property
    def legs(self) -> list[dict[str, Any]]:
        return legs_of(self.document)

    def fold(self, log: Any, **options: Any) -> Any:
        """The case's log (written at ``log``) folded over its arm with its predicate, bad-line
        rule and block size; ``options`` adds to or overrides ``fold_acceptance``'s."""
        from fold.api import fold_acceptance
        from fold.inputs.arm import arm_from_document

        settings = {
            "predicate": self.predicate.sql,
            "skip_bad_lines": self.skip_bad_lines,
            "block_bytes": self.block_bytes,
            **options,
        }
        return fold_acceptance(arm_from_document(self.document), [str(log)], **settings)


@st.composite
def fold_cases(
    draw: st.DrawFn,
    *,
    consistent: bool | None = True,
    tears: bool = True,
    string_ids: bool = False,
) -> FoldCase:
    predicate = draw(st.sampled_from(PREDICATES))
    document = draw(arm_documents(predicate, consistent=consistent))
    skip = draw(st.booleans())
    log = draw(step_logs(legs_of(document), bad_lines=skip, tears=tears, string_ids=string_ids))
    return FoldCase(
        document=document,
        predicate=predicate,
        log=log,
        skip_bad_lines=skip,
        window_steps=draw(st.sampled_from([1, 2, 3, 32])),
        block_bytes=draw(st.sampled_from([32 * 1024 * 1024] * 6 + [100, 300, 4096])),
    )
