"""``fold-acceptance ledger PATH``: the kept runs, a figure's history, the Parquet export.

Reached when the command's first argument is exactly ``ledger`` (``fold.cli``); this module
parses that command's arguments, calls the library and prints.
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from fold.command.outputs import check_outputs
from fold.command.streams import write_stdout
from fold.errors import InputError
from fold.ledger.check import DEFAULT_MIN_BASELINE, DEFAULT_WINDOW
from fold.ledger.schema import Kept
from fold.ledger.store import DEFAULT_WAIT_SECONDS, parse_labels
from fold.present.chart import require_matplotlib
from fold.present.output import dumps, write_atomically

EPILOG = """\
figures (--figure): A/P, 1+A/S, tok/s, steps/s, completion_tokens_per_step over the warm legs
(--fold all: over all legs); per_position:I, per_position_conditional:I,
per_position_of_proposed:I (draft position I, from 1); ratio:ARM, acceptance_factor:ARM,
speed_factor:ARM (against the arm named ARM with --vs), measured_speed_factor:ARM (the speed
factor a run of the oracle at our acceptance measured against ARM). A run is flagged (!) when
its figure lies outside the previous run's 95% interval; the labels that changed since are
named.

--check FIGURE (repeatable) holds the newest run (or --run N) against a baseline: the last
--window N earlier runs with the figure and its interval (--baseline-where KEY=VALUE chooses
them; --where by default). An alert is a difference past its threshold (docs/ledger.md) on
the side that regresses: a fall (--lower-boundary, the default for every figure) or a rise
(--upper-boundary; both: either way). Either flag alone applies to every --check;
--upper-boundary=FIGURE (repeatable) to that figure only.

