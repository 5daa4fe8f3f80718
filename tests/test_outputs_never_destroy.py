"""What an output may never do: overwrite a file the run reads (the arm record, a step log, an
oracle's file, the ledger), write inside a folder the run reads, replace another output, or
replace what its path names when that is not a plain file (a symbolic link, a pipe); and what a
step log may not be (a pipe, which would read as empty). Each is refused before any work, exit 2,
and every file is left as it was."""

from __future__ import annotations

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


def test_two_outputs_may_not_name_one_file(inputs, tmp_path, capsys):
    out = tmp_path / "fold.out"
    argv = [str(inputs["arm"]), str(inputs["log"]), "--json", str(out), "--markdown", str(out)]
    assert main(argv) == 2
    assert "two outputs name the same file" in capsys.readouterr().err
    assert not out.exists()  # refused before the fold wrote anything


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
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()))
    reader.start()
    write_atomically(pipe, b'{"fold": 1}\n')
    reader.join(timeout=30)
    assert received == [b'{"fold": 1}\n']
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="Linux's /dev/full, always full")
def test_a_full_device_is_an_error_not_a_success():
    # Written in place, /dev/full reports the full disk; the old rename would have replaced it.
    with pytest.raises(InputError, match="/dev/full: cannot write: No space left on device"):
        write_atomically("/dev/full", b"x" * 100)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_step_log_from_a_pipe_is_refused_not_read_as_empty(tmp_path, capsys):
    pipe = tmp_path / "steps.pipe"
    os.mkfifo(pipe)
    assert main([str(ARM), str(pipe), "--quiet"]) == 2
    assert f"{pipe}: not a regular file (a pipe or a device)" in capsys.readouterr().err
    assert main([str(ARM), os.devnull, "--quiet"]) == 2
    assert "not a regular file" in capsys.readouterr().err


def _run(*arguments: str, **options) -> subprocess.CompletedProcess:
    code = "import sys; from fold.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *arguments], stderr=subprocess.PIPE, text=True, **options
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
