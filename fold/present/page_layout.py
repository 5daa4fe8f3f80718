"""How the page is laid out: its style sheet, its table of contents and its disclosures.

The page is one file read off-line, so the contents stay in reach with CSS alone (a side column
that sticks while the page scrolls; after the answer on a narrow window), long tables fold away
under a one-line summary (``<details>``, which needs no script), and the same rules print on
A4: no side column, every disclosure open, tables that wrap instead of running off the paper.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1d232a; }
.layout { display: grid; grid-template-columns: 13rem minmax(0, 1fr); gap: 2rem;
  max-width: 84rem; margin: 0 auto; padding: 1rem 1.5rem; }
nav.toc { position: sticky; top: 0; align-self: start; max-height: 100vh; overflow-y: auto;
  padding: 1rem 0; font-size: 0.85rem; }
nav.toc ol { list-style: none; padding-left: 0; margin: 0; }
nav.toc li { margin: 0.35rem 0; } nav.toc li li { margin-left: 0.8rem; }
nav.toc a { color: #1f5fa8; text-decoration: none; } nav.toc a:hover { text-decoration: underline; }
main { min-width: 0; }
h1 { font-size: 1.4rem; margin: 0.8rem 0; } h2 { font-size: 1.1rem; margin-top: 1.8rem; }
h3 { font-size: 1rem; margin: 1rem 0 0.4rem 0; }
section { scroll-margin-top: 0.5rem; }
figure { margin: 0; } figure svg { width: 100%; height: auto; }
figcaption { color: #47515c; font-size: 0.85rem; margin-top: 0.3rem; }
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 1rem 1.5rem; }
.charts > section h3 { margin-top: 0.4rem; }
.missing { color: #8a5a00; font-style: italic; }
table { border-collapse: collapse; font-size: 0.9rem; }
td, th { padding: 0.2rem 0.8rem; text-align: right; border-bottom: 1px solid #e3e6ea; }
th:first-child, td:first-child { text-align: left; }
table.comparison th { vertical-align: bottom; }
table.comparison td:nth-child(n+3) { white-space: nowrap; }
table.comparison tr.ratio td { border-top: 1px solid #9aa5b1; font-style: italic; }
.pm { color: #47515c; font-size: 0.8rem; white-space: nowrap; }
.caption { color: #47515c; font-size: 0.8rem; margin: 0.3rem 0; }
table.comparison td:nth-child(2), table.comparison th:nth-child(2) { text-align: left; }
.na { color: #8a949e; font-style: italic; }
ul.verdicts { padding-left: 1.2rem; margin: 0.6rem 0 0 0; }
ul.verdicts li { margin: 0.2rem 0; }
.warn { color: #8a5a00; }
details { margin: 0.5rem 0; }
details > summary { cursor: pointer; color: #1f5fa8; }
details[open] > summary { margin-bottom: 0.4rem; }
.scroll { overflow-x: auto; }
@media (max-width: 60rem) {
  /* one column: the answer first, then the contents, then the rest, so the contents never
     push the table and the verdicts off the first screen */
  .layout { display: flex; flex-direction: column; }
  main { display: contents; }
  main > * { order: 2; }
  main > h1, main > #answer { order: 0; }
  /* flex items keep both margins (no collapsing): the title's and the answer heading's would
     add up to a gap that pushes the last verdict off a short first screen */
  main > h1 { margin-bottom: 0; }
  #answer > h2:first-child { margin-top: 0.8rem; }
  nav.toc { order: 1; position: static; max-height: none; border-bottom: 1px solid #e3e6ea;
    border-top: 1px solid #e3e6ea; margin-top: 1rem; }
  .charts { display: block; }
}
@page { size: A4; margin: 12mm; }
@media print {
  .layout { display: block; padding: 0; max-width: none; }
  nav.toc { display: none; }
  .charts { display: block; }
  .charts > section, figure, tr { break-inside: avoid; }
  h2, h3 { break-after: avoid; }
  details::details-content { content-visibility: visible; display: block; }
  details > summary { color: inherit; }
  .scroll { overflow: visible; }
  table { font-size: 0.75rem; }
  td, th { padding: 0.1rem 0.4rem; }
  table.comparison td:nth-child(n+3), .pm { white-space: normal; }
}
"""


def toc(entries: Sequence[tuple[str, str, Sequence[tuple[str, str]]]]) -> str:
    """The contents: (section id, heading, its (id, heading) subsections) in page order."""
    items = []
    for target, heading, subsections in entries:
        inner = "".join(
            f'<li><a href="#{html.escape(sub)}">{html.escape(text)}</a></li>'
            for sub, text in subsections
        )
        nested = f"<ol>{inner}</ol>" if inner else ""
        items.append(
            f'<li><a href="#{html.escape(target)}">{html.escape(heading)}</a>{nested}</li>'
        )
    return f'<nav class="toc" aria-label="contents"><ol>{"".join(items)}</ol></nav>'


def disclosure(summary: str, body: str) -> str:
    """``body`` folded under a one-line ``summary`` (plain text, escaped here)."""
    return f"<details><summary>{html.escape(summary)}</summary>{body}</details>"