exit status:
  0  the runs, the history or the export was written; with --check, every check holds
  1  --check: an alert (the figure regressed past its baseline)
  2  usage error, or PATH is not a ledger, a ledger of a newer schema, busy past --wait, or
     has no run with the figure (nothing written)
  3  --check: no alert, but some check cannot tell (too few baseline runs, or the run has
     no such figure or no interval for it)

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
    parser.add_argument(
        "path", nargs="?", metavar="PATH", help="the ledger (a DuckDB file or a ledger folder)"
    )
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
        "--check",
        action="append",
        default=[],
        metavar="FIGURE",
        help="check the newest run's figure against its baseline; exit 1 on an alert; repeatable",
    )
    parser.add_argument(
        "--run", type=int, metavar="N", help="with --check: check run N, not the newest"
    )
    parser.add_argument(
        "--baseline-where",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="with --check: the baseline's runs have this label (repeatable; default: --where)",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=None,
        metavar="N",
        help=f"with --check: the baseline is the last N earlier runs (default {DEFAULT_WINDOW})",
    )
    parser.add_argument(
        "--min-baseline",
        type=int,
        default=None,
        metavar="N",
        help=f"with --check: fewer baseline runs than N cannot tell (default "
        f"{DEFAULT_MIN_BASELINE})",
    )
    parser.add_argument(
        "--lower-boundary",
        action="append",
        nargs="?",
        const=EVERY_FIGURE,
        metavar="FIGURE",
        help="with --check: a fall is a regression (the default for every figure); "
        "=FIGURE: for that --check figure only (repeatable)",
    )
    parser.add_argument(
        "--upper-boundary",
        action="append",
        nargs="?",
        const=EVERY_FIGURE,
        metavar="FIGURE",
        help="with --check: a rise is a regression (with --lower-boundary: either way); "
        "=FIGURE: for that --check figure only (repeatable)",
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


def _an_export_file(name: str) -> bool:
    """A name ``--export`` writes in its folder (docs/ledger.md: one Parquet file a table)."""
    from fold.ledger.export import EXPORTED

    return name in {f"{table}.parquet" for table in EXPORTED}


def _run(arguments: argparse.Namespace, stdout: Console, stderr: Console) -> int:
    from fold.ledger.export import export_ledger
    from fold.ledger.history import figure_history, parse_figure, run_list, select
    from fold.ledger.store import read_runs
    from fold.present.history import history_markdown, history_table, runs_markdown, runs_table

    if arguments.path is None:
        raise InputError("ledger needs the ledger's path: fold-acceptance ledger PATH")
    if arguments.json == "-" and arguments.markdown == "-":
        raise InputError("--json - and --markdown - both want stdout; write one to a file")
    for flag, given in (("--html", arguments.html), ("--export", arguments.export)):
        if given == "-":  # only --json and --markdown go to stdout
            raise InputError(f"{flag} -: it writes files, not standard output; name one")
    check_outputs(
        [
            ("--json", arguments.json),
            ("--markdown", arguments.markdown),
            ("--html", arguments.html),
            ("--export", arguments.export),
        ],
        [("ledger", arguments.path)],
        folders=[("--export", arguments.export, _an_export_file)],
    )
    if arguments.wait < 0:
        raise InputError(f"--wait must be 0 or more seconds, got {arguments.wait:g}")
    where = parse_labels(arguments.where, "--where")
    if arguments.html:
        require_matplotlib()
    _refuse_check_options(arguments)
    key = parse_figure(arguments.figure, arguments.fold) if arguments.figure else None
    checked = [parse_figure(text, arguments.fold, "--check") for text in arguments.check]
    name = Path(arguments.path).name
    unfinished: list[str] = []
    runs = read_runs(arguments.path, wait_seconds=arguments.wait, unfinished=unfinished)
    if unfinished:
        stderr.print(unfinished_message(arguments.path, unfinished), markup=False, soft_wrap=True)
    if checked:
        return _check(arguments, runs, checked, name, where)
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
    markdown = b""
    if arguments.markdown:
        # exactly one of history and listing is None
        markdown = (
            history_markdown(history) if history is not None else runs_markdown(_given(listing))
        ).encode()
    if not _written(arguments, data, markdown):
        if history is not None:
            write_stdout(history_table(history))
        elif not arguments.export:
            write_stdout(runs_table(_given(listing)))
    return 0


def _written(arguments: argparse.Namespace, data: Any, markdown: bytes) -> bool:
    """The --markdown and --json files written; True when one of them went to stdout (the
    terminal table then does not)."""
    if arguments.markdown and arguments.markdown != "-":
        _write(arguments.markdown, markdown)
    if arguments.json and arguments.json != "-":
        _write(arguments.json, dumps(data))
    if arguments.json == "-":
        write_stdout(dumps(data))
    elif arguments.markdown == "-":
        write_stdout(markdown)
    else:
        return False
    return True


def _refuse_check_options(arguments: argparse.Namespace) -> None:
    options = {
        "--run": arguments.run,
        "--baseline-where": arguments.baseline_where,
        "--window": arguments.window,
        "--min-baseline": arguments.min_baseline,
        "--lower-boundary": arguments.lower_boundary or None,
        "--upper-boundary": arguments.upper_boundary or None,
    }
    given = [flag for flag, value in options.items() if value is not None]
    if given and not arguments.check:
        raise InputError(f"{given[0]} goes with --check FIGURE, the figure to check")
    if not arguments.check:
        return
    for flag in ("figure", "by", "html", "export"):
        if getattr(arguments, flag):
            raise InputError(f"--check and --{flag} are separate jobs: run them one at a time")
    for flag, value in (("--window", arguments.window),
                        ("--min-baseline", arguments.min_baseline)):  # fmt: skip
        if value is not None and value < 1:
            raise InputError(f"{flag} {value}: a count of runs, 1 or more")
    window = arguments.window or DEFAULT_WINDOW
    min_baseline = arguments.min_baseline or DEFAULT_MIN_BASELINE
    if min_baseline > window:
        raise InputError(
            f"--min-baseline {min_baseline} is more than --window {window}: the baseline never "
            "holds that many runs, so the check could never decide; lower it or widen the window"
        )


EVERY_FIGURE = "*"
"""What a bare --lower-boundary or --upper-boundary stands for: every --check figure."""


def _boundaries(arguments: argparse.Namespace, keys) -> list[str | None]:
    """Each --check figure's side that regresses (None: the figure's own)."""
    from fold.ledger.history import parse_figure

    named = {}
    for flag, given in (("--lower-boundary", arguments.lower_boundary),
                        ("--upper-boundary", arguments.upper_boundary)):  # fmt: skip
        figures = set()
        for text in given or []:
            if text == EVERY_FIGURE:
                figures |= set(range(len(keys)))
                continue
            key = parse_figure(text, arguments.fold, flag)
            matching = {i for i, checked in enumerate(keys) if checked == key}
            if not matching:
                raise InputError(f"{flag}={text}: not a --check figure of this command")
            figures |= matching
        named[flag] = figures
    sides = []
    for i in range(len(keys)):
        lower, upper = i in named["--lower-boundary"], i in named["--upper-boundary"]
        sides.append("both" if lower and upper else "lower" if lower else "upper" if upper
                     else None)  # fmt: skip
    return sides


def _check(arguments, runs, keys, name: str, where: dict[str, str]) -> int:
    from fold.ledger.check import check_runs
    from fold.present.check import check_markdown, check_table

    boundaries = _boundaries(arguments, keys)
    baseline_where = (
        None
        if arguments.baseline_where is None
        else parse_labels(arguments.baseline_where, "--baseline-where")
    )
    data = check_runs(
        runs,
        keys,
        ledger=name,
        run_id=arguments.run,
        where=where,
        baseline_where=baseline_where,
        window=arguments.window or DEFAULT_WINDOW,
        min_baseline=arguments.min_baseline or DEFAULT_MIN_BASELINE,
        boundaries=boundaries,
    )
    markdown = check_markdown(data).encode() if arguments.markdown else b""
    if not _written(arguments, data, markdown):
        write_stdout(check_table(data))
    counts = data["counts"]
    if counts["alert"]:
        return 1
    return 0 if counts["holds"] == data["total"] else 3


KEPT_AT = "FOLD_ACCEPTANCE_KEPT_AT"
"""The environment variable naming the time a run is kept at, for a backfill of old gates and
for examples that print the same every time (docs/ledger.md)."""


def kept_at() -> datetime | None:
    """The time ``FOLD_ACCEPTANCE_KEPT_AT`` names (ISO 8601; UTC unless it says), or None."""
    text = os.environ.get(KEPT_AT)
    if not text:
        return None
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            f"{KEPT_AT}={text!r}: not an ISO 8601 time; give one like 2026-12-01T09:00:00 "
            "(UTC) or unset it to keep the run at the time it is kept"
        ) from None
    return found if found.tzinfo else found.replace(tzinfo=timezone.utc)


def unfinished_message(path: str, unfinished: list[str]) -> str:
    """The files of a ledger folder that were not read, named with what each is (an
    unfinished write is a writer still at work or one that stopped before its run was
    whole)."""
    count = len(unfinished)
    return (
        f"fold-acceptance: {path}: {count} file{'s' if count != 1 else ''} not read: "
        + "; ".join(unfinished)
    )


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


def _given(listing: dict[str, Any] | None) -> dict[str, Any]:
    assert listing is not None  # the listing is made whenever no figure's history is
    return listing
