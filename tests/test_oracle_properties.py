"""Invariants of the oracle readers and of the fitted tables, over generated inputs.

* Two scrapes of any number of engines, in any line order, with ``_created`` series and with
  series a fresh engine has not printed yet: the figures are the sums of the true increments.
* llama.cpp's six-significant-digit printing: the true increments lie within the bounds given.
* A table at any width prints every figure whole and no line past the width.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table
from strategies import scaled

from fold.errors import RefusedError
from fold.inputs.oracles import read_oracle
from fold.present.table_layout import fit


@st.composite
def engine_counts(draw: st.DrawFn, k: int, min_steps: int = 0) -> dict[str, object]:
    """Counters of one engine: per-position counts, S at least the largest, P at least A and S."""
    per_pos = sorted(draw(st.lists(st.integers(0, 10**7), min_size=k, max_size=k)), reverse=True)
    steps = per_pos[0] + draw(st.integers(min_steps, 10**6))
    accepted = sum(per_pos)
    proposed = max(steps, accepted) + draw(st.integers(0, 10**6))
    return {"S": steps, "P": proposed, "A": accepted, "pp": per_pos}


@st.composite
def scrape_pairs(draw: st.DrawFn) -> tuple[list[dict], list[dict], int]:
    k = draw(st.integers(1, 7))
    engines = draw(st.integers(1, 3))
    before = [draw(engine_counts(k)) for _ in range(engines)]
    # the run made at least one speculative step on each engine (none at all is refused)
    increments = [draw(engine_counts(k, min_steps=1)) for _ in range(engines)]
    return before, increments, k


def _add(a: dict, b: dict) -> dict:
    return {
        "S": a["S"] + b["S"],
        "P": a["P"] + b["P"],
        "A": a["A"] + b["A"],
        "pp": [x + y for x, y in zip(a["pp"], b["pp"], strict=True)],
    }


def _vllm_scrape(engines: list[dict], shuffle: random.Random, *, fresh: set[int]) -> str:
    """prometheus_client's layout; engines in ``fresh`` print no per-position series yet."""
    lines = []
    for index, counts in enumerate(engines):
        labels = f'engine="{index}",model_name="m"'
        for name, key in (("num_drafts", "S"), ("num_draft_tokens", "P"),
                          ("num_accepted_tokens", "A")):  # fmt: skip
            lines.append(f"vllm:spec_decode_{name}_total{{{labels}}} {float(counts[key])!r}")
            lines.append(f"vllm:spec_decode_{name}_created{{{labels}}} 1.7646e+09")
        if index not in fresh:
            for position, value in enumerate(counts["pp"]):
                lines.append(
                    f"vllm:spec_decode_num_accepted_tokens_per_pos_total"
                    f'{{{labels},position="{position}"}} {float(value)!r}'
                )
    shuffle.shuffle(lines)
    return "# HELP vllm:spec_decode_num_drafts_total Drafts.\n" + "\n".join(lines) + "\n"


@given(scrape_pairs(), st.randoms(use_true_random=False), st.data())
@scaled(1)
def test_two_scrapes_give_the_sum_of_every_engines_increments(pair, shuffle, data) -> None:
    before, increments, k = pair
    # an engine that has drafted nothing yet prints no per-position series
    fresh = {i for i, counts in enumerate(before) if data.draw(st.booleans())}
    for i in fresh:
        before[i] = {**before[i], "pp": [0] * k, "A": 0}
        before[i]["P"] = max(before[i]["P"], before[i]["S"])
    after = [_add(b, d) for b, d in zip(before, increments, strict=True)]
    text = _vllm_scrape(before, shuffle, fresh=fresh) + _vllm_scrape(after, shuffle, fresh=set())
    arm = read_oracle("v", text)
    assert arm.steps == sum(d["S"] for d in increments)
    assert arm.proposed == sum(d["P"] for d in increments)
    assert arm.accepted == sum(d["A"] for d in increments)
    assert arm.per_position == tuple(sum(d["pp"][i] for d in increments) for i in range(k))
    assert not arm.bounds


