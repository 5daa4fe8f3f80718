"""The ``fold-acceptance`` command: parse arguments, call the library, print."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import fold.command_process  # noqa: F401  first: it sets the process up before numpy loads
from fold.errors import FoldError, InputError
from fold.inputs.acceptance import DEFAULT_WINDOW_STEPS
from fold.inputs.defaults import (
    DEFAULT_PREDICATE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    DEFAULT_STALL_FACTOR,
    DEFAULT_TOLERANCE,
    ENGINES,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from fold.folding.document import Document

# The library, rich and the presenters are imported where a run needs them, not here: `--help`
# and a usage error load none of them, and a plain fold loads no comparison, chart or ledger
# (docs/performance.md, "Start-up"; tests/test_startup.py holds it).

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
PROGRESS_AFTER_SECONDS = 1.0

EPILOG = """\
exit status:
  0  the fold was computed and printed
  1  refused: the inputs disagree (accepted > proposed, a warm leg without steps, a recorded
     throughput fold the warm predicate does not reproduce, a log read twice, a step log or
     spec_acceptance the engine's own counters contradict, a leg with some of the three
     counters), or no step log and no counters to fold, or a --matched setting the engine
     would refuse (docs/matched.md)
  2  usage error (--follow or --trace without a step log among them), or an input that cannot
     be read or parsed (the message names file and line), or a --ledger that is not one or is
     busy past --ledger-wait (nothing written)

