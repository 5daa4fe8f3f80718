"""The command line: exit codes, JSON on stdout, the annotated copy, output when piped."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from document_schema import validate

from fold.cli import main

FIXTURES = Path(__file__).parent.parent / "fixtures"
ARM = str(FIXTURES / "our-arm.json")
STEPS = str(FIXTURES / "steps.jsonl")


def test_json_on_stdout_is_the_only_output(capsys):
    assert main([ARM, STEPS, "--json", "-"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert document["format"] == "fold-acceptance/5"
    contract_leg = {"index", "run", "warm", "steps", "proposed", "accepted", "accept_rate",
                    "mean_acceptance_length", "completion_tokens_per_step", "per_position",
                    "histogram"}  # fmt: skip
    contract_fold = {"legs", "steps", "proposed", "accepted", "accept_rate",
                     "mean_acceptance_length", "output_throughput_tok_s", "per_position",
                     "histogram"}  # fmt: skip
    assert contract_leg <= set(document["legs"][0])
    assert contract_fold <= set(document["warm"]) and contract_fold <= set(document["all"])
    for key in ("predicate", "unattributed_steps", "torn_lines", "lost_lines"):
        assert key in document
    warm = document["warm"]
    assert warm["accept_rate"] == warm["accepted"] / warm["proposed"]
    recorded = json.loads(Path(ARM).read_text())["metrics"]["output_throughput_tok_s"]
    assert math.isclose(warm["output_throughput_tok_s"], recorded, rel_tol=1e-9)


def test_exit_codes(tmp_path, capsys):
    assert main([ARM, str(tmp_path / "missing.jsonl")]) == 2
    assert "no such step log" in capsys.readouterr().err
    assert main([ARM, STEPS, "--warm", "run >= 1"]) == 1
    assert "refused" in capsys.readouterr().err
    assert main([ARM, STEPS, "--warm", "nonsense >"]) == 2
    # no step log: the toy gate's record carries no engine counters, so nothing to fold
    assert main([ARM]) == 1
    assert "no leg of the arm record carries the engine's counters" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main([])
    assert usage.value.code == 2


def test_annotate_writes_a_copy_and_leaves_the_input_alone(tmp_path, capsys):
    arm = tmp_path / "arm.json"
    shutil.copy(ARM, arm)
    before = arm.read_bytes()
    out = tmp_path / "annotated.json"
    assert main([str(arm), STEPS, "--annotate", str(out), "--json", str(tmp_path / "f.json")]) == 0
    assert arm.read_bytes() == before
    annotated = json.loads(out.read_text())
    fold = json.loads((tmp_path / "f.json").read_text())
    assert annotated["metrics"] == json.loads(before)["metrics"]
    for leg, figures in zip(annotated["legs"], fold["legs"], strict=True):
        assert leg["acceptance"]["accepted"] == figures["accepted"]
        assert leg["acceptance"]["per_position_of_proposed"] == figures["per_position_of_proposed"]
    assert annotated["acceptance"]["warm"]["accept_rate"] == fold["warm"]["accept_rate"]
    for name in ("per_position_conditional", "per_position_of_proposed"):
        assert annotated["acceptance"]["warm"][name] == fold["warm"][name] is not None
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]
    assert main([str(arm), STEPS, "--annotate", str(arm)]) == 2
    assert arm.read_bytes() == before


def test_piped_table_fits_80_columns_without_colour_codes():
    completed = subprocess.run(
        [sys.executable, "-m", "fold.cli", ARM, STEPS],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80", "TERM": "xterm-256color"},
        check=True,
    )
    assert "\x1b[" not in completed.stdout
    assert max(len(line) for line in completed.stdout.splitlines()) <= 80
    assert "Acceptance per leg" in completed.stdout and "warm" in completed.stdout


def test_follow_of_a_finished_log_equals_the_one_shot_fold(capsys):
    assert main([ARM, STEPS, "--json", "-"]) == 0
    once = orjson.loads(capsys.readouterr().out)
    assert main([ARM, STEPS, "--follow", "--idle", "0.3", "--json", "-"]) == 0
    followed = orjson.loads(capsys.readouterr().out)
    assert followed == once


def test_follow_picks_up_lines_appended_while_it_runs(tmp_path):
    steps = tmp_path / "steps.jsonl"
    lines = Path(STEPS).read_bytes().splitlines(keepends=True)
    steps.write_bytes(b"".join(lines[:10]) + lines[10][:25])  # a line still being written
    follower = subprocess.Popen(
        [sys.executable, "-m", "fold.cli", ARM, str(steps), "--follow", "--idle", "2",
         "--json", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        time.sleep(1.0)
        with steps.open("ab") as handle:
            handle.write(lines[10][25:])
            for line in lines[11:]:
                handle.write(line)
        out, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    validate(out)  # written by another process: the conftest hook does not see it
    followed = orjson.loads(out)
    assert main([ARM, str(steps), "--json", str(tmp_path / "once.json")]) == 0
    assert followed == orjson.loads((tmp_path / "once.json").read_bytes())
    assert followed["torn_lines"] == 0


def test_idle_without_follow_is_a_usage_error(capsys):
    assert main([ARM, STEPS, "--idle", "1"]) == 2
    assert "--idle goes with --follow" in capsys.readouterr().err


def test_a_gate_script_gets_the_commands_numbers_from_import_fold(capsys):
    import fold

    assert main([ARM, STEPS, "--json", "-"]) == 0
    from_command = orjson.loads(capsys.readouterr().out)
    from_library = fold.fold_acceptance(ARM, [STEPS]).to_json()
    assert orjson.loads(orjson.dumps(from_library)) == from_command


@pytest.mark.parametrize(
    ("terminal", "quiet", "seconds", "shown"),
    [(True, False, 2.0, True), (True, False, 0.5, False), (True, True, 2.0, False),
     (False, False, 2.0, False)],
)  # fmt: skip
def test_progress_bar_only_on_a_terminal_for_slow_folds(
    monkeypatch, terminal, quiet, seconds, shown
):
    import io

    from rich.console import Console

    from fold.command import progress

    clock = iter([0.0, seconds, seconds, seconds])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    output = io.StringIO()
    console = Console(file=output, force_terminal=terminal, width=80)
    bar = progress.ProgressBar([STEPS], console, quiet)
    bar.advance(1000)
    bar.stop()
    assert ("folding" in output.getvalue()) is shown


def _blas_threads_after(code: str, environment: dict[str, str]) -> str:
    """OPENBLAS_NUM_THREADS in a fresh interpreter once ``code`` has run."""
    probe = f"{code}\nimport os, sys\nprint(os.environ.get('OPENBLAS_NUM_THREADS'))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=environment, check=True
    )
    return done.stdout.strip()


def test_the_command_starts_one_blas_thread_and_the_library_leaves_the_process_alone():
    environment = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    # The command sets it before numpy loads (numpy is imported after, by the library, once
    # the command runs a fold) ...
    loaded_after = (
        "import contextlib, io, sys\nimport fold.cli\nassert 'numpy' not in sys.modules\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert fold.cli.main([{ARM!r}, {STEPS!r}, '--quiet']) == 0\n"
        "assert 'numpy' in sys.modules"
    )
    assert _blas_threads_after(loaded_after, environment) == "1"
    not_before = "import fold.command.process, sys\nassert 'numpy' not in sys.modules"
    assert _blas_threads_after(not_before, environment) == "1"
    # ... keeps what the user set ...
    assert (
        _blas_threads_after("import fold.cli", {**environment, "OPENBLAS_NUM_THREADS": "3"}) == "3"
    )
    # ... and a program importing the library keeps its own settings.
    assert _blas_threads_after("import fold, fold.api\nfold.fold_acceptance", environment) == "None"


def _held_then_kept(probe: list[str], environment: dict[str, str]) -> tuple[int, int]:
    """The MiB a probe (``python -c PROBE ARGS``) printed: held, then still kept after a free."""
    done = subprocess.run(
        [sys.executable, "-c", *probe], capture_output=True, text=True, env=environment, check=True
    )
    held, kept = map(int, done.stdout.split())
    return held, kept


_FREED_PAGES_PROBE = """
import fold.command.process
import polars as pl

