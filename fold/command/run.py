"""A fold run of the command: the arguments ``fold/cli.py`` parsed, checked together, then
the library called (the fold, the comparison, the matched settings), the result document built
once, kept in the ledger, and every output the arguments ask for drawn from it."""

from __future__ import annotations

import argparse
import glob
import os
from typing import TYPE_CHECKING

from fold.command import EXIT_OK
from fold.command.progress import ProgressBar
from fold.command.streams import write_stdout
from fold.errors import InputError, RefusedError

if TYPE_CHECKING:
    from rich.console import Console

    from fold.folding.document import Document
    from fold.folding.host_sums import RefusedWithSums
    from fold.inputs.arm import ArmRecord
    from fold.inputs.oracles import ArmFigures
    from fold.inputs.vs_arms import OurRun

# The library, rich and the presenters are imported where a run needs them, not here: a plain
# fold loads no comparison, chart or ledger (docs/performance.md, "Start-up";
# tests/test_startup.py holds it).


def run_fold(arguments: argparse.Namespace, stdout: Console, stderr: Console) -> int:
    if arguments.idle is not None and not arguments.follow:
        raise InputError("--idle goes with --follow")
    if arguments.json == "-" and arguments.markdown == "-":
        raise InputError("--json - and --markdown - both want stdout; write one to a file")
    if arguments.from_sums:
        _check_from_sums(arguments)
    for wanted, given in (
        ("--follow", arguments.follow),
        ("--trace", arguments.trace),
        ("--sums", arguments.sums),
    ):
        if given and not arguments.logs and not arguments.from_sums:
            raise InputError(
                f"{wanted} needs a step log: it reads the log's steps, which the "
                "record's counters do not hold; name the step log(s) after the arm record"
            )
    if arguments.matched_config is not None and "vllm" not in arguments.matched:
        raise InputError("--matched-config goes with --matched vllm")
    from fold.folding import native

    if native.STALE is not None:
        stderr.print(f"fold-acceptance: warning: {native.STALE}", markup=False, soft_wrap=True)
    from fold.inputs.arm import load_arm

    base = None
    if arguments.matched_config is not None:
        from fold.compare.matched import parse_base_config

        base = parse_base_config(arguments.matched_config)  # refused before the fold, not after
    if arguments.html or arguments.plots:
        from fold.present.chart import require_matplotlib

        require_matplotlib()
    labels = _check_ledger(arguments)
    _check_outputs(arguments)  # after the ledger's own check: a folder that is none is named so
    # Followed, the gate may write its record only when its last leg ends: until then the
    # follower shows provisional groups, and the other arms are folded against it after.
    read = _read_other_arms(arguments)  # their files refused now, not after a long follow
    from fold.folding.host_sums import RefusedWithSums

    try:
        if arguments.follow:
            from fold.inputs.arm import load_arm_if_written

            written = load_arm_if_written(arguments.arm)
            oracles = [] if written is None else _fold_other_arms(arguments, read, written)
            result = _follow(arguments, stderr)
            arm = load_arm(arguments.arm)  # as written when the follow ended
            if written is None:
                oracles = _fold_other_arms(arguments, read, arm)
        else:
            arm = load_arm(arguments.arm)
            oracles = _fold_other_arms(arguments, read, arm)
            result = _fold_once(arm, arguments, stderr)
    except RefusedWithSums as refused:
        raise _written_anyway(arguments.sums, refused) from None
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
    from fold.present.annotate import write_annotated
    from fold.present.output import dumps, write_atomically

    if arguments.sums:
        from fold.present.sums_file import sums_parquet

        write_atomically(arguments.sums, sums_parquet(result.sums))
    if arguments.annotate:
        write_annotated(arm, document, arguments.annotate)
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

        text = markdown_record(document, arm_path=arguments.arm)
        if arguments.plots:
            text += markdown_links(document, arguments.plots, arguments.markdown)
        record = text.encode()
        if arguments.markdown == "-":
            write_stdout(record)
            if arguments.json:
                write_atomically(arguments.json, dumps(document))
            return EXIT_OK
        write_atomically(arguments.markdown, record)
    if arguments.json == "-":
        write_stdout(dumps(document))
        return EXIT_OK
    if arguments.json:
        write_atomically(arguments.json, dumps(document))
    from fold.present.terminal import terminal

    text = terminal(
        document, width=stdout.width, details=arguments.details, color=stdout.is_terminal
    )
    write_stdout(text)
    return EXIT_OK


def _read_other_arms(arguments: argparse.Namespace) -> list[ArmFigures | OurRun] | None:
    """The --vs and --vs-log arms read (None without either)."""
    if not (arguments.vs or arguments.vs_log):
        return None
    from fold.compare.vs_arms import TAKEN_NAMES
    from fold.inputs.vs_arms import read_vs_arms

    return read_vs_arms(arguments.vs, arguments.vs_log, taken=TAKEN_NAMES)


def _fold_other_arms(
    arguments: argparse.Namespace, read: list[ArmFigures | OurRun] | None, arm: ArmRecord
) -> list:
    """The arms ``_read_other_arms`` read, folded against ``arm`` (none without any)."""
    if read is None:
        return []
    from fold.compare.vs_arms import fold_vs_arms

    return fold_vs_arms(
        read,
        main=arm,
        predicate=arguments.warm,
        fold_options=fold_options(arguments),
        paired=arguments.paired,
    )


