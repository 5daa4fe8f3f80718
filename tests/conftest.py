"""Session fixtures that build the C++ artifacts once, into a temporary directory.

g++ is required: a missing compiler fails these fixtures (and the tests using them), it does not
skip them. Every build uses the instrument's warning flags with ``-Werror``.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTRUMENT = ROOT / "instrument"
CPP = ROOT / "tests" / "cpp"

WARNINGS = ["-std=c++17", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
SANITIZE = {
    "plain": ["-O2", "-pthread"],
    "tsan": ["-O1", "-g", "-fsanitize=thread", "-pthread"],
    "asan": [
        "-O1",
        "-g",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
        "-pthread",
    ],
}


def compile_cxx(args: list[str], *, compiler: str = "g++") -> str:
    """Runs the compiler; fails the test with its output on error; returns its stderr."""
    exe = shutil.which(compiler)
    if exe is None:
        pytest.fail(f"{compiler} is required to build the C++ instrument tests and was not found")
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"{compiler} {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stderr


@pytest.fixture(scope="session")
def cpp_build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cpp-build")


@pytest.fixture(scope="session")
def instrument_lib(cpp_build_dir: Path) -> Path:
    """A shared library exporting the instrument's C API (dflash_step_log_* for ctypes)."""
    out = cpp_build_dir / "libdflash_step_log.so"
    source = CPP / "step_log_lib.cc"
    compile_cxx(
        [*WARNINGS, "-O2", "-fPIC", "-shared", f"-I{INSTRUMENT}", str(source), "-o", str(out)]
    )
    return out


@pytest.fixture(scope="session")
def toy_engine(cpp_build_dir: Path) -> Path:
    """The example engine, built with the command examples/README.md documents."""
    out = cpp_build_dir / "toy_engine"
    source = ROOT / "examples" / "toy_engine.cc"
    compile_cxx([*WARNINGS, "-O2", f"-I{INSTRUMENT}", str(source), "-o", str(out)])
    return out


@pytest.fixture(scope="session")
def step_log_drivers(cpp_build_dir: Path) -> dict[str, tuple[Path, str]]:
    """tests/cpp/step_log_driver.cc built plain, under TSan and under ASan+UBSan, in parallel.

    Maps the variant name to (binary, compiler stderr).
    """

    def build(variant: str) -> tuple[Path, str]:
        out = cpp_build_dir / f"step_log_driver-{variant}"
        args = [*WARNINGS, *SANITIZE[variant], f"-I{INSTRUMENT}", str(CPP / "step_log_driver.cc")]
        return out, compile_cxx([*args, "-o", str(out)])

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(SANITIZE, pool.map(build, SANITIZE), strict=True))


@pytest.fixture(autouse=True)
def every_document_is_valid(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every result document a test makes, by ``to_json()`` (the command's --json writes
    what it returns), is validated against the schema before the test sees it.

    A test marked ``timed_documents`` holds the command to a processor-time budget (the
    fuzzer's rules) over documents of tens of MB; validating those in Python would spend the
    budget on the suite's own check, so there the documents are left to the other tests."""
    if request.node.get_closest_marker("timed_documents"):
        return
    from document_schema import validate

    from fold.folding.document import Document

    built = Document.to_json

    @functools.wraps(built)  # keeps its docstring, which the API page check reads
    def validated(self: Document) -> dict:
        document = built(self)
        validate(document)
        return document

    monkeypatch.setattr(Document, "to_json", validated)
