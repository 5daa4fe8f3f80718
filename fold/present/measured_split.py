"""What a gap's split rests on (``comparison.gaps[NAME]``: ``split``, ``split_reason``,
``split_text``, ``measured``), in words for the terminal, markdown and the page.

A gap measured through a run at our acceptance shows its measured factors where the modelled
ones stand otherwise, and the modelled split beside them with the model's error; a modelled
gap says why when a matched run was given (it missed our acceptance, or could not be checked).
Everything is read from the document; nothing is computed here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fold.compare.gap import (
    AT_OUR_ACCEPTANCE_WORD,
    DID_NOT_MATCH,
    MATCHED_RUN_WORD,
    MEASURED,
    NO_MATCHED_RUN,
    NOT_CHECKED,
    OTHER_TOK_S,
)
from fold.compare.matched_arms import MODEL_FAILS, MODEL_HOLDS, NO_MODEL
from fold.present.table import fmt_factor, fmt_share

Gap = Mapping[str, Any]

# reasons whose sentence is shown without --details: a caveat, or why the model stands
ALWAYS_SHOWN = (
    MATCHED_RUN_WORD,
    AT_OUR_ACCEPTANCE_WORD,
    DID_NOT_MATCH,
    NOT_CHECKED,
    OTHER_TOK_S,
)
_TESTS = {
    MODEL_HOLDS: "the model holds for this pair",
    MODEL_FAILS: "the model does not hold for this pair",
    NO_MODEL: "the model is not tested",
}


def measured_of(gap: Gap) -> Mapping[str, Any] | None:
    """The measured split of a gap that rests on one, else None."""
    return gap.get("measured") if gap.get("split") == MEASURED else None


def _bracket(interval: Sequence[float] | None) -> str:
    return "" if interval is None else f" [{fmt_factor(interval[0])}, {fmt_factor(interval[1])}]"


def factors_text(gap: Gap) -> str:
    """The head of a gap: r and the factors its verdict rests on."""
    measured = measured_of(gap)
    head = f"r = {gap['ours']}/{gap['oracle']} tok/s = {fmt_factor(gap['ratio'])}"
    if measured is None:
        return (
            f"{head} = acceptance {fmt_factor(gap['acceptance_factor'])} x speed "
            f"{fmt_factor(gap['speed_factor'])}"
        )
    if measured["base"] is None:
        return f"{head}, all speed (measured: {measured['matched']} ran at our acceptance)"
    return (
        f"{head} = speed {fmt_factor(measured['speed_factor'])} x acceptance "
        f"{fmt_factor(measured['acceptance_factor'])} (measured with {measured['matched']})"
    )


def intervals_text(measured: Mapping[str, Any]) -> str | None:
    """The measured factors' 95% intervals and what they rest on; None without them."""
    if measured["ratio_ci"] is None:
        return None
    parts = [f"r{_bracket(measured['ratio_ci'])}"]
    if measured["base"] is not None:
        parts += [
            f"speed{_bracket(measured['speed_factor_ci'])}",
            f"acceptance{_bracket(measured['acceptance_factor_ci'])}",
        ]
    return f"95% intervals ({measured['basis_text']}): " + "  ".join(parts)


def shares_text(measured: Mapping[str, Any]) -> str | None:
    if measured["base"] is None or measured["acceptance_share"] is None:
        return None
    return (
        f"share of the log-gap (measured): acceptance {fmt_share(measured['acceptance_share'])}, "
        f"speed {fmt_share(measured['speed_share'])}"
    )


def modelled_text(gap: Gap) -> str | None:
    """The modelled split beside a measured one, and the model test's result (the model's
    error is in the verdict)."""
    measured = measured_of(gap)
    if measured is None or measured["base"] is None or gap["acceptance_factor"] is None:
        return None
    text = (
        f"modelled: acceptance {fmt_factor(gap['acceptance_factor'])} x speed "
        f"{fmt_factor(gap['speed_factor'])}"
    )
    if gap["acceptance_share"] is not None:
        text += (
            f" (acceptance {fmt_share(gap['acceptance_share'])}, speed "
            f"{fmt_share(gap['speed_share'])} of the log-gap)"
        )
    test = _TESTS.get(measured["model_test"] or "")
    return text if test is None else f"{text}: {test}"


def split_text(gap: Gap, *, details: bool) -> str | None:
    """The sentence of what the split rests on: with ``details`` whenever a matched run
    was given, without them only for a caveat or a model that stands."""
    reason = gap.get("split_reason") or NO_MATCHED_RUN
    if reason == NO_MATCHED_RUN or not (details or reason in ALWAYS_SHOWN):
        return None
    return f"split: {gap['split_text']}"


def gap_texts(gap: Gap, *, details: bool) -> list[str]:
    """The lines under a gap's verdict, for markdown and the page."""
    found = [modelled_text(gap), split_text(gap, details=details)]
    return [text for text in found if text is not None]