def anonymous_mib():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024

before = anonymous_mib()
column = pl.int_range(0, 1 << 24, eager=True)  # 128 MiB, allocated by polars' jemalloc
held = anonymous_mib() - before
del column
print(held, anonymous_mib() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RssAnon from /proc")
def test_the_command_has_polars_hand_freed_pages_back_at_once():
    environment = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}

    def held_then_kept(extra: dict[str, str]) -> tuple[int, int]:
        return _held_then_kept([_FREED_PAGES_PROBE], {**environment, **extra})

    # The command's setting: the column's 128 MiB are gone as soon as it is dropped (jemalloc
    # purges in the free itself, so no timing is involved) ...
    held, kept = held_then_kept({})
    assert held >= 120 and kept <= 8
    # ... and a value the user set is kept: here one that never hands pages back.
    held, kept = held_then_kept({"_RJEM_MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"})
    assert held >= 120 and kept >= 120

    # A program importing the library keeps its allocator as polars alone would set it up.
    def setting_after(code: str) -> str:
        probe = f"{code}\nimport os\nprint(os.environ.get('_RJEM_MALLOC_CONF'))"
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=environment,
            check=True,
        )  # fmt: skip
        return done.stdout.strip()

    library = setting_after("import fold, fold.api\nfold.fold_acceptance")
    assert library == setting_after("import polars")
    assert library != "dirty_decay_ms:0,muzzy_decay_ms:0"


