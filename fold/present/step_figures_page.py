"""The step figures on the page: side by side where an oracle records them too, and in our
block, folded away, where only our folds do; with one line naming what the oracles do not record.

An arm that records none of a table's figures gets no column, and a row no arm fills is not
drawn, so the page never shows a column or a row of "not recorded". A function of the JSON
document alone, as every presenter.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from fold.present.page_layout import disclosure
from fold.present.step_figures import (
    CAPTION,
    REQUESTS_CAPTION,
    REQUESTS_TITLE,
    TITLE,
    Made,
    about_lines,
    groups,
    others,
    request_rows,
    rows,
    split_ours,
)

SECTION_ID = "step-figures"
HEADING = "Where do the arms' step figures differ?"


def _table(made: Made) -> str:
    names, body = made
    head = "".join(f"<th>{html.escape(name)}</th>" for name in names)
    lines = []
    for label, cells in body:
        found = "".join(
            f"<td>{html.escape(value)}"
            + (f'<br><span class="pm">{html.escape(interval)}</span>' if interval else "")
            + "</td>"
            for value, interval in cells
        )
        lines.append(f"<tr><td>{html.escape(label)}</td>{found}</tr>")
    return (
        f'<div class="scroll"><table class="steps"><tr><th>figure</th>{head}</tr>'
        f"{''.join(lines)}</table></div>"
    )


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _summary(made: Made) -> str:
    names, body = made
    rows_shown = "1 row" if len(body) == 1 else f"{len(body)} rows"
    columns = "one column" if len(names) == 1 else f"{len(names)} columns"
    return f"{rows_shown} of {_listed(groups(body))}, {columns}: {', '.join(names)}"


def ours_only_html(document: Mapping[str, Any], also: Sequence[str] = ()) -> str:
    """Our block's part: the line naming what the oracles do not record (``also``: figures
    of the comparison they do not record), and our step figures that no oracle has beside
    them, folded; '' without a comparison or anything ours alone."""
    if not (document.get("comparison") or {}).get("rows"):
        return ""
    _, mine = split_ours(document, rows(document))
    _, mine_requests = split_ours(document, request_rows(document))
    missing = [*also, *groups(mine[1])]
    missing += [g for g in groups(mine_requests[1]) if g not in missing]
    oracles = others(document)
    if not missing or not oracles:
        return ""
    verb = "does" if len(oracles) == 1 else "do"
    parts = [
        f'<p class="recorded">{html.escape(_listed(oracles))} {verb} not record these '
        f"figures, so they are ours alone: {html.escape(_listed(missing))}.</p>"
    ]
    if mine[1]:
        body = _table(mine) + f'<p class="caption">{html.escape(CAPTION)}</p>'
        parts.append(disclosure(f"Our step figures, {_summary(mine)}", body))
    return "".join(parts)


def step_figures_html(document: Mapping[str, Any]) -> str:
    """The side-by-side section: only the figures some oracle records too ('' when none)."""
    if not (document.get("comparison") or {}).get("rows"):
        return ""
    shared, _ = split_ours(document, rows(document))
    requests, _ = split_ours(document, request_rows(document))
    if not shared[1] and not requests[1]:
        return ""
    about = "".join(f"<li>{html.escape(line)}</li>" for line in about_lines(document))
    parts = [f'<section id="{SECTION_ID}"><h2>{html.escape(HEADING)}</h2>']
    parts.append(f'<ul class="verdicts">{about}</ul>')
    if shared[1]:
        body = _table(shared) + f'<p class="caption">{html.escape(CAPTION)}</p>'
        parts.append(disclosure(f"{TITLE}, {_summary(shared)}", body))
    if requests[1]:
        body = _table(requests) + f'<p class="caption">{html.escape(REQUESTS_CAPTION)}</p>'
        parts.append(disclosure(f"{REQUESTS_TITLE}, {_summary(requests)}", body))
    parts.append("</section>")
    return "".join(parts)
