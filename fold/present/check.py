"""``ledger --check``'s outcome in words, for a terminal and for a CI summary (markdown).

Functions of the check data alone (``fold.ledger.check``'s JSON-ready dicts): they read no
ledger and return text. Every number they show is a field of the data (the difference, its
side and size, the baseline's count, the counts of outcomes), turned into text by the formats
of ``fold/present/table.py``; ``tests/test_ledger_presenters.py`` fails on arithmetic,
counting or ordering of numbers here.
"""

from __future__ import annotations

import re
from typing import Any

from fold.present.history import LENGTHS, RATES, changed_labels, labels_text, shown_value
from fold.present.markdown_table import pipe_table
from fold.present.table import points, signed_decimals, signed_points

WORD = {
    "holds": "HOLDS",
    "alert": "ALERT",
    "too_few": "CANNOT TELL",
    "no_figure": "CANNOT TELL",
    "no_interval": "CANNOT TELL",
}
"""The mark each outcome's code (``fold.ledger.check.OUTCOMES``) is printed with."""
REGRESSION = {"lower": "a fall regresses", "upper": "a rise regresses", "both": "either way"}


def by_how_much(figure: str, distance: float) -> str:
    """A difference's size (``distance``) for people: rates in percentage points, the rest in
    the figure's units."""
    if figure.partition(":")[0] in RATES:
        return f"{points(distance)} points"
    return shown_value(figure, distance)


def signed(figure: str, difference: float) -> str:
    """A difference with its sign: rates in percentage points, the rest in the figure's units
    to the decimals ``shown_value`` gives them."""
    base = figure.partition(":")[0]
    if base in RATES:
        return signed_points(difference)
    return signed_decimals(difference, 2 if base in LENGTHS else 3)


def runs_text(ids: list[int]) -> str:
    """Run ids in words: ``runs 1–3`` for three or more in a row, else each named."""
    if not ids:
        return "no run"
    # three or more (ids[2:]) and the ids before the last are every id from the first on
    if ids[2:] and ids[:-1] == list(range(ids[0], ids[-1])):
        return f"runs {ids[0]}–{ids[-1]}"
    return f"{'runs' if ids[1:] else 'run'} {', '.join(str(i) for i in ids)}"


def check_sentence(check: dict[str, Any]) -> str:
    """One check's outcome as one sentence (no mark, no line break)."""
    figure, baseline = check["figure"], check["baseline"]
    subject = f"{check['shown']} of run {check['run']}"
    scope = labels_text(baseline["where"])
    of = f"{runs_text(baseline['runs'])}{f' labelled {scope}' if scope else ''}"
    outcome = check["outcome"]
    if outcome == "no_figure":
        return f"{subject}: the run has no such figure; nothing to check"
    if outcome == "no_interval":
        return (
            f"{subject}: {shown_value(figure, check['value'])} has no 95% interval in the "
            "ledger (none is drawn with --bootstrap 0, for a fold of counters, or for "
            "per_position_of_proposed), so no test can be made"
        )
    value = f"{shown_value(figure, check['value'])} ({_interval(figure, check['ci'])})"
    if outcome == "too_few":
        left = baseline["without_interval"]
        return (
            f"{subject}: {value}; the baseline has {baseline['count']} run"
            f"{'s' if baseline['count'] != 1 else ''} ({of}), fewer than the "
            f"{baseline['min_runs']} the test needs"
            + (f" ({runs_text(left)} left out: no interval)" if left else "")
        )
    direction = check["direction"]
    relative = "" if check["relative"] is None else f", {signed_points(check['relative'])}%"
    z = (
        "t undefined: no spread"
        if check["t"] is None
        else f"t = {check['t']:.2f} (alert past {check['threshold']:.2f})".replace("-", "−")
    )
    low, high = check["difference_ci"]
    unit = " points" if figure.partition(":")[0] in RATES else ""
    amount = "" if direction == "level" else f"{by_how_much(figure, check['distance'])} "
    return (
        f"{subject}: {value} against the baseline's {shown_value(figure, baseline['mean'])} "
        f"(mean of {of}): {amount}{direction}{relative} (95% interval "
        f"{signed(figure, low)} to {signed(figure, high)}{unit}), {z}; "
        f"{REGRESSION[check['boundary']]}"
    )


def check_table(data: dict[str, Any]) -> str:
    """Each check on its lines, marked HOLDS, ALERT or CANNOT TELL, and a summary line."""
    lines = []
    for check in data["checks"]:
        lines.append(f"{WORD[check['outcome']]}  {check_sentence(check)}")
        changed = changed_labels(check)
        if check["outcome"] == "alert":
            since = check["baseline"]["runs"][-1]
            lines.append(
                f"  labels changed since run {since}: {changed}"
                if changed
                else f"  no label changed since run {since}"
            )
    return "\n".join(lines) + "\n" + summary(data) + "\n"


MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>~#!])")  # "|": pipe_table's


def markdown_text(text: str) -> str:
    """``text`` as itself in GitHub markdown: its labels are anyone's words, and a label like
    ``<b>*x*</b>`` would otherwise render as markup (or pass HTML into the CI summary)."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def check_markdown(data: dict[str, Any]) -> str:
    """The checks for a CI summary ($GITHUB_STEP_SUMMARY): a heading saying the outcome, then
    a table of every check."""
    counts = data["counts"]
    alerts = counts["alert"]
    title = (
        f"# Acceptance gate: {alerts} alert{'s' if alerts != 1 else ''}"
        if alerts
        else "# Acceptance gate: cannot tell"
        if data["undecided"]
        else "# Acceptance gate: holds"
    )
    rows = [
        [
            WORD[check["outcome"]],
            markdown_text(check_sentence(check)),
            markdown_text(changed_labels(check)) or "-",
        ]
        for check in data["checks"]
    ]
    header = ["outcome", "figure against its baseline", "labels changed"]
    return f"{title}\n\n{pipe_table(header, rows)}\n{summary(data)}\n"


def summary(data: dict[str, Any]) -> str:
    counts, total = data["counts"], data["total"]
    parts = [f"{counts['alert']} alert{'s' if counts['alert'] != 1 else ''}",
             f"{counts['holds']} holding"]  # fmt: skip
    undecided = data["undecided"]
    if undecided:
        parts.append(f"{undecided} that cannot tell")
    return f"{total} check{'s' if total != 1 else ''} of {data['ledger'] or 'the ledger'}: " + (
        ", ".join(parts)
    )


def _interval(figure: str, interval: list[float]) -> str:
    return f"{shown_value(figure, interval[0])} – {shown_value(figure, interval[1])}"
