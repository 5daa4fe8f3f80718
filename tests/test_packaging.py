"""A non-editable install (the README's first command) carries every module of the package.

Editable installs read the source tree, so the rest of the suite cannot see a module that the
package configuration leaves out; this builds the pure-Python part as `pip install .` does.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
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


def _copy_of_the_source(tmp_path: Path) -> Path:
    """The files a build reads, without the egg-info an editable install leaves."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "fold", source / "fold", ignore=shutil.ignore_patterns("*.so"))
    return source


def test_the_source_package_carries_the_extensions_headers(tmp_path: Path) -> None:
    """An install from the sdist compiles fold/_native.cc, which includes every header under
    fold/inputs/native_src: one left out makes the optional build fail and the fold fall back,
    silently, to its slower polars paths."""
    source = _copy_of_the_source(tmp_path)
    completed = subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "--formats", "tar", "--dist-dir", "dist"],
        cwd=source,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    (archive,) = (source / "dist").glob("*.tar")
    with tarfile.open(archive) as opened:
        packed = {Path(*Path(name).parts[1:]).as_posix() for name in opened.getnames()}
    needed = {"fold/_native.cc"} | {
        path.relative_to(ROOT).as_posix() for path in (ROOT / "fold").rglob("*.h")
    }
    assert len(needed) > 10
    assert needed - packed == set(), "left out of the source package"


def test_every_header_is_a_dependency_of_the_extension() -> None:
    """setup.py's ``depends``: a header it does not name is not rebuilt when edited (an
    in-place build keeps the stale extension)."""
    named = set(re.findall(r'"(fold/inputs/native_src/[^"]+\.h)"', (ROOT / "setup.py").read_text()))
    headers = {path.relative_to(ROOT).as_posix() for path in (ROOT / "fold").rglob("*.h")}
    assert headers and headers == named