the runs kept with --ledger: fold-acceptance ledger PATH (see fold-acceptance ledger --help);
a first argument of exactly "ledger" is that command, so an arm record named ledger is ./ledger
"""
LEDGER_COMMAND = "ledger"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fold-acceptance",
        description=(
            "Join a speculative-decoding step log to a benchmark gate's legs and fold acceptance "
            "per leg and over the warm legs, in vLLM's units (A/P and 1 + A/S)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("arm", help="the gate's arm record (our-arm.json)")
    parser.add_argument(
        "logs",
        nargs="*",
        help="step logs, or the engine's trace (vllm-cli stderr with VT_SPEC_TRACE=1, one file "
        "per prompt in prompt order): paths or globs (quote globs); none: fold the counters the "
        "record's legs carry (spec_drafts_proposed, spec_drafts_accepted, "
        "spec_drafted_request_steps)",
    )
    parser.add_argument(
        "--warm",
        default=DEFAULT_PREDICATE,
        metavar="EXPR",
        help=f"warm-leg predicate over leg fields, a polars SQL expression (default: "
        f"{DEFAULT_PREDICATE!r}); the same legs feed the throughput and acceptance folds",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW_STEPS,
        metavar="N",
        help=f"steps per window of the within-leg shape (default {DEFAULT_WINDOW_STEPS})",
    )
    parser.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="count malformed lines as skipped instead of stopping at the first one",
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write the fold as JSON to PATH ('-' for stdout only)"
    )
    parser.add_argument(
        "--annotate",
        metavar="OUT",
        help="write a copy of the arm record with acceptance added to OUT (atomically)",
    )
    parser.add_argument(
        "--vs",
        action="append",
        default=[],
        metavar="NAME[:KIND]=PATH",
        help="an oracle arm to compare with, as its engine writes it (scrapes, bench results, "
        "server responses, arm records: docs/oracles.md), or another arm record of ours (with "
        "--vs-log); KIND (vllm, sglang, llamacpp, ours) is detected when not given; "
        "KIND+matched or matched[@BASE] marks an oracle run at our acceptance "
        "(docs/matched-arms.md); repeatable",
    )
    parser.add_argument(
        "--vs-log",
        action="append",
        default=[],
        metavar="NAME=LOG",
        help="a step log (path or quoted glob) of the --vs arm NAME, another run of ours; "
        "repeatable",
    )
    parser.add_argument(
        "--matched",
        action="append",
        default=[],
        choices=ENGINES,
        metavar="ENGINE",
        help="also print (and with --json record) the setting that makes ENGINE (vllm, sglang, "
        "llamacpp) accept as our warm legs did, with its command lines (docs/matched.md); "
        "repeatable",
    )
    parser.add_argument(
        "--matched-config",
        metavar="JSON",
        help='with --matched vllm: the oracle\'s own speculative_config (default {"method": '
        '"ngram"}), to which the synthetic rates are added',
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="refuse another run of ours whose legs do not pair with ours leg by leg (same "
        "legs, runs, prompt tokens and warm legs)",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        metavar="FRACTION",
        help="a factor within this of 1 counts as equal in the verdict (default "
        f"{DEFAULT_TOLERANCE:g}, i.e. {100 * DEFAULT_TOLERANCE:g}%%)",
    )
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=DEFAULT_RESAMPLES,
        metavar="N",
        help=f"resamples for the 95%% intervals (default {DEFAULT_RESAMPLES}; 0: no intervals)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        metavar="S",
        help=f"seed of the bootstrap's draws (default {DEFAULT_SEED}): same seed, same output",
    )
    parser.add_argument(
        "--follow",
        action="store_true",
        help="tail the growing logs and refresh the table until Ctrl-C or --idle; then print "
        "the final fold",
    )
    parser.add_argument(
        "--idle",
        type=float,
        metavar="SECONDS",
        help="with --follow: stop after this long without new data",
    )
    parser.add_argument(
        "--prefill-tokens",
        type=int,
        choices=(0, 1),
        metavar="{0,1}",
        help="output tokens per request that no verify step emits: 1 for servers, 0 for "
        "llama.cpp's speculative-simple (default: learned from the arm)",
    )
    parser.add_argument(
        "--stall-factor",
        type=float,
        default=DEFAULT_STALL_FACTOR,
        metavar="F",
        help="a stall is an interval between a request's steps longer than F times its median "
        f"interval (default {DEFAULT_STALL_FACTOR:g})",
    )
    parser.add_argument(
        "--trace",
        metavar="PATH",
        help="also write the run's timeline as Chrome trace-event JSON (Perfetto UI, "
        "chrome://tracing): a track per request, a slice per verify step, the legs, stalls and "
        "acceptance",
    )
    parser.add_argument(
        "--details",
        action="store_true",
        help="also print the sources of every figure, the per-position figures, where every "
        "line went, the step cadence and the speed splits (before the comparison, so the "
        "verdicts stay last)",
    )
    parser.add_argument(
        "--markdown",
        metavar="PATH",
        help="also write a GitHub-flavoured markdown record of the fold and comparison to PATH "
        "('-' for stdout only)",
    )
    parser.add_argument(
        "--html",
        metavar="PATH",
        help="also write a self-contained page of charts to PATH (opens from a file, offline; "
        "needs the report extra: pip install 'fold-acceptance[report]')",
    )
    parser.add_argument(
        "--plots",
        metavar="DIR",
        help="also write each chart as DIR/NAME.png and DIR/NAME.svg (stable names); with "
        "--markdown the record shows them",
    )
    parser.add_argument(
        "--ledger",
        metavar="PATH",
        help="also keep the run (its JSON document, labels and input files' names and sizes) in "
        "the ledger PATH: a DuckDB file, or a folder many processes append to at once (an "
        "existing folder, or a new PATH ending in /); created if missing (needs the ledger "
        "extra: pip install 'fold-acceptance[ledger]'); a run kept before is not kept twice",
    )
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --ledger: a label of the kept run (commit=3f2a9c1, k=7); repeatable",
    )
    parser.add_argument(
        "--ledger-wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --ledger: how long to wait for another process writing the ledger before "
        "refusing (default 30)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == [LEDGER_COMMAND]:
        from fold.cli_ledger import build_ledger_parser, run_ledger

        arguments, run = build_ledger_parser().parse_args(argv[1:]), run_ledger
    else:
        arguments, run = build_parser().parse_args(argv), _run
    from rich.console import Console

    stdout = Console(highlight=False)
    stderr = Console(stderr=True, highlight=False)
    try:
        return run(arguments, stdout, stderr)
    except FoldError as error:
        label = "refused" if error.exit_code == EXIT_REFUSED else "error"
        stderr.print(f"fold-acceptance: {label}: {error}", markup=False, soft_wrap=True)
        return error.exit_code
    except BrokenPipeError:
        # The reader of stdout stopped early (`| head`): what it asked for was printed. Later
        # writes, the interpreter's own flush at exit included, go nowhere instead of failing.
        with contextlib.suppress(OSError, ValueError):  # a stdout without a descriptor
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as error:  # the one place no traceback may pass
        return _unexpected(error, stderr)


def _unexpected(error: Exception, stderr: Console) -> int:
    """An exception no input should cause: one error line, one line asking for a report, no
    traceback (exit 2). Out of memory is said plainly: the input, or the machine, is too big."""
    if isinstance(error, MemoryError):
        problem = "ran out of memory"
    else:
        detail = str(error)
        problem = f"unexpected {type(error).__name__}" + (f": {detail}" if detail else "")
    stderr.print(f"fold-acceptance: error: {problem}", markup=False, soft_wrap=True)
    stderr.print(
        "fold-acceptance: this is a bug, please report it with the command line, the version "
        f"(fold-acceptance {_version()}) and the inputs, or the lines of them that show it",
        markup=False,
        soft_wrap=True,
    )
    return EXIT_USAGE


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("fold-acceptance")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "not installed"


def _run(arguments: argparse.Namespace, stdout: Console, stderr: Console) -> int:
    if arguments.idle is not None and not arguments.follow:
        raise InputError("--idle goes with --follow")
    if arguments.json == "-" and arguments.markdown == "-":
        raise InputError("--json - and --markdown - both want stdout; write one to a file")
    for wanted, given in (("--follow", arguments.follow), ("--trace", arguments.trace)):
        if given and not arguments.logs:
            raise InputError(
                f"{wanted} needs a step log: it follows or draws the log's steps, which the "
                "record's counters do not hold; name the step log(s) after the arm record"
            )
    if arguments.matched_config is not None and "vllm" not in arguments.matched:
        raise InputError("--matched-config goes with --matched vllm")
    from fold.inputs.arm import load_arm

    base = None
    if arguments.matched_config is not None:
        from fold.compare.matched import parse_base_config

        base = parse_base_config(arguments.matched_config)  # refused before the fold, not after
    if arguments.html or arguments.plots:
        from fold.present.chart import require_matplotlib

        require_matplotlib()
    labels = _check_ledger(arguments)
    arm = load_arm(arguments.arm)
    oracles = []
    if arguments.vs or arguments.vs_log:
        from fold.compare.vs_arms import load_arms

        oracles = load_arms(
            arguments.vs,
            arguments.vs_log,
            main=arm,
            predicate=arguments.warm,
            fold_options=_fold_options(arguments),
            paired=arguments.paired,
        )
    if arguments.follow:
        result = _follow(arguments, stderr)
        arm = load_arm(arguments.arm)  # the gate writes its record when its last leg ends
    else:
        result = _fold_once(arm, arguments, stderr)
    if oracles:
        from fold.compare.comparison import compare

        result = result.with_comparison(compare(result, oracles, arguments.tolerance, record=arm))
    if arguments.matched:
        from fold.compare.matched import matched_settings

        found = matched_settings(
            result, arguments.matched, base, arguments.bootstrap, arguments.seed
        )
        result = result.with_matched(found)
    # The JSON document, built once (with the comparison in it): every output
    # is drawn from it alone.
    document = result.to_json()
    if arguments.ledger:  # first: a ledger busy past the wait refuses before anything is written
        _keep(arguments, document, labels, stderr)
    from fold.present.annotate import dumps, write_annotated, write_atomically

    if arguments.annotate:
        write_annotated(arm, result, arguments.annotate)
    if arguments.trace:
        from fold.folding.timeline_lines import attributed_lines
        from fold.present.timeline import write_timeline

        lines = attributed_lines(arm, arguments.logs, skip_bad_lines=arguments.skip_bad_lines)
        write_timeline(arguments.trace, document, lines)
    if arguments.html or arguments.plots:
        from fold.present.page import write_page, write_plots

        if arguments.html:
            write_page(arguments.html, document)
        if arguments.plots:
            write_plots(arguments.plots, document)
    if arguments.markdown:
        from fold.present.markdown import markdown_record
        from fold.present.page import markdown_links

        record = markdown_record(document, arm_path=arguments.arm)
        if arguments.plots:
            record += markdown_links(document, arguments.plots, arguments.markdown)
        record = record.encode()
        if arguments.markdown == "-":
            sys.stdout.buffer.write(record)
            if arguments.json:
                write_atomically(arguments.json, dumps(document))
            return EXIT_OK
        write_atomically(arguments.markdown, record)
    if arguments.json == "-":
        sys.stdout.buffer.write(dumps(document))
        return EXIT_OK
    if arguments.json:
        write_atomically(arguments.json, dumps(document))
    from fold.present.terminal import terminal

    text = terminal(
        document, width=stdout.width, details=arguments.details, color=stdout.is_terminal
    )
    sys.stdout.write(text)
    return EXIT_OK


def _check_ledger(arguments: argparse.Namespace) -> dict[str, str]:
    """The run's labels; the ledger refused before the fold if it is not one."""
    for flag, given in (("--label", arguments.label), ("--ledger-wait", arguments.ledger_wait)):
        if given and not arguments.ledger:
            raise InputError(f"{flag} goes with --ledger PATH, the ledger to keep the run in")
    if arguments.ledger_wait is not None and arguments.ledger_wait < 0:
        raise InputError(f"--ledger-wait must be 0 or more seconds, got {arguments.ledger_wait:g}")
    if not arguments.ledger:
        return {}
    from fold.ledger.store import check_ledger, parse_labels

    labels = parse_labels(arguments.label)
    check_ledger(arguments.ledger)
    return labels


