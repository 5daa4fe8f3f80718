"""A matched oracle arm's check (``comparison.matched``): the verdict line, and with details the
setting it was run with and the notes; for the terminal (rich), markdown and the page."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from rich.text import Text

from fold.compare.matched_arms import MODEL_FAILS, MODEL_HOLDS, NOT_MATCHED

Check = Mapping[str, Any]

_STYLES = {
    MODEL_HOLDS: "bold",
    MODEL_FAILS: "bold red",
    NOT_MATCHED: "bold yellow",
}


def checks(block: Mapping[str, Any], name: str) -> Check | None:
    """The check of oracle ``name``, or None when it is not a matched arm."""
    return (block.get("matched") or {}).get(name)


def setting_text(check: Check) -> str | None:
    """'vLLM synthetic rates 0.7, 0.367, ... (aims at 1 + A/S 2.600)', from the record."""
    setting = check.get("setting")
    if setting is None:
        return None
    if setting["synthetic_acceptance_rates"] is not None:
        given = "rates " + ", ".join(f"{r:.3g}" for r in setting["synthetic_acceptance_rates"])
    else:
        given = f"length {setting['synthetic_acceptance_length']:g}"
    aims = setting["expected_mean_acceptance_length"]
    return (
        f"setting: rejection_sample_method synthetic, k = {setting['num_speculative_tokens']}, "
        f"{given} (aims at 1 + A/S {aims:.3f})"
    )


def detail_texts(check: Check) -> list[str]:
    found = setting_text(check)
    texts = [found] if found is not None else []
    return [*texts, *check["notes"]]


def matched_lines(block: Mapping[str, Any], name: str, *, details: bool) -> list[Text]:
    """The verdict line of a matched arm, and with ``details`` its setting and notes."""
    check = checks(block, name)
    if check is None:
        return []
    lines = [Text(f"matched: {check['verdict']}", _STYLES.get(check["status"], ""))]
    if details:
        lines.extend(Text(f"  {text}", style="dim") for text in detail_texts(check))
    return lines


def matched_arm_markdown(block: Mapping[str, Any], name: str) -> list[str]:
    check = checks(block, name)
    if check is None:
        return []
    return [f"  - matched: {check['verdict']}", *(f"  - {t}" for t in detail_texts(check))]


def matched_arm_html(block: Mapping[str, Any], name: str) -> list[str]:
    check = checks(block, name)
    if check is None:
        return []
    css = "warn" if check["status"] in (MODEL_FAILS, NOT_MATCHED) else "matched"
    return [
        f'<li class="{css}" data-arm="{html.escape(name)}">matched: '
        f"{html.escape(check['verdict'])}</li>"
    ]
