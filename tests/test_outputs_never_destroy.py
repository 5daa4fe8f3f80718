"""What an output may never do: overwrite a file the run reads (the arm record, a step log, an
oracle's file, the ledger), write inside a folder the run reads, replace another output, or
replace what its path names when that is not a plain file (a symbolic link, a pipe); and what a
step log may not be (a pipe, which would read as empty). Each is refused before any work, exit 2,
and every file is left as it was."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fold.cli import main
from fold.errors import InputError
from fold.folding.uncertainty import check_resamples
from fold.folding.warm import warm_mask
from fold.present.output import write_atomically

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "fixtures" / "our-arm.json"
STEPS = ROOT / "fixtures" / "steps.jsonl"
VLLM = ROOT / "fixtures" / "oracles" / "vllm-gate-arm.json"
OUTPUTS = ["--json", "--sums", "--markdown", "--html", "--trace", "--annotate"]


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    """Copies of the toy gate's arm record and log and of vLLM's arm, to be overwritten."""
    copies = {"arm": tmp_path / "arm.json", "log": tmp_path / "steps.jsonl"}
    copies["oracle"] = tmp_path / "vllm.json"
    for name, source in (("arm", ARM), ("log", STEPS), ("oracle", VLLM)):
        shutil.copyfile(source, copies[name])
    return copies


def unchanged(copies: dict[str, Path]) -> bool:
    sources = {"arm": ARM, "log": STEPS, "oracle": VLLM}
    return all(copies[name].read_bytes() == sources[name].read_bytes() for name in sources)


@pytest.mark.parametrize("flag", OUTPUTS)
@pytest.mark.parametrize(
    ("target", "what"),
    [("arm", "the arm record"), ("log", "a step log"), ("oracle", "the file of --vs vllm")],
)
def test_no_output_overwrites_an_input(inputs, capsys, flag, target, what):
    argv = [str(inputs["arm"]), str(inputs["log"]), "--vs", f"vllm={inputs['oracle']}"]
    assert main([*argv, flag, str(inputs[target]), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{flag} {inputs[target]}: it would overwrite {inputs[target]}, {what}" in err
    assert unchanged(inputs)


def test_an_input_named_through_a_link_is_still_refused(inputs, tmp_path, capsys):
    link = tmp_path / "link.json"
    link.symlink_to(inputs["arm"])
    assert main([str(inputs["arm"]), str(inputs["log"]), "--markdown", str(link)]) == 2
    assert "it would overwrite" in capsys.readouterr().err
    assert unchanged(inputs)


def test_two_outputs_may_not_name_one_file(inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "fold.out"
    (tmp_path / "sub").mkdir()
    for other in (str(out), "fold.out", "sub/../fold.out"):
        argv = [str(inputs["arm"]), str(inputs["log"]), "--json", str(out), "--markdown", other]
        assert main(argv) == 2
        assert "two outputs name the same file" in capsys.readouterr().err
        assert not out.exists()  # refused before the fold wrote anything


def test_outputs_to_devices_are_not_one_file_replacing_another(inputs, capsys):
    argv = [str(inputs["arm"]), str(inputs["log"]), "--json", os.devnull]
    assert main([*argv, "--markdown", os.devnull, "--quiet"]) == 0, capsys.readouterr().err
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_hard_link_to_an_input_is_the_input(inputs, tmp_path, capsys):
    hard = tmp_path / "hard.json"
    os.link(inputs["arm"], hard)
    assert main([str(inputs["arm"]), str(inputs["log"]), "--json", str(hard)]) == 2
    assert f"it would overwrite {inputs['arm']}, the arm record" in capsys.readouterr().err
    assert unchanged(inputs)


def test_a_folder_output_never_writes_over_an_input_or_another_output(inputs, tmp_path, capsys):
    charts = tmp_path / "charts"
    charts.mkdir()
    argv = [str(inputs["arm"]), str(inputs["log"]), "--plots", str(charts)]
    assert main([*argv, "--html", str(charts / "per-leg.svg")]) == 2
    assert f"--plots {charts}: it would write over" in capsys.readouterr().err
    drawn = tmp_path / "per-leg.svg"  # an input named as a chart, in the folder it is drawn in
    shutil.copyfile(inputs["arm"], drawn)
    assert main([str(drawn), str(inputs["log"]), "--plots", str(tmp_path)]) == 2
    assert "it would write over" in capsys.readouterr().err
    assert drawn.read_bytes() == ARM.read_bytes()
    ledger = tmp_path / "gates.duckdb"
    assert main([str(inputs["arm"]), str(inputs["log"]), "--ledger", str(ledger), "--quiet"]) == 0
    capsys.readouterr()
    exported = tmp_path / "exported"
    argv = ["ledger", str(ledger), "--export", str(exported)]
    assert main([*argv, "--json", str(exported / "runs.parquet")]) == 2
    assert f"--export {exported}: it would write over" in capsys.readouterr().err
    assert not exported.exists()


def test_the_ledger_is_never_an_output_of_its_own(inputs, tmp_path, capsys):
    ledger = tmp_path / "gates.duckdb"
    assert main([str(inputs["arm"]), str(inputs["log"]), "--ledger", str(ledger)]) == 0
    kept = ledger.read_bytes()
    capsys.readouterr()
    for flag in ("--json", "--markdown", "--html"):
        assert main(["ledger", str(ledger), flag, str(ledger)]) == 2
        assert f"it would overwrite {ledger}, the ledger" in capsys.readouterr().err
    # The fold's own outputs may not be the ledger it keeps the run in either.
    assert main([str(inputs["arm"]), str(inputs["log"]), "--ledger", str(ledger),
                 "--json", str(ledger)]) == 2  # fmt: skip
    assert ledger.read_bytes() == kept
    assert main(["ledger", str(ledger), "--json", "-"]) == 0  # still a ledger


def test_nothing_is_written_inside_a_folder_the_run_reads(inputs, tmp_path, capsys):
    folder = tmp_path / "gates"
    assert main([str(inputs["arm"]), str(inputs["log"]), "--ledger", f"{folder}/"]) == 0
    before = sorted(path.name for path in folder.iterdir())
    capsys.readouterr()
    argv = [str(inputs["arm"]), str(inputs["log"]), "--ledger", f"{folder}/"]
    assert main([*argv, "--json", str(folder / "fold.json")]) == 2
    assert "the ledger this run reads, and would change it" in capsys.readouterr().err
    assert main(["ledger", str(folder), "--export", str(folder)]) == 2
    assert sorted(path.name for path in folder.iterdir()) == before


def test_a_link_stays_a_link_and_its_file_is_written(tmp_path):
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_bytes(b"old")
    link.symlink_to(real)
    write_atomically(link, b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "made.json")
    write_atomically(dangling, b"made")
    assert dangling.is_symlink() and (tmp_path / "made.json").read_bytes() == b"made"


def test_a_pipe_is_written_in_place_not_replaced(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    try:
        write_atomically(pipe, b'{"fold": 1}\n')
        reader.join(timeout=30)
        assert received == [b'{"fold": 1}\n']
        assert stat.S_ISFIFO(os.stat(pipe).st_mode)
    finally:
        if reader.is_alive():  # a reader still waiting (the pipe was renamed over): free it
            with contextlib.suppress(OSError):
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))


def test_standard_output_named_as_a_file_keeps_what_the_shell_opened(tmp_path):
    """--json /dev/stdout with stdout appended to a file (>> history) adds to it: opened again
    by name, the file was truncated, or renamed over and the earlier lines lost."""
    history = tmp_path / "history.txt"
    history.write_text("an earlier line\n")
    with open(history, "ab") as appended:
        done = _run(str(ARM), str(STEPS), "--json", "/dev/stdout", "--quiet", stdout=appended)
    assert done.returncode == 0, done.stderr
    written = history.read_text()
    assert written.startswith("an earlier line\n{")
    assert "Acceptance per leg" in written  # the table after the document, in the same file


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="Linux's /dev/full, always full")
def test_a_full_device_is_an_error_not_a_success(tmp_path):
    # Written in place, a full device reports the full disk; renamed over, it was replaced
    # by a file. As root the test makes a node of its own, so that a regression replaces
    # that one and not the system's.
    full = "/dev/full"
    if os.geteuid() == 0:
        full = str(tmp_path / "full")
        os.mknod(full, stat.S_IFCHR | 0o666, os.stat("/dev/full").st_rdev)
    with pytest.raises(InputError, match="cannot write: No space left on device"):
        write_atomically(full, b"x" * 100)
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_a_name_too_long_is_an_error_not_a_bug(tmp_path, capsys):
    too_long = str(tmp_path / ("x" * 300))
    for flag in ("--json", "--sums", "--markdown"):
        assert main([str(ARM), str(STEPS), flag, too_long, "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "File name too long" in err and "this is a bug" not in err


@pytest.mark.parametrize("follow", [[], ["--follow", "--idle", "1"]], ids=["once", "follow"])
def test_a_step_log_from_a_pipe_is_refused_not_read_as_empty(tmp_path, follow):
    # In a process of its own with a time limit: read as a file, the pipe blocks its reader.
    pipe = tmp_path / "steps.pipe"
    os.mkfifo(pipe)
    for log in (str(pipe), os.devnull):
        done = _run(str(ARM), log, "--quiet", *follow, timeout=120)
        assert done.returncode == 2
        assert f"{log}: not a regular file (a pipe or a device)" in done.stderr


def _run(*arguments: str, **options) -> subprocess.CompletedProcess:
    code = "import sys; from fold.cli import main; sys.exit(main(sys.argv[1:]))"
    # Buffered as a user's shell has it: unbuffered, a full disk showed before the end.
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, "-c", code, *arguments],
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        **options,
    )


def test_a_closed_stdout_is_an_error_before_the_fold():
    done = _run(str(ARM), str(STEPS), preexec_fn=lambda: os.close(1))
    assert done.returncode == 2
    assert "standard output is closed" in done.stderr
    assert "this is a bug" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="Linux's /dev/full, always full")
@pytest.mark.parametrize("extra", [[], ["--json", "-"]], ids=["table", "json"])
def test_a_full_stdout_is_an_error_not_a_bug(extra):
    with open("/dev/full", "wb") as full:
        done = _run(str(ARM), str(STEPS), "--quiet", *extra, stdout=full)
    assert done.returncode == 2
    assert "cannot write to standard output: No space left on device" in done.stderr
    assert "this is a bug" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("count", ["100001", "2147483648", "99999999999999999999"])
def test_resamples_past_the_most_are_refused(capsys, count):
    assert main([str(ARM), str(STEPS), "--bootstrap", count, "--quiet"]) == 2
    assert "at most 100,000 resamples" in capsys.readouterr().err


def test_the_most_resamples_are_taken():
    assert check_resamples(100_000) == 100_000
    assert check_resamples(0) == 0


def test_a_constant_warm_predicate_holds_for_every_leg():
    import polars as pl

    legs = pl.DataFrame({"index": [0, 1, 2], "run": [1, 2, 3]})
    assert warm_mask(legs, "true").to_list() == [True, True, True]
    assert warm_mask(legs, "false").to_list() == [False, False, False]
    assert warm_mask(legs, "run > 1").to_list() == [False, True, True]


@pytest.mark.parametrize("flag", ["--html", "--plots", "--trace", "--annotate"])
def test_a_file_output_given_as_stdout_is_refused_not_written_to_a_file_named_dash(
    tmp_path, capsys, monkeypatch, flag
):
    monkeypatch.chdir(tmp_path)
    assert main([str(ARM), str(STEPS), flag, "-", "--quiet"]) == 2
    assert f"{flag} -: it writes a file" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()


def test_an_arm_from_a_pipe_for_vs_is_refused_not_read_as_empty(tmp_path):
    pipe = tmp_path / "vllm.pipe"
    os.mkfifo(pipe)
    done = _run(str(ARM), str(STEPS), "--vs", f"vllm={pipe}", "--quiet", timeout=120)
    assert done.returncode == 2
    assert f"{pipe} is not a regular file (a pipe or a device)" in done.stderr
