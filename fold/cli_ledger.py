"""``fold-acceptance ledger PATH``: the kept runs, a figure's history, the Parquet export.

Reached when the command's first argument is exactly ``ledger`` (``fold.cli``); this module
parses that command's arguments, calls the library and prints.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console

from fold.errors import InputError
from fold.ledger.store import DEFAULT_WAIT_SECONDS, Kept, parse_labels
from fold.present.annotate import dumps, write_atomically
from fold.present.chart import require_matplotlib

EPILOG = """\
figures (--figure): A/P, 1+A/S, tok/s, steps/s, completion_tokens_per_step over the warm legs
(--fold all: over all legs); per_position:I, per_position_conditional:I,
per_position_of_proposed:I (draft position I, from 1); ratio:ARM, acceptance_factor:ARM,
speed_factor:ARM (against the arm named ARM with --vs), measured_speed_factor:ARM (the speed
factor a run of the oracle at our acceptance measured against ARM). A run is flagged (!) when
its figure lies outside the previous run's 95% interval; the labels that changed since are
named.

exit status:
  0  the runs, the history or the export was written
  2  usage error, or PATH is not a ledger, a ledger of a newer schema, busy past --wait, or
     has no run with the figure (nothing written)

An arm record named ledger is folded as ./ledger: a first argument of exactly "ledger" is
always this command.
"""


def build_ledger_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fold-acceptance ledger",
        description="The runs kept with --ledger: list them, show a figure's history with its "
        "intervals and what changed, or export the tables as Parquet.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", nargs="?", metavar="PATH", help="the ledger (a DuckDB file)")
    parser.add_argument("--figure", metavar="FIGURE", help="show this figure's history (see below)")
    parser.add_argument(
        "--fold",
        choices=("warm", "all"),
        default="warm",
        help="the fold of ours the figure is taken over (default warm)",
    )
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only the runs with this label, in the list or the history; repeatable (all must "
        "hold)",
    )
    parser.add_argument(
        "--by",
        metavar="KEY",
        help="one history per value of the label KEY, each run against the one before it in "
        "its group",
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write the runs or the history as JSON ('-': stdout)"
    )
    parser.add_argument(
        "--markdown", metavar="PATH", help="also write it as markdown ('-': stdout only)"
    )
    parser.add_argument(
        "--html",
        metavar="PATH",
        help="also write the figure's history (A/P without --figure) as a page with its chart "
        "(needs the report extra)",
    )
    parser.add_argument(
        "--export",
        metavar="DIR",
        help="write the ledger's tables as DIR/{ledger,runs,labels,inputs,figures}.parquet "
        "(docs/ledger.md has their schema)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"how long to wait for a process writing the ledger (default "
        f"{DEFAULT_WAIT_SECONDS:g})",
    )
    return parser


def run_ledger(arguments: argparse.Namespace, stdout: Console, stderr: Console) -> int:
    try:
        return _run(arguments, stdout, stderr)
    except InputError as error:
        if os.path.isfile("ledger") and "ledger" in str(error):
            raise InputError(
                f"{error}. To fold an arm record named ledger, name it ./ledger"
            ) from error
        raise


def _run(arguments: argparse.Namespace, stdout: Console, stderr: Console) -> int:
    from fold.ledger.export import export_ledger
    from fold.ledger.history import figure_history, parse_figure, run_list, select
    from fold.ledger.store import read_runs
    from fold.present.history import history_markdown, history_table, runs_markdown, runs_table

    if arguments.path is None:
        raise InputError("ledger needs the ledger's path: fold-acceptance ledger PATH")
    if arguments.json == "-" and arguments.markdown == "-":
        raise InputError("--json - and --markdown - both want stdout; write one to a file")
    if arguments.wait < 0:
        raise InputError(f"--wait must be 0 or more seconds, got {arguments.wait:g}")
    where = parse_labels(arguments.where, "--where")
    if arguments.html:
        require_matplotlib()
    key = parse_figure(arguments.figure, arguments.fold) if arguments.figure else None
    name = Path(arguments.path).name
    runs = read_runs(arguments.path, wait_seconds=arguments.wait)
    history = (
        None
        if key is None
        else figure_history(runs, key, where=where, by=arguments.by, ledger=name)
    )
    if history is None and arguments.by:
        raise InputError("--by groups a figure's history: give --figure too")
    listing = (
        run_list(select(runs, where), ledger=name, kept=len(runs)) if history is None else None
    )
    data = history if history is not None else listing
    if arguments.html:
        from fold.present.history_page import history_page

        drawn = history or figure_history(runs, parse_figure("A/P"), where=where, ledger=name)
        _write(arguments.html, history_page(drawn))
    if arguments.export:
        written = export_ledger(arguments.path, arguments.export, wait_seconds=arguments.wait)
        stderr.print(
            f"fold-acceptance: exported {len(runs)} run{'s' if len(runs) != 1 else ''} of "
            f"{arguments.path} to {arguments.export}: {', '.join(p.name for p in written)}",
            markup=False,
            soft_wrap=True,
        )
    markdown = None
    if arguments.markdown:
        markdown = (history_markdown(history) if history else runs_markdown(listing)).encode()
        if arguments.markdown != "-":
            _write(arguments.markdown, markdown)
    if arguments.json and arguments.json != "-":
        _write(arguments.json, dumps(data))
    if arguments.json == "-":
        sys.stdout.buffer.write(dumps(data))
    elif arguments.markdown == "-":
        sys.stdout.buffer.write(markdown)
    elif history is not None:
        sys.stdout.write(history_table(history))
    elif not arguments.export:
        sys.stdout.write(runs_table(listing))
    return 0


def kept_message(path: str, kept: Kept, labels: dict[str, str]) -> str:
    """What --ledger did, for stderr."""
    if not kept.already_kept:
        return f"fold-acceptance: kept in {path} as run {kept.run_id}"
    message = (
        f"fold-acceptance: {path} already keeps this run (same inputs, same figures) as run "
        f"{kept.run_id}; not kept again"
    )
    if kept.labels != labels:
        shown = " ".join(f"{k}={v}" for k, v in kept.labels.items()) or "no labels"
        message += f" (it is kept with {shown}; the labels given now were not added)"
    return message


def _write(path: str, data: bytes) -> None:
    write_atomically(path, data)