def _keep(arguments: argparse.Namespace, document, labels: dict[str, str], stderr) -> None:
    from fold.cli_ledger import kept_at, kept_message
    from fold.ledger.store import DEFAULT_WAIT_SECONDS, input_files, keep_run

    inputs = input_files(arguments.arm, arguments.logs, arguments.vs, arguments.vs_log)
    wait = DEFAULT_WAIT_SECONDS if arguments.ledger_wait is None else arguments.ledger_wait
    kept = keep_run(arguments.ledger, document, labels, inputs, wait_seconds=wait, now=kept_at())
    stderr.print(kept_message(arguments.ledger, kept, labels), markup=False, soft_wrap=True)


def _fold_options(arguments: argparse.Namespace) -> dict:
    """The fold's settings, shared by the main arm and every other run of ours."""
    return {
        "window_steps": arguments.window,
        "skip_bad_lines": arguments.skip_bad_lines,
        "stall_factor": arguments.stall_factor,
        "prefill_tokens": arguments.prefill_tokens,
        "resamples": arguments.bootstrap,
        "seed": arguments.seed,
    }


def _fold_once(arm, arguments: argparse.Namespace, stderr: Console) -> Document:
    from fold.api import fold_acceptance
    from fold.inputs.reader import expand_log_paths

    progress = _ProgressBar(expand_log_paths(arguments.logs), stderr, arguments.quiet)
    try:
        return fold_acceptance(
            arm,
            arguments.logs,
            predicate=arguments.warm,
            progress=progress.advance,
            **_fold_options(arguments),
        )
    finally:
        progress.stop()


