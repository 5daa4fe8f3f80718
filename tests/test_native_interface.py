"""An extension built from other sources (an editable install not built again) is not called:
the command says so and folds with the polars reader, and the fold is the same."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from fold import _native  # fails here when the extension was not built
from fold.cli import main
from fold.folding import native
from fold.folding.extension import INTERFACE, interface_problem

FIXTURES = Path(__file__).parent.parent / "fixtures"
FOLD = [str(FIXTURES / "our-arm.json"), str(FIXTURES / "steps.jsonl"), "--json", "-"]


def test_the_built_extension_is_the_interface_these_sources_call():
    assert _native.INTERFACE == INTERFACE
    assert native.STALE is None and native.available()


@pytest.mark.parametrize(
    ("module", "found"),
    [
        (SimpleNamespace(INTERFACE=INTERFACE - 1, __file__="/x/_native.so"), "1"),
        (SimpleNamespace(__file__="/x/_native.so"), "None"),  # before the number existed
    ],
)
def test_an_extension_of_another_interface_is_named_with_what_to_do(module, found):
    problem = interface_problem(module)
    assert problem is not None
    assert problem.startswith("/x/_native.so was built from other sources")
    assert f"(interface {found}, these need {INTERFACE})" in problem
    assert "pip install -e ." in problem
    assert interface_problem(SimpleNamespace(INTERFACE=INTERFACE)) is None


def test_a_stale_extension_is_put_aside_when_the_reader_is_imported():
    """The check as it runs: a fold._native of another interface, in a fresh interpreter."""
    script = (
        "import sys, types\n"
        "stale = types.ModuleType('fold._native')\n"
        "stale.INTERFACE = 1\n"
        "sys.modules['fold._native'] = stale\n"
        "from fold.folding import native\n"
        "print(native.available(), native._native is None, native.STALE)\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert found.startswith("False True ")
    assert f"(interface 1, these need {INTERFACE})" in found


def test_the_command_says_so_and_the_polars_fold_is_the_same(monkeypatch, capsys):
    assert main(FOLD) == 0
    built = capsys.readouterr()
    assert "warning" not in built.err
    stale = SimpleNamespace(INTERFACE=1, __file__="/x/_native.so")
    monkeypatch.setattr(native, "_native", None)
    monkeypatch.setattr(native, "STALE", interface_problem(stale))
    assert main(FOLD) == 0
    polars = capsys.readouterr()
    assert polars.err.startswith("fold-acceptance: warning: /x/_native.so was built from other")
    assert orjson.loads(polars.out) == orjson.loads(built.out)
