"""The type checker over ``fold/`` (``[tool.mypy]`` in pyproject.toml, docs/code.md "Types").

mypy runs as CI's "type check" stage does; planted modules show that the configuration
catches what it is there for: a value of one type passed where an annotation names another,
and an attribute read that the annotated type does not have (a ``Document`` handed to a
function annotated to take a ``FoldResult``, which then read the document's
``counter_check``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mypy(tmp_path: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "mypy",
            "--config-file", str(ROOT / "pyproject.toml"),
            "--cache-dir", str(tmp_path / "cache"),
            *targets,
        ],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_the_package_type_checks(tmp_path: Path) -> None:
    done = mypy(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


PLANTED = {
    "wrong_argument": (
        "from fold.compare.comparison import our_figures\n"
        "from fold.folding.document import Document\n"
        "def figures_of(document: Document) -> object:\n"
        "    return our_figures(document)\n",
        'Argument 1 to "our_figures" has incompatible type "Document"; expected "FoldResult"',
    ),
    "missing_attribute": (
        "from fold.folding.result import FoldResult\n"
        "def check_of(result: FoldResult) -> object:\n"
        "    return result.counter_check\n",
        '"FoldResult" has no attribute "counter_check"',
    ),
    "unchecked_body": (
        # a function without annotations is still checked inside (check_untyped_defs)
        "def total():\n    counts: list[int] = []\n    counts.append('3')\n    return counts\n",
        'Argument 1 to "append" of "list" has incompatible type "str"; expected "int"',
    ),
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_mistake_fails_the_check(tmp_path: Path, name: str) -> None:
    source, expected = PLANTED[name]
    planted = tmp_path / f"planted_{name}.py"
    planted.write_text(source)
    done = mypy(tmp_path, str(planted))
    assert done.returncode == 1, done.stdout + done.stderr
    assert expected in done.stdout
