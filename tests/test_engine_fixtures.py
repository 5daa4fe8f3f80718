"""The engines the opt-in suites run come from the shared fixtures of ``tests/conftest.py``
alone, so that no test depends on another having made them first (docs/suites.md).

A test module that builds llama.cpp, installs vLLM, trains or writes a tiny model itself, or
looks for one under the cache, works only after whatever made it there; the check reads the
test modules' code (never runs the engines) and fails on any of those.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from conftest import example

TESTS = Path(__file__).resolve().parent
MAKERS = {"ensure_built", "ensure_installed", "ensure_model", "make_models"}
"""The example scripts' functions that make an engine or a model when it is missing."""
MAKER_SCRIPTS = ("make_model.py", "make_models.py", "install.py", "build.py")
CACHE_WORDS = (".cache", "XDG_CACHE_HOME", "fold-acceptance/vllm", "fold-acceptance/llamacpp")


def engine_makings(source: str) -> list[str]:
    """Where a module makes or looks up an engine itself, one line each."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            if name in MAKERS:
                found.append(f"line {node.lineno}: calls {name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for word in (*MAKER_SCRIPTS, *CACHE_WORDS):
                if word in node.value and not _is_docstring_like(node.value):
                    found.append(f"line {node.lineno}: names {word!r}")
    return found


def _is_docstring_like(text: str) -> bool:
    # Prose mentioning a script (a docstring, a message) is not a use of it; a path or a
    # command argument is a single token.
    return " " in text.strip()


def suite_modules() -> list[Path]:
    return sorted(path for path in TESTS.glob("test_*.py") if path.name != Path(__file__).name)


@pytest.mark.parametrize("path", suite_modules(), ids=lambda path: path.name)
def test_no_test_module_makes_or_finds_an_engine_itself(path: Path):
    assert engine_makings(path.read_text()) == []


@pytest.mark.parametrize(
    ("planted", "said"),
    [
        ("bins = build.ensure_built()\n", "calls ensure_built"),
        ("python = install.ensure_installed()\n", "calls ensure_installed"),
        ("make_models(directory)\n", "calls make_models"),
        ("subprocess.run([python, str(EXAMPLE / 'make_model.py')])\n", "names 'make_model.py'"),
        (
            "VLLM = Path.home() / '.cache' / 'fold-acceptance' / 'vllm'\n",
            "names '.cache'",
        ),
    ],
)
def test_a_planted_engine_of_its_own_is_caught(planted: str, said: str):
    assert any(said in problem for problem in engine_makings(planted))


def test_the_caches_follow_xdg_cache_home(tmp_path, monkeypatch):
    """What the fixtures make goes where ``XDG_CACHE_HOME`` says: a run from empty caches
    needs only an empty directory there (docs/suites.md), never deleting the real ones."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "path", list(sys.path))
    roots = {
        "llamacpp": example("llamacpp", "build").cache_root(),
        "vllm": example("vllm", "install").cache_root(),
        "vllm-models": example("vllm", "make_model").cache_root(),
    }
    assert roots == {name: tmp_path / "fold-acceptance" / name for name in roots}
