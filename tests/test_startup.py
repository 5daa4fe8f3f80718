"""What the command loads before it works: ``--help`` and a usage error load none of the
library, and a plain fold loads no comparison, chart, ledger or follower
(docs/performance.md, "Start-up"; its times are in ``benchmarks/startup.py``, not here).

Each case runs the command's entry point in a fresh interpreter and reads the modules it
loaded; a planted import shows the check fails when one comes back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = [str(ROOT / "fixtures" / "our-arm.json"), str(ROOT / "fixtures" / "steps.jsonl")]

# The command as its console script runs it, then every module the process holds.
PROBE = """
import json, sys
{plant}
from fold.cli import main
try:
    status = main(json.loads(sys.argv[1]))
except SystemExit as done:
    status = done.code
sys.stdout.flush()
print("\\nMODULES " + json.dumps({{"status": status, "modules": sorted(sys.modules)}}))
"""

OUTSIDE = ("numpy", "polars", "rich", "matplotlib", "duckdb", "orjson", "pyarrow", "pandas")
HELP_MODULES = {
    "fold",
    "fold.cli",
    "fold.command",
    "fold.command.process",
    "fold.command.streams",
    "fold.errors",
    "fold.inputs",
    "fold.inputs.acceptance",
    "fold.inputs.defaults",
}
"""All of ours that ``--help`` may load: the command, its process setup and its streams (the
standard library only), the errors and the two modules that hold the options' defaults
(neither imports anything)."""

NOT_FOR_A_PLAIN_FOLD = (
    "matplotlib",
    "duckdb",
    "numpy.ma",  # 20 ms: numpy.quantile and a polars Series made from numpy import it
    "fold.compare",  # the comparison and the matched settings: --vs, --matched
    "fold.inputs.oracles",  # the oracles' readers: --vs
    "fold.folding.follow",  # --follow
    "fold.folding.provisional",
    "fold.folding.timeline_lines",  # --trace
    "fold.ledger",  # --ledger
    "fold.command.ledger",
    "fold.present.comparison",
    "fold.present.page",  # --html, --plots
    "fold.present.charts",
    "fold.present.markdown",  # --markdown
    "fold.present.timeline",
    "fold.present.live",
)


def loaded(arguments: list[str], plant: str = "") -> tuple[int, list[str]]:
    """The command's exit status and the modules its process loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(plant=plant), json.dumps(arguments)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    marker = done.stdout.rfind("\nMODULES ")
    assert marker >= 0, done.stderr[-3000:]
    found = json.loads(done.stdout[marker + len("\nMODULES ") :])
    return found["status"], found["modules"]


def outside_packages(modules: list[str]) -> set[str]:
    return {name.split(".")[0] for name in modules} & set(OUTSIDE)


def ours(modules: list[str]) -> set[str]:
    return {name for name in modules if name == "fold" or name.startswith("fold.")}


def needless_for_a_fold(modules: list[str]) -> set[str]:
    return {
        name
        for name in modules
        for unused in NOT_FOR_A_PLAIN_FOLD
        if name == unused or name.startswith(unused + ".")
    }


@pytest.mark.parametrize(
    "arguments",
    [["--help"], ["--bootstrap", "many", "arm.json"]],
    ids=["help", "usage error"],
)
def test_help_and_a_usage_error_load_none_of_the_library(arguments):
    status, modules = loaded(arguments)
    assert status == (0 if "--help" in arguments else 2)
    assert outside_packages(modules) == set()
    assert ours(modules) == HELP_MODULES


def test_a_plain_fold_loads_what_it_uses_and_nothing_else():
    status, modules = loaded([*FIXTURE, "--quiet"])
    assert status == 0
    assert outside_packages(modules) == {"numpy", "polars", "rich", "orjson"}
    assert needless_for_a_fold(modules) == set()


def test_an_option_loads_its_part_when_given(tmp_path):
    oracle = ROOT / "fixtures" / "oracles" / "vllm-gate-arm.json"
    status, modules = loaded([*FIXTURE, "--quiet", "--vs", f"vllm={oracle}"])
    assert status == 0
    assert {"fold.compare.comparison", "fold.present.comparison"} <= set(modules)
    status, modules = loaded([*FIXTURE, "--quiet", "--markdown", str(tmp_path / "fold.md")])
    assert status == 0
    assert "fold.present.markdown" in modules


@pytest.mark.parametrize(
    ("plant", "arguments", "caught"),
    [
        ("import polars", ["--help"], lambda modules: outside_packages(modules) == {"polars"}),
        (
            "import fold.compare.gap",
            ["--help"],
            lambda modules: "fold.compare.gap" in ours(modules) - HELP_MODULES,
        ),
        (
            "import fold.present.page",
            [*FIXTURE, "--quiet"],
            lambda modules: "fold.present.page" in needless_for_a_fold(modules),
        ),
    ],
    ids=["a package under --help", "a module of ours under --help", "a presenter in a fold"],
)
def test_a_planted_import_is_caught(plant, arguments, caught):
    _, modules = loaded(arguments, plant=plant)
    assert caught(modules)


@pytest.mark.parametrize(("call", "frozen"), [("main()", True), ("main(sys.argv[1:])", False)])
def test_only_the_commands_own_process_freezes_its_objects_at_the_end(call, frozen):
    """The console script calls main() with no arguments and exits: its objects are frozen so
    the interpreter's exit skips a collection over them. A caller passing arguments (the
    suite, a script) keeps its collector untouched."""
    code = (
        "import gc, io, sys, contextlib\n"
        "from fold.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    status = {call}\n"
        "print(status, gc.get_freeze_count() > 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *FIXTURE, "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.stdout.split() == ["0", str(frozen)], done.stderr[-2000:]