def _follow(arguments: argparse.Namespace, stderr: Console) -> Document:
    """The live table goes to stderr, so stdout holds only the final table (or the JSON)."""
    from rich.live import Live

    from fold.folding.follow import Follower, run_follow
    from fold.present.live import live_view

    follower = Follower(
        arguments.arm,
        arguments.logs,
        predicate=arguments.warm,
        window_steps=arguments.window,
        skip_bad_lines=arguments.skip_bad_lines,
        stall_factor=arguments.stall_factor,
        prefill_tokens=arguments.prefill_tokens,
        resamples=arguments.bootstrap,
        seed=arguments.seed,
    )
    with Live(console=stderr, refresh_per_second=4, transient=True) as live:
        outcome = run_follow(
            follower,
            on_view=lambda view: live.update(live_view(view)),
            idle_seconds=arguments.idle,
        )
    return outcome.result


class _ProgressBar:
    """A byte progress bar on stderr, shown only on a terminal and once a fold takes a while."""

    def __init__(self, paths: list[str], console: Console, quiet: bool) -> None:
        self._enabled = console.is_terminal and not quiet
        self._console = console
        self._total = sum(os.path.getsize(path) for path in paths)
        self._done = 0
        self._started = time.monotonic()
        self._progress: Progress | None = None
        self._task = None

    def advance(self, read_bytes: int) -> None:
        self._done += read_bytes
        if not self._enabled:
            return
        if self._progress is None:
            if time.monotonic() - self._started < PROGRESS_AFTER_SECONDS:
                return
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

            self._progress = Progress(
                "folding",
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                console=self._console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("fold", total=self._total)
        self._progress.update(self._task, completed=self._done)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()


if __name__ == "__main__":
    sys.exit(main())
