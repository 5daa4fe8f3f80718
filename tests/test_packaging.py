"""A non-editable install (the README's first command) carries every module of the package.

Editable installs read the source tree, so the rest of the suite cannot see a module that the
package configuration leaves out; this builds the pure-Python part as `pip install .` does.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_an_install_carries_every_module(tmp_path: Path) -> None:
    # A copy without the egg-info an editable install leaves: setuptools would otherwise take
    # the file list from it and hide a package the configuration forgets.
    source, built_to = tmp_path / "source", tmp_path / "built"
    for name in ("pyproject.toml", "setup.py", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "fold", source / "fold", ignore=shutil.ignore_patterns("*.so"))
    completed = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(built_to)],
        cwd=source,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    in_tree = {path.relative_to(ROOT) for path in (ROOT / "fold").rglob("*.py")}
    built = {path.relative_to(built_to) for path in (built_to / "fold").rglob("*.py")}
    assert in_tree, "no modules found under fold/"
    assert in_tree - built == set(), "left out of an install"