def _check_outputs(arguments: argparse.Namespace) -> None:
    """The files the run will write, refused before the fold when they cannot be: the sums
    file's path, and any output that would overwrite an input or another output."""
    if arguments.sums is not None:
        sums = arguments.sums
        if sums in ("", "-"):
            raise InputError(
                f"--sums {sums!r}: the sums file is Parquet, written to a file: name one "
                "(sums.parquet)"
            )
        if sums.endswith(("/", os.sep)) or os.path.isdir(sums):
            raise InputError(f"--sums {sums}: a folder, not a file: name a file in it")
        folder = os.path.dirname(sums) or "."
        if not os.path.isdir(folder):
            raise InputError(f"--sums {sums}: no folder {folder} to write it in")
    for flag, given in (
        ("--html", arguments.html),
        ("--plots", arguments.plots),
        ("--trace", arguments.trace),
        ("--annotate", arguments.annotate),
    ):
        if given == "-":  # only --json and --markdown go to stdout
            raise InputError(f"{flag} -: it writes a file, not standard output; name one")
    outputs = [
        ("--json", arguments.json),
        ("--sums", arguments.sums),
        ("--markdown", arguments.markdown),
        ("--html", arguments.html),
        ("--plots", arguments.plots),
        ("--trace", arguments.trace),
        ("--annotate", arguments.annotate),
        ("--ledger", arguments.ledger),
    ]
    if all(path in (None, "", "-") for _, path in outputs):
        return
    from fold.command.outputs import check_outputs
    from fold.inputs.reader import logs_present, run_inputs

    logs = list(arguments.logs or ())
    followed = []
    if arguments.follow:  # a followed log may appear later: its path or glob counts already
        followed = [pattern for pattern in logs if glob.has_magic(pattern)]
        absent = [path for path in logs if path not in followed and not os.path.exists(path)]
        logs = logs_present(logs)
    inputs = run_inputs(arguments.arm, logs, arguments.vs, arguments.vs_log, arguments.from_sums)
    if arguments.follow:
        inputs += [("log", path) for path in absent]
    if arguments.ledger:
        inputs.append(("ledger", arguments.ledger))
    check_outputs(
        outputs,
        inputs,
        followed=followed,
        folders=[("--plots", arguments.plots, _a_chart_file)],
    )


def _a_chart_file(name: str) -> bool:
    """A name ``--plots`` may write in its folder (a chart as NAME.png and NAME.svg)."""
    return name.endswith((".png", ".svg"))


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
    from fold.command.ledger import kept_at, kept_message
    from fold.ledger.store import DEFAULT_WAIT_SECONDS, input_files, keep_run

    inputs = input_files(
        arguments.arm, arguments.logs, arguments.vs, arguments.vs_log, arguments.from_sums
    )
    wait = DEFAULT_WAIT_SECONDS if arguments.ledger_wait is None else arguments.ledger_wait
    kept = keep_run(arguments.ledger, document, labels, inputs, wait_seconds=wait, now=kept_at())
    stderr.print(kept_message(arguments.ledger, kept, labels), markup=False, soft_wrap=True)


def _written_anyway(path: str, refused: RefusedWithSums) -> RefusedError:
    """The refusal, once the sums file it carries is written: a host's own fold is refused
    where the union of every host's is not (a warm leg this host served no step of, counters
    that count every host), and the union needs each host's part."""
    from fold.present.output import write_atomically
    from fold.present.sums_file import sums_parquet

    write_atomically(path, sums_parquet(refused.sums))
    return RefusedError(
        f"{refused}\n--sums {path} is written all the same: it is this host's part of a gate "
        "folded over many hosts' files (--from-sums, docs/sums.md)"
    )


def fold_options(arguments: argparse.Namespace) -> dict:
    """The fold's settings, shared by the main arm and every other run of ours."""
    return {
        "window_steps": arguments.window,
        "skip_bad_lines": arguments.skip_bad_lines,
        "stall_factor": arguments.stall_factor,
        "prefill_tokens": arguments.prefill_tokens,
        "resamples": arguments.bootstrap,
        "seed": arguments.seed,
    }


def _check_from_sums(arguments: argparse.Namespace) -> None:
    if arguments.logs:
        raise InputError(
            f"--from-sums folds the hosts' sums files, and {arguments.logs[0]} is a step log: "
            "fold one or the other (the sums files hold their logs' steps already)"
        )
    for flag, given, why in (
        ("--follow", arguments.follow, "a sums file does not grow"),
        (
            "--trace",
            arguments.trace,
            "the timeline draws the logs' lines, which stayed on the hosts",
        ),
        ("--skip-bad-lines", arguments.skip_bad_lines, "each host's fold read its own log"),
    ):
        if given:
            raise InputError(f"{flag} does not go with --from-sums: {why}")


def _fold_once(arm, arguments: argparse.Namespace, stderr: Console) -> Document:
    from fold.api import fold_acceptance
    from fold.inputs.reader import expand_log_paths

    if arguments.from_sums:
        from fold.api import fold_from_sums

        options = fold_options(arguments)
        del options["skip_bad_lines"]
        return fold_from_sums(
            arm,
            arguments.from_sums,
            predicate=arguments.warm,
            sums=arguments.sums is not None,
            **options,
        )

    progress = ProgressBar(expand_log_paths(arguments.logs), stderr, arguments.quiet)
    try:
        return fold_acceptance(
            arm,
            arguments.logs,
            predicate=arguments.warm,
            progress=progress.advance,
            sums=arguments.sums is not None,
            **fold_options(arguments),
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
        sums=arguments.sums is not None,
    )
    with Live(console=stderr, refresh_per_second=4, transient=True) as live:
        outcome = run_follow(
            follower,
            on_view=lambda view: live.update(live_view(view.to_json())),
            idle_seconds=arguments.idle,
        )
    return outcome.result
