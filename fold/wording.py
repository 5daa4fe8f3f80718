"""Numbers in messages, rounded for people: ``1362.6755``, never ``1362.6754999999998``."""

from __future__ import annotations

import math

SIGNIFICANT = 8  # enough to tell two measured figures apart, short enough to read


def figure(value: float | None, significant: int = SIGNIFICANT) -> str:
    """``value`` to ``significant`` digits in plain notation, without trailing zeros."""
    if value is None:
        return "none"
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    before_point = math.floor(math.log10(abs(value))) + 1
    text = f"{value:.{max(0, significant - before_point)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def figures_apart(first: float | None, second: float | None) -> tuple[str, str]:
    """Both values rounded alike, with as many more digits as it takes to show they differ."""
    for significant in range(SIGNIFICANT, 18):
        shown = figure(first, significant), figure(second, significant)
        if shown[0] != shown[1] or first == second:
            return shown
    return repr(first), repr(second)