def test_a_long_trailing_run_of_one_value_prints_as_one_cell():
    from fold.present.table import position_cells

    assert position_cells(["88.0%", "64.0%", "0.0%"]) == "0:88.0%  1:64.0%  2:0.0%"
    assert position_cells(["5", "0", "0", "0"]) == "0:5  1:0  2:0  3:0"
    assert position_cells(["5", "0", "0", "0", "0"]) == "0:5  1..4:0"
    # one step of the largest proposal FORMAT.md allows: not 65,536 cells
    assert position_cells(["1", *(["0"] * 65_536)]) == "0:1  1..65536:0"
    assert position_cells([]) == ""


_GLIBC_PAGES_PROBE = """
import sys
if sys.argv[1] == "command":
    import fold.command.process
import numpy as np

def anonymous_mib():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024

np.ones(3 << 20)  # 24 MiB, mapped and unmapped: glibc's own threshold then rises past 8 MiB
before = anonymous_mib()
arrays = [np.ones(1 << 20) for _ in range(10)]  # 10 arrays of 8 MiB
held = anonymous_mib() - before
del arrays[:-1]  # the last stays, above the others wherever glibc put them
print(held, anonymous_mib() - before)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/self/status").exists(),
    reason="glibc's threshold, RssAnon from /proc",
)
def test_the_command_has_glibc_hand_freed_arrays_back_and_the_library_does_not():
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}

    def held_then_kept(who: str, extra: dict[str, str]) -> tuple[int, int]:
        return _held_then_kept([_GLIBC_PAGES_PROBE, who], {**environment, **extra})

    # The command's setting: 9 of the 10 arrays freed are 9 x 8 MiB handed back ...
    held, kept = held_then_kept("command", {})
    assert held >= 78 and kept <= 12
    # ... where a program importing the library keeps glibc's own ways (all 80 MiB kept) ...
    held, kept = held_then_kept("library", {})
    assert held >= 78 and kept >= 78
    # ... and so does the command when the user set glibc's threshold.
    held, kept = held_then_kept("command", {"MALLOC_MMAP_THRESHOLD_": str(32 << 20)})
    assert held >= 78 and kept >= 78
