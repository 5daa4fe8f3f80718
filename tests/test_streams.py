"""The exit status is the command's own whatever happens to its streams (docs/checks.md, "Exit
codes"), and an error is blamed on standard output only when writing there failed."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import fold.command.run
from fold.cli import main
from fold.command.streams import QuietStderr

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "fixtures" / "our-arm.json"
STEPS = ROOT / "fixtures" / "steps.jsonl"
FULL = "/dev/full"

needs_full = pytest.mark.skipif(not os.path.exists(FULL), reason="Linux's /dev/full")


def _run(*arguments: str, stdout, stderr) -> subprocess.CompletedProcess:
    code = "import sys; from fold.cli import main; sys.exit(main(sys.argv[1:]))"
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, "-c", code, *arguments],
        stdout=stdout,
        stderr=stderr,
        env=environment,
        timeout=300,
    )


def _refused_log(tmp_path: Path) -> Path:
    """The fixture's log with one line accepting more than it proposed: refused, exit 1."""
    lines = STEPS.read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace('"accepted":', '"accepted":9', 1)
    path = tmp_path / "refused.jsonl"
    path.write_text("".join(lines))
    return path


@needs_full
def test_a_full_stderr_leaves_each_exit_status_as_documented(tmp_path):
    cases = [
        ([str(ARM), str(STEPS), "--quiet"], 0),
        ([str(ARM), str(tmp_path / "missing.jsonl"), "--quiet"], 2),
        ([str(ARM), str(_refused_log(tmp_path)), "--quiet"], 1),
        (["--no-such-flag"], 2),
    ]
    for arguments, status in cases:
        with open(FULL, "w") as full:
            done = _run(*arguments, stdout=subprocess.PIPE, stderr=full)
        assert done.returncode == status, arguments
    # the answer itself still reaches standard output
    with open(FULL, "w") as full:
        done = _run(str(ARM), str(STEPS), "--quiet", stdout=subprocess.PIPE, stderr=full)
    assert b"warm" in done.stdout and b"1+A/S" in done.stdout


@needs_full
def test_both_streams_full_is_a_usage_error_not_a_refusal():
    with open(FULL, "w") as out, open(FULL, "w") as err:
        done = _run(str(ARM), str(STEPS), "--quiet", stdout=out, stderr=err)
    assert done.returncode == 2


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (OSError(errno.EIO, "Input/output error"), "error: Input/output error: the system"),
        (
            OSError(errno.EIO, "Input/output error", "/data/steps.jsonl"),
            "error: /data/steps.jsonl: Input/output error: the system",
        ),
        (OSError(errno.ENOSPC, "No space left on device"), "No space left on device: the"),
    ],
)
def test_a_failed_read_or_write_elsewhere_is_not_blamed_on_standard_output(
    monkeypatch, capsys, raised, said
):
    def failing(*_arguments):
        raise raised

    monkeypatch.setattr(fold.command.run, "run_fold", failing)
    assert main([str(ARM), str(STEPS), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert said in err
    assert "standard output" not in err
    assert "this is a bug" not in err and "Traceback" not in err


def test_the_quiet_stderr_keeps_the_stream_s_encoding_for_rich():
    """rich draws its bar and tables in ASCII where the stream's encoding asks for it; the
    wrapper must say the stream's encoding, not rich's default."""
    ascii_stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    console = Console(file=QuietStderr(ascii_stream), force_terminal=True, width=40)  # type: ignore[arg-type]
    assert console.encoding == "ascii"
    console.print("x")  # rich's own encode check would raise on a box character it chose
    assert QuietStderr(None).encoding == "utf-8"
