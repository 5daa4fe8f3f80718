"""The ``fold-acceptance`` command: parse arguments and hand them to the part of
``fold.command`` that runs them; an error becomes one line and its exit code, never a
traceback."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, cast

import fold.command.process  # noqa: F401  first: it sets the process up before numpy loads
from fold.command import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from fold.command.streams import QuietStderr, StdoutFailed, settle_stderr
from fold.errors import FoldError
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

# The library, rich and the presenters are imported where a run needs them, not here: `--help`
# and a usage error load none of them, and a plain fold loads no comparison, chart or ledger
# (docs/performance.md, "Start-up"; tests/test_startup.py holds it).

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
        "--sums",
        metavar="PATH",
        help="also write every request's sums to PATH, a Parquet file (docs/sums.md)",
    )
    parser.add_argument(
        "--from-sums",
        action="append",
        default=[],
        metavar="PATH",
        help="fold the sums files that --sums wrote on each host (paths or globs, quoted; "
        "repeatable) instead of step logs: the fold of the hosts' logs together (docs/sums.md)",
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
    try:
        status = _main(sys.argv[1:] if argv is None else list(argv))
    finally:
        settle_stderr()  # with argparse's exits too: the status stays the command's own
    if argv is None:
        # The command's own process (its console script) ends here: with its objects frozen,
        # the interpreter's exit skips a last collection over all of them, about 0.03 s of
        # the shipped fixture's 0.48 s fold (docs/performance.md, "Start-up"). A caller
        # that passes its arguments (a test, a script) keeps its collector as it was.
        gc.freeze()
    return status


def _main(argv: list[str]) -> int:
    if argv[:1] == [LEDGER_COMMAND]:
        from fold.command.ledger import build_ledger_parser, run_ledger

        arguments, run = build_ledger_parser().parse_args(argv[1:]), run_ledger
    else:
        arguments = build_parser().parse_args(argv)
        from fold.command.run import run_fold as run
    from rich.console import Console

    # rich writes, flushes and asks isatty and fileno of its file, all QuietStderr has
    stderr = Console(file=cast("IO[str]", QuietStderr(sys.stderr)), highlight=False)
    if sys.stdout is None:  # started with it closed (`>&-`): the answer would go nowhere
        stderr.print(
            "fold-acceptance: error: standard output is closed, and the answer is printed "
            "there; give it one (> fold.txt, or > /dev/null with --json PATH)",
            markup=False,
            soft_wrap=True,
        )
        return EXIT_USAGE
    stdout = Console(highlight=False)
    try:
        return run(arguments, stdout, stderr)
    except FoldError as error:
        label = "refused" if error.exit_code == EXIT_REFUSED else "error"
        stderr.print(f"fold-acceptance: {label}: {error}", markup=False, soft_wrap=True)
        return error.exit_code
    except BrokenPipeError:
        # The reader of stdout stopped early (`| head`): what it asked for was printed. Later
        # writes, the interpreter's own flush at exit included, go nowhere instead of failing.
        _stdout_to_nowhere()
        return EXIT_OK
    except StdoutFailed as error:
        stderr.print(
            f"fold-acceptance: error: cannot write to standard output: {error}",
            markup=False,
            soft_wrap=True,
        )
        _stdout_to_nowhere()
        return EXIT_USAGE
    except OSError as error:
        # A read or a write the system refused (a disk that fails, a file gone under the
        # command): the machine's, not the input's, and not a bug to report either.
        where = f"{error.filename}: " if error.filename is not None else ""
        stderr.print(
            f"fold-acceptance: error: {where}{error.strerror or error}: the system refused a "
            "read or a write; check the disk and the files named, then run again",
            markup=False,
            soft_wrap=True,
        )
        return EXIT_USAGE
    except Exception as error:  # the one place no traceback may pass
        return _unexpected(error, stderr)


def _stdout_to_nowhere() -> None:
    """Later writes to stdout, the interpreter's own flush at exit included, go to /dev/null
    instead of failing again."""
    with contextlib.suppress(OSError, ValueError):  # a stdout without a descriptor
        nowhere = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(nowhere, sys.stdout.fileno())
        finally:
            os.close(nowhere)


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


if __name__ == "__main__":
    sys.exit(main())
