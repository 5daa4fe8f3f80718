"""The matched setting (``--matched ENGINE``) as terminal text and as markdown, from the JSON
document's ``matched`` block alone.

The rates' table fits the terminal; the config and command lines are printed whole, one line
each, never wrapped or cropped, so they can be copied as they stand.
"""

from __future__ import annotations

import html
import io
import json
import textwrap
from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from fold.present.table import length, percent

_TITLES = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp"}


def _interval(ci: list[float] | None, form=percent) -> str:
    return "" if ci is None else f"{form(ci[0])} to {form(ci[1])}"


def _summary(engine: str, setting: Mapping[str, Any]) -> str:
    return (
        f"Matched {_TITLES[engine]}: the setting that accepts as our warm legs did "
        f"(S = {setting['steps']}, k = {setting['k']}, 1 + A/S = "
        f"{length(setting['mean_acceptance_length'])}"
        + (
            f", 95% {_interval(setting['mean_acceptance_length_ci'], length)})"
            if setting["mean_acceptance_length_ci"]
            else ")"
        )
    )


def _rates_table(setting: Mapping[str, Any]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("draft position", justify="right")
    table.add_column("first i accepted", justify="right")
    table.add_column("95% interval", justify="right")
    for rate in setting["rates"]:
        table.add_row(str(rate["position"]), percent(rate["rate"]), _interval(rate["ci"]))
    return table


_RUNS_ON = {
    "vllm": "on a GPU box: vLLM's CPU build refuses synthetic sampling where Triton is missing",
    "sglang": "on a GPU box",
    "llamacpp": "llama-server runs it on a CPU as well",
}


def _setting_lines(engine: str, setting: Mapping[str, Any], width: int) -> list[str]:
    """The setting's lines: what is copied (the config, the environment, the commands) whole,
    the words around it wrapped to ``width`` with a hanging indent."""

    def words(text: str, indent: str = "") -> list[str]:
        return textwrap.wrap(
            text,
            width,
            initial_indent=indent,
            subsequent_indent=indent + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )

    lines = []
    if setting["speculative_config"] is not None:
        config = json.dumps(setting["speculative_config"], separators=(", ", ": "))
        lines.append(f"speculative_config: {config}")
    for note in setting.get("notes") or ():
        lines.extend(words(f"note: {note}"))
    if setting["environment"] is not None:
        lines.append("environment:")
        lines += [f"  {name}={value}" for name, value in setting["environment"].items()]
    lines.extend(words(f"to run it ({_RUNS_ON[engine]}):"))
    lines += [f"  {command['line']}" for command in setting["commands"]]
    lines.append("what the setting cannot carry:")
    for note in setting["cannot_carry"]:
        lines.extend(words(f"- {note}", "  "))
    lines.extend(words(f"sources read: {setting['checked']}"))
    return lines


def matched_terminal(document: Mapping[str, Any], *, width: int = 80) -> str:
    """The ``matched`` block as terminal text ('' when the document has none): the words
    wrapped to ``width``, the config and the commands whole on their lines, to be copied."""
    blocks = []
    for engine, setting in (document.get("matched") or {}).items():
        out = io.StringIO()
        console = Console(file=out, width=width, color_system=None, highlight=False)
        console.print(_summary(engine, setting))
        if setting["rates"]:
            console.print(_rates_table(setting))
            console.print(
                "rate i: the share of warm steps that accepted draft positions 1..i, a position "
                "a short draft did not reach counted as not accepted (vLLM's unit)"
            )
        lines = _setting_lines(engine, setting, width)
        blocks.append(out.getvalue() + "\n".join(lines) + "\n")
    return "\n".join(blocks)


def matched_markdown(document: Mapping[str, Any]) -> str | None:
    """The ``matched`` block as a markdown section, or None when the document has none."""
    matched = document.get("matched")
    if not matched:
        return None
    parts = ["## Matched oracle settings"]
    for engine, setting in matched.items():
        parts.append(f"### {_summary(engine, setting)}")
        if setting["rates"]:
            rows = ["| draft position | first i accepted | 95% interval |", "|---:|---:|---:|"]
            rows += [
                f"| {rate['position']} | {percent(rate['rate'])} | {_interval(rate['ci'])} |"
                for rate in setting["rates"]
            ]
            parts.append("\n".join(rows))
        if setting["speculative_config"] is not None:
            config = json.dumps(setting["speculative_config"], separators=(", ", ": "))
            parts.append(f"`speculative_config`:\n\n```json\n{config}\n```")
        if setting["environment"] is not None:
            assignments = "\n".join(f"{k}={v}" for k, v in setting["environment"].items())
            parts.append(f"Environment:\n\n```sh\n{assignments}\n```")
        parts.extend(f"Note: {note}" for note in setting.get("notes") or ())
        commands = "\n".join(command["line"] for command in setting["commands"])
        parts.append(f"To run it ({_RUNS_ON[engine]}):\n\n```\n{commands}\n```")
        parts.append(
            "What the setting cannot carry:\n\n"
            + "\n".join(f"- {note}" for note in setting["cannot_carry"])
        )
        parts.append(f"Sources read: {setting['checked']}")
    return "\n\n".join(parts)


def matched_html(document: Mapping[str, Any]) -> str:
    """The ``matched`` block as a page section below the charts ('' when there is none)."""
    matched = document.get("matched")
    if not matched:
        return ""
    parts = ['<section id="matched"><h2>What oracle settings match our acceptance?</h2>']
    for engine, setting in matched.items():
        parts.append(f"<h3>{html.escape(_summary(engine, setting))}</h3>")
        if setting["rates"]:
            rows = "".join(
                f"<tr><td>{rate['position']}</td><td>{percent(rate['rate'])}</td>"
                f"<td>{html.escape(_interval(rate['ci']))}</td></tr>"
                for rate in setting["rates"]
            )
            parts.append(
                "<table><tr><th>draft position</th><th>first i accepted</th>"
                f"<th>95% interval</th></tr>{rows}</table>"
            )
        lines = [command["line"] for command in setting["commands"]]
        if setting["speculative_config"] is not None:
            lines.insert(0, json.dumps(setting["speculative_config"], separators=(", ", ": ")))
        parts.extend(f"<p>Note: {html.escape(note)}</p>" for note in setting.get("notes") or ())
        parts.append(f"<pre>{html.escape(chr(10).join(lines))}</pre>")
        notes = "".join(f"<li>{html.escape(note)}</li>" for note in setting["cannot_carry"])
        parts.append(f"<p>What the setting cannot carry:</p><ul>{notes}</ul>")
        parts.append(f"<p>Sources read: {html.escape(setting['checked'])}</p>")
    parts.append("</section>")
    return "\n".join(parts)