def _printed_like_llamacpp(value: int) -> str:
    """``operator<<`` on a double: six significant digits, %g style."""
    return f"{float(value):g}"


@given(scrape_pairs())
@scaled(1)
def test_llamacpp_rounded_counters_hold_the_true_increments_within_their_bounds(pair) -> None:
    before, increments, _ = pair
    before, increments = before[:1], increments[:1]  # one server
    after = _add(before[0], increments[0])
    true = increments[0]

    def scrape(counts: dict) -> str:
        return "".join(
            f"llamacpp:spec_decode_{name}_total {_printed_like_llamacpp(counts[key])}\n"
            for name, key in (
                ("num_draft_tokens", "P"),
                ("num_accepted_tokens", "A"),
                ("num_drafts", "S"),
            )
        )

    text = scrape(before[0]) + scrape(after)

    def half_unit(text: str) -> float:  # of the sixth significant digit, for exponent form
        return 0.5 * 10.0 ** (int(text.split("e")[1]) - 5) if "e" in text else 0.0

    lost = False
    for key in ("S", "P"):
        printed = [_printed_like_llamacpp(c[key]) for c in (before[0], after)]
        slack = half_unit(printed[0]) + half_unit(printed[1])
        lost |= slack > 0 and float(printed[1]) - float(printed[0]) <= slack
    if lost:
        # a difference lost in the rounding leaves no ratio to be had
        with pytest.raises(RefusedError, match="within their rounding"):
            read_oracle("l", text)
        return
    arm = read_oracle("l", text)
    for figure, key in (("steps", "S"), ("proposed", "P"), ("accepted", "A")):
        shown = getattr(arm, figure)
        assert abs(shown - true[key]) <= arm.bounds.get(figure, 0)
    if true["P"] and true["S"]:
        exact_rate = true["A"] / true["P"]
        exact_length = 1 + true["A"] / true["S"]
        assert abs(arm.accept_rate - exact_rate) <= (arm.accept_rate_bound or 0) + 1e-12
        assert (
            abs(arm.mean_acceptance_length - exact_length)
            <= (arm.mean_acceptance_length_bound or 0) + 1e-12
        )


figure_texts = st.one_of(
    st.floats(0, 1e9, allow_nan=False).map(lambda v: f"{v:.3f}"),
    st.integers(0, 10**12).map(str),
    st.floats(0, 1).map(lambda v: f"{100 * v:.1f}%"),
)


@given(
    st.lists(st.lists(figure_texts, min_size=3, max_size=3), min_size=1, max_size=5),
    st.integers(20, 140),
)
@scaled(1)
def test_a_fitted_table_prints_every_figure_whole_at_any_width(rows, width) -> None:
    table = Table(title="figures")
    table.add_column("name", overflow="fold")
    for header in ("tok/s (warm)", "S", "rate (A/P)"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("shape", no_wrap=True)  # a sparkline, not a figure: it may give way
    for index, row in enumerate(rows):
        table.add_row(f"arm-{index}", *row, "▁▂▃▄▅▆▇█▇▆")
    console = Console(width=width, record=True, color_system=None)
    with console.capture() as capture:
        console.print(fit(table, give_way=("shape",)))
    text = capture.get()
    assert all(len(line) <= width for line in text.splitlines())
    tokens = set(text.split())
    for row in rows:
        for figure in row:
            assert figure in tokens, (figure, width, text)


@given(st.integers(1, 10**6), st.integers(1, 10**5), st.integers(0, 15))
@scaled(1)
def test_the_step_range_from_a_rounded_length_holds_the_true_count(accepted, steps, extra) -> None:
    from fold.inputs.oracles.printed import steps_range

    proposed = max(accepted, steps) + extra
    printed = float(f"{1 + accepted / steps:.2f}")  # as both engines print it
    found = steps_range(accepted, proposed, printed, 0.005)
    if printed == 1.0:  # "1.00" fits any S large enough: no range
        assert found is None
        return
    assert found is not None
    low, high = found
    assert low <= steps <= high
